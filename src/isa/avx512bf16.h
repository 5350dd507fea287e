/* The avx512bf16 instruction set layer: the avx512 layer (src/isa/avx512.h)
 * on cores with AVX512-BF16 (Intel Cooper Lake, Sapphire Rapids and later;
 * AMD Zen 4 and Zen 5), plus the bf16 dot product the bf16 kernels of
 * selected attention run their two products on (SPA_ISA_BF16_DOT):
 *
 *   spa_vbp           SPA_VL lanes of bf16 pairs (lane i: elements 2i, 2i+1;
 *                     the first in the low half), as uint32_t words in memory
 *   spa_vbp_load(p)   SPA_VL words at p
 *   spa_vbq           four consecutive words, used by lane: spa_vbq_load(p)
 *   spa_vf_dotq_bf16(c, a, q, k)  lane i: c + a.lo * w.lo + a.hi * w.hi, w word
 *                     k of q broadcast (vdpbf16ps); products exact in f32,
 *                     then two adds rounded to nearest even (the high pair
 *                     first, as the instruction defines it), subnormal inputs
 *                     and results taken as zero
 *   spa_vbp_zip_rows(dst, lo, hi, n)  dst[i] = lo[i] | hi[i] << 16 for two rows
 *                     of bf16 bits, n a multiple of SPA_VL
 *   spa_vbp_store_bf16_pairs(dst, lo, hi)  SPA_VL words: lane i of lo and of
 *                     hi narrowed to bf16 as spa_vf_store_bf16 does (RNE, NaN
 *                     kept NaN), lo's in the low half
 *
 * Reached only through half.h. */
#ifndef SPA_ISA_AVX512BF16_H
#define SPA_ISA_AVX512BF16_H

#if !defined(__AVX512BF16__)
#error "ISA avx512bf16 needs a compiler targeting AVX512-BF16 (and AVX512F, BW, VL)"
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the bf16 pair words (element 2i in the low half) are read as memory: a little-endian target"
#endif

#define SPA_ISA_NAME "avx512bf16"
#define SPA_ISA_BF16_DOT 1
#include "avx512.h"

typedef __m512bh spa_vbp;

SPA_ISA_INLINE spa_vbp spa_vbp_load(const uint32_t *p)
{
    return (spa_vbp)_mm512_loadu_si512((const void *)p);
}
SPA_ISA_INLINE spa_vf spa_vf_dotb_bf16(spa_vf c, spa_vbp a, const uint32_t *w)
{
    return _mm512_dpbf16_ps(c, a, (spa_vbp)_mm512_set1_epi32((int)*w));
}
typedef const uint32_t *spa_vbq;
SPA_ISA_INLINE spa_vbq spa_vbq_load(const uint32_t *p) { return p; }
SPA_ISA_INLINE spa_vf spa_vf_dotq_bf16(spa_vf c, spa_vbp a, spa_vbq q, int k)
{
    return spa_vf_dotb_bf16(c, a, q + k);
}
SPA_ISA_INLINE void spa_vbp_zip_rows(uint32_t *dst, const uint16_t *lo, const uint16_t *hi, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i += SPA_VL) {
        const __m512i l = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(lo + i)));
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(hi + i)));
        _mm512_storeu_si512((void *)(dst + i), _mm512_or_si512(l, _mm512_slli_epi32(h, 16)));
    }
}
SPA_ISA_INLINE void spa_vbp_store_bf16_pairs(uint32_t *dst, spa_vf lo, spa_vf hi)
{
    const __m512i l = spa_avx512_bf16_bits(lo), h = spa_avx512_bf16_bits(hi);
    _mm512_storeu_si512((void *)dst, _mm512_or_si512(l, _mm512_slli_epi32(h, 16)));
}

#endif
