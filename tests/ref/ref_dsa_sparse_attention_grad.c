/* fp64 reference of DSA sparse attention's gradient (spattn/dsa.h), written
 * from the formulas, sharing no code with the library: per token and key
 * head the forward's rows (ref_dsa_sa_rows), then per query head of the
 * group and per row, in row order, the score in double, P from the given
 * statistics, dP, dS and their four products. Magnitudes as
 * ref_nsa_select_grad builds them (ref_nsa_select.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_dsa_sparse_attention.h"
#include "ref_nsa_select.h"

static void zero(double *x, double *mag, int64_t n)
{
    if (n > 0) {
        memset(x, 0, sizeof(double) * (size_t)n);
        memset(mag, 0, sizeof(double) * (size_t)n);
    }
}

/* a . b over n elements and sum |a b|. */
static double dot(const double *a, const double *b, int64_t n, double *mag)
{
    double acc = 0.0, m = 0.0;
    for (int64_t e = 0; e < n; e++) {
        acc += a[e] * b[e];
        m += fabs(a[e] * b[e]);
    }
    *mag = m;
    return acc;
}

/* x[e] += f y[e], xm[e] += fm |y[e]| over n elements. */
static void axpy(double *x, double *xm, double f, double fm, const double *y, int64_t n)
{
    for (int64_t e = 0; e < n; e++) {
        x[e] += f * y[e];
        xm[e] += fm * fabs(y[e]);
    }
}

void ref_dsa_sparse_attention_grad(const ref_dsa_sa_problem *p, const double *q, const double *qr,
                                   const double *k, const double *kr, const double *v, const double *o,
                                   const double *dy, const double *mx, const double *sm, const ref_dsa_sa_grads *g)
{
    const int64_t g_count = p->n1 / p->n2, krows = p->batches * p->lmax * p->n2;
    zero(g->dq, g->dq_mag, p->t * p->n1 * p->d);
    zero(g->dk, g->dk_mag, krows * p->d);
    zero(g->dv, g->dv_mag, krows * p->dv);
    if (p->dr > 0) {
        zero(g->dqr, g->dqr_mag, p->t * p->n1 * p->dr);
        zero(g->dkr, g->dkr_mag, krows * p->dr);
    }
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(p->kc * p->bs + 1));
    const double as = fabs(p->scale);
    for (int64_t b = 0, t = 0; b < p->batches; b++)
        for (int64_t i = 0; i < p->sq[b]; i++, t++)
            for (int64_t n = 0; n < p->n2; n++) {
                const int64_t count = ref_dsa_sa_rows(p, b, i, t, n, rows);
                for (int64_t gi = 0; gi < g_count && count > 0; gi++) {
                    const int64_t h = n * g_count + gi, th = t * p->n1 + h;
                    const int64_t st = (n * p->t + t) * g_count + gi;
                    const double m = mx[st], l = sm[st];
                    const double *qh = q + th * p->d, *qrh = p->dr > 0 ? qr + th * p->dr : NULL;
                    const double *dyh = dy + th * p->dv;
                    double dd_mag;
                    const double dd = dot(dyh, o + th * p->dv, p->dv, &dd_mag); /* Delta */
                    for (int64_t c = 0; c < count; c++) {
                        const int64_t row = (b * p->lmax + rows[c]) * p->n2 + n;
                        const double *kk = k + row * p->d, *vv = v + row * p->dv;
                        const double *kkr = p->dr > 0 ? kr + row * p->dr : NULL;
                        double zmag, zrmag = 0.0, dp_mag;
                        double z = dot(qh, kk, p->d, &zmag);
                        if (p->dr > 0)
                            z += dot(qrh, kkr, p->dr, &zrmag);
                        z *= p->scale;
                        zmag = as * (zmag + zrmag);
                        const double pv = exp(z - m) / l;
                        const double dp = dot(dyh, vv, p->dv, &dp_mag);
                        const double ds = pv * (dp - dd);
                        /* P's error relative to 1 + the score's magnitude;
                         * a zero P (a score of -Inf) bounds none */
                        const double sens = pv == 0.0 ? 0.0 : pv * (1.0 + zmag);
                        const double ds_mag = sens * (dp_mag + dd_mag);
                        /* what the products read: rounded to a half dtype */
                        const double pt = ref_round_to(pv, p->round), dst = ref_round_to(ds, p->round);
                        axpy(g->dq + th * p->d, g->dq_mag + th * p->d, p->scale * dst, as * ds_mag, kk, p->d);
                        axpy(g->dk + row * p->d, g->dk_mag + row * p->d, p->scale * dst, as * ds_mag, qh, p->d);
                        if (p->dr > 0) {
                            axpy(g->dqr + th * p->dr, g->dqr_mag + th * p->dr, p->scale * dst, as * ds_mag, kkr,
                                 p->dr);
                            axpy(g->dkr + row * p->dr, g->dkr_mag + row * p->dr, p->scale * dst, as * ds_mag, qrh,
                                 p->dr);
                        }
                        axpy(g->dv + row * p->dv, g->dv_mag + row * p->dv, pt, sens, dyh, p->dv);
                    }
                }
            }
    free(rows);
}
