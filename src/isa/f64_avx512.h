/* The float64 part of the avx512 layer: spa_vd, SPA_VDL = 8 double lanes
 * (__m512d). Included by avx512.h; the operations the float64 kernels
 * (templates/f64/) are written against, the same on every layer:
 *
 *   spa_vd             SPA_VDL double lanes
 *   spa_vd_zero() / spa_vd_set1(x)      +0 / x in every lane
 *   spa_vd_load(p) / spa_vd_store(p,v)  SPA_VDL lanes, unaligned
 *   spa_vd_load_n(p,n) / spa_vd_store_n(p,v,n)  the first n lanes, 0 <= n <=
 *                      SPA_VDL (a tail: no byte past p[n-1] is read or
 *                      written; loaded lanes from n on are +0)
 *   spa_vd_add/sub/mul/div(a,b)         lane by lane
 *   spa_vd_fma(c,a,b)  c + a*b: one rounding where the ISA fuses (x86 FMA,
 *                      NEON fmla), a multiply then an add on the scalar
 *                      layers (as spa_vf_fma)
 *   spa_vd_max(a,b)    a > b ? a : b, lane by lane (x86 rule)
 *   spa_vd_min(a,b)    a < b ? a : b, lane by lane (x86 rule)
 *   spa_vd_pow2i(n)    2^n for integral n in [-1023, 1024] (an exponent
 *                      field: -1023 gives +0, 1024 gives +inf), the scale
 *                      step of an exp
 *   spa_vd_hsum(v)     the lanes summed by halves (j + j+VDL/2, then
 *                      j + j+VDL/4, ...): a fixed order, so a result never
 *                      depends on the runner
 * Reached only through half.h. */
#ifndef SPA_ISA_F64_AVX512_H
#define SPA_ISA_F64_AVX512_H

#define SPA_VDL 8
typedef __m512d spa_vd;

SPA_ISA_INLINE spa_vd spa_vd_zero(void) { return _mm512_setzero_pd(); }
SPA_ISA_INLINE spa_vd spa_vd_set1(double x) { return _mm512_set1_pd(x); }
SPA_ISA_INLINE spa_vd spa_vd_load(const double *p) { return _mm512_loadu_pd(p); }
SPA_ISA_INLINE void spa_vd_store(double *p, spa_vd v) { _mm512_storeu_pd(p, v); }
/* Masked: lanes past n are neither read nor written (no fault past the row). */
SPA_ISA_INLINE __mmask8 spa_avx512_dmask(int64_t n) { return (__mmask8)((1u << n) - 1u); }
SPA_ISA_INLINE spa_vd spa_vd_load_n(const double *p, int64_t n)
{
    return _mm512_maskz_loadu_pd(spa_avx512_dmask(n), p);
}
SPA_ISA_INLINE void spa_vd_store_n(double *p, spa_vd v, int64_t n)
{
    _mm512_mask_storeu_pd(p, spa_avx512_dmask(n), v);
}
SPA_ISA_INLINE spa_vd spa_vd_add(spa_vd a, spa_vd b) { return _mm512_add_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_sub(spa_vd a, spa_vd b) { return _mm512_sub_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_mul(spa_vd a, spa_vd b) { return _mm512_mul_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_div(spa_vd a, spa_vd b) { return _mm512_div_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_fma(spa_vd c, spa_vd a, spa_vd b) { return _mm512_fmadd_pd(a, b, c); }
SPA_ISA_INLINE spa_vd spa_vd_max(spa_vd a, spa_vd b) { return _mm512_max_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_min(spa_vd a, spa_vd b) { return _mm512_min_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_pow2i(spa_vd n)
{
    const __m512i e = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_cvtpd_epi32(n)), _mm512_set1_epi64(1023));
    return _mm512_castsi512_pd(_mm512_slli_epi64(e, 52));
}
SPA_ISA_INLINE double spa_vd_hsum(spa_vd v)
{
    __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    __m128d q = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    return _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)));
}

#endif
