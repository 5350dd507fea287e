/* The avx512 instruction set layer (x86-64 with AVX512F, BW and VL): the
 * vector operations every micro-kernel template is written against, one
 * header per ISA (src/isa/<isa>.h, selected by the target's ISA through the
 * generated spa_isa.h). Reached only through half.h.
 *
 *   spa_vf            SPA_VL f32 lanes          spa_vb  a broadcast operand
 *   spa_vf_load/store unaligned, SPA_VL lanes   _n: the first n lanes (tail)
 *   spa_vf_fma(c,a,b) c + a*b, one rounding     spa_vf_fmab(c,a,x) the same, x broadcast
 *   spa_vf_max/min    a > b ? a : b / a < b ? a : b, lane by lane (x86 rule)
 *   spa_vf_hsum       lanes summed by halves (j + j+VL/2, then j + j+VL/4, ...)
 *   spa_vf_round      nearest integer, ties even    spa_vf_scale2(p,n) p * 2^n
 *   spa_vf_keep_ge    x >= lo ? v : +0
 *   spa_vf_{load,store}_{f16,bf16}  widen exactly / narrow RNE (NaN stays NaN)
 *   spa_vf_round_{f16,bf16}         narrow then widen, in f32 lanes
 *   spa_vf_stream / SPA_VF_STREAM_ALIGN  a store that bypasses the cache
 *   spa_isa_f16_to_f32 one element, the fastest exact way the ISA has */
#ifndef SPA_ISA_AVX512_H
#define SPA_ISA_AVX512_H

#ifndef SPA_HALF_H
#error "include half.h, which brings the ISA layer after the scalar conversions"
#endif
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__)
#error "ISA avx512 needs a compiler targeting AVX512F, AVX512BW and AVX512VL"
#endif
#include <immintrin.h>

#define SPA_ISA_NAME "avx512"
#define SPA_VL 16
/* 1: the msda kernels stage sixteen samples per instruction (msda_stage16.h) */
#define SPA_ISA_MSDA_STAGE16 1
#define SPA_VF_STREAM_ALIGN 64 /* bytes; 0: no streaming stores */
#define SPA_ISA_INLINE static inline __attribute__((always_inline))

typedef __m512 spa_vf;
typedef __m512 spa_vb;

SPA_ISA_INLINE spa_vf spa_vf_zero(void) { return _mm512_setzero_ps(); }
SPA_ISA_INLINE spa_vf spa_vf_set1(float x) { return _mm512_set1_ps(x); }
SPA_ISA_INLINE spa_vf spa_vf_load(const float *p) { return _mm512_loadu_ps(p); }
SPA_ISA_INLINE void spa_vf_store(float *p, spa_vf v) { _mm512_storeu_ps(p, v); }
SPA_ISA_INLINE spa_vf spa_vf_load_n(const float *p, int64_t n)
{
    return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p);
}
SPA_ISA_INLINE void spa_vf_store_n(float *p, spa_vf v, int64_t n)
{
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), v);
}
SPA_ISA_INLINE spa_vf spa_vf_add(spa_vf a, spa_vf b) { return _mm512_add_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_sub(spa_vf a, spa_vf b) { return _mm512_sub_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_mul(spa_vf a, spa_vf b) { return _mm512_mul_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_max(spa_vf a, spa_vf b) { return _mm512_max_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_min(spa_vf a, spa_vf b) { return _mm512_min_ps(a, b); }
SPA_ISA_INLINE spa_vf spa_vf_fma(spa_vf c, spa_vf a, spa_vf b) { return _mm512_fmadd_ps(a, b, c); }
SPA_ISA_INLINE spa_vb spa_vb_load(const float *p) { return _mm512_set1_ps(*p); }
SPA_ISA_INLINE spa_vf spa_vf_fmab(spa_vf c, spa_vf a, spa_vb x) { return _mm512_fmadd_ps(x, a, c); }
SPA_ISA_INLINE float spa_vf_hsum(spa_vf v) { return _mm512_reduce_add_ps(v); }

SPA_ISA_INLINE spa_vf spa_vf_round(spa_vf x)
{
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
SPA_ISA_INLINE spa_vf spa_vf_scale2(spa_vf p, spa_vf n) { return _mm512_scalef_ps(p, n); }
SPA_ISA_INLINE spa_vf spa_vf_keep_ge(spa_vf v, spa_vf x, spa_vf lo)
{
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ), v);
}

SPA_ISA_INLINE spa_vf spa_vf_load_f16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
SPA_ISA_INLINE spa_vf spa_vf_load_bf16(const uint16_t *p)
{
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)), 16));
}
SPA_ISA_INLINE __m256i spa_avx512_to_f16(spa_vf v)
{
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* bf16 bits in the low half of each 32-bit lane: RNE, NaN kept NaN (quiet bit). */
SPA_ISA_INLINE __m512i spa_avx512_bf16_bits(spa_vf v)
{
    const __m512i u = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}
SPA_ISA_INLINE void spa_vf_store_f16(uint16_t *p, spa_vf v)
{
    _mm256_storeu_si256((__m256i *)(void *)p, spa_avx512_to_f16(v));
}
SPA_ISA_INLINE void spa_vf_store_bf16(uint16_t *p, spa_vf v)
{
    _mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16(spa_avx512_bf16_bits(v)));
}
SPA_ISA_INLINE spa_vf spa_vf_round_f16(spa_vf v) { return _mm512_cvtph_ps(spa_avx512_to_f16(v)); }
SPA_ISA_INLINE spa_vf spa_vf_round_bf16(spa_vf v)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(spa_avx512_bf16_bits(v), 16));
}

/* Streaming stores: p aligned to SPA_VF_STREAM_ALIGN bytes (f32), or half
 * that for the 16-bit forms. */
SPA_ISA_INLINE void spa_vf_stream(float *p, spa_vf v) { _mm512_stream_ps(p, v); }
SPA_ISA_INLINE void spa_vf_stream_f16(uint16_t *p, spa_vf v)
{
    _mm256_stream_si256((__m256i *)(void *)p, spa_avx512_to_f16(v));
}
SPA_ISA_INLINE void spa_vf_stream_bf16(uint16_t *p, spa_vf v)
{
    _mm256_stream_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16(spa_avx512_bf16_bits(v)));
}
SPA_ISA_INLINE void spa_isa_stream_fence(void) { _mm_sfence(); }

SPA_ISA_INLINE float spa_isa_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

#endif
