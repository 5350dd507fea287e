SPA_STAMP
/* NsaSelectedAttention forward, a run of query tokens of one batch for one kv
 * head (spec/nsa.md 3.2). Per unit the G query heads of the group are done
 * together: S = Q Kselᵀ over the K*bs selected key rows, read TK rows at a
 * time as f32 (nsa_select_pack.h: in place, or widened once per call and kv
 * head), masked softmax in f32, P rounded to the dtype, then O = P Vsel.
 * Padding slots (-1) take no rows: the selected blocks are packed into the
 * score tile in slot order. Rows of a partial last block past the batch's
 * KV score -inf, so they weigh exactly 0 even where every visible score is
 * masked. A unit with no selected block writes O = 0, max -FLT_MAX, sum 0.
 * The head dims run to dp / dvp (multiples of 16): the query's tail lanes are
 * loaded zero-filled, the output's tail is not stored. bf16 on a layer with
 * the bf16 dot product (SPA_BF16_DOT, templates/nsa/nsa_select_dot.m4) reads
 * the rows as bf16 pairs instead where the driver packed or gathered them so
 * (a->kb: nsa_select_pack.h, nsa_select_infer.c):
 * the same steps, the two products on the dot product, P rounded to bf16
 * and paired in one pass. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "half.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_include(`templates/nsa/nsa_select_mk.m4')m4_dnl
m4_ifdef(`SPA_BF16_DOT', `', `m4_define(`SPA_BF16_DOT', 0)')m4_dnl
m4_define(`NSAS_DOT', m4_ifelse(SPA_DT`'SPA_BF16_DOT, `bf161', 1, 0))m4_dnl
m4_ifelse(NSAS_DOT, 1, `m4_include(`templates/nsa/nsa_select_dot.m4')')m4_dnl

/* The last n (< SPA_VL) elements of a caller's row: loaded zero-filled, and
 * stored, without touching the elements past them. */
m4_ifelse(SPA_DT, `f32', `m4_dnl
#define NSAS_VLOAD_TAIL(p, n) spa_vf_load_n((p), (n))
#define NSAS_VSTORE_TAIL(p, v, n) spa_vf_store_n((p), (v), (n))
', `m4_dnl
/* Element by element (the scalar conversions equal the runs, bit for bit):
 * the runs step whole vectors, which GCC cannot prove stay inside w. */
static inline spa_vf nsas_vload_tail(const SPA_T *p, int64_t n)
{
    float w[SPA_VL];
    for (int64_t k = 0; k < n; k++)
        w[k] = SPA_LOAD(p[k]);
    return spa_vf_load_n(w, n);
}
static inline void nsas_vstore_tail(SPA_T *p, spa_vf v, int64_t n)
{
    float w[SPA_VL];
    spa_vf_store(w, v);
    for (int64_t k = 0; k < n; k++)
        p[k] = SPA_STORE(w[k]);
}
#define NSAS_VLOAD_TAIL(p, n) nsas_vload_tail((p), (n))
#define NSAS_VSTORE_TAIL(p, v, n) nsas_vstore_tail((p), (v), (n))
')m4_dnl
#if defined(__GNUC__)
#define NSAS_TAIL_PATH __attribute__((noinline, cold))
#else
#define NSAS_TAIL_PATH
#endif

/* The head-dim tails of a query row (into qt, zero-filled) and of an output
 * row (from ot): out of line, so that the aligned common case compiles as
 * if they were not there. */
static NSAS_TAIL_PATH void nsas_q_tail(float *qt, int64_t gp, const SPA_T *qr, int64_t n)
{
    spa_vf_scatter(qt, gp, NSAS_VLOAD_TAIL(qr, n));
}
static NSAS_TAIL_PATH void nsas_o_tail(SPA_T *orow, const float *ot, int64_t gp, int64_t n)
{
    NSAS_VSTORE_TAIL(orow, spa_vf_gather(ot, gp), n);
}

/* A part's share of a row (spa_nsas_args.split): its output of nothing
 * selected, and its statistics. */
static void nsas_part_zero(float *po, int64_t dv)
{
    for (int64_t e = 0; e < dv; e++)
        po[e] = 0.0f;
}
static void nsas_part_stats(float *m, float *l, float mv, float lv)
{
    *m = mv, *l = lv;
}

enum { TK = NSAS_TK };
/* The rows of one call of the micro-kernels: TK, or a whole block where the
 * layer takes no prefetch hints (SPA_ISA_PREFETCH 0: the chunks only pace
 * the hints; fewer calls reload the accumulators of the transposed
 * accumulate fewer times). The sums keep their order either way. */
#define NSAS_CHUNK(bs) (SPA_ISA_PREFETCH ? (int64_t)TK : (bs))

/* The TK-row chunk c of one unit's walk (the chunks of the selected key
 * blocks in index order, then those of the value blocks), for the prefetch
 * cursor: requested while the chunk before it is computed. */
static spa_nsas_pf chunk_pf(const spa_nsas_args *a, const int32_t *ir, int64_t kstart,
                            int64_t c, const int dot)
{
    if (!SPA_ISA_PREFETCH || a->gathered) /* no hints, or the rows are a token's gathered copy */
        return spa_nsas_pf_rows(NULL, 0, 0, 0);
    const int64_t per_block = (a->bs + TK - 1) / TK, i = c / per_block, j0 = (c % per_block) * TK;
    const int64_t nr = a->bs - j0 < TK ? a->bs - j0 : TK;
    const int32_t blk = i < 2 * a->kc ? ir[(i < a->kc ? i : i - a->kc) * a->is2] : -1;
    if (blk < 0) /* past the walk, or a padding slot */
        return spa_nsas_pf_rows(NULL, 0, 0, 0);
    const int64_t row = kstart + (int64_t)blk * a->bs + j0;
    if (dot) /* bf16 pairs: key rows of dp / 2 words, value rows two to a row of dvp words */
        return i < a->kc ? spa_nsas_pf_rows(a->kb + row * a->kbr, a->kbr * 4, nr, a->dp * 2)
                         : spa_nsas_pf_rows(a->vp + row / 2 * a->vpr, a->vpr * 4, nr / 2, a->dvp * 4);
    if (i < a->kc)
        return spa_nsas_pf_rows(a->kf + row * a->kfr, a->kfr * 4, nr, a->dp * 4);
    return spa_nsas_pf_rows(a->vf + row * a->vfr, a->vfr * 4, nr, a->dvp * 4);
}

/* The forward, once with split 0 (the kernel: the split's branches folded
 * away) and once with the decode path's a->split (its own symbol). */
#if defined(__GNUC__)
#define NSAS_BODY_INLINE inline __attribute__((always_inline))
#else
#define NSAS_BODY_INLINE inline
#endif
static NSAS_BODY_INLINE void nsas_forward(const spa_nsas_args *a, int64_t h2, int64_t t0, int64_t t1,
                                           int64_t qstart, int64_t kstart, int64_t kvlen, float *scratch,
                                           const int split, const int dot)
{
    const SPA_T *q = a->q;
    SPA_T *o = a->o;
    float *mx = a->mx;
    float *sm = a->sm;
    const float *kh = a->kf, *vh = a->vf; /* the rows of kv head h2 */
    const int64_t G = a->g, GP = a->gp, D = a->d, DV = a->dv, DP = a->dp, DVP = a->dvp, BS = a->bs,
                  HC = G < 32 ? G : 32, /* heads per chunk: the micro-kernels' lanes */
                  KC = a->kc, CH = NSAS_CHUNK(a->bs), CPB = (a->bs + CH - 1) / CH;
    /* scratch (the floats phase 1 reserved): lanes of padded heads stay 0 */
    float *qt = scratch;             /* [DP][GP]  query heads, transposed (tail rows 0) */
    float *st = qt + DP * GP;        /* [K*BS][GP] scores, then P, of the selected blocks */
    float *ot = st + KC * BS * GP;   /* [DVP][GP] output heads, transposed */
    float *mrow = ot + DVP * GP;     /* [GP] max */
    float *lrow = mrow + GP;         /* [GP] sum */
    /* the per-token loops count in ptrdiff_t (one register on 32-bit cores) */
    const ptrdiff_t g_ = (ptrdiff_t)G, gp_ = (ptrdiff_t)GP, d_ = (ptrdiff_t)D, dv_ = (ptrdiff_t)DV,
                    dvp_ = (ptrdiff_t)DVP;
    /* the whole vectors of a caller's q / o row; the rest is its tail */
    const ptrdiff_t d_full = d_ / SPA_VL * SPA_VL, dv_full = dv_ / SPA_VL * SPA_VL;

    for (int64_t i = 0; i < DP * GP; i++)
        qt[i] = 0.0f;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t s = t - qstart;
        const int32_t *ir = a->idx + t * a->is0 + h2 * a->is1;
        int64_t sel = 0; /* selected (not padding) slots */
        for (int64_t i = 0; i < KC; i++)
            sel += ir[i * a->is2] >= 0;
        if (sel == 0) { /* nothing selected: O = 0, max -FLT_MAX, sum 0 (a part: its share) */
            for (ptrdiff_t g = 0; g < g_; g++) {
                const int64_t h = h2 * G + g;
                if (split == SPA_NSAS_SPLIT_FINISH)
                    nsas_part_zero((float *)a->o + t * a->os0 + h * a->os1, DV);
                if (split == SPA_NSAS_SPLIT_STATS)
                    nsas_part_stats(mx + t * a->ms0 + h * a->ms1, sm + t * a->ss0 + h * a->ss1, -FLT_MAX, 0.0f);
                if (split != 0)
                    continue;
                SPA_T *orow = o + t * a->os0 + h * a->os1;
                for (int64_t e = 0; e < DV; e++)
                    orow[e * a->os2] = SPA_STORE(0.0f);
                float *mr = mx + t * a->ms0 + h * a->ms1;
                float *sr = sm + t * a->ss0 + h * a->ss1;
                for (int64_t c = 0; c < 8; c++) {
                    mr[c * a->ms2] = -FLT_MAX;
                    sr[c * a->ss2] = 0.0f;
                }
            }
            continue;
        }
        /* the heads in chunks of at most 32 (the micro-kernels' lanes), in order */
        for (int64_t h0 = 0; h0 < G; h0 += HC) {
            const ptrdiff_t nh = (ptrdiff_t)(G - h0 < HC ? G - h0 : HC);
            const int64_t KB = sel * BS;
            float inv[32];
            if (split != SPA_NSAS_SPLIT_FINISH) { /* scores, max, exp and sum; a part's finish has them */
                if (nh < (ptrdiff_t)HC) /* a last, partial chunk: the lanes past it zero, as for a small G */
                    for (int64_t i = 0; i < DP; i++)
                        for (ptrdiff_t g = nh; g < (ptrdiff_t)HC; g++)
                            qt[i * GP + g] = 0.0f;
                for (ptrdiff_t g = 0; g < nh; g++) {
                    const SPA_T *qr = q + t * a->qs0 + (h2 * G + h0 + g) * a->qs1;
m4_ifelse(NSAS_DOT, 1, `m4_dnl
                    if (dot) { /* bf16 pairs, [DP / 2][GP] words */
                        nsas_q_pairs((uint32_t *)(void *)qt + g, GP, qr, a->qs2, D, DP);
                        continue;
                    }
')m4_dnl
                    if (a->qs2 == 1) {
                        for (ptrdiff_t d = 0; d < d_full; d += SPA_VL)
                            spa_vf_scatter(qt + d * gp_ + g, GP, SPA_VLOAD(qr + d));
                        if (d_full < d_) /* zero-filled: the tail rows of qt stay 0 */
                            nsas_q_tail(qt + d_full * gp_ + g, GP, qr + d_full, d_ - d_full);
                    } else
                        for (int64_t d = 0; d < D; d++)
                            qt[d * GP + g] = SPA_LOAD(qr[d * a->qs2]);
                }
                /* z' = scale * Q Kselᵀ in index order (duplicates included), MASKVAL
                 * (-FLT_MAX) where key position p > s, -inf past the batch's KV;
                 * m = the row max. Selected block n of the unit at rows n * BS. */
                for (int64_t l = 0; l < GP; l++)
                    mrow[l] = -FLT_MAX;
                for (int64_t i = 0, n = 0; i < KC; i++) {
                    if (ir[i * a->is2] < 0)
                        continue;
                    const int64_t p0 = (int64_t)ir[i * a->is2] * BS;
                    const float *kb = dot ? NULL : kh + (a->gathered ? n * BS : kstart + p0) * a->kfr;
                    const int64_t valid = !a->causal ? BS : s - p0 + 1 < 0 ? 0 : s - p0 + 1 > BS ? BS : s - p0 + 1;
                    const int64_t inside = kvlen - p0 < BS ? kvlen - p0 : BS;
                    for (int64_t j0 = 0; j0 < BS; j0 += CH) {
                        const int64_t nr = BS - j0 < CH ? BS - j0 : CH;
                        spa_nsas_pf pf = chunk_pf(a, ir, kstart, i * CPB + j0 / CH + 1, dot);
m4_ifelse(NSAS_DOT, 1, `m4_dnl
                        if (dot)
                            spa_nsas_scores_max_dot(a->kb + ((a->gathered ? n * BS : kstart + p0) + j0) * a->kbr, a->kbr, nr, valid - j0,
                                                    inside - j0, (const uint32_t *)(void *)qt, DP, GP, a->scale,
                                                    st + (n * BS + j0) * GP, mrow, &pf);
                        else
')m4_dnl
                        spa_nsas_scores_max(kb + j0 * a->kfr, a->kfr, nr, valid - j0, inside - j0, qt, DP, GP,
                                            a->scale, st + (n * BS + j0) * GP, mrow, &pf);
                        spa_nsas_pf_rest(&pf);
                    }
                    n++;
                }
                /* P = exp(z' - m) / l, as exp(z' - m) times one reciprocal per head */
                NSAS_EXP_SUM()(st, KB, GP, mrow, lrow);
                for (int64_t l = 0; l < GP; l++)
                    inv[l] = 1.0f / lrow[l];
                if (split == SPA_NSAS_SPLIT_STATS) { /* a part's statistics; st stays for its finish */
                    for (ptrdiff_t g = 0; g < nh; g++) {
                        const int64_t h = h2 * G + h0 + g;
                        nsas_part_stats(mx + t * a->ms0 + h * a->ms1, sm + t * a->ss0 + h * a->ss1, mrow[g], lrow[g]);
                    }
                    continue;
                }
            } else /* the row's 1/L, times exp(m - M) of this part's exps */
                for (int64_t l = 0; l < GP; l++)
                    inv[l] = a->pscale[l];
m4_ifelse(NSAS_DOT, 1, `m4_dnl
            /* P rounded to bf16 as the spec computes it, for the dot products
             * in pairs of rows (KB is a multiple of 16) */
            const uint32_t *pw = dot ? spa_nsas_scale_round_pairs(st, KB, GP, inv) : NULL;
            if (!dot)
')m4_dnl
m4_ifelse(SPA_DT, `f32', `m4_dnl
            /* f32 P needs no rounding: 1/l is applied to O instead, sparing a pass over P */
', `m4_dnl
            /* P rounded to the dtype, as the spec computes it */
            spa_nsas_scale_round(st, KB, GP, inv, m4_ifelse(SPA_DT, `bf16', 1, 0));
')m4_dnl
            /* O = P Vsel */
            for (ptrdiff_t i = 0; i < dvp_ * gp_; i++)
                ot[i] = 0.0f;
            for (int64_t i = 0, n = 0; i < KC; i++) {
                if (ir[i * a->is2] < 0)
                    continue;
                const int64_t r0 = a->gathered ? n * BS : kstart + (int64_t)ir[i * a->is2] * BS;
                const float *vb = dot ? NULL : vh + r0 * a->vfr;
                for (int64_t j0 = 0; j0 < BS; j0 += CH) {
                    const int64_t nr = BS - j0 < CH ? BS - j0 : CH;
                    spa_nsas_pf pf = chunk_pf(a, ir, kstart, (KC + i) * CPB + j0 / CH + 1, dot);
m4_ifelse(NSAS_DOT, 1, `m4_dnl
                    if (dot) /* rows r0 + j0 on: pair rows (r0 + j0) / 2 on, both even */
                        spa_nsas_accum_dot(a->vp + (r0 + j0) / 2 * a->vpr, a->vpr, nr, pw + (n * BS + j0) / 2 * GP, DVP, GP,
                                           ot, &pf);
                    else
')m4_dnl
                    spa_nsas_accum_t(vb + j0 * a->vfr, a->vfr, nr, st + (n * BS + j0) * GP, DVP, GP, ot, &pf);
                    spa_nsas_pf_rest(&pf);
                }
                n++;
            }
m4_ifelse(SPA_DT, `f32', `m4_dnl
            for (ptrdiff_t e = 0; e < dvp_; e++)
                for (ptrdiff_t l = 0; l < gp_; l += SPA_VL)
                    spa_vf_store(ot + e * gp_ + l, spa_vf_mul(spa_vf_load(ot + e * gp_ + l), spa_vf_load(inv + l)));
')m4_dnl
            for (ptrdiff_t g = 0; g < nh; g++) {
                const int64_t h = h2 * G + h0 + g;
                if (split == SPA_NSAS_SPLIT_FINISH) { /* a part's output, f32 */
                    float *po = (float *)a->o + t * a->os0 + h * a->os1;
                    for (ptrdiff_t e = 0; e < dv_; e++)
                        po[e] = ot[e * gp_ + g];
                    continue;
                }
                SPA_T *orow = o + t * a->os0 + h * a->os1;
                if (a->os2 == 1) {
                    for (ptrdiff_t e = 0; e < dv_full; e += SPA_VL)
                        SPA_VSTORE(orow + e, spa_vf_gather(ot + e * gp_ + g, GP));
                    if (dv_full < dv_)
                        nsas_o_tail(orow + dv_full, ot + dv_full * gp_ + g, GP, dv_ - dv_full);
                } else
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
}

void NSAS_KSYM()(const spa_nsas_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                 int64_t kstart, int64_t kvlen, float *scratch)
{
m4_ifelse(NSAS_DOT, 1, `m4_dnl
    if (a->kb != NULL) { /* the rows as bf16 pairs (spa_nsas_attach_head_bf16) */
        nsas_forward(a, h2, t0, t1, qstart, kstart, kvlen, scratch, 0, 1);
        return;
    }
')m4_dnl
    nsas_forward(a, h2, t0, t1, qstart, kstart, kvlen, scratch, 0, 0);
}

void NSAS_KSYM_SPLIT()(const spa_nsas_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                       int64_t kstart, int64_t kvlen, float *scratch)
{
m4_ifelse(NSAS_DOT, 1, `m4_dnl
    if (a->kb != NULL) {
        nsas_forward(a, h2, t0, t1, qstart, kstart, kvlen, scratch, a->split, 1);
        return;
    }
')m4_dnl
    nsas_forward(a, h2, t0, t1, qstart, kstart, kvlen, scratch, a->split, 0);
}
