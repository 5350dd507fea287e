SPA_STAMP
/* NsaSelectedAttentionGrad, query tokens [t0, t1) of one batch for one kv
 * head (spec/nsa.md 4.2). Per token the G heads of the group are done
 * together, TK selected rows at a time: dP = dY Vᵀ, S = Q Kᵀ, P recomputed
 * from the given max/sum, dS = P (dP - D) (0 on masked positions: the exact
 * gradient, since a masked score is the constant MASKVAL), P and dS rounded to
 * the dtype; then dQ += dS K (kept per token), and the dK rows (dSᵀ Q) and dV
 * rows (Pᵀ dY) of the selected block are added to this block's f32 partials
 * in token, index and row order, so the sums never depend on the runner. */
#include <float.h>
#include <stdint.h>

#include "half.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_include(`templates/nsa_select_mk.m4')m4_dnl

m4_dnl NSASG_ROUND_ROWS(x, n): P or dS rounded to the dtype in place (nothing for f32).
m4_define(`NSASG_ROUND_ROWS', m4_ifelse(SPA_DT, `f32', `', `spa_nsas_round($1, $2, 'm4_ifelse(SPA_DT, `bf16', 1, 0)`);'))m4_dnl
enum { TK = NSASG_TK };

void NSASG_KSYM()(const spa_nsas_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                  int64_t kstart, int64_t kvlo, float *dkp, float *dvp, float *scratch)
{
    const SPA_T *q = a->q;
    const SPA_T *o = a->o;
    const float *kh = a->kf, *vh = a->vf; /* the rows of kv head h2 */
    const SPA_T *dy = a->dy;
    const float *mx = a->mx;
    const float *sm = a->sm;
    SPA_T *dq = a->dq;
    const int64_t G = a->g, GP = a->gp, D = a->d, DV = a->dv, BS = a->bs, KC = a->kc;
    /* scratch (the floats phase 1 reserved): lanes of padded heads stay 0 */
    float *qt = scratch;         /* [D][GP]  query heads, transposed */
    float *qn = qt + D * GP;     /* [G][D]   query heads */
    float *dyt = qn + G * D;     /* [DV][GP] output grads, transposed */
    float *dyn = dyt + DV * GP;  /* [G][DV]  output grads */
    float *dqt = dyn + G * DV;   /* [D][GP]  dQ accumulators */
    float *pt = dqt + D * GP;    /* [TK][GP] S, then P */
    float *ds = pt + TK * GP;    /* [TK][GP] dP, then dS */
    float *mrow = ds + TK * GP;  /* [GP] softmax max (pad: 0) */
    float *lrow = mrow + GP;     /* [GP] 1 / softmax sum (pad: 1) */
    float *drow = lrow + GP;     /* [GP] rowsum(dY o O) (pad: 0) */

    for (int64_t i = 0; i < D * GP; i++)
        qt[i] = 0.0f;
    for (int64_t i = 0; i < DV * GP; i++)
        dyt[i] = 0.0f;
    for (int64_t l = 0; l < GP; l++) {
        mrow[l] = 0.0f;
        lrow[l] = 1.0f;
        drow[l] = 0.0f;
    }
    for (int64_t t = t0; t < t1; t++) {
        const int64_t s = t - qstart;
        const int32_t *ir = a->idx + t * a->is0 + h2 * a->is1;
        for (int64_t g = 0; g < G; g++) {
            const int64_t h = h2 * G + g;
            const SPA_T *qr = q + t * a->qs0 + h * a->qs1;
            const SPA_T *dyr = dy + t * a->dys0 + h * a->dys1;
            const SPA_T *orow = o + t * a->os0 + h * a->os1;
            float *qg = qn + g * D, *dyg = dyn + g * DV;
            SPA_WIDEN_ROW(qg, qr, a->qs2, D);
            SPA_WIDEN_ROW(dyg, dyr, a->dys2, DV);
            for (int64_t d = 0; d < D; d++)
                qt[d * GP + g] = qg[d];
            float dsum = 0.0f;
            for (int64_t e = 0; e < DV; e++) {
                dyt[e * GP + g] = dyg[e];
                dsum += dyg[e] * SPA_LOAD(orow[e * a->os2]);
            }
            drow[g] = dsum;
            mrow[g] = mx[t * a->ms0 + h * a->ms1];
            lrow[g] = 1.0f / sm[t * a->ss0 + h * a->ss1]; /* P = exp(.) / l as exp(.) * (1/l) */
        }
        for (int64_t i = 0; i < D * GP; i++)
            dqt[i] = 0.0f;
        for (int64_t i = 0; i < KC; i++) {
            const int64_t p0 = (int64_t)ir[i * a->is2] * BS;
            const float *kb = kh + (kstart + p0) * a->kfr, *vb = vh + (kstart + p0) * a->vfr;
            for (int64_t j0 = 0; j0 < BS; j0 += TK) {
                const int64_t nr = BS - j0 < TK ? BS - j0 : TK;
                /* the next chunk's value, key and partial rows, requested
                 * while this one is computed */
                int64_t pn = p0 + j0 + TK;
                if (j0 + TK >= BS)
                    pn = i + 1 < KC ? (int64_t)ir[(i + 1) * a->is2] * BS : -1;
                spa_nsas_pf pfv = spa_nsas_pf_rows(NULL, 0, 0, 0), pfk = pfv, pfdk = pfv, pfdv = pfv;
                if (pn >= 0) {
                    pfv = spa_nsas_pf_rows(vh + (kstart + pn) * a->vfr, a->vfr * 4, nr, DV * 4);
                    pfk = spa_nsas_pf_rows(kh + (kstart + pn) * a->kfr, a->kfr * 4, nr, D * 4);
                    pfdk = spa_nsas_pf_rows(dkp + (kstart + pn - kvlo) * D, D * 4, nr, D * 4);
                    pfdv = spa_nsas_pf_rows(dvp + (kstart + pn - kvlo) * DV, DV * 4, nr, DV * 4);
                }
                const float *kr = kb + j0 * a->kfr, *vr = vb + j0 * a->vfr;
                /* dP = dY Vᵀ */
                spa_nsas_scores_pitch(vr, a->vfr, nr, dyt, DV, GP, ds, &pfv);
                spa_nsas_pf_rest(&pfv);
                /* S = Q Kᵀ */
                spa_nsas_scores_pitch(kr, a->kfr, nr, qt, D, GP, pt, &pfk);
                spa_nsas_pf_rest(&pfk);
                /* z' - m, with z' = MASKVAL where key position p > s */
                const spa_vf scv = spa_vf_set1(a->scale), maskv = spa_vf_set1(-FLT_MAX);
                for (int64_t r = 0; r < nr; r++) {
                    float *z = pt + r * GP;
                    const int masked = a->causal && p0 + j0 + r > s;
                    for (int64_t l = 0; l < GP; l += SPA_VL) {
                        const spa_vf m = spa_vf_load(mrow + l);
                        spa_vf_store(z + l, masked ? spa_vf_sub(maskv, m)
                                                   : spa_vf_sub(spa_vf_mul(scv, spa_vf_load(z + l)), m));
                    }
                }
                spa_nsas_exp_row(pt, nr * GP);
                /* P = exp(.) * (1/l); dS = P (dP - D), 0 where masked */
                for (int64_t r = 0; r < nr; r++) {
                    float *p = pt + r * GP, *dp = ds + r * GP;
                    const spa_vf keep = spa_vf_set1(a->causal && p0 + j0 + r > s ? 0.0f : 1.0f);
                    for (int64_t l = 0; l < GP; l += SPA_VL) {
                        const spa_vf pv = spa_vf_mul(spa_vf_load(p + l), spa_vf_load(lrow + l));
                        const spa_vf dsv = spa_vf_mul(keep, spa_vf_mul(pv, spa_vf_sub(spa_vf_load(dp + l),
                                                                                    spa_vf_load(drow + l))));
                        spa_vf_store(p + l, pv);
                        spa_vf_store(dp + l, dsv);
                    }
                }
                NSASG_ROUND_ROWS(pt, nr * GP)
                NSASG_ROUND_ROWS(ds, nr * GP)
                spa_nsas_accum_t(kr, a->kfr, nr, ds, D, GP, dqt, &pfdk);
                const int64_t prow = kstart + p0 + j0 - kvlo;
                spa_nsas_rows_add(ds, nr, GP, qn, G, D, dkp + prow * D, &pfdv);
                spa_nsas_pf_rest(&pfdk);
                spa_nsas_pf_rest(&pfdv);
                spa_nsas_rows_add(pt, nr, GP, dyn, G, DV, dvp + prow * DV, &pfdv);
            }
        }
        for (int64_t g = 0; g < G; g++) {
            SPA_T *dqr = dq + t * a->dqs0 + (h2 * G + g) * a->dqs1;
            for (int64_t d = 0; d < D; d++)
                dqr[d * a->dqs2] = SPA_STORE(a->scale * dqt[d * GP + g] + 0.0f);
        }
    }
}
