SPA_STAMP
/* Sliding-window attention grad, query tokens [t0, t1) of one batch for one
 * kv head (docs/sliding_window_attention.md 4). Per token, the heads of the
 * kv group run together (sub-groups of up to 32 lanes) over the keys of its
 * band, KT keys at a time: dP = dY Vᵀ, S = Q Kᵀ, P = exp(scale S - m) / l
 * from the saved statistics, dS = P (dP - D); then dQ += dS K (kept per
 * token), and the dK rows (dSᵀ Q, unscaled) and dV rows (Pᵀ dY) of the key
 * tile are added to this block's f32 partials in token order, so the sums
 * never depend on the runner. The last run of fewer than 16 keys goes
 * through zero-padded 16-row stages (keys outside the band are never read,
 * nor written in the partials). */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "half.h"
#include "swa_kernel.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_include(`templates/nsa/nsa_select_mk.m4')m4_dnl

enum { KT = SWAG_KT };

/* the micro-kernels of the f32 forward (templates/swa.c.m4) */
SWA_MK_DECLS()m4_dnl

/* rows [0, n) of src (pitch sp) into a 16-row stage of pitch dp, zeros
 * after; dp is a multiple of 16, so of the vector length */
static void swag_stage(float *stage, const float *src, int64_t sp, int64_t n, int64_t dp)
{
    for (int64_t r = 0; r < 16; r++)
        for (int64_t i = 0; i < dp; i += SPA_VL)
            spa_vf_store(stage + r * dp + i, r < n ? spa_vf_load(src + r * sp + i) : spa_vf_zero());
}

/* rows_add of a stage: the first n of 16 rows, through a zeroed buffer */
static void swag_rows_add_tail(const float *w, int64_t gp, const float *b, int64_t g, int64_t dp,
                               float *buf, float *out, int64_t n)
{
    for (int64_t i = 0; i < 16 * dp; i++)
        buf[i] = 0.0f;
    SWA_MK(`rows_add')(w, 16, gp, b, g, dp, buf);
    for (int64_t i = 0; i < n * dp; i++)
        out[i] += buf[i];
}

void SWAG_KSYM()(const spa_swa_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t bstart,
                 int64_t kvlo, void *dkp_, void *dvp_, void *scratch_)
{
    const SPA_T *q = a->q;
    const SPA_T *o = a->o;
    const SPA_T *dy = a->dy;
    const float *mx = a->mx, *sm = a->sm;
    SPA_T *dq = a->dq;
    float *dkp = dkp_, *dvp = dvp_;
    const int64_t G = a->g, GP = a->gp, D = a->d, DV = a->dv, DP = a->dp, DVP = a->dvp;
    const int64_t SG = G < SPA_SWA_SUBGROUP ? G : SPA_SWA_SUBGROUP;
    const int64_t DM = DP > DVP ? DP : DVP;
    float *qt = scratch_;          /* [DP][GP] query heads, transposed */
    float *qn = qt + DP * GP;      /* [SG][DP] query heads */
    float *dyt = qn + SG * DP;     /* [DVP][GP] output grads, transposed */
    float *dyn = dyt + DVP * GP;   /* [SG][DVP] output grads */
    float *dqt = dyn + SG * DVP;   /* [DP][GP] dQ accumulators */
    float *pt = dqt + DP * GP;     /* [KT][GP] S, then P */
    float *ds = pt + KT * GP;      /* [KT][GP] dP, then dS */
    float *mrow = ds + KT * GP;    /* [GP] softmax max */
    float *lrow = mrow + GP;       /* [GP] 1 / softmax sum (padded lanes 0) */
    float *drow = lrow + GP;       /* [GP] rowsum(dY o O) */
    float *stk = drow + GP;        /* [16][DP] staged key rows */
    float *stv = stk + 16 * DP;    /* [16][DVP] staged value rows */
    float *sto = stv + 16 * DVP;   /* [16][DM] staged partial rows */
    const spa_vf sv = spa_vf_set1(a->scale);

    for (int64_t t = t0; t < t1; t++) {
        const int64_t lo = spa_swa_lo(t, bstart, a->left);
        for (int64_t g0 = 0; g0 < G; g0 += SPA_SWA_SUBGROUP) {
            const int64_t ng = G - g0 < SPA_SWA_SUBGROUP ? G - g0 : SPA_SWA_SUBGROUP;
            for (int64_t i = 0; i < DP * GP; i++)
                qt[i] = dqt[i] = 0.0f;
            for (int64_t i = 0; i < DVP * GP; i++)
                dyt[i] = 0.0f;
            for (int64_t l = 0; l < GP; l++)
                mrow[l] = lrow[l] = drow[l] = 0.0f;
            for (int64_t g = 0; g < ng; g++) {
                const int64_t h = h2 * G + g0 + g;
                const SPA_T *qr = q + t * a->qs0 + h * a->qs1;
                const SPA_T *dyr = dy + t * a->dys0 + h * a->dys1;
                const SPA_T *orow = o + t * a->os0 + h * a->os1;
                float *qg = qn + g * DP, *dyg = dyn + g * DVP;
                for (int64_t d = 0; d < DP; d++) {
                    qg[d] = d < D ? SPA_LOAD(qr[d * a->qs2]) : 0.0f;
                    qt[d * GP + g] = qg[d];
                }
                float dsum = 0.0f;
                for (int64_t e = 0; e < DVP; e++) {
                    dyg[e] = e < DV ? SPA_LOAD(dyr[e * a->dys2]) : 0.0f;
                    dyt[e * GP + g] = dyg[e];
                    if (e < DV)
                        dsum += dyg[e] * SPA_LOAD(orow[e * a->os2]);
                }
                drow[g] = dsum;
                mrow[g] = mx[t * a->ms0 + h * a->ms1];
                lrow[g] = 1.0f / sm[t * a->ss0 + h * a->ss1];
            }
            for (int64_t c0 = lo; c0 <= t; c0 += KT) {
                const int64_t n = t + 1 - c0 < KT ? t + 1 - c0 : KT;
                const int64_t nf = n / 16 * 16, rem = n - nf, rows = nf + (rem > 0 ? 16 : 0);
                const float *kr = a->kf + c0 * a->kfr, *vr = a->vf + c0 * a->vfr;
                if (rem > 0) {
                    swag_stage(stk, kr + nf * a->kfr, a->kfr, rem, DP);
                    swag_stage(stv, vr + nf * a->vfr, a->vfr, rem, DVP);
                }
                /* dP = dY Vᵀ, S = Q Kᵀ */
                if (nf > 0) {
                    SWA_MK(`scores')(vr, a->vfr, nf, dyt, DVP, GP, ds);
                    SWA_MK(`scores')(kr, a->kfr, nf, qt, DP, GP, pt);
                }
                if (rem > 0) {
                    SWA_MK(`scores')(stv, DVP, 16, dyt, DVP, GP, ds + nf * GP);
                    SWA_MK(`scores')(stk, DP, 16, qt, DP, GP, pt + nf * GP);
                }
                /* z - m (keys past the band: -inf), P = exp(z - m) / l, dS = P (dP - D) */
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t l0 = 0; l0 < GP; l0 += SPA_VL) {
                        const spa_vf z = spa_vf_sub(spa_vf_mul(sv, spa_vf_load(pt + r * GP + l0)),
                                                    spa_vf_load(mrow + l0));
                        spa_vf_store(pt + r * GP + l0, r < n ? z : spa_vf_set1(-INFINITY));
                    }
                spa_nsas_exp_row(pt, rows * GP);
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t l0 = 0; l0 < GP; l0 += SPA_VL) {
                        const spa_vf p = spa_vf_mul(spa_vf_load(pt + r * GP + l0), spa_vf_load(lrow + l0));
                        const spa_vf dsv = spa_vf_mul(p, spa_vf_sub(spa_vf_load(ds + r * GP + l0),
                                                                    spa_vf_load(drow + l0)));
                        spa_vf_store(pt + r * GP + l0, p);
                        spa_vf_store(ds + r * GP + l0, r < n ? dsv : spa_vf_zero());
                    }
                const int64_t prow = c0 - kvlo;
                if (nf > 0) {
                    SWA_MK(`accum')(kr, a->kfr, nf, ds, DP, GP, dqt);
                    SWA_MK(`rows_add')(ds, nf, GP, qn, ng, DP, dkp + prow * DP);
                    SWA_MK(`rows_add')(pt, nf, GP, dyn, ng, DVP, dvp + prow * DVP);
                }
                if (rem > 0) {
                    SWA_MK(`accum')(stk, DP, 16, ds + nf * GP, DP, GP, dqt);
                    swag_rows_add_tail(ds + nf * GP, GP, qn, ng, DP, sto, dkp + (prow + nf) * DP, rem);
                    swag_rows_add_tail(pt + nf * GP, GP, dyn, ng, DVP, sto, dvp + (prow + nf) * DVP, rem);
                }
            }
            for (int64_t g = 0; g < ng; g++) {
                SPA_T *dqr = dq + t * a->dqs0 + (h2 * G + g0 + g) * a->dqs1;
                for (int64_t d = 0; d < D; d++)
                    dqr[d * a->dqs2] = SPA_STORE(a->scale * dqt[d * GP + g] + 0.0f);
            }
        }
    }
    (void)DM;
}
