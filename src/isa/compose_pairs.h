/* Two-vector operations composed from the one-vector ones, for the layers
 * that have no better form: 2 * SPA_VL contiguous f32 as two vectors and
 * back, and the narrowing stores of 2 * SPA_VL 16-bit elements. Included by
 * a layer after its loads and stores (neon has its own: ldp / stp). */
#ifndef SPA_ISA_COMPOSE_PAIRS_H
#define SPA_ISA_COMPOSE_PAIRS_H

SPA_ISA_INLINE void spa_vf_load2(const float *p, spa_vf *lo, spa_vf *hi)
{
    *lo = spa_vf_load(p);
    *hi = spa_vf_load(p + SPA_VL);
}
SPA_ISA_INLINE void spa_vf_store2(float *p, spa_vf lo, spa_vf hi)
{
    spa_vf_store(p, lo);
    spa_vf_store(p + SPA_VL, hi);
}
SPA_ISA_INLINE void spa_vf_store2_f16(uint16_t *p, spa_vf lo, spa_vf hi)
{
    spa_vf_store_f16(p, lo);
    spa_vf_store_f16(p + SPA_VL, hi);
}
SPA_ISA_INLINE void spa_vf_store2_bf16(uint16_t *p, spa_vf lo, spa_vf hi)
{
    spa_vf_store_bf16(p, lo);
    spa_vf_store_bf16(p + SPA_VL, hi);
}

#endif
