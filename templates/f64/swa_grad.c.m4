SPA_STAMP
/* Sliding-window attention grad in float64 (docs/sliding_window_attention.md
 * 4, double throughout): per query token t and head h, over the keys p of its
 * band, read in place, with m and l from the saved statistics:
 *     P_p = exp(z_p - m) / l,  dS_p = P_p (dY . v[p] - dY . O)
 *     dq += scale dS_p k[p],  dK partial[p] += dS_p q,  dV partial[p] += P_p dY
 * (p ascending; heads ascending per token). Partials: [rows][d] and
 * [rows][dv] doubles from key row kvlo. The scratch holds one dq row. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "swa_kernel.h"

void SPA_KSYM(`swa_grad', `h1')(const spa_swa_args *a, int64_t h2, int64_t t0, int64_t t1,
                                int64_t bstart, int64_t kvlo, void *dkp_, void *dvp_,
                                void *scratch)
{
    const double *q = a->q, *k = a->k, *v = a->v, *o = a->o, *dy = a->dy;
    const double *mx = a->mx, *sm = a->sm;
    double *dq = a->dq, *dkp = dkp_, *dvp = dvp_, *acc = scratch;
    const int64_t D = a->d, DV = a->dv;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t lo = spa_swa_lo(t, bstart, a->left);
        for (int64_t g = 0; g < a->g; g++) {
            const int64_t h = h2 * a->g + g;
            const double *qr = q + t * a->qs0 + h * a->qs1;
            const double *dyr = dy + t * a->dys0 + h * a->dys1;
            const double *orow = o + t * a->os0 + h * a->os1;
            const double m = mx[t * a->ms0 + h * a->ms1], l = sm[t * a->ss0 + h * a->ss1];
            double dsum = 0.0;
            for (int64_t e = 0; e < DV; e++)
                dsum += dyr[e * a->dys2] * orow[e * a->os2];
            for (int64_t d = 0; d < D; d++)
                acc[d] = 0.0;
            for (int64_t p = lo; p <= t; p++) {
                const double *kr = k + p * a->ks0 + h2 * a->ks1;
                const double *vr = v + p * a->vs0 + h2 * a->vs1;
                double z = 0.0, dp = 0.0;
                for (int64_t d = 0; d < D; d++)
                    z += qr[d * a->qs2] * kr[d * a->ks2];
                for (int64_t e = 0; e < DV; e++)
                    dp += dyr[e * a->dys2] * vr[e * a->vs2];
                const double pr = exp(a->scale64 * z - m) / l;
                const double dsv = pr * (dp - dsum);
                double *dkr = dkp + (p - kvlo) * D, *dvr = dvp + (p - kvlo) * DV;
                for (int64_t d = 0; d < D; d++) {
                    acc[d] += dsv * kr[d * a->ks2];
                    dkr[d] += dsv * qr[d * a->qs2];
                }
                for (int64_t e = 0; e < DV; e++)
                    dvr[e] += pr * dyr[e * a->dys2];
            }
            double *dqr = dq + t * a->dqs0 + h * a->dqs1;
            for (int64_t d = 0; d < D; d++)
                dqr[d * a->dqs2] = a->scale64 * acc[d] + 0.0;
        }
    }
}
