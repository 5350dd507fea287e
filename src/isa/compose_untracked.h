/* The _num narrowings (exact for lanes that are not NaN, for runs that
 * track NaN with spa_vf_nan_seen / spa_vf_any_nan and narrow again with the
 * exact form when one was met) on a layer whose exact narrowing costs the
 * same: the _num forms are the exact ones and nothing is tracked (the
 * second pass of such a run is dead code). Included by a layer after its
 * narrowing stores, the two-vector ones included. */
#ifndef SPA_ISA_COMPOSE_UNTRACKED_H
#define SPA_ISA_COMPOSE_UNTRACKED_H

SPA_ISA_INLINE void spa_vf_store_f16_num(uint16_t *p, spa_vf v) { spa_vf_store_f16(p, v); }
SPA_ISA_INLINE void spa_vf_store2_f16_num(uint16_t *p, spa_vf lo, spa_vf hi) { spa_vf_store2_f16(p, lo, hi); }
SPA_ISA_INLINE void spa_vf_store_bf16_num(uint16_t *p, spa_vf v) { spa_vf_store_bf16(p, v); }
SPA_ISA_INLINE void spa_vf_store2_bf16_num(uint16_t *p, spa_vf lo, spa_vf hi) { spa_vf_store2_bf16(p, lo, hi); }
SPA_ISA_INLINE spa_vf spa_vf_nan_seen(spa_vf seen, spa_vf v)
{
    (void)v;
    return seen;
}
SPA_ISA_INLINE int spa_vf_any_nan(spa_vf seen)
{
    (void)seen;
    return 0;
}

#endif
