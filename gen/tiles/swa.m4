m4_divert(-1)
Sliding-window attention forward tile: KT keys of the band per step of the
online softmax (a query tile of one kv group against a key tile). Held per
step (as on one A2 vector core): KT f32 key (then value) rows of a head dim
of 128 plus the KT x 32 f32 score slice of a sub-group of up to 32 query
heads. KT >= 16 (the micro-kernels score 16 rows at a time); at most 256.
m4_define(`SWA_DREF', 128)
m4_define(`SWA_BYTES', `m4_eval($1 * SWA_DREF * 4 + $1 * 32 * 4)')
m4_define(`SWA_KT', SPA_FIT_POW2(`SWA_BYTES', 256, SPA_UB_BYTES))
m4_ifelse(m4_eval(SWA_KT < 16), 1, `m4_errprint(`spattn gen: swa needs a tile of 16 rows
')m4_m4exit(1)')
SPA_REQUIRE_FITS(`swa', SWA_BYTES(SWA_KT), SPA_UB_BYTES)
m4_define(`SWA_TILE', `k'SWA_KT)
m4_define(`SWA_KSYM', `SPA_KSYM(`swa', SWA_TILE)')
SWA_MK(name): a micro-kernel shared by the sliding-window kernels of every
dtype (f32 compute), defined in the f32 forward: spa_mk_swa_<name>_<isa>;
SWA_MK_DECLS: their prototypes.
m4_define(`SWA_MK', `spa_mk_swa_$1_'SPA_ISA)
m4_define(`SWA_MK_DECLS', `void SWA_MK(`scores')(const float *a, int64_t lda, int64_t rows, const float *bt, int64_t n,
                      int64_t gp, float *out);
void SWA_MK(`accum')(const float *a, int64_t lda, int64_t rows, const float *p, int64_t n,
                     int64_t gp, float *acc);
void SWA_MK(`rows_add')(const float *w, int64_t rows, int64_t gp, const float *b, int64_t g,
                        int64_t n, float *out);
')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "swa_kernel.h"
#define SPA_KMACRO(`swa') SWA_KSYM
#define SPA_SWA_KT_`'SPA_UPPER(SPA_DT) SWA_KT
spa_swa_fwd_kernel SWA_KSYM;')m4_dnl
