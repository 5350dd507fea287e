/* fp64 reference of DSA sparse attention: per token and key head the rows
 * its slots select and it sees, then per query head of the group the scores
 * in double, a softmax over them and P (rounded as the dtype's kernels round
 * it) times V. Each row is read once per token and key head, for all the
 * group's heads at once (a decode step's rows do not stay in cache across
 * heads); every sum still runs in row order. */
#include "ref_dsa_sparse_attention.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "ref_nsa_select.h"

int64_t ref_dsa_sa_rows(const ref_dsa_sa_problem *p, int64_t b, int64_t i, int64_t t, int64_t n, int64_t *rows)
{
    const int64_t len = p->len[b];
    /* the last token the query sees: causal, its position (negative: none) */
    const int64_t last = p->causal ? len - p->sq[b] + i : len - 1;
    int64_t count = 0;
    for (int64_t j = 0; j < p->kc; j++) {
        const int64_t x = p->idx[(t * p->n2 + n) * p->kc + j];
        if (x < 0)
            continue;
        for (int64_t r = x * p->bs; r < (x + 1) * p->bs; r++)
            if (r < len && r <= last)
                rows[count++] = r;
    }
    return count;
}

/* Scratch of one (token, key head): the group's scores [g][count] and
 * their magnitudes |scale| sum |q k|, and per head M, its magnitude (the
 * largest score magnitude) and L. */
typedef struct ref_scratch {
    int64_t *rows;
    double *z, *zmag, *m, *zmax, *l;
} ref_scratch;

/* The scores of every head of key head n's group (token t of batch b) over
 * its count rows. */
static void score_rows(const ref_dsa_sa_problem *p, const double *q, const double *qr, const double *k,
                       const double *kr, int64_t b, int64_t t, int64_t n, int64_t count, ref_scratch *s)
{
    const int64_t g_count = p->n1 / p->n2;
    for (int64_t c = 0; c < count; c++) {
        const int64_t row = (b * p->lmax + s->rows[c]) * p->n2 + n;
        const double *kk = k + row * p->d, *kkr = p->dr > 0 ? kr + row * p->dr : NULL;
        for (int64_t g = 0; g < g_count; g++) {
            const int64_t h = n * g_count + g;
            const double *qh = q + (t * p->n1 + h) * p->d;
            double acc = 0.0, mag = 0.0;
            for (int64_t e = 0; e < p->d; e++) {
                acc += qh[e] * kk[e];
                mag += fabs(qh[e] * kk[e]);
            }
            if (kkr != NULL) {
                const double *qrh = qr + (t * p->n1 + h) * p->dr;
                for (int64_t e = 0; e < p->dr; e++) {
                    acc += qrh[e] * kkr[e];
                    mag += fabs(qrh[e] * kkr[e]);
                }
            }
            s->z[g * count + c] = p->scale * acc;
            s->zmag[g * count + c] = fabs(p->scale) * mag;
        }
    }
}

/* M (NaN where a score is NaN), L and their magnitudes for head g. */
static void softmax_stats(int64_t g, int64_t count, ref_scratch *s, double *lmag)
{
    const double *z = s->z + g * count, *zmag = s->zmag + g * count;
    double m = -INFINITY, zmax = 0.0;
    for (int64_t c = 0; c < count; c++) {
        m = z[c] > m || isnan(z[c]) ? z[c] : m;
        zmax = zmag[c] > zmax ? zmag[c] : zmax;
    }
    double l = 0.0, lm = 0.0;
    for (int64_t c = 0; c < count; c++) {
        const double ez = exp(z[c] - m);
        l += ez;
        if (ez != 0.0) /* a zero weight bounds no error */
            lm += ez * (1.0 + zmag[c] + zmax);
    }
    s->m[g] = m, s->zmax[g] = zmax, s->l[g] = l;
    *lmag = lm;
}

void ref_dsa_sparse_attention(const ref_dsa_sa_problem *p, const double *q, const double *qr, const double *k,
                              const double *kr, const double *v, double *o, double *o_mag, double *mx,
                              double *mx_mag, double *sm, double *sm_mag)
{
    const int64_t g_count = p->n1 / p->n2, cap = p->kc * p->bs + 1;
    ref_scratch s;
    s.rows = malloc(sizeof(int64_t) * (size_t)cap);
    s.z = malloc(sizeof(double) * (size_t)(cap * g_count));
    s.zmag = malloc(sizeof(double) * (size_t)(cap * g_count));
    s.m = malloc(sizeof(double) * (size_t)g_count);
    s.zmax = malloc(sizeof(double) * (size_t)g_count);
    s.l = malloc(sizeof(double) * (size_t)g_count);
    for (int64_t b = 0, t = 0; b < p->batches; b++)
        for (int64_t i = 0; i < p->sq[b]; i++, t++)
            for (int64_t n = 0; n < p->n2; n++) {
                const int64_t count = ref_dsa_sa_rows(p, b, i, t, n, s.rows);
                double *orow = o + (t * p->n1 + n * g_count) * p->dv;
                double *omag = o_mag + (t * p->n1 + n * g_count) * p->dv;
                for (int64_t e = 0; e < g_count * p->dv; e++)
                    orow[e] = omag[e] = 0.0;
                for (int64_t g = 0; g < g_count && count == 0; g++) { /* nothing seen */
                    const int64_t st = (n * p->t + t) * g_count + g;
                    mx[st] = -(double)FLT_MAX, sm[st] = 0.0;
                    mx_mag[st] = sm_mag[st] = 0.0;
                }
                if (count == 0)
                    continue;
                score_rows(p, q, qr, k, kr, b, t, n, count, &s);
                for (int64_t g = 0; g < g_count; g++) {
                    const int64_t st = (n * p->t + t) * g_count + g;
                    softmax_stats(g, count, &s, &sm_mag[st]);
                    mx[st] = s.m[g], mx_mag[st] = s.zmax[g], sm[st] = s.l[g];
                }
                /* P V row by row (each output element's sum in row order).
                 * P as the kernels of a half dtype feed it to P V: the
                 * softmax rounded once to the dtype. */
                for (int64_t c = 0; c < count; c++) {
                    const double *vr = v + ((b * p->lmax + s.rows[c]) * p->n2 + n) * p->dv;
                    for (int64_t g = 0; g < g_count; g++) {
                        const double z = s.z[g * count + c], zmag = s.zmag[g * count + c];
                        const double pc = ref_round_to(exp(z - s.m[g]) / s.l[g], p->round);
                        for (int64_t e = 0; e < p->dv; e++) {
                            const double term = pc * vr[e];
                            orow[g * p->dv + e] += term;
                            if (term != 0.0)
                                omag[g * p->dv + e] += fabs(term) * (1.0 + zmag + s.zmax[g]);
                        }
                    }
                }
            }
    free(s.rows), free(s.z), free(s.zmag), free(s.m), free(s.zmax), free(s.l);
}
