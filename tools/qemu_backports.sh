#!/bin/sh
# Unpacks qemu-user from Debian bookworm-backports (qemu 10, which emulates
# the RISC-V Zvfh / Zvfhmin instructions that bookworm's qemu 7.2 lacks) into
# DIR without installing it: its binaries are static, so they run beside the
# system's qemu and change nothing else. Adds the backports suite to apt's
# sources (default priority: no installed package moves to it) when missing.
# Run as root on Debian the first time; does nothing once DIR has it.
#   tools/qemu_backports.sh DIR        then DIR/usr/bin/qemu-<arch>
set -eu
dir=$1
[ -x "$dir/usr/bin/qemu-riscv64" ] && exit 0
if ! apt-cache policy qemu-user 2>/dev/null | grep -q bookworm-backports; then
    if [ "$(id -u)" != 0 ]; then
        echo "spattn: qemu-user from bookworm-backports is missing; run as root once (make deps)" >&2
        exit 1
    fi
    cat > /etc/apt/sources.list.d/spattn-backports.sources <<EOS
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
    apt-get update -q >/dev/null
fi
rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
chown _apt "$dir.tmp" 2>/dev/null || true # apt fetches as _apt where it can
(cd "$dir.tmp" && apt-get download -q qemu-user/bookworm-backports >/dev/null && dpkg-deb -x qemu-user_*.deb unpacked)
rm -rf "$dir" && mv "$dir.tmp/unpacked" "$dir" && rm -rf "$dir.tmp"
"$dir/usr/bin/qemu-riscv64" --version | head -n 1
