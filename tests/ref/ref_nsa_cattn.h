/* fp64 reference of NsaCompressAttention and its backward
 * (docs/nsa_compress_attention.md 2, 3), written from the spec's formulas,
 * sharing no code with the library. Dense row-major double arrays; each
 * output comes with a magnitude (sum of |term|, widened by the softmax's
 * sensitivity to score errors) that bounds its rounding error. */
#ifndef SPA_REF_NSA_CATTN_H
#define SPA_REF_NSA_CATTN_H

#include <stdint.h>

#include "ref_nsa_select.h" /* REF_ROUND_*, ref_round_to */

typedef struct ref_nsca_problem {
    int64_t t1, t2, n1, n2, d, dv;
    int64_t l, st, ls, kc; /* compress block, stride, select block, K */
    int64_t batches;
    const int64_t *qstart, *qlen, *cstart, *clen; /* per batch */
    const uint8_t *mask;  /* [rows][mask_cols] 1 = masked, or NULL */
    int64_t mask_cols;
    const uint8_t *tmask; /* [rows][tmask_cols] 1 = forced, or NULL */
    int64_t tmask_cols;
    int causal; /* sparse_mode 2 */
    const int64_t *qpos0; /* per batch: the causal rule's position of its
                           * first query (NULL: 0; the inference op:
                           * L_b - S_b) */
    int infer; /* the inference op: ceil(((C - 1) d + l) / l') blocks, block 0
                * and the last two forced in */
    double scale;
    int round; /* REF_ROUND_* for P and dS */
} ref_nsca_problem;

/* Selection blocks of a batch with c compressed keys. */
int64_t ref_nsca_blocks(const ref_nsca_problem *p, int64_t c);

/* Forward: q [t1][n1][d], k [t2][n2][d], v [t2][n2][dv] -> o, o_mag
 * [t1][n1][dv], mx, sm [t1][n1]; imp [t1][n2][imp_cols] (the importance of
 * each selection block, FLT_MAX where forced; unused slots 0) and topk
 * [t1][n2][kc] (the spec's stable descending order, -1 padding). */
void ref_nsa_cattn(const ref_nsca_problem *p, const double *q, const double *k, const double *v,
                   double *o, double *o_mag, double *mx, double *sm, double *imp,
                   int64_t imp_cols, int32_t *topk);

/* Backward with P from the given mx, sm [t1][n1]; o, dy [t1][n1][dv]. */
void ref_nsa_cattn_grad(const ref_nsca_problem *p, const double *q, const double *k,
                        const double *v, const double *o, const double *dy, const double *mx,
                        const double *sm, double *dq, double *dq_mag, double *dk, double *dk_mag,
                        double *dv, double *dv_mag);

#endif
