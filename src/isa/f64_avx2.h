/* The float64 part of the avx2 layer: spa_vd, SPA_VDL = 4 double lanes
 * (__m256d). Included by avx2.h; the operations are listed in
 * f64_avx512.h. Reached only through half.h. */
#ifndef SPA_ISA_F64_AVX2_H
#define SPA_ISA_F64_AVX2_H

#define SPA_VDL 4
typedef __m256d spa_vd;

SPA_ISA_INLINE spa_vd spa_vd_zero(void) { return _mm256_setzero_pd(); }
SPA_ISA_INLINE spa_vd spa_vd_set1(double x) { return _mm256_set1_pd(x); }
SPA_ISA_INLINE spa_vd spa_vd_load(const double *p) { return _mm256_loadu_pd(p); }
SPA_ISA_INLINE void spa_vd_store(double *p, spa_vd v) { _mm256_storeu_pd(p, v); }
/* vmaskmovpd: lanes past n are neither read nor written (no fault past the row). */
SPA_ISA_INLINE __m256i spa_avx2_dmask(int64_t n)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}
SPA_ISA_INLINE spa_vd spa_vd_load_n(const double *p, int64_t n) { return _mm256_maskload_pd(p, spa_avx2_dmask(n)); }
SPA_ISA_INLINE void spa_vd_store_n(double *p, spa_vd v, int64_t n) { _mm256_maskstore_pd(p, spa_avx2_dmask(n), v); }
SPA_ISA_INLINE spa_vd spa_vd_add(spa_vd a, spa_vd b) { return _mm256_add_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_sub(spa_vd a, spa_vd b) { return _mm256_sub_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_mul(spa_vd a, spa_vd b) { return _mm256_mul_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_div(spa_vd a, spa_vd b) { return _mm256_div_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_fma(spa_vd c, spa_vd a, spa_vd b) { return _mm256_fmadd_pd(a, b, c); }
SPA_ISA_INLINE spa_vd spa_vd_max(spa_vd a, spa_vd b) { return _mm256_max_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_min(spa_vd a, spa_vd b) { return _mm256_min_pd(a, b); }
SPA_ISA_INLINE spa_vd spa_vd_pow2i(spa_vd n)
{
    const __m256i e = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)), _mm256_set1_epi64x(1023));
    return _mm256_castsi256_pd(_mm256_slli_epi64(e, 52));
}
SPA_ISA_INLINE double spa_vd_hsum(spa_vd v)
{
    __m128d q = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)));
}

#endif
