SPA_STAMP
/* NsaCompressAttention forward, a run of query tokens of one batch for one
 * kv head (docs/nsa_compress_attention.md 2). The tokens go in lane groups:
 * up to 32 lanes, each a (query token, query head) pair of the kv head, so
 * that the register tiles of selected attention (templates/nsa/nsa_select_mk.m4,
 * key-major scores of GP lanes) are full even for small groups of heads;
 * a group of more than 32 heads goes in chunks of 32, one token at a time.
 * Per lane group: S = Q Kᵀ over the keys up to the last visible one of its
 * tokens (rounded up to 16 rows), scaled and masked (-FLT_MAX; every key
 * of a fully masked row), rows past the batch -inf, softmax in f32, the
 * group sums of P per key for the importance, P rounded to the dtype, then
 * O = P V. Then per token: the block importance and its top-K. */
#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "half.h"
#include "nsa_cattn_exact.h"
#include "nsa_cattn_kernel.h"
#include "nsa_cattn_topk.h"
#include "nsa_select_kernel.h"
#include "nsa_select_mk.h"

m4_include(`templates/nsa/nsa_select_mk.m4')m4_dnl
m4_ifdef(`SPA_BF16_DOT', `', `m4_define(`SPA_BF16_DOT', 0)')m4_dnl
m4_define(`NSAS_DOT', m4_ifelse(SPA_DT`'SPA_BF16_DOT, `bf161', 1, 0))m4_dnl
m4_ifelse(NSAS_DOT, 1, `m4_include(`templates/nsa/nsa_select_dot.m4')')m4_dnl

enum { TK = NSCA_TK };

/* Lane l of a transposed tile (col = tile + l, pitch gp) from / to a
 * caller's row: whole vectors where the row is unit-stride (strided vector
 * stores and loads), the tail element by element (the same conversions,
 * bit for bit). Element by element throughout was a quarter of the
 * forward's instructions on the 128-bit layers. */
static inline void lane_in(float *col, int64_t gp, const SPA_T *row, int64_t stride, int64_t n)
{
    int64_t d = 0;
    if (stride == 1)
        for (; d + SPA_VL <= n; d += SPA_VL)
            spa_vf_scatter(col + d * gp, gp, SPA_VLOAD(row + d));
    for (; d < n; d++)
        col[d * gp] = SPA_LOAD(row[d * stride]);
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

/* The 8 equal lanes of a statistic: vector stores where they are contiguous
 * and whole vectors. */
static inline void stat_out(float *p, int64_t stride, float v)
{
    if (stride == 1 && 8 % SPA_VL == 0) {
        for (int64_t c = 0; c < 8; c += SPA_VL)
            spa_vf_store(p + c, spa_vf_set1(v));
        return;
    }
    for (int64_t c = 0; c < 8; c++)
        p[c * stride] = v;
}

/* Rows [0, rows) of a group in micro-steps of TK: scores of the keys kb
 * against qt into st. */
static void scores_rows(const float *kb, int64_t kfr, int64_t rows, const float *qt, int64_t dp,
                        int64_t gp, float *st)
{
    for (int64_t j0 = 0; j0 < rows; j0 += TK) {
        const int64_t nr = rows - j0 < TK ? rows - j0 : TK;
        spa_nsas_pf pf = spa_nsas_pf_rows(j0 + TK < rows ? kb + (j0 + TK) * kfr : NULL, kfr * 4,
                                          rows - j0 - TK < TK ? rows - j0 - TK : TK, dp * 4);
        spa_nsas_scores_pitch(kb + j0 * kfr, kfr, nr, qt, dp, gp, st + j0 * gp, &pf);
        spa_nsas_pf_rest(&pf);
    }
}

/* A part read in place (a->pages, split builds): the first of the rows
 * j .. j + *n - 1 (j a multiple of 16) that lie at the pitch from there,
 * in the cache's dtype, *n <= want (a multiple of 16); which: 0 keys, 1
 * values. */
static const SPA_T *part_run(const spa_nsca_args *a, int which, int64_t j, int64_t want, int64_t *n)
{
    const spa_nsca_pages *pg = a->pages;
    const int64_t pitch = which ? a->vfr : a->kfr;
    if (j >= pg->rows) { /* the part's last keys, staged in the scratch */
        *n = want;
        return (const SPA_T *)(const void *)(which ? a->vf : a->kf) + (j - pg->rows) * pitch;
    }
    const int64_t p = a->key0 + j, left = pg->rows - j;
    const SPA_T *base = (const SPA_T *)(which ? pg->v : pg->k);
    if (pg->table == NULL) {
        *n = want < left ? want : left;
        return base + p * pitch;
    }
    const int64_t entry = pg->table[(p / pg->page_size) * pg->tstride], in_page = p % pg->page_size;
    if (entry < 0 || entry >= pg->pages) { /* rewritten since phase 2 checked it: zeros */
        *n = 16;
        return (const SPA_T *)(which ? pg->vzero : pg->kzero);
    }
    const int64_t in_run = pg->page_size - in_page < left ? pg->page_size - in_page : left;
    *n = want < in_run ? want : in_run;
    return base + entry * (which ? pg->vs0 : pg->ks0) + in_page * pitch;
}

m4_ifelse(SPA_DT, `f32', `m4_dnl
/* The rows a part reads in place at a time: the whole run (f32). */
#define NSCA_RUN_MAX(left) (left)

/* Rows [0, n) of a run as f32 rows: the run itself, at its pitch. */
static inline const float *run_f32(const float *run, int64_t pitch, int64_t n, int64_t width, float *chunk,
                                   int64_t *fr)
{
    (void)n, (void)width, (void)chunk;
    *fr = pitch;
    return run;
}
', `m4_dnl
/* The rows a part reads in place at a time: 16, widened into an L1-sized
 * chunk just before the tile reads them, so that reading the cache overlaps
 * the arithmetic instead of preceding it (a whole part widened into the
 * scratch first cost a third of a decode step). */
#define NSCA_RUN_MAX(left) ((left) < 16 ? (left) : 16)

/* Rows [0, n) of a run (n <= 16, width a multiple of 16) widened into chunk
 * at pitch width: the same f32 values as the widening gather. */
static inline const float *run_f32(const SPA_T *run, int64_t pitch, int64_t n, int64_t width, float *chunk,
                                   int64_t *fr)
{
    for (int64_t r = 0; r < n; r++)
        for (int64_t e = 0; e < width; e += SPA_VL)
            spa_vf_store(chunk + r * width + e, SPA_VLOAD(run + r * pitch + e));
    *fr = width;
    return chunk;
}
')m4_dnl

/* Value row j: at vb, or where a part reads it in place (widened into the
 * value chunk for the 16-bit dtypes: used before the next call). */
static inline const float *value_row(const spa_nsca_args *a, const float *vb, int64_t j, int in_place)
{
    if (!SPA_CATTN_INFER_IN_PLACE || !in_place)
        return vb + j * a->vfr;
    int64_t n, fr;
    const SPA_T *run = part_run(a, 1, j - j % 16, 16, &n) + (j % 16) * a->vfr;
    return run_f32(run, a->vfr, 1, a->dvp, a->pages->vchunk, &fr);
}

/* scores_rows over R rows (a multiple of 16), in place where the part is. */
static void scores_part(const spa_nsca_args *a, const float *kb, int64_t R, const float *qt, int64_t dp,
                        int64_t gp, float *st, int in_place)
{
    if (!SPA_CATTN_INFER_IN_PLACE || !in_place) {
        scores_rows(kb, a->kfr, R, qt, dp, gp, st);
        return;
    }
    for (int64_t j = 0, n = 0; j < R; j += n) {
        const SPA_T *run = part_run(a, 0, j, NSCA_RUN_MAX(R - j), &n); /* before n is read */
        int64_t fr;
        const float *rows = run_f32(run, a->kfr, n, dp, a->pages->kchunk, &fr);
m4_ifelse(SPA_DT, `f32', `m4_dnl
        scores_rows(rows, fr, n, qt, dp, gp, st + j * gp);
', `m4_dnl
        /* the next run requested while this one is computed */
        int64_t nn;
        spa_nsas_pf pf = spa_nsas_pf_rows(j + n < R ? part_run(a, 0, j + n, 16, &nn) : NULL, a->kfr * SPA_SZ, 16,
                                          dp * SPA_SZ);
        spa_nsas_scores_pitch(rows, fr, n, qt, dp, gp, st + j * gp, &pf);
        spa_nsas_pf_rest(&pf);
')m4_dnl
    }
}

/* ot[e][l] += sum_j vb[j][e] * st[j][l], j < rows, in micro-steps of TK. */
static void pv_rows(const float *vb, int64_t vfr, int64_t rows, const float *st, int64_t dvp,
                    int64_t gp, float *ot)
{
    for (int64_t j0 = 0; j0 < rows; j0 += TK) {
        const int64_t nr = rows - j0 < TK ? rows - j0 : TK;
        spa_nsas_pf pf = spa_nsas_pf_rows(j0 + TK < rows ? vb + (j0 + TK) * vfr : NULL, vfr * 4,
                                          rows - j0 - TK < TK ? rows - j0 - TK : TK, dvp * 4);
        spa_nsas_accum_t(vb + j0 * vfr, vfr, nr, st + j0 * gp, dvp, gp, ot, &pf);
        spa_nsas_pf_rest(&pf);
    }
}

/* pv_rows over R rows (a multiple of 16), in place where the part is. */
static void pv_part(const spa_nsca_args *a, const float *vb, int64_t R, const float *st, int64_t dvp,
                    int64_t gp, float *ot, int in_place)
{
    if (!SPA_CATTN_INFER_IN_PLACE || !in_place) {
        pv_rows(vb, a->vfr, R, st, dvp, gp, ot);
        return;
    }
    for (int64_t j = 0, n = 0; j < R; j += n) {
        const SPA_T *run = part_run(a, 1, j, NSCA_RUN_MAX(R - j), &n); /* before n is read */
        int64_t fr;
        const float *rows = run_f32(run, a->vfr, n, dvp, a->pages->vchunk, &fr);
m4_ifelse(SPA_DT, `f32', `m4_dnl
        pv_rows(rows, fr, n, st + j * gp, dvp, gp, ot);
', `m4_dnl
        int64_t nn;
        spa_nsas_pf pf = spa_nsas_pf_rows(j + n < R ? part_run(a, 1, j + n, 16, &nn) : NULL, a->vfr * SPA_SZ, 16,
                                          dvp * SPA_SZ);
        spa_nsas_accum_t(rows, fr, n, st + j * gp, dvp, gp, ot, &pf);
        spa_nsas_pf_rest(&pf);
')m4_dnl
    }
}

m4_ifelse(NSAS_DOT, 1, `m4_dnl
/* The bf16 dot-product forms (a->kb, a->vp: the rows of the kv head as bf16
 * pairs, spa_nsca_attach_head_bf16, or as the inference op gathers them):
 * scores_rows and pv_rows on the pairs, in the same micro-steps. */
static void scores_rows_dot(const uint32_t *kb, int64_t kbr, int64_t rows, const uint32_t *qt, int64_t dp,
                            int64_t gp, float *st)
{
    for (int64_t j0 = 0; j0 < rows; j0 += TK) {
        const int64_t nr = rows - j0 < TK ? rows - j0 : TK;
        spa_nsas_pf pf = spa_nsas_pf_rows(j0 + TK < rows ? kb + (j0 + TK) * kbr : NULL, kbr * 4,
                                          rows - j0 - TK < TK ? rows - j0 - TK : TK, dp * 2);
        spa_nsas_scores_dot(kb + j0 * kbr, kbr, nr, qt, dp, gp, st + j0 * gp, &pf);
        spa_nsas_pf_rest(&pf);
    }
}

/* vp: the value rows from the first of the group, in pairs of rows (vpr words a
 * pair row); pw: P in pairs of rows. rows a multiple of 16, as TK. */
static void pv_rows_dot(const uint32_t *vp, int64_t vpr, int64_t rows, const uint32_t *pw, int64_t dvp,
                        int64_t gp, float *ot)
{
    for (int64_t j0 = 0; j0 < rows; j0 += TK) {
        const int64_t nr = rows - j0 < TK ? rows - j0 : TK;
        spa_nsas_pf pf = spa_nsas_pf_rows(j0 + TK < rows ? vp + (j0 + TK) / 2 * vpr : NULL, vpr * 4,
                                          (rows - j0 - TK < TK ? rows - j0 - TK : TK) / 2, dvp * 4);
        spa_nsas_accum_dot(vp + j0 / 2 * vpr, vpr, nr, pw + j0 / 2 * gp, dvp, gp, ot, &pf);
        spa_nsas_pf_rest(&pf);
    }
}

/* Element e of value row j (from the first of the group) of the pairs, as f32. */
static inline float value_pair_elem(const uint32_t *vp, int64_t vpr, int64_t j, int64_t e)
{
    const uint32_t w = vp[j / 2 * vpr + e];
    return spa_bf16_to_f32((uint16_t)(j % 2 ? w >> 16 : w & 0xffffu));
}

/* Whether value row j of the pairs holds a NaN or an infinity (the bf16
 * exponent all ones), as spa_nsca_row_nonfinite of its widened row. */
static int value_pair_nonfinite(const uint32_t *vp, int64_t vpr, int64_t j, int64_t dvp)
{
    const uint32_t *w = vp + j / 2 * vpr;
    const unsigned shift = j % 2 ? 16u : 0u;
    for (int64_t e = 0; e < dvp; e++)
        if ((w[e] >> shift & 0x7f80u) == 0x7f80u)
            return 1;
    return 0;
}

/* exact_pv on the pairs (f32 P in st). */
SPA_NSCA_COLD static void exact_pv_dot(const spa_nsca_args *a, const uint32_t *vp, const float *st, int64_t R,
                                       int64_t gp, const int64_t *vend, int64_t tg, int64_t qstart, int64_t nt,
                                       int64_t nh, int64_t ncmp, int64_t dv, float *ot)
{
    for (int64_t l = 0; l < nt * nh; l++) {
        const int64_t i = l / nh;
        for (int64_t j = 0; j < R; j++)
            if (spa_nsca_attends(a, tg + i - qstart, j, vend[i], ncmp))
                for (int64_t e = 0; e < dv; e++)
                    ot[e * gp + l] += st[j * gp + l] * value_pair_elem(vp, a->vpr, j, e);
    }
}

')m4_dnl
/* The exact forms of the importance sums and of O = P V for a lane group
 * where a key some lane does not attend holds a NaN or an infinity, or a
 * row's softmax is NaN: the tiles would multiply those keys by a weight of 0
 * (0 * NaN is NaN), so each lane takes only the keys it attends. Lanes in
 * order, keys ascending; never met on finite inputs. */
SPA_NSCA_COLD static void exact_colsum(const spa_nsca_args *a, const float *st, int64_t R, int64_t gp,
                                       const float *inv, const int64_t *vend, int64_t tg, int64_t qstart,
                                       int64_t nt, int64_t nh, int64_t ncmp, int64_t tqp, float *colsum)
{
    for (int64_t j = 0; j < R && j < ncmp; j++)
        for (int64_t i = 0; i < nt; i++)
            if (spa_nsca_attends(a, tg + i - qstart, j, vend[i], ncmp))
                for (int64_t g = 0; g < nh; g++)
                    colsum[j * tqp + i] += st[j * gp + i * nh + g] * inv[i * nh + g];
}

SPA_NSCA_COLD static void exact_pv(const spa_nsca_args *a, const float *vb, int in_place, const float *st,
                                   int64_t R, int64_t gp, const int64_t *vend, int64_t tg, int64_t qstart,
                                   int64_t nt, int64_t nh, int64_t ncmp, int64_t dv, float *ot)
{
    for (int64_t l = 0; l < nt * nh; l++) {
        const int64_t i = l / nh;
        for (int64_t j = 0; j < R; j++)
            if (spa_nsca_attends(a, tg + i - qstart, j, vend[i], ncmp)) {
                const float *vr = value_row(a, vb, j, in_place);
                for (int64_t e = 0; e < dv; e++)
                    ot[e * gp + l] += st[j * gp + l] * vr[e];
            }
    }
}

/* Whether value row j (a kernel row from kstart) holds a NaN or an
 * infinity: on the pairs (dot) or on its f32 row. */
static inline int value_nonfinite(const spa_nsca_args *a, const float *vb, int64_t kstart, int64_t j, int in_place,
                                  int dot)
{
m4_ifelse(NSAS_DOT, 1, `m4_dnl
    if (dot)
        return value_pair_nonfinite(a->vp + kstart / 2 * a->vpr, a->vpr, j, a->dvp);
', `m4_dnl
    (void)kstart, (void)dot;
')m4_dnl
    return spa_nsca_row_nonfinite(value_row(a, vb, j, in_place), a->dvp);
}

/* Whether a key some token does not attend holds a NaN or an infinity in
 * its value row (the test of the scoring pass, for a part's finish). */
static int masked_nonfinite(const spa_nsca_args *a, const float *vb, int64_t kstart, int64_t R, int64_t tg,
                            int64_t qstart, int64_t nt, const int64_t *vend, int64_t ncmp, int dot)
{
    for (int64_t j = 0; j < R && j < ncmp; j++)
        for (int64_t i = 0; i < nt; i++)
            if (!spa_nsca_attends(a, tg + i - qstart, j, vend[i], ncmp)) {
                if (value_nonfinite(a, vb, kstart, j, a->pages != NULL, dot))
                    return 1;
                break;
            }
    return 0;
}

/* The forward, once with split 0 (the kernel: the split's branches folded
 * away) and once with the inference op's a->split (its own symbol). */
#if defined(__GNUC__)
#define NSCA_BODY_INLINE inline __attribute__((always_inline))
#else
#define NSCA_BODY_INLINE inline
#endif
static NSCA_BODY_INLINE void nsca_forward(const spa_nsca_args *a, int64_t h2, int64_t t0, int64_t t1,
                                           int64_t qstart, int64_t qend, int64_t kstart, int64_t ncmp,
                                           float *scratch, const int split, const int dot)
{
    const SPA_T *q = a->q;
    SPA_T *o = a->o;
    int64_t ms0, ms1, mshift, ss0, ss1, sshift;
    spa_nsca_stat_view(a, a->ms0, a->ms1, qstart, qend, &ms0, &ms1, &mshift);
    spa_nsca_stat_view(a, a->ss0, a->ss1, qstart, qend, &ss0, &ss1, &sshift);
    float *mx = (float *)a->mx + mshift, *sm = (float *)a->sm + sshift;
    const int64_t G = a->g, HC = a->hc, TQ = a->tq, GP = a->gp, D = a->d, DV = a->dv, DP = a->dp,
                  DVP = a->dvp, RMAX = a->rows_max;
    /* the f32 rows (NULL on the dot product's pairs, a->kb / a->vp) */
    const float *kb = dot ? NULL : a->kf + kstart * a->kfr, *vb = dot ? NULL : a->vf + kstart * a->vfr;
    const int in_place = split && a->pages != NULL; /* 0 in the kernel's own build */
    /* scratch (the floats phase 1 reserved) */
    float *qt = scratch;            /* [DP][GP] query lanes, transposed */
    float *st = qt + DP * GP;       /* [RMAX][GP] scores, then P */
    float *ot = st + RMAX * GP;     /* [DVP][GP] output lanes, transposed */
    float *mrow = ot + DVP * GP;    /* [GP] max */
    float *lrow = mrow + GP;        /* [GP] sum */
    float *inv = lrow + GP;         /* [GP] 1 / sum */
    const int64_t TQP = TQ <= 16 ? 16 : 32;
    float *sel = inv + GP;          /* [32][TQP] lane -> token selector (1/l) */
    float *colsum = sel + 32 * TQP; /* [RMAX][TQP] P summed over the heads of a token */
    double *imp = (double *)(void *)(colsum + TQP * RMAX); /* [sel_max] importance */
    double *topv = imp + a->sel_max;                     /* [K] */
    int32_t *topi = (int32_t *)(void *)(topv + a->kc);  /* [K] */
    const int bf16 = m4_ifelse(SPA_DT, `bf16', 1, 0);
    (void)bf16, (void)dot;

    for (int64_t x = 0; x < DP * GP; x++)
        qt[x] = 0.0f;
    for (int64_t tg = t0; tg < t1; tg += TQ) {
        const int64_t nt = t1 - tg < TQ ? t1 - tg : TQ;
        int64_t vend[32], rows = 0;
        for (int64_t i = 0; i < nt; i++) {
            vend[i] = spa_nsca_visible_end(a, tg + i - qstart, ncmp);
            const int64_t r = vend[i] > 0 ? vend[i] : ncmp; /* fully masked: every key */
            rows = r > rows ? r : rows;
        }
        for (int64_t x = 0; x < RMAX * TQP; x++)
            colsum[x] = 0.0f;
        const int64_t R = (rows + 15) / 16 * 16;
        for (int64_t h0 = 0; h0 < G; h0 += HC) {
            const int64_t nh = G - h0 < HC ? G - h0 : HC, lanes = nt * nh;
            if (ncmp == 0) { /* no key: O = 0, max -FLT_MAX, sum 0 */
                for (int64_t i = 0; i < nt; i++)
                    for (int64_t g = 0; g < nh; g++) {
                        const int64_t t = tg + i, h = h2 * G + h0 + g;
                        for (int64_t e = 0; e < DV; e++)
                            o[t * a->os0 + h * a->os1 + e * a->os2] = SPA_STORE(0.0f);
                        for (int64_t c = 0; c < 8; c++) {
                            mx[t * ms0 + h * ms1 + c * a->ms2] = -FLT_MAX;
                            sm[t * ss0 + h * ss1 + c * a->ss2] = 0.0f;
                        }
                    }
                continue;
            }
            int exact = 0; /* take the exact forms (exact_colsum, exact_pv) */
            if (split != SPA_NSAS_SPLIT_FINISH) { /* scores, max, exp and sum; a part's finish has them */
                if (lanes < GP) /* lanes past the group: zero (the tail rows past D stay 0) */
                    for (int64_t x = 0; x < DP * GP; x++)
                        qt[x] = 0.0f;
                for (int64_t i = 0; i < nt; i++)
                    for (int64_t g = 0; g < nh; g++) {
                        const SPA_T *qr = q + (tg + i) * a->qs0 + (h2 * G + h0 + g) * a->qs1;
m4_ifelse(NSAS_DOT, 1, `m4_dnl
                        if (dot) { /* bf16 pairs, [DP / 2][GP] words */
                            nsas_q_pairs((uint32_t *)(void *)qt + i * nh + g, GP, qr, a->qs2, D, DP);
                            continue;
                        }
')m4_dnl
                        lane_in(qt + i * nh + g, GP, qr, a->qs2, D);
                    }
m4_ifelse(NSAS_DOT, 1, `m4_dnl
                if (dot)
                    scores_rows_dot(a->kb + kstart * a->kbr, a->kbr, R, (const uint32_t *)(void *)qt, DP, GP, st);
                else
')m4_dnl
                scores_part(a, kb, R, qt, DP, GP, st, in_place);
                /* z' = scale * s, MASKVAL where masked, -inf past the keys, and
                 * the max of each lane: whole rows of lanes where no token of the
                 * group masks the key, lane by lane otherwise */
                {
                    const spa_vf sv = spa_vf_set1(a->scale);
                    for (int64_t l = 0; l < GP; l += SPA_VL)
                        spa_vf_store(mrow + l, spa_vf_set1(-FLT_MAX));
                    for (int64_t j = 0; j < R; j++) {
                        float *row = st + j * GP;
                        int clean = j < ncmp;
                        for (int64_t i = 0; i < nt && clean; i++)
                            clean = !spa_nsca_masked(a, tg + i - qstart, j, vend[i]);
                        if (clean) {
                            for (int64_t l = 0; l < GP; l += SPA_VL) {
                                const spa_vf z = spa_vf_mul(sv, spa_vf_load(row + l));
                                spa_vf_store(row + l, z);
                                spa_vf_store(mrow + l, spa_vf_max(spa_vf_load(mrow + l), z));
                            }
                            continue;
                        }
                        /* a key past some token's visible end: its value must
                         * not reach that token's lanes (exact_pv); the rows past
                         * the batch's keys are the packing's zeros */
                        for (int64_t i = 0; i < nt && !exact && j < ncmp; i++)
                            if (!spa_nsca_attends(a, tg + i - qstart, j, vend[i], ncmp)) {
                                exact = value_nonfinite(a, vb, kstart, j, in_place, dot);
                                break;
                            }
                        /* per token: its heads in whole vectors, then one by one */
                        for (int64_t i = 0; i < nt; i++) {
                            const int masked = spa_nsca_masked(a, tg + i - qstart, j, vend[i]);
                            const float fill = spa_nsca_fill(j, vend[i], ncmp);
                            const int scaled = j < ncmp && !masked;
                            int64_t g = 0;
                            for (; g + SPA_VL <= nh; g += SPA_VL) {
                                const int64_t l = i * nh + g;
                                const spa_vf z = scaled ? spa_vf_mul(sv, spa_vf_load(row + l)) : spa_vf_set1(fill);
                                spa_vf_store(row + l, z);
                                spa_vf_store(mrow + l, spa_vf_max(spa_vf_load(mrow + l), z));
                            }
                            for (; g < nh; g++) {
                                const int64_t l = i * nh + g;
                                const float z = scaled ? a->scale * row[l] : fill;
                                row[l] = z;
                                mrow[l] = z > mrow[l] ? z : mrow[l];
                            }
                        }
                    }
                }
                for (int64_t l = lanes; l < GP; l++) { /* padded lanes: finite, never stored */
                    mrow[l] = 0.0f;
                    for (int64_t j = 0; j < R; j++)
                        st[j * GP + l] = 0.0f;
                }
                NSAS_EXP_SUM()(st, R, GP, mrow, lrow);
                for (int64_t l = 0; l < GP; l++)
                    inv[l] = 1.0f / lrow[l];
                if (split == SPA_NSAS_SPLIT_STATS) { /* a part's statistics; st stays for its finish */
                    for (int64_t l = 0; l < lanes; l++)
                        a->part_m[l] = mrow[l], a->part_l[l] = lrow[l];
                    continue;
                }
            } else { /* the row's 1/L, times exp(m - M) of this part's exps */
                exact = masked_nonfinite(a, vb, kstart, R, tg, qstart, nt, vend, ncmp, dot);
                for (int64_t l = 0; l < GP; l++)
                    inv[l] = a->pscale[l];
            }
            /* a NaN row (or all its scores -inf): 0 * 1/l is NaN (the padded
             * lanes' 1/l is finite) */
            exact = exact || spa_nsca_row_nonfinite(inv, GP);
            /* the importance sums colsum[j][i] += sum over the heads g of token
             * i of P[j][i*nh + g]: where the heads of a token fill whole
             * vectors, P times 1/l summed across them; otherwise a row update
             * of P against the selector sel[lane][i] = 1/l of the lane where
             * the lane belongs to token i, else 0 (heads in order) */
            if (exact) {
                exact_colsum(a, st, R, GP, inv, vend, tg, qstart, nt, nh, ncmp, TQP, colsum);
            } else if (nh % SPA_VL == 0) { /* tokens on whole vectors: a horizontal sum per token and key */
                const int64_t jn = R < ncmp ? R : ncmp;
                for (int64_t j = 0; j < jn; j++)
                    for (int64_t i = 0; i < nt; i++) {
                        const float *row = st + j * GP + i * nh, *iv = inv + i * nh;
                        spa_vf acc = spa_vf_mul(spa_vf_load(row), spa_vf_load(iv));
                        for (int64_t g = SPA_VL; g < nh; g += SPA_VL)
                            acc = spa_vf_add(acc, spa_vf_mul(spa_vf_load(row + g), spa_vf_load(iv + g)));
                        colsum[j * TQP + i] += spa_vf_hsum(acc);
                    }
            } else {
                for (int64_t x = 0; x < lanes * TQP; x++)
                    sel[x] = 0.0f;
                for (int64_t l = 0; l < lanes; l++)
                    sel[l * TQP + l / nh] = inv[l];
                spa_nsas_pf none = spa_nsas_pf_rows(NULL, 0, 0, 0);
                spa_nsas_rows_add(st, R, GP, sel, lanes, TQP, colsum, &none);
            }
            if (split == SPA_NSAS_SPLIT_FINISH) /* the part's keys of the unit's importance sums */
                for (int64_t x = 0; x < ncmp * TQP; x++) /* past R: the zeros of colsum */
                    a->part_colsum[x] = colsum[x];
m4_ifelse(SPA_DT, `f32', `m4_dnl
            /* f32 P needs no rounding: 1/l is applied to O instead */
', `m4_dnl
            /* P rounded to the dtype, as the spec computes it */
m4_ifelse(NSAS_DOT, 1, `m4_dnl
            /* (and paired, in pairs of rows, for the dot product: R is a
             * multiple of 16; the exact form reads P as f32) */
            const uint32_t *pw = dot && !exact ? spa_nsas_scale_round_pairs(st, R, GP, inv) : NULL;
            if (pw == NULL)
')m4_dnl
            spa_nsas_scale_round(st, R, GP, inv, bf16);
')m4_dnl
            for (int64_t x = 0; x < DVP * GP; x++)
                ot[x] = 0.0f;
m4_ifelse(NSAS_DOT, 1, `m4_dnl
            if (dot) {
                const uint32_t *vp = a->vp + kstart / 2 * a->vpr;
                if (exact)
                    exact_pv_dot(a, vp, st, R, GP, vend, tg, qstart, nt, nh, ncmp, DV, ot);
                else
                    pv_rows_dot(vp, a->vpr, R, pw, DVP, GP, ot);
            } else
')m4_dnl
            if (exact)
                exact_pv(a, vb, in_place, st, R, GP, vend, tg, qstart, nt, nh, ncmp, DV, ot);
            else
                pv_part(a, vb, R, st, DVP, GP, ot, in_place);
            if (split == SPA_NSAS_SPLIT_FINISH) { /* the part's output, f32 */
                for (int64_t l = 0; l < lanes; l++)
                    for (int64_t e = 0; e < DV; e++)
                        a->part_o[l * DV + e] = ot[e * GP + l] * m4_ifelse(SPA_DT, `f32', `inv[l]', `1.0f');
                continue;
            }
            for (int64_t i = 0; i < nt; i++)
                for (int64_t g = 0; g < nh; g++) {
                    const int64_t t = tg + i, h = h2 * G + h0 + g, l = i * nh + g;
                    lane_out(o + t * a->os0 + h * a->os1, a->os2, ot + l, GP, DV,
                             m4_ifelse(SPA_DT, `f32', `inv[l]', `1.0f'));
                    stat_out(mx + t * ms0 + h * ms1, a->ms2, mrow[l]);
                    stat_out(sm + t * ss0 + h * ss1, a->ss2, lrow[l]);
                }
        }
        if (split) /* a part: its driver ranks the blocks */
            continue;
        /* importance and top-K per token */
        for (int64_t i = 0; i < nt; i++) {
            const int64_t t = tg + i, s = t - qstart;
            const uint8_t *tm = a->tmask != NULL ? a->tmask + s * a->tmask_cols : NULL;
            spa_nsca_token_topk(a, colsum + i, TQP, ncmp, tm, imp, topv, topi, a->topk + t * a->ts0 + h2 * a->ts1,
                                a->ts2);
        }
    }
}

void NSCA_KSYM()(const spa_nsca_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                 int64_t qend, int64_t kstart, int64_t ncmp, float *scratch)
{
m4_ifelse(NSAS_DOT, 1, `m4_dnl
    if (a->kb != NULL) { /* the rows as bf16 pairs (spa_nsca_attach_head_bf16) */
        nsca_forward(a, h2, t0, t1, qstart, qend, kstart, ncmp, scratch, 0, 1);
        return;
    }
')m4_dnl
    nsca_forward(a, h2, t0, t1, qstart, qend, kstart, ncmp, scratch, 0, 0);
}

void NSCA_KSYM_SPLIT()(const spa_nsca_args *a, int64_t h2, int64_t t0, int64_t t1, int64_t qstart,
                       int64_t qend, int64_t kstart, int64_t ncmp, float *scratch)
{
m4_ifelse(NSAS_DOT, 1, `m4_dnl
    if (a->kb != NULL) { /* a part gathered as bf16 pairs (nsa_compress_attention_infer.c) */
        nsca_forward(a, h2, t0, t1, qstart, qend, kstart, ncmp, scratch, a->split, 1);
        return;
    }
')m4_dnl
    nsca_forward(a, h2, t0, t1, qstart, qend, kstart, ncmp, scratch, a->split, 0);
}
