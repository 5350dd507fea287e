m4_divert(-1)
NsaCompressAttention forward tile: TK compressed key (then value) rows per
micro-step, read as f32 (packed once per call and kv head, see
src/nsa/nsa_cattn_plan.h). Held per step (as on one A2 vector core): TK f32 rows
of the largest head dim (768) plus the TK x 32 f32 score slice of one lane
group (query tokens x heads of a kv head, 32 lanes). TK >= 16: the
micro-kernels work in row tiles of 16.
m4_define(`NSCA_DMAX', 768)
m4_define(`NSCA_BYTES', `m4_eval($1 * NSCA_DMAX * 4 + $1 * 32 * 4)')
m4_define(`NSCA_TK', SPA_FIT_POW2(`NSCA_BYTES', 128, SPA_UB_BYTES))
m4_ifelse(m4_eval(NSCA_TK < 16), 1, `m4_errprint(`spattn gen: nsa_compress_attention needs a tile of 16 rows
')m4_m4exit(1)')
SPA_REQUIRE_FITS(`nsa_compress_attention', NSCA_BYTES(NSCA_TK), SPA_UB_BYTES)
m4_define(`NSCA_KSYM', `SPA_KSYM(`nsa_compress_attention', `k'NSCA_TK)')
The inference op's parts (spa_nsca_args.split): the same forward under its
own name, so that the whole-unit kernel compiles as before.
m4_define(`NSCA_KSYM_SPLIT', `SPA_KSYM(`nsa_compress_attention', `k'NSCA_TK`_split')')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_cattn_kernel.h"
#define SPA_KMACRO(`nsa_compress_attention') NSCA_KSYM
#define SPA_KMACRO(`nsa_compress_attention_split') NSCA_KSYM_SPLIT
spa_nsca_fwd_kernel NSCA_KSYM;
spa_nsca_fwd_kernel NSCA_KSYM_SPLIT;')m4_dnl
