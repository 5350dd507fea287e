/* fp64 reference of the DSA lightning indexer's gradient: per token, key
 * head and slot, the selected key's scores for the G query heads in
 * double, then the three sums of their terms, in slot order. */
#include "ref_dsa_lightning_indexer_grad.h"

#include <math.h>
#include <string.h>

static void zero(double *x, int64_t n)
{
    if (n > 0)
        memset(x, 0, sizeof(double) * (size_t)n);
}

int64_t ref_dsa_lightning_indexer_grad(const ref_dsa_lig_problem *p, const double *q, const double *k,
                                       const double *w, const double *dy, const ref_dsa_lig_grads *g)
{
    const int64_t gc = p->n1 / p->n2, nq = p->t * p->n1 * p->d, nk = p->batches * p->lmax * p->n2 * p->d;
    zero(g->dq, nq), zero(g->dq_mag, nq), zero(g->dq_unc, nq);
    zero(g->dk, nk), zero(g->dk_mag, nk), zero(g->dk_unc, nk);
    zero(g->dw, p->t * p->n1), zero(g->dw_mag, p->t * p->n1);
    int64_t invalid = 0;
    for (int64_t b = 0, t = 0; b < p->batches; b++)
        for (int64_t i = 0; i < p->sq[b]; i++, t++)
            for (int64_t n = 0; n < p->n2; n++)
                for (int64_t j = 0; j < p->kc; j++) {
                    const int64_t slot = (t * p->n2 + n) * p->kc + j, x = p->idx[slot];
                    if (x == -1)
                        continue;
                    if (x < 0 || x >= p->len[b]) {
                        invalid++;
                        continue;
                    }
                    const double dyj = dy[slot];
                    const int64_t row = (b * p->lmax + x) * p->n2 + n;
                    const double *kx = k + row * p->d;
                    double *dk = g->dk + row * p->d, *dkm = g->dk_mag + row * p->d, *dku = g->dk_unc + row * p->d;
                    for (int64_t h = n * gc; h < (n + 1) * gc; h++) {
                        const int64_t th = t * p->n1 + h;
                        const double *qh = q + th * p->d;
                        double s = 0.0, smag = 0.0;
                        for (int64_t e = 0; e < p->d; e++) {
                            s += qh[e] * kx[e];
                            smag += fabs(qh[e] * kx[e]);
                        }
                        const double relu = isnan(s) ? s : s > 0.0 ? s : 0.0;
                        g->dw[th] += dyj * relu;
                        if (dyj != 0.0)
                            g->dw_mag[th] += fabs(dyj) * smag;
                        const int on = s > 0.0; /* 0 for NaN */
                        const int certain = !(isfinite(smag) && fabs(s) < p->s_unc * smag);
                        if (!on && certain && !p->zero_terms)
                            continue;
                        const double c = dyj * w[th];
                        const double coef = on ? c : c * 0.0;
                        double *dq = g->dq + th * p->d, *dqm = g->dq_mag + th * p->d, *dqu = g->dq_unc + th * p->d;
                        for (int64_t e = 0; e < p->d; e++) {
                            if (on || p->zero_terms) {
                                dq[e] += coef * kx[e];
                                dk[e] += coef * qh[e];
                            }
                            if (!certain) {
                                dqu[e] += fabs(c * kx[e]);
                                dku[e] += fabs(c * qh[e]);
                            } else if (on) {
                                dqm[e] += fabs(c * kx[e]);
                                dkm[e] += fabs(c * qh[e]);
                            }
                        }
                    }
                }
    return invalid;
}
