SPA_STAMP
/* NsaCompress forward in float64 (spec/nsa.md 1.2, f64 throughout): window k
 * of the call, head h, channel d:
 *     y[row0 + k][h][d] = sum_j w[j][h] * x[tok0 + k*st + j][h][d],  j < bs,
 * one fused (or multiply-add) chain per channel in ascending j. A window's
 * N x D sums live in the block's scratch (N*D doubles) while its bs token
 * rows stream through once each, in address order; then they go to the
 * output row. Any D >= 1: chunks of SPA_F64_CH channels, the last a masked
 * tail (src/core/f64_rows.h). */
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "f64_rows.h"
#include "nsa_compress_kernel.h"

/* acc[0..nd) += wj * x[0..nd) (x unit stride). */
SPA_ISA_INLINE void fma_chunk(double *acc, spa_vd wj, const double *x, int64_t nd)
{
    for (int v = 0; v < SPA_F64_NV; v++)
        spa_f64_st(acc, v, nd, spa_vd_fma(spa_f64_ld(acc, v, nd), wj, spa_f64_ld(x, v, nd)));
}

void SPA_KSYM(`nsa_compress', `w'NSAC64_TW)(const spa_nsac_args *a, int64_t tok0, int64_t row0,
                                            int64_t nwin, float *scratch)
{
    const double *x = a->x, *w = a->w;
    double *y = a->y, *acc = (double *)(void *)scratch; /* [N][D] */
    double buf[SPA_F64_CH];
    const int64_t nd_all = a->n * a->d;
    for (int64_t k = 0; k < nwin; k++) {
        const int64_t t = tok0 + k * a->st, row = row0 + k;
        for (int64_t i = 0; i < nd_all; i++)
            acc[i] = 0.0;
        for (int64_t j = 0; j < a->bs; j++) {
            for (int64_t h = 0; h < a->n; h++) {
                const double *xh = x + (t + j) * a->xs0 + h * a->xs1;
                double *ah = acc + h * a->d;
                const spa_vd wj = spa_vd_set1(w[j * a->ws0 + h * a->ws1]);
                int64_t d = 0;
                for (; d + SPA_F64_CH <= a->d; d += SPA_F64_CH)
                    fma_chunk(ah + d, wj, spa_f64_unit(xh + d * a->xs2, a->xs2, SPA_F64_CH, buf), SPA_F64_CH);
                if (d < a->d)
                    fma_chunk(ah + d, wj, spa_f64_unit(xh + d * a->xs2, a->xs2, a->d - d, buf), a->d - d);
            }
        }
        for (int64_t h = 0; h < a->n; h++) {
            double *yh = y + row * a->ys0 + h * a->ys1;
            for (int64_t d = 0; d < a->d; d++)
                yh[d * a->ys2] = acc[h * a->d + d];
        }
    }
}
