SPA_STAMP
/* MultiScaleDeformableAttentionGrad in float64 (src/msda/msda_f64.h): every query
 * of one (batch, head) pair, reading the pair's packed double value slice
 * and adding into its double gradValue slice (zero before). Per query the
 * gradOutput row is widened once; per sample (levels, then points,
 * ascending; spec/msda.md 6 in double) one pass over the channels, SPA_VDL
 * at a time and a partial vector for the tail: gradValue of each valid
 * corner (00, 01, 10, 11) += w * t with t = g * a (an outside corner adds
 * into the sink row instead), and the running sums of g * samp, t * dX and
 * t * dY, whose lanes are summed by spa_vd_hsum (a fixed order). The pair's
 * gradValue sums thus take one order whatever the runner. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "msda_f64.h"

m4_include(`templates/msda/f64/msda_stage.m4')m4_dnl
m4_divert(-1)
MSDADG_BODY(load, store, extra argument): one vector of channels from c0.
m4_define(`MSDADG_BODY', `{
                const spa_vd g = $1(grow + c0$3), t = spa_vd_mul(g, av);
                const spa_vd v0 = $1(v[0] + c0$3), v1 = $1(v[1] + c0$3);
                const spa_vd v2 = $1(v[2] + c0$3), v3 = $1(v[3] + c0$3);
                spa_vd samp = spa_vd_mul(w0, v0);
                samp = spa_vd_fma(samp, w1, v1);
                samp = spa_vd_fma(samp, w2, v2);
                samp = spa_vd_fma(samp, w3, v3);
                /* dX = -hy*v00 + hy*v01 - ly*v10 + ly*v11, dY = -hx*v00 - lx*v01 + hx*v10 + lx*v11 */
                spa_vd dx = spa_vd_mul(mhy, v0), dy = spa_vd_mul(mhx, v0);
                dx = spa_vd_fma(dx, hyv, v1);
                dy = spa_vd_fma(dy, mlx, v1);
                dx = spa_vd_fma(dx, mly, v2);
                dy = spa_vd_fma(dy, hxv, v2);
                dx = spa_vd_fma(dx, lyv, v3);
                dy = spa_vd_fma(dy, lxv, v3);
                sa = spa_vd_fma(sa, g, samp);
                sx = spa_vd_fma(sx, t, dx);
                sy = spa_vd_fma(sy, t, dy);
                $2(gr[0] + c0, spa_vd_fma($1(gr[0] + c0$3), w0, t)$3);
                $2(gr[1] + c0, spa_vd_fma($1(gr[1] + c0$3), w1, t)$3);
                $2(gr[2] + c0, spa_vd_fma($1(gr[2] + c0$3), w2, t)$3);
                $2(gr[3] + c0, spa_vd_fma($1(gr[3] + c0$3), w3, t)$3);
            }')
m4_divert(0)m4_dnl

/* gradOutput[b, q, h*C : (h+1)*C] widened into row. */
static void gout_row(const spa_msda_f64_args *a, int64_t b, int64_t h, int64_t q, double *row)
{
    const int64_t cl = a->c, off = b * a->gos[0] + q * a->gos[1] + h * cl * a->gos[2];
    if (a->gout_dt == SPA_FLOAT64 && a->gos[2] == 1) {
        memcpy(row, (const double *)a->gout + off, (size_t)cl * sizeof(double));
        return;
    }
    for (int64_t c = 0; c < cl; c++)
        row[c] = spa_msda_f64_get(a->gout, a->gout_dt, off + c * a->gos[2]);
}

void MSDADG_KSYM()(const spa_msda_f64_args *a, int64_t b, int64_t h, const double *vpair, double *gpair,
                   void *scratch)
{
    const int64_t cl = a->c;
    double *grow = scratch, *sink = grow + cl;
    const int32_t ldt = a->loc_dt;
    for (int64_t q = 0; q < a->nq; q++) {
        spa_msda_f64_prefetch_rows(a, b, h, q);
        gout_row(a, b, h, q, grow);
        const int64_t lq = b * a->ls[0] + q * a->ls[1] + h * a->ls[2];
        const int64_t aq = b * a->as[0] + q * a->as[1] + h * a->as[2];
        const int64_t glq = b * a->gls[0] + q * a->gls[1] + h * a->gls[2];
        const int64_t gaq = b * a->gas[0] + q * a->gas[1] + h * a->gas[2];
        for (int64_t l = 0; l < a->nl; l++) {
            const spa_msda_level *lv = &a->lv[l];
            const double fw = (double)lv->w, fh = (double)lv->h;
            for (int64_t p = 0; p < a->np; p++) {
                const int64_t glo = glq + l * a->gls[3] + p * a->gls[4], gao = gaq + l * a->gas[3] + p * a->gas[4];
                /* a skipped sample: zero location and weight gradients, NaN
                 * ones for a sample taken at a NaN location */
                MSDAD_SAMPLE(`const double z = xl != xl || yl != yl ? (double)spa_bits_f32(0x7FC00000u) : 0.0;
                spa_msda_f64_put(a->gloc, a->gloc_dt, glo, z);
                spa_msda_f64_put(a->gloc, a->gloc_dt, glo + a->gls[5], z);
                spa_msda_f64_put(a->gattn, a->gattn_dt, gao, z);
                continue;')
                const double *v[4];
                double *gr[4];
                for (int k = 0; k < 4; k++) {
                    v[k] = in[k] ? vpair + key[k] * cl : a->zero;
                    gr[k] = in[k] ? gpair + key[k] * cl : sink;
                }
                const spa_vd w0 = spa_vd_set1(hy * hx), w1 = spa_vd_set1(hy * lx);
                const spa_vd w2 = spa_vd_set1(ly * hx), w3 = spa_vd_set1(ly * lx);
                const spa_vd av = spa_vd_set1(spa_msda_f64_get(a->attn, a->attn_dt, aq + l * a->as[3] + p * a->as[4]));
                const spa_vd hxv = spa_vd_set1(hx), hyv = spa_vd_set1(hy), lxv = spa_vd_set1(lx), lyv = spa_vd_set1(ly);
                const spa_vd mhx = spa_vd_set1(-hx), mhy = spa_vd_set1(-hy), mlx = spa_vd_set1(-lx), mly = spa_vd_set1(-ly);
                spa_vd sa = spa_vd_zero(), sx = spa_vd_zero(), sy = spa_vd_zero();
                int64_t c0 = 0;
                for (; c0 + SPA_VDL <= cl; c0 += SPA_VDL)
                    MSDADG_BODY(`spa_vd_load', `spa_vd_store', `')
m4_ifelse(m4_eval(SPA_VDL > 1), 1, `m4_dnl
                if (c0 < cl) { /* the last C % SPA_VDL channels: partial vectors */
                    const int64_t n = cl - c0;
                    MSDADG_BODY(`spa_vd_load_n', `spa_vd_store_n', `, n')
                }
')m4_dnl
                spa_msda_f64_put(a->gloc, a->gloc_dt, glo, spa_vd_hsum(sx) * fw);
                spa_msda_f64_put(a->gloc, a->gloc_dt, glo + a->gls[5], spa_vd_hsum(sy) * fh);
                spa_msda_f64_put(a->gattn, a->gattn_dt, gao, spa_vd_hsum(sa));
            }
        }
    }
}
