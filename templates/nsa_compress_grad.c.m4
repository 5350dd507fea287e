SPA_STAMP
/* NsaCompressGrad, one block of tokens of one batch (spec/nsa.md 2.2).
 * Each token gathers w[j][h] * dY[window] from the windows that cover it, so
 * every inputGrad element is written once (no scatter, no atomics) and tokens
 * no window covers get +0. The same pass adds sum_d dY*x into the block's
 * weightGrad partials. Tile TT tokens x TC channels (enum below), the channels
 * being a group of whole heads: the outputGrad rows touching the tile are
 * widened once into the scratch, then the tile's tokens are read in order. */
#include <stdbool.h>
#include <stdint.h>

#include "half.h"
#include "nsa_compress_kernel.h"

enum { TT = NSACG_TT, TC = NSACG_TC, LANES = 16 };

/* acc += wv * dy and return sum(dy * x), as LANES partial sums reduced by
 * halves (8, 4, 2, 1) in a fixed order; n is a multiple of 16. On the ISA
 * layer: the LANES sums are LANES / SPA_VL vectors, folded by halves into
 * one, whose lanes spa_vf_hsum folds on by halves: the same order on every
 * ISA (the products fused or not as the layer's FMA is). */
static inline float axpy_dot(float *restrict acc, const float *restrict dy,
                             const float *restrict x, float wv, int64_t n)
{
    enum { NV = LANES / SPA_VL };
    const spa_vf vw = spa_vf_set1(wv);
    spa_vf lanes[NV];
#pragma GCC unroll 16
    for (int k = 0; k < NV; k++)
        lanes[k] = spa_vf_zero();
    for (int64_t e0 = 0; e0 < n; e0 += LANES) {
#pragma GCC unroll 16
        for (int k = 0; k < NV; k++) {
            const spa_vf d = spa_vf_load(dy + e0 + k * SPA_VL);
            spa_vf_store(acc + e0 + k * SPA_VL, spa_vf_fma(spa_vf_load(acc + e0 + k * SPA_VL), vw, d));
            lanes[k] = spa_vf_fma(lanes[k], d, spa_vf_load(x + e0 + k * SPA_VL));
        }
    }
#pragma GCC unroll 16
    for (int half = NV / 2; half > 0; half /= 2)
        for (int k = 0; k < half; k++)
            lanes[k] = spa_vf_add(lanes[k], lanes[k + half]);
    return spa_vf_hsum(lanes[0]);
}

void NSACG_KSYM()(const spa_nsac_args *a, int64_t bstart, int64_t row0, int64_t nwin,
                 int64_t t0, int64_t t1, float *wpart, float *scratch)
{
    const SPA_T *x = a->x;
    const SPA_T *w = a->w;
    const SPA_T *dy = a->y;
    SPA_T *dx = a->dx;
    const int64_t d_len = a->d, bs = a->bs, st = a->st, heads = a->n;
    const int64_t group = spa_nsac_head_group(heads, d_len, TC);
    /* scratch (spa_nsac_grad_scratch): TT/16 + 8 staged outputGrad rows (enough
     * for st >= 16, bs <= 128), then one input row and one accumulator row. */
    float *dyf = scratch;
    float *xf = dyf + (TT / 16 + 8) * group * d_len;
    float *acc = xf + d_len;

    for (int64_t p0 = t0 - bstart; p0 < t1 - bstart; p0 += TT) {
        const int64_t p1 = t1 - bstart - p0 < TT ? t1 - bstart : p0 + TT;
        /* Windows touching tokens [p0, p1). */
        const int64_t ilo = p0 < bs ? 0 : (p0 - bs) / st + 1;
        const int64_t ihi = (p1 - 1) / st < nwin - 1 ? (p1 - 1) / st : nwin - 1;
        for (int64_t h0 = 0; h0 < heads; h0 += group) {
            const int64_t hn = heads - h0 < group ? heads - h0 : group;
            const int64_t width = hn * d_len;
            for (int64_t i = ilo; i <= ihi; i++)
                for (int64_t hh = 0; hh < hn; hh++) {
                    const SPA_T *dyr = dy + (row0 + i) * a->ys0 + (h0 + hh) * a->ys1;
                    float *dst = dyf + (i - ilo) * width + hh * d_len;
                    SPA_WIDEN_ROW(dst, dyr, a->ys2, d_len);
                }
            for (int64_t p = p0; p < p1; p++) {
                /* Ask for the rows a few tokens ahead (short runs per head). */
                if (p + SPA_PREFETCH_ROWS < p1)
                    for (int64_t hh = 0; hh < hn; hh++)
                        SPA_PREFETCH_RUN(x + (bstart + p + SPA_PREFETCH_ROWS) * a->xs0 + (h0 + hh) * a->xs1,
                                         d_len * a->xs2 * SPA_SZ);
                const int64_t klo = p < bs ? 0 : (p - bs) / st + 1;
                const int64_t khi = p / st < nwin - 1 ? p / st : nwin - 1;
                for (int64_t hh = 0; hh < hn; hh++) {
                    const int64_t h = h0 + hh;
                    const SPA_T *xr = x + (bstart + p) * a->xs0 + h * a->xs1;
                    SPA_T *dxr = dx + (bstart + p) * a->dxs0 + h * a->dxs1;
                    /* f32 unit-stride input rows are read in place; other rows
                     * are widened first. */
                    const bool x_in_place = SPA_IS_F32 && a->xs2 == 1;
                    const float *xv = x_in_place ? (const float *)(const void *)xr : xf;
                    float *av = acc;
                    if (!x_in_place)
                        SPA_WIDEN_ROW(xf, xr, a->xs2, d_len);
                    for (int64_t e = 0; e < d_len; e++)
                        av[e] = 0.0f;
                    for (int64_t i = klo; i <= khi; i++) {
                        const int64_t j = p - i * st;
                        const float wv = SPA_LOAD(w[j * a->ws0 + h * a->ws1]);
                        const float *dyr = dyf + (i - ilo) * width + hh * d_len;
                        wpart[j * heads + h] += axpy_dot(av, dyr, xv, wv, d_len);
                    }
                    /* inputGrad is written once and not read back here: stream it. */
                    if (a->dxs2 == 1)
                        SPA_NARROW_STREAM_RUN(dxr, acc, d_len);
                    else
                        SPA_NARROW_ROW(dxr, a->dxs2, acc, d_len);
                }
            }
        }
    }
    spa_stream_fence();
}
