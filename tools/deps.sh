#!/bin/sh
# Installs what a host build needs (m4, CUnit, gcc, clang; g++ and pkg-config
# for the aclnn compatibility layer's C++ examples and install check) when missing.
# Run as root on Debian; does nothing when everything is there.
set -e
need=""
command -v m4 >/dev/null 2>&1 || need="$need m4"
[ -f /usr/include/CUnit/Basic.h ] || need="$need libcunit1-dev"
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v clang >/dev/null 2>&1 || need="$need clang"
command -v g++ >/dev/null 2>&1 || need="$need g++"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v make >/dev/null 2>&1 || need="$need make"
[ -z "$need" ] && exit 0
echo "installing:$need"
if [ "$(id -u)" != 0 ]; then
    echo "spattn: missing$need; run as root or install them" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends $need >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends $need >/dev/null; }
