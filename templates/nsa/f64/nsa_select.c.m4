SPA_STAMP
/* NsaSelectedAttention forward in float64 (spec/nsa.md 3.2, f64 throughout,
 * no roundings of P): per query token t and head h of kv head n2, over the
 * positions c of spa_nsas_f64_positions (rows r_c):
 *     z_c = masked ? -FLT_MAX : scale * sum_d q[t][h][d] * k[r_c][n2][d]
 *     m = max z_c,  l = sum_c exp(z_c - m),  P_c = exp(z_c - m) / l
 *     o[t][h][e] = sum_c P_c * v[r_c][n2][e]     (c ascending, per lane)
 * softmaxMax / softmaxSum: m and l in all 8 lanes. A token with no position
 * (every slot -1, or blocks clipped away) gets o = +0, m = -FLT_MAX, l = 0.
 * Any D, Dv >= 1: chunks with masked tails (src/core/f64_rows.h). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "f64_rows.h"
#include "nsa_select_f64.h"

/* One chunk (nd channels) of o: sum_c P_c * v[r_c]. */
SPA_ISA_INLINE void out_chunk(const spa_nsas_f64_args *f, const double *vh, const int64_t *rows,
                              const double *p, int64_t cnt, double *o, int64_t os, int64_t nd)
{
    spa_vd acc[SPA_F64_NV];
    double buf[SPA_F64_CH];
    for (int v = 0; v < SPA_F64_NV; v++)
        acc[v] = spa_vd_zero();
    for (int64_t c = 0; c < cnt; c++) {
        const int64_t r = rows[c] < 0 ? -rows[c] - 1 : rows[c];
        const double *vr = spa_f64_unit(vh + r * f->vs0, f->vs2, nd, buf);
        const spa_vd pc = spa_vd_set1(p[c]);
        for (int v = 0; v < SPA_F64_NV; v++)
            acc[v] = spa_vd_fma(acc[v], pc, spa_f64_ld(vr, v, nd));
    }
    double *out = spa_f64_out(o, os, buf);
    for (int v = 0; v < SPA_F64_NV; v++)
        spa_f64_st(out, v, nd, acc[v]);
    spa_f64_scatter(o, os, nd, buf);
}

static void put_stat(double *base, int64_t s2, double x)
{
    for (int64_t k = 0; k < 8; k++)
        base[k * s2] = x;
}

void SPA_KSYM(`nsa_select', `h1')(const spa_nsas_f64_args *f, int64_t n2, int64_t t0, int64_t t1,
                                  int64_t qstart, int64_t kstart, int64_t klen, double *scratch)
{
    const spa_nsas_args *a = &f->a;
    const double *q = a->q;
    double *o = a->o, *mx = a->mx, *sm = a->sm;
    const double *kh = f->k + n2 * f->ks1, *vh = f->v + n2 * f->vs1;
    double *z = scratch;
    int64_t *rows = (int64_t *)(void *)(scratch + a->kc * a->bs);
    for (int64_t t = t0; t < t1; t++) {
        const int64_t cnt = spa_nsas_f64_positions(a, n2, t, qstart, kstart, klen, rows);
        for (int64_t g = 0; g < a->g; g++) {
            const int64_t h = n2 * a->g + g;
            const double *qh = q + t * a->qs0 + h * a->qs1;
            double m = SPA_NSAS_F64_MASKED, l = 0.0;
            for (int64_t c = 0; c < cnt; c++) {
                z[c] = rows[c] < 0 ? SPA_NSAS_F64_MASKED
                                   : f->scale * spa_f64_dot(qh, a->qs2, kh + rows[c] * f->ks0, f->ks2, a->d);
                m = z[c] > m ? z[c] : m;
            }
            for (int64_t c = 0; c < cnt; c++) {
                z[c] = exp(z[c] - m);
                l += z[c];
            }
            for (int64_t c = 0; c < cnt; c++)
                z[c] = z[c] / l;
            double *oh = o + t * a->os0 + h * a->os1;
            int64_t e = 0;
            for (; e + SPA_F64_CH <= a->dv; e += SPA_F64_CH)
                out_chunk(f, vh + e * f->vs2, rows, z, cnt, oh + e * a->os2, a->os2, SPA_F64_CH);
            if (e < a->dv)
                out_chunk(f, vh + e * f->vs2, rows, z, cnt, oh + e * a->os2, a->os2, a->dv - e);
            put_stat(mx + t * a->ms0 + h * a->ms1, a->ms2, m);
            put_stat(sm + t * a->ss0 + h * a->ss1, a->ss2, l);
        }
    }
}
