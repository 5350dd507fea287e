#!/bin/sh
# What the quick case set (spattn_tests --cases=quick) leaves out of the
# library's code, measured: the suite is built with gcc --coverage for one
# host instruction set and run twice, full and quick; every library line
# (src/ and the generated kernels) executed by the full set and not by the
# quick one is printed, with the totals. CI runs the quick set under the
# emulators and valgrind and the full one natively; this is how to tell that
# the quick set still reaches every kernel path and tail.
#   tools/case_coverage.sh [HOST_MARCH]    (default native; x86-64-v3, x86-64)
set -eu
march=${1:-native}
root=build/coverage
make -s BUILDROOT=$root HOST_MARCH="$march" EXTRA_CFLAGS=--coverage TEST_LDFLAGS=--coverage all >/dev/null
b=$(make -s BUILDROOT=$root HOST_MARCH="$march" EXTRA_CFLAGS=--coverage TEST_LDFLAGS=--coverage \
    -f Makefile -f /dev/stdin print-b <<'EOF'
print-b:
	@echo $(B)
EOF
)
make -s BUILDROOT=$root HOST_MARCH="$march" EXTRA_CFLAGS=--coverage TEST_LDFLAGS=--coverage \
    "$b/tests/spattn_tests" >/dev/null
# executed library lines after a run, one "file:line" each
lines() {
    for gcda in $(find "$b/obj/src" "$b/obj/gen" -name '*.gcda'); do
        gcov -t -o "${gcda%/*}" "$gcda" 2>/dev/null
    done | awk -F: '$2 + 0 == 0 && $3 == "Source" { f = $4; next }
        f !~ /^\/usr/ && $1 ~ /[0-9]/ && $1 !~ /#|=/ { print f ":" ($2 + 0) }' | sort -u
}
run() { # cases -> executed lines
    find "$b" -name '*.gcda' -delete
    "$b/tests/spattn_tests" --cases="$1" >"$b/coverage-$1.log" 2>&1 ||
        { tail -n 20 "$b/coverage-$1.log"; echo "case_coverage: the $1 set failed"; exit 1; }
    lines > "$b/coverage-$1.lines"
}
run full
run quick
missed=$(comm -23 "$b/coverage-full.lines" "$b/coverage-quick.lines")
printf 'case_coverage (%s): library lines executed: full set %d, quick set %d, full and not quick %d\n' \
    "$march" "$(wc -l < "$b/coverage-full.lines")" "$(wc -l < "$b/coverage-quick.lines")" \
    "$(printf '%s' "$missed" | grep -c . || true)"
[ -z "$missed" ] || printf '%s\n' "$missed"
