# make stackpaint: the static bounds (tools/size.sh's rows: | target | op |
# text | data | bss | phase-1 stack | phase-2 stack |) against the painted
# depths ("stackpaint: spa_<op>[_get_workspace_size[_for]] <bytes>" lines of
# the run); fails where a painted depth exceeds its static bound, or a phase
# 2 reaches lim, or an op of the archive was never painted. Phase 2 runs its
# blocks through the caller's runner, whose frame the static bound leaves to
# the caller (tools/stack.awk): the painted depth of a phase 2 may exceed
# its bound by the suites' runner frame, `runner` bytes (tests/core/util.c,
# run_permuted: 32 on the Cortex-M targets).
#   awk -v target=T -v lim=BYTES -v runner=BYTES -f tools/stack_paint.awk static.md run.log
FNR == NR {
    if ($0 ~ /^\|/ && split($0, f, "|") >= 8) {
        op = f[3]; gsub(/ /, "", op)
        if (op == "op" || op ~ /core|libspattn|^-+$/ || op == "") next
        s1[op] = f[7] + 0; s2[op] = f[8] + 0; ops[++n] = op
    }
    next
}
/^stackpaint: spa_/ {
    name = $2; sub(/^spa_/, "", name); depth = $3 + 0
    phase = 2
    if (name ~ /_get_workspace_size(_for)?$/) { phase = 1; sub(/_get_workspace_size(_for)?$/, "", name) }
    if (phase == 1 && depth > p1[name]) p1[name] = depth
    if (phase == 2 && depth > p2[name]) p2[name] = depth
}
END {
    print "| target | op | phase-1 static | phase-1 painted | phase-2 static | phase-2 painted |"
    print "|---|---|---:|---:|---:|---:|"
    bad = 0
    for (i = 1; i <= n; i++) {
        op = ops[i]
        printf "| %s | %s | %d | %d | %d | %d |\n", target, op, s1[op], p1[op], s2[op], p2[op]
        if (!(op in p1) || !(op in p2)) { print "stackpaint: " op " was not painted in both phases"; bad = 1 }
        if (p1[op] > s1[op] || p2[op] > s2[op] + runner) { print "stackpaint: " op " used more stack than its static bound"; bad = 1 }
        if (p2[op] >= lim) { print "stackpaint: " op " phase 2 reached " lim " bytes"; bad = 1 }
    }
    if (!bad) print "stackpaint: " n " ops, every painted depth within its static bound (phase 2: plus the runner's " runner " bytes), phase 2 under " lim " bytes"
    exit bad
}
