SPA_STAMP
/* NsaSelectedAttention forward, a run of query tokens of one batch for one kv
 * head (spec/nsa.md 3.2). Per unit the G query heads of the group are done
 * together: S = Q Kselᵀ over the K*bs selected key rows (staged TK rows at a
 * time, widened to f32), masked softmax in f32, P rounded to the dtype, then
 * O = P Vsel with the value rows staged the same way. */
#include <float.h>
#include <stdint.h>

#include "half.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_define(`NSAS_ROUND', m4_ifelse(SPA_DT, `f32', `($1)', `SPA_LOAD(SPA_STORE($1))'))m4_dnl
m4_dnl NSAS_WIDEN(dst, src, stride, n): a staged key/value row, unit stride through
m4_dnl the vector conversions of nsa_select_mk.h.
m4_define(`NSAS_WIDEN', m4_ifelse(SPA_DT, `f16', `if ($3 == 1)
                        spa_nsas_widen_f16($1, $2, $4);
                    else
                        SPA_WIDEN_ROW($1, $2, $3, $4)', SPA_DT, `bf16', `if ($3 == 1)
                        spa_nsas_widen_bf16($1, $2, $4);
                    else
                        SPA_WIDEN_ROW($1, $2, $3, $4)', `SPA_WIDEN_ROW($1, $2, $3, $4)'))m4_dnl
enum { TK = NSAS_TK, PITCH = SPA_NSAS_PITCH, AHEAD = 1 };

/* Prefetch cursor over chunk c of one unit's walk: the TK-row chunks of the
 * selected key blocks in index order, then those of the value blocks. */
static spa_nsas_pf chunk_pf(const spa_nsas_args *a, const int32_t *ir, int64_t h2, int64_t kstart,
                            int64_t c)
{
    const int64_t per_block = (a->bs + TK - 1) / TK, i = c / per_block, j0 = (c % per_block) * TK;
    const int64_t nr = a->bs - j0 < TK ? a->bs - j0 : TK;
    if (i < a->kc) {
        const SPA_T *k = a->k;
        const int64_t row = kstart + (int64_t)ir[i * a->is2] * a->bs + j0;
        return spa_nsas_pf_rows(k + row * a->ks0 + h2 * a->ks1, a->ks0 * SPA_SZ, nr, a->d * SPA_SZ);
    }
    if (i < 2 * a->kc) {
        const SPA_T *v = a->v;
        const int64_t row = kstart + (int64_t)ir[(i - a->kc) * a->is2] * a->bs + j0;
        return spa_nsas_pf_rows(v + row * a->vs0 + h2 * a->vs1, a->vs0 * SPA_SZ, nr, a->dv * SPA_SZ);
    }
    return spa_nsas_pf_rows(NULL, 0, 0, 0);
}

void NSAS_KSYM()(const spa_nsas_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                 int64_t kstart, float *scratch)
{
    const SPA_T *q = a->q;
    const SPA_T *k = a->k;
    const SPA_T *v = a->v;
    SPA_T *o = a->o;
    float *mx = a->mx;
    float *sm = a->sm;
    const int64_t G = a->g, GP = a->gp, D = a->d, DV = a->dv, BS = a->bs,
                  KC = a->kc, KB = a->kc * a->bs, CPB = (a->bs + TK - 1) / TK;
    /* scratch (the floats phase 1 reserved): lanes of padded heads stay 0 */
    float *qt = scratch;     /* [D][GP]  query heads, transposed */
    float *st = qt + D * GP; /* [KB][GP] scores, then P */
    float *ot = st + KB * GP; /* [DV][GP] output heads, transposed */
    float *rows = ot + DV * GP; /* [TK][PITCH] staged key or value rows */
    float *mrow = rows + TK * PITCH; /* [GP] max */
    float *lrow = mrow + GP;     /* [GP] sum */

    for (int64_t i = 0; i < D * GP; i++)
        qt[i] = 0.0f;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t s = t - qstart;
        const int32_t *ir = a->idx + t * a->is0 + h2 * a->is1;
        for (int64_t g = 0; g < G; g++) {
            const SPA_T *qr = q + t * a->qs0 + (h2 * G + g) * a->qs1;
            for (int64_t d = 0; d < D; d++)
                qt[d * GP + g] = SPA_LOAD(qr[d * a->qs2]);
        }
        /* S = Q Kselᵀ, in index order (duplicates included) */
        for (int64_t i = 0; i < KC; i++) {
            const SPA_T *kb = k + (kstart + (int64_t)ir[i * a->is2] * BS) * a->ks0 + h2 * a->ks1;
            for (int64_t j0 = 0; j0 < BS; j0 += TK) {
                const int64_t nr = BS - j0 < TK ? BS - j0 : TK;
                /* a later chunk's rows, requested while this one is computed */
                spa_nsas_pf pf = chunk_pf(a, ir, h2, kstart, i * CPB + j0 / TK + AHEAD);
                for (int64_t r = 0; r < nr; r++) {
                    float *dst = rows + r * PITCH;
                    const SPA_T *src = kb + (j0 + r) * a->ks0;
                    NSAS_WIDEN(dst, src, a->ks2, D);
                }
                spa_nsas_scores(rows, PITCH, nr, qt, D, GP, st + (i * BS + j0) * GP, &pf);
                spa_nsas_pf_rest(&pf);
            }
        }
        /* z' = scale*S or MASKVAL (-FLT_MAX) where key position p > s */
        for (int64_t l = 0; l < GP; l++)
            mrow[l] = -FLT_MAX;
        for (int64_t i = 0; i < KC; i++) {
            const int64_t p0 = (int64_t)ir[i * a->is2] * BS;
            for (int64_t j = 0; j < BS; j++) {
                float *z = st + (i * BS + j) * GP;
                if (a->causal && p0 + j > s) {
                    for (int64_t l = 0; l < GP; l++)
                        z[l] = -FLT_MAX;
                } else {
                    for (int64_t l = 0; l < GP; l++) {
                        z[l] = a->scale * z[l];
                        mrow[l] = mrow[l] > z[l] ? mrow[l] : z[l];
                    }
                }
            }
        }
        /* P = exp(z' - m) / l, rounded to the dtype */
        spa_nsas_exp_sum(st, KB, GP, mrow, lrow);
        for (int64_t j = 0; j < KB; j++)
            for (int64_t l = 0; l < GP; l++)
                st[j * GP + l] = NSAS_ROUND(st[j * GP + l] / lrow[l]);
        /* O = P Vsel */
        for (int64_t i = 0; i < DV * GP; i++)
            ot[i] = 0.0f;
        for (int64_t i = 0; i < KC; i++) {
            const SPA_T *vb = v + (kstart + (int64_t)ir[i * a->is2] * BS) * a->vs0 + h2 * a->vs1;
            for (int64_t j0 = 0; j0 < BS; j0 += TK) {
                const int64_t nr = BS - j0 < TK ? BS - j0 : TK;
                spa_nsas_pf pf = chunk_pf(a, ir, h2, kstart, (KC + i) * CPB + j0 / TK + AHEAD);
                for (int64_t r = 0; r < nr; r++) {
                    float *dst = rows + r * PITCH;
                    const SPA_T *src = vb + (j0 + r) * a->vs0;
                    NSAS_WIDEN(dst, src, a->vs2, DV);
                }
                spa_nsas_accum_t(rows, PITCH, nr, st + (i * BS + j0) * GP, DV, GP, ot, &pf);
                spa_nsas_pf_rest(&pf);
            }
        }
        for (int64_t g = 0; g < G; g++) {
            const int64_t h = h2 * G + g;
            SPA_T *orow = o + t * a->os0 + h * a->os1;
            for (int64_t e = 0; e < DV; e++)
                orow[e * a->os2] = SPA_STORE(ot[e * GP + g]);
            float *mr = mx + t * a->ms0 + h * a->ms1;
            float *sr = sm + t * a->ss0 + h * a->ss1;
            for (int64_t c = 0; c < 8; c++) {
                mr[c * a->ms2] = mrow[g];
                sr[c * a->ss2] = lrow[g];
            }
        }
    }
}
