m4_divert(-1)
MultiScaleDeformableAttentionGrad tile: TS staged samples of one (batch, head).
Staged per tile in one half of the unified buffer: TS sample descriptors
(4 corner value addresses, 4 gradValue addresses, 4 weights, the attention
weight, the fractions and the level size, budgeted at 128 bytes), the four
f32 corner rows of one sample and their four gradValue rows, the f32
gradOutput row and four f32 sink rows for corners outside the map:
MSDAG_ROW_BYTES per channel. TS is fitted here for C up to MSDAG_REF_C;
phase 1 halves it for a larger C until the tile fits the same budget again
(spa_msda_tile_samples, at least 16 samples), so C itself has no bound.
m4_define(`MSDAG_REF_C', 256)
m4_define(`MSDAG_DESC_BYTES', 128)
m4_define(`MSDAG_ROW_BYTES', m4_eval(13 * 4))
m4_define(`MSDAG_BYTES',
  `m4_eval($1 * MSDAG_DESC_BYTES + MSDAG_REF_C * MSDAG_ROW_BYTES)')
m4_define(`MSDAG_TS', SPA_FIT_POW2(`MSDAG_BYTES', 4096, m4_eval(SPA_UB_BYTES / 2)))
SPA_REQUIRE_FITS(`msda_grad', MSDAG_BYTES(MSDAG_TS), m4_eval(SPA_UB_BYTES / 2))
m4_define(`MSDAG_TILE', `s'MSDAG_TS)
m4_define(`MSDAG_KSYM', `SPA_KSYM(`msda_grad', MSDAG_TILE)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "msda_kernel.h"
#define SPA_KMACRO(`msda_grad') MSDAG_KSYM
#define SPA_MSDAG_TS_`'SPA_UPPER(SPA_DT) MSDAG_TS
#define SPA_MSDAG_DESC_BYTES MSDAG_DESC_BYTES
#define SPA_MSDAG_ROW_BYTES_`'SPA_UPPER(SPA_DT) MSDAG_ROW_BYTES
#define SPA_MSDAG_TILE_BUDGET m4_eval(SPA_UB_BYTES / 2)
spa_msda_grad_kernel MSDAG_KSYM;')m4_dnl
