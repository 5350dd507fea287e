#!/bin/sh
# Prints 1 where this host runs the AVX512-BF16 dot product at least at 0.8x
# the f32 FMA's instruction rate (tools/bf16_dot_probe.c), 0 otherwise or if
# the probe cannot be built or run. The result is kept per CPU model and
# -march in $BUILDROOT/bf16_dot_probe.*, so a make invocation probes once.
#   tools/bf16_dot_probe.sh CC MARCH BUILDROOT
cc=$1 march=$2 root=$3
model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
key=$(printf '%s|%s|%s' "$cc" "$march" "$model" | cksum | cut -d' ' -f1)
cache="$root/bf16_dot_probe.$key"
if [ ! -s "$cache" ]; then
    mkdir -p "$root" || { echo 0; exit 0; }
    # per-process names: parallel makes may probe at once
    bin="$root/bf16_dot_probe.$key.$$.bin" tmp="$cache.$$.tmp"
    if "$cc" -O2 -march="$march" -o "$bin" "$(dirname "$0")/bf16_dot_probe.c" 2>/dev/null &&
        "$bin" > "$tmp" 2>/dev/null; then
        mv "$tmp" "$cache"
    else
        echo "0 0 0" > "$tmp" && mv "$tmp" "$cache"
    fi
    rm -f "$bin" "$tmp"
fi
cut -d' ' -f1 "$cache"
