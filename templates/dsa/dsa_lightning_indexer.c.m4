SPA_STAMP
/* LightningIndexer scores of a run of gathered key rows (spattn/dsa.h):
 * S = K Qᵀ per chunk of up to 32 heads on the selected-attention score
 * tiles (templates/nsa/nsa_select_mk.m4; their summation order over the
 * head dim), then per row the lanes' w * ReLU(s) added into one vector over
 * the chunks (the layer's FMA) and summed across lanes (spa_vf_hsum's
 * fixed order). ReLU is max(0, s) under the x86 rule, so a NaN score stays
 * NaN (the key ranks last) and a negative one weighs +0 or -0. The lanes
 * past G are set to 0 before they are weighed (their 0 * k may be NaN). */
#include <stddef.h>
#include <stdint.h>

#include "dsa_li_kernel.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_include(`templates/nsa/nsa_select_mk.m4')m4_dnl

void DSLI_KSYM()(const spa_dsli_args *a, const float *k, int64_t rows, float *s, float *out)
{
    const int64_t gp = a->gp, dp = a->dp;
    for (int64_t r = 0; r < rows; r++)
        out[r] = 0.0f;
    for (int64_t c = 0; c < a->chunks; c++) {
        spa_nsas_pf pf = spa_nsas_pf_rows(NULL, 0, 0, 0); /* the rows are in the block's scratch */
        spa_nsas_scores(k, dp, rows, a->qt + c * dp * gp, dp, gp, s, &pf);
        /* a padded lane scores 0 * k, NaN where k holds an infinity: made
         * 0, so that only the G heads add (w is 0 there) */
        for (int64_t l = a->g - c * gp; l < gp; l++)
            for (int64_t r = 0; r < rows; r++)
                s[r * gp + l] = 0.0f;
        const float *w = a->w + c * gp;
        for (int64_t r = 0; r < rows; r++) {
            spa_vf acc = spa_vf_zero();
            for (int64_t l = 0; l < gp; l += SPA_VL)
                acc = spa_vf_fma(acc, spa_vf_load(w + l), spa_vf_max(spa_vf_zero(), spa_vf_load(s + r * gp + l)));
            out[r] += spa_vf_hsum(acc);
        }
    }
}
