#!/bin/sh
# ONNX Runtime for `make ort-check`, fetched into DIR (nothing installed):
#  - the C API header, from Debian 13's libonnxruntime-dev (bookworm has no
#    onnxruntime): its .deb fetched with apt-get through a private trixie
#    source list and unpacked with dpkg-deb;
#  - a runtime that loads on this glibc: libonnxruntime.so of the npm package
#    onnxruntime-node (manylinux, glibc 2.27), its tarball checked against a
#    pinned sha256, used as a plain shared library (no script of it runs).
# The custom-op library asks for C API version 17, which both have.
#   tools/ort_deps.sh DIR    -> DIR/include/onnxruntime_c_api.h, DIR/lib/libonnxruntime.so*
set -eu
mkdir -p "$1"
dir=$(cd "$1" && pwd)
ver=1.21.0
sum=c711a4048a8b460a70de25a5008b1628e3773878ef9deec1dd4a4ccab46de01a
if [ -f "$dir/include/onnxruntime_c_api.h" ] && [ -f "$dir/lib/libonnxruntime.so.$ver" ]; then
    exit 0
fi
tmp=$dir/tmp
rm -rf "$tmp"
mkdir -p "$tmp/apt/lists/partial" "$tmp/apt/cache/archives/partial" "$dir/include" "$dir/lib"
echo "deb http://deb.debian.org/debian trixie main" > "$tmp/apt/sources.list"
apt_opts="-o Dir::Etc::sourcelist=$tmp/apt/sources.list -o Dir::Etc::sourceparts=/dev/null
 -o Dir::State::Lists=$tmp/apt/lists -o Dir::Cache=$tmp/apt/cache -o APT::Get::List-Cleanup=0
 -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
# shellcheck disable=SC2086
apt-get -q $apt_opts update >/dev/null
# shellcheck disable=SC2086
(cd "$tmp" && apt-get -q $apt_opts download libonnxruntime-dev >/dev/null)
dpkg-deb -x "$tmp"/libonnxruntime-dev_*.deb "$tmp/deb"
cp "$tmp/deb/usr/include/onnxruntime/onnxruntime_c_api.h" "$dir/include/"
curl -fsSL -o "$tmp/ort.tgz" "https://registry.npmjs.org/onnxruntime-node/-/onnxruntime-node-$ver.tgz"
echo "$sum  $tmp/ort.tgz" | sha256sum -c --quiet -
tar xzf "$tmp/ort.tgz" -C "$tmp" "package/bin/napi-v3/linux/x64/libonnxruntime.so.$ver"
cp "$tmp/package/bin/napi-v3/linux/x64/libonnxruntime.so.$ver" "$dir/lib/"
ln -sf "libonnxruntime.so.$ver" "$dir/lib/libonnxruntime.so.1"
ln -sf "libonnxruntime.so.$ver" "$dir/lib/libonnxruntime.so"
rm -rf "$tmp"
