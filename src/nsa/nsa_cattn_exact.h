/* What the NsaCompressAttention kernels (forward and grad, f16 / bf16 /
 * f32) share about which keys a query token attends
 * (docs/nsa_compress_attention.md 2): its visible end, the masked keys, and
 * the test that sends a lane group to the exact forms, where a NaN or an
 * infinity meets a key some lane does not attend. */
#ifndef SPA_NSA_CATTN_EXACT_H
#define SPA_NSA_CATTN_EXACT_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "nsa_cattn_kernel.h"
#include "nsa_select_mk.h"

/* The keys a token at in-batch position s (sequence position s +
 * pos_shift) sees: one past the last visible key (0: none, a fully masked
 * row), counted from key key0 (a part of the inference op's keys; its
 * driver gives every part a visible key of every token). */
static inline int64_t spa_nsca_visible_end(const spa_nsca_args *a, int64_t s, int64_t ncmp)
{
    int64_t end = ncmp;
    if (a->causal) {
        const int64_t lim = s + a->pos_shift - a->cmp_block + 1;
        end = lim < 0 ? 0 : lim / a->cmp_stride + 1 - a->key0;
        end = end < 0 ? 0 : end < ncmp ? end : ncmp;
    }
    if (a->mask != NULL) {
        const uint8_t *mr = a->mask + s * a->mask_cols;
        while (end > 0 && mr[end - 1])
            end--;
    }
    return end;
}

/* Whether key j is masked for the token at position s (vend: its visible end). */
static inline int spa_nsca_masked(const spa_nsca_args *a, int64_t s, int64_t j, int64_t vend)
{
    return j >= vend || (a->mask != NULL && a->mask[s * a->mask_cols + j]);
}

/* Whether the token at position s attends key j: an unmasked key, or every
 * key of the batch for a fully masked row (vend 0, where each scores
 * -FLT_MAX). The masked keys of any other row score -inf, weigh exactly 0
 * and take no part, whatever their values. */
static inline int spa_nsca_attends(const spa_nsca_args *a, int64_t s, int64_t j, int64_t vend, int64_t ncmp)
{
    return vend == 0 ? j < ncmp : !spa_nsca_masked(a, s, j, vend);
}

/* The score of a key the token does not attend (any key past the batch:
 * -inf; a masked key: -inf, or -FLT_MAX in a fully masked row). */
static inline float spa_nsca_fill(int64_t j, int64_t vend, int64_t ncmp)
{
    return j >= ncmp || vend > 0 ? -INFINITY : -FLT_MAX;
}

/* Whether a kernel row of n floats holds a NaN or an infinity (x * 0 is NaN
 * exactly there). */
static inline int spa_nsca_row_nonfinite(const float *row, int64_t n)
{
    spa_vf acc = spa_vf_zero();
    const spa_vf zero = spa_vf_zero();
    for (int64_t e = 0; e < n; e += SPA_VL)
        acc = spa_vf_add(acc, spa_vf_mul(spa_vf_load(row + e), zero));
    const float z = spa_vf_hsum(acc);
    return z != z;
}

#endif
