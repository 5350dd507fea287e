/* The avx512bf16 instruction set layer: the avx512 layer (src/isa/avx512.h)
 * on cores with AVX512-BF16 (Intel Cooper Lake, Sapphire Rapids and later;
 * AMD Zen 4 and Zen 5), plus the bf16 dot product the bf16 kernels of
 * selected attention run their two products on (SPA_ISA_BF16_DOT):
 *
 *   spa_vbp           SPA_VL lanes of bf16 pairs (lane i: elements 2i, 2i+1;
 *                     the first in the low half), as uint32_t words in memory
 *   spa_vbp_load(p)   SPA_VL words at p
 *   spa_vf_dotb_bf16(c, a, w)  lane i: c + a.lo * w.lo + a.hi * w.hi, w one
 *                     word broadcast (vdpbf16ps); products exact in f32, then
 *                     two adds rounded to nearest even (the high pair first,
 *                     as the instruction defines it), subnormal inputs and
 *                     results taken as zero
 *   spa_vbp_pair_rows(dst, lo, hi, n)  dst[i] = the bf16 of lo[i] | that of
 *                     hi[i] << 16, for floats that are bf16 values (their low
 *                     16 bits zero, as spa_vf_round_bf16 leaves them), n a
 *                     multiple of SPA_VL
 *
 * Reached only through half.h. */
#ifndef SPA_ISA_AVX512BF16_H
#define SPA_ISA_AVX512BF16_H

#if !defined(__AVX512BF16__)
#error "ISA avx512bf16 needs a compiler targeting AVX512-BF16 (and AVX512F, BW, VL)"
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
SPA_ISA_INLINE void spa_vbp_pair_rows(uint32_t *dst, const float *lo, const float *hi, ptrdiff_t n)
{
    const __m512i high = _mm512_set1_epi32((int)0xFFFF0000u);
    for (ptrdiff_t i = 0; i < n; i += SPA_VL) {
        const __m512i l = _mm512_castps_si512(_mm512_loadu_ps(lo + i));
        const __m512i h = _mm512_castps_si512(_mm512_loadu_ps(hi + i));
        _mm512_storeu_si512((void *)(dst + i),
                            _mm512_or_si512(_mm512_srli_epi32(l, 16), _mm512_and_si512(h, high)));
    }
}

#endif
