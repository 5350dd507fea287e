m4_divert(-1)
Sliding-window attention grad float64 (templates/f64/swa_grad.c.m4): one
query head at a time over its band (no tile).
m4_define(`SWAG64_KSYM', `SPA_KSYM(`swa_grad', `h1')')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "swa_kernel.h"
#define SPA_KMACRO(`swa_grad') SWAG64_KSYM
spa_swa_grad_kernel SWAG64_KSYM;')m4_dnl
