/* The avx512 instruction set layer (x86-64 with AVX512F, BW and VL): the
 * vector operations every micro-kernel template is written against, one
 * header per ISA (src/isa/<isa>.h, selected by the target's ISA through the
 * generated spa_isa.h). Reached only through half.h.
 *
 *   spa_vf            SPA_VL f32 lanes          spa_vb  a broadcast operand
 *   spa_vf_load/store unaligned, SPA_VL lanes   _n: the first n lanes (tail)
 *   spa_vf_scatter(p,s,v) / spa_vf_gather(p,s)  lane i at p[i*s] (s*SPA_VL < 2^31)
 *   spa_vf_fma(c,a,b) c + a*b, one rounding     spa_vf_fmab(c,a,x) the same, x broadcast
 *   spa_vb_load(p)    the broadcast operand *p  spa_vb_set(x) the same from a value
 *   spa_vq_load(p)    four broadcast operands p[0..3]; spa_vf_fmaq(c,a,q,i) =
 *                     spa_vf_fmab(c,a,q[i]), i a constant (NEON: fmla by lane)
 *   spa_vf_max/min    a > b ? a : b / a < b ? a : b, lane by lane (x86 rule)
 *   spa_vf_hsum       lanes summed by halves (j + j+VL/2, then j + j+VL/4, ...)
 *   spa_vf_round      nearest integer, ties even    spa_vf_scale2(p,n) p * 2^n
 *   spa_vf_zero_below x < lo ? +0 : v (ordered: a NaN x keeps v)
 *   spa_vf_{load,store}_{f16,bf16}  widen exactly / narrow RNE (NaN stays NaN)
 *   spa_vf_load2_{f16,bf16}(p,&lo,&hi)  2*SPA_VL elements widened into two vectors
 *   spa_vf_load2(p,&lo,&hi) / spa_vf_store2{,_f16,_bf16}(p,lo,hi)  2*SPA_VL
 *                     contiguous elements as two vectors (NEON: one instruction)
 *   spa_vf_round_{f16,bf16}         narrow then widen, in f32 lanes
 *   spa_vf_store{,2}_{f16,bf16}_num  narrowing exact for lanes that are not NaN;
 *                     spa_vf_nan_seen(seen,v) / spa_vf_any_nan(seen) track NaN over a run
 *   spa_vf_stream / SPA_VF_STREAM_ALIGN  a store that bypasses the cache
 *   spa_isa_f16_to_f32 one element, the fastest exact way the ISA has
 *
 * For the staging of sample coordinates and the lane reductions (deformable
 * attention):
 *   spa_vf_mulb(a,x)  a*x, x a broadcast operand (spa_vb)
 *   spa_vf_floor      round toward -inf
 *   spa_vf_zip(a,b,&lo,&hi)     lo = a0 b0 a1 b1 ..., hi = the second half
 *   spa_vf_unzip(a,b,&ev,&od)   the inverse: ev = a0 a2 .. b0 b2 .., od = a1 a3 ..
 *   spa_vf_load_unzip(p,&ev,&od) the same of the 2*SPA_VL floats at p
 *   spa_vm            a lane mask: spa_vf_gt / spa_vf_lt (ordered: NaN fails),
 *                     spa_vm_and, spa_vm_bits (lane i -> bit i of a uint32_t)
 *   spa_vi            SPA_VL 32-bit integer lanes, arithmetic modulo 2^32:
 *                     spa_vi_set1, spa_vi_load (int32_t), spa_vi_add, spa_vi_mul,
 *                     spa_vi_ltu (unsigned a < b -> spa_vm), spa_vi_from_vf
 *                     (truncation; 0x80000000 outside the int32 range and for NaN)
 *   spa_vi_rows(dst,key,in,base,row_bytes,other)  dst[i] = in_i ?
 *                     base + key_i * row_bytes : other, as uintptr_t
 *   spa_isa_fold16(v,out)  out[k] = the 16 floats v[16k..16k+15] summed by
 *                     halves (j + j+8, then j + j+4, j + j+2, 0 + 1), k < 16
 *   spa_isa_ctz32(x)  the index of the lowest set bit of x != 0 */
#ifndef SPA_ISA_AVX512_H
#define SPA_ISA_AVX512_H

#ifndef SPA_HALF_H
#error "include half.h, which brings the ISA layer after the scalar conversions"
#endif
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__)
#error "ISA avx512 needs a compiler targeting AVX512F, AVX512BW and AVX512VL"
#endif
#include <immintrin.h>

#ifndef SPA_ISA_NAME /* avx512bf16.h names itself first */
#define SPA_ISA_NAME "avx512"
#endif
#define SPA_VL 16
#define SPA_VF_STREAM_ALIGN 64 /* bytes; 0: no streaming stores */
#define SPA_ISA_INLINE static inline __attribute__((always_inline))

typedef __m512 spa_vf;
typedef __m512 spa_vb;

SPA_ISA_INLINE spa_vf spa_vf_zero(void) { return _mm512_setzero_ps(); }
SPA_ISA_INLINE spa_vf spa_vf_set1(float x) { return _mm512_set1_ps(x); }
SPA_ISA_INLINE spa_vf spa_vf_load(const float *p) { return _mm512_loadu_ps(p); }
SPA_ISA_INLINE void spa_vf_store(float *p, spa_vf v) { _mm512_storeu_ps(p, v); }
SPA_ISA_INLINE void spa_vf_scatter(float *p, int64_t s, spa_vf v)
{
    const __m512i idx = _mm512_mullo_epi32(_mm512_set1_epi32((int)s),
                                           _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    _mm512_i32scatter_ps(p, idx, v, 4);
}
SPA_ISA_INLINE spa_vf spa_vf_gather(const float *p, int64_t s)
{
    const __m512i idx = _mm512_mullo_epi32(_mm512_set1_epi32((int)s),
                                           _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    return _mm512_i32gather_ps(idx, p, 4);
}
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
SPA_ISA_INLINE spa_vb spa_vb_set(float x) { return _mm512_set1_ps(x); }
SPA_ISA_INLINE spa_vf spa_vf_fmab(spa_vf c, spa_vf a, spa_vb x) { return _mm512_fmadd_ps(x, a, c); }
/* Four consecutive broadcast operands: their address (each broadcast from memory). */
typedef const float *spa_vq;
SPA_ISA_INLINE spa_vq spa_vq_load(const float *p) { return p; }
SPA_ISA_INLINE spa_vf spa_vf_fmaq(spa_vf c, spa_vf a, spa_vq q, int i)
{
    return _mm512_fmadd_ps(_mm512_set1_ps(q[i]), a, c);
}
SPA_ISA_INLINE float spa_vf_hsum(spa_vf v) { return _mm512_reduce_add_ps(v); }

SPA_ISA_INLINE spa_vf spa_vf_round(spa_vf x)
{
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
SPA_ISA_INLINE spa_vf spa_vf_scale2(spa_vf p, spa_vf n) { return _mm512_scalef_ps(p, n); }
SPA_ISA_INLINE spa_vf spa_vf_zero_below(spa_vf v, spa_vf x, spa_vf lo)
{
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), v);
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
#include "compose_pairs.h"
#include "compose_untracked.h"
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

SPA_ISA_INLINE spa_vf spa_vf_mulb(spa_vf a, spa_vb x) { return _mm512_mul_ps(x, a); }
SPA_ISA_INLINE spa_vf spa_vf_floor(spa_vf x)
{
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
SPA_ISA_INLINE void spa_vf_zip(spa_vf a, spa_vf b, spa_vf *lo, spa_vf *hi)
{
    *lo = _mm512_permutex2var_ps(a, _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0), b);
    *hi = _mm512_permutex2var_ps(a, _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8), b);
}
SPA_ISA_INLINE void spa_vf_unzip(spa_vf a, spa_vf b, spa_vf *even, spa_vf *odd)
{
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    *even = _mm512_permutex2var_ps(a, ev, b);
    *odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(ev, _mm512_set1_epi32(1)), b);
}
/* 2 * SPA_VL contiguous f32 deinterleaved: spa_vf_unzip of the two vectors */
SPA_ISA_INLINE void spa_vf_load_unzip(const float *p, spa_vf *even, spa_vf *odd)
{
    spa_vf_unzip(spa_vf_load(p), spa_vf_load(p + SPA_VL), even, odd);
}
typedef __mmask16 spa_vm;
typedef __m512i spa_vi;
SPA_ISA_INLINE spa_vm spa_vf_gt(spa_vf a, spa_vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
SPA_ISA_INLINE spa_vm spa_vf_lt(spa_vf a, spa_vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
SPA_ISA_INLINE spa_vm spa_vm_and(spa_vm a, spa_vm b) { return (spa_vm)(a & b); }
SPA_ISA_INLINE uint32_t spa_vm_bits(spa_vm m) { return (uint32_t)m; }
SPA_ISA_INLINE spa_vi spa_vi_set1(int32_t x) { return _mm512_set1_epi32(x); }
SPA_ISA_INLINE spa_vi spa_vi_load(const int32_t *p) { return _mm512_loadu_si512((const void *)p); }
SPA_ISA_INLINE spa_vi spa_vi_from_vf(spa_vf x) { return _mm512_cvttps_epi32(x); }
SPA_ISA_INLINE spa_vi spa_vi_add(spa_vi a, spa_vi b) { return _mm512_add_epi32(a, b); }
SPA_ISA_INLINE spa_vi spa_vi_mul(spa_vi a, spa_vi b) { return _mm512_mullo_epi32(a, b); }
SPA_ISA_INLINE spa_vm spa_vi_ltu(spa_vi a, spa_vi b) { return _mm512_cmplt_epu32_mask(a, b); }
SPA_ISA_INLINE void spa_vi_rows(uintptr_t *dst, spa_vi key, spa_vm in, const void *base, uint32_t row_bytes,
                                const void *other)
{
    const __m512i vb = _mm512_set1_epi64((long long)(uintptr_t)base);
    const __m512i vo = _mm512_set1_epi64((long long)(uintptr_t)other);
    const __m512i rb = _mm512_set1_epi64((long long)row_bytes);
    const __m512i klo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(key));
    const __m512i khi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(key, 1));
    _mm512_storeu_si512((void *)dst,
                        _mm512_mask_blend_epi64((__mmask8)in, vo, _mm512_add_epi64(vb, _mm512_mul_epu32(klo, rb))));
    _mm512_storeu_si512((void *)(dst + 8), _mm512_mask_blend_epi64((__mmask8)(in >> 8), vo,
                                                                   _mm512_add_epi64(vb, _mm512_mul_epu32(khi, rb))));
}
/* Sixteen folds at once: pairs of vectors shuffled together, each addition
 * one of the scalar fold's. */
SPA_ISA_INLINE void spa_isa_fold16(const float *v, float *out)
{
    __m512 s1[8], s2[4], s3[2];
    for (int m = 0; m < 8; m++) {
        const __m512 x = _mm512_loadu_ps(v + 32 * m), y = _mm512_loadu_ps(v + 32 * m + 16);
        s1[m] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int m = 0; m < 4; m++)
        s2[m] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * m], s1[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(s1[2 * m], s1[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int m = 0; m < 2; m++)
        s3[m] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * m], s2[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(s2[2 * m], s2[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* row k ends in lane 4 * (k % 4) + k / 4 */
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(_mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), r));
}

SPA_ISA_INLINE int spa_isa_ctz32(uint32_t x) { return __builtin_ctz(x); }

/* float64 lanes (spa_vd) for the float64 kernels. */
#include "f64_avx512.h"

#endif
