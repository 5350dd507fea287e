SPA_STAMP
/* LightningIndexerGrad on a run of gathered key rows (spattn/dsa.h): per
 * chunk of up to 32 heads, S = K Qᵀ on the selected-attention score tiles
 * (templates/nsa/nsa_select_mk.m4, the forward's summation order), then
 * per valid row dw += dy ReLU(s) (the layer's FMA, rows in order) and the
 * coefficients C = [s > 0] dy w (0 on padded lanes and rows past valid),
 * dq += Kᵀ C on the transposed accumulate and dk += C Q on the row update
 * (heads in ascending order). ReLU is max(0, s) under the x86 rule, so a
 * NaN score reaches dw as NaN; [s > 0] is false for NaN. */
#include <stddef.h>
#include <stdint.h>

#include "dsa_li_kernel.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_include(`templates/nsa/nsa_select_mk.m4')m4_dnl

/* C = [s > 0] dy w over a row's n lanes, in place: a select, not a
 * product with the indicator (a NaN or infinite dy w where s <= 0 must not
 * reach C); branch-free, so that compilers vectorize it. */
static inline void dslig_coef_row(float *restrict s, const float *restrict w, float dy, int64_t n)
{
    for (int64_t l = 0; l < n; l++)
        s[l] = s[l] > 0.0f ? dy * w[l] : 0.0f;
}

void DSLIG_KSYM()(const spa_dsli_grad_args *a, const float *k, const float *dy, int64_t rows, int64_t valid,
                  float *s, float *dk)
{
    const int64_t gp = a->f.gp, dp = a->f.dp;
    for (int64_t c = 0; c < a->f.chunks; c++) {
        spa_nsas_pf pf = spa_nsas_pf_rows(NULL, 0, 0, 0); /* the rows are in the block's scratch */
        spa_nsas_scores(k, dp, rows, a->f.qt + c * dp * gp, dp, gp, s, &pf);
        const int64_t lanes = a->f.g - c * gp < gp ? a->f.g - c * gp : gp; /* the chunk's heads */
        const float *w = a->f.w + c * gp;
        float *dw = a->dw + c * gp;
        for (int64_t r = 0; r < rows; r++) {
            float *sr = s + r * gp;
            /* padded lanes and rows past valid: 0 (their 0 * k may be NaN) */
            const int64_t live = r < valid ? lanes : 0;
            for (int64_t l = live; l < gp; l++)
                sr[l] = 0.0f;
            if (live == 0)
                continue;
            const spa_vf dyv = spa_vf_set1(dy[r]);
            for (int64_t l = 0; l < gp; l += SPA_VL)
                spa_vf_store(dw + l, spa_vf_fma(spa_vf_load(dw + l), dyv, spa_vf_max(spa_vf_zero(), spa_vf_load(sr + l))));
            dslig_coef_row(sr, w, dy[r], gp); /* lanes past live are 0: they stay 0 */
        }
        spa_nsas_accum_t(k, dp, rows, s, dp, gp, a->dqt + c * dp * gp, &pf);
        spa_nsas_rows_add(s, rows, gp, a->qn + c * gp * dp, lanes, dp, dk, &pf);
    }
}
