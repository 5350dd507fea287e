SPA_STAMP
/* NsaSelectedAttentionGrad in float64 (spec/nsa.md 4.2, f64 throughout, no
 * roundings of P or dS): per query token t and head h of kv head n2, over
 * the positions c of spa_nsas_f64_positions (rows r_c), with m and l the
 * given softmaxMax / softmaxSum:
 *     P_c  = exp(z_c - m) / l            (z_c as the forward; none if l == 0)
 *     Dt   = sum_e dy[t][h][e] * o[t][h][e]
 *     dS_c = P_c * (sum_e dy[t][h][e] * v[r_c][n2][e] - Dt)   (0 where masked)
 *     dq[t][h] = scale * sum_c dS_c * k[r_c][n2]
 *     dkp[r_c - kvlo] += dS_c * q[t][h],   dvp[r_c - kvlo] += P_c * dy[t][h]
 * tokens ascending, heads of the group, then c: a fixed order per range.
 * Any D, Dv >= 1 (chunks with masked tails, src/core/f64_rows.h). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "f64_rows.h"
#include "nsa_select_f64.h"

/* One chunk (nd channels) of dq: scale * sum_c dS_c * k[r_c]. */
SPA_ISA_INLINE void dq_chunk(const spa_nsas_f64_args *f, const double *kh, const int64_t *rows,
                             const double *ds, int64_t cnt, double *dq, int64_t dqs, int64_t nd)
{
    spa_vd acc[SPA_F64_NV];
    double buf[SPA_F64_CH];
    for (int v = 0; v < SPA_F64_NV; v++)
        acc[v] = spa_vd_zero();
    for (int64_t c = 0; c < cnt; c++) {
        const int64_t r = rows[c] < 0 ? -rows[c] - 1 : rows[c];
        const double *kr = spa_f64_unit(kh + r * f->ks0, f->ks2, nd, buf);
        const spa_vd dc = spa_vd_set1(ds[c]);
        for (int v = 0; v < SPA_F64_NV; v++)
            acc[v] = spa_vd_fma(acc[v], dc, spa_f64_ld(kr, v, nd));
    }
    const spa_vd sc = spa_vd_set1(f->scale);
    double *out = spa_f64_out(dq, dqs, buf);
    for (int v = 0; v < SPA_F64_NV; v++)
        spa_f64_st(out, v, nd, spa_vd_mul(sc, acc[v]));
    spa_f64_scatter(dq, dqs, nd, buf);
}

/* part[0..n) += x * src[k*s] (a partial row, unit stride). */
SPA_ISA_INLINE void axpy_row(double *part, double x, const double *src, int64_t s, int64_t n)
{
    double buf[SPA_F64_CH];
    const spa_vd xv = spa_vd_set1(x);
    for (int64_t d = 0; d < n; d += SPA_F64_CH) {
        const int64_t nd = n - d < SPA_F64_CH ? n - d : SPA_F64_CH;
        const double *r = spa_f64_unit(src + d * s, s, nd, buf);
        for (int v = 0; v < SPA_F64_NV; v++)
            spa_f64_st(part + d, v, nd, spa_vd_fma(spa_f64_ld(part + d, v, nd), xv, spa_f64_ld(r, v, nd)));
    }
}

void SPA_KSYM(`nsa_select_grad', `h1')(const spa_nsas_f64_args *f, int64_t n2, int64_t t0,
                                       int64_t t1, int64_t qstart, int64_t kstart, int64_t klen,
                                       int64_t kvlo, double *dkp, double *dvp, double *scratch)
{
    const spa_nsas_args *a = &f->a;
    const double *q = a->q, *o = a->o, *mx = a->mx, *sm = a->sm, *dy = a->dy;
    double *dq = a->dq;
    const double *kh = f->k + n2 * f->ks1, *vh = f->v + n2 * f->vs1;
    const int64_t kb = a->kc * a->bs;
    double *p = scratch, *ds = scratch + kb;
    int64_t *rows = (int64_t *)(void *)(scratch + 2 * kb);
    for (int64_t t = t0; t < t1; t++) {
        const int64_t cnt = spa_nsas_f64_positions(a, n2, t, qstart, kstart, klen, rows);
        for (int64_t g = 0; g < a->g; g++) {
            const int64_t h = n2 * a->g + g;
            const double *qh = q + t * a->qs0 + h * a->qs1, *dyh = dy + t * a->dys0 + h * a->dys1;
            const double m = mx[t * a->ms0 + h * a->ms1], l = sm[t * a->ss0 + h * a->ss1];
            const int64_t n = l > 0.0 ? cnt : 0; /* l == 0: no position (or bad statistics) */
            const double dt = spa_f64_dot(dyh, a->dys2, o + t * a->os0 + h * a->os1, a->os2, a->dv);
            for (int64_t c = 0; c < n; c++) {
                const int64_t r = rows[c] < 0 ? -rows[c] - 1 : rows[c];
                const double z = rows[c] < 0 ? SPA_NSAS_F64_MASKED
                                             : f->scale * spa_f64_dot(qh, a->qs2, kh + r * f->ks0, f->ks2, a->d);
                p[c] = exp(z - m) / l;
                /* a masked score is a constant: no gradient through it (a
                 * fully masked row still averages the values: dV gets P*dY) */
                ds[c] = rows[c] < 0 ? 0.0 : p[c] * (spa_f64_dot(dyh, a->dys2, vh + r * f->vs0, f->vs2, a->dv) - dt);
            }
            double *dqh = dq + t * a->dqs0 + h * a->dqs1;
            int64_t e = 0;
            for (; e + SPA_F64_CH <= a->d; e += SPA_F64_CH)
                dq_chunk(f, kh + e * f->ks2, rows, ds, n, dqh + e * a->dqs2, a->dqs2, SPA_F64_CH);
            if (e < a->d)
                dq_chunk(f, kh + e * f->ks2, rows, ds, n, dqh + e * a->dqs2, a->dqs2, a->d - e);
            for (int64_t c = 0; c < n; c++) {
                const int64_t r = (rows[c] < 0 ? -rows[c] - 1 : rows[c]) - kvlo;
                axpy_row(dkp + r * a->d, ds[c], qh, a->qs2, a->d);
                axpy_row(dvp + r * a->dv, p[c], dyh, a->dys2, a->dv);
            }
        }
    }
}
