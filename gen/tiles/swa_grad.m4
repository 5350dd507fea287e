m4_divert(-1)
Sliding-window attention grad tile: KT keys of the band per step. Held per
step: KT f32 key and value rows of a head dim of 128, plus two KT x 32 f32
slices (S / P and dP / dS) of a sub-group of up to 32 query heads.
KT >= 16; at most 256.
m4_define(`SWAG_DREF', 128)
m4_define(`SWAG_BYTES', `m4_eval(2 * $1 * SWAG_DREF * 4 + 2 * $1 * 32 * 4)')
m4_define(`SWAG_KT', SPA_FIT_POW2(`SWAG_BYTES', 256, SPA_UB_BYTES))
m4_ifelse(m4_eval(SWAG_KT < 16), 1, `m4_errprint(`spattn gen: swa_grad needs a tile of 16 rows
')m4_m4exit(1)')
SPA_REQUIRE_FITS(`swa_grad', SWAG_BYTES(SWAG_KT), SPA_UB_BYTES)
m4_define(`SWAG_TILE', `k'SWAG_KT)
m4_define(`SWAG_KSYM', `SPA_KSYM(`swa_grad', SWAG_TILE)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "swa_kernel.h"
#define SPA_KMACRO(`swa_grad') SWAG_KSYM
#define SPA_SWAG_KT_`'SPA_UPPER(SPA_DT) SWAG_KT
spa_swa_grad_kernel SWAG_KSYM;')m4_dnl
