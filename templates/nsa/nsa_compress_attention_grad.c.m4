SPA_STAMP
/* NsaCompressAttention backward, a run of query tokens of one batch for one
 * kv head (docs/nsa_compress_attention.md 3), in the lane groups of the
 * forward (templates/nsa/nsa_compress_attention.c.m4): per group, over the keys
 * up to the last visible one of its tokens (rounded up to 16 rows),
 * S = Q Kᵀ again, P = exp(z' - m) / l from the saved statistics,
 * dP = dY Vᵀ, dS = P (dP - D) (0 on masked scores), P and dS rounded to the
 * dtype; dQ = scale dS K is stored, and the rows dK += dSᵀ Q, dV += Pᵀ dY
 * are added into the block partials (heads summed in lane order; the
 * driver scales dK and sums the blocks in order). */
#include <float.h>
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "nsa_cattn_exact.h"
#include "nsa_cattn_kernel.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_include(`templates/nsa/nsa_select_mk.m4')m4_dnl

enum { TK = NSCAG_TK };

/* Lane l of a transposed tile (col = tile + l, pitch gp) and a row of the
 * row-major copy (rn, n floats) at once, from a caller's row: whole vectors
 * where the row is unit-stride, the tail element by element (the same
 * conversions, bit for bit); and back out to a caller's row. */
static inline void lane_in2(float *col, int64_t gp, float *rn, const SPA_T *row, int64_t stride,
                            int64_t n)
{
    int64_t d = 0;
    if (stride == 1)
        for (; d + SPA_VL <= n; d += SPA_VL) {
            const spa_vf v = SPA_VLOAD(row + d);
            spa_vf_store(rn + d, v);
            spa_vf_scatter(col + d * gp, gp, v);
        }
    for (; d < n; d++)
        col[d * gp] = rn[d] = SPA_LOAD(row[d * stride]);
}

static inline void lane_out(SPA_T *row, int64_t stride, const float *col, int64_t gp, int64_t n,
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

/* out[j][l] = sum_e rows[j][e] * bt[e][l], j < rows, in micro-steps of TK. */
static void scores_rows(const float *kb, int64_t kfr, int64_t rows, const float *bt, int64_t n,
                        int64_t gp, float *out)
{
    for (int64_t j0 = 0; j0 < rows; j0 += TK) {
        const int64_t nr = rows - j0 < TK ? rows - j0 : TK;
        spa_nsas_pf pf = spa_nsas_pf_rows(j0 + TK < rows ? kb + (j0 + TK) * kfr : NULL, kfr * 4,
                                          rows - j0 - TK < TK ? rows - j0 - TK : TK, n * 4);
        spa_nsas_scores_pitch(kb + j0 * kfr, kfr, nr, bt, n, gp, out + j0 * gp, &pf);
        spa_nsas_pf_rest(&pf);
    }
}

/* acc[e][l] += sum_j rows[j][e] * w[j][l], j < rows. */
static void accum_rows(const float *kb, int64_t kfr, int64_t rows, const float *w, int64_t n,
                       int64_t gp, float *acc)
{
    for (int64_t j0 = 0; j0 < rows; j0 += TK) {
        const int64_t nr = rows - j0 < TK ? rows - j0 : TK;
        spa_nsas_pf pf = spa_nsas_pf_rows(NULL, 0, 0, 0);
        spa_nsas_accum_t(kb + j0 * kfr, kfr, nr, w + j0 * gp, n, gp, acc, &pf);
    }
}

/* The exact forms of dQ = scale dS K, dK rows += dSᵀ Q and dV rows += Pᵀ dY
 * for a lane group where a NaN or an infinity meets a key some lane does not
 * attend (in its key row, or in the lane's q, dy or statistics): the tiles
 * would multiply it by a weight of 0 (0 * NaN is NaN), so each lane takes
 * only the keys it attends. Keys ascending, lanes in order; never met on
 * finite inputs. */
SPA_NSCA_COLD static void exact_grads(const spa_nsca_args *a, const float *kb, int64_t kfr, const float *st,
                                      const float *dst, int64_t R, int64_t gp, const int64_t *vend, int64_t tg,
                                      int64_t qstart, int64_t nt, int64_t nh, int64_t ncmp, const float *qn,
                                      const float *dyn, float *dqt, float *dk_rows, float *dv_rows)
{
    const int64_t dp = a->dp, dvp = a->dvp;
    for (int64_t j = 0; j < R; j++)
        for (int64_t l = 0; l < nt * nh; l++) {
            const int64_t i = l / nh;
            if (!spa_nsca_attends(a, tg + i - qstart, j, vend[i], ncmp))
                continue;
            const float ds = dst[j * gp + l], p = st[j * gp + l];
            for (int64_t d = 0; d < dp; d++) {
                dqt[d * gp + l] += ds * kb[j * kfr + d];
                dk_rows[j * dp + d] += ds * qn[l * dp + d];
            }
            for (int64_t e = 0; e < dvp; e++)
                dv_rows[j * dvp + e] += p * dyn[l * dvp + e];
        }
}

void NSCAG_KSYM()(const spa_nsca_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                  int64_t kstart, int64_t ncmp, int64_t kvlo, float *dkp, float *dvp,
                  float *scratch)
{
    const SPA_T *q = a->q, *o = a->o, *dy = a->dy;
    SPA_T *dq = a->dq;
    const float *mx = a->mx, *sm = a->sm;
    const int64_t G = a->g, HC = a->hc, TQ = a->tq, GP = a->gp, D = a->d, DV = a->dv, DP = a->dp,
                  DVP = a->dvp, RMAX = a->rows_max;
    const float *kb = a->kf + kstart * a->kfr, *vb = a->vf + kstart * a->vfr;
    float *dk_rows = dkp + (kstart - kvlo) * DP, *dv_rows = dvp + (kstart - kvlo) * DVP;
    float *qt = scratch;         /* [DP][GP] query lanes, transposed */
    float *qn = qt + DP * GP;    /* [GP][DP] query lanes, as rows */
    float *dyt = qn + GP * DP;   /* [DVP][GP] */
    float *dyn = dyt + DVP * GP; /* [GP][DVP] */
    float *st = dyn + GP * DVP;  /* [RMAX][GP] S, then P */
    float *dst = st + RMAX * GP; /* [RMAX][GP] dP, then dS */
    float *dqt = dst + RMAX * GP; /* [DP][GP] */
    float *mrow = dqt + DP * GP; /* [GP] */
    float *inv = mrow + GP;      /* [GP] 1 / l */
    float *dd = inv + GP;        /* [GP] D = rowsum(dY o O) */
    float *junk = dd + GP;       /* [GP] */
m4_ifelse(SPA_DT, `f32', `', `    const int bf16 = m4_ifelse(SPA_DT, `bf16', 1, 0);
')m4_dnl

    const spa_vf sv = spa_vf_set1(a->scale);
    for (int64_t x = 0; x < DP * GP; x++)
        qt[x] = qn[x] = 0.0f;
    for (int64_t x = 0; x < DVP * GP; x++)
        dyt[x] = dyn[x] = 0.0f;
    for (int64_t tg = t0; tg < t1; tg += TQ) {
        const int64_t nt = t1 - tg < TQ ? t1 - tg : TQ;
        int64_t vend[32], rows = 0;
        for (int64_t i = 0; i < nt; i++) {
            vend[i] = spa_nsca_visible_end(a, tg + i - qstart, ncmp);
            const int64_t r = vend[i] > 0 ? vend[i] : ncmp;
            rows = r > rows ? r : rows;
        }
        const int64_t R = (rows + 15) / 16 * 16;
        for (int64_t h0 = 0; h0 < G; h0 += HC) {
            const int64_t nh = G - h0 < HC ? G - h0 : HC, lanes = nt * nh;
            if (R == 0) { /* no key: dq = 0 */
                for (int64_t i = 0; i < nt; i++)
                    for (int64_t g = 0; g < nh; g++)
                        for (int64_t e = 0; e < D; e++)
                            dq[(tg + i) * a->dqs0 + (h2 * G + h0 + g) * a->dqs1 + e * a->dqs2] =
                                SPA_STORE(0.0f);
                continue;
            }
            if (lanes < GP) { /* lanes past the group: zero (tail rows past D, DV stay 0) */
                for (int64_t x = 0; x < DP * GP; x++)
                    qt[x] = qn[x] = 0.0f;
                for (int64_t x = 0; x < DVP * GP; x++)
                    dyt[x] = dyn[x] = 0.0f;
            }
            for (int64_t l = 0; l < GP; l++) { /* padded lanes: P = 0 */
                mrow[l] = FLT_MAX;
                inv[l] = 0.0f;
                dd[l] = 0.0f;
            }
            for (int64_t i = 0; i < nt; i++)
                for (int64_t g = 0; g < nh; g++) {
                    const int64_t t = tg + i, h = h2 * G + h0 + g, l = i * nh + g;
                    const SPA_T *qr = q + t * a->qs0 + h * a->qs1;
                    lane_in2(qt + l, GP, qn + l * DP, qr, a->qs2, D);
                    const SPA_T *yr = dy + t * a->dys0 + h * a->dys1, *orow = o + t * a->os0 + h * a->os1;
                    lane_in2(dyt + l, GP, dyn + l * DVP, yr, a->dys2, DV);
                    /* D = dY . O: vector partial sums where O is unit-stride, then
                     * the rest in order (the same order for every runner) */
                    const float *yn = dyn + l * DVP;
                    float dsum = 0.0f;
                    int64_t e = 0;
                    if (a->os2 == 1 && DV >= SPA_VL) {
                        spa_vf acc = spa_vf_zero();
                        for (; e + SPA_VL <= DV; e += SPA_VL)
                            acc = spa_vf_add(acc, spa_vf_mul(spa_vf_load(yn + e), SPA_VLOAD(orow + e)));
                        dsum = spa_vf_hsum(acc);
                    }
                    for (; e < DV; e++)
                        dsum += yn[e] * SPA_LOAD(orow[e * a->os2]);
                    dd[l] = dsum;
                    mrow[l] = mx[t * a->ms0 + h * a->ms1];
                    inv[l] = 1.0f / sm[t * a->ss0 + h * a->ss1];
                }
            scores_rows(kb, a->kfr, R, qt, DP, GP, st);
            scores_rows(vb, a->vfr, R, dyt, DVP, GP, dst);
            /* the exact forms (exact_grads) where a NaN or an infinity would
             * meet a key some lane does not attend: in that key's row, or in
             * a lane's q, dy or statistics. Read off values at hand (x - x is
             * not 0 exactly for a NaN or an infinity): a lane's q through its
             * score against key 0 (q k is not finite where q is not), its dy
             * through D = dy . O, a key's row through lane 0's score; a
             * non-finite value from elsewhere (O, an overflow) only sends a
             * group to the exact forms, which give the same numbers */
            int exact = 0;
            for (int64_t l = 0; l < lanes && !exact; l++)
                exact = mrow[l] - mrow[l] != 0.0f || inv[l] - inv[l] != 0.0f || dd[l] - dd[l] != 0.0f ||
                        st[l] - st[l] != 0.0f;
            for (int64_t j = 0; j < R && j < ncmp && !exact; j++) /* past ncmp: the packing's zeros */
                for (int64_t i = 0; i < nt; i++)
                    if (!spa_nsca_attends(a, tg + i - qstart, j, vend[i], ncmp)) {
                        exact = st[j * GP] - st[j * GP] != 0.0f;
                        break;
                    }
            for (int64_t i = 0; i < nt; i++) {
                const int64_t s = tg + i - qstart;
                const uint8_t *mr = a->mask != NULL ? a->mask + s * a->mask_cols : NULL;
                for (int64_t j = 0; j < R; j++) {
                    float *row = st + j * GP + i * nh;
                    const int masked = j >= vend[i] || (mr != NULL && j < ncmp && mr[j]);
                    const int scaled = j < ncmp && !masked;
                    const float fill = spa_nsca_fill(j, vend[i], ncmp);
                    int64_t g = 0;
                    for (; g + SPA_VL <= nh; g += SPA_VL)
                        spa_vf_store(row + g, scaled ? spa_vf_mul(sv, spa_vf_load(row + g)) : spa_vf_set1(fill));
                    for (; g < nh; g++)
                        row[g] = scaled ? a->scale * row[g] : fill;
                }
            }
            for (int64_t j = 0; j < R; j++)
                for (int64_t l = lanes; l < GP; l++)
                    st[j * GP + l] = -INFINITY;
            /* P = exp(z' - m) / l */
            spa_nsas_exp_sum(st, R, GP, mrow, junk); /* m given: the clamped exp */
            for (int64_t j = 0; j < R; j++) {
                int64_t l = 0;
                for (; l + SPA_VL <= GP; l += SPA_VL)
                    spa_vf_store(st + j * GP + l, spa_vf_mul(spa_vf_load(st + j * GP + l), spa_vf_load(inv + l)));
                for (; l < GP; l++)
                    st[j * GP + l] *= inv[l];
            }
            /* dS = P (dP - D), 0 where the score is masked */
            for (int64_t i = 0; i < nt; i++) {
                const int64_t s = tg + i - qstart;
                const uint8_t *mr = a->mask != NULL ? a->mask + s * a->mask_cols : NULL;
                for (int64_t j = 0; j < R; j++) {
                    const int masked = j >= vend[i] || j >= ncmp || (mr != NULL && mr[j]);
                    float *drow = dst + j * GP + i * nh;
                    const float *prow = st + j * GP + i * nh, *ddi = dd + i * nh;
                    int64_t g = 0;
                    for (; g + SPA_VL <= nh; g += SPA_VL)
                        spa_vf_store(drow + g, masked ? spa_vf_zero()
                                                      : spa_vf_mul(spa_vf_load(prow + g),
                                                                   spa_vf_sub(spa_vf_load(drow + g), spa_vf_load(ddi + g))));
                    for (; g < nh; g++)
                        drow[g] = masked ? 0.0f : prow[g] * (drow[g] - ddi[g]);
                }
            }
            for (int64_t j = 0; j < R; j++)
                for (int64_t l = lanes; l < GP; l++)
                    dst[j * GP + l] = 0.0f;
m4_ifelse(SPA_DT, `f32', `', `m4_dnl
            spa_nsas_round(st, R * GP, bf16);
            spa_nsas_round(dst, R * GP, bf16);
')m4_dnl
            /* dQ = scale dS K */
            for (int64_t x = 0; x < DP * GP; x++)
                dqt[x] = 0.0f;
            if (exact)
                exact_grads(a, kb, a->kfr, st, dst, R, GP, vend, tg, qstart, nt, nh, ncmp, qn, dyn, dqt, dk_rows,
                            dv_rows);
            else
                accum_rows(kb, a->kfr, R, dst, DP, GP, dqt);
            for (int64_t i = 0; i < nt; i++)
                for (int64_t g = 0; g < nh; g++) {
                    const int64_t t = tg + i, h = h2 * G + h0 + g, l = i * nh + g;
                    lane_out(dq + t * a->dqs0 + h * a->dqs1, a->dqs2, dqt + l, GP, D, a->scale);
                }
            /* dK rows += dSᵀ Q, dV rows += Pᵀ dY (unscaled; lanes in order) */
            if (!exact) {
                spa_nsas_pf pf = spa_nsas_pf_rows(NULL, 0, 0, 0);
                spa_nsas_rows_add(dst, R, GP, qn, lanes, DP, dk_rows, &pf);
                spa_nsas_rows_add(st, R, GP, dyn, lanes, DVP, dv_rows, &pf);
            }
        }
    }
}
