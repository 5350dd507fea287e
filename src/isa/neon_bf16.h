/* The neon_bf16 instruction set layer: the neon layer (src/isa/neon.h) on
 * ARMv8.6-A cores, or any core with FEAT_BF16 (Neoverse V1 / N2 / V2,
 * Graviton 3 and 4, Cortex-A510 / A710 and later, Apple M2 and later),
 * whose bf16 narrowing is one instruction (bfcvtn, src/isa/neon_bfcvt.h)
 * instead of integer adds, plus the bf16 dot product the bf16 forward of
 * selected attention runs Q Kᵀ and P V on (SPA_ISA_BF16_DOT; the operations
 * as in src/isa/avx512bf16.h):
 *
 *   spa_vbp           4 lanes of bf16 pairs (bfloat16x8_t), spa_vbp_load(p)
 *   spa_vbq           four consecutive words in one register, used by lane
 *   spa_vf_dotq_bf16(c, a, q, k)  bfdot by element: lane i gets c + (a.lo *
 *                     w.lo + a.hi * w.hi), w word k of q; FEAT_BF16 without
 *                     FEAT_EBF16 rounds the sum of the two products and then
 *                     the addition to odd, subnormals taken as zero, a NaN
 *                     the default NaN: a fixed result for given operands
 *   spa_vbp_zip_rows(dst, lo, hi, n)  words of two rows of bf16 bits by zip1 /
 *                     zip2, n a multiple of 2 * SPA_VL
 *   spa_vbp_store_bf16_pairs(dst, lo, hi)  lo and hi narrowed by bfcvtn,
 *                     interleaved into words by zip1
 *
 * Everything else is the neon layer's. Reached only through half.h. */
#ifndef SPA_ISA_NEON_BF16_H
#define SPA_ISA_NEON_BF16_H

#if !defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#error "ISA neon_bf16 needs a compiler targeting AArch64 with FEAT_BF16 (-march=armv8.6-a or +bf16)"
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the bf16 pair words (element 2i in the low half) are read as memory: a little-endian target"
#endif

#define SPA_ISA_NAME "neon_bf16"
#define SPA_NEON_BFCVT 1
#define SPA_ISA_BF16_DOT 1
#include "neon.h"

typedef bfloat16x8_t spa_vbp;
typedef bfloat16x8_t spa_vbq;
SPA_ISA_INLINE spa_vbp spa_vbp_load(const uint32_t *p) { return vreinterpretq_bf16_u32(vld1q_u32(p)); }
SPA_ISA_INLINE spa_vbq spa_vbq_load(const uint32_t *p) { return vreinterpretq_bf16_u32(vld1q_u32(p)); }
/* a macro: the lane must be a constant expression */
#define spa_vf_dotq_bf16(c, a, q, k) vbfdotq_laneq_f32((c), (a), (q), (k))
SPA_ISA_INLINE void spa_vbp_zip_rows(uint32_t *dst, const uint16_t *lo, const uint16_t *hi, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i += 2 * SPA_VL) {
        const uint16x8_t l = vld1q_u16(lo + i), h = vld1q_u16(hi + i);
        vst1q_u32(dst + i, vreinterpretq_u32_u16(vzip1q_u16(l, h)));
        vst1q_u32(dst + i + SPA_VL, vreinterpretq_u32_u16(vzip2q_u16(l, h)));
    }
}
SPA_ISA_INLINE void spa_vbp_store_bf16_pairs(uint32_t *dst, spa_vf lo, spa_vf hi)
{
    /* bfcvtn of each (the low four halves), interleaved by zip1 */
    const uint16x8_t l = vreinterpretq_u16_bf16(vcvtq_low_bf16_f32(lo));
    const uint16x8_t h = vreinterpretq_u16_bf16(vcvtq_low_bf16_f32(hi));
    vst1q_u32(dst, vreinterpretq_u32_u16(vzip1q_u16(l, h)));
}

#endif
