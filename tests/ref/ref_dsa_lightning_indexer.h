/* fp64 reference of the DSA lightning indexer (spattn/dsa.h), written from
 * its definition, sharing no code with the library: for each query token t
 * and key head n the scores
 *   I[s] = sum_{g < G} w[t][n G + g] * ReLU(q[t][n G + g] . k[s][n])
 * over the keys the token sees, and those keys ordered by I descending, NaN
 * after every number, equal values by ascending key. Dense row-major double
 * arrays; the key as each sequence's logical rows (the paging is the test's
 * business). Each score comes with a magnitude that bounds its rounding
 * error: sum_g |w| * sum_d |q| |k|. */
#ifndef SPA_REF_DSA_LIGHTNING_INDEXER_H
#define SPA_REF_DSA_LIGHTNING_INDEXER_H

#include <stdint.h>

typedef struct ref_dsa_li_problem {
    int64_t t, n1, n2, d, batches;
    int64_t lmax;            /* rows per sequence in k */
    const int64_t *sq, *len; /* per batch: query count S_b, key count L_b */
    int causal;              /* sparse_mode 3: query i of batch b at L_b - S_b + i */
} ref_dsa_li_problem;

/* How many keys query i of a batch with S_b queries and L_b keys sees: the
 * keys 0 .. that count - 1 (causal: up to its position, none where that is
 * negative; otherwise all L_b). */
int64_t ref_dsa_li_seen(int64_t sq, int64_t len, int64_t i, int causal);

/* q [t][n1][d], k [batches][lmax][n2][d], w [t][n1] ->
 *   seen [t]: the count of keys token t sees (keys 0 .. seen - 1);
 *   score, mag [t][n2][lmax]: I and its magnitude for the seen keys (0 past them);
 *   order [t][n2][lmax]: the seen keys sorted (I descending, NaN last, key
 *   ascending), -1 past them. */
void ref_dsa_lightning_indexer(const ref_dsa_li_problem *p, const double *q, const double *k, const double *w,
                               int64_t *seen, double *score, double *mag, int64_t *order);

#endif
