m4_divert(-1)
NsaSelectedAttention float64 (templates/nsa/f64/nsa_select.c.m4): one query
head at a time, its scores in the block's scratch (no tile).
m4_define(`NSAS64_KSYM', `SPA_KSYM(`nsa_select', `h1')')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_select_f64.h"
#define SPA_KMACRO(`nsa_select') NSAS64_KSYM
spa_nsas_fwd_f64_kernel NSAS64_KSYM;')m4_dnl
