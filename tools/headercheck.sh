#!/bin/sh
# make headercheck: every public header compiles alone, as C11 and as C++17,
# with gcc and clang, under -Wall -Wextra -Werror -pedantic (a header must
# include what it uses and use nothing a compiler or language lacks).
#   tools/headercheck.sh <build dir> <header>...
set -eu
out=$1
shift
mkdir -p "$out"
n=0
for h in "$@"; do
    name=${h#include/}
    printf '#include "%s"\nint main(void) { return 0; }\n' "$name" > "$out/h.c"
    cp "$out/h.c" "$out/h.cpp"
    for cc in "gcc -x c -std=c11" "clang -x c -std=c11" "g++ -x c++ -std=c++17" "clang++ -x c++ -std=c++17"; do
        command -v "${cc%% *}" >/dev/null 2>&1 || continue
        src=$out/h.c
        case $cc in *c++*) src=$out/h.cpp ;; esac
        # shellcheck disable=SC2086
        $cc -Wall -Wextra -Werror -pedantic -Iinclude -fsyntax-only "$src" ||
            { echo "headercheck: $name does not compile alone with $cc"; exit 1; }
        n=$((n + 1))
    done
done
echo "headercheck: $# public headers, each alone as C11 and C++17 with gcc and clang ($n compiles)"
