SPA_STAMP
/* NsaSelectedAttentionGrad, query tokens [t0, t1) of one batch for one kv
 * head (spec/nsa.md 4.2). Per token the G heads of the group are done
 * together, TK selected rows at a time: dP = dY Vᵀ, S = Q Kᵀ, P recomputed
 * from the given max/sum, dS = P (dP - D) (0 on masked positions: the exact
 * gradient, since a masked score is the constant MASKVAL), P and dS rounded to
 * the dtype; then dQ += dS K (kept per token), and the dK rows (dSᵀ Q) and dV
 * rows (Pᵀ dY) of the selected block are added to this block's f32 partials
 * in token, index and row order, so the sums never depend on the runner.
 * Padding slots (-1) are skipped; rows of a partial last block past the
 * batch's KV get P = 0 and dS = 0 (their K / V rows are the zero rows of the
 * pack, their partial rows map to no KV row); a unit with no selected block
 * writes dq = 0 and adds nothing (its max / sum are not read). The head dims
 * run to dp / dvp (multiples of 16) on zero tails; the caller's rows are
 * read and written to d / dv only. */
#include <float.h>
#include <stdint.h>

#include "half.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_include(`templates/nsa/nsa_select_mk.m4')m4_dnl

m4_dnl NSASG_ROUND_ROWS(x, n): P or dS rounded to the dtype in place (nothing for f32).
m4_define(`NSASG_ROUND_ROWS', m4_ifelse(SPA_DT, `f32', `', `spa_nsas_round($1, $2, 'm4_ifelse(SPA_DT, `bf16', 1, 0)`);'))m4_dnl
enum { TK = NSASG_TK };

#if defined(__GNUC__)
#define NSASG_TAIL_PATH __attribute__((noinline, cold))
#else
#define NSASG_TAIL_PATH
#endif

/* Rows [r0, nr) of a [nr][gp] tile set to x (r0 < 0: from row 0): the rows of
 * a partial last block past the batch's KV. Out of line, so that the whole
 * blocks of the common case compile as if it were not there. */
static NSASG_TAIL_PATH void nsasg_fill_rows(float *tile, int64_t r0, int64_t nr, int64_t gp, float x)
{
    for (int64_t i = (r0 < 0 ? 0 : r0) * gp; i < nr * gp; i++)
        tile[i] = x;
}

void NSASG_KSYM()(const spa_nsas_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                  int64_t kstart, int64_t kvlen, int64_t kvlo, float *dkp, float *dvp, float *scratch)
{
    const SPA_T *q = a->q;
    const SPA_T *o = a->o;
    const float *kh = a->kf, *vh = a->vf; /* the rows of kv head h2 */
    const SPA_T *dy = a->dy;
    const float *mx = a->mx;
    const float *sm = a->sm;
    SPA_T *dq = a->dq;
    const int64_t G = a->g, GP = a->gp, D = a->d, DV = a->dv, DP = a->dp, DVP = a->dvp, BS = a->bs,
                  HC = G < 32 ? G : 32, /* heads per chunk: the micro-kernels' lanes */
                  KC = a->kc;
    /* scratch (the floats phase 1 reserved): lanes of padded heads and the
     * head-dim tails past D / DV stay 0 */
    float *qt = scratch;          /* [DP][GP]  query heads, transposed */
    float *qn = qt + DP * GP;     /* [HC][DP]  query heads */
    float *dyt = qn + HC * DP;    /* [DVP][GP] output grads, transposed */
    float *dyn = dyt + DVP * GP;  /* [HC][DVP] output grads */
    float *dqt = dyn + HC * DVP;  /* [DP][GP]  dQ accumulators */
    float *pt = dqt + DP * GP;    /* [TK][GP] S, then P */
    float *ds = pt + TK * GP;     /* [TK][GP] dP, then dS */
    float *mrow = ds + TK * GP;   /* [GP] softmax max (pad: 0) */
    float *lrow = mrow + GP;      /* [GP] 1 / softmax sum (pad: 1) */
    float *drow = lrow + GP;      /* [GP] rowsum(dY o O) (pad: 0) */

    for (int64_t i = 0; i < (DP + DVP) * GP + HC * (DP + DVP); i++)
        qt[i] = 0.0f; /* qt, qn, dyt, dyn */
    for (int64_t l = 0; l < GP; l++) {
        mrow[l] = 0.0f;
        lrow[l] = 1.0f;
        drow[l] = 0.0f;
    }
    for (int64_t t = t0; t < t1; t++) {
        const int64_t s = t - qstart;
        const int32_t *ir = a->idx + t * a->is0 + h2 * a->is1;
        int64_t sel = 0; /* selected (not padding) slots */
        for (int64_t i = 0; i < KC; i++)
            sel += ir[i * a->is2] >= 0;
        if (sel == 0) { /* nothing selected: no gradient */
            for (int64_t g = 0; g < G; g++) {
                SPA_T *dqr = dq + t * a->dqs0 + (h2 * G + g) * a->dqs1;
                for (int64_t d = 0; d < D; d++)
                    dqr[d * a->dqs2] = SPA_STORE(0.0f);
            }
            continue;
        }
        /* the heads in chunks of at most 32 (the micro-kernels' lanes), in order */
        for (int64_t h0 = 0; h0 < G; h0 += HC) {
            const int64_t nh = G - h0 < HC ? G - h0 : HC;
            if (nh < HC) /* a last, partial chunk: the lanes past it padded, as for a small G */
                for (int64_t g = nh; g < HC; g++) {
                    for (int64_t d = 0; d < DP; d++)
                        qt[d * GP + g] = 0.0f;
                    for (int64_t e = 0; e < DVP; e++)
                        dyt[e * GP + g] = 0.0f;
                    mrow[g] = 0.0f;
                    lrow[g] = 1.0f;
                    drow[g] = 0.0f;
                }
            for (int64_t g = 0; g < nh; g++) {
                const int64_t h = h2 * G + h0 + g;
                const SPA_T *qr = q + t * a->qs0 + h * a->qs1;
                const SPA_T *dyr = dy + t * a->dys0 + h * a->dys1;
                const SPA_T *orow = o + t * a->os0 + h * a->os1;
                float *qg = qn + g * DP, *dyg = dyn + g * DVP;
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
            for (int64_t i = 0; i < DP * GP; i++)
                dqt[i] = 0.0f;
            for (int64_t i = 0; i < KC; i++) {
                if (ir[i * a->is2] < 0)
                    continue;
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
                    if (pn >= 0) { /* not past the walk, nor a padding slot */
                        pfv = spa_nsas_pf_rows(vh + (kstart + pn) * a->vfr, a->vfr * 4, nr, DVP * 4);
                        pfk = spa_nsas_pf_rows(kh + (kstart + pn) * a->kfr, a->kfr * 4, nr, DP * 4);
                        pfdk = spa_nsas_pf_rows(dkp + (kstart + pn - kvlo) * DP, DP * 4, nr, DP * 4);
                        pfdv = spa_nsas_pf_rows(dvp + (kstart + pn - kvlo) * DVP, DVP * 4, nr, DVP * 4);
                    }
                    const float *kr = kb + j0 * a->kfr, *vr = vb + j0 * a->vfr;
                    /* dP = dY Vᵀ */
                    spa_nsas_scores_pitch(vr, a->vfr, nr, dyt, DVP, GP, ds, &pfv);
                    spa_nsas_pf_rest(&pfv);
                    /* S = Q Kᵀ */
                    spa_nsas_scores_pitch(kr, a->kfr, nr, qt, DP, GP, pt, &pfk);
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
                    /* rows past the batch's KV (a partial last block): -inf, so
                     * P = 0 whatever m, and dS = 0 below (their dP is 0: zero V rows) */
                    const int64_t inside = kvlen - (p0 + j0);
                    if (inside < nr)
                        nsasg_fill_rows(pt, inside, nr, GP, -INFINITY);
                    spa_nsas_exp_row(pt, nr * GP);
                    /* P = exp(.) * (1/l); dS = P (dP - D), +0 where masked (a
                     * constant score) and past the KV (no key): stored, not
                     * multiplied by 0, which a NaN P or D would turn into NaN */
                    for (int64_t r = 0; r < nr; r++) {
                        float *p = pt + r * GP, *dp = ds + r * GP;
                        const int no_ds = (a->causal && p0 + j0 + r > s) || r >= inside;
                        for (int64_t l = 0; l < GP; l += SPA_VL) {
                            const spa_vf pv = spa_vf_mul(spa_vf_load(p + l), spa_vf_load(lrow + l));
                            spa_vf_store(p + l, r >= inside ? spa_vf_zero() : pv);
                            spa_vf_store(dp + l, no_ds ? spa_vf_zero()
                                                       : spa_vf_mul(pv, spa_vf_sub(spa_vf_load(dp + l),
                                                                                   spa_vf_load(drow + l))));
                        }
                    }
                    NSASG_ROUND_ROWS(pt, nr * GP)
                    NSASG_ROUND_ROWS(ds, nr * GP)
                    spa_nsas_accum_t(kr, a->kfr, nr, ds, DP, GP, dqt, &pfdk);
                    const int64_t prow = kstart + p0 + j0 - kvlo;
                    spa_nsas_rows_add(ds, nr, GP, qn, nh, DP, dkp + prow * DP, &pfdv);
                    spa_nsas_pf_rest(&pfdk);
                    spa_nsas_pf_rest(&pfdv);
                    spa_nsas_rows_add(pt, nr, GP, dyn, nh, DVP, dvp + prow * DVP, &pfdv);
                }
            }
            for (int64_t g = 0; g < nh; g++) {
                SPA_T *dqr = dq + t * a->dqs0 + (h2 * G + h0 + g) * a->dqs1;
                for (int64_t d = 0; d < D; d++)
                    dqr[d * a->dqs2] = SPA_STORE(a->scale * dqt[d * GP + g] + 0.0f);
            }
        }
    }
}
