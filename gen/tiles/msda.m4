m4_divert(-1)
MultiScaleDeformableAttnFunction tile: TS staged samples of one (batch, head).
Staged per tile in one half of the unified buffer (the A2 kernels ping-pong
two halves): TS sample descriptors (4 corner addresses, 4 bilinear weights and
the attention weight, budgeted at 64 bytes), the four f32 corner rows of one
sample, the f32 accumulator row and the output row of the largest C (256).
The kernel stages max(1, TS / (nl * np)) whole queries per tile.
m4_define(`MSDA_CMAX', 256)
m4_define(`MSDA_DESC_BYTES', 64)
m4_define(`MSDA_BYTES',
  `m4_eval($1 * MSDA_DESC_BYTES + 5 * MSDA_CMAX * 4 + MSDA_CMAX * SPA_SZ)')
m4_define(`MSDA_TS', SPA_FIT_POW2(`MSDA_BYTES', 4096, m4_eval(SPA_UB_BYTES / 2)))
SPA_REQUIRE_FITS(`msda', MSDA_BYTES(MSDA_TS), m4_eval(SPA_UB_BYTES / 2))
m4_define(`MSDA_TILE', `s'MSDA_TS)
m4_define(`MSDA_KSYM', `SPA_KSYM(`msda', MSDA_TILE)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "msda_kernel.h"
#define SPA_KMACRO(`msda') MSDA_KSYM
#define SPA_MSDA_TS_`'SPA_UPPER(SPA_DT) MSDA_TS
spa_msda_fwd_kernel MSDA_KSYM;')m4_dnl
