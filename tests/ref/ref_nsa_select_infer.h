/* fp64 reference of selected attention on a KV cache (spattn/nsa_infer.h),
 * written from its definition, sharing no code with the library: the newest
 * S_b queries of each sequence, query i at position L_b - S_b + i attending
 * the keys of its selected blocks up to that position. Dense row-major double
 * arrays; the cache as each sequence's logical rows (the paging is the
 * test's business). Each output comes with a magnitude that bounds its
 * rounding error (ref_nsa_select.h). */
#ifndef SPA_REF_NSA_SELECT_INFER_H
#define SPA_REF_NSA_SELECT_INFER_H

#include <stdint.h>

typedef struct ref_nsasi_problem {
    int64_t t, n1, n2, d, dv, bs, kc, batches;
    int64_t lmax;              /* rows per sequence in k / v */
    const int64_t *sq, *len;   /* per batch: query count S_b, length L_b */
    const int32_t *idx;        /* [t][n2][kc]; -1: nothing */
    double scale;
    int round;                 /* REF_ROUND_*: P rounded before P V */
} ref_nsasi_problem;

/* q [t][n1][d], k [batches][lmax][n2][d], v [batches][lmax][n2][dv]
 * -> o, o_mag [t][n1][dv]. */
void ref_nsa_select_infer(const ref_nsasi_problem *p, const double *q, const double *k, const double *v,
                          double *o, double *o_mag);

#endif
