SPA_STAMP
/* NsaCompressGrad in float64 (spec/nsa.md 2.2, f64 throughout), tokens
 * [t0, t1) of one batch. Token t (r = t - bstart in the batch) lies in
 * windows k = kmin..kmax (k*st <= r < k*st + bs, k < nwin), at j = r - k*st:
 *     dx[t][h][d] = sum_k w[j][h] * dy[row0 + k][h][d]     (k ascending)
 *     wpart[j][h] += sum_d dy[row0 + k][h][d] * x[t][h][d]  (src/core/f64_rows.h dot)
 * Any D >= 1 (chunks with a masked tail), any bs >= st >= 1. */
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "f64_rows.h"
#include "nsa_compress_f64.h"

/* One chunk (nd channels) of inputGrad of token t, head h: windows kmin..kmax. */
SPA_ISA_INLINE void dx_chunk(const spa_nsac_args *a, const double *dy, const double *wh, int64_t r,
                             int64_t kmin, int64_t kmax, double *dx, int64_t nd)
{
    spa_vd acc[SPA_F64_NV];
    double buf[SPA_F64_CH];
    for (int v = 0; v < SPA_F64_NV; v++)
        acc[v] = spa_vd_zero();
    for (int64_t k = kmin; k <= kmax; k++) {
        const double *g = spa_f64_unit(dy + k * a->ys0, a->ys2, nd, buf);
        const spa_vd wj = spa_vd_set1(wh[(r - k * a->st) * a->ws0]);
        for (int v = 0; v < SPA_F64_NV; v++)
            acc[v] = spa_vd_fma(acc[v], wj, spa_f64_ld(g, v, nd));
    }
    double *o = spa_f64_out(dx, a->dxs2, buf);
    for (int v = 0; v < SPA_F64_NV; v++)
        spa_f64_st(o, v, nd, acc[v]);
    spa_f64_scatter(dx, a->dxs2, nd, buf);
}

void SPA_KSYM(`nsa_compress_grad', `t'NSACG64_TT)(const spa_nsac_args *a, int64_t bstart,
                                                  int64_t row0, int64_t nwin, int64_t t0,
                                                  int64_t t1, double *wpart)
{
    const double *x = a->x, *w = a->w, *dy = a->y;
    double *dx = a->dx;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t r = t - bstart;
        const int64_t kmin = r < a->bs ? 0 : (r - a->bs) / a->st + 1;
        const int64_t kmax = r / a->st < nwin - 1 ? r / a->st : nwin - 1; /* kmin > kmax: none */
        for (int64_t h = 0; h < a->n; h++) {
            const double *dyh = dy + row0 * a->ys0 + h * a->ys1, *wh = w + h * a->ws1;
            const double *xh = x + t * a->xs0 + h * a->xs1;
            double *dxh = dx + t * a->dxs0 + h * a->dxs1;
            int64_t d = 0;
            for (; d + SPA_F64_CH <= a->d; d += SPA_F64_CH)
                dx_chunk(a, dyh + d * a->ys2, wh, r, kmin, kmax, dxh + d * a->dxs2, SPA_F64_CH);
            if (d < a->d)
                dx_chunk(a, dyh + d * a->ys2, wh, r, kmin, kmax, dxh + d * a->dxs2, a->d - d);
            for (int64_t k = kmin; k <= kmax; k++)
                wpart[(r - k * a->st) * a->n + h] +=
                    spa_f64_dot(dyh + k * a->ys0, a->ys2, xh, a->xs2, a->d);
        }
    }
}
