m4_divert(-1)
NsaSelectedAttention float64 (templates/nsa/f64/nsa_select.c.m4): the G query
heads of a kv group are the lanes of register tiles (templates/f64/
nsa_select_mk.m4), so each key and value element is loaded once per group:
tiles of NSASD_R rows (key rows for the scores, value channels for the
output) by two vectors of SPA_VDL head lanes, the broadcasts and the two
operand vectors next to them. Eight rows where the layer has 32 vector
registers (16 accumulators), four where it has 16.
m4_define(`NSASD_R', m4_ifelse(m4_eval(SPA_VREGS >= 32), 1, 8, 4))
m4_define(`NSASD_RU', m4_ifelse(m4_eval(SPA_VREGS >= 32), 1, 4, 2))
m4_define(`NSAS64_KSYM', `SPA_KSYM(`nsa_select', `r'NSASD_R`l'm4_eval(2 * SPA_VDL))')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_select_f64.h"
#define SPA_KMACRO(`nsa_select') NSAS64_KSYM
spa_nsas_fwd_f64_kernel NSAS64_KSYM;')m4_dnl
