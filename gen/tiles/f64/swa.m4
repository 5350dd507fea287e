m4_divert(-1)
Sliding-window attention float64 (templates/f64/swa.c.m4): one query head
at a time, two passes over its band (no tile).
m4_define(`SWA64_KSYM', `SPA_KSYM(`swa', `h1')')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "swa_kernel.h"
#define SPA_KMACRO(`swa') SWA64_KSYM
spa_swa_fwd_kernel SWA64_KSYM;')m4_dnl
