SPA_STAMP
/* Sliding-window attention forward in float64 (docs/sliding_window_attention.md
 * 4, double throughout): per query token t and head h, over the keys p of its
 * band [lo, t], read in place:
 *     z_p = scale * sum_d q[t][h][d] * k[p][n2][d]
 *     m = max z_p,  l = sum_p exp(z_p - m),  o[t][h][e] = sum_p exp(z_p - m) v[p][n2][e] / l
 * in two passes (the max, then the sums, p ascending). The scratch holds one
 * output row (Dv doubles). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "swa_kernel.h"

static double swa64_score(const spa_swa_args *a, const double *qr, int64_t p, int64_t h2)
{
    const double *k = a->k;
    const double *kr = k + p * a->ks0 + h2 * a->ks1;
    double z = 0.0;
    for (int64_t d = 0; d < a->d; d++)
        z += qr[d * a->qs2] * kr[d * a->ks2];
    return a->scale64 * z;
}

void SPA_KSYM(`swa', `h1')(const spa_swa_args *a, int64_t h2, int64_t t0, int64_t t1,
                           int64_t bstart, void *scratch)
{
    const double *q = a->q, *v = a->v;
    double *o = a->o, *mx = a->mx, *sm = a->sm;
    double *acc = scratch;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t lo = spa_swa_lo(t, bstart, a->left);
        for (int64_t g = 0; g < a->g; g++) {
            const int64_t h = h2 * a->g + g;
            const double *qr = q + t * a->qs0 + h * a->qs1;
            double m = -INFINITY;
            for (int64_t p = lo; p <= t; p++) {
                const double z = swa64_score(a, qr, p, h2);
                m = z > m ? z : m;
            }
            double l = 0.0;
            for (int64_t e = 0; e < a->dv; e++)
                acc[e] = 0.0;
            for (int64_t p = lo; p <= t; p++) {
                const double w = exp(swa64_score(a, qr, p, h2) - m);
                const double *vr = v + p * a->vs0 + h2 * a->vs1;
                l += w;
                for (int64_t e = 0; e < a->dv; e++)
                    acc[e] += w * vr[e * a->vs2];
            }
            double *orow = o + t * a->os0 + h * a->os1;
            for (int64_t e = 0; e < a->dv; e++)
                orow[e * a->os2] = acc[e] / l;
            for (int64_t c = 0; c < a->lanes; c++) {
                mx[t * a->ms0 + h * a->ms1 + c * a->ms2] = m;
                sm[t * a->ss0 + h * a->ss1 + c * a->ss2] = l;
            }
        }
    }
}
