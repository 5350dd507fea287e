m4_divert(-1)
LightningIndexer score tile: TK key rows per kernel call, gathered as f32
(src/dsa/dsa_lightning_indexer.c), against every query head of the token.
Held per call (as on one A2 vector core): TK f32 rows of the largest head
dim (768) plus the TK x 32 f32 score slice of one chunk of heads. TK >= 16
so that every score tile of the select micro-kernels divides it. The
kernel reads f32 rows whatever the inputs' dtype (the driver widens them),
so it is generated once, with the f32 kernels (mk/ops.mk, F32_ONLY_KERNELS).
m4_define(`DSLI_DMAX', 768)
m4_define(`DSLI_BYTES', `m4_eval($1 * DSLI_DMAX * 4 + $1 * 32 * 4)')
m4_define(`DSLI_TK', SPA_FIT_POW2(`DSLI_BYTES', 128, SPA_UB_BYTES))
m4_ifelse(m4_eval(DSLI_TK < 16), 1, `m4_errprint(`spattn gen: dsa_lightning_indexer needs a tile of 16 rows
')m4_m4exit(1)')
SPA_REQUIRE_FITS(`dsa_lightning_indexer', DSLI_BYTES(DSLI_TK), SPA_UB_BYTES)
m4_define(`DSLI_KSYM', `SPA_KSYM(`dsa_lightning_indexer', `k'DSLI_TK)')
m4_divert(0)m4_dnl
m4_ifelse(SPA_DT, `f32', `SPA_ADD_DECL(`#include "dsa_li_kernel.h"
#define SPA_K_DSA_LIGHTNING_INDEXER DSLI_KSYM
#define SPA_DSLI_TK DSLI_TK
spa_dsli_kernel DSLI_KSYM;')')m4_dnl
