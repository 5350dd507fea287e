m4_divert(-1)
NsaSelectedAttentionGrad tile: TK rows of one selected block per micro-step;
the value rows (for dP) and then the key rows (for S, dQ) are read as f32 (in
place or widened once per call, see src/nsa/nsa_select_pack.h). Held per step:
TK f32 rows of the largest head dim (768), plus two TK x 32 f32 slices (S/P
and dP/dS) of a group of up to 32 query heads. TK >= 16 (block sizes are
multiples of 16).
m4_define(`NSASG_DMAX', 768)
m4_define(`NSASG_BYTES', `m4_eval($1 * NSASG_DMAX * 4 + 2 * $1 * 32 * 4)')
m4_define(`NSASG_TK', SPA_FIT_POW2(`NSASG_BYTES', 128, SPA_UB_BYTES))
m4_ifelse(m4_eval(NSASG_TK < 16), 1, `m4_errprint(`spattn gen: nsa_select_grad needs a tile of 16 rows
')m4_m4exit(1)')
SPA_REQUIRE_FITS(`nsa_select_grad', NSASG_BYTES(NSASG_TK), SPA_UB_BYTES)
m4_define(`NSASG_TILE', `k'NSASG_TK)
m4_define(`NSASG_KSYM', `SPA_KSYM(`nsa_select_grad', NSASG_TILE)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_select_kernel.h"
#define SPA_KMACRO(`nsa_select_grad') NSASG_KSYM
#define SPA_NSASG_TK_`'SPA_UPPER(SPA_DT) NSASG_TK
spa_nsas_grad_kernel NSASG_KSYM;')m4_dnl
