m4_divert(-1)
MultiScaleDeformableAttnFunction tile: TS staged samples of one (batch, head).
Staged per tile in one half of the unified buffer (the A2 kernels ping-pong
two halves): TS sample descriptors (4 corner addresses, 4 bilinear weights and
the attention weight, budgeted at 64 bytes), the four f32 corner rows of one
sample, the f32 accumulator row and the output row: MSDA_ROW_BYTES per
channel. TS is fitted here for C up to MSDA_REF_C; phase 1 halves it for a
larger C until the tile fits the same budget again (spa_msda_tile_samples, at
least 16 samples), so C itself has no bound. The kernel stages
max(1, TS / (nl * np)) whole queries per tile.
m4_define(`MSDA_REF_C', 256)
m4_define(`MSDA_DESC_BYTES', 64)
m4_define(`MSDA_ROW_BYTES', m4_eval(5 * 4 + SPA_SZ))
m4_define(`MSDA_BYTES',
  `m4_eval($1 * MSDA_DESC_BYTES + MSDA_REF_C * MSDA_ROW_BYTES)')
m4_define(`MSDA_TS', SPA_FIT_POW2(`MSDA_BYTES', 4096, m4_eval(SPA_UB_BYTES / 2)))
SPA_REQUIRE_FITS(`msda', MSDA_BYTES(MSDA_TS), m4_eval(SPA_UB_BYTES / 2))
m4_define(`MSDA_TILE', `s'MSDA_TS)
m4_define(`MSDA_KSYM', `SPA_KSYM(`msda', MSDA_TILE)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "msda_kernel.h"
#define SPA_KMACRO(`msda') MSDA_KSYM
#define SPA_MSDA_TS_`'SPA_UPPER(SPA_DT) MSDA_TS
#define SPA_MSDA_DESC_BYTES MSDA_DESC_BYTES
#define SPA_MSDA_ROW_BYTES_`'SPA_UPPER(SPA_DT) MSDA_ROW_BYTES
#define SPA_MSDA_TILE_BUDGET m4_eval(SPA_UB_BYTES / 2)
spa_msda_fwd_kernel MSDA_KSYM;')m4_dnl
