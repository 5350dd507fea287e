# Host target: the build machine itself, tests run natively.
# HOST_MARCH selects the instruction set (native by default, so the x86 fast
# paths behind __AVX512F__ / __F16C__ are compiled in; x86-64 or x86-64-v2
# leaves them out, so the portable paths run; x86-64-v3 for valgrind, which
# stops at AVX-512 instructions). SANITIZE=1 adds AddressSanitizer and
# UndefinedBehaviorSanitizer, any report being fatal.
# Each compiler / instruction set / sanitizer mix builds in its own directory,
# build/host[-clang][-<march>][-san], so switching between them rebuilds nothing.
ifeq ($(origin CC),default)
CC := cc
endif
AR ?= ar
NM ?= nm
SIZE ?= size
HOST_MARCH ?= native
# No -ffp-contract=fast: the kernels' results must not depend on which
# products the compiler fuses; fast paths use explicit FMA intrinsics.
TARGET_CFLAGS := -O3 -march=$(HOST_MARCH) -fno-math-errno
TARGET_LDLIBS := -lm
TEST_LDLIBS := -lcunit -lpthread -lm
HAVE_PTHREAD := 1
RUN :=
# SANITIZE=fuzz: the same, plus libFuzzer's coverage hooks (clang; make fuzz).
ifneq ($(SANITIZE),)
TARGET_CFLAGS += -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
TARGET_CFLAGS += $(if $(filter fuzz,$(SANITIZE)),-fsanitize=fuzzer-no-link)
SYMCHECK_ALLOW := __asan_.*|__ubsan_.*|__sanitizer_.*
# clang's sanitizer and libFuzzer runtimes (gcc's come with gcc).
TARGET_DEPS := $(shell clang -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-x86_64.a:libclang-rt-14-dev
SYMCHECK_STATE_ALLOW := __unnamed_[0-9]+|___asan_gen_.*|__sancov_gen_.*
endif
B := $(BUILDROOT)/host$(if $(findstring clang,$(notdir $(CC))),-clang)$(if $(filter-out native,$(HOST_MARCH)),-$(HOST_MARCH))$(if $(SANITIZE),-$(if $(filter fuzz,$(SANITIZE)),fuzz,san))
