/* Row helpers of the float64 kernels (templates/f64/), over the layer's
 * double lanes (spa_vd, SPA_VDL; src/isa/f64_*.h): a row of any length n is
 * walked in chunks of SPA_F64_CH doubles (SPA_F64_NV vectors), the last
 * chunk a tail read and written with the layer's _n forms, never past the
 * row. A row whose elements are not adjacent (stride != 1) is copied into a
 * chunk buffer first, so the arithmetic, and so every result, is the same
 * whatever the strides. Included by the generated kernels after half.h. */
#ifndef SPA_F64_ROWS_H
#define SPA_F64_ROWS_H

#include <stdint.h>

#define SPA_F64_NV 4
#define SPA_F64_CH (SPA_F64_NV * SPA_VDL)

/* Vector v (< SPA_F64_NV) of a chunk at p with nd valid elements: lanes
 * past nd read as +0 and are not read. Inlined with a constant nd (a full
 * chunk) the tests fold away. */
SPA_ISA_INLINE spa_vd spa_f64_ld(const double *p, int v, int64_t nd)
{
    const int64_t lo = (int64_t)v * SPA_VDL;
    if (nd >= lo + SPA_VDL)
        return spa_vd_load(p + lo);
    return nd > lo ? spa_vd_load_n(p + lo, nd - lo) : spa_vd_zero();
}
SPA_ISA_INLINE void spa_f64_st(double *p, int v, int64_t nd, spa_vd x)
{
    const int64_t lo = (int64_t)v * SPA_VDL;
    if (nd >= lo + SPA_VDL)
        spa_vd_store(p + lo, x);
    else if (nd > lo)
        spa_vd_store_n(p + lo, x, nd - lo);
}

/* The n (<= SPA_F64_CH) elements p[k*s] as a unit-stride run: p itself
 * when s == 1, else a copy in buf. */
SPA_ISA_INLINE const double *spa_f64_unit(const double *p, int64_t s, int64_t n, double *buf)
{
    if (s == 1)
        return p;
    for (int64_t k = 0; k < n; k++)
        buf[k] = p[k * s];
    return buf;
}
/* Where a chunk of n results goes: p itself when s == 1, else buf, then
 * spa_f64_scatter. */
SPA_ISA_INLINE double *spa_f64_out(double *p, int64_t s, double *buf) { return s == 1 ? p : buf; }
SPA_ISA_INLINE void spa_f64_scatter(double *p, int64_t s, int64_t n, const double *buf)
{
    if (s != 1)
        for (int64_t k = 0; k < n; k++)
            p[k * s] = buf[k];
}

/* sum_k a[k*sa] * b[k*sb], k < n: per lane a fused (or multiply-add) chain
 * over the chunks, the SPA_F64_NV vectors then added in order and the lanes
 * by halves. A fixed order for given n: never depends on the runner. */
SPA_ISA_INLINE void spa_f64_dot_chunk(spa_vd *acc, const double *a, const double *b, int64_t nd)
{
    for (int v = 0; v < SPA_F64_NV; v++)
        acc[v] = spa_vd_fma(acc[v], spa_f64_ld(a, v, nd), spa_f64_ld(b, v, nd));
}
static inline double spa_f64_dot(const double *a, int64_t sa, const double *b, int64_t sb, int64_t n)
{
    spa_vd acc[SPA_F64_NV];
    double ba[SPA_F64_CH], bb[SPA_F64_CH];
    for (int v = 0; v < SPA_F64_NV; v++)
        acc[v] = spa_vd_zero();
    int64_t d = 0;
    for (; d + SPA_F64_CH <= n; d += SPA_F64_CH)
        spa_f64_dot_chunk(acc, spa_f64_unit(a + d * sa, sa, SPA_F64_CH, ba),
                          spa_f64_unit(b + d * sb, sb, SPA_F64_CH, bb), SPA_F64_CH);
    if (d < n)
        spa_f64_dot_chunk(acc, spa_f64_unit(a + d * sa, sa, n - d, ba),
                          spa_f64_unit(b + d * sb, sb, n - d, bb), n - d);
    spa_vd s = acc[0];
    for (int v = 1; v < SPA_F64_NV; v++)
        s = spa_vd_add(s, acc[v]);
    return spa_vd_hsum(s);
}

#endif
