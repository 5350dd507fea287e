SPA_STAMP
/* NsaSelectedAttention forward in float64 (spec/nsa.md 3.2, f64 throughout,
 * no roundings of P): per query token t of kv head n2, the G heads h of the
 * group together, over the positions c of its selected blocks
 * (spa_nsas_f64_segments, rows r_c):
 *     z_c = masked ? -FLT_MAX : scale * sum_d q[t][h][d] * k[r_c][n2][d]
 *     m = max z_c,  e_c = exp(z_c - m),  l = sum_c e_c   (c ascending)
 *     o[t][h][j] = (sum_c e_c * v[r_c][n2][j]) / l       (c ascending)
 * The heads are the lanes of the register tiles (nsa_select_mk.m4): a key or
 * value element is loaded once for the whole group. exp is src/core/f64_exp.h.
 * softmaxMax / softmaxSum: m and l in all 8 lanes. A token with no position
 * (every slot -1, or blocks clipped away) gets o = +0, m = -FLT_MAX, l = 0.
 * Any D, Dv >= 1 and any strides: the tiles broadcast key and value elements
 * through their strides, and the query / output rows go through the
 * transposed scratch. */
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "f64_exp.h"
#include "f64_rows.h"
#include "nsa_select_f64.h"

m4_include(`templates/nsa/f64/nsa_select_mk.m4')m4_dnl

static void put_stat(double *base, int64_t s2, double x)
{
    for (int64_t k = 0; k < 8; k++)
        base[k * s2] = x;
}

void NSAS64_KSYM`'(const spa_nsas_f64_args *f, int64_t n2, int64_t t0, int64_t t1, int64_t qstart,
                 int64_t kstart, int64_t klen, double *scratch)
{
    const spa_nsas_args *a = &f->a;
    const double *q = a->q;
    double *o = a->o, *mx = a->mx, *sm = a->sm;
    const double *kh = f->k + n2 * f->ks1, *vh = f->v + n2 * f->vs1;
    const int64_t G = a->g, GP = (G + SPA_VDL - 1) / SPA_VDL * SPA_VDL, D = a->d, DV = a->dv;
    double *qt = scratch;               /* [D][GP] the group query rows, transposed */
    double *st = qt + D * GP;           /* [kc*bs][GP] scores, then exp(z - m) */
    double *ot = st + a->kc * a->bs * GP; /* [DV][GP] the unnormalised output */
    double *mrow = ot + DV * GP, *lrow = mrow + GP;
    spa_nsas_f64_seg *seg = (spa_nsas_f64_seg *)(void *)(lrow + GP);
    const spa_f64_expk ek = spa_f64_expk_set();
    const spa_vd sc = spa_vd_set1(f->scale), masked = spa_vd_set1(SPA_NSAS_F64_MASKED);

    for (int64_t i = 0; i < D * GP; i++) /* lanes past G stay 0 */
        qt[i] = 0.0;
    for (int64_t t = t0; t < t1; t++) {
        int64_t cnt;
        const int64_t ns = spa_nsas_f64_segments(a, n2, t, qstart, kstart, klen, seg, &cnt);
        if (cnt == 0) { /* nothing selected */
            for (int64_t g = 0; g < G; g++) {
                const int64_t h = n2 * G + g;
                double *oh = o + t * a->os0 + h * a->os1;
                for (int64_t e = 0; e < DV; e++)
                    oh[e * a->os2] = 0.0;
                put_stat(mx + t * a->ms0 + h * a->ms1, a->ms2, SPA_NSAS_F64_MASKED);
                put_stat(sm + t * a->ss0 + h * a->ss1, a->ss2, 0.0);
            }
            continue;
        }
        nsasd_transpose_in(qt, GP, q + t * a->qs0 + n2 * G * a->qs1, a->qs1, a->qs2, G, D);
        /* z, then the masked suffix of each block */
        for (int64_t s = 0, c = 0; s < ns; c += seg[s].len, s++) {
            nsasd_dot_rows(kh + seg[s].row * f->ks0, f->ks0, f->ks2, qt, GP, D, sc, seg[s].len,
                           st + c * GP);
            for (int64_t j = seg[s].valid; j < seg[s].len; j++)
                for (int64_t l = 0; l < GP; l += SPA_VDL)
                    spa_vd_store(st + (c + j) * GP + l, masked);
        }
        /* m, e_c and l per head lane */
        for (int64_t l = 0; l < GP; l += SPA_VDL) {
            spa_vd m = masked, sum = spa_vd_zero();
            for (int64_t c = 0; c < cnt; c++)
                m = spa_vd_max(spa_vd_load(st + c * GP + l), m);
            for (int64_t c = 0; c < cnt; c++) {
                const spa_vd e = spa_f64_expv(spa_vd_sub(spa_vd_load(st + c * GP + l), m), &ek);
                spa_vd_store(st + c * GP + l, e);
                sum = spa_vd_add(sum, e);
            }
            spa_vd_store(mrow + l, m);
            spa_vd_store(lrow + l, sum);
        }
        nsasd_acc_rows(seg, ns, vh, f->vs0, f->vs2, DV, st, GP, ot);
        for (int64_t e = 0; e < DV; e++)
            for (int64_t l = 0; l < GP; l += SPA_VDL)
                spa_vd_store(ot + e * GP + l, spa_vd_div(spa_vd_load(ot + e * GP + l), spa_vd_load(lrow + l)));
        for (int64_t g = 0; g < G; g++) {
            const int64_t h = n2 * G + g;
            double *oh = o + t * a->os0 + h * a->os1;
            for (int64_t e = 0; e < DV; e++)
                oh[e * a->os2] = ot[e * GP + g];
            put_stat(mx + t * a->ms0 + h * a->ms1, a->ms2, mrow[g]);
            put_stat(sm + t * a->ss0 + h * a->ss1, a->ss2, lrow[g]);
        }
    }
}
