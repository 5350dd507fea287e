/* The float64 part of the neon layer (AArch64 Advanced SIMD): spa_vd,
 * SPA_VDL = 2 double lanes (float64x2_t). Included by neon.h; the
 * operations are listed in f64_avx512.h. Reached only through half.h. */
#ifndef SPA_ISA_F64_NEON_H
#define SPA_ISA_F64_NEON_H

#define SPA_VDL 2
typedef float64x2_t spa_vd;

SPA_ISA_INLINE spa_vd spa_vd_zero(void) { return vdupq_n_f64(0.0); }
SPA_ISA_INLINE spa_vd spa_vd_set1(double x) { return vdupq_n_f64(x); }
SPA_ISA_INLINE spa_vd spa_vd_load(const double *p) { return vld1q_f64(p); }
SPA_ISA_INLINE void spa_vd_store(double *p, spa_vd v) { vst1q_f64(p, v); }
/* A tail of two lanes is one lane (or none): loaded and stored alone. */
SPA_ISA_INLINE spa_vd spa_vd_load_n(const double *p, int64_t n)
{
    if (n >= 2)
        return vld1q_f64(p);
    return n == 1 ? vld1q_lane_f64(p, vdupq_n_f64(0.0), 0) : vdupq_n_f64(0.0);
}
SPA_ISA_INLINE void spa_vd_store_n(double *p, spa_vd v, int64_t n)
{
    if (n >= 2)
        vst1q_f64(p, v);
    else if (n == 1)
        vst1q_lane_f64(p, v, 0);
}
SPA_ISA_INLINE spa_vd spa_vd_add(spa_vd a, spa_vd b) { return vaddq_f64(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_sub(spa_vd a, spa_vd b) { return vsubq_f64(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_mul(spa_vd a, spa_vd b) { return vmulq_f64(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_div(spa_vd a, spa_vd b) { return vdivq_f64(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_fma(spa_vd c, spa_vd a, spa_vd b) { return vfmaq_f64(c, a, b); }
/* The x86 rule (a > b ? a : b), not fmax's NaN handling. */
SPA_ISA_INLINE spa_vd spa_vd_max(spa_vd a, spa_vd b) { return vbslq_f64(vcgtq_f64(a, b), a, b); }
SPA_ISA_INLINE spa_vd spa_vd_min(spa_vd a, spa_vd b) { return vbslq_f64(vcltq_f64(a, b), a, b); }
SPA_ISA_INLINE spa_vd spa_vd_pow2i(spa_vd n)
{
    return vreinterpretq_f64_s64(vshlq_n_s64(vaddq_s64(vcvtq_s64_f64(n), vdupq_n_s64(1023)), 52));
}
SPA_ISA_INLINE double spa_vd_hsum(spa_vd v) { return vgetq_lane_f64(v, 0) + vgetq_lane_f64(v, 1); }

#endif
