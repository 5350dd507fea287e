/* fp64 reference of NsaCompress and NsaCompressGrad (spec/nsa.md 1.2, 2.2),
 * written as the formulas read: loops over windows, no blocking. */
#include <math.h>
#include <string.h>

#include "ref.h"

static int64_t windows_of(int64_t len, int64_t bs, int64_t st)
{
    return len >= bs ? (len - bs) / st + 1 : 0;
}

int64_t ref_nsa_compress_windows(const ref_batches *bt, int64_t bs, int64_t st)
{
    int64_t m = 0;
    for (int64_t b = 0; b < bt->count; b++)
        m += windows_of(bt->len[b], bs, st);
    return m;
}

void ref_nsa_compress(const double *x, const double *w, const ref_batches *bt, int64_t n,
                      int64_t d, int64_t bs, int64_t st, double *out, double *mag)
{
    int64_t row = 0;
    for (int64_t b = 0; b < bt->count; b++) {
        int64_t nb = windows_of(bt->len[b], bs, st);
        for (int64_t i = 0; i < nb; i++, row++) {
            int64_t s = bt->start[b] + i * st;
            for (int64_t h = 0; h < n; h++)
                for (int64_t e = 0; e < d; e++) {
                    double acc = 0, m = 0;
                    for (int64_t j = 0; j < bs; j++) {
                        double term = x[((s + j) * n + h) * d + e] * w[j * n + h];
                        acc += term;
                        m += fabs(term);
                    }
                    out[(row * n + h) * d + e] = acc;
                    mag[(row * n + h) * d + e] = m;
                }
        }
    }
}

void ref_nsa_compress_grad(const double *dy, const double *x, const double *w,
                           const ref_batches *bt, int64_t t, int64_t n, int64_t d, int64_t bs,
                           int64_t st, double *dx, double *dx_mag, double *dw, double *dw_mag)
{
    memset(dx, 0, sizeof(double) * (size_t)(t * n * d));
    memset(dx_mag, 0, sizeof(double) * (size_t)(t * n * d));
    memset(dw, 0, sizeof(double) * (size_t)(bs * n));
    memset(dw_mag, 0, sizeof(double) * (size_t)(bs * n));
    int64_t row = 0;
    for (int64_t b = 0; b < bt->count; b++) {
        int64_t nb = windows_of(bt->len[b], bs, st);
        for (int64_t i = 0; i < nb; i++, row++) {
            int64_t s = bt->start[b] + i * st;
            for (int64_t j = 0; j < bs; j++)
                for (int64_t h = 0; h < n; h++)
                    for (int64_t e = 0; e < d; e++) {
                        double g = dy[(row * n + h) * d + e];
                        double xv = x[((s + j) * n + h) * d + e];
                        double wv = w[j * n + h];
                        dx[((s + j) * n + h) * d + e] += wv * g;
                        dx_mag[((s + j) * n + h) * d + e] += fabs(wv * g);
                        dw[j * n + h] += g * xv;
                        dw_mag[j * n + h] += fabs(g * xv);
                    }
        }
    }
}
