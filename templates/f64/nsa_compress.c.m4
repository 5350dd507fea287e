SPA_STAMP
/* NsaCompress forward in float64 (spec/nsa.md 1.2, f64 throughout): window k
 * of the call, head h, channel d:
 *     y[row0 + k][h][d] = sum_j w[j][h] * x[tok0 + k*st + j][h][d],  j < bs,
 * one fused (or multiply-add) chain per channel in ascending j. Any D >= 1:
 * chunks of SPA_F64_CH channels, the last a masked tail (src/f64_rows.h).
 * The f32 tile's scratch is not used. */
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "f64_rows.h"
#include "nsa_compress_kernel.h"

/* One chunk (nd channels) of one window and head. */
SPA_ISA_INLINE void window_chunk(const spa_nsac_args *a, const double *x, const double *w, double *y,
                                 int64_t nd)
{
    spa_vd acc[SPA_F64_NV];
    double buf[SPA_F64_CH];
    for (int v = 0; v < SPA_F64_NV; v++)
        acc[v] = spa_vd_zero();
    for (int64_t j = 0; j < a->bs; j++) {
        const double *xr = spa_f64_unit(x + j * a->xs0, a->xs2, nd, buf);
        const spa_vd wj = spa_vd_set1(w[j * a->ws0]);
        for (int v = 0; v < SPA_F64_NV; v++)
            acc[v] = spa_vd_fma(acc[v], wj, spa_f64_ld(xr, v, nd));
    }
    double *yr = spa_f64_out(y, a->ys2, buf);
    for (int v = 0; v < SPA_F64_NV; v++)
        spa_f64_st(yr, v, nd, acc[v]);
    spa_f64_scatter(y, a->ys2, nd, buf);
}

void SPA_KSYM(`nsa_compress', `w'NSAC64_TW)(const spa_nsac_args *a, int64_t tok0, int64_t row0,
                                            int64_t nwin, float *scratch)
{
    (void)scratch;
    const double *x = a->x, *w = a->w;
    double *y = a->y;
    for (int64_t k = 0; k < nwin; k++) {
        const int64_t t = tok0 + k * a->st, row = row0 + k;
        for (int64_t h = 0; h < a->n; h++) {
            const double *xh = x + t * a->xs0 + h * a->xs1, *wh = w + h * a->ws1;
            double *yh = y + row * a->ys0 + h * a->ys1;
            int64_t d = 0;
            for (; d + SPA_F64_CH <= a->d; d += SPA_F64_CH)
                window_chunk(a, xh + d * a->xs2, wh, yh + d * a->ys2, SPA_F64_CH);
            if (d < a->d)
                window_chunk(a, xh + d * a->xs2, wh, yh + d * a->ys2, a->d - d);
        }
    }
}
