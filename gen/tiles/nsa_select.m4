m4_divert(-1)
NsaSelectedAttention forward tile: TK key (then value) rows of one selected
block per micro-step, read as f32 (in place or widened once per call, see
src/nsa/nsa_select_pack.h). Held per step (as on one A2 vector core): TK f32 rows
of the largest head dim (768) plus the TK x 32 f32 score slice of a group of
up to 32 query heads. TK >= 16 so that every micro-kernel row tile divides
it (block sizes are multiples of 16).
m4_define(`NSAS_DMAX', 768)
m4_define(`NSAS_BYTES', `m4_eval($1 * NSAS_DMAX * 4 + $1 * 32 * 4)')
m4_define(`NSAS_TK', SPA_FIT_POW2(`NSAS_BYTES', 128, SPA_UB_BYTES))
m4_ifelse(m4_eval(NSAS_TK < 16), 1, `m4_errprint(`spattn gen: nsa_select needs a tile of 16 rows
')m4_m4exit(1)')
SPA_REQUIRE_FITS(`nsa_select', NSAS_BYTES(NSAS_TK), SPA_UB_BYTES)
m4_define(`NSAS_TILE', `k'NSAS_TK)
m4_define(`NSAS_KSYM', `SPA_KSYM(`nsa_select', NSAS_TILE)')
The decode path's parts of a half-dtype row (spa_nsas_args.split): the same
forward under its own name, so that the whole-row kernel compiles as before.
m4_define(`NSAS_KSYM_SPLIT', `SPA_KSYM(`nsa_select', NSAS_TILE`_split')')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_select_kernel.h"
#define SPA_KMACRO(`nsa_select') NSAS_KSYM
#define SPA_KMACRO(`nsa_select_split') NSAS_KSYM_SPLIT
spa_nsas_fwd_kernel NSAS_KSYM;
spa_nsas_fwd_kernel NSAS_KSYM_SPLIT;')m4_dnl
