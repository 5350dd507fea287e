# Cortex-M7 with the double-precision FPU (fpv5-d16), hard-float ABI, as on
# QEMU's mps2-an500 board, which runs the tests.
# hard unless targets/<core>-softfp set FLOAT_ABI in its file before
# including this one (never from the environment or the command line).
ifneq ($(origin FLOAT_ABI),file)
override FLOAT_ABI := hard
endif
ARCH_FLAGS := -mcpu=cortex-m7 -mfpu=fpv5-d16 -mfloat-abi=$(FLOAT_ABI) -mthumb
BOARD := mps2-an500
BOARD_LD := targets/cortex-m7/mps2-an500.ld
# No vector unit: the scalar kernels, on the FPU.
ISA := scalar
include targets/bare-arm/semihost.mk
# No float64 kernels: they would add flash for a dtype these boards' models
# do not train in; float64 tensors are refused (161002).
DTYPES := f32 f16 bf16
