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
SPA_ISA_INLINE void spa_vf_scatter(float *p, int64_t s, spa_vf v)
{
    float t[8];
    _mm256_storeu_ps(t, v);
    for (int i = 0; i < 8; i++)
        p[i * s] = t[i];
}
SPA_ISA_INLINE spa_vf spa_vf_gather(const float *p, int64_t s)
{
    const __m256i idx = _mm256_mullo_epi32(_mm256_set1_epi32((int)s), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_i32gather_ps(p, idx, 4);
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
SPA_ISA_INLINE spa_vb spa_vb_set(float x) { return _mm256_set1_ps(x); }
SPA_ISA_INLINE spa_vf spa_vf_fmab(spa_vf c, spa_vf a, spa_vb x) { return _mm256_fmadd_ps(x, a, c); }
/* Four consecutive broadcast operands: their address (each broadcast from memory). */
typedef const float *spa_vq;
SPA_ISA_INLINE spa_vq spa_vq_load(const float *p) { return p; }
SPA_ISA_INLINE spa_vf spa_vf_fmaq(spa_vf c, spa_vf a, spa_vq q, int i)
{
    return _mm256_fmadd_ps(_mm256_broadcast_ss(q + i), a, c);
}
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
SPA_ISA_INLINE spa_vf spa_vf_zero_below(spa_vf v, spa_vf x, spa_vf lo)
{
    return _mm256_and_ps(_mm256_cmp_ps(x, lo, _CMP_NLT_UQ), v);
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
/* 2 * SPA_VL contiguous elements widened into two vectors */
SPA_ISA_INLINE void spa_vf_load2_f16(const uint16_t *p, spa_vf *lo, spa_vf *hi)
{
    *lo = spa_vf_load_f16(p);
    *hi = spa_vf_load_f16(p + SPA_VL);
}
SPA_ISA_INLINE void spa_vf_load2_bf16(const uint16_t *p, spa_vf *lo, spa_vf *hi)
{
    *lo = spa_vf_load_bf16(p);
    *hi = spa_vf_load_bf16(p + SPA_VL);
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
#include "compose_pairs.h"
#include "compose_untracked.h"
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

/* Sample staging and reductions (deformable attention; see avx512.h). */
SPA_ISA_INLINE spa_vf spa_vf_mulb(spa_vf a, spa_vb x) { return _mm256_mul_ps(x, a); }
SPA_ISA_INLINE spa_vf spa_vf_floor(spa_vf x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
SPA_ISA_INLINE void spa_vf_zip(spa_vf a, spa_vf b, spa_vf *lo, spa_vf *hi)
{
    const __m256 l = _mm256_unpacklo_ps(a, b), h = _mm256_unpackhi_ps(a, b); /* a0 b0 a1 b1 | a4 b4 a5 b5 */
    *lo = _mm256_permute2f128_ps(l, h, 0x20);
    *hi = _mm256_permute2f128_ps(l, h, 0x31);
}
SPA_ISA_INLINE void spa_vf_unzip(spa_vf a, spa_vf b, spa_vf *even, spa_vf *odd)
{
    /* a0 a2 b0 b2 | a4 a6 b4 b6, then the middle 64-bit pairs swapped */
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}
/* 2 * SPA_VL contiguous f32 deinterleaved: spa_vf_unzip of the two vectors */
SPA_ISA_INLINE void spa_vf_load_unzip(const float *p, spa_vf *even, spa_vf *odd)
{
    spa_vf_unzip(spa_vf_load(p), spa_vf_load(p + SPA_VL), even, odd);
}
typedef __m256i spa_vm; /* all ones where the test holds */
typedef __m256i spa_vi;
SPA_ISA_INLINE spa_vm spa_vf_gt(spa_vf a, spa_vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
SPA_ISA_INLINE spa_vm spa_vf_lt(spa_vf a, spa_vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
SPA_ISA_INLINE spa_vm spa_vm_and(spa_vm a, spa_vm b) { return _mm256_and_si256(a, b); }
SPA_ISA_INLINE uint32_t spa_vm_bits(spa_vm m) { return (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(m)); }
SPA_ISA_INLINE spa_vi spa_vi_set1(int32_t x) { return _mm256_set1_epi32(x); }
SPA_ISA_INLINE spa_vi spa_vi_load(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
SPA_ISA_INLINE spa_vi spa_vi_from_vf(spa_vf x) { return _mm256_cvttps_epi32(x); }
SPA_ISA_INLINE spa_vi spa_vi_add(spa_vi a, spa_vi b) { return _mm256_add_epi32(a, b); }
SPA_ISA_INLINE spa_vi spa_vi_mul(spa_vi a, spa_vi b) { return _mm256_mullo_epi32(a, b); }
SPA_ISA_INLINE spa_vm spa_vi_ltu(spa_vi a, spa_vi b)
{
    const __m256i s = _mm256_set1_epi32((int)0x80000000u);
    return _mm256_cmpgt_epi32(_mm256_xor_si256(b, s), _mm256_xor_si256(a, s));
}
SPA_ISA_INLINE void spa_vi_rows(uintptr_t *dst, spa_vi key, spa_vm in, const void *base, uint32_t row_bytes,
                                const void *other)
{
    const __m256i vb = _mm256_set1_epi64x((long long)(uintptr_t)base);
    const __m256i vo = _mm256_set1_epi64x((long long)(uintptr_t)other);
    const __m256i rb = _mm256_set1_epi64x((long long)row_bytes);
    const __m256i klo = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(key));
    const __m256i khi = _mm256_cvtepu32_epi64(_mm256_extracti128_si256(key, 1));
    const __m256i mlo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(in));
    const __m256i mhi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(in, 1));
    _mm256_storeu_si256((__m256i *)(void *)dst,
                        _mm256_blendv_epi8(vo, _mm256_add_epi64(vb, _mm256_mul_epu32(klo, rb)), mlo));
    _mm256_storeu_si256((__m256i *)(void *)(dst + 4),
                        _mm256_blendv_epi8(vo, _mm256_add_epi64(vb, _mm256_mul_epu32(khi, rb)), mhi));
}
SPA_ISA_INLINE void spa_isa_fold16(const float *v, float *out)
{
    for (int k = 0; k < 16; k++)
        out[k] = spa_vf_hsum(_mm256_add_ps(_mm256_loadu_ps(v + 16 * k), _mm256_loadu_ps(v + 16 * k + 8)));
}

SPA_ISA_INLINE int spa_isa_ctz32(uint32_t x) { return __builtin_ctz(x); }

/* float64 lanes (spa_vd) for the float64 kernels. */
#include "f64_avx2.h"

#endif
