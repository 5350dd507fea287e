m4_dnl The kernel list: declarations of every generated kernel of one dtype.
m4_dnl Adding an op: its gen/tiles/<op>.m4 defines <PREFIX>_DECL; list it here.
SPA_STAMP
#ifndef SPA_UPPER(`SPA_KERNELS_'SPA_DT`_H')
#define SPA_UPPER(`SPA_KERNELS_'SPA_DT`_H')

#include "nsa_compress_kernel.h"

NSAC_DECL
NSACG_DECL

#endif
