m4_divert(-1)
NsaCompressGrad float64 (templates/nsa/f64/nsa_compress_grad.c.m4): blocks of a
multiple of NSACG64_TT tokens (the parallel grain), no staging: the f32
tile's scratch is not used.
m4_define(`NSACG64_TT', 64)
m4_define(`NSACG64_KSYM', `SPA_KSYM(`nsa_compress_grad', `t'NSACG64_TT)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_compress_f64.h"
#define SPA_KMACRO(`nsa_compress_grad') NSACG64_KSYM
#define SPA_NSACG_TT_F64 NSACG64_TT
#define SPA_NSACG_TC_F64 1
spa_nsac_grad_f64_kernel NSACG64_KSYM;')m4_dnl
