#!/bin/sh
# Code size and worst-case stack of libspattn.a for one target, as Markdown
# rows: target | op | text | data | bss | phase-1 stack | phase-2 stack.
# The ops are the archive's spa_<op>_get_workspace_size entry points; an
# object belongs to the op whose name is its longest prefix (nsa_compress_grad_f16.o
# to nsa_compress_grad, nsa_compress_plan.o to nsa_compress), anything else
# to "core" (tensors, workspace, executor, runner hand-off). Stack bytes come
# from tools/stack.awk over GCC's call-graph files; "n/a" without them (clang).
# The compiler-runtime helpers the call graphs name without a frame (the
# 64-bit division of 32-bit Arm) count with the stack tools/helper_stack.sh
# reads off the target's libgcc.a ("CC CFLAGS", the optional 7th argument).
#   tools/size.sh TARGET LIB OBJDIR SIZE NM "DTYPES" ["CC CFLAGS"]
set -eu
target=$1 lib=$2 objdir=$3 size=$4 nm=$5 dtypes=$6 cc=${7:-}
here=$(dirname "$0")
ops=$($nm -g --defined-only "$lib" | awk '$2 == "T" && $3 ~ /^spa_.*_get_workspace_size$/ {
    s = $3; sub(/^spa_/, "", s); sub(/_get_workspace_size$/, "", s); print s }' | sort -u | tr '\n' ' ')
cis=$(find "$objdir" -name '*.ci' 2>/dev/null | sort)
# Every library object needs its call graph, or a chain would be cut short.
for o in $(find "$objdir/src" "$objdir/gen" -name '*.o' 2>/dev/null); do
    [ -f "${o%.o}.ci" ] || cis=""
done
if [ -n "$cis" ]; then
    # the callees without a frame of their own: compiler-runtime and C library functions
    names=$(cat $cis | sed -n 's/.*targetname: "\(__[a-z0-9_]*\|mem[a-z]*\|[a-z]*f\|exp\|sqrt\|log\)".*/\1/p' |
        grep -v '^__indirect_call$' | sort -u | tr '\n' ' ')
    helpers=""
    if [ -n "$names" ] && [ -n "$cc" ]; then
        helpers=$("$here/helper_stack.sh" "$cc" $names)
    fi
    stack=$(awk -v ops="$ops" -v dtypes="$dtypes" -v helpers="$helpers" -f "$here/stack.awk" $cis)
else
    stack=""
fi
$size "$lib" | awk -v ops="$ops" -v target="$target" -v stack="$stack" '
BEGIN {
    n = split(ops, op, " ")
    m = split(stack, line, "\n")
    for (i = 1; i <= m; i++) { split(line[i], f, " "); s1[f[1]] = f[2]; s2[f[1]] = f[3] }
}
NR > 1 {
    obj = $6; sub(/\.o$/, "", obj)
    best = "core"; bl = 0
    for (i = 1; i <= n; i++)
        if (index(obj, op[i]) == 1 && length(op[i]) > bl) { best = op[i]; bl = length(op[i]) }
    text[best] += $1; data[best] += $2; bss[best] += $3
    tt += $1; td += $2; tb += $3
}
END {
    for (i = 1; i <= n; i++)
        printf "| %s | %s | %d | %d | %d | %s | %s |\n", target, op[i], text[op[i]], data[op[i]], bss[op[i]],
            (op[i] in s1) ? s1[op[i]] : "n/a", (op[i] in s2) ? s2[op[i]] : "n/a"
    printf "| %s | core | %d | %d | %d | | |\n", target, text["core"], data["core"], bss["core"]
    printf "| %s | **libspattn.a** | %d | %d | %d | | |\n", target, tt, td, tb
}'
