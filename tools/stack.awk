# Worst-case stack of each op's phase 1 and phase 2, from GCC's
# -fcallgraph-info=su files (one per object): the frame of the entry point
# plus the deepest chain of frames below it.
#   awk -v ops="nsa_compress ..." -v dtypes="f32 f16 bf16" -f tools/stack.awk $(B)/obj/**/*.ci
# Indirect calls (the runner calling a phase's task, a task calling its
# generated kernel) are resolved to every candidate: the functions of the
# entry's file that nothing calls directly (its tasks) and the op's kernels
# spa_k_<op>_<dt>_*. Runner and libc frames are the caller's and not counted
# (memcpy/memset are compiler builtins here); a compiler-runtime helper
# (__aeabi_ldivmod, ...) counts as the -v helpers list gives it. Prints "op
# phase1 phase2" in bytes; "?" where a frame is dynamic, the graph recurses
# or a helper's stack is not in the list.
BEGIN {  # helpers="name:bytes ...": the stack of the compiler-runtime helpers
    nh = split(helpers, hs, " ")
    for (i = 1; i <= nh; i++) { split(hs[i], kv, ":"); helper[kv[1]] = kv[2] + 0 }
    helpers_given = helpers != ""
    # ops that run another op's kernels through a pointer
    kernel_op["nsa_compress_with_cache"] = "nsa_compress"
}
/^graph: \{ title: / {
    file = $0; sub(/^graph: \{ title: "/, "", file); sub(/".*$/, "", file)
}
/^node: / {
    title = $0; sub(/^node: \{ title: "/, "", title); sub(/".*$/, "", title)
    if (match($0, /[0-9]+ bytes \([a-z,]+\)/)) {
        s = substr($0, RSTART, RLENGTH); n = s + 0
        frame[title] = n
        if (s ~ /dynamic/ && s !~ /bounded/) dynamic[title] = 1
        file_of[title] = file
        defined[title] = 1
    }
}
/^edge: / {
    src = $0; sub(/^.*sourcename: "/, "", src); sub(/".*$/, "", src)
    dst = $0; sub(/^.*targetname: "/, "", dst); sub(/".*$/, "", dst)
    key = src SUBSEP dst
    if (!(key in seen_edge)) { seen_edge[key] = 1; ncallee[src]++; callee[src, ncallee[src]] = dst }
    if (dst != "__indirect_call") called[dst] = 1
}
function kernel_of(f, op,   n, i, dt, k) {
    k = (op in kernel_op) ? kernel_op[op] : op
    n = split(dtypes, dt, " ")
    for (i = 1; i <= n; i++)
        if (index(f, "spa_k_" k "_" dt[i] "_") == 1) return 1
    return 0
}
# deepest chain below f (frame included); -1 if unbounded
function worst(f, op, entry_file,   i, c, w, best, g) {
    if (f in onstack) return -1
    if (f in dynamic) return -1
    if ((f SUBSEP op) in memo) return memo[f SUBSEP op]
    onstack[f] = 1
    best = 0
    for (i = 1; i <= ncallee[f]; i++) {
        c = callee[f, i]
        if (c == "__indirect_call") {
            for (g in defined) {
                if (g in onstack) continue  # a task does not call itself back
                if ((file_of[g] == entry_file && !(g in called) && g !~ /^spa_/) || kernel_of(g, op)) {
                    w = worst(g, op, entry_file)
                    if (w < 0) { delete onstack[f]; return -1 }
                    if (w > best) best = w
                }
            }
        } else if (c in defined) {
            w = worst(c, op, entry_file)
            if (w < 0) { delete onstack[f]; return -1 }
            if (w > best) best = w
        } else if (c in helper) {  # a compiler-runtime helper (tools/helper_stack.sh)
            if (helper[c] > best) best = helper[c]
        } else if (c ~ /^__/ && c != "__indirect_call" && helpers_given) {
            delete onstack[f]; return -1  # a helper whose stack is not known
        }
    }
    delete onstack[f]
    memo[f SUBSEP op] = frame[f] + best
    return frame[f] + best
}
END {
    n = split(ops, op, " ")
    for (i = 1; i <= n; i++) {
        p1 = "spa_" op[i] "_get_workspace_size"; p2 = "spa_" op[i]
        a = (p1 in defined) ? worst(p1, op[i], file_of[p1]) : "-"
        b = (p2 in defined) ? worst(p2, op[i], file_of[p2]) : "-"
        if (a == -1) a = "?"
        if (b == -1) b = "?"
        print op[i], a, b
    }
}
