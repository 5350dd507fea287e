# Cortex-M55 as targets/cortex-m55, with the soft-float calling convention
# (-mfloat-abi=softfp): the FPU (and on the M55 Helium) still computes, but
# float arguments and results pass in integer registers, so the archive links
# into firmware built -mfloat-abi=softfp (a hard-float archive does not: the
# linker refuses to mix the two ABIs). Same kernels, tiles and board.
FLOAT_ABI := softfp
include targets/cortex-m55/target.mk
