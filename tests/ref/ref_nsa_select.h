/* fp64 references of NsaSelectedAttention and its grad (spec/nsa.md 3.2,
 * 4.2), written from the formulas, sharing no code with the library. Dense
 * row-major double arrays. Each output comes with a magnitude (sum of |term|,
 * widened by the sensitivity of the softmax to score errors) that bounds its
 * rounding error. */
#ifndef SPA_REF_NSA_SELECT_H
#define SPA_REF_NSA_SELECT_H

#include <stdint.h>

/* Intermediate roundings of P and dS: none (fp32 / exact), fp16 or bf16. */
enum { REF_ROUND_NONE = 0, REF_ROUND_F16 = 1, REF_ROUND_BF16 = 2 };
double ref_round_to(double x, int round);

typedef struct ref_nsas_problem {
    int64_t t1, t2, n1, n2, d, dv, bs, kc;
    int64_t batches;
    const int64_t *qstart, *qlen, *kstart, *klen; /* per batch */
    const int32_t *idx;                           /* [t1][n2][kc] */
    double scale;
    int causal;
    int round; /* REF_ROUND_* */
} ref_nsas_problem;

/* q [t1][n1][d], k [t2][n2][d], v [t2][n2][dv] -> o, o_mag [t1][n1][dv],
 * mx, sm [t1][n1] (one value per head) and their magnitudes mx_mag, sm_mag. */
void ref_nsa_select(const ref_nsas_problem *p, const double *q, const double *k, const double *v,
                    double *o, double *o_mag, double *mx, double *mx_mag, double *sm,
                    double *sm_mag);

/* Gradient with P recomputed from the given mx, sm [t1][n1]; o and dy
 * [t1][n1][dv]. dq/dq_mag like q, dk/dk_mag like k, dv/dv_mag like v. */
void ref_nsa_select_grad(const ref_nsas_problem *p, const double *q, const double *k,
                         const double *v, const double *o, const double *dy, const double *mx,
                         const double *sm, double *dq, double *dq_mag, double *dk, double *dk_mag,
                         double *dv, double *dv_mag);

#endif
