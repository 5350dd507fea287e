/* fp64 reference of NsaSelectedAttention(+Grad), loops as the spec reads:
 * per batch, query token, kv head, group member, selected block, row.
 * The native conventions of spec/nsa.md 0.3b: a slot of -1 selects nothing,
 * and the positions of a partial last block past the batch's KV length are
 * not attended (they are not among the positions at all: a row whose
 * visible positions are all masked averages over the attended ones only).
 * A row attending no position: output 0, max -FLT_MAX, sum 0, no gradient. */
#include "ref_nsa_select.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

double ref_round_to(double x, int round)
{
    if (round == REF_ROUND_NONE || x == 0.0 || !isfinite(x))
        return x;
    const int mant = round == REF_ROUND_F16 ? 11 : 8;
    const int emin = round == REF_ROUND_F16 ? -14 : -126;
    int e;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    int top = e - 1 < emin ? emin : e - 1;
    double quantum = ldexp(1.0, top - (mant - 1));
    return nearbyint(x / quantum) * quantum; /* ties to even in the default mode */
}

/* Scores of one (t, n2, g): attended[j] (the slot is not padding and the
 * position lies inside the batch's KV), z[j] (masked: -FLT_MAX) and
 * zmag[j] = |scale| sum |q k|, for the attended positions. */
static void scores(const ref_nsas_problem *p, const double *q, const double *k, int64_t b,
                   int64_t t, int64_t n2, int64_t h, double *z, double *zmag, int *masked,
                   int *attended)
{
    const int64_t s = t - p->qstart[b];
    for (int64_t i = 0; i < p->kc; i++) {
        const int64_t blk = p->idx[(t * p->n2 + n2) * p->kc + i];
        for (int64_t j = 0; j < p->bs; j++) {
            const int64_t pos = blk * p->bs + j, r = p->kstart[b] + pos, c = i * p->bs + j;
            attended[c] = blk >= 0 && pos < p->klen[b];
            masked[c] = 0;
            z[c] = zmag[c] = 0.0;
            if (!attended[c])
                continue;
            double acc = 0.0, mag = 0.0;
            for (int64_t d = 0; d < p->d; d++) {
                const double term = q[(t * p->n1 + h) * p->d + d] * k[(r * p->n2 + n2) * p->d + d];
                acc += term;
                mag += fabs(term);
            }
            masked[c] = p->causal && pos > s;
            z[c] = masked[c] ? -(double)FLT_MAX : p->scale * acc;
            zmag[c] = fabs(p->scale) * mag;
        }
    }
}

void ref_nsa_select(const ref_nsas_problem *p, const double *q, const double *k, const double *v,
                    double *o, double *o_mag, double *mx, double *mx_mag, double *sm,
                    double *sm_mag)
{
    const int64_t kb = p->kc * p->bs, g_count = p->n1 / p->n2;
    double *z = malloc(sizeof(double) * (size_t)kb), *zmag = malloc(sizeof(double) * (size_t)kb);
    double *e = malloc(sizeof(double) * (size_t)kb);
    int *masked = malloc(sizeof(int) * (size_t)kb), *att = malloc(sizeof(int) * (size_t)kb);
    for (int64_t b = 0; b < p->batches; b++)
        for (int64_t t = p->qstart[b]; t < p->qstart[b] + p->qlen[b]; t++)
            for (int64_t n2 = 0; n2 < p->n2; n2++)
                for (int64_t g = 0; g < g_count; g++) {
                    const int64_t h = n2 * g_count + g, th = t * p->n1 + h;
                    scores(p, q, k, b, t, n2, h, z, zmag, masked, att);
                    /* m: the max, NaN where a score is NaN (torch.max) */
                    double m = -INFINITY, zmax_mag = 0.0;
                    int any = 0;
                    for (int64_t c = 0; c < kb; c++) {
                        if (!att[c])
                            continue;
                        any = 1;
                        m = z[c] > m || isnan(z[c]) ? z[c] : m;
                        if (!masked[c] && zmag[c] > zmax_mag)
                            zmax_mag = zmag[c];
                    }
                    if (!any) { /* nothing attended */
                        mx[th] = -(double)FLT_MAX;
                        sm[th] = 0.0;
                        mx_mag[th] = sm_mag[th] = 0.0;
                        for (int64_t ev = 0; ev < p->dv; ev++)
                            o[th * p->dv + ev] = o_mag[th * p->dv + ev] = 0.0;
                        continue;
                    }
                    double l = 0.0, l_mag = 0.0;
                    for (int64_t c = 0; c < kb; c++) {
                        e[c] = att[c] ? exp(z[c] - m) : 0.0;
                        l += e[c];
                        /* a zero weight (a score of -Inf among them) bounds no error */
                        if (e[c] != 0.0)
                            l_mag += e[c] * (1.0 + (masked[c] ? 0.0 : zmag[c]) + zmax_mag);
                    }
                    mx[th] = m;
                    mx_mag[th] = zmax_mag;
                    sm[th] = l;
                    sm_mag[th] = l_mag;
                    for (int64_t ev = 0; ev < p->dv; ev++) {
                        double acc = 0.0, mag = 0.0;
                        for (int64_t i = 0; i < p->kc; i++) {
                            const int64_t blk = p->idx[(t * p->n2 + n2) * p->kc + i];
                            for (int64_t j = 0; j < p->bs; j++) {
                                const int64_t c = i * p->bs + j, r = p->kstart[b] + blk * p->bs + j;
                                if (!att[c])
                                    continue;
                                const double pt = ref_round_to(e[c] / l, p->round);
                                const double term = pt * v[(r * p->n2 + n2) * p->dv + ev];
                                acc += term;
                                if (term != 0.0)
                                    mag += fabs(term) * (1.0 + (masked[c] ? 0.0 : zmag[c]) + zmax_mag);
                            }
                        }
                        o[th * p->dv + ev] = acc;
                        o_mag[th * p->dv + ev] = mag;
                    }
                }
    free(z), free(zmag), free(e), free(masked), free(att);
}

void ref_nsa_select_grad(const ref_nsas_problem *p, const double *q, const double *k,
                         const double *v, const double *o, const double *dy, const double *mx,
                         const double *sm, double *dq, double *dq_mag, double *dk, double *dk_mag,
                         double *dv, double *dv_mag)
{
    const int64_t kb = p->kc * p->bs, g_count = p->n1 / p->n2;
    const size_t nq = (size_t)(p->t1 * p->n1 * p->d), nk = (size_t)(p->t2 * p->n2 * p->d),
                 nv = (size_t)(p->t2 * p->n2 * p->dv);
    memset(dq, 0, sizeof(double) * nq), memset(dq_mag, 0, sizeof(double) * nq);
    memset(dk, 0, sizeof(double) * nk), memset(dk_mag, 0, sizeof(double) * nk);
    memset(dv, 0, sizeof(double) * nv), memset(dv_mag, 0, sizeof(double) * nv);
    double *z = malloc(sizeof(double) * (size_t)kb), *zmag = malloc(sizeof(double) * (size_t)kb);
    int *masked = malloc(sizeof(int) * (size_t)kb), *att = malloc(sizeof(int) * (size_t)kb);
    for (int64_t b = 0; b < p->batches; b++)
        for (int64_t t = p->qstart[b]; t < p->qstart[b] + p->qlen[b]; t++)
            for (int64_t n2 = 0; n2 < p->n2; n2++)
                for (int64_t g = 0; g < g_count; g++) {
                    const int64_t h = n2 * g_count + g, th = t * p->n1 + h;
                    scores(p, q, k, b, t, n2, h, z, zmag, masked, att);
                    double dd = 0.0, dd_mag = 0.0; /* D = rowsum(dY o O) */
                    for (int64_t e = 0; e < p->dv; e++) {
                        dd += dy[th * p->dv + e] * o[th * p->dv + e];
                        dd_mag += fabs(dy[th * p->dv + e] * o[th * p->dv + e]);
                    }
                    for (int64_t i = 0; i < p->kc; i++) {
                        const int64_t blk = p->idx[(t * p->n2 + n2) * p->kc + i];
                        for (int64_t j = 0; j < p->bs; j++) {
                            const int64_t c = i * p->bs + j, r = p->kstart[b] + blk * p->bs + j;
                            if (!att[c]) /* padding slot, or past the batch's KV */
                                continue;
                            const double pv = exp(z[c] - mx[th]) / sm[th];
                            const double sens = 1.0 + (masked[c] ? 0.0 : zmag[c]);
                            double dp = 0.0, dp_mag = 0.0;
                            for (int64_t e = 0; e < p->dv; e++) {
                                dp += dy[th * p->dv + e] * v[(r * p->n2 + n2) * p->dv + e];
                                dp_mag += fabs(dy[th * p->dv + e] * v[(r * p->n2 + n2) * p->dv + e]);
                            }
                            /* a masked score is the constant MASKVAL: no gradient */
                            const double ds = masked[c] ? 0.0 : pv * (dp - dd);
                            /* error bounds: a zero P (a score of -Inf) bounds none */
                            const double ds_mag = masked[c] || pv == 0.0 ? 0.0 : pv * sens * (dp_mag + dd_mag);
                            const double pt = ref_round_to(pv, p->round);
                            const double dst = ref_round_to(ds, p->round);
                            for (int64_t d = 0; d < p->d; d++) {
                                const double kd = k[(r * p->n2 + n2) * p->d + d];
                                const double qd = q[th * p->d + d];
                                dq[th * p->d + d] += p->scale * dst * kd;
                                dq_mag[th * p->d + d] += fabs(p->scale) * ds_mag * fabs(kd);
                                dk[(r * p->n2 + n2) * p->d + d] += p->scale * dst * qd;
                                dk_mag[(r * p->n2 + n2) * p->d + d] += fabs(p->scale) * ds_mag * fabs(qd);
                            }
                            for (int64_t e = 0; e < p->dv; e++) {
                                const double dye = dy[th * p->dv + e];
                                dv[(r * p->n2 + n2) * p->dv + e] += pt * dye;
                                dv_mag[(r * p->n2 + n2) * p->dv + e] += pv == 0.0 ? 0.0 : pv * sens * fabs(dye);
                            }
                        }
                    }
                }
    free(z), free(zmag), free(masked), free(att);
}
