/* fp64 reference of the DSA lightning indexer's gradient (spattn/dsa.h),
 * written from its definition, sharing no code with the library: for query
 * token t of batch b, key head n, query head h = n G + g and slot j of
 * idx[t][n] selecting key x_j of the batch (-1: nothing), with
 * s = q[t][h] . k[b][x_j][n] and dy = dy[t][n][j]:
 *   dw[t][h]       = sum_j dy ReLU(s)
 *   dq[t][h]       = sum_j dy w[t][h] [s > 0] k[b][x_j][n]
 *   dk[b][x][n]    = sum over (t, j) with x_j = x of dy sum_g w[t][h] [s > 0] q[t][h]
 * ([s > 0] is 0 for a NaN s; ReLU(NaN) is NaN). Dense row-major double
 * arrays; the key and dk as each sequence's logical rows (the layout is the
 * test's business).
 *
 * Each output comes with a magnitude, the sum of |term| (for dw,
 * sum_j |dy| sum_d |q k|: ReLU(s) is off by at most the error of s), that
 * bounds the rounding error of any summation order, and dq and dk with an
 * uncertainty: the indicator [s > 0] of a score that a library computing s
 * in lower precision may round to the other side of 0 (|s| below
 * s_unc * sum_d |q k|) is uncertain, and such a term's |term| goes to the
 * uncertainty instead of the magnitude: the output may be off by all of it
 * (the term taken or not). s_unc 0: every indicator certain (inputs whose
 * scores are exact). */
#ifndef SPA_REF_DSA_LIGHTNING_INDEXER_GRAD_H
#define SPA_REF_DSA_LIGHTNING_INDEXER_GRAD_H

#include <stdint.h>

typedef struct ref_dsa_lig_problem {
    int64_t t, n1, n2, d, kc, batches;
    int64_t lmax;            /* rows per sequence in k and dk */
    const int64_t *sq, *len; /* per batch: query count S_b, key count L_b */
    const int64_t *idx;      /* [t][n2][kc]: a key 0 .. L_b - 1 of the token's batch, or -1 */
    double s_unc;            /* the indicator of |s| < s_unc * sum_d |q k| is uncertain */
    /* 0: a term whose indicator is 0 is absent; 1: it is multiplied in
     * (dy w 0 k: NaN where dy, w or k is not finite), as a library that
     * multiplies by the indicator rather than skipping would compute it */
    int zero_terms;
} ref_dsa_lig_problem;

/* The outputs, each with its magnitude (and the uncertainty of dq, dk):
 * dq [t][n1][d], dk [batches][lmax][n2][d] (rows no index selects, and
 * those past L_b: 0, magnitude 0), dw [t][n1]. */
typedef struct ref_dsa_lig_grads {
    double *dq, *dq_mag, *dq_unc;
    double *dk, *dk_mag, *dk_unc;
    double *dw, *dw_mag;
} ref_dsa_lig_grads;

/* q [t][n1][d], k [batches][lmax][n2][d], w [t][n1], dy [t][n2][kc] (not
 * read at -1 slots) -> g. Returns the count of slots holding neither -1 nor
 * a key of the batch (skipped: the test's draws are all valid). */
int64_t ref_dsa_lightning_indexer_grad(const ref_dsa_lig_problem *p, const double *q, const double *k,
                                       const double *w, const double *dy, const ref_dsa_lig_grads *g);

#endif
