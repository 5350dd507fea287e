# Shared by the bare-metal Arm targets (included from their target.mk, which
# sets ARCH_FLAGS, BOARD and BOARD_LD first). The library is built
# freestanding; builtins stay on and errno is off so sqrtf becomes vsqrt.f32.
# Tests: newlib with semihosting (rdimon) under qemu-system-arm, CUnit built
# from Debian's source package, no threads (the test runners fall back to
# reordered in-process runs), shapes scaled down to the board (SPA_TEST_SMALL).
CC := arm-none-eabi-gcc
AR := arm-none-eabi-ar
NM := arm-none-eabi-nm
SIZE := arm-none-eabi-size
TARGET_CFLAGS := -O2 $(ARCH_FLAGS) -fno-math-errno
# One core and a few MiB: fewer, smaller parallel blocks for selected
# attention (its per-block scratch and grad partials live in the workspace).
# Compressed-attention decode splits its keys in parts of 32 (not 512): a
# board has no second core to share them, but the suites then run the split
# on its kernels at the sizes they draw here; its parts widen the cache rows
# into the workspace (SPA_CATTN_INFER_IN_PLACE 0: reading them where they lie
# takes frames that cross the 4 KiB stack budget). A section per function and
# object: a firmware linking with --gc-sections keeps only what it calls.
LIB_CFLAGS := -ffreestanding -fbuiltin -DSPA_SELECT_BLOCKS_MAX=4 -DSPA_SELECT_PARTIAL_BYTES=1048576 \
  -DSPA_CATTN_INFER_PART_KEYS=32 -DSPA_CATTN_INFER_IN_PLACE=0 -ffunction-sections -fdata-sections
# -Wno-format for the tests only: newlib's int32_t (spa_status) is `long`,
# which the suites print with %d; harmless here (both 32-bit, passed alike)
# and format strings stay checked on the hosted targets, where it is `int`.
TEST_CFLAGS := -DSPA_TEST_SMALL=1 -DSPA_TEST_NO_THREADS -Wno-format
TEST_LDFLAGS := --specs=rdimon.specs -T $(BOARD_LD)
TEST_EXTRA_SRC := targets/bare-arm/startup.c
TEST_LDLIBS := $(B)/cunit/libcunit.a -lm
CUNIT_FROM_SOURCE := 1
HAVE_PTHREAD :=
RUN := timeout 600 qemu-system-arm -M $(BOARD) -nographic -semihosting -kernel
# Compiler runtime helpers the core may call on 32-bit Arm: 64-bit integer
# division and modulo (sizes, offsets and block arithmetic are int64; used
# today), and the int64 <-> float conversions (sample coordinates to indices;
# not used by the compress ops). Nothing else: no soft-float (both cores have
# a double-precision FPU), no libgcc block moves.
SYMCHECK_ALLOW := __aeabi_ldivmod|__aeabi_uldivmod|__aeabi_l2f|__aeabi_ul2f|__aeabi_f2lz|__aeabi_f2ulz
# Phase 2 of every op runs in less stack than this (make check: stackcheck).
STACK_LIMIT := 4096
# (gcc-12-multilib, not gcc-multilib, which conflicts with the cross compilers: libspattn_sizing.a, this target's phase 1 as -m32 code on an x86-64 build machine)
TARGET_DEPS := arm-none-eabi-gcc:gcc-arm-none-eabi /usr/lib/arm-none-eabi/newlib/libc.a:libnewlib-arm-none-eabi \
	$(if $(filter x86_64,$(shell uname -m)),/usr/include/x86_64-linux-gnu/gnu/stubs-32.h:gcc-12-multilib) \
	qemu-system-arm:qemu-system-arm dpkg-source:dpkg-dev
