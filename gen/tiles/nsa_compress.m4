m4_divert(-1)
NsaCompress forward tile: TW windows x TC channels, where the channels are
whole heads of a token row (TC / D heads at a time, so a token's heads are read
as one contiguous run). Staged per tile, as on one A2 vector core: the TW x TC
f32 accumulators, the TW x TC output rows, and one stride (16 rows at the
smallest stride) of input rows in the dtype and widened to f32. The tile has
1024 channels unless the ISA asks for fewer (SPA_NSAC_TC in gen/isa/<isa>.m4):
fewer channels give more windows per tile, the register tiles then sliding
along more windows of a head before the tile ends. Heads wider than TC
channels run as channel slices of TC (spa_nsac_slice), so the tile holds for
any head dim.
m4_define(`NSAC_TC', m4_ifdef(`SPA_NSAC_TC', `SPA_NSAC_TC', 1024))
m4_define(`NSAC_BYTES',
  `m4_eval($1 * NSAC_TC * 4 + $1 * NSAC_TC * SPA_SZ + 16 * NSAC_TC * (SPA_SZ + 4))')
m4_define(`NSAC_TW', SPA_FIT_POW2(`NSAC_BYTES', 64, SPA_UB_BYTES))
SPA_REQUIRE_FITS(`nsa_compress', NSAC_BYTES(NSAC_TW), SPA_UB_BYTES)
m4_define(`NSAC_TILE', `w'NSAC_TW`c'NSAC_TC)
m4_define(`NSAC_KSYM', `SPA_KSYM(`nsa_compress', NSAC_TILE)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_compress_kernel.h"
#define SPA_KMACRO(`nsa_compress') NSAC_KSYM
#define SPA_NSAC_TW_`'SPA_UPPER(SPA_DT) NSAC_TW
#define SPA_NSAC_TC_`'SPA_UPPER(SPA_DT) NSAC_TC
spa_nsac_fwd_kernel NSAC_KSYM;')m4_dnl
