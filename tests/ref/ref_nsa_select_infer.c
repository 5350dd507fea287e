/* fp64 reference of selected attention on a KV cache: per batch, query, head,
 * the keys of the selected blocks (slot order, duplicates twice) that lie in
 * the sequence and at or before the query's position, a softmax over them,
 * P (rounded as the dtype's kernels round it) times V. */
#include "ref_nsa_select_infer.h"

#include <math.h>
#include <stdlib.h>

#include "ref_nsa_select.h"

void ref_nsa_select_infer(const ref_nsasi_problem *p, const double *q, const double *k, const double *v,
                          double *o, double *o_mag)
{
    const int64_t g = p->n1 / p->n2, cap = p->kc * p->bs;
    int64_t *keys = malloc(sizeof(int64_t) * (size_t)(cap + 1));
    double *z = malloc(sizeof(double) * (size_t)(cap + 1)), *zmag = malloc(sizeof(double) * (size_t)(cap + 1));
    for (int64_t b = 0, t = 0; b < p->batches; b++)
        for (int64_t i = 0; i < p->sq[b]; i++, t++) {
            const int64_t pos = p->len[b] - p->sq[b] + i;
            for (int64_t h = 0; h < p->n1; h++) {
                const int64_t n2 = h / g;
                int64_t nk = 0;
                for (int64_t j = 0; j < p->kc; j++) {
                    const int64_t x = p->idx[(t * p->n2 + n2) * p->kc + j];
                    if (x < 0)
                        continue;
                    for (int64_t r = x * p->bs; r < (x + 1) * p->bs && r < p->len[b] && r <= pos; r++)
                        keys[nk++] = r;
                }
                double *orow = o + (t * p->n1 + h) * p->dv, *mrow = o_mag + (t * p->n1 + h) * p->dv;
                if (nk == 0) {
                    for (int64_t e = 0; e < p->dv; e++)
                        orow[e] = mrow[e] = 0.0;
                    continue;
                }
                double m = -INFINITY, zm = 0.0;
                for (int64_t c = 0; c < nk; c++) {
                    const double *kr = k + ((b * p->lmax + keys[c]) * p->n2 + n2) * p->d;
                    double acc = 0.0, mag = 0.0;
                    for (int64_t d = 0; d < p->d; d++) {
                        acc += q[(t * p->n1 + h) * p->d + d] * kr[d];
                        mag += fabs(q[(t * p->n1 + h) * p->d + d] * kr[d]);
                    }
                    z[c] = p->scale * acc;
                    zmag[c] = fabs(p->scale) * mag;
                    m = z[c] > m ? z[c] : m;
                    zm = zmag[c] > zm ? zmag[c] : zm;
                }
                double l = 0.0;
                for (int64_t c = 0; c < nk; c++)
                    l += exp(z[c] - m);
                for (int64_t e = 0; e < p->dv; e++) {
                    double acc = 0.0, mag = 0.0;
                    for (int64_t c = 0; c < nk; c++) {
                        const double pc = ref_round_to(exp(z[c] - m) / l, p->round);
                        const double term = pc * v[((b * p->lmax + keys[c]) * p->n2 + n2) * p->dv + e];
                        acc += term;
                        if (term != 0.0)
                            mag += fabs(term) * (1.0 + zmag[c] + zm);
                    }
                    orow[e] = acc;
                    mrow[e] = mag;
                }
            }
        }
    free(keys), free(z), free(zmag);
}
