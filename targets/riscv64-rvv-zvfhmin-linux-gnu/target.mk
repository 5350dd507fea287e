# 64-bit RISC-V Linux with the vector extension and Zvfhmin (rv64gcv_zvfhmin:
# the vector f16 <-> f32 conversions, which Zvfh implies; SpacemiT X60,
# SiFive P670 / X280, Sophgo SG2044 have them): the riscv64-rvv-linux-gnu
# target with f16 widened and narrowed by vfwcvt.f.f.v / vfncvt.f.f.w instead
# of the integer-lane conversions (src/isa/rvv.h). bookworm's qemu 7.2 has no
# Zvfhmin: the test program runs under qemu-riscv64 10 from bookworm-backports,
# unpacked beside the system's (its binaries are static; RUN_FETCH). Its
# suite runs at VLEN 256 by default, the plain rvv target's at 128: between
# them both f16 paths and both vector lengths are tested. qemu 10 here is
# built without plugins: `make insn` counts from qemu's execution trace.
RVV_VLEN ?= 256
RVV_MARCH := rv64gcv_zvfhmin
RVV_QEMU := $(BUILDROOT)/qemu-bpo/usr/bin/qemu-riscv64
RVV_CPU_EXT := ,zvfhmin=true
include targets/riscv64-rvv-linux-gnu/target.mk
RUN_FETCH := tools/qemu_backports.sh $(BUILDROOT)/qemu-bpo
INSN_COUNT_BY := trace
# f16 on Zvfhmin has limits of its own (f32 and bf16 run the rvv code)
INSN_LIMITS := tools/insn/rvv_zvfhmin.limits
