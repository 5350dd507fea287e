m4_divert(-1)
NsaCompressAttention grad tile: TK compressed rows per micro-step (value
rows for dP, key rows for S and dQ), as f32. Held per step: TK f32 rows of
the largest head dim (768) plus two TK x 32 f32 slices (P and dP / dS) of
one lane group. TK >= 16.
m4_define(`NSCAG_DMAX', 768)
m4_define(`NSCAG_BYTES', `m4_eval($1 * NSCAG_DMAX * 4 + 2 * $1 * 32 * 4)')
m4_define(`NSCAG_TK', SPA_FIT_POW2(`NSCAG_BYTES', 128, SPA_UB_BYTES))
m4_ifelse(m4_eval(NSCAG_TK < 16), 1, `m4_errprint(`spattn gen: nsa_compress_attention_grad needs a tile of 16 rows
')m4_m4exit(1)')
SPA_REQUIRE_FITS(`nsa_compress_attention_grad', NSCAG_BYTES(NSCAG_TK), SPA_UB_BYTES)
m4_define(`NSCAG_KSYM', `SPA_KSYM(`nsa_compress_attention_grad', `k'NSCAG_TK)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_cattn_kernel.h"
#define SPA_KMACRO(`nsa_compress_attention_grad') NSCAG_KSYM
spa_nsca_grad_kernel NSCAG_KSYM;')m4_dnl
