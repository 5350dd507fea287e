m4_divert(-1)
NsaCompressAttention float64 (templates/f64/nsa_compress_attention.c.m4):
one query head at a time, its scores in the block scratch (no tile).
m4_define(`NSCA64_KSYM', `SPA_KSYM(`nsa_compress_attention', `h1')')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "nsa_cattn_kernel.h"
#define SPA_KMACRO(`nsa_compress_attention') NSCA64_KSYM
spa_nsca_fwd_kernel NSCA64_KSYM;')m4_dnl
