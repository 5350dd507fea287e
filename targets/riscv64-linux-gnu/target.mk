# 64-bit RISC-V Linux (rv64gc, lp64d): static test program under qemu-user.
# bookworm ships no riscv64 CUnit, so it is built from Debian's source package
# (fetched at build time). GCC 12 has no _Float16 here: the portable
# f16/bf16 conversions (src/core/half.h) are the only ones. Scalar kernels (rv64gc
# has no vector unit).
ISA := scalar
CC := riscv64-linux-gnu-gcc
AR := riscv64-linux-gnu-ar
NM := riscv64-linux-gnu-nm
SIZE := riscv64-linux-gnu-size
TARGET_CFLAGS := -O2 -march=rv64gc -mabi=lp64d -fno-math-errno
TEST_LDFLAGS := -static
TEST_LDLIBS := $(B)/cunit/libcunit.a -lpthread -lm
CUNIT_FROM_SOURCE := 1
HAVE_PTHREAD := 1
RUN := timeout 600 qemu-riscv64
# Under the emulator (10-50x per operation): the quick case set, which
# executes every library line the full one does (tools/case_coverage.sh);
# TEST_CASES=full on the command line runs the full one.
TEST_CASES ?= quick
TARGET_DEPS := riscv64-linux-gnu-gcc:gcc-riscv64-linux-gnu /usr/riscv64-linux-gnu/include/stdio.h:libc6-dev-riscv64-cross \
	qemu-riscv64:qemu-user dpkg-source:dpkg-dev
