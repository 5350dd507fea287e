SPA_STAMP
/* NsaCompressAttention forward in float64 (docs/nsa_compress_attention.md
 * 2, f64 throughout): per query token and head, the scores over the batch
 * keys up to the last visible one (every key of a fully masked row), the
 * softmax, O = P V, the group sums of P; then per token the importance and
 * its top-K. Key and value are read in place (kstart: a row of k / v). */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "nsa_cattn_kernel.h"
#include "nsa_cattn_topk.h"

/* One past the last key visible to position s (0: a fully masked row). */
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

void NSCA64_KSYM()(const spa_nsca_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                   int64_t qend, int64_t kstart, int64_t ncmp, float *scratch)
{
    int64_t ms0, ms1, mshift, ss0, ss1, sshift;
    spa_nsca_stat_view(a, a->ms0, a->ms1, qstart, qend, &ms0, &ms1, &mshift);
    spa_nsca_stat_view(a, a->ss0, a->ss1, qstart, qend, &ss0, &ss1, &sshift);
    const double *q = a->q, *k = a->k, *v = a->v;
    double *o = a->o, *mx = (double *)a->mx + mshift, *sm = (double *)a->sm + sshift;
    const int64_t G = a->g, D = a->d, DV = a->dv;
    double *z = (double *)(void *)scratch;  /* [max_cmp] scores, then P */
    double *colsum = z + a->rows_max;       /* [max_cmp] */
    double *imp = colsum + a->rows_max;     /* [sel_max] */
    double *topv = imp + a->sel_max;        /* [K] */
    double *acc = topv + a->kc;             /* [DV] */
    int32_t *topi = (int32_t *)(void *)(acc + DV); /* [K] */
    for (int64_t t = t0; t < t1; t++) {
        const int64_t s = t - qstart, vend = visible_end(a, s, ncmp);
        const int64_t rows = vend > 0 ? vend : ncmp; /* keys past rows have P = 0 */
        const uint8_t *mr = a->mask != NULL ? a->mask + s * a->mask_cols : NULL;
        for (int64_t c = 0; c < ncmp; c++)
            colsum[c] = 0.0;
        for (int64_t g = 0; g < G; g++) {
            const int64_t h = h2 * G + g;
            const double *qr = q + t * a->qs0 + h * a->qs1;
            double m = -FLT_MAX, l = 0.0;
            for (int64_t c = 0; c < rows; c++) {
                const double *kr = k + (kstart + c) * a->ks0 + h2 * a->ks1;
                if (c >= vend || (mr != NULL && mr[c])) { /* -FLT_MAX in a fully masked row */
                    z[c] = vend > 0 ? -INFINITY : -FLT_MAX;
                    continue;
                }
                double dot = 0.0;
                for (int64_t d = 0; d < D; d++)
                    dot += qr[d * a->qs2] * kr[d * a->ks2];
                z[c] = a->scale64 * dot;
                m = z[c] > m ? z[c] : m;
            }
            for (int64_t c = 0; c < rows; c++) {
                z[c] = exp(z[c] - m);
                l += z[c];
            }
            for (int64_t e = 0; e < DV; e++)
                acc[e] = 0.0;
            for (int64_t c = 0; c < rows; c++) {
                if (vend > 0 && mr != NULL && mr[c]) /* not attended: no part, whatever its value */
                    continue;
                const double p = z[c] / l;
                const double *vr = v + (kstart + c) * a->vs0 + h2 * a->vs1;
                colsum[c] += p;
                for (int64_t e = 0; e < DV; e++)
                    acc[e] += p * vr[e * a->vs2];
            }
            for (int64_t e = 0; e < DV; e++)
                o[t * a->os0 + h * a->os1 + e * a->os2] = acc[e];
            for (int64_t c8 = 0; c8 < 8; c8++) {
                mx[t * ms0 + h * ms1 + c8 * a->ms2] = m;
                sm[t * ss0 + h * ss1 + c8 * a->ss2] = l;
            }
        }
        const int64_t M = a->msel, NN = a->nn, nsel = spa_nsca_nsel(a, ncmp);
        const uint8_t *tm = a->tmask != NULL ? a->tmask + s * a->tmask_cols : NULL;
        for (int64_t j = 0; j < nsel; j++) {
            /* the spec terms in its order, each loop clipped to the keys
             * that exist (the ratios of the blocks to d may be far larger) */
            double sum = 0.0;
            const int64_t top = M * (j + 1);
            int64_t m0 = top - (ncmp - 1) - (NN - 1);
            for (int64_t mm = m0 > 0 ? m0 : 0; mm < M && top - mm >= 0; mm++) {
                const int64_t b = top - mm, n0 = b - (ncmp - 1), n1 = b < NN - 1 ? b : NN - 1;
                for (int64_t n = n0 > 0 ? n0 : 0; n <= n1; n++)
                    sum += colsum[b - n];
            }
            imp[j] = spa_nsca_importance(a, tm, j, nsel, sum);
        }
        spa_nsca_topk(imp, nsel, a->kc, topv, topi, a->topk + t * a->ts0 + h2 * a->ts1, a->ts2);
    }
}
