# Host target: the build machine itself, tests run natively.
# HOST_MARCH selects the instruction set, and with it the ISA layer of the
# kernels (src/isa/): native by default, which is avx512 where the compiler
# targets AVX512F/BW/VL here (avx512bf16 where it also targets AVX512-BF16
# and the bf16 dot product is fast on this core: see BF16_DOT below); x86-64-v3 gives avx2 (AVX2 + FMA + F16C; also
# what valgrind runs, as it stops at AVX-512 instructions); x86-64 or
# x86-64-v2 the scalar layer. ISA=<isa> overrides the choice (any layer the
# march can compile, e.g. ISA=scalar). SANITIZE=1 adds AddressSanitizer and
# UndefinedBehaviorSanitizer, any report being fatal.
# Each compiler / instruction set / sanitizer mix builds in its own directory,
# build/host[-clang][-<march>][-<isa> when overridden][-san], so switching
# between them rebuilds nothing.
ifeq ($(origin CC),default)
CC := cc
endif
AR ?= ar
NM ?= nm
SIZE ?= size
# `make install` without HOST_MARCH builds a copy for other machines of the
# same family, not for this one's: x86-64-v3 (AVX2 + FMA + F16C: every x86-64
# core since 2013-15, the avx2 layer) on x86-64, armv8-a on aarch64, in its
# own directory (build/host-<march>). `make`, `check` and `bench` stay native;
# HOST_MARCH=native (or any march) on the install line overrides it.
INSTALL_MARCH_x86_64 := x86-64-v3
INSTALL_MARCH_aarch64 := armv8-a
ifeq ($(origin HOST_MARCH)$(filter install,$(MAKECMDGOALS)),undefinedinstall)
HOST_MARCH := $(or $(INSTALL_MARCH_$(shell uname -m)),native)
endif
HOST_MARCH ?= native
# No -ffp-contract=fast: the kernels' results must not depend on which
# products the compiler fuses; fast paths use explicit FMA intrinsics.
TARGET_CFLAGS := -O3 -march=$(HOST_MARCH) -fno-math-errno
HOST_ISA_DEFS := $(shell $(CC) -march=$(HOST_MARCH) -dM -E -x c /dev/null 2>/dev/null | \
	grep -oE '__(AVX512F|AVX512BW|AVX512VL|AVX512BF16|AVX2|FMA|F16C)__' | sort -u | tr '\n' ' ')
# avx512bf16 (the bf16 selected-attention forward on vdpbf16ps) only where the
# march targets AVX512-BF16 and the dot product pays on this core: BF16_DOT=
# probe (the default) measures it (tools/bf16_dot_probe.c: at least 0.8x the
# f32 FMA's instruction rate; AMD Zen 4 yes, Intel Sapphire Rapids no), 1
# takes it wherever the march has it, 0 never. ISA=avx512bf16 also forces it.
BF16_DOT ?= probe
HOST_BF16_DOT := $(if $(findstring __AVX512BF16__,$(HOST_ISA_DEFS)),$(if $(filter probe,$(BF16_DOT)),$(if $(filter undefined,$(origin ISA)),$(shell tools/bf16_dot_probe.sh '$(CC)' '$(HOST_MARCH)' '$(BUILDROOT)')),$(filter 1,$(BF16_DOT))))
HOST_ISA := $(if $(and $(findstring __AVX512F__,$(HOST_ISA_DEFS)),$(findstring __AVX512BW__,$(HOST_ISA_DEFS)),$(findstring __AVX512VL__,$(HOST_ISA_DEFS))),avx512$(if $(filter 1,$(HOST_BF16_DOT)),bf16),$(if $(and $(findstring __AVX2__,$(HOST_ISA_DEFS)),$(findstring __FMA__,$(HOST_ISA_DEFS)),$(findstring __F16C__,$(HOST_ISA_DEFS))),avx2,scalar))
ISA ?= $(HOST_ISA)
TARGET_LDLIBS := -lm
TEST_LDLIBS := -lcunit -lpthread -lm
HAVE_PTHREAD := 1
RUN :=
# SANITIZE=fuzz: the same, plus libFuzzer's coverage hooks (clang; make fuzz).
ifneq ($(SANITIZE),)
# -O2 instead of -O3, and -g1 (line tables only, which is what a report's
# file:line needs): the instrumented builds of the largest kernels compile
# in 40% (clang) / 25% (gcc) less time at -O2 than at -O3, and -O3 with full
# debug information took a quarter more again. The sanitizers check the
# source's memory accesses and arithmetic, which -O2 keeps; the plain -O3
# builds of each layer run natively (make check, CI's portable check, and
# valgrind's AVX2 build).
TARGET_CFLAGS := $(patsubst -O3,-O2,$(TARGET_CFLAGS))
# The select tiles with the run-time row pitch only (templates/nsa/
# nsa_select_mk.m4: the constant-pitch copies are the same source, and made
# the instrumented kernels compile five times longer).
PITCH_CONSTANTS := 0
# The tests' fp64 references uninstrumented (the Makefile's REF_CFLAGS).
REF_CFLAGS := -fno-sanitize=all
TARGET_CFLAGS += -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
TARGET_CFLAGS += $(if $(filter fuzz,$(SANITIZE)),-fsanitize=fuzzer-no-link)
SYMCHECK_ALLOW := __asan_.*|__ubsan_.*|__sanitizer_.*|__sancov_.*
# clang's sanitizer and libFuzzer runtimes (gcc's come with gcc).
TARGET_DEPS := $(shell clang -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-x86_64.a:libclang-rt-14-dev
SYMCHECK_STATE_ALLOW := __unnamed_[0-9]+|___asan_gen_.*|__sancov_gen_.*
endif
B := $(BUILDROOT)/host$(if $(findstring clang,$(notdir $(CC))),-clang)$(if $(filter-out native,$(HOST_MARCH)),-$(HOST_MARCH))$(if $(filter-out $(HOST_ISA),$(ISA)),-$(ISA))$(if $(SANITIZE),-$(if $(filter fuzz,$(SANITIZE)),fuzz,san))
