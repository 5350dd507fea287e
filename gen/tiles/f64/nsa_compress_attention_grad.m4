m4_divert(-1)
NsaCompressAttention grad float64 (templates/f64/nsa_compress_attention_grad.c.m4):
one query head at a time, P and dS in the block scratch (no tile).
m4_define(`NSCAG64_KSYM', `SPA_KSYM(`nsa_compress_attention_grad', `h1')')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_cattn_kernel.h"
#define SPA_KMACRO(`nsa_compress_attention_grad') NSCAG64_KSYM
spa_nsca_grad_kernel NSCAG64_KSYM;')m4_dnl
