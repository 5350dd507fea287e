SPA_STAMP
/* Sliding-window attention forward, query tokens [t0, t1) of one batch for
 * one kv head (docs/sliding_window_attention.md 4). Per token, the heads of
 * the kv group run together (sub-groups of up to 32 lanes) against the keys
 * of its band [lo, t], KT keys at a time, with an online softmax: each key
 * tile scores S = scale Q Kᵀ (the register tiles of selected attention,
 * templates/nsa/nsa_select_mk.m4), raises the running max m, rescales the
 * running sum l and the output accumulators by exp(m_old - m_new), and adds
 * exp(S - m) V. Whole runs of 16 keys are read in place from the f32 rows;
 * the last run of fewer than 16 keys is copied into a zero-padded 16-row
 * stage, so no key outside the band is ever read (a non-finite key or value
 * there cannot reach the result). P stays f32; one rounding on store. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "half.h"
#include "swa_kernel.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_include(`templates/nsa/nsa_select_mk.m4')m4_dnl

enum { KT = SWA_KT };

/* The micro-kernels, instantiated once per ISA: out of line, in the f32
 * forward only, and called by every dtype of the forward and the grad (they
 * compute on f32 rows whatever the dtype). Every call covers at least 16
 * keys, so the call costs nothing, where inlining the dispatch of tiles at
 * each call site would multiply the code. */
SWA_MK_DECLS()m4_dnl
m4_ifelse(SPA_DT, `f32', `m4_dnl
void SWA_MK(`scores')(const float *a, int64_t lda, int64_t rows, const float *bt, int64_t n,
                      int64_t gp, float *out)
{
    spa_nsas_pf pf = spa_nsas_pf_rows(NULL, 0, 0, 0);
    spa_nsas_scores_pitch(a, lda, rows, bt, n, gp, out, &pf);
}

void SWA_MK(`accum')(const float *a, int64_t lda, int64_t rows, const float *p, int64_t n,
                     int64_t gp, float *acc)
{
    spa_nsas_pf pf = spa_nsas_pf_rows(NULL, 0, 0, 0);
    spa_nsas_accum_t(a, lda, rows, p, n, gp, acc, &pf);
}

void SWA_MK(`rows_add')(const float *w, int64_t rows, int64_t gp, const float *b, int64_t g,
                        int64_t n, float *out)
{
    spa_nsas_pf pf = spa_nsas_pf_rows(NULL, 0, 0, 0);
    spa_nsas_rows_add(w, rows, gp, b, g, n, out, &pf);
}
')m4_dnl

/* rows [0, n) of src (pitch sp) into a 16-row stage of pitch dp, zeros
 * after; dp is a multiple of 16, so of the vector length */
static void swa_stage(float *stage, const float *src, int64_t sp, int64_t n, int64_t dp)
{
    for (int64_t r = 0; r < 16; r++)
        for (int64_t i = 0; i < dp; i += SPA_VL)
            spa_vf_store(stage + r * dp + i, r < n ? spa_vf_load(src + r * sp + i) : spa_vf_zero());
}

/* Lane g of a transposed tile (col = tile + g, pitch gp) from / to a
 * caller's row: whole vectors where the row is unit-stride (strided vector
 * stores and loads), the tail element by element (the same conversions,
 * bit for bit). */
static inline void swa_lane_in(float *col, int64_t gp, const SPA_T *row, int64_t stride, int64_t n)
{
    int64_t d = 0;
    if (stride == 1)
        for (; d + SPA_VL <= n; d += SPA_VL)
            spa_vf_scatter(col + d * gp, gp, SPA_VLOAD(row + d));
    for (; d < n; d++)
        col[d * gp] = SPA_LOAD(row[d * stride]);
}

static inline void swa_lane_out(SPA_T *row, int64_t stride, const float *col, int64_t gp, int64_t n,
                                float s)
{
    int64_t e = 0;
    if (stride == 1) {
        const spa_vf sv = spa_vf_set1(s);
        for (; e + SPA_VL <= n; e += SPA_VL)
            SPA_VSTORE(row + e, spa_vf_mul(spa_vf_gather(col + e * gp, gp), sv));
    }
    for (; e < n; e++)
        row[e * stride] = SPA_STORE(col[e * gp] * s);
}

void SWA_KSYM()(const spa_swa_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t bstart,
                void *scratch_)
{
    const SPA_T *q = a->q;
    SPA_T *o = a->o;
    float *mx = a->mx, *sm = a->sm;
    const int64_t G = a->g, GP = a->gp, D = a->d, DV = a->dv, DP = a->dp, DVP = a->dvp;
    float *qt = scratch_;           /* [DP][GP] query heads, transposed */
    float *st = qt + DP * GP;       /* [KT][GP] scores, then exp */
    float *ot = st + KT * GP;       /* [DVP][GP] output accumulators */
    float *mrow = ot + DVP * GP;    /* [GP] running max */
    float *lrow = mrow + GP;        /* [GP] running sum */
    float *arow = lrow + GP;        /* [GP] rescale factor */
    float *crow = arow + GP;        /* [GP] sum of this key tile */
    float *stage = crow + GP;       /* [16][max(DP, DVP)] */
    const spa_nsas_expk ek = spa_nsas_expk_set();
    const spa_vf sv = spa_vf_set1(a->scale), ninf = spa_vf_set1(-INFINITY);

    for (int64_t t = t0; t < t1; t++) {
        const int64_t lo = spa_swa_lo(t, bstart, a->left);
        for (int64_t g0 = 0; g0 < G; g0 += SPA_SWA_SUBGROUP) {
            const int64_t ng = G - g0 < SPA_SWA_SUBGROUP ? G - g0 : SPA_SWA_SUBGROUP;
            for (int64_t i = 0; i < DP * GP; i++)
                qt[i] = 0.0f;
            for (int64_t g = 0; g < ng; g++)
                swa_lane_in(qt + g, GP, q + t * a->qs0 + (h2 * G + g0 + g) * a->qs1, a->qs2, D);
            for (int64_t i = 0; i < DVP * GP; i++)
                ot[i] = 0.0f;
            for (int64_t l = 0; l < GP; l++) {
                mrow[l] = -INFINITY;
                lrow[l] = 0.0f;
            }
            for (int64_t c0 = lo; c0 <= t; c0 += KT) {
                const int64_t n = t + 1 - c0 < KT ? t + 1 - c0 : KT;
                const int64_t nf = n / 16 * 16, rem = n - nf, rows = nf + (rem > 0 ? 16 : 0);
                if (nf > 0)
                    SWA_MK(`scores')(a->kf + c0 * a->kfr, a->kfr, nf, qt, DP, GP, st);
                if (rem > 0) {
                    swa_stage(stage, a->kf + (c0 + nf) * a->kfr, a->kfr, rem, DP);
                    SWA_MK(`scores')(stage, DP, 16, qt, DP, GP, st + nf * GP);
                }
                /* scale, this tile's max, the new running max and the rescale factor */
                for (int64_t l0 = 0; l0 < GP; l0 += SPA_VL) {
                    spa_vf cm = ninf;
                    int64_t r = 0;
                    for (; r < n; r++) {
                        const spa_vf z = spa_vf_mul(sv, spa_vf_load(st + r * GP + l0));
                        spa_vf_store(st + r * GP + l0, z);
                        cm = spa_vf_max(cm, z);
                    }
                    for (; r < rows; r++)
                        spa_vf_store(st + r * GP + l0, ninf);
                    const spa_vf mo = spa_vf_load(mrow + l0), mn = spa_vf_max(mo, cm);
                    spa_vf_store(arow + l0, spa_nsas_expv(spa_vf_sub(mo, mn), &ek));
                    spa_vf_store(mrow + l0, mn);
                }
                NSAS_EXP_SUM()(st, rows, GP, mrow, crow);
                if (c0 > lo) { /* rescale what the earlier tiles summed */
                    for (int64_t e = 0; e < DVP; e++)
                        for (int64_t l0 = 0; l0 < GP; l0 += SPA_VL)
                            spa_vf_store(ot + e * GP + l0, spa_vf_mul(spa_vf_load(ot + e * GP + l0),
                                                                      spa_vf_load(arow + l0)));
                }
                for (int64_t l0 = 0; l0 < GP; l0 += SPA_VL)
                    spa_vf_store(lrow + l0, spa_vf_add(spa_vf_mul(spa_vf_load(lrow + l0),
                                                                  spa_vf_load(arow + l0)),
                                                       spa_vf_load(crow + l0)));
                if (nf > 0)
                    SWA_MK(`accum')(a->vf + c0 * a->vfr, a->vfr, nf, st, DVP, GP, ot);
                if (rem > 0) {
                    swa_stage(stage, a->vf + (c0 + nf) * a->vfr, a->vfr, rem, DVP);
                    SWA_MK(`accum')(stage, DVP, 16, st + nf * GP, DVP, GP, ot);
                }
            }
            for (int64_t g = 0; g < ng; g++) {
                const int64_t h = h2 * G + g0 + g;
                swa_lane_out(o + t * a->os0 + h * a->os1, a->os2, ot + g, GP, DV, 1.0f / lrow[g]);
                float *mr = mx + t * a->ms0 + h * a->ms1;
                float *sr = sm + t * a->ss0 + h * a->ss1;
                for (int64_t c = 0; c < a->lanes; c++) {
                    mr[c * a->ms2] = mrow[g];
                    sr[c * a->ss2] = lrow[g];
                }
            }
        }
    }
}
