/* fp64 reference of MultiScaleDeformableAttnFunction and its grad, written
 * from spec/msda.md 5 and 6, sharing no code with the library. Tensors are
 * dense row-major double arrays; each output comes with the magnitude
 * sum(|term|) that bounds its rounding error. */
#ifndef SPA_REF_MSDA_H
#define SPA_REF_MSDA_H

#include <stdint.h>

typedef struct ref_msda_shape {
    int64_t bs, nk, nh, c, nq, nl, np;
    const int64_t *h, *w, *start; /* per level */
} ref_msda_shape;

/* Sampling coordinates. REF_COORD_F32: x = fl32(fl32(loc * W) - 0.5) as the
 * spec computes them, so that samples fall in the same cells (and the same
 * side of every border) as in any conforming fp32 implementation; the rest is
 * fp64. REF_COORD_EXACT: x = loc * W - 0.5 in fp64 (finite differences). */
enum { REF_COORD_F32 = 0, REF_COORD_EXACT = 1 };

/* value [bs,nk,nh,C], loc [bs,nq,nh,nl,np,2] (x, y), attn [bs,nq,nh,nl,np];
 * out/mag [bs,nq,nh*C]. */
void ref_msda(const ref_msda_shape *s, const double *value, const double *loc, const double *attn,
              int coord, double *out, double *mag);

/* gout [bs,nq,nh*C]; gv/gv_mag like value, gl/gl_mag like loc, ga/ga_mag like attn. */
void ref_msda_grad(const ref_msda_shape *s, const double *value, const double *loc,
                   const double *attn, const double *gout, int coord, double *gv, double *gv_mag,
                   double *gl, double *gl_mag, double *ga, double *ga_mag);

#endif
