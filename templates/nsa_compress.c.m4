SPA_STAMP
/* NsaCompress forward, one block of windows of one batch (spec/nsa.md 1.2).
 * Tile TW windows x TC channels (enum below), the channels being a group of
 * whole heads: each input row of the tile's span is widened once and added,
 * with its per-head weight, into the f32 accumulator of every window of the
 * tile that contains it, in ascending token order. */
#include <stdint.h>

#include "half.h"
#include "nsa_compress_kernel.h"

enum { TW = NSAC_TW, TC = NSAC_TC };

/* acc += wv * x over n channels (n a multiple of 16), on the ISA layer. */
static inline void axpy(float *restrict acc, const float *restrict x, float wv, int64_t n)
{
    const spa_vf vw = spa_vf_set1(wv);
    for (int64_t e = 0; e < n; e += SPA_VL)
        spa_vf_store(acc + e, spa_vf_fma(spa_vf_load(acc + e), vw, spa_vf_load(x + e)));
}

void NSAC_KSYM()(const spa_nsac_args *a, int64_t tok0, int64_t row0, int64_t nwin, float *scratch)
{
    const SPA_T *x = a->x;
    const SPA_T *w = a->w;
    SPA_T *y = a->y;
    const int64_t d_len = a->d, bs = a->bs, st = a->st, heads = a->n;
    const int64_t group = spa_nsac_head_group(heads, d_len, TC);
    float *acc = scratch;                      /* [TW][group * d] window accumulators */
    float *xf = scratch + TW * group * d_len;  /* [group * d] one input row, widened */

    for (int64_t k0 = 0; k0 < nwin; k0 += TW) {
        const int64_t kn = nwin - k0 < TW ? nwin - k0 : TW;
        const int64_t first = tok0 + k0 * st;
        const int64_t span = (kn - 1) * st + bs;
        for (int64_t h0 = 0; h0 < heads; h0 += group) {
            const int64_t hn = heads - h0 < group ? heads - h0 : group;
            const int64_t width = hn * d_len;
            for (int64_t e = 0; e < kn * width; e++)
                acc[e] = 0.0f;
            for (int64_t r = 0; r < span; r++) {
                /* Ask for the rows a few tokens ahead: the heads of a group
                 * are short runs the hardware prefetcher alone serves poorly. */
                if (r + SPA_PREFETCH_ROWS < span)
                    for (int64_t hh = 0; hh < hn; hh++)
                        SPA_PREFETCH_RUN(x + (first + r + SPA_PREFETCH_ROWS) * a->xs0 + (h0 + hh) * a->xs1,
                                         d_len * a->xs2 * SPA_SZ);
                /* The group's input rows, widened (f32 unit-stride rows in place). */
                const float *xv[TC / 16];
                for (int64_t hh = 0; hh < hn; hh++) {
                    const SPA_T *xr = x + (first + r) * a->xs0 + (h0 + hh) * a->xs1;
                    float *xd = xf + hh * d_len;
                    if (SPA_IS_F32 && a->xs2 == 1) {
                        xv[hh] = (const float *)(const void *)xr;
                    } else {
                        SPA_WIDEN_ROW(xd, xr, a->xs2, d_len);
                        xv[hh] = xd;
                    }
                }
                /* Windows k of the tile holding row r: k*st <= r < k*st + bs. */
                const int64_t klo = r < bs ? 0 : (r - bs) / st + 1;
                const int64_t khi = r / st < kn - 1 ? r / st : kn - 1;
                for (int64_t k = klo; k <= khi; k++) {
                    const SPA_T *wr = w + (r - k * st) * a->ws0 + h0 * a->ws1;
                    for (int64_t hh = 0; hh < hn; hh++)
                        axpy(acc + k * width + hh * d_len, xv[hh], SPA_LOAD(wr[hh * a->ws1]), d_len);
                }
            }
            for (int64_t k = 0; k < kn; k++)
                for (int64_t hh = 0; hh < hn; hh++) {
                    SPA_T *yr = y + (row0 + k0 + k) * a->ys0 + (h0 + hh) * a->ys1;
                    const float *ak = acc + k * width + hh * d_len;
                    SPA_NARROW_ROW(yr, a->ys2, ak, d_len);
                }
        }
    }
}
