SPA_STAMP
/* NsaCompressGrad, one block of tokens of one batch (spec/nsa.md 2.2).
 * Each token gathers w[j][h] * dY[window] from the windows that cover it, so
 * every inputGrad element is written once (no scatter, no atomics) and tokens
 * no window covers get +0. The same pass adds sum_d dY*x into the block's
 * weightGrad partials. Tile TT tokens x TD channels (enum below): the outputGrad
 * rows touching the tile are widened once into the scratch and reused. */
#include <stdint.h>

#include "half.h"
#include "nsa_compress_kernel.h"

enum { TT = NSACG_TT, TD = NSACG_TD, LANES = 16 };

void NSACG_KSYM()(const spa_nsac_args *a, int64_t bstart, int64_t row0, int64_t nwin,
                 int64_t t0, int64_t t1, float *wpart, float *scratch)
{
    const SPA_T *x = a->x;
    const SPA_T *w = a->w;
    const SPA_T *dy = a->y;
    SPA_T *dx = a->dx;
    const int64_t d_len = a->d, bs = a->bs, st = a->st, heads = a->n;
    /* scratch: [TT/16 + 8][d] outputGrad rows, then one input row and one
     * accumulator row (the sizes phase 1 reserved, for st >= 16, bs <= 128). */
    float *dyf = scratch;
    float *xf = dyf + (TT / 16 + 8) * d_len;
    float *acc = xf + d_len;

    for (int64_t p0 = t0 - bstart; p0 < t1 - bstart; p0 += TT) {
        const int64_t p1 = t1 - bstart - p0 < TT ? t1 - bstart : p0 + TT;
        /* Windows touching tokens [p0, p1). */
        const int64_t ilo = p0 < bs ? 0 : (p0 - bs) / st + 1;
        const int64_t ihi = (p1 - 1) / st < nwin - 1 ? (p1 - 1) / st : nwin - 1;
        for (int64_t h = 0; h < heads; h++) {
            for (int64_t i = ilo; i <= ihi; i++) {
                const SPA_T *dyr = dy + (row0 + i) * a->ys0 + h * a->ys1;
                float *dst = dyf + (i - ilo) * d_len;
                SPA_WIDEN_ROW(dst, dyr, a->ys2, d_len);
            }
            for (int64_t p = p0; p < p1; p++) {
                const SPA_T *xr = x + (bstart + p) * a->xs0 + h * a->xs1;
                SPA_WIDEN_ROW(xf, xr, a->xs2, d_len);
                for (int64_t e = 0; e < d_len; e++)
                    acc[e] = 0.0f;
                const int64_t klo = p < bs ? 0 : (p - bs) / st + 1;
                const int64_t khi = p / st < nwin - 1 ? p / st : nwin - 1;
                for (int64_t i = klo; i <= khi; i++) {
                    const int64_t j = p - i * st;
                    const float wv = SPA_LOAD(w[j * a->ws0 + h * a->ws1]);
                    const float *dyr = dyf + (i - ilo) * d_len;
                    /* LANES partial dot products, summed in a fixed order. */
                    float lane[LANES] = {0};
                    for (int64_t e0 = 0; e0 < d_len; e0 += LANES)
                        for (int l = 0; l < LANES; l++) {
                            acc[e0 + l] += wv * dyr[e0 + l];
                            lane[l] += dyr[e0 + l] * xf[e0 + l];
                        }
                    for (int half = LANES / 2; half > 0; half /= 2)
                        for (int l = 0; l < half; l++)
                            lane[l] += lane[l + half];
                    wpart[j * heads + h] += lane[0];
                }
                SPA_T *dxr = dx + (bstart + p) * a->dxs0 + h * a->dxs1;
                SPA_NARROW_ROW(dxr, a->dxs2, acc, d_len);
            }
        }
    }
}
