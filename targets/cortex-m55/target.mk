# Cortex-M55 (Armv8.1-M with MVE and the FPU), hard-float ABI, as on QEMU's
# mps3-an547 board, which runs the tests.
ARCH_FLAGS := -mcpu=cortex-m55 -mfloat-abi=hard -mthumb
BOARD := mps3-an547
BOARD_LD := targets/cortex-m55/mps3-an547.ld
# The scalar kernels until an mve layer exists (src/isa/, gen/isa/).
ISA := scalar
include targets/bare-arm/semihost.mk
