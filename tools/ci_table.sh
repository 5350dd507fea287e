#!/bin/sh
# The step-time table of a .ci/run log, in the form of docs/testing.md (CI):
#   bash .ci/run 2>&1 | tee ci.log; tools/ci_table.sh ci.log
# (each step ends with a line "==== <step>: <s>s (total <s>s)").
set -eu
printf '| step | s | total s |\n| --- | ---: | ---: |\n'
sed -n 's/^==== \(.*\): \([0-9]*\)s (total \([0-9]*\)s)$/\1\t\2\t\3/p' "$1" |
    awk -F'\t' '{ gsub(/\|/, "\\|", $1); printf "| %s | %d | %d |\n", $1, $2, $3; t = $3 }
        END { printf "| **total** | | **%d (%.1f min)** |\n", t, t / 60 }'
