# 64-bit Arm Linux on ARMv8.6-A cores (FEAT_BF16: Neoverse V1 / N2 / V2,
# Graviton 3 and 4, Cortex-A510 / A710 and later): the aarch64-linux-gnu
# target with bf16 narrowed by bfcvtn (ISA neon_bf16). Static test program
# under qemu-user; CUnit from Debian's arm64 multiarch package.
ISA := neon_bf16
CC := aarch64-linux-gnu-gcc
AR := aarch64-linux-gnu-ar
NM := aarch64-linux-gnu-nm
SIZE := aarch64-linux-gnu-size
TARGET_CFLAGS := -O2 -march=armv8.6-a -fno-math-errno
TEST_LDFLAGS := -static
TEST_LDLIBS := -lcunit -lpthread -lm
HAVE_PTHREAD := 1
# -cpu max: qemu's model with every extension it implements, FEAT_BF16 included.
RUN := timeout 600 qemu-aarch64 -cpu max
# Under the emulator (10-50x per operation): the quick case set, which
# executes every library line the full one does (tools/case_coverage.sh);
# TEST_CASES=full on the command line runs the full one.
TEST_CASES ?= quick
TARGET_DEPS := aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu /usr/aarch64-linux-gnu/include/stdio.h:libc6-dev-arm64-cross \
	qemu-aarch64:qemu-user /usr/lib/aarch64-linux-gnu/libcunit.a:libcunit1-dev:arm64
