# Host target: the build machine itself, tests run natively.
# HOST_MARCH selects the instruction set (native by default; x86-64-v3 for
# valgrind, which stops at AVX-512 instructions).
ifeq ($(origin CC),default)
CC := cc
endif
AR ?= ar
NM ?= nm
HOST_MARCH ?= native
# -ffp-contract=fast: ISO C mode would otherwise forbid fusing a*b+c into FMA.
TARGET_CFLAGS := -O3 -march=$(HOST_MARCH) -fno-math-errno -ffp-contract=fast
TARGET_LDLIBS := -lm
TEST_LDLIBS := -lcunit -lpthread -lm
HAVE_PTHREAD := 1
RUN :=
