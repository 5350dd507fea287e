/* Contract between src/swa*.c and the generated kernels of
 * templates/swa*.c.m4 (f32 compute) and templates/f64/swa*.c.m4. All
 * strides are in elements. */
#ifndef SPA_SWA_KERNEL_H
#define SPA_SWA_KERNEL_H

#include <stdint.h>

#include "half.h"
#include "spa_dtypes.h"

/* float64 kernels are built where the target's DTYPES has f64. */
#define SPA_FLOAT64_SWA SPA_HAVE_F64

/* Query heads of one kernel pass: a group of G heads runs in sub-groups of
 * at most this many (the micro-kernels' widest lane count). */
#define SPA_SWA_SUBGROUP 32

typedef struct spa_swa_args {
    const void *q; /* query [T, N1, D] */
    int64_t qs0, qs1, qs2;
    const float *kf; /* f32 key rows of the kv head being run: row p at kf + p * kfr, dp
                      * floats read (a tail past d is 0) */
    int64_t kfr;
    const float *vf; /* value rows, the same way */
    int64_t vfr;
    const void *k, *v; /* float64 kernels: the caller's key / value, read in place */
    int64_t ks0, ks1, ks2, vs0, vs1, vs2;
    void *o; /* attentionOut [T, N1, Dv]: forward writes, grad reads */
    int64_t os0, os1, os2;
    void *mx; /* softmaxMax [T, N1(, 8)] */
    int64_t ms0, ms1, ms2;
    void *sm; /* softmaxSum, the same shape */
    int64_t ss0, ss1, ss2;
    int64_t lanes; /* 8 or 1: the statistics' copies per row */
    const void *dy; /* grad: attentionOutGrad [T, N1, Dv] */
    int64_t dys0, dys1, dys2;
    void *dq; /* grad: dqOut [T, N1, D] */
    int64_t dqs0, dqs1, dqs2;
    int64_t g;       /* query heads per kv head */
    int64_t gp;      /* lanes of a sub-group of min(g, SPA_SWA_SUBGROUP) heads: 8, 16 or 32 */
    int64_t d, dv;   /* head dims */
    int64_t dp, dvp; /* d, dv rounded up to 16 */
    int64_t left;    /* keys before the query in its band (INT64_MAX: unbounded) */
    float scale;
    double scale64;
} spa_swa_args;

/* First key of the band of query token t of the batch starting at bstart. */
static inline int64_t spa_swa_lo(int64_t t, int64_t bstart, int64_t left)
{
    const int64_t lo = t - left; /* t >= 0, left >= 0: no overflow */
    return lo > bstart ? lo : bstart;
}

/* Forward: query tokens [t0, t1) of kv head h2, all in the batch whose
 * tokens start at bstart. */
typedef void spa_swa_fwd_kernel(const spa_swa_args *a, int64_t h2, int64_t t0, int64_t t1,
                                int64_t bstart, void *scratch);

/* Grad: query tokens [t0, t1) of one batch, kv head h2. Writes dq of those
 * tokens and adds their dK (unscaled) / dV rows into the partials dkp
 * [rows][dp] and dvp [rows][dvp] (float64 kernels: [rows][d] / [rows][dv]
 * doubles), whose row 0 is key row kvlo. */
typedef void spa_swa_grad_kernel(const spa_swa_args *a, int64_t h2, int64_t t0, int64_t t1,
                                 int64_t bstart, int64_t kvlo, void *dkp, void *dvp,
                                 void *scratch);

#endif
