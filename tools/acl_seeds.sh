#!/bin/sh
# Extracts the usage examples of the seed pages 000, 003 and 004 (never kept
# in the tree), compiles them unmodified with g++ against the compat headers
# and archives, runs them and hands what they print to the checker. 004i is
# page 004 with its index host data declared int32, as its tensors are (the
# page fills them with float bytes): that one must run.
# Environment: SEEDS, CXX, LDLIBS, CORE_LIB, NM, OUT, RUN, SEEDCHECK.
set -eu
if [ ! -d "$SEEDS" ]; then
    echo "acl seeds: $SEEDS not found; seed page examples skipped (set SEEDS=dir)"
    exit 0
fi
defined=$($NM -g --defined-only "$CORE_LIB" | awk 'NF == 3 && $2 == "T" {print $3}')
mkdir -p "$OUT"
for page in 000:spa_nsa_compress_grad 003:spa_nsa_compress 004:spa_msda_grad 004i:spa_msda_grad; do
    id=${page%%:*}
    sym=${page#*:}
    file=$(ls "$SEEDS"/${id%i}_*.txt 2>/dev/null | head -n 1)
    if [ -z "$file" ]; then
        echo "acl seed $id: no page in $SEEDS; skipped"
        continue
    fi
    if ! echo "$defined" | grep -qx "$sym"; then
        echo "acl seed $id: skipped: libspattn.a lacks $sym"
        continue
    fi
    case $id in
    *i) tools/seed_example.sh "$file" | sed -e 's/std::vector<float> spatialShapeHostData/std::vector<int32_t> spatialShapeHostData/' \
            -e 's/std::vector<float> levelStartIndexHostData/std::vector<int32_t> levelStartIndexHostData/' \
            > "$OUT/seed_$id.cpp"
        grep -q 'std::vector<int32_t> spatialShapeHostData' "$OUT/seed_$id.cpp" ||
            { echo "acl seed $id: the page's spatialShapeHostData declaration changed"; exit 1; } ;;
    *) tools/seed_example.sh "$file" > "$OUT/seed_$id.cpp" ;;
    esac
    # The pages are compiled as published: their own warnings go to a log.
    if ! $CXX -std=c++17 -O2 -Iinclude "$OUT/seed_$id.cpp" $LDLIBS -o "$OUT/seed_$id" \
        2> "$OUT/seed_$id.build.log"; then
        cat "$OUT/seed_$id.build.log"
        echo "acl seed $id: does not compile"
        exit 1
    fi
    warnings=$(grep -c 'warning:' "$OUT/seed_$id.build.log" || true)
    status=0
    $RUN "$OUT/seed_$id" > "$OUT/seed_$id.out" 2> "$OUT/seed_$id.err" || status=$?
    if ! "$SEEDCHECK" "$id" "$status" < "$OUT/seed_$id.out"; then
        head -n 5 "$OUT/seed_$id.out" "$OUT/seed_$id.err"
        echo "acl seed $id: FAILED (exit status $status)"
        exit 1
    fi
    echo "acl seed $id: $(wc -l < "$OUT/seed_$id.out") lines as expected, exit status $status" \
        "($warnings compiler warnings of the page itself)"
done
