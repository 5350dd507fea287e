/* The avx2 instruction set layer (x86-64-v3: AVX2, FMA, F16C): the
 * operations of src/isa/avx512.h on eight lanes. Reached only through half.h. */
#ifndef SPA_ISA_AVX2_H
#define SPA_ISA_AVX2_H

#ifndef SPA_HALF_H
#error "include half.h, which brings the ISA layer after the scalar conversions"
#endif
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "ISA avx2 needs a compiler targeting AVX2, FMA and F16C (x86-64-v3)"
#endif
#include <immintrin.h>

#define SPA_ISA_NAME "avx2"
#define SPA_VL 8
/* 1: the msda kernels stage sixteen samples per instruction (msda_stage16.h) */
#define SPA_ISA_MSDA_STAGE16 0
#define SPA_VF_STREAM_ALIGN 32
#define SPA_ISA_INLINE static inline __attribute__((always_inline))

typedef __m256 spa_vf;
typedef __m256 spa_vb;

SPA_ISA_INLINE spa_vf spa_vf_zero(void) { return _mm256_setzero_ps(); }
SPA_ISA_INLINE spa_vf spa_vf_set1(float x) { return _mm256_set1_ps(x); }
SPA_ISA_INLINE spa_vf spa_vf_load(const float *p) { return _mm256_loadu_ps(p); }
SPA_ISA_INLINE void spa_vf_store(float *p, spa_vf v) { _mm256_storeu_ps(p, v); }
SPA_ISA_INLINE __m256i spa_avx2_mask(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
SPA_ISA_INLINE spa_vf spa_vf_load_n(const float *p, int64_t n) { return _mm256_maskload_ps(p, spa_avx2_mask(n)); }
SPA_ISA_INLINE void spa_vf_store_n(float *p, spa_vf v, int64_t n) { _mm256_maskstore_ps(p, spa_avx2_mask(n), v); }
SPA_ISA_INLINE spa_vf spa_vf_add(spa_vf a, spa_vf b) { return _mm256_add_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_sub(spa_vf a, spa_vf b) { return _mm256_sub_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_mul(spa_vf a, spa_vf b) { return _mm256_mul_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_max(spa_vf a, spa_vf b) { return _mm256_max_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_min(spa_vf a, spa_vf b) { return _mm256_min_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_fma(spa_vf c, spa_vf a, spa_vf b) { return _mm256_fmadd_ps(a, b, c); }
SPA_ISA_INLINE spa_vb spa_vb_load(const float *p) { return _mm256_broadcast_ss(p); }
SPA_ISA_INLINE spa_vf spa_vf_fmab(spa_vf c, spa_vf a, spa_vb x) { return _mm256_fmadd_ps(x, a, c); }
SPA_ISA_INLINE float spa_vf_hsum(spa_vf v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

SPA_ISA_INLINE spa_vf spa_vf_round(spa_vf x)
{
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
SPA_ISA_INLINE spa_vf spa_vf_scale2(spa_vf p, spa_vf n)
{
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
SPA_ISA_INLINE spa_vf spa_vf_keep_ge(spa_vf v, spa_vf x, spa_vf lo)
{
    return _mm256_and_ps(_mm256_cmp_ps(x, lo, _CMP_GE_OQ), v);
}

SPA_ISA_INLINE spa_vf spa_vf_load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
SPA_ISA_INLINE spa_vf spa_vf_load_bf16(const uint16_t *p)
{
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));
}
SPA_ISA_INLINE __m128i spa_avx2_to_f16(spa_vf v)
{
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* bf16 bits in the low half of each 32-bit lane: RNE, NaN kept NaN. */
SPA_ISA_INLINE __m256i spa_avx2_bf16_bits(spa_vf v)
{
    const __m256i u = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(rounded, quiet, nan);
}
SPA_ISA_INLINE __m128i spa_avx2_pack16(__m256i w)
{
    return _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}
SPA_ISA_INLINE void spa_vf_store_f16(uint16_t *p, spa_vf v)
{
    _mm_storeu_si128((__m128i *)(void *)p, spa_avx2_to_f16(v));
}
SPA_ISA_INLINE void spa_vf_store_bf16(uint16_t *p, spa_vf v)
{
    _mm_storeu_si128((__m128i *)(void *)p, spa_avx2_pack16(spa_avx2_bf16_bits(v)));
}
SPA_ISA_INLINE spa_vf spa_vf_round_f16(spa_vf v) { return _mm256_cvtph_ps(spa_avx2_to_f16(v)); }
SPA_ISA_INLINE spa_vf spa_vf_round_bf16(spa_vf v)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(spa_avx2_bf16_bits(v), 16));
}

SPA_ISA_INLINE void spa_vf_stream(float *p, spa_vf v) { _mm256_stream_ps(p, v); }
SPA_ISA_INLINE void spa_vf_stream_f16(uint16_t *p, spa_vf v)
{
    _mm_stream_si128((__m128i *)(void *)p, spa_avx2_to_f16(v));
}
SPA_ISA_INLINE void spa_vf_stream_bf16(uint16_t *p, spa_vf v)
{
    _mm_stream_si128((__m128i *)(void *)p, spa_avx2_pack16(spa_avx2_bf16_bits(v)));
}
SPA_ISA_INLINE void spa_isa_stream_fence(void) { _mm_sfence(); }

SPA_ISA_INLINE float spa_isa_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

#endif
