m4_divert(-1)
NsaCompress forward tile: TW windows x TD channels of one head.
Staged per tile (as on one A2 vector core): the input rows the TW windows span
at the smallest stride and largest block ((TW-1)*16 + 128 rows of TD elements),
the TW x TD f32 accumulators and the TW x TD output rows.
TD is the largest head dim (256), so a head row is never split.
m4_define(`NSAC_TD', 256)
m4_define(`NSAC_BYTES',
  `m4_eval((($1 - 1) * 16 + 128) * NSAC_TD * SPA_SZ + $1 * NSAC_TD * 4 + $1 * NSAC_TD * SPA_SZ)')
m4_define(`NSAC_TW', SPA_FIT_POW2(`NSAC_BYTES', 64, SPA_UB_BYTES))
SPA_REQUIRE_FITS(`nsa_compress', NSAC_BYTES(NSAC_TW), SPA_UB_BYTES)
m4_define(`NSAC_TILE', `w'NSAC_TW`d'NSAC_TD)
m4_define(`NSAC_KSYM', `SPA_KSYM(`nsa_compress', NSAC_TILE)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_compress_kernel.h"
#define SPA_KMACRO(`nsa_compress') NSAC_KSYM
#define SPA_NSAC_TW_`'SPA_UPPER(SPA_DT) NSAC_TW
#define SPA_NSAC_TD_`'SPA_UPPER(SPA_DT) NSAC_TD
spa_nsac_fwd_kernel NSAC_KSYM;')m4_dnl
