/* fp64 reference of sliding-window attention, written from
 * docs/sliding_window_attention.md 4. Dense row-major double arrays. */
#ifndef SPA_REF_SWA_H
#define SPA_REF_SWA_H

#include <stdint.h>

typedef struct ref_swa_problem {
    int64_t t, n1, n2, d, dv;
    int64_t batches;
    const int64_t *start, *len; /* batch b: tokens [start[b], start[b] + len[b]) */
    int64_t window;             /* keys of a band, the query's own included (W >= 1) */
    double scale;
} ref_swa_problem;

/* o/o_mag [T,N1,Dv]; mx, sm [T,N1] with their magnitudes. */
void ref_swa(const ref_swa_problem *p, const double *q, const double *k, const double *v,
             double *o, double *o_mag, double *mx, double *mx_mag, double *sm, double *sm_mag);
/* dq/dq_mag [T,N1,D], dk/dk_mag [T,N2,D], dv/dv_mag [T,N2,Dv]; mx, sm given [T,N1]. */
void ref_swa_grad(const ref_swa_problem *p, const double *q, const double *k, const double *v,
                  const double *o, const double *dy, const double *mx, const double *sm,
                  double *dq, double *dq_mag, double *dk, double *dk_mag, double *dv,
                  double *dv_mag);

#endif
