/* The top-K of the LightningIndexer (spattn/dsa.h): the min(K, n) largest
 * of n scores in descending order, equal values by ascending key, NaN after
 * every number. A heap of the K best so far whose root is the worst of
 * them: O(n log K), and the same result for the same scores whoever runs it
 * (a total order: no two keys compare equal). */
#ifndef SPA_DSA_TOPK_H
#define SPA_DSA_TOPK_H

#include <stdbool.h>
#include <stdint.h>

/* Whether key i of score x ranks before key j of score y. */
static inline bool spa_dsa_before(double x, int32_t i, double y, int32_t j)
{
    if (x != x) /* a NaN goes before a NaN of a later key only */
        return y != y && i < j;
    if (y != y)
        return true;
    return x > y || (x == y && i < j);
}

/* Sift entry at of the heap [0, n) down: every parent ranks after its
 * children (the root is the worst). */
static inline void spa_dsa_sift(double *v, int32_t *k, int64_t n, int64_t at)
{
    for (;;) {
        const int64_t l = 2 * at + 1, r = l + 1;
        int64_t worst = at;
        if (l < n && spa_dsa_before(v[worst], k[worst], v[l], k[l]))
            worst = l;
        if (r < n && spa_dsa_before(v[worst], k[worst], v[r], k[r]))
            worst = r;
        if (worst == at)
            return;
        const double tv = v[at];
        const int32_t tk = k[at];
        v[at] = v[worst], k[at] = k[worst];
        v[worst] = tv, k[worst] = tk;
        at = worst;
    }
}

/* score[0..n) (key s scores score[s]) -> the m = min(kc, n) best into
 * hv / hk [0, m) in rank order; returns m. hv / hk: kc slots. */
static inline int64_t spa_dsa_topk(const double *score, int64_t n, int64_t kc, double *hv, int32_t *hk)
{
    const int64_t m = n < kc ? n : kc;
    for (int64_t s = 0; s < m; s++)
        hv[s] = score[s], hk[s] = (int32_t)s;
    for (int64_t at = m / 2 - 1; at >= 0; at--)
        spa_dsa_sift(hv, hk, m, at);
    for (int64_t s = m; s < n; s++)
        if (spa_dsa_before(score[s], (int32_t)s, hv[0], hk[0])) {
            hv[0] = score[s], hk[0] = (int32_t)s;
            spa_dsa_sift(hv, hk, m, 0);
        }
    /* the worst left at the root goes last: rank order from the back */
    for (int64_t end = m - 1; end > 0; end--) {
        const double tv = hv[0];
        const int32_t tk = hk[0];
        hv[0] = hv[end], hk[0] = hk[end];
        hv[end] = tv, hk[end] = tk;
        spa_dsa_sift(hv, hk, end, 0);
    }
    return m;
}

#endif
