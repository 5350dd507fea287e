/* bf16 narrowing of the neon_bf16 layer, included by neon.h in place of its
 * integer forms: bfcvtn / bfcvtn2 round to nearest even (FPCR's mode, as
 * Linux leaves it) and keep a NaN a NaN with the quiet bit set and the upper
 * payload bits ((u >> 16) | 0x40, FPCR.DN clear): half.h's values bit for
 * bit, which the half suite checks on every pattern it draws. The _num forms
 * are the exact ones (nothing to track: compose_untracked.h). */
#ifndef SPA_ISA_NEON_BFCVT_H
#define SPA_ISA_NEON_BFCVT_H

SPA_ISA_INLINE void spa_vf_store_bf16(uint16_t *p, spa_vf v)
{
    vst1_u16(p, vreinterpret_u16_bf16(vcvt_bf16_f32(v)));
}
SPA_ISA_INLINE void spa_vf_store2_bf16(uint16_t *p, spa_vf lo, spa_vf hi)
{
    vst1q_u16(p, vreinterpretq_u16_bf16(vcvtq_high_bf16_f32(vcvtq_low_bf16_f32(lo), hi)));
}
#include "compose_untracked.h"
SPA_ISA_INLINE spa_vf spa_vf_round_bf16(spa_vf v)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vreinterpret_u16_bf16(vcvt_bf16_f32(v)), 16));
}

#endif
