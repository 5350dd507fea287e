m4_divert(-1)
NsaSelectedAttentionGrad float64 (templates/nsa/f64/nsa_select_grad.c.m4): one
query head at a time, P and dS in the range's scratch (no tile).
m4_define(`NSASG64_KSYM', `SPA_KSYM(`nsa_select_grad', `h1')')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_select_f64.h"
#define SPA_KMACRO(`nsa_select_grad') NSASG64_KSYM
spa_nsas_grad_f64_kernel NSASG64_KSYM;')m4_dnl
