/* fp64 reference of DSA sparse attention (spattn/dsa.h), written from its
 * definition, sharing no code with the library: for each query token t and
 * query head h = n G + g,
 *   z[r] = scale * (q[t][h] . k[r][n] + qr[t][h] . kr[r][n])
 *   out[t][h] = sum_r softmax(z)[r] * v[r][n]
 * over the rows r the token selects and sees (slot order, then token order;
 * a slot given twice counts twice), with M = max z and L = sum exp(z - M).
 * Dense row-major double arrays; the key, its rope part and the value as
 * each sequence's logical rows (the paging is the test's business). Each
 * output comes with a magnitude that bounds its rounding error, widened by
 * the softmax's sensitivity to score errors (ref_nsa_select.h). */
#ifndef SPA_REF_DSA_SPARSE_ATTENTION_H
#define SPA_REF_DSA_SPARSE_ATTENTION_H

#include <stdint.h>

typedef struct ref_dsa_sa_problem {
    int64_t t, n1, n2, d, dr, dv, kc, bs, batches; /* dr 0: no rope part */
    int64_t lmax;            /* rows per sequence in k, kr, v */
    const int64_t *sq, *len; /* per batch: query count S_b, key count L_b */
    const int32_t *idx;      /* [t][n2][kc]: a block or -1 */
    double scale;
    int causal; /* sparse_mode 3: query i of batch b sees tokens up to L_b - S_b + i */
    int round;  /* REF_ROUND_* (ref_nsa_select.h): P rounded before P V */
} ref_dsa_sa_problem;

/* The rows query i of batch b (token t) attends with key head n, in the
 * order the sums take them: the tokens of each slot that are below L_b and
 * that the query sees. rows holds kc * bs entries; returns the count. */
int64_t ref_dsa_sa_rows(const ref_dsa_sa_problem *p, int64_t b, int64_t i, int64_t t, int64_t n, int64_t *rows);

/* q [t][n1][d], qr [t][n1][dr], k [batches][lmax][n2][d],
 * kr [batches][lmax][n2][dr], v [batches][lmax][n2][dv] (qr, kr unread
 * when dr is 0) ->
 *   o, o_mag [t][n1][dv];
 *   mx, mx_mag, sm, sm_mag [n2][t][G] (the outputs' layout): M, L and
 *   their magnitudes; a query that sees nothing: o 0, M -FLT_MAX, L 0
 *   (magnitudes 0: exact). */
void ref_dsa_sparse_attention(const ref_dsa_sa_problem *p, const double *q, const double *qr, const double *k,
                              const double *kr, const double *v, double *o, double *o_mag, double *mx,
                              double *mx_mag, double *sm, double *sm_mag);

/* The gradient's outputs (ref_dsa_sparse_attention_grad), each with its
 * magnitude: dq [t][n1][d], dqr [t][n1][dr] (unwritten when dr is 0), and
 * in the logical rows' layout dk [batches][lmax][n2][d], dkr
 * [batches][lmax][n2][dr], dv [batches][lmax][n2][dv]. */
typedef struct ref_dsa_sa_grads {
    double *dq, *dq_mag, *dqr, *dqr_mag;
    double *dk, *dk_mag, *dkr, *dkr_mag, *dv, *dv_mag;
} ref_dsa_sa_grads;

/* The gradient of ref_dsa_sparse_attention with P recomputed from the
 * given statistics mx, sm [n2][t][G] (M and L as the forward wrote them),
 * o (attention_out) and dy [t][n1][dv], over the forward's rows:
 *   P = exp(z - M) / L, dP = dy . v, Delta = dy . o, dS = P (dP - Delta),
 *   dq = scale sum dS k, dqr = scale sum dS kr,
 *   dk += scale dS q, dkr += scale dS qr, dv += P dy (every occurrence).
 * For a half dtype (p->round) P and dS are rounded to it before the
 * products that read them. A row no query sees, and every row past L_b,
 * gets 0 with magnitude 0 (exact), as does dq of a query that sees nothing.
 * The magnitudes bound the error of f32 sums (or double ones) of the terms
 * and of a library's recomputed scores: P's error is relative to
 * 1 + |scale| sum |q k| (M and L are given, read alike by both), dS's to
 * that times |dy| . |v| + |dy| . |o|. */
void ref_dsa_sparse_attention_grad(const ref_dsa_sa_problem *p, const double *q, const double *qr,
                                   const double *k, const double *kr, const double *v, const double *o,
                                   const double *dy, const double *mx, const double *sm, const ref_dsa_sa_grads *g);

#endif
