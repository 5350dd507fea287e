/* fp64 reference of NsaCompressAttention(+Grad), loops as the spec reads:
 * per batch, query token, query head, compressed key. */
#include "ref_nsa_cattn.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t ref_nsca_blocks(const ref_nsca_problem *p, int64_t c)
{
    const int64_t m = p->ls / p->st;
    if (p->infer) /* the blocks the tokens behind the c keys span */
        return c == 0 ? 0 : ((c - 1) * p->st + p->l + p->ls - 1) / p->ls;
    return (c + m - 1) / m;
}

/* masked(s, c) of docs 2 for the query at in-batch index s of batch b
 * (the causal rule at its position, s + qpos0[b]). */
static int is_masked(const ref_nsca_problem *p, int64_t b, int64_t s, int64_t c)
{
    if (p->mask != NULL && p->mask[s * p->mask_cols + c])
        return 1;
    return p->causal && c * p->st + p->l - 1 > s + (p->qpos0 != NULL ? p->qpos0[b] : 0);
}

/* Whether the token at position s attends key c of a batch of nc keys: an
 * unmasked key, or every key where all are masked (a fully masked row, whose
 * keys all score -FLT_MAX). The masked keys of any other row weigh exactly 0
 * and take no part, whatever their values (a NaN there reaches nothing). */
static int attends(const ref_nsca_problem *p, int64_t b, int64_t s, int64_t c, int64_t nc)
{
    if (!is_masked(p, b, s, c))
        return 1;
    for (int64_t x = 0; x < nc; x++)
        if (!is_masked(p, b, s, x))
            return 0;
    return 1;
}

/* z(c) for every key of batch b, and zmag = |scale| sum |q k| (0 masked). */
static void scores(const ref_nsca_problem *p, const double *q, const double *k, int64_t b,
                   int64_t t, int64_t h, double *z, double *zmag)
{
    const int64_t s = t - p->qstart[b], n2 = h / (p->n1 / p->n2);
    for (int64_t c = 0; c < p->clen[b]; c++) {
        const int64_t r = p->cstart[b] + c;
        if (is_masked(p, b, s, c)) {
            z[c] = -FLT_MAX;
            zmag[c] = 0.0;
            continue;
        }
        double dot = 0.0, mag = 0.0;
        for (int64_t e = 0; e < p->d; e++) {
            const double x = q[(t * p->n1 + h) * p->d + e] * k[(r * p->n2 + n2) * p->d + e];
            dot += x;
            mag += fabs(x);
        }
        z[c] = p->scale * dot;
        zmag[c] = fabs(p->scale) * mag;
    }
}

void ref_nsa_cattn(const ref_nsca_problem *p, const double *q, const double *k, const double *v,
                   double *o, double *o_mag, double *mx, double *sm, double *imp,
                   int64_t imp_cols, int32_t *topk)
{
    const int64_t g = p->n1 / p->n2, M = p->ls / p->st, NN = p->l / p->st;
    int64_t cmax = 1;
    for (int64_t b = 0; b < p->batches; b++)
        cmax = p->clen[b] > cmax ? p->clen[b] : cmax;
    double *z = malloc(sizeof(double) * (size_t)cmax), *zmag = malloc(sizeof(double) * (size_t)cmax);
    double *pc = malloc(sizeof(double) * (size_t)cmax);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(imp_cols + 1));
    memset(imp, 0, sizeof(double) * (size_t)(p->t1 * p->n2 * imp_cols));
    for (int64_t b = 0; b < p->batches; b++) {
        const int64_t nc = p->clen[b], nsel = ref_nsca_blocks(p, nc);
        for (int64_t t = p->qstart[b]; t < p->qstart[b] + p->qlen[b]; t++) {
            const int64_t s = t - p->qstart[b];
            for (int64_t n2 = 0; n2 < p->n2; n2++) {
                for (int64_t c = 0; c < nc; c++)
                    pc[c] = 0.0;
                for (int64_t gg = 0; gg < g; gg++) {
                    const int64_t h = n2 * g + gg;
                    double *orow = o + (t * p->n1 + h) * p->dv, *omag = o_mag + (t * p->n1 + h) * p->dv;
                    scores(p, q, k, b, t, h, z, zmag);
                    double m = -FLT_MAX, l = 0.0, zm = 0.0;
                    for (int64_t c = 0; c < nc; c++) {
                        if (!attends(p, b, s, c, nc))
                            continue;
                        m = z[c] > m || isnan(z[c]) ? (isnan(m) ? m : z[c]) : m; /* NaN sticks */
                        zm = zmag[c] > zm ? zmag[c] : zm;
                    }
                    for (int64_t c = 0; c < nc; c++)
                        if (attends(p, b, s, c, nc))
                            l += exp(z[c] - m);
                    mx[t * p->n1 + h] = m;
                    sm[t * p->n1 + h] = l;
                    for (int64_t e = 0; e < p->dv; e++) {
                        double acc = 0.0, mag = 0.0;
                        for (int64_t c = 0; c < nc; c++) {
                            if (!attends(p, b, s, c, nc))
                                continue;
                            const double pr = exp(z[c] - m) / l;
                            const double term = ref_round_to(pr, p->round) *
                                                v[((p->cstart[b] + c) * p->n2 + n2) * p->dv + e];
                            acc += term;
                            if (term != 0.0) /* a zero weight (score -Inf) bounds no error */
                                mag += fabs(term) * (1.0 + zmag[c] + zm);
                        }
                        orow[e] = acc;
                        omag[e] = mag;
                    }
                    for (int64_t c = 0; c < nc; c++)
                        if (attends(p, b, s, c, nc))
                            pc[c] += exp(z[c] - m) / l; /* P_cmp: the group sum */
                }
                double *ir = imp + (t * p->n2 + n2) * imp_cols;
                for (int64_t j = 0; j < nsel; j++) {
                    double acc = 0.0;
                    for (int64_t mm = 0; mm < M; mm++)
                        for (int64_t n = 0; n < NN; n++) {
                            const int64_t c = M * (j + 1) - mm - n;
                            if (c >= 0 && c < nc)
                                acc += pc[c];
                        }
                    if (p->tmask != NULL && p->tmask[s * p->tmask_cols + j])
                        acc = FLT_MAX;
                    if (p->infer && (j == 0 || j >= nsel - 2))
                        acc = INFINITY;
                    ir[j] = acc;
                }
                /* stable descending order: insertion sort, equal values keep
                 * block order, NaN below every number */
                for (int64_t j = 0; j < nsel; j++) {
                    int64_t pos = j;
                    while (pos > 0 && (isnan(ir[order[pos - 1]]) ? !isnan(ir[j]) : ir[order[pos - 1]] < ir[j])) {
                        order[pos] = order[pos - 1];
                        pos--;
                    }
                    order[pos] = j;
                }
                int32_t *tr = topk + (t * p->n2 + n2) * p->kc;
                for (int64_t i = 0; i < p->kc; i++)
                    tr[i] = i < nsel ? (int32_t)order[i] : -1;
            }
        }
    }
    free(z), free(zmag), free(pc), free(order);
}

void ref_nsa_cattn_grad(const ref_nsca_problem *p, const double *q, const double *k,
                        const double *v, const double *o, const double *dy, const double *mx,
                        const double *sm, double *dq, double *dq_mag, double *dk, double *dk_mag,
                        double *dv, double *dv_mag)
{
    const int64_t g = p->n1 / p->n2;
    memset(dq, 0, sizeof(double) * (size_t)(p->t1 * p->n1 * p->d));
    memset(dq_mag, 0, sizeof(double) * (size_t)(p->t1 * p->n1 * p->d));
    memset(dk, 0, sizeof(double) * (size_t)(p->t2 * p->n2 * p->d));
    memset(dk_mag, 0, sizeof(double) * (size_t)(p->t2 * p->n2 * p->d));
    memset(dv, 0, sizeof(double) * (size_t)(p->t2 * p->n2 * p->dv));
    memset(dv_mag, 0, sizeof(double) * (size_t)(p->t2 * p->n2 * p->dv));
    int64_t cmax = 1;
    for (int64_t b = 0; b < p->batches; b++)
        cmax = p->clen[b] > cmax ? p->clen[b] : cmax;
    double *z = malloc(sizeof(double) * (size_t)cmax), *zmag = malloc(sizeof(double) * (size_t)cmax);
    for (int64_t b = 0; b < p->batches; b++)
        for (int64_t t = p->qstart[b]; t < p->qstart[b] + p->qlen[b]; t++) {
            const int64_t s = t - p->qstart[b];
            for (int64_t h = 0; h < p->n1; h++) {
                const int64_t n2 = h / g;
                const double *yr = dy + (t * p->n1 + h) * p->dv, *orow = o + (t * p->n1 + h) * p->dv;
                const double *qr = q + (t * p->n1 + h) * p->d;
                scores(p, q, k, b, t, h, z, zmag);
                double dd = 0.0, ddmag = 0.0;
                for (int64_t e = 0; e < p->dv; e++) {
                    dd += yr[e] * orow[e];
                    ddmag += fabs(yr[e] * orow[e]);
                }
                for (int64_t c = 0; c < p->clen[b]; c++) {
                    if (!attends(p, b, s, c, p->clen[b]))
                        continue;
                    const int64_t r = p->cstart[b] + c;
                    const double *kr = k + (r * p->n2 + n2) * p->d, *vr = v + (r * p->n2 + n2) * p->dv;
                    const double pr = exp(z[c] - mx[t * p->n1 + h]) / sm[t * p->n1 + h];
                    double dp = 0.0, dpmag = 0.0;
                    for (int64_t e = 0; e < p->dv; e++) {
                        dp += yr[e] * vr[e];
                        dpmag += fabs(yr[e] * vr[e]);
                    }
                    const double ds = is_masked(p, b, s, c) ? 0.0 : pr * (dp - dd);
                    /* error bounds: a zero P (a score of -Inf) bounds none */
                    const double dsmag = is_masked(p, b, s, c) || pr == 0.0 ? 0.0 : pr * (dpmag + ddmag) * (1.0 + zmag[c]);
                    const double pt = ref_round_to(pr, p->round), dst = ref_round_to(ds, p->round);
                    const double ptmag = pr == 0.0 ? 0.0 : pr * (1.0 + zmag[c]);
                    for (int64_t e = 0; e < p->d; e++) {
                        dq[(t * p->n1 + h) * p->d + e] += p->scale * dst * kr[e];
                        dq_mag[(t * p->n1 + h) * p->d + e] += fabs(p->scale) * (fabs(dst) + dsmag) * fabs(kr[e]);
                        dk[(r * p->n2 + n2) * p->d + e] += p->scale * dst * qr[e];
                        dk_mag[(r * p->n2 + n2) * p->d + e] += fabs(p->scale) * (fabs(dst) + dsmag) * fabs(qr[e]);
                    }
                    for (int64_t e = 0; e < p->dv; e++) {
                        dv[(r * p->n2 + n2) * p->dv + e] += pt * yr[e];
                        dv_mag[(r * p->n2 + n2) * p->dv + e] += (fabs(pt) + ptmag) * fabs(yr[e]);
                    }
                }
            }
        }
    free(z), free(zmag);
}
