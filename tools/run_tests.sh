#!/bin/sh
# make test: the test program in N interleaved parts at once (spattn_tests
# --shard=K/N), each part's output kept in its own log and printed whole, in
# order, once all have ended; fails when any part fails. N = 1 runs the
# program as it is, its output straight through.
#   tools/run_tests.sh "<run command>" <program> <shards> <log dir> <cases> [filter]
# cases: full or quick (spattn_tests --cases=).
# The run command is the target's RUN: empty (native), a wrapper (valgrind,
# qemu-user: arguments follow the program) or qemu-system-* ending in -kernel
# (a semihosting image: its arguments go through -append).
set -u
run=$1 prog=$2 shards=$3 logs=$4 cases=$5 filter=${6:-}
start() { # arguments... : run the program with them
    case $run in
    *qemu-system-*) $run "$prog" -append "$*" ;; # qemu puts the program first
    *) $run "$prog" "$@" ;;
    esac
}
if [ "$shards" -le 1 ]; then
    start --cases="$cases" $filter
    exit $?
fi
mkdir -p "$logs"
k=1
pids=""
while [ "$k" -le "$shards" ]; do
    start --cases="$cases" $filter "--shard=$k/$shards" > "$logs/part$k.log" 2>&1 &
    pids="$pids $!"
    k=$((k + 1))
done
failed=0
k=1
for p in $pids; do
    if wait "$p"; then st=0; else st=$?; fi
    echo "---- test part $k of $shards: exit status $st"
    cat "$logs/part$k.log"
    [ "$st" -eq 0 ] || failed=1
    k=$((k + 1))
done
# one closing line for the whole run: the tests each part ran and failed
awk '/^ +tests +[0-9]/ { ran += $3; bad += $5 } END { printf "%d passed, %d failed\n", ran - bad, bad }' \
    "$logs"/part*.log
exit $failed
