/* NsaCompressAttentionInfer, native (spattn/nsa_infer.h): compressed
 * attention of the newest queries of each sequence against its cache of
 * compressed keys, and the top-K selection blocks of each query.
 *
 * A unit is one (batch, kv head). It widens the batch's compressed key and
 * value rows of its head, read through the block table, into its scratch
 * (f32 rows of the kernels' pitch, or doubles), and runs the compressed
 * attention kernel on its queries with the inference op's rules: the causal
 * rule at the queries' positions L_b - S_b + i (spa_nsca_args.pos_shift),
 * ceil(((C - 1) d + l) / l') selection blocks, block 0 and the last two
 * forced in (spa_nsca_args.infer_sel). So a call reads the C_b compressed
 * rows of each batch once: O(C), which a decode step must read anyway.
 *
 * Parts (f32, f16, bf16, one lane group of at most 32 heads per unit): a
 * decode step has one unit per kv head, often one, and reads every
 * compressed key, so a unit's keys are split into parts of R keys (R from
 * the longest batch, at least SPA_CATTN_INFER_PART_KEYS), each its own
 * block, run twice on its scratch (spa_nsca_args.split): its scores, max
 * and sum; then, with the row's max M and sum L from every part's (double,
 * part order), its P (exp(z' - m_p) exp(m_p - M) / L, rounded for the half
 * dtypes), its share of the importance sums and its P V. A third pass per
 * unit adds the parts' outputs in part order (double, one rounding to the
 * dtype) and ranks the blocks (spa_nsca_token_topk, as the kernel does).
 * Every token of a unit sees a key of every part (the parts end before the
 * first query's visible end; the last takes the rest), so a part never
 * meets a fully masked row that the whole would not. The split depends on
 * the length arrays only: the same bits whatever the runner and threads.
 *
 * Validation: phase 1 and phase 2 both check every argument, the length
 * arrays (copied in phase 2) and every table entry the call will use. The
 * units read each page number once more as they gather and take a row
 * whose entry has changed since as zeros (never an access outside the
 * cache). */
#include <math.h>
#include <string.h>

#include "f64.h"
#include "half.h"
#include "internal.h"
#include "nsa_cache_rows.h"
#include "nsa_cattn_kernel.h"
#include "nsa_cattn_topk.h"
#include "nsa_select_kernel.h"
#include "nsa_select_plan.h"
#include "spa_kernels.h"
#include "spattn/nsa_infer.h"

/* Blocks per call at most (each owns a scratch in the workspace). */
#ifndef SPA_CATTN_INFER_BLOCKS_MAX
#define SPA_CATTN_INFER_BLOCKS_MAX 16
#endif

/* Keys per part at least, and parts per unit at most. */
#ifndef SPA_CATTN_INFER_PART_KEYS
#define SPA_CATTN_INFER_PART_KEYS 512
#endif
#ifndef SPA_CATTN_INFER_PARTS_MAX
#define SPA_CATTN_INFER_PARTS_MAX 8
#endif
_Static_assert(SPA_CATTN_INFER_PART_KEYS % 16 == 0, "parts start on whole groups of 16 keys");

/* The largest block and stride: (C - 1) d + l stays far from overflow. */
#define CATTN_INFER_BLOCK_MAX ((int64_t)1 << 30)

/* The call's arguments as phase 1 took them: all phase 2 reads of it. */
typedef struct nscai_exec {
    spa_exec_head head;
    spa_tensor q, k, v, table, o, topk;
    spa_int_array sq, scmp, ssel;
    double scale;
    int64_t causal, l, st, ls, kc;
    int32_t has_table, has_sq, has_sel;
} nscai_exec;
_Static_assert(sizeof(nscai_exec) <= SPA_EXECUTOR_BYTES - SPA_REFUSAL_BYTES, "executor too small");

/* What the arguments determine (derived again in phase 2); max_*: from the
 * arrays. */
typedef struct nscai_shape {
    int64_t t, n1, n2, g, hc, tq, gp, d, dv, dp, dvp, batches, pages, page_size, kv_cap;
    int64_t max_sq, max_cmp, max_sel;
    int64_t max_hidden; /* the most keys of a batch its first query does not see */
    int32_t dtype;
} nscai_shape;

/* A block's scratch, 64-byte aligned parts: the kernel's own, the widened
 * key rows, the value rows, and a sink for the statistics the kernel writes
 * (an inference call returns none). */
/* A block's scratch: the kernel's floats, then the key (kg) and value (vg)
 * rows, a sink for the statistics the op does not return; vraw: the second
 * half of the value rows' area, where the bf16 pairs' gather stages the
 * value rows before it zips them into the first (gather_rows_pairs). */
typedef struct nscai_layout {
    uint64_t kg, vg, vraw, sink, bytes;
} nscai_layout;

typedef struct nscai_plan {
    nscai_shape sh;
    int64_t units, per_block; /* units: (batch, kv head) pairs */
    uint32_t blocks;
    nscai_layout lay;
    /* parts > 1: keys per part, kernel rows of a part's scratch, units per round */
    int64_t parts, part_keys, part_rows, round;
} nscai_plan;

/* The dtype's kernel, called directly: the stack bound (tools/stack.awk)
 * follows direct calls. */
static void call_kernel(int32_t dtype, const spa_nsca_args *a, int64_t h2, int64_t q0, int64_t q1, int64_t ncmp,
                        float *scratch)
{
    if (a->split) { /* a part's passes: the kernel's split build */
        if (dtype == SPA_FLOAT16)
            SPA_K_NSA_COMPRESS_ATTENTION_SPLIT_F16(a, h2, q0, q1, q0, q1, 0, ncmp, scratch);
        else if (dtype == SPA_BFLOAT16)
            SPA_K_NSA_COMPRESS_ATTENTION_SPLIT_BF16(a, h2, q0, q1, q0, q1, 0, ncmp, scratch);
        else
            SPA_K_NSA_COMPRESS_ATTENTION_SPLIT_F32(a, h2, q0, q1, q0, q1, 0, ncmp, scratch);
        return;
    }
    switch (dtype) {
    case SPA_FLOAT16:
        SPA_K_NSA_COMPRESS_ATTENTION_F16(a, h2, q0, q1, q0, q1, 0, ncmp, scratch);
        return;
    case SPA_BFLOAT16:
        SPA_K_NSA_COMPRESS_ATTENTION_BF16(a, h2, q0, q1, q0, q1, 0, ncmp, scratch);
        return;
#if SPA_HAVE_F64
    case SPA_FLOAT64:
        SPA_K_NSA_COMPRESS_ATTENTION_F64(a, h2, q0, q1, q0, q1, 0, ncmp, scratch);
        return;
#endif
    default:
        SPA_K_NSA_COMPRESS_ATTENTION_F32(a, h2, q0, q1, q0, q1, 0, ncmp, scratch);
        return;
    }
}

/* The rules that read no array contents. */
static spa_status check_args(const nscai_exec *e, nscai_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    SPA_TRY(spa_tensor_check(&e->q, 3));
    SPA_TRY(spa_tensor_check(&e->k, 4));
    SPA_TRY(spa_tensor_check(&e->v, 4));
    SPA_TRY(spa_tensor_check_output(&e->o, 3));
    SPA_TRY(spa_tensor_check_output(&e->topk, 3));
    const int32_t dt = e->q.dtype;
    SPA_REQUIRE(spa_is_float_dtype(dt) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_HAVE_F64);
    SPA_REQUIRE(e->k.dtype == dt /* key: the dtype of query */);
    SPA_REQUIRE(e->v.dtype == dt /* value: the dtype of query */);
    SPA_REQUIRE(e->o.dtype == dt /* attention_out: the dtype of query */);
    SPA_REQUIRE(e->topk.dtype == SPA_INT32);
    SPA_REQUIRE(e->scale == e->scale && e->scale - e->scale == 0.0 /* scale_value finite */);
    SPA_REQUIRE(e->causal == 0 || e->causal == 1);
    SPA_REQUIRE(e->st >= 1 && e->l >= e->st /* compress_block_size >= compress_stride >= 1 */);
    SPA_REQUIRE(e->ls >= e->st && e->ls % e->st == 0 /* select_block_size: a multiple of the stride */);
    SPA_REQUIRE(e->l <= CATTN_INFER_BLOCK_MAX && e->ls <= CATTN_INFER_BLOCK_MAX);
    SPA_REQUIRE(e->kc >= 1 && e->kc <= 4096 /* select_block_count */);
    SPA_TRY(spa_seq_check_size(&e->scmp));
    sh->batches = (int64_t)e->scmp.size;
    SPA_REQUIRE(sh->batches <= 65536 /* actual_cmp_seq_kv_len: at most 65536 batches */);
    if (e->has_sq) {
        SPA_TRY(spa_seq_check_size(&e->sq));
        SPA_REQUIRE(e->sq.size == e->scmp.size /* one query count per batch */);
    }
    if (e->has_sel) {
        SPA_TRY(spa_seq_check_size(&e->ssel));
        SPA_REQUIRE(e->ssel.size == e->scmp.size /* one sequence length per batch */);
    }
    SPA_REQUIRE(e->has_sel || !e->causal /* actual_sel_seq_kv_len: the causal rule needs the positions */);
    sh->t = e->q.dims[0], sh->n1 = e->q.dims[1], sh->d = e->q.dims[2];
    sh->n2 = e->k.dims[2], sh->dv = e->v.dims[3];
    SPA_REQUIRE(sh->n2 >= 1 && sh->n1 >= 1);
    SPA_REQUIRE(sh->n1 % sh->n2 == 0 /* query heads a multiple of kv heads */);
    SPA_REQUIRE(sh->d >= 1 && sh->d <= 768);
    SPA_REQUIRE(sh->dv >= 1 && sh->dv <= 768);
    SPA_REQUIRE(e->k.dims[3] == sh->d /* key head dim == query head dim */);
    SPA_REQUIRE(e->v.dims[0] == e->k.dims[0] && e->v.dims[1] == e->k.dims[1] && e->v.dims[2] == sh->n2);
    const int64_t od[3] = {sh->t, sh->n1, sh->dv}, td[3] = {sh->t, sh->n2, e->kc};
    SPA_REQUIRE(spa_tensor_dims_are(&e->o, 3, od));
    SPA_REQUIRE(spa_tensor_dims_are(&e->topk, 3, td));
    sh->pages = e->k.dims[0], sh->page_size = e->k.dims[1];
    if (e->has_table) {
        SPA_TRY(spa_tensor_check(&e->table, 2));
        SPA_REQUIRE(e->table.dtype == SPA_INT32);
        SPA_REQUIRE(e->table.dims[0] == sh->batches /* block_table: a row per batch */);
        SPA_REQUIRE(spa_mul_ok(e->table.dims[1], sh->page_size, &sh->kv_cap));
    } else {
        SPA_REQUIRE(sh->pages >= sh->batches /* contiguous cache: key[b] per batch */);
        sh->kv_cap = sh->page_size;
    }
    if (!e->has_sq)
        SPA_REQUIRE(sh->t == sh->batches /* no actual_seq_q_len: one query per batch */);
    sh->g = sh->n1 / sh->n2;
    sh->dp = (sh->d + 15) / 16 * 16;
    sh->dvp = (sh->dv + 15) / 16 * 16;
    sh->dtype = dt;
    return SPA_OK;
}

/* The keys the first of s queries of a batch of c compressed keys and
 * length len sees (spa_nsca_visible_end at its position len - s). */
static int64_t first_visible(const nscai_exec *e, int64_t s, int64_t c, int64_t len)
{
    if (!e->causal)
        return c;
    const int64_t lim = len - s - e->l + 1; /* s <= len, l <= 2^30 */
    const int64_t end = lim < 0 ? 0 : lim / e->st + 1;
    return end < c ? end : c;
}

/* Batch b's query count, compressed keys and length, read once each; they
 * go to the copies when given (phase 2's trusted arrays). Sets max_*, the
 * lane grouping and the selection count of sh. */
static spa_status check_seq(const nscai_exec *e, nscai_shape *sh, int64_t *sq_copy, int64_t *cmp_copy,
                            int64_t *sel_copy)
{
    int64_t total = 0;
    sh->max_sq = sh->max_cmp = sh->max_hidden = 0;
    for (int64_t b = 0; b < sh->batches; b++) {
        const int64_t s = e->has_sq ? e->sq.data[b] : 1, c = e->scmp.data[b];
        const int64_t len = e->has_sel ? e->ssel.data[b] : 0;
        SPA_REQUIRE(s >= 0 && c >= 0 && len >= 0 /* the length arrays: >= 0 */);
        SPA_REQUIRE(c <= sh->kv_cap /* C_b fits the cache (block_table row, or key dim 1) */);
        SPA_REQUIRE(c <= INT32_MAX);
        SPA_REQUIRE(!e->has_sel || s <= len /* the queries are the newest tokens: S_b <= L_b */);
        SPA_REQUIRE(spa_add_ok(total, s, &total));
        sh->max_sq = s > sh->max_sq ? s : sh->max_sq;
        sh->max_cmp = c > sh->max_cmp ? c : sh->max_cmp;
        const int64_t hidden = c - first_visible(e, s, c, len);
        sh->max_hidden = hidden > sh->max_hidden ? hidden : sh->max_hidden;
        if (sq_copy != NULL)
            sq_copy[b] = s, cmp_copy[b] = c, sel_copy[b] = len;
    }
    SPA_REQUIRE(total == sh->t /* the query counts sum to T */);
    /* lanes: (query, head) pairs of a kv head, up to 32; no more tokens per
     * group than a batch has (a decode step fills its lanes with heads) */
    sh->hc = sh->g < 32 ? sh->g : 32;
    sh->tq = 32 / sh->hc < sh->max_sq ? 32 / sh->hc : sh->max_sq > 0 ? sh->max_sq : 1;
    sh->gp = spa_nsas_lanes(sh->tq * sh->hc);
    sh->max_sel = sh->max_cmp == 0 ? 0 : ((sh->max_cmp - 1) * e->st + e->l + e->ls - 1) / e->ls;
    return SPA_OK;
}

/* Every table entry of the rows the call reads (cmp: the trusted copy, or
 * NULL to read the caller's checked array). */
static spa_status check_table(const nscai_exec *e, const nscai_shape *sh, const int64_t *cmp)
{
    if (!e->has_table)
        return SPA_OK;
    for (int64_t b = 0; b < sh->batches; b++) {
        const int64_t c = cmp != NULL ? cmp[b] : e->scmp.data[b];
        for (int64_t p = 0; p < c; p += sh->page_size)
            SPA_REQUIRE(spa_nsa_cache_page(&e->table, sh->page_size, sh->pages, b, p) >= 0 /* block_table: pages of the cache */);
    }
    return SPA_OK;
}

static uint64_t round64(uint64_t x)
{
    return (x + 63u) / 64u * 64u;
}

/* Sizes from the shape: max_cmp <= 2^31, dims <= 768, gp <= 128, K <= 4096
 * (products below 2^50). */
static nscai_layout layout_of(const nscai_shape *sh, int64_t kc)
{
    const uint64_t rmax = (uint64_t)(sh->max_cmp + 15) / 16 * 16, gp = (uint64_t)sh->gp;
    const uint64_t sel = (uint64_t)sh->max_sel, k = (uint64_t)kc;
    nscai_layout l;
    uint64_t kernel, kbytes, vbytes;
    if (sh->dtype == SPA_FLOAT64) { /* scores and colsum [rmax], importance, top-K, a row of O: doubles */
        kernel = 8u * (2u * rmax + sel + 2u * k + (uint64_t)sh->dv + 1u);
        kbytes = 8u * (uint64_t)sh->max_cmp * (uint64_t)sh->d;
        vbytes = 8u * (uint64_t)sh->max_cmp * (uint64_t)sh->dv;
    } else { /* the training forward's: templates/nsa/nsa_compress_attention.c.m4 */
        const uint64_t tqp = sh->tq <= 16 ? 16u : 32u;
        kernel = 4u * ((uint64_t)sh->dp * gp + rmax * gp + (uint64_t)sh->dvp * gp + 3u * gp + tqp * (rmax + 32u) +
                       2u * sel + 3u * k + 2u);
        kbytes = 4u * rmax * (uint64_t)sh->dp;
        vbytes = 4u * rmax * (uint64_t)sh->dvp;
    }
    l.kg = round64(kernel);
    l.vg = l.kg + round64(kbytes);
    l.vraw = l.vg + round64(vbytes) / 2; /* 4 * rmax * dvp bytes: a multiple of 128 */
    l.sink = l.vg + round64(vbytes);
    l.bytes = l.sink + 64u;
    return l;
}

/* Parts per unit (1: the whole unit in one block) and keys per part. */
static int64_t parts_of(const nscai_shape *sh, int64_t *keys)
{
    *keys = 0;
    if (sh->dtype == SPA_FLOAT64 || sh->g > 32 || sh->max_sq > 32 / sh->g) /* one lane group per unit */
        return 1;
    int64_t r = (sh->max_cmp + SPA_CATTN_INFER_PARTS_MAX - 1) / SPA_CATTN_INFER_PARTS_MAX;
    r = (r + 15) / 16 * 16;
    *keys = r > SPA_CATTN_INFER_PART_KEYS ? r : SPA_CATTN_INFER_PART_KEYS;
    const int64_t parts = (sh->max_cmp + *keys - 1) / *keys;
    return parts > 1 ? parts : 1;
}

static void make_plan(const nscai_shape *sh, int64_t kc, nscai_plan *p)
{
    memset(p, 0, sizeof *p);
    p->sh = *sh;
    p->units = sh->batches * sh->n2;
    p->parts = parts_of(sh, &p->part_keys);
    if (p->parts > 1) {
        /* a part's rows: its keys, the last one's also those its first query does not see */
        p->part_rows = p->part_keys + (sh->max_hidden + 15) / 16 * 16;
        nscai_shape part = *sh;
        part.max_cmp = p->part_rows;
        p->lay = layout_of(&part, kc);
        p->round = SPA_CATTN_INFER_BLOCKS_MAX / p->parts > 1 ? SPA_CATTN_INFER_BLOCKS_MAX / p->parts : 1;
        p->round = p->round < p->units ? p->round : p->units;
        p->per_block = 1;
        p->blocks = (uint32_t)(p->round * p->parts);
        return;
    }
    p->per_block = (p->units + SPA_CATTN_INFER_BLOCKS_MAX - 1) / SPA_CATTN_INFER_BLOCKS_MAX;
    if (p->per_block < 1)
        p->per_block = 1;
    p->blocks = (uint32_t)((p->units + p->per_block - 1) / p->per_block);
    p->lay = layout_of(sh, kc);
}

/* Parts > 1, per unit of a round: a merge scratch of the importance sums
 * [max_cmp][TQP] (f32), the importance [max_sel], the top-K values [K]
 * (doubles) and slots [K]; per (unit, part) of a round: its output
 * [gp][dv], max [gp] and sum [gp] (f32). */
static uint64_t merge_bytes(const nscai_plan *p, int64_t kc)
{
    const uint64_t tqp = p->sh.tq <= 16 ? 16u : 32u;
    return round64(4u * (uint64_t)p->sh.max_cmp * tqp) + round64(8u * (uint64_t)(p->sh.max_sel + kc)) +
           round64(4u * (uint64_t)kc);
}

static uint64_t partial_floats(const nscai_plan *p)
{
    return (uint64_t)p->sh.gp * (uint64_t)(p->sh.dv + 2);
}

/* The workspace: the length copies, a scratch per block, the parts' merge
 * scratch and partials. */
static void carve(spa_ws *ws, const nscai_plan *p, int64_t kc, int64_t **arr, unsigned char **scratch,
                  unsigned char **merge, float **partial)
{
    *arr = spa_ws_take(ws, 4u * (uint64_t)p->sh.batches, sizeof(int64_t)); /* sq, cmp, sel, qs */
    *scratch = spa_ws_take(ws, (uint64_t)p->blocks, p->lay.bytes);
    *merge = NULL, *partial = NULL;
    if (p->parts > 1) {
        *merge = spa_ws_take(ws, (uint64_t)p->round, merge_bytes(p, kc));
        *partial = spa_ws_take(ws, (uint64_t)(p->round * p->parts) * partial_floats(p), sizeof(float));
    }
}

static uint64_t planned_bytes(const nscai_plan *p, int64_t kc)
{
    spa_ws ws;
    int64_t *a;
    unsigned char *s, *m;
    float *f;
    spa_ws_plan(&ws);
    carve(&ws, p, kc, &a, &s, &m, &f);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const nscai_exec *in, uint64_t *workspace_size, spa_executor *executor)
{
    nscai_exec e = *in;
    nscai_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_TRY(check_seq(&e, &sh, NULL, NULL, NULL));
    SPA_TRY(check_table(&e, &sh, NULL));
    nscai_plan p;
    make_plan(&sh, e.kc, &p);
    e.head.ws_size = planned_bytes(&p, e.kc);
    SPA_REQUIRE(e.head.ws_size > 0);
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_NSA_CATTN_INFER);
    return SPA_OK;
}

typedef struct nscai_run {
    const nscai_exec *e;
    const nscai_plan *p;
    const int64_t *sq, *cmp, *sel, *qs; /* trusted: per batch */
    unsigned char *scratch, *merge;
    float *partial;
    int64_t u0; /* parts > 1: the round's first unit */
    bool in_place; /* parts_in_place */
    bool dot;      /* bf16 on the layer's bf16 dot product: the rows gathered as pairs */
} nscai_run;

/* The kernel arguments every unit starts from (built where they are used:
 * a copy in the run would add its bytes to phase 2's stack frame, under
 * every task's). */
static void base_args(const nscai_run *r, spa_nsca_args *a)
{
    const nscai_exec *e = r->e;
    const nscai_shape *sh = &r->p->sh;
    memset(a, 0, sizeof *a);
    a->q = e->q.data, a->qs0 = e->q.strides[0], a->qs1 = e->q.strides[1], a->qs2 = e->q.strides[2];
    a->o = e->o.data, a->os0 = e->o.strides[0], a->os1 = e->o.strides[1], a->os2 = e->o.strides[2];
    a->topk = e->topk.data, a->ts0 = e->topk.strides[0], a->ts1 = e->topk.strides[1], a->ts2 = e->topk.strides[2];
    a->g = sh->g, a->hc = sh->hc, a->tq = sh->tq, a->gp = sh->gp;
    a->d = sh->d, a->dv = sh->dv, a->dp = sh->dp, a->dvp = sh->dvp;
    a->cmp_block = e->l, a->cmp_stride = e->st, a->msel = e->ls / e->st, a->nn = e->l / e->st;
    a->kc = e->kc;
    a->rows_max = r->p->parts > 1 ? r->p->part_rows : (sh->max_cmp + 15) / 16 * 16;
    a->sel_max = sh->max_sel;
    a->n1 = sh->n1;
    a->causal = (int)e->causal;
    a->infer_sel = 1;
    a->scale = (float)e->scale;
    a->scale64 = e->scale;
}

/* Compressed rows c0 .. c1-1 of batch b, head h, into the scratch's key
 * and value rows from row 0: widened (f32 rows of the kernels' pitch,
 * rounded up to 16 rows of zeros; doubles), or, raw, 32 rows in the
 * cache's dtype ks / vs elements apart, zeros past c1 (the tail of a part
 * read in place and a group of zeros: stage_part_tail). */
static void gather_rows(const nscai_run *r, int64_t b, int64_t h, int64_t c0, int64_t c1, unsigned char *scratch,
                        bool raw, int64_t ks, int64_t vs)
{
    const nscai_exec *e = r->e;
    const nscai_shape *sh = &r->p->sh;
    const nscai_layout *lay = &r->p->lay;
    const bool f64 = sh->dtype == SPA_FLOAT64;
    const size_t es = raw ? spa_dtype_size(sh->dtype) : f64 ? sizeof(double) : sizeof(float);
    const int64_t kp = f64 ? sh->d : sh->dp, vp = f64 ? sh->dv : sh->dvp;
    const int64_t rows = raw ? 32 : f64 ? c1 - c0 : (c1 - c0 + 15) / 16 * 16; /* f32 kernels read whole groups of 16 */
    unsigned char *kg = scratch + lay->kg, *vg = scratch + lay->vg;
    ks = raw ? ks : kp, vs = raw ? vs : vp;
    for (int64_t i = 0; i < rows; i++) {
        const int64_t p = c0 + i;
        void *kd = kg + (uint64_t)(i * ks) * es, *vd = vg + (uint64_t)(i * vs) * es;
        const int64_t pg = p < c1 ? spa_nsa_cache_page(e->has_table ? &e->table : NULL, sh->page_size, sh->pages, b, p)
                                  : -1;
        const int64_t in_page = e->has_table ? p % sh->page_size : p;
        if (raw) {
            spa_nsa_cache_row_raw(&e->k, pg, in_page, h, sh->d, kd);
            spa_nsa_cache_row_raw(&e->v, pg, in_page, h, sh->dv, vd);
        } else if (pg < 0) { /* past the keys, or a table entry rewritten since phase 2 checked it */
            spa_nsa_zero_row(kd, kp, sh->dtype);
            spa_nsa_zero_row(vd, vp, sh->dtype);
        } else {
            spa_nsa_cache_row(&e->k, pg, in_page, h, sh->d, kp, kd);
            spa_nsa_cache_row(&e->v, pg, in_page, h, sh->dv, vp, vd);
        }
    }
}

/* bf16 on the layer's dot product: compressed rows c0 .. c1-1 of batch b,
 * head h, as the kernels' bf16 pairs from row 0 (spa_nsca_args.kb / vp): key
 * rows as their words (dp / 2 a row), value rows zipped in pairs of rows
 * (dvp words a pair), rounded up to 16 rows of zeros. The value rows' bits
 * are staged in the second half of their area first (vraw: rmax rows of
 * dvp halves), the pairs written to the first. */
static void gather_rows_pairs(const nscai_run *r, int64_t b, int64_t h, int64_t c0, int64_t c1,
                              unsigned char *scratch)
{
    const nscai_exec *e = r->e;
    const nscai_shape *sh = &r->p->sh;
    const nscai_layout *lay = &r->p->lay;
    const int64_t kw = sh->dp / 2, rows = (c1 - c0 + 15) / 16 * 16;
    uint32_t *kd = (uint32_t *)(void *)(scratch + lay->kg), *vd = (uint32_t *)(void *)(scratch + lay->vg);
    uint16_t *raw = (uint16_t *)(void *)(scratch + lay->vraw);
    for (int64_t i = 0; i < rows; i++) {
        const int64_t p = c0 + i;
        const int64_t pg = p < c1 ? spa_nsa_cache_page(e->has_table ? &e->table : NULL, sh->page_size, sh->pages, b, p)
                                  : -1; /* -1: zeros (past the keys, or a rewritten table entry) */
        const int64_t in_page = e->has_table ? p % sh->page_size : p;
        spa_nsa_cache_row_words(&e->k, pg, in_page, h, sh->d, kw, kd + i * kw);
        spa_nsa_cache_row_bits(&e->v, pg, in_page, h, sh->dv, sh->dvp, raw + i * sh->dvp);
    }
    for (int64_t i = 0; i < rows; i += 2)
        spa_vbp_zip_rows(vd + i / 2 * sh->dvp, raw + i * sh->dvp, raw + (i + 1) * sh->dvp, (ptrdiff_t)sh->dvp);
}

/* The kernel arguments of rows gathered as pairs (gather_rows_pairs; kf /
 * vf stay NULL, as base_args leaves them). */
static void pairs_args(const nscai_run *r, unsigned char *scratch, spa_nsca_args *a)
{
    const nscai_shape *sh = &r->p->sh;
    a->kb = (const uint32_t *)(const void *)(scratch + r->p->lay.kg), a->kbr = sh->dp / 2;
    a->vp = (const uint32_t *)(const void *)(scratch + r->p->lay.vg), a->vpr = sh->dvp;
}

/* Whether the parts read the cache where it lies (spa_nsca_pages) instead
 * of widening its rows into the scratch, which at long contexts costs as
 * much as the attention (every key row written once more and read back):
 * f32, f16, bf16 rows of D elements at unit stride, D and Dv multiples of
 * 16 (the kernels' pitch), pages of whole groups of 16 rows (the parts start
 * on one: their keys are a multiple of 16), and room in the first half of
 * the scratch's key and value areas for a part's last keys and a group of
 * zeros at the cache's row pitch (the 16-bit dtypes' chunks in the second
 * half: chunk_of). The kernel reads the same f32 values either way: the
 * same bits. */
static bool parts_in_place(const nscai_exec *e, const nscai_plan *p)
{
    const nscai_shape *sh = &p->sh;
    if (!SPA_CATTN_INFER_IN_PLACE || p->parts < 2 || sh->dtype == SPA_FLOAT64 || sh->d != sh->dp ||
        sh->dv != sh->dvp || e->k.strides[3] != 1 || e->v.strides[3] != 1 ||
        (e->has_table && sh->page_size % 16 != 0))
        return false;
    const int64_t rmax = (p->part_rows + 15) / 16 * 16; /* the scratch's rows (layout_of) */
    const int64_t kfr = e->k.strides[1], vfr = e->v.strides[1];
    return kfr >= sh->dp && vfr >= sh->dvp && kfr <= rmax * sh->dp / 32 && vfr <= rmax * sh->dvp / 32;
}

/* In place, 16-bit dtypes: 16 widened rows of `width` floats in the second
 * half of the key (0) or value (1) area of a part's scratch (rmax >= 32). */
static float *chunk_of(const nscai_plan *p, unsigned char *scratch, int which)
{
    const uint64_t rmax = (uint64_t)(p->part_rows + 15) / 16 * 16;
    const uint64_t width = (uint64_t)(which ? p->sh.dvp : p->sh.dp);
    return (float *)(void *)(scratch + (which ? p->lay.vg : p->lay.kg) + 2u * rmax * width);
}

/* In place, the stats pass: the part's last keys (c1 - c0 mod 16 of them,
 * zero-padded to 16 rows) and after them a group of zero rows, in the
 * cache's dtype at its row pitch, in the scratch's key and value areas
 * (spa_nsca_pages; D and Dv are the kernels' pitch there). */
static void stage_part_tail(const nscai_run *r, int64_t b, int64_t h, int64_t c0, int64_t c1,
                            unsigned char *scratch)
{
    const nscai_exec *e = r->e;
    gather_rows(r, b, h, c0 + (c1 - c0) / 16 * 16, c1, scratch, true, e->k.strides[1], e->v.strides[1]);
}

/* Unit (b, h): the batch's compressed rows of head h, then the kernel on its queries. */
static void run_unit(const nscai_run *r, int64_t b, int64_t h, unsigned char *scratch)
{
    const nscai_exec *e = r->e;
    const nscai_shape *sh = &r->p->sh;
    const nscai_layout *lay = &r->p->lay;
    const int64_t c = r->cmp[b], nq = r->sq[b];
    if (nq == 0)
        return;
    const bool f64 = sh->dtype == SPA_FLOAT64;
    unsigned char *kg = scratch + lay->kg, *vg = scratch + lay->vg;
    spa_nsca_args a;
    base_args(r, &a);
    if (r->dot) {
        gather_rows_pairs(r, b, h, 0, c, scratch);
        pairs_args(r, scratch, &a);
    } else
        gather_rows(r, b, h, 0, c, scratch, false, 0, 0);
    a.mx = scratch + lay->sink, a.ms0 = a.ms1 = a.ms2 = 0;
    a.sm = scratch + lay->sink, a.ss0 = a.ss1 = a.ss2 = 0;
    a.pos_shift = e->causal ? r->sel[b] - nq : 0;
    if (f64) {
        a.k = kg, a.ks0 = sh->d, a.ks1 = 0, a.ks2 = 1;
        a.v = vg, a.vs0 = sh->dv, a.vs1 = 0, a.vs2 = 1;
    } else if (!r->dot) {
        a.kf = (const float *)(const void *)kg, a.kfr = sh->dp;
        a.vf = (const float *)(const void *)vg, a.vfr = sh->dvp;
    }
    const int64_t q0 = r->qs[b];
    call_kernel(sh->dtype, &a, h, q0, q0 + nq, c, (float *)(void *)scratch);
}

static void run_block(void *arg, uint32_t blk)
{
    const nscai_run *r = arg;
    const nscai_plan *p = r->p;
    unsigned char *scratch = r->scratch + (uint64_t)blk * p->lay.bytes;
    const int64_t u0 = (int64_t)blk * p->per_block;
    const int64_t u1 = u0 + p->per_block < p->units ? u0 + p->per_block : p->units;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t b = u / p->sh.n2;
        run_unit(r, b, u - b * p->sh.n2, scratch);
    }
}

/* The unit of block blk of a round and its part: batch b, kv head h, keys
 * [c0, c1) of its n parts; false where the block has no part to run. */
static bool part_of_block(const nscai_run *r, uint32_t blk, int64_t *ru, int64_t *b, int64_t *h, int64_t *k,
                          int64_t *c0, int64_t *c1, int64_t *n)
{
    const nscai_plan *p = r->p;
    *ru = (int64_t)blk / p->parts, *k = (int64_t)blk - *ru * p->parts;
    const int64_t u = r->u0 + *ru;
    if (u >= p->units)
        return false;
    *b = u / p->sh.n2, *h = u - *b * p->sh.n2;
    const int64_t nq = r->sq[*b], c = r->cmp[*b];
    const int64_t vis = first_visible(r->e, nq, c, r->sel[*b]);
    *n = vis > 0 ? (vis + p->part_keys - 1) / p->part_keys : 1; /* every part ends before vis */
    if (nq == 0 || c == 0 || *k >= *n)
        return false;
    *c0 = *k * p->part_keys, *c1 = *k == *n - 1 ? c : *c0 + p->part_keys;
    return true;
}

/* Where part k of round unit ru keeps its output [gp][dv], max and sum [gp]. */
static float *part_out(const nscai_run *r, int64_t ru, int64_t k, int which)
{
    const nscai_plan *p = r->p;
    float *base = r->partial + (uint64_t)(ru * p->parts + k) * partial_floats(p);
    const int64_t gp = p->sh.gp, dv = p->sh.dv;
    return which == 0 ? base : which == 1 ? base + gp * dv : base + gp * (dv + 1);
}

/* The importance sums of round unit ru [max_cmp][TQP]. */
static float *unit_colsum(const nscai_run *r, int64_t ru)
{
    return (float *)(void *)(r->merge + (uint64_t)ru * merge_bytes(r->p, r->e->kc));
}

/* The kernel on part k (keys [c0, c1)) of unit (b, h), gathered in scratch. */
static void run_part_kernel(const nscai_run *r, spa_nsca_args *a, int64_t b, int64_t h, int64_t c0, int64_t c1,
                            unsigned char *scratch)
{
    const nscai_shape *sh = &r->p->sh;
    const nscai_layout *lay = &r->p->lay;
    const int64_t nq = r->sq[b], q0 = r->qs[b];
    a->mx = scratch + lay->sink, a->ms0 = a->ms1 = a->ms2 = 0;
    a->sm = scratch + lay->sink, a->ss0 = a->ss1 = a->ss2 = 0;
    a->pos_shift = r->e->causal ? r->sel[b] - nq : 0;
    a->key0 = c0;
    if (r->dot)
        pairs_args(r, scratch, a);
    else {
        a->kf = (const float *)(const void *)(scratch + lay->kg), a->kfr = sh->dp;
        a->vf = (const float *)(const void *)(scratch + lay->vg), a->vfr = sh->dvp;
    }
    spa_nsca_pages pages;
    if (SPA_CATTN_INFER_IN_PLACE && r->in_place) { /* the cache where it lies; the tail and the zeros in the scratch (stage_part_tail) */
        const nscai_exec *e = r->e;
        const size_t es = spa_dtype_size(sh->dtype);
        const unsigned char *k = e->k.data, *v = e->v.data;
        const int64_t kb = e->has_table ? 0 : b * e->k.strides[0], vb = e->has_table ? 0 : b * e->v.strides[0];
        pages.k = k + (uint64_t)(kb + h * e->k.strides[2]) * es, pages.ks0 = e->k.strides[0];
        pages.v = v + (uint64_t)(vb + h * e->v.strides[2]) * es, pages.vs0 = e->v.strides[0];
        pages.table = e->has_table ? (const int32_t *)e->table.data + b * e->table.strides[0] : NULL;
        pages.tstride = e->has_table ? e->table.strides[1] : 0;
        pages.page_size = sh->page_size, pages.pages = sh->pages;
        pages.rows = (c1 - c0) / 16 * 16;
        a->kfr = e->k.strides[1], a->vfr = e->v.strides[1];
        pages.kzero = scratch + lay->kg + (uint64_t)(16 * a->kfr) * es;
        pages.vzero = scratch + lay->vg + (uint64_t)(16 * a->vfr) * es;
        pages.kchunk = chunk_of(r->p, scratch, 0), pages.vchunk = chunk_of(r->p, scratch, 1);
        a->pages = &pages;
    }
    call_kernel(sh->dtype, a, h, q0, q0 + nq, c1 - c0, (float *)(void *)scratch);
}

/* Parts, first pass: a part's rows, then its scores, max and sum. */
static void run_cpart_block(void *arg, uint32_t blk)
{
    const nscai_run *r = arg;
    int64_t ru, b, h, k, c0, c1, n;
    if (!part_of_block(r, blk, &ru, &b, &h, &k, &c0, &c1, &n))
        return;
    unsigned char *scratch = r->scratch + (uint64_t)blk * r->p->lay.bytes;
    if (SPA_CATTN_INFER_IN_PLACE && r->in_place)
        stage_part_tail(r, b, h, c0, c1, scratch);
    else if (r->dot)
        gather_rows_pairs(r, b, h, c0, c1, scratch);
    else
        gather_rows(r, b, h, c0, c1, scratch, false, 0, 0);
    spa_nsca_args a;
    base_args(r, &a);
    a.split = SPA_NSAS_SPLIT_STATS;
    a.part_m = part_out(r, ru, k, 1), a.part_l = part_out(r, ru, k, 2);
    run_part_kernel(r, &a, b, h, c0, c1, scratch);
}

/* Parts, second pass: with the row's M and L (every part's statistics in
 * part order, double; the same in each part), the part's P, its importance
 * sums and its P V. */
static void run_cfinish_block(void *arg, uint32_t blk)
{
    const nscai_run *r = arg;
    int64_t ru, b, h, k, c0, c1, n;
    if (!part_of_block(r, blk, &ru, &b, &h, &k, &c0, &c1, &n))
        return;
    const int64_t lanes = r->sq[b] * r->p->sh.g; /* <= 32: one lane group */
    float pscale[32] = {0.0f};
    for (int64_t l = 0; l < lanes; l++) {
        double m = -HUGE_VAL, sum = 0.0;
        for (int64_t j = 0; j < n; j++)
            m = part_out(r, ru, j, 1)[l] > m ? part_out(r, ru, j, 1)[l] : m;
        for (int64_t j = 0; j < n; j++) {
            const double lj = part_out(r, ru, j, 2)[l];
            sum += lj == 0.0 ? 0.0 : lj * exp((double)part_out(r, ru, j, 1)[l] - m);
        }
        /* NaN stays NaN; L = 0 (every score -inf) gives 0 * inf, NaN, as in one block */
        pscale[l] = (float)(exp((double)part_out(r, ru, k, 1)[l] - m) / sum);
    }
    unsigned char *scratch = r->scratch + (uint64_t)blk * r->p->lay.bytes;
    spa_nsca_args a;
    base_args(r, &a);
    a.split = SPA_NSAS_SPLIT_FINISH;
    a.pscale = pscale;
    a.part_o = part_out(r, ru, k, 0);
    a.part_colsum = unit_colsum(r, ru) + c0 * (r->p->sh.tq <= 16 ? 16 : 32);
    run_part_kernel(r, &a, b, h, c0, c1, scratch);
}

/* Parts, third pass per unit: the parts' outputs added in part order
 * (double, one rounding to the dtype), then each token's top-K. */
static void run_cmerge_block(void *arg, uint32_t blk)
{
    const nscai_run *r = arg;
    const nscai_plan *p = r->p;
    const nscai_exec *e = r->e;
    const int64_t ru = (int64_t)blk, u = r->u0 + ru;
    if (u >= p->units)
        return;
    const int64_t b = u / p->sh.n2, h = u - b * p->sh.n2, nq = r->sq[b], c = r->cmp[b], q0 = r->qs[b];
    const int64_t g = p->sh.g, dv = p->sh.dv, tqp = p->sh.tq <= 16 ? 16 : 32;
    if (nq == 0)
        return;
    const int64_t vis = first_visible(e, nq, c, r->sel[b]);
    const int64_t n = c == 0 ? 0 : vis > 0 ? (vis + p->part_keys - 1) / p->part_keys : 1;
    for (int64_t l = 0; l < nq * g; l++) {
        const int64_t t = q0 + l / g, hq = h * g + l % g;
        for (int64_t x = 0; x < dv; x++) {
            double acc = 0.0;
            for (int64_t k = 0; k < n; k++)
                acc += (double)part_out(r, ru, k, 0)[l * dv + x];
            const int64_t off = t * e->o.strides[0] + hq * e->o.strides[1] + x * e->o.strides[2];
            if (p->sh.dtype == SPA_FLOAT32)
                ((float *)e->o.data)[off] = (float)acc;
            else if (p->sh.dtype == SPA_BFLOAT16)
                ((uint16_t *)e->o.data)[off] = spa_f32_to_bf16((float)acc);
            else
                ((uint16_t *)e->o.data)[off] = spa_f32_to_f16((float)acc);
        }
    }
    float *colsum = unit_colsum(r, ru);
    double *imp = (double *)(void *)((unsigned char *)colsum + round64(4u * (uint64_t)p->sh.max_cmp * (uint64_t)tqp));
    double *topv = imp + p->sh.max_sel;
    int32_t *topi = (int32_t *)(void *)((unsigned char *)imp + round64(8u * (uint64_t)(p->sh.max_sel + e->kc)));
    spa_nsca_args a;
    base_args(r, &a);
    for (int64_t i = 0; i < nq; i++)
        spa_nsca_token_topk(&a, colsum + i, tqp, c, NULL, imp, topv, topi,
                            (int32_t *)e->topk.data + (q0 + i) * e->topk.strides[0] + h * e->topk.strides[1],
                            e->topk.strides[2]);
}

spa_status spa_nsa_cattn_infer_phase2(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                      const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    nscai_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_NSA_CATTN_INFER));
    nscai_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    const spa_tensor *tensors[] = {&e.q, &e.k, &e.v, &e.o, &e.topk, e.has_table ? &e.table : NULL};
    const spa_int_array *arrays[] = {&e.scmp, e.has_sq ? &e.sq : NULL, e.has_sel ? &e.ssel : NULL};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 6, arrays, 3));
    /* the arrays' facts as phase 1 saw them size the plan; the copies are
     * checked against the same rules, and the plan again */
    SPA_TRY(check_seq(&e, &sh, NULL, NULL, NULL));
    nscai_plan p;
    make_plan(&sh, e.kc, &p);
    SPA_REQUIRE(planned_bytes(&p, e.kc) == e.head.ws_size);
    spa_ws ws;
    nscai_run r;
    int64_t *arr;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    carve(&ws, &p, e.kc, &arr, &r.scratch, &r.merge, &r.partial);
    SPA_REQUIRE(!ws.overflow);
    int64_t *sq = arr, *cmp = arr + sh.batches, *sel = arr + 2 * sh.batches, *qs = arr + 3 * sh.batches;
    nscai_shape again = sh;
    SPA_TRY(check_seq(&e, &again, sq, cmp, sel));
    SPA_REQUIRE(again.max_cmp <= sh.max_cmp && again.max_sq <= sh.max_sq && again.tq == sh.tq &&
                again.gp == sh.gp && again.max_hidden <= sh.max_hidden /* the arrays changed during the call */);
    SPA_TRY(check_table(&e, &sh, cmp));
    for (int64_t b = 0, t = 0; b < sh.batches; t += sq[b], b++)
        qs[b] = t;
    if (sh.t == 0)
        return SPA_OK;
    r.e = &e, r.p = &p, r.sq = sq, r.cmp = cmp, r.sel = sel, r.qs = qs;
    /* bf16 on the dot product gathers its rows as pairs (half the bytes of
     * the f32 rows the in-place parts avoid writing) */
    r.dot = SPA_ISA_BF16_DOT && sh.dtype == SPA_BFLOAT16;
    r.in_place = !r.dot && parts_in_place(&e, &p);
    if (p.parts == 1) {
        spa_run_blocks(&rn, run_block, &r, p.blocks);
        return SPA_OK;
    }
    for (r.u0 = 0; r.u0 < p.units; r.u0 += p.round) { /* a round's parts twice, then its units' merges */
        const int64_t n = p.units - r.u0 < p.round ? p.units - r.u0 : p.round;
        spa_run_blocks(&rn, run_cpart_block, &r, (uint32_t)(n * p.parts));
        spa_run_blocks(&rn, run_cfinish_block, &r, (uint32_t)(n * p.parts));
        spa_run_blocks(&rn, run_cmerge_block, &r, (uint32_t)n);
    }
    return SPA_OK;
}

spa_status spa_nsa_compress_attention_infer_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    const spa_int_array *actual_sel_seq_kv_len, double scale_value, int64_t causal, int64_t compress_block_size,
    int64_t compress_stride, int64_t select_block_size, int64_t select_block_count,
    const spa_tensor *attention_out, const spa_tensor *topk_indices_out, uint64_t *workspace_size,
    spa_executor *executor)
{
    spa_status st = SPA_ERR_NULLPTR;
    if (query != NULL && key != NULL && value != NULL && actual_cmp_seq_kv_len != NULL && attention_out != NULL &&
        topk_indices_out != NULL && workspace_size != NULL && executor != NULL) {
        nscai_exec e;
        memset(&e, 0, sizeof e);
        e.q = *query, e.k = *key, e.v = *value, e.o = *attention_out, e.topk = *topk_indices_out;
        if (block_table != NULL)
            e.table = *block_table, e.has_table = 1;
        if (actual_seq_q_len != NULL)
            e.sq = *actual_seq_q_len, e.has_sq = 1;
        if (actual_sel_seq_kv_len != NULL)
            e.ssel = *actual_sel_seq_kv_len, e.has_sel = 1;
        e.scmp = *actual_cmp_seq_kv_len;
        e.scale = scale_value, e.causal = causal;
        e.l = compress_block_size, e.st = compress_stride, e.ls = select_block_size, e.kc = select_block_count;
        st = phase1(&e, workspace_size, executor);
    }
    return spa_refusal_record(st, executor, SPA_OP_NSA_CATTN_INFER, 1);
}

spa_status spa_nsa_compress_attention_infer(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                            const spa_runner *runner)
{
    return spa_public_status(spa_nsa_cattn_infer_phase2(workspace, workspace_size, executor, runner));
}
