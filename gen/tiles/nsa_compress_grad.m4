m4_divert(-1)
NsaCompressGrad tile: TT tokens x TC channels (whole heads of a token row).
Staged per tile: the TT input rows and TT inputGrad rows in the dtype, the
outputGrad rows of every window touching the tile widened to f32 (TT/16 + 8
rows at stride 16 and block 128, the NPU's extremes), and two f32 rows (the
widened input row and the inputGrad accumulator). For smaller strides or
longer blocks the plan halves the tokens per tile until the rows fit these
TT/16 + 8 (src/nsa/nsa_compress_grad.c); heads wider than TC channels run as
channel slices of TC (spa_nsac_slice).
m4_define(`NSACG_TC', 1024)
m4_define(`NSACG_BYTES',
  `m4_eval(2 * $1 * NSACG_TC * SPA_SZ + ($1 / 16 + 8) * NSACG_TC * 4 + 2 * NSACG_TC * 4)')
m4_define(`NSACG_TT', SPA_FIT_POW2(`NSACG_BYTES', 4096, SPA_UB_BYTES))
SPA_REQUIRE_FITS(`nsa_compress_grad', NSACG_BYTES(NSACG_TT), SPA_UB_BYTES)
m4_define(`NSACG_TILE', `t'NSACG_TT`c'NSACG_TC)
m4_define(`NSACG_KSYM', `SPA_KSYM(`nsa_compress_grad', NSACG_TILE)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_compress_kernel.h"
#define SPA_KMACRO(`nsa_compress_grad') NSACG_KSYM
#define SPA_NSACG_TT_`'SPA_UPPER(SPA_DT) NSACG_TT
#define SPA_NSACG_TC_`'SPA_UPPER(SPA_DT) NSACG_TC
spa_nsac_grad_kernel NSACG_KSYM;')m4_dnl
