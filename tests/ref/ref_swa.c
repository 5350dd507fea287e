/* Sliding-window attention in fp64, token by token and head by head, as the
 * spec writes it: the band of query t (position i in its batch) is the keys
 * at positions max(0, i - W + 1) .. i of the same batch. */
#include "ref_swa.h"

#include <math.h>
#include <stdlib.h>

static double dot(const double *a, const double *b, int64_t n, double *mag)
{
    double s = 0.0, m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        s += a[i] * b[i];
        m += fabs(a[i] * b[i]);
    }
    if (mag != NULL)
        *mag = m;
    return s;
}

/* first key of the band of token t in a batch starting at s0 */
static int64_t band_lo(int64_t t, int64_t s0, int64_t w)
{
    return t - (w - 1) > s0 ? t - (w - 1) : s0;
}

void ref_swa(const ref_swa_problem *p, const double *q, const double *k, const double *v,
             double *o, double *o_mag, double *mx, double *mx_mag, double *sm, double *sm_mag)
{
    const int64_t g = p->n1 / p->n2;
    double *z = malloc(sizeof(double) * (size_t)(p->t + 1));
    double *zm = malloc(sizeof(double) * (size_t)(p->t + 1));
    for (int64_t b = 0; b < p->batches; b++)
        for (int64_t t = p->start[b]; t < p->start[b] + p->len[b]; t++)
            for (int64_t h = 0; h < p->n1; h++) {
                const int64_t n2 = h / g, lo = band_lo(t, p->start[b], p->window);
                const double *qr = q + (t * p->n1 + h) * p->d;
                double m = -INFINITY, mm = 0.0;
                for (int64_t j = lo; j <= t; j++) {
                    z[j] = p->scale * dot(qr, k + (j * p->n2 + n2) * p->d, p->d, &zm[j]);
                    zm[j] *= fabs(p->scale);
                    if (z[j] > m || isnan(z[j])) /* NaN sticks, as torch.max */
                        m = isnan(m) ? m : z[j];
                    if (zm[j] > mm)
                        mm = zm[j];
                }
                double l = 0.0, lm = 0.0;
                for (int64_t j = lo; j <= t; j++) {
                    const double e = exp(z[j] - m);
                    l += e;
                    if (e != 0.0) /* exp of an argument off by its rounding (none for a zero weight) */
                        lm += e * (1.0 + zm[j] + mm);
                }
                const int64_t at = t * p->n1 + h;
                mx[at] = m, mx_mag[at] = mm, sm[at] = l, sm_mag[at] = lm;
                for (int64_t e = 0; e < p->dv; e++) {
                    double s = 0.0, sg = 0.0;
                    for (int64_t j = lo; j <= t; j++) {
                        const double pj = exp(z[j] - m) / l;
                        const double x = v[(j * p->n2 + n2) * p->dv + e];
                        s += pj * x;
                        if (pj != 0.0)
                            sg += pj * fabs(x) * (1.0 + zm[j] + mm);
                    }
                    o[at * p->dv + e] = s;
                    o_mag[at * p->dv + e] = sg;
                }
            }
    free(z), free(zm);
}

void ref_swa_grad(const ref_swa_problem *p, const double *q, const double *k, const double *v,
                  const double *o, const double *dy, const double *mx, const double *sm,
                  double *dq, double *dq_mag, double *dk, double *dk_mag, double *dv,
                  double *dv_mag)
{
    const int64_t g = p->n1 / p->n2;
    for (int64_t i = 0; i < p->t * p->n1 * p->d; i++)
        dq[i] = dq_mag[i] = 0.0;
    for (int64_t i = 0; i < p->t * p->n2 * p->d; i++)
        dk[i] = dk_mag[i] = 0.0;
    for (int64_t i = 0; i < p->t * p->n2 * p->dv; i++)
        dv[i] = dv_mag[i] = 0.0;
    for (int64_t b = 0; b < p->batches; b++)
        for (int64_t t = p->start[b]; t < p->start[b] + p->len[b]; t++)
            for (int64_t h = 0; h < p->n1; h++) {
                const int64_t n2 = h / g, lo = band_lo(t, p->start[b], p->window);
                const int64_t at = t * p->n1 + h;
                const double *qr = q + at * p->d, *dyr = dy + at * p->dv;
                double dm;
                const double dd = dot(dyr, o + at * p->dv, p->dv, &dm);
                for (int64_t j = lo; j <= t; j++) {
                    const double *kr = k + (j * p->n2 + n2) * p->d;
                    const double *vr = v + (j * p->n2 + n2) * p->dv;
                    double zmag, pm;
                    const double z = p->scale * dot(qr, kr, p->d, &zmag);
                    const double pj = exp(z - mx[at]) / sm[at];
                    const double dp = dot(dyr, vr, p->dv, &pm);
                    const double ds = pj * (dp - dd);
                    /* |dS| bound with the errors of P (through z) and of dP, D */
                    const double dsm = pj == 0.0 ? 0.0 : pj * (fabs(dp - dd) * (1.0 + fabs(p->scale) * zmag) + pm + dm);
                    for (int64_t c = 0; c < p->d; c++) {
                        dq[at * p->d + c] += p->scale * ds * kr[c];
                        dq_mag[at * p->d + c] += fabs(p->scale) * dsm * fabs(kr[c]);
                        dk[(j * p->n2 + n2) * p->d + c] += p->scale * ds * qr[c];
                        dk_mag[(j * p->n2 + n2) * p->d + c] += fabs(p->scale) * dsm * fabs(qr[c]);
                    }
                    for (int64_t e = 0; e < p->dv; e++) {
                        dv[(j * p->n2 + n2) * p->dv + e] += pj * dyr[e];
                        dv_mag[(j * p->n2 + n2) * p->dv + e] +=
                            pj == 0.0 ? 0.0 : pj * (1.0 + fabs(p->scale) * zmag) * fabs(dyr[e]);
                    }
                }
            }
}
