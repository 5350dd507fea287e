/* fp64 reference of the DSA lightning indexer: per batch, query and key
 * head, the weighted ReLU scores of the keys the query sees, in double, and
 * a stable sort of those keys (I descending, NaN last, key ascending). */
#include "ref_dsa_lightning_indexer.h"

#include <math.h>
#include <stdlib.h>

int64_t ref_dsa_li_seen(int64_t sq, int64_t len, int64_t i, int causal)
{
    if (!causal)
        return len;
    const int64_t pos = len - sq + i;
    return pos < 0 ? 0 : pos + 1 < len ? pos + 1 : len;
}

typedef struct scored {
    double v;
    int64_t s;
} scored;

/* a before b: the larger number first, NaN after every number, then the
 * smaller key. */
static int by_score(const void *pa, const void *pb)
{
    const scored *a = pa, *b = pb;
    const int na = isnan(a->v) != 0, nb = isnan(b->v) != 0;
    if (na != nb)
        return na ? 1 : -1;
    if (!na && a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return a->s < b->s ? -1 : a->s > b->s ? 1 : 0;
}

void ref_dsa_lightning_indexer(const ref_dsa_li_problem *p, const double *q, const double *k, const double *w,
                               int64_t *seen, double *score, double *mag, int64_t *order)
{
    const int64_t g = p->n1 / p->n2;
    scored *row = malloc(sizeof(scored) * (size_t)(p->lmax + 1));
    for (int64_t b = 0, t = 0; b < p->batches; b++)
        for (int64_t i = 0; i < p->sq[b]; i++, t++) {
            const int64_t ns = ref_dsa_li_seen(p->sq[b], p->len[b], i, p->causal);
            seen[t] = ns;
            for (int64_t n = 0; n < p->n2; n++) {
                double *srow = score + (t * p->n2 + n) * p->lmax, *mrow = mag + (t * p->n2 + n) * p->lmax;
                int64_t *orow = order + (t * p->n2 + n) * p->lmax;
                for (int64_t s = 0; s < p->lmax; s++)
                    srow[s] = mrow[s] = 0.0, orow[s] = -1;
                for (int64_t s = 0; s < ns; s++) {
                    const double *kr = k + ((b * p->lmax + s) * p->n2 + n) * p->d;
                    double acc = 0.0, m = 0.0;
                    for (int64_t h = n * g; h < (n + 1) * g; h++) {
                        const double *qr = q + (t * p->n1 + h) * p->d;
                        double dot = 0.0, dmag = 0.0;
                        for (int64_t e = 0; e < p->d; e++) {
                            dot += qr[e] * kr[e];
                            dmag += fabs(qr[e]) * fabs(kr[e]);
                        }
                        const double relu = isnan(dot) ? dot : dot > 0.0 ? dot : 0.0;
                        acc += w[t * p->n1 + h] * relu;
                        m += fabs(w[t * p->n1 + h]) * dmag;
                    }
                    srow[s] = acc;
                    mrow[s] = m;
                    row[s].v = acc, row[s].s = s;
                }
                qsort(row, (size_t)ns, sizeof(scored), by_score);
                for (int64_t s = 0; s < ns; s++)
                    orow[s] = row[s].s;
            }
        }
    free(row);
}
