m4_divert(-1)
MultiScaleDeformableAttentionGrad, float64 (templates/msda/f64/msda_grad.c.m4):
one vector of SPA_VDL channels per step of a sample's channel loop (the four
corner rows, their four gradValue rows, gradOutput and the three running
sums take most of 16 registers), a partial vector for the tail of C.
m4_define(`MSDADG_KSYM', `SPA_KSYM(`msda_grad', `v1')')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "msda_f64.h"
#define SPA_KMACRO(`msda_grad') MSDADG_KSYM
spa_msda_f64_grad_kernel MSDADG_KSYM;')m4_dnl
