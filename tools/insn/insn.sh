#!/bin/sh
# make insn: executed instructions of one call of every op and dtype under
# qemu with the insncount plugin, as (two calls) - (one call).
#   tools/insn/insn.sh "<run command>" <plugin.so> <program> <isa> "<ops>" "<dtypes>"
set -eu
run=$1 plugin=$2 prog=$3 isa=$4 ops=$5 dtypes=$6
count() { # op dt calls -> total instructions
    $run -plugin "$plugin" "$prog" "$1" "$2" "$3" 2>&1 >/dev/null | sed -n 's/^insncount total=\([0-9]*\).*/\1/p'
}
for op in $ops; do
    for dt in $dtypes; do
        flops=$($run "$prog" "$op" "$dt" 1 | sed -n 's/.* flops=\([0-9]*\)$/\1/p')
        one=$(count "$op" "$dt" 1)
        two=$(count "$op" "$dt" 2)
        [ -n "$one" ] && [ -n "$two" ] && [ -n "$flops" ] || { echo "insn: $op $dt: no count"; exit 1; }
        awk -v op="$op" -v dt="$dt" -v isa="$isa" -v a="$one" -v b="$two" -v f="$flops" 'BEGIN {
            n = b - a; printf "insn op=%s dtype=%s shape=insn isa=%s instructions=%.0f per_flop=%.3f\n", op, dt, isa, n, n / f }'
    done
done
