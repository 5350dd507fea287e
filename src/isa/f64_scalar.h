/* The float64 part of the layers without double vector lanes (scalar;
 * mve: Helium has no f64 lanes): spa_vd is one double, SPA_VDL = 1. The
 * operations are listed in f64_avx512.h; spa_vd_fma is a multiply then an
 * add (two roundings, as spa_vf_fma here: contraction is off), so results do
 * not depend on whether the core has an FMA instruction. Reached only
 * through half.h. */
#ifndef SPA_ISA_F64_SCALAR_H
#define SPA_ISA_F64_SCALAR_H

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define SPA_VDL 1
typedef double spa_vd;

SPA_ISA_INLINE spa_vd spa_vd_zero(void) { return 0.0; }
SPA_ISA_INLINE spa_vd spa_vd_set1(double x) { return x; }
SPA_ISA_INLINE spa_vd spa_vd_load(const double *p) { return *p; }
SPA_ISA_INLINE void spa_vd_store(double *p, spa_vd v) { *p = v; }
SPA_ISA_INLINE spa_vd spa_vd_load_n(const double *p, int64_t n) { return n > 0 ? *p : 0.0; }
SPA_ISA_INLINE void spa_vd_store_n(double *p, spa_vd v, int64_t n)
{
    if (n > 0)
        *p = v;
}
SPA_ISA_INLINE spa_vd spa_vd_add(spa_vd a, spa_vd b) { return a + b; }
SPA_ISA_INLINE spa_vd spa_vd_sub(spa_vd a, spa_vd b) { return a - b; }
SPA_ISA_INLINE spa_vd spa_vd_mul(spa_vd a, spa_vd b) { return a * b; }
SPA_ISA_INLINE spa_vd spa_vd_div(spa_vd a, spa_vd b) { return a / b; }
SPA_ISA_INLINE spa_vd spa_vd_fma(spa_vd c, spa_vd a, spa_vd b) { return c + a * b; }
SPA_ISA_INLINE spa_vd spa_vd_max(spa_vd a, spa_vd b) { return a > b ? a : b; }
SPA_ISA_INLINE spa_vd spa_vd_min(spa_vd a, spa_vd b) { return a < b ? a : b; }
SPA_ISA_INLINE spa_vd spa_vd_pow2i(spa_vd n)
{
    union {
        uint64_t u;
        double d;
    } e;
    e.u = (uint64_t)((n == n ? (int64_t)n : 0) + 1023) << 52; /* NaN: undefined in C, and p is NaN */
    return e.d;
}
SPA_ISA_INLINE double spa_vd_hsum(spa_vd v) { return v; }

#endif
