SPA_STAMP
/* NsaCompress forward, one block of windows of one batch (spec/nsa.md 1.2).
 * Tile TW windows x TD channels (enum below): the input rows the tile spans are
 * read once per head and added into the f32 accumulator of every window of the
 * tile that contains them, in ascending token order. */
#include <stdint.h>

#include "half.h"
#include "nsa_compress_kernel.h"

enum { TW = NSAC_TW, TD = NSAC_TD };

void NSAC_KSYM()(const spa_nsac_args *a, int64_t tok0, int64_t row0, int64_t nwin, float *scratch)
{
    const SPA_T *x = a->x;
    const SPA_T *w = a->w;
    SPA_T *y = a->y;
    const int64_t d_len = a->d, bs = a->bs, st = a->st;
    float *acc = scratch;          /* [TW][TD] window accumulators */
    float *xf = scratch + TW * TD; /* [TD] the current input row, widened */

    for (int64_t k0 = 0; k0 < nwin; k0 += TW) {
        const int64_t kn = nwin - k0 < TW ? nwin - k0 : TW;
        const int64_t first = tok0 + k0 * st;
        const int64_t span = (kn - 1) * st + bs;
        for (int64_t h = 0; h < a->n; h++) {
            for (int64_t e = 0; e < kn * TD; e++)
                acc[e] = 0.0f;
            for (int64_t r = 0; r < span; r++) {
                const SPA_T *xr = x + (first + r) * a->xs0 + h * a->xs1;
                SPA_WIDEN_ROW(xf, xr, a->xs2, d_len);
                /* Windows k of the tile holding row r: k*st <= r < k*st + bs. */
                const int64_t klo = r < bs ? 0 : (r - bs) / st + 1;
                const int64_t khi = r / st < kn - 1 ? r / st : kn - 1;
                for (int64_t k = klo; k <= khi; k++) {
                    const float wv = SPA_LOAD(w[(r - k * st) * a->ws0 + h * a->ws1]);
                    float *ak = acc + k * TD;
                    for (int64_t e = 0; e < d_len; e++)
                        ak[e] += wv * xf[e];
                }
            }
            for (int64_t k = 0; k < kn; k++) {
                SPA_T *yr = y + (row0 + k0 + k) * a->ys0 + h * a->ys1;
                const float *ak = acc + k * TD;
                SPA_NARROW_ROW(yr, a->ys2, ak, d_len);
            }
        }
    }
}
