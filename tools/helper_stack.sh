#!/bin/sh
# Stack bytes of the compiler-runtime and C library functions the library
# calls (the 64-bit division and conversions of 32-bit Arm: __aeabi_ldivmod,
# ...; memcpy, memset, memmove, expf, sqrtf where they are not inlined),
# which GCC's call-graph files list as calls without a frame. Read off the
# target's own libgcc.a, libc.a and libm.a (the multilib of its flags): each
# function's pushes and stack adjustments (push / stmdb / vpush lists, strd
# or str with write-back, sub sp), plus the deepest function it calls (bl,
# or b.w as a tail call, counted as a call: an upper bound).
#   tools/helper_stack.sh "CC FLAGS" NAME...  -> "NAME:BYTES ..." (unknown names left out)
set -eu
cc=$1
shift
[ $# -gt 0 ] || exit 0
libs="$($cc -print-libgcc-file-name) $($cc -print-file-name=libc.a) $($cc -print-file-name=libm.a)"
objdump=$(echo "$cc" | awk '{ print $1 }' | sed 's/gcc$/objdump/')
for l in $libs; do [ -f "$l" ] && "$objdump" -d "$l" 2>/dev/null; done | awk -v want="$*" '
function regs(s,   n, a, i, c, lo, hi, r) {  # registers in a list {r4, r5-r7, lr}
    gsub(/[{}]/, "", s); n = split(s, a, ","); c = 0
    for (i = 1; i <= n; i++) {
        r = a[i]; gsub(/ /, "", r)
        if (r ~ /-/) { split(r, lh, "-"); lo = lh[1]; hi = lh[2]; gsub(/[a-z]/, "", lo); gsub(/[a-z]/, "", hi); c += hi - lo + 1 }
        else if (r != "") c++
    }
    return c
}
/^[0-9a-f]+ <[^>]+>:$/ { f = $2; gsub(/[<>:]/, "", f); frame[f] += 0; next }
f == "" { next }
/\t(push|stmdb)(\.w)?\t(sp!, )?\{/ { s = $0; sub(/^.*\{/, "{", s); sub(/\}.*$/, "}", s); frame[f] += 4 * regs(s) }
/\tvpush(\.64)?\t\{/ { s = $0; sub(/^.*\{/, "{", s); sub(/\}.*$/, "}", s); frame[f] += 8 * regs(s) }
/\tstrd\t.*\[sp, #-[0-9]+\]!/ { s = $0; sub(/^.*#-/, "", s); sub(/\].*$/, "", s); frame[f] += s + 0 }
/\tstr(\.w)?\t[a-z0-9]+, \[sp, #-[0-9]+\]!/ { s = $0; sub(/^.*#-/, "", s); sub(/\].*$/, "", s); frame[f] += s + 0 }
/\tsub(\.w)?\tsp, (sp, )?#[0-9]+/ { s = $0; sub(/^.*#/, "", s); sub(/[^0-9].*$/, "", s); frame[f] += s + 0 }
/\t(bl|b\.w)\t[0-9a-f]+ <[^>+]+>/ { c = $0; sub(/^.*</, "", c); sub(/>.*$/, "", c); if (c != f) calls[f] = calls[f] " " c }
function depth(g,   n, a, i, d, best) {
    if (g in seen) return 0
    seen[g] = 1; best = 0
    n = split(calls[g], a, " ")
    for (i = 1; i <= n; i++) { d = depth(a[i]); if (d > best) best = d }
    delete seen[g]
    return frame[g] + best
}
END {
    n = split(want, w, " ")
    for (i = 1; i <= n; i++) if (w[i] in frame) printf "%s:%d ", w[i], depth(w[i])
    print ""
}'
