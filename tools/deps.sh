#!/bin/sh
# Installs what a build needs when missing: always m4, CUnit, gcc, clang and
# make (and g++ and pkg-config, for the aclnn compatibility layer's C++
# examples and install check); plus the target's own list, given as arguments
# PROBE:PACKAGE (PROBE is a command name, or a file path when it holds a '/'; PACKAGE may name a
# foreign architecture, libcunit1-dev:arm64, which is then added to dpkg).
# Run as root on Debian; does nothing when everything is there.
set -e
need=""
have() { case $1 in */*) [ -e "$1" ] ;; *) command -v "$1" >/dev/null 2>&1 ;; esac; }
have m4 || need="$need m4"
have /usr/include/CUnit/Basic.h || need="$need libcunit1-dev"
have gcc || need="$need gcc"
have clang || need="$need clang"
have make || need="$need make"
have g++ || need="$need g++"
have pkg-config || need="$need pkg-config"
for pair in "$@"; do
    have "${pair%%:*}" || need="$need ${pair#*:}"
done
[ -z "$need" ] && exit 0
echo "installing:$need"
if [ "$(id -u)" != 0 ]; then
    echo "spattn: missing$need; run as root or install them" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
update=false
for p in $need; do
    case $p in *:*)
        arch=${p#*:}
        dpkg --print-foreign-architectures | grep -qx "$arch" || { dpkg --add-architecture "$arch"; update=true; } ;;
    esac
done
$update && apt-get update >/dev/null
apt-get install -y --no-install-recommends $need >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends $need >/dev/null; }
