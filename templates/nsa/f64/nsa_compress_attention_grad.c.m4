SPA_STAMP
/* NsaCompressAttention backward in float64 (docs/nsa_compress_attention.md
 * 3, f64 throughout): per query token and head, P from the saved
 * statistics, dP = dY Vᵀ, dS = P (dP - D) (0 on masked scores); dq stored,
 * dK (unscaled) and dV rows added into the double partials, whose row 0 is
 * row kvlo of k / v. Key and value in place (kstart: a row of k / v). */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "nsa_cattn_kernel.h"

static int64_t visible_end(const spa_nsca_args *a, int64_t s, int64_t ncmp)
{
    int64_t end = ncmp;
    if (a->causal) {
        const int64_t lim = s + a->pos_shift - a->cmp_block + 1;
        end = lim < 0 ? 0 : lim / a->cmp_stride + 1;
        end = end < ncmp ? end : ncmp;
    }
    if (a->mask != NULL) {
        const uint8_t *mr = a->mask + s * a->mask_cols;
        while (end > 0 && mr[end - 1])
            end--;
    }
    return end;
}

void NSCAG64_KSYM()(const spa_nsca_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                    int64_t kstart, int64_t ncmp, int64_t kvlo, float *dkp_, float *dvp_,
                    float *scratch)
{
    const double *q = a->q, *k = a->k, *v = a->v, *o = a->o, *dy = a->dy, *mx = a->mx,
                 *sm = a->sm;
    double *dq = a->dq;
    const int64_t G = a->g, D = a->d, DV = a->dv;
    double *dkp = (double *)(void *)dkp_ + (kstart - kvlo) * D;
    double *dvp = (double *)(void *)dvp_ + (kstart - kvlo) * DV;
    double *p = (double *)(void *)scratch; /* [max_cmp] P */
    double *ds = p + a->rows_max;          /* [max_cmp] dS */
    double *acc = ds + a->rows_max;        /* [D] */
    for (int64_t t = t0; t < t1; t++) {
        const int64_t s = t - qstart, vend = visible_end(a, s, ncmp);
        const int64_t rows = vend > 0 ? vend : ncmp;
        const uint8_t *mr = a->mask != NULL ? a->mask + s * a->mask_cols : NULL;
        for (int64_t g = 0; g < G; g++) {
            const int64_t h = h2 * G + g;
            const double *qr = q + t * a->qs0 + h * a->qs1, *yr = dy + t * a->dys0 + h * a->dys1,
                         *orow = o + t * a->os0 + h * a->os1;
            const double m = mx[t * a->ms0 + h * a->ms1], l = sm[t * a->ss0 + h * a->ss1];
            double dd = 0.0;
            for (int64_t e = 0; e < DV; e++)
                dd += yr[e * a->dys2] * orow[e * a->os2];
            for (int64_t c = 0; c < rows; c++) {
                const double *kr = k + (kstart + c) * a->ks0 + h2 * a->ks1,
                             *vr = v + (kstart + c) * a->vs0 + h2 * a->vs1;
                const int masked = c >= vend || (mr != NULL && mr[c]);
                double z = vend > 0 ? -INFINITY : -FLT_MAX; /* -FLT_MAX in a fully masked row */
                if (!masked) {
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        dot += qr[d * a->qs2] * kr[d * a->ks2];
                    z = a->scale64 * dot;
                }
                p[c] = exp(z - m) / l;
                double dp = 0.0;
                for (int64_t e = 0; e < DV; e++)
                    dp += yr[e * a->dys2] * vr[e * a->vs2];
                ds[c] = masked ? 0.0 : p[c] * (dp - dd);
            }
            for (int64_t d = 0; d < D; d++)
                acc[d] = 0.0;
            for (int64_t c = 0; c < rows; c++) {
                if (vend > 0 && mr != NULL && mr[c]) /* not attended: no part, whatever its values */
                    continue;
                const double *kr = k + (kstart + c) * a->ks0 + h2 * a->ks1;
                for (int64_t d = 0; d < D; d++) {
                    acc[d] += ds[c] * kr[d * a->ks2];
                    dkp[c * D + d] += ds[c] * qr[d * a->qs2];
                }
                for (int64_t e = 0; e < DV; e++)
                    dvp[c * DV + e] += p[c] * yr[e * a->dys2];
            }
            for (int64_t d = 0; d < D; d++)
                dq[t * a->dqs0 + h * a->dqs1 + d * a->dqs2] = a->scale64 * acc[d];
        }
    }
}
