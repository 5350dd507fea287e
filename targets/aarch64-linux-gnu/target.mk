# 64-bit Arm Linux (ARMv8.0-A baseline, so Cortex-A53 class cores run it):
# static test program under qemu-user; CUnit from Debian's arm64 multiarch
# package. Kernels on the neon layer (Advanced SIMD of ARMv8.0-A).
ISA := neon
CC := aarch64-linux-gnu-gcc
AR := aarch64-linux-gnu-ar
NM := aarch64-linux-gnu-nm
SIZE := aarch64-linux-gnu-size
TARGET_CFLAGS := -O2 -march=armv8-a -fno-math-errno
TEST_LDFLAGS := -static
TEST_LDLIBS := -lcunit -lpthread -lm
HAVE_PTHREAD := 1
# -cpu cortex-a53: an ARMv8.0 core, so a v8.2 instruction would trap (SIGILL).
RUN := timeout 600 qemu-aarch64 -cpu cortex-a53
# Under the emulator (10-50x per operation): the quick case set, which
# executes every library line the full one does (tools/case_coverage.sh);
# TEST_CASES=full on the command line runs the full one.
TEST_CASES ?= quick
TARGET_DEPS := aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu /usr/aarch64-linux-gnu/include/stdio.h:libc6-dev-arm64-cross \
	qemu-aarch64:qemu-user /usr/lib/aarch64-linux-gnu/libcunit.a:libcunit1-dev:arm64
