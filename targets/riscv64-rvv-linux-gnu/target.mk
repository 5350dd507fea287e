# 64-bit RISC-V Linux with the vector extension (rv64gcv: RVV 1.0, lp64d):
# static test program under qemu-user. Kernels on the rvv layer
# (src/isa/rvv.h), built by clang (GCC 12 has no RVV intrinsics) against the
# riscv64-linux-gnu cross libc and binutils; CUnit from Debian's source
# package, as for riscv64-linux-gnu. No Zvfh: f16 by the portable
# conversions on integer lanes. The layer is vector-length agnostic (VLEN
# 128 and up): RVV_VLEN picks the VLEN qemu emulates, so one test binary
# runs at several (`make TARGET=riscv64-rvv-linux-gnu RVV_VLEN=256 test`).
ISA := rvv
CC := clang-19
AR := riscv64-linux-gnu-ar
NM := riscv64-linux-gnu-nm
SIZE := riscv64-linux-gnu-size
# RVV_MARCH, RVV_QEMU and RVV_CPU_EXT: what a variant of this target sets
# before including it (riscv64-rvv-zvfhmin-linux-gnu)
RVV_MARCH ?= rv64gcv
TARGET_CFLAGS := --target=riscv64-linux-gnu -O2 -march=$(RVV_MARCH) -mabi=lp64d -fno-math-errno
TEST_LDFLAGS := -static
TEST_LDLIBS := $(B)/cunit/libcunit.a -lpthread -lm
CUNIT_FROM_SOURCE := 1
HAVE_PTHREAD := 1
RVV_VLEN ?= 128
RVV_QEMU ?= qemu-riscv64
RUN := timeout 600 $(RVV_QEMU) -cpu rv64,v=true,vlen=$(RVV_VLEN),vext_spec=v1.0$(RVV_CPU_EXT)
# Under the emulator (10-50x per operation): the quick case set, which
# executes every library line the full one does (tools/case_coverage.sh);
# TEST_CASES=full on the command line runs the full one.
TEST_CASES ?= quick
TARGET_DEPS := clang-19:clang-19 riscv64-linux-gnu-gcc:gcc-riscv64-linux-gnu \
	/usr/riscv64-linux-gnu/include/stdio.h:libc6-dev-riscv64-cross qemu-riscv64:qemu-user dpkg-source:dpkg-dev
# clang 19 warns (-Wenum-float-conversion, new since clang 14) on the enum
# constants times doubles of the instruction-count program's FLOP counts.
TEST_CFLAGS := -Wno-enum-float-conversion
