#!/bin/sh
# Builds the aclnn example programs (C++, as CANN users write them) and runs
# them; each checks its own results against a reference from the spec and
# exits non-zero on a mismatch. An example naming "requires: spa_xxx" in its
# header is compiled always but linked and run only when the core archive
# defines those symbols.
# Environment: CXX, CXXFLAGS, LDLIBS, CORE_LIB, NM, OUT, RUN.
set -eu
defined=$($NM -g --defined-only "$CORE_LIB" | awk 'NF == 3 && $2 == "T" {print $3}')
mkdir -p "$OUT"
for src in "$@"; do
    name=$(basename "$src" .cpp)
    $CXX $CXXFLAGS -c "$src" -o "$OUT/$name.o"
    missing=""
    for sym in $(sed -n 's|^// *requires: *||p' "$src"); do
        echo "$defined" | grep -qx "$sym" || missing="$missing $sym"
    done
    if [ -n "$missing" ]; then
        echo "acl example $name: compiled; not run: libspattn.a lacks$missing"
        continue
    fi
    $CXX "$OUT/$name.o" $LDLIBS -o "$OUT/$name"
    if ! $RUN "$OUT/$name" > "$OUT/$name.log" 2>&1; then
        cat "$OUT/$name.log"
        echo "acl example $name: FAILED"
        exit 1
    fi
    echo "acl example $name: $(tail -n 1 "$OUT/$name.log")"
done
