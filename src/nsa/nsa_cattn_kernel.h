/* Contract between src/nsa_cattn*.c and the generated kernels of
 * templates/nsa_compress_attention*.c.m4 (and templates/f64/). All strides
 * are in elements. */
#ifndef SPA_NSA_CATTN_KERNEL_H
#define SPA_NSA_CATTN_KERNEL_H

#include <stdint.h>

/* A part of the inference op read where it lies in the cache
 * (nsa_compress_attention_infer.c, split builds of the kernels only): kernel
 * row r < rows (a multiple of 16) is key key0 + r of the batch, in page
 * table[(key0 + r) / page_size] (the table row is untrusted: read, checked
 * against pages, each time a run of rows is taken; an entry that is not a
 * page reads 16 rows of zeros) at row (key0 + r) % page_size, or of the one
 * page k / v where table is NULL (a contiguous cache); the rows from `rows`
 * on are the part's last keys, zero-padded, staged at kf / vf. Every row is
 * in the kernel's dtype (kf / vf then hold that dtype too), at pitch kfr /
 * vfr. The 16-bit dtypes widen 16 rows at a time into kchunk / vchunk (16
 * rows of dp / dvp floats). */
/* 1: the inference op's parts read their rows where they lie
 * (spa_nsca_pages); 0 (a target's choice: the bare-metal ones, whose stack
 * budget the extra frames would cross) widens them into the scratch. */
#ifndef SPA_CATTN_INFER_IN_PLACE
#define SPA_CATTN_INFER_IN_PLACE 1
#endif
typedef struct spa_nsca_pages {
    const void *k, *v;          /* element 0 of the kv head in page 0 (or of the batch) */
    int64_t ks0, vs0;           /* page strides */
    const int32_t *table;       /* the batch's block-table row, or NULL */
    int64_t tstride, page_size, pages;
    int64_t rows;
    const void *kzero, *vzero;  /* 16 rows of zeros at pitch kfr / vfr */
    float *kchunk, *vchunk;     /* 16-bit dtypes: 16 widened rows */
} spa_nsca_pages;

typedef struct spa_nsca_args {
    const void *q; /* query [T1, N1, D1] */
    int64_t qs0, qs1, qs2;
    const float *kf; /* f32 kernels: compressed key rows of the kv head being
                      * run, as f32, kernel row r at kf + r * kfr (dp floats,
                      * tail 0; each batch rounded up to 16 rows of zeros) */
    int64_t kfr;
    const float *vf; /* value rows of that head, the same way */
    int64_t vfr;
    /* The bf16 forward on a layer with the bf16 dot product
     * (SPA_ISA_BF16_DOT: spa_nsca_attach_head_bf16, or the inference op's
     * gather; never with pages): kb non-NULL, kf / vf NULL, and the rows as
     * bf16 pairs, one word each, the first element in its low half: key row
     * r at kb + r * kbr (dp / 2 words), value rows 2i and 2i + 1 interleaved
     * in the pair row i of dvp words at vp + i * vpr (element e of both in
     * word e). */
    const uint32_t *kb;
    int64_t kbr;
    const uint32_t *vp;
    int64_t vpr;
    const void *k, *v; /* float64 kernels: the caller's key / value, in place */
    int64_t ks0, ks1, ks2, vs0, vs1, vs2;
    void *o; /* attentionOut [T1, N1, D2]: forward writes, grad reads */
    int64_t os0, os1, os2;
    void *mx; /* softmaxMax [T1, N1, 8] (f32; f64 for f64) */
    int64_t ms0, ms1, ms2;
    void *sm; /* softmaxSum, the same */
    int64_t ss0, ss1, ss2;
    int32_t *topk; /* forward: topkIndices [T1, N2, K] */
    int64_t ts0, ts1, ts2;
    const void *dy; /* grad: attentionOutGrad [T1, N1, D2] */
    int64_t dys0, dys1, dys2;
    void *dq; /* grad: dqOut [T1, N1, D1] */
    int64_t dqs0, dqs1, dqs2;
    const uint8_t *mask;  /* trusted 0/1 copy of atten_mask [max_sq][mask_cols], or NULL */
    int64_t mask_cols;
    const uint8_t *tmask; /* trusted 0/1 copy of topk_mask [max_sq][tmask_cols], or NULL */
    int64_t tmask_cols;
    int64_t g;       /* query heads per kv head */
    int64_t hc;      /* heads per lane chunk (min(g, 32)) */
    int64_t tq;      /* query tokens per lane group (32 / hc, at least 1) */
    int64_t gp;      /* lanes tq * hc padded to 8, 16 or 32 */
    int64_t d, dv;   /* head dims */
    int64_t dp, dvp; /* rounded up to 16 */
    int64_t cmp_block, cmp_stride; /* l, d: the causal rule of sparse_mode 2 */
    int64_t msel, nn; /* l'/d and l/d: the importance window */
    int64_t kc;       /* selectBlockCount K */
    int64_t rows_max; /* scratch rows: the longest batch's keys rounded up to 16 */
    int64_t sel_max;  /* scratch slots: the longest batch's selection blocks */
    int64_t n1;       /* query heads */
    int causal;
    int64_t pos_shift; /* the causal rule's position of a batch's first query:
                        * 0, or the inference op's L_b - S_b (bottom-right) */
    int infer_sel;     /* the inference op's selection (spa_nsca_nsel,
                        * spa_nsca_importance): its block count and forced blocks */
    int stats_batch_major; /* softmaxMax / Sum in CANN's physical order (nsa_cattn_acl.h) */
    /* The inference op's parts (nsa_compress_attention_infer.c): a unit's
     * keys split into parts, each run twice on its block's scratch, for one
     * lane group of one chunk of heads. split SPA_NSAS_SPLIT_STATS: the
     * part's scores, max and sum per lane into part_m / part_l, st kept;
     * SPA_NSAS_SPLIT_FINISH: with pscale (per lane, exp(m - M) / L of the
     * row's M and L), the part's P summed over each token's heads into
     * part_colsum [ncmp][TQP] and its P V into part_o [lanes][dv] (f32).
     * The kernel neither writes o, the statistics nor the top-K then. */
    int split;
    int64_t key0; /* the part's first key: its rows are keys key0 .. key0 + ncmp - 1 */
    const spa_nsca_pages *pages; /* a part read in place, or NULL */
    const float *pscale;
    float *part_m, *part_l, *part_o, *part_colsum;
    float scale;
    double scale64;
} spa_nsca_args;

/* Where a kernel writes the statistics of the batch whose queries are
 * [qstart, qend): the view's strides (t0, t1), or CANN's per-batch
 * [N1][S_b][8] from element qstart*N1*8 (the element offset of token t, head
 * h then t*s0 + h*s1 + shift). */
static inline void spa_nsca_stat_view(const spa_nsca_args *a, int64_t t0, int64_t t1,
                                      int64_t qstart, int64_t qend, int64_t *s0, int64_t *s1,
                                      int64_t *shift)
{
    if (!a->stats_batch_major) {
        *s0 = t0, *s1 = t1, *shift = 0;
        return;
    }
    *s0 = 8, *s1 = (qend - qstart) * 8, *shift = qstart * a->n1 * 8 - qstart * 8;
}

/* The exact forms the kernels take only where NaN or Inf meets a key a lane
 * does not attend: out of line, so the common path keeps its code. */
#if defined(__GNUC__) || defined(__clang__)
#define SPA_NSCA_COLD __attribute__((noinline, cold))
#else
#define SPA_NSCA_COLD
#endif

/* Forward: query tokens [t0, t1) of kv head h2, all in one batch whose
 * queries are [qstart, qend) and whose ncmp compressed keys start at row
 * kstart (a kernel row of kf / vf; a row of k / v for float64). */
typedef void spa_nsca_fwd_kernel(const spa_nsca_args *a, int64_t h2, int64_t t0, int64_t t1,
                                 int64_t qstart, int64_t qend, int64_t kstart, int64_t ncmp,
                                 float *scratch);

/* Grad: the same tokens; writes dq of them and adds their dK / dV rows into
 * the partials dkp [rows][dp] and dvp [rows][dvp] (f32), whose row 0 is row
 * kvlo (float64: double partials of d / dv). */
typedef void spa_nsca_grad_kernel(const spa_nsca_args *a, int64_t h2, int64_t t0, int64_t t1,
                                  int64_t qstart, int64_t kstart, int64_t ncmp, int64_t kvlo,
                                  float *dkp, float *dvp, float *scratch);

#endif
