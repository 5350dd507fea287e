m4_divert(-1)
The rvv instruction set (src/isa/rvv.h, RISC-V V 1.0): lanes of f32 per
vector and the vector registers the micro-kernels register tiles are sized
from. A vector is 8 lanes in a LMUL = 2 group at vl = 8 (right on every VLEN
from 128 up), so the 32 vector registers are 16 such vectors.
m4_define(`SPA_ISA', `rvv')
m4_define(`SPA_VL', 8)
Lanes of double per spa_vd (the float64 kernels; four, as a LMUL = 2 group).
m4_define(`SPA_VDL', 4)
m4_define(`SPA_VREGS', 16)
The broadcast operand of spa_vf_fmab is an f register (vfmacc.vf): it takes
no vector register of a tile.
m4_define(`SPA_VB_VREGS', 0)
No software prefetch (SPA_ISA_PREFETCH 0): hints would be instructions
issued for nothing on cores that follow sequential streams.
m4_define(`SPA_PREFETCH_SW', 0)
The bf16 narrowing for numbers (three integer operations) costs less than the
exact one, which fixes NaN lanes: NsaCompressGrad narrows its two-window rows
by it where the inputs are finite.
m4_define(`SPA_NUM_BF16', 1)
The vector types are sizeless (no arrays or struct members of them): the
templates name their vectors where they would index an array of them.
m4_define(`SPA_VF_SIZELESS', 1)
m4_divert(0)m4_dnl
