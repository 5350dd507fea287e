#!/bin/sh
# make insn: executed instructions of one call of every op and dtype under
# qemu with the insncount plugin, as (two calls) - (one call).
#   tools/insn/insn.sh "<run command>" <plugin.so> <program> <isa> "<ops>" "<dtypes>" [limits]
# limits: a file of "op dtype max_per_flop" lines (tools/insn/<isa>.limits); a
# count above its limit is reported and fails the run, after every count.
# The run command is the target's RUN: qemu-user (arguments follow the
# program), or qemu-system-* ending in -kernel (a semihosting image: its
# arguments go through -append).
set -eu
run=$1 plugin=$2 prog=$3 isa=$4 ops=$5 dtypes=$6 limits=${7:-}
over=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# INSN_COUNT_BY=trace (a qemu-user built without plugins): qemu logs each
# translation block once as translated (-d in_asm: its instructions) and
# again each time it runs (-d exec, with nochain so that no block runs
# unlogged); the total is the sum over runs of the block's length. It agrees
# with the plugin's count to a few instructions in millions (blocks left
# early by a trap), and the difference of two runs cancels qemu's start-up.
trace_total() {
    awk 'function pc(s) { sub(/^(0x)?0*/, "", s); return s }
        /^IN:/ { blk = 1; n = 0; at = ""; next }
        blk && /^0x[0-9a-f]+:/ { if (at == "") at = pc(substr($1, 1, length($1) - 1)); n++; next }
        blk && /^$/ { if (at != "") len[at] = n; blk = 0; next }
        /^Trace / { split($0, f, "/"); total += len[pc(f[2])]; next }
        END { printf "insncount total=%d\n", total }'
}
count() { # op dt calls -> the program's line, then insncount's
    case ${INSN_COUNT_BY:-}:$run in
    trace:*) { $run -d in_asm,exec,nochain -D /dev/stderr "$prog" "$1" "$2" "$3" 2>&1 1>&3 | trace_total; } 3>&1 ;;
    *:*qemu-system-*) $run "$prog" -plugin "$plugin" -append "$1 $2 $3" 2>&1 ;;
    *) $run -plugin "$plugin" "$prog" "$1" "$2" "$3" 2>&1 ;;
    esac
}
for op in $ops; do
    for dt in $dtypes; do
        # the one-call and two-call runs at once, on the two cores
        count "$op" "$dt" 1 > "$tmp/one" &
        count "$op" "$dt" 2 > "$tmp/two" &
        wait
        flops=$(sed -n 's/.* flops=\([0-9]*\)$/\1/p' "$tmp/one")
        one=$(sed -n 's/^insncount total=\([0-9]*\).*/\1/p' "$tmp/one")
        two=$(sed -n 's/^insncount total=\([0-9]*\).*/\1/p' "$tmp/two")
        [ -n "$one" ] && [ -n "$two" ] && [ -n "$flops" ] || { echo "insn: $op $dt: no count"; exit 1; }
        awk -v op="$op" -v dt="$dt" -v isa="$isa" -v a="$one" -v b="$two" -v f="$flops" 'BEGIN {
            n = b - a; printf "insn op=%s dtype=%s shape=insn isa=%s instructions=%.0f per_flop=%.3f\n", op, dt, isa, n, n / f }'
        [ -n "$limits" ] || continue
        max=$(awk -v op="$op" -v dt="$dt" '$1 == op && $2 == dt {print $3}' "$limits")
        [ -n "$max" ] || continue
        if ! awk -v a="$one" -v b="$two" -v f="$flops" -v m="$max" 'BEGIN { exit !((b - a) / f <= m) }'; then
            echo "insn: $op $dt above its limit $max ($limits)"
            over=1
        fi
    done
done
exit $over
