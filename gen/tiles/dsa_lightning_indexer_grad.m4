m4_divert(-1)
LightningIndexerGrad tile: TK gathered key rows per kernel call (f32,
widened by src/dsa/dsa_lightning_indexer_grad.c), against every query head
of the token. Held per call: TK f32 key rows and TK dk rows of the largest
head dim (768), plus the TK x 32 f32 score slice of one chunk of heads. TK
>= 16 so that every tile of the select micro-kernels divides it. f32 rows
whatever the inputs' dtype: generated once, with the f32 kernels.
m4_define(`DSLIG_DMAX', 768)
m4_define(`DSLIG_BYTES', `m4_eval(2 * $1 * DSLIG_DMAX * 4 + $1 * 32 * 4)')
m4_define(`DSLIG_TK', SPA_FIT_POW2(`DSLIG_BYTES', 128, SPA_UB_BYTES))
m4_ifelse(m4_eval(DSLIG_TK < 16), 1, `m4_errprint(`spattn gen: dsa_lightning_indexer_grad needs a tile of 16 rows
')m4_m4exit(1)')
SPA_REQUIRE_FITS(`dsa_lightning_indexer_grad', DSLIG_BYTES(DSLIG_TK), SPA_UB_BYTES)
m4_define(`DSLIG_KSYM', `SPA_KSYM(`dsa_lightning_indexer_grad', `k'DSLIG_TK)')
m4_divert(0)m4_dnl
m4_ifelse(SPA_DT, `f32', `SPA_ADD_DECL(`#include "dsa_li_kernel.h"
#define SPA_K_DSA_LIGHTNING_INDEXER_GRAD DSLIG_KSYM
#define SPA_DSLI_GRAD_TK DSLIG_TK
spa_dsli_grad_kernel DSLIG_KSYM;')')m4_dnl
