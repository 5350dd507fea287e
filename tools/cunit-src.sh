#!/bin/sh
# Fetches CUnit's Debian source package into $1 (for targets with no packaged
# CUnit: riscv64 on bookworm, bare-metal Arm). Nothing of it is committed.
# Needs a deb-src entry; as root, adds one for the running suite if missing.
set -e
dest=$1
[ -f "$dest/.fetched" ] && exit 0
if ! command -v dpkg-source >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || { echo "cunit-src: dpkg-dev is missing" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends dpkg-dev >/dev/null
fi
if ! grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    [ "$(id -u)" = 0 ] || { echo "cunit-src: no deb-src entry in /etc/apt; add one or run as root" >&2; exit 1; }
    . /etc/os-release
    cat > /etc/apt/sources.list.d/spattn-deb-src.sources <<EOS
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $VERSION_CODENAME $VERSION_CODENAME-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
    apt-get update >/dev/null
fi
rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
(cd "$dest.tmp" && apt-get source cunit >/dev/null 2>&1) ||
    { [ "$(id -u)" = 0 ] && apt-get update >/dev/null && (cd "$dest.tmp" && apt-get source cunit >/dev/null); }
src=$(ls -d "$dest.tmp"/cunit-*/ | head -n 1)
[ -f "$src/CUnit/Sources/Framework/TestRun.c" ] || { echo "cunit-src: no CUnit sources in $src" >&2; exit 1; }
rm -rf "$dest" && mv "$src" "$dest" && rm -rf "$dest.tmp"
touch "$dest/.fetched"
echo "cunit-src: CUnit source in $dest"
