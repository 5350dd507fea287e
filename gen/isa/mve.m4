m4_divert(-1)
The mve instruction set (src/isa/mve.h, Armv8.1-M Helium): lanes of f32 per
vector and the vector registers the micro-kernels' register tiles are sized
from (eight Q registers).
m4_define(`SPA_ISA', `mve')
m4_define(`SPA_VL', 4)
Lanes of double per spa_vd (the float64 kernels; one double: Helium has no double lanes).
m4_define(`SPA_VDL', 1)
m4_define(`SPA_VREGS', 8)
The broadcast operand of spa_vf_fmab stays in a core register (vfma.f32 q,
q, r): it takes no vector register of a tile.
m4_define(`SPA_VB_VREGS', 0)
Thumb-2 leaves about 12 core registers to a kernel (r0-r12 less the frame's
needs), which also hold those broadcast operands.
m4_define(`SPA_GPRS', 12)
Two consecutive broadcast operands load in one instruction (ldrd into two
core registers: spa_vb_load2, spa_vb_load2_post with the pointer step in
the load), so the tiles of selected attention read their scalars in pairs
and the NsaCompress ring tile its weights.
m4_define(`SPA_VB_PAIR', 1)
Add, multiply and compare take a broadcast operand from a core register
(spa_vf_addb, spa_vf_mulb): the softmax exp of selected attention keeps its constants in
core registers instead of a dozen vector registers.
m4_define(`SPA_VB_ARITH', 1)
No software prefetch of the compress kernels' rows: a Cortex-M reads from
TCM or through a small cache with its own streaming (SPA_ISA_PREFETCH 0).
m4_define(`SPA_PREFETCH_SW', 0)
NsaCompressGrad's two-window tile keeps one vector of dot-product lanes per
window (4 lanes: lane j sums channels j, j+4, ...), as 2 x 16 lanes would
take all eight Q registers.
m4_define(`SPA_DOT_LANES', 4)
NsaCompressGrad unrolls its 128-channel rows: each loop step would bump one
pointer per stream (GCC makes no post-incremented MVE loads), and every
offset of such a row fits an immediate of vldrw / vstrw (up to 508 bytes).
m4_define(`SPA_ROW128_UNROLL', 1)
Its two-window 16-bit rows are functions of their own (inlined in the kernel,
GCC bumps a pointer for each widening load and narrowing store).
m4_define(`SPA_ROW_CALL', 1)
Its narrowings for numbers (spa_vf_store*_num) cost less than the exact ones,
which test each vector for NaN (vcvtb makes NaN the default NaN; the bf16
rounding carries a NaN payload into the exponent): NsaCompressGrad narrows
its two-window rows by them where the inputs are finite.
m4_define(`SPA_NUM_F16', 1)
m4_define(`SPA_NUM_BF16', 1)
NsaCompress forward tiles of 256 channels (every head dim up to 256 still
fits one): in the board budget 32 windows instead of 2, so the two-window
register tile slides along 32 windows (bs = 2 st) and all but the first and
last stride of rows feed two windows.
m4_define(`SPA_NSAC_TC', 256)
The NsaCompress ring tile stores its window sums straight into unit-stride
output rows, narrowed there, instead of a pass over staged f32 sums.
m4_define(`SPA_NSAC_STORE_Y', 1)
The layer reads eight 16-bit elements as two vectors, the even and the odd
ones (spa_vf_load_eo_f16 / _bf16: one load, a conversion each), and stores
such pairs back interleaved (spa_vf_store_eo*).
m4_define(`SPA_VF_EVEN_ODD', 1)
Deformable attention folds the attention weight into the corner weights at
staging (templates/msda/msda.c.m4): four vfma by a core register per vector of a
sample instead of five, and one weight fewer held in core registers.
m4_define(`SPA_MSDA_FOLD', 1)
Its blocks are eight vectors (32 channels): six accumulators in Q registers
(with an operand and a memory accumulator: all eight), two in the acc row (a
vldrw and a vstrw each per sample), so that a sample s corner pointers and
weights load once per 32 channels instead of once per 16.
m4_define(`SPA_MSDA_NB_MEM', 2)
m4_divert(0)m4_dnl
