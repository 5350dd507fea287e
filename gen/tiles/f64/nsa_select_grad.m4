m4_divert(-1)
NsaSelectedAttentionGrad float64 (templates/nsa/f64/nsa_select_grad.c.m4): the
tiles of the forward (gen/tiles/f64/nsa_select.m4) for S, dP and dQ, and for
the dK / dV partial rows tiles of NSASD_RU rows by four vectors along
the head dim, summed over the heads of the group. (The sizes are those of
nsa_select.m4, defined here too should the order of the files change.)
m4_ifdef(`NSASD_R', `', `m4_define(`NSASD_R', m4_ifelse(m4_eval(SPA_VREGS >= 32), 1, 8, 4))')
m4_ifdef(`NSASD_RU', `', `m4_define(`NSASD_RU', m4_ifelse(m4_eval(SPA_VREGS >= 32), 1, 4, 2))')
m4_define(`NSASG64_KSYM', `SPA_KSYM(`nsa_select_grad', `r'NSASD_R`l'm4_eval(2 * SPA_VDL)`u'NSASD_RU)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_select_f64.h"
#define SPA_KMACRO(`nsa_select_grad') NSASG64_KSYM
spa_nsas_grad_f64_kernel NSASG64_KSYM;')m4_dnl
