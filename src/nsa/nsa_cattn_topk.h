/* The top-K of NsaCompressAttention (docs/nsa_compress_attention.md 2): the
 * min(K, n) largest importance values in descending order, equal values by
 * ascending block, NaN below every number; the slots past n are -1. Shared
 * by every kernel (the f32 sums are exact as doubles, so one comparison
 * serves both). */
#ifndef SPA_NSA_CATTN_TOPK_H
#define SPA_NSA_CATTN_TOPK_H

#include <float.h>
#include <stdint.h>

#include "nsa_cattn_kernel.h"

/* The selection blocks of a batch of ncmp compressed keys: ceil(ncmp / M)
 * (the training op), or CANN's inference op's ceil(((ncmp - 1) d + l) / l'),
 * the blocks the tokens behind the keys span (l, l' <= 2^30 and ncmp <=
 * 2^31 there: no overflow). */
static inline int64_t spa_nsca_nsel(const spa_nsca_args *a, int64_t ncmp)
{
    if (ncmp == 0)
        return 0;
    if (!a->infer_sel)
        return (ncmp + a->msel - 1) / a->msel;
    const int64_t ls = a->msel * a->cmp_stride;
    return ((ncmp - 1) * a->cmp_stride + a->cmp_block + ls - 1) / ls;
}

/* The importance of block j of nsel: sum, or FLT_MAX where the block is
 * forced in (its topk-mask entry tm[j], or the inference op's block 0 and
 * last two blocks: first in the top-K, in ascending order). */
static inline double spa_nsca_importance(const spa_nsca_args *a, const uint8_t *tm, int64_t j, int64_t nsel,
                                         double sum)
{
    const int forced = (tm != NULL && tm[j]) || (a->infer_sel && (j == 0 || j >= nsel - 2));
    return forced ? (double)FLT_MAX : sum;
}

/* Whether value x of block i ranks before value y of block j (i < j is the
 * stable order: blocks are offered in ascending order). */
static inline int spa_nsca_before(double x, double y)
{
    if (y != y) /* NaN ranks last: anything that is a number goes first */
        return x == x;
    return x > y;
}

/* imp[0..n) -> out[i * os] for i < k; topv / topi: k scratch slots. */
static inline void spa_nsca_topk(const double *imp, int64_t n, int64_t k, double *topv,
                                 int32_t *topi, int32_t *out, int64_t os)
{
    int64_t have = 0;
    for (int64_t j = 0; j < n; j++) {
        const double x = imp[j];
        /* the first slot it goes before; equal values stay in block order */
        int64_t pos = have;
        while (pos > 0 && spa_nsca_before(x, topv[pos - 1]))
            pos--;
        if (pos >= k)
            continue;
        const int64_t last = have < k ? have : k - 1;
        for (int64_t i = last; i > pos; i--) {
            topv[i] = topv[i - 1];
            topi[i] = topi[i - 1];
        }
        topv[pos] = x;
        topi[pos] = (int32_t)j;
        if (have < k)
            have++;
    }
    for (int64_t i = 0; i < k; i++)
        out[i * os] = i < have ? topi[i] : -1;
}

/* The importance of the nsel selection blocks of a token and its top-K
 * into out[i * os]: cs, P summed over the token's heads, key j at
 * cs[j * pitch]; tm, its topk-mask row or NULL; imp [nsel], topv / topi
 * [K]: scratch. The terms in the spec's order (m, then n, ascending), each
 * loop clipped to the keys that exist: the ratios of the blocks to d may
 * be far larger than the keys (a block of 2^62 tokens). */
static inline void spa_nsca_token_topk(const spa_nsca_args *a, const float *cs, int64_t pitch, int64_t ncmp,
                                       const uint8_t *tm, double *imp, double *topv, int32_t *topi,
                                       int32_t *out, int64_t os)
{
    const int64_t M = a->msel, NN = a->nn, nsel = spa_nsca_nsel(a, ncmp);
    for (int64_t j = 0; j < nsel; j++) {
        float acc = 0.0f;
        const int64_t top = M * (j + 1);
        int64_t m0 = top - (ncmp - 1) - (NN - 1);
        for (int64_t m = m0 > 0 ? m0 : 0; m < M && top - m >= 0; m++) {
            const int64_t b = top - m, n0 = b - (ncmp - 1), n1 = b < NN - 1 ? b : NN - 1;
            for (int64_t n = n0 > 0 ? n0 : 0; n <= n1; n++)
                acc += cs[(b - n) * pitch];
        }
        imp[j] = spa_nsca_importance(a, tm, j, nsel, (double)acc);
    }
    spa_nsca_topk(imp, nsel, a->kc, topv, topi, out, os);
}

#endif
