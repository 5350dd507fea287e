/* f16 / bf16 <-> f32 conversions, integer bit operations only, so that no
 * compiler half-precision support is needed on any target. Widening is exact;
 * narrowing rounds to nearest, ties to even (spec/nsa.md 0.3 allows RNE
 * everywhere). Written branch-free so that loops over them vectorise. */
#ifndef SPA_HALF_H
#define SPA_HALF_H

#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

static inline uint32_t spa_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float spa_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the upper half of an f32. */
static inline float spa_bf16_to_f32(uint16_t h)
{
    return spa_bits_f32((uint32_t)h << 16);
}

static inline uint16_t spa_f32_to_bf16(float f)
{
    uint32_t u = spa_f32_bits(f);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    /* NaN must stay NaN (rounding could carry it into Inf): force a quiet bit. */
    uint32_t is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (uint16_t)(is_nan ? ((u >> 16) | 0x40u) : rounded);
}

/* f16 -> f32: place exponent and mantissa in an f32 and scale by 2^112, which
 * rebiases normals and turns subnormals into the right normal f32. Inf/NaN
 * (exponent 31) get the all-ones f32 exponent. */
static inline float spa_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t em = (uint32_t)h & 0x7FFFu;
    float scaled = spa_bits_f32(em << 13) * 0x1p112f;
    uint32_t bits = spa_f32_bits(scaled) | (em >= 0x7C00u ? 0x7F800000u : 0u);
    return spa_bits_f32(bits | sign);
}

/* f32 -> f16, round to nearest even. */
static inline uint16_t spa_f32_to_f16(float f)
{
    uint32_t u = spa_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7FFFFFFFu;
    /* Normal range: rebias the exponent (-112 << 23) and round on bit 13. */
    uint32_t normal = (a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13;
    /* Below 2^-14 the result is subnormal: adding 0.5 aligns the f32 mantissa so
     * that the FPU rounds to a multiple of 2^-24 (RNE); the low bits are it. */
    uint32_t sub = spa_f32_bits(spa_bits_f32(a) + 0.5f) - 0x3F000000u;
    uint32_t r = a < 0x38800000u ? sub : normal;
    r = a >= 0x477FF000u ? 0x7C00u : r;                  /* rounds to >= 65520: Inf */
    r = a > 0x7F800000u ? (0x7E00u | ((a >> 13) & 0x3FFu)) : r; /* NaN stays NaN */
    return (uint16_t)(sign | r);
}

/* Runs of n contiguous elements. The f16 ones use the hardware conversions
 * where the target has them (F16C / AVX-512: exact, and RNE on narrowing, so
 * the results equal the portable path bit for bit). */
static inline void spa_f16_widen_run(float *restrict dst, const uint16_t *restrict src, int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    for (int64_t blocks = (n - i) / 16; blocks > 0; blocks--, i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + i))));
#elif defined(__F16C__)
    for (int64_t blocks = (n - i) / 8; blocks > 0; blocks--, i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
#endif
    for (; i < n; i++)
        dst[i] = spa_f16_to_f32(src[i]);
}

static inline void spa_f16_narrow_run(uint16_t *restrict dst, const float *restrict src, int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    for (int64_t blocks = (n - i) / 16; blocks > 0; blocks--, i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__)
    for (int64_t blocks = (n - i) / 8; blocks > 0; blocks--, i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < n; i++)
        dst[i] = spa_f32_to_f16(src[i]);
}

static inline void spa_bf16_widen_run(float *restrict dst, const uint16_t *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = spa_bf16_to_f32(src[i]);
}

static inline void spa_bf16_narrow_run(uint16_t *restrict dst, const float *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = spa_f32_to_bf16(src[i]);
}

static inline void spa_f32_copy_run(float *restrict dst, const float *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* A copy whose destination will not be read again soon: with AVX-512 the
 * aligned middle goes out with non-temporal stores, sparing the read of the
 * destination lines a plain store costs. Call spa_stream_fence() before the
 * block returns, so the data is visible to the thread that joins it. */
static inline void spa_f32_stream_run(float *restrict dst, const float *restrict src, int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i < n && ((uintptr_t)(dst + i) & 63u) != 0; i++)
        dst[i] = src[i];
    for (int64_t blocks = (n - i) / 16; blocks > 0; blocks--, i += 16)
        _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#endif
    for (; i < n; i++)
        dst[i] = src[i];
}

/* The same for the 16-bit dtypes: narrowed exactly as spa_f32_to_f16 /
 * spa_f32_to_bf16 do, then streamed in 32-byte aligned runs. */
static inline void spa_f16_narrow_stream_run(uint16_t *restrict dst, const float *restrict src, int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i < n && ((uintptr_t)(dst + i) & 31u) != 0; i++)
        dst[i] = spa_f32_to_f16(src[i]);
    for (int64_t blocks = (n - i) / 16; blocks > 0; blocks--, i += 16)
        _mm256_stream_si256((__m256i *)(void *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < n; i++)
        dst[i] = spa_f32_to_f16(src[i]);
}

static inline void spa_bf16_narrow_stream_run(uint16_t *restrict dst, const float *restrict src, int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i < n && ((uintptr_t)(dst + i) & 31u) != 0; i++)
        dst[i] = spa_f32_to_bf16(src[i]);
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    for (int64_t blocks = (n - i) / 16; blocks > 0; blocks--, i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        __m512i u = _mm512_castps_si512(v);
        __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
        __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), odd), 16);
        __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        __m512i r = _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(u, 16), quiet);
        _mm256_stream_si256((__m256i *)(void *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
#endif
    for (; i < n; i++)
        dst[i] = spa_f32_to_bf16(src[i]);
}

static inline void spa_stream_fence(void)
{
#if defined(__AVX512F__)
    _mm_sfence();
#endif
}

#endif
