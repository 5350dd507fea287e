#!/bin/sh
# Prints the C++ usage example of a seed page: the code after the page's
# "调用示例" (usage example) heading, either inside a ``` fence or, on pages
# without one, the indented block from the first #include to the end, with
# its indentation removed. The page itself is never copied into the tree.
set -eu
awk '
/调用示例/ && !sec { sec = 1; next }
!sec { next }
mode == "" && /^[ \t]*```/ { mode = "fence"; next }
mode == "fence" && /^[ \t]*```/ { exit }
mode == "fence" { print; next }
mode == "" && /^[ \t]*#include/ {
    mode = "indent"
    match($0, /^[ ]*/)
    indent = RLENGTH
}
mode == "indent" {
    line = $0
    match(line, /^[ ]*/)
    cut = RLENGTH < indent ? RLENGTH : indent
    print substr(line, cut + 1)
}
' "$1"
