#!/bin/sh
# The core archive's promises, read off its symbol table:
#  - it imports nothing but memcpy/memset/memmove and a few libm functions
#    (so no malloc/free, no stdio, no pthreads, no abort);
#  - every global it defines starts with spa_;
#  - it owns no mutable global state (no data, bss or common symbols).
# NM is the target's nm; SYMCHECK_ALLOW (a regex alternation, from the
# target.mk) adds the compiler runtime helpers a target genuinely needs, such
# as the 64-bit division of 32-bit Arm (__aeabi_ldivmod).
set -eu
lib=$1
NM=${NM:-nm}
extra=${SYMCHECK_ALLOW:-}
# floor: the float64 kernels' sample coordinates, where the ISA has no rounding
# instruction (baseline x86-64, rv64gc) the compiler calls libm.
allowed="^(memcpy|memset|memmove|expf|exp|sqrtf|floorf|floor|ceilf|fabsf|logf|__stack_chk_fail|__stack_chk_guard|_GLOBAL_OFFSET_TABLE_${extra:+|$extra})\$"
fail=0
imports=$($NM -u "$lib" | awk '$1 == "U" {print $2}' | sort -u)
defined=$($NM -g --defined-only "$lib" | awk 'NF == 3 {print $3}' | sort -u)
external=""
for s in $imports; do
    # a symbol defined in another member of the archive is not an import
    echo "$defined" | grep -qx "$s" && continue
    external="$external $s"
    echo "$s" | grep -Eq "$allowed" || { echo "symcheck: $lib imports $s"; fail=1; }
done
for s in $defined; do
    case $s in spa_*) ;; *) echo "symcheck: global $s does not start with spa_"; fail=1 ;; esac
done
# SYMCHECK_STATE_ALLOW: writable data a build mode adds by design (the
# sanitizers' per-check records); never set for a release build.
state=$($NM "$lib" | awk 'NF == 3 && $2 ~ /^[DdBbCcGgSsVv]$/ {print $3}' | sort -u |
    { if [ -n "${SYMCHECK_STATE_ALLOW:-}" ]; then grep -Ev "^(${SYMCHECK_STATE_ALLOW})\$" || true; else cat; fi; })
if [ -n "$state" ]; then
    echo "symcheck: writable global state:" $state
    fail=1
fi
[ $fail = 0 ] && echo "symcheck: $lib imports only$external; all globals spa_*; no writable globals"
exit $fail
