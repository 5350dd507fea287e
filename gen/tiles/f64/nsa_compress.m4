m4_divert(-1)
NsaCompress float64 (templates/nsa/f64/nsa_compress.c.m4): blocks of NSAC64_TW
windows (the parallel grain; the kernel walks each window's token rows in
chunks of SPA_F64_NV vectors of double, src/core/f64_rows.h), its sums in the
block's scratch: one window row, N*D doubles.
m4_define(`NSAC64_TW', 8)
m4_define(`NSAC64_KSYM', `SPA_KSYM(`nsa_compress', `w'NSAC64_TW)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_compress_kernel.h"
#define SPA_KMACRO(`nsa_compress') NSAC64_KSYM
#define SPA_NSAC_TW_F64 NSAC64_TW
#define SPA_NSAC_TC_F64 1
spa_nsac_fwd_kernel NSAC64_KSYM;')m4_dnl
