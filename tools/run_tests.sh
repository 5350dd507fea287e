#!/bin/sh
# make test: the test program in N interleaved parts at once (spattn_tests
# --shard=K/N), each part's output kept in its own log and printed whole, in
# order, once all have ended; fails when any part fails. N = 1 runs the
# program as it is, its output straight through.
#   tools/run_tests.sh "<run command>" <program> <shards> <log dir> <cases> [filter]
# cases: full, quick or thin (spattn_tests --cases=). TEST_PARTS (environment):
# the parts to run, a list of K in 1..N (default all): two runs of one layer
# on two builds can share the tests between them (TEST_PARTS="1 3" and "2 4").
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
rm -f "$logs"/part*.log # a previous run's parts would count below
parts=${TEST_PARTS:-$(seq 1 "$shards")}
for k in $parts; do
    case $k in *[!0-9]* | '') echo "run_tests: TEST_PARTS: $k is not a part number"; exit 2 ;; esac
    [ "$k" -ge 1 ] && [ "$k" -le "$shards" ] || { echo "run_tests: TEST_PARTS: part $k of $shards"; exit 2; }
done
pids=""
for k in $parts; do
    start --cases="$cases" $filter "--shard=$k/$shards" > "$logs/part$k.log" 2>&1 &
    pids="$pids $!"
done
failed=0
set -- $parts
for p in $pids; do
    k=$1
    shift
    if wait "$p"; then st=0; else st=$?; fi
    echo "---- test part $k of $shards: exit status $st"
    cat "$logs/part$k.log"
    [ "$st" -eq 0 ] || failed=1
done
# one closing line for the whole run: the tests each part ran and failed
awk '/^ +tests +[0-9]/ { ran += $3; bad += $5 } END { printf "%d passed, %d failed\n", ran - bad, bad }' \
    "$logs"/part*.log
exit $failed
