m4_divert(-1)
The mve instruction set (src/isa/mve.h, Armv8.1-M Helium): lanes of f32 per
vector and the vector registers the micro-kernels' register tiles are sized
from (eight Q registers).
m4_define(`SPA_ISA', `mve')
m4_define(`SPA_VL', 4)
m4_define(`SPA_VREGS', 8)
The broadcast operand of spa_vf_fmab stays in a core register (vfma.f32 q,
q, r): it takes no vector register of a tile.
m4_define(`SPA_VB_VREGS', 0)
Thumb-2 leaves about 12 core registers to a kernel (r0-r12 less the frame's
needs), which also hold those broadcast operands.
m4_define(`SPA_GPRS', 12)
Two consecutive broadcast operands load in one instruction (ldrd into two
core registers: spa_vb_load2), so the tiles of selected attention read
their scalars in pairs.
m4_define(`SPA_VB_PAIR', 1)
Add, multiply and compare take a broadcast operand from a core register
(spa_vf_addb, spa_vf_mulb, spa_vf_keep_geb) and vminnm exists
(spa_vf_min_num): the softmax exp of selected attention keeps its constants
in core registers instead of a dozen vector registers.
m4_define(`SPA_VB_ARITH', 1)
No software prefetch of the compress kernels' rows: a Cortex-M reads from
TCM or through a small cache with its own streaming (SPA_ISA_PREFETCH 0).
m4_define(`SPA_PREFETCH_SW', 0)
NsaCompressGrad's two-window tile keeps one vector of dot-product lanes per
window (4 lanes: lane j sums channels j, j+4, ...), as 2 x 16 lanes would
take all eight Q registers.
m4_define(`SPA_DOT_LANES', 4)
m4_divert(0)m4_dnl
