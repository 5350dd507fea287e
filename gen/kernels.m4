m4_dnl The kernel list: declarations of every generated kernel of one dtype,
m4_dnl collected from gen/tiles/*.m4 (each calls SPA_ADD_DECL).
SPA_STAMP
#ifndef SPA_UPPER(`SPA_KERNELS_'SPA_DT`_H')
#define SPA_UPPER(`SPA_KERNELS_'SPA_DT`_H')

SPA_DECLS
#endif
