/* NsaSelectedAttentionInfer, native (spattn/nsa_infer.h): selected attention
 * of the newest queries of each sequence against its KV cache, read in place
 * through a block table.
 *
 * A unit is one (query token, kv head). It copies the validated slots of its
 * topk row, gathers the rows of the blocks they select (widened to f32, or
 * as doubles, zero-padded to the kernels' head dims and whole blocks) into
 * its scratch, slot n at rows n * bs, and runs the selected-attention kernel
 * on them in its gathered mode (spa_nsas_args.gathered): the same
 * micro-kernels, the causal rule at the query's position, nothing of the
 * cache read but its selected rows. So a call costs O(T * N2 * K * bs), not
 * O(L): a decode step at a 128k context reads what one at 8k reads.
 *
 * Parts: a decode step has one unit per kv head, often one, so a unit's
 * slots are split into parts of about SPA_SELECT_INFER_PART_ROWS rows, each
 * run as its own block. The split depends on K and bs only, so the result is
 * the same whatever the runner, its threads and T (a decode step gives the
 * bits of the chunk's row).
 * - f32 and f64: each part writes an f32 / f64 partial output with its
 *   softmax max and sum; a second pass merges a unit's parts in part order
 *   (the log-sum-exp rule, in double).
 * - f16 and bf16 (G <= 32): their P is rounded to the dtype after dividing
 *   by the whole row's sum, which a part does not know, so a part runs
 *   twice on its block's scratch (spa_nsas_args.split): first its scores,
 *   max and sum; then, with the row's max M and sum L from every part's
 *   (in double, part order), P = exp(z' - m_p) exp(m_p - M) / L rounded to
 *   the dtype and its P V as f32; a third pass adds a unit's parts in part
 *   order (in double) and rounds once to the dtype.
 *
 * Validation: phase 1 and phase 2 both check every argument, the sequence
 * arrays (copied in phase 2) and every topk index and block-table entry the
 * call will use, before anything is written. The units read each index and
 * page number once more as they gather and use only what that read gives
 * if it is still valid (a caller rewriting the arrays during the call gets
 * padding there, never an access outside the cache). */
#include <math.h>
#include <string.h>

#include "attn_parts.h"
#include "f64.h"
#include "half.h"
#include "internal.h"
#include "nsa_cache_rows.h"
#include "nsa_select_f64.h"
#include "nsa_select_kernel.h"
#include "nsa_select_plan.h"
#include "spa_kernels.h"
#include "spattn/nsa_infer.h"

/* Blocks per call at most (each owns a scratch in the workspace). */
#ifndef SPA_SELECT_INFER_BLOCKS_MAX
#define SPA_SELECT_INFER_BLOCKS_MAX 64
#endif

/* Rows of selected blocks per part at least, and parts per unit at most. */
#ifndef SPA_SELECT_INFER_PART_ROWS
#define SPA_SELECT_INFER_PART_ROWS 256
#endif
#ifndef SPA_SELECT_INFER_PARTS_MAX
#define SPA_SELECT_INFER_PARTS_MAX 4
#endif
_Static_assert(SPA_SELECT_INFER_PARTS_MAX <= SPA_ATTN_PARTS_MAX, "parts beyond the merge's");

/* The call's arguments as phase 1 took them: all phase 2 reads of it. */
typedef struct nsasi_exec {
    spa_exec_head head;
    spa_tensor q, k, v, topk, table, o;
    spa_int_array sq, skv;
    double scale;
    int64_t bs;
    int32_t has_table, has_sq;
} nsasi_exec;
_Static_assert(sizeof(nsasi_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

/* What the arguments determine (derived again in phase 2). */
typedef struct nsasi_shape {
    int64_t t, n1, n2, g, gp, d, dv, dp, dvp, kc, bs, batches, pages, page_size, kv_cap;
    int32_t dtype;
} nsasi_shape;

typedef struct nsasi_plan {
    nsasi_shape sh;
    int64_t units, per_block; /* units: (token, kv head) pairs */
    int64_t parts, kcp, round; /* parts per unit, slots per part; units per round (parts > 1) */
    uint32_t blocks;
    uint64_t scratch_bytes; /* per block: the kernel's scratch, the gathered rows, the slots */
} nsasi_plan;

/* The slots one block gathers at most: a part's, or the unit's. */
static int64_t block_slots(const nsasi_plan *p)
{
    return p->parts > 1 ? p->kcp : p->sh.kc;
}

/* The rules that read no array contents. */
static spa_status check_args(const nsasi_exec *e, nsasi_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    SPA_TRY(spa_tensor_check(&e->q, 3));
    SPA_TRY(spa_tensor_check(&e->k, 4));
    SPA_TRY(spa_tensor_check(&e->v, 4));
    SPA_TRY(spa_tensor_check(&e->topk, 3));
    SPA_TRY(spa_tensor_check_output(&e->o, 3));
    const int32_t dt = e->q.dtype;
    SPA_REQUIRE(spa_is_float_dtype(dt) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_FLOAT64_NSA_SELECT);
    SPA_REQUIRE(e->k.dtype == dt /* key: the dtype of query */);
    SPA_REQUIRE(e->v.dtype == dt /* value: the dtype of query */);
    SPA_REQUIRE(e->o.dtype == dt /* attention_out: the dtype of query */);
    SPA_REQUIRE(e->topk.dtype == SPA_INT32);
    SPA_TRY(spa_seq_check_size(&e->skv));
    sh->batches = (int64_t)e->skv.size;
    SPA_REQUIRE(sh->batches <= 65536 /* actual_seq_kv_len: at most 65536 batches */);
    if (e->has_sq) {
        SPA_TRY(spa_seq_check_size(&e->sq));
        SPA_REQUIRE(e->sq.size == e->skv.size /* one query count per batch */);
    }
    sh->t = e->q.dims[0], sh->n1 = e->q.dims[1], sh->d = e->q.dims[2];
    sh->n2 = e->k.dims[2], sh->dv = e->v.dims[3], sh->kc = e->topk.dims[2];
    SPA_REQUIRE(sh->n2 >= 1);
    SPA_REQUIRE(sh->n1 >= 1 && sh->n1 <= 128);
    SPA_REQUIRE(sh->n1 % sh->n2 == 0 /* query heads a multiple of kv heads */);
    SPA_REQUIRE(sh->d >= 1 && sh->d <= 768);
    SPA_REQUIRE(sh->dv >= 1 && sh->dv <= 768);
    SPA_REQUIRE(e->k.dims[3] == sh->d /* key head dim == query head dim */);
    SPA_REQUIRE(e->v.dims[0] == e->k.dims[0] && e->v.dims[1] == e->k.dims[1] && e->v.dims[2] == sh->n2);
    SPA_REQUIRE(sh->kc >= 1 && sh->kc <= 4096);
    SPA_REQUIRE(e->bs >= 16 && e->bs <= 4096 && e->bs % 16 == 0 /* selected_block_size */);
    const int64_t td[3] = {sh->t, sh->n2, sh->kc}, od[3] = {sh->t, sh->n1, sh->dv};
    SPA_REQUIRE(spa_tensor_dims_are(&e->topk, 3, td));
    SPA_REQUIRE(spa_tensor_dims_are(&e->o, 3, od));
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
    sh->gp = spa_nsas_lanes(sh->g);
    sh->dp = (sh->d + SPA_NSAS_DIM_STEP - 1) / SPA_NSAS_DIM_STEP * SPA_NSAS_DIM_STEP;
    sh->dvp = (sh->dv + SPA_NSAS_DIM_STEP - 1) / SPA_NSAS_DIM_STEP * SPA_NSAS_DIM_STEP;
    sh->bs = e->bs;
    sh->dtype = dt;
    return SPA_OK;
}

/* Query count and length of batch b, read once each (copies: the
 * trusted arrays of phase 2). Every query stands inside its sequence. */
static spa_status check_seq(const nsasi_exec *e, const nsasi_shape *sh, int64_t *sq_copy,
                            int64_t *kv_copy)
{
    int64_t total = 0;
    for (int64_t b = 0; b < sh->batches; b++) {
        const int64_t s = e->has_sq ? e->sq.data[b] : 1, l = e->skv.data[b];
        SPA_REQUIRE(s >= 0 && l >= 0 /* actual_seq_q_len / actual_seq_kv_len >= 0 */);
        SPA_REQUIRE(s <= l /* the queries are the newest tokens: S_b <= L_b */);
        SPA_REQUIRE(l <= sh->kv_cap /* L_b fits the cache (block_table row, or key dim 1) */);
        SPA_REQUIRE(spa_add_ok(total, s, &total));
        if (sq_copy != NULL)
            sq_copy[b] = s, kv_copy[b] = l;
    }
    SPA_REQUIRE(total == sh->t /* the query counts sum to T */);
    return SPA_OK;
}

/* The page holding row p of batch b (spa_nsa_cache_page). */
static int64_t page_of(const nsasi_exec *e, const nsasi_shape *sh, int64_t b, int64_t p)
{
    return spa_nsa_cache_page(e->has_table ? &e->table : NULL, sh->page_size, sh->pages, b, p);
}

/* Every topk index and the table entries of the blocks they select; sq / kv:
 * the trusted copies (phase 2), or NULL to read the caller's checked arrays. */
static spa_status check_indices(const nsasi_exec *e, const nsasi_shape *sh, const int64_t *sq,
                                const int64_t *kv)
{
    const int32_t *idx = e->topk.data;
    for (int64_t b = 0, t = 0; b < sh->batches; b++) {
        const int64_t nq = sq != NULL ? sq[b] : e->has_sq ? e->sq.data[b] : 1;
        const int64_t len = kv != NULL ? kv[b] : e->skv.data[b];
        const int64_t nblk = (len + sh->bs - 1) / sh->bs;
        for (int64_t i = 0; i < nq && t < sh->t; i++, t++)
            for (int64_t h = 0; h < sh->n2; h++)
                for (int64_t j = 0; j < sh->kc; j++) {
                    const int64_t x = idx[t * e->topk.strides[0] + h * e->topk.strides[1] +
                                          j * e->topk.strides[2]];
                    if (x == -1)
                        continue;
                    SPA_REQUIRE(x >= 0 && x < nblk /* topk_indices: -1 or a block of the sequence */);
                    const int64_t p1 = (x + 1) * sh->bs < len ? (x + 1) * sh->bs : len;
                    for (int64_t p = x * sh->bs; p < p1; p += sh->page_size - p % sh->page_size)
                        SPA_REQUIRE(page_of(e, sh, b, p) >= 0 /* block_table: pages of the cache */);
                }
    }
    return SPA_OK;
}

static size_t elem_bytes(int32_t dt)
{
    return dt == SPA_FLOAT64 ? 8 : 4; /* the kernels' element: double, or float */
}

/* A block's scratch, 64-byte aligned parts: the kernel's own scratch, the
 * gathered key rows [K*bs][dp], value rows [K*bs][dvp], the checked slots
 * [K] and a sink for the statistics the kernels write (an inference call
 * returns none). */
typedef struct nsasi_layout {
    uint64_t kg, vg, slots, sink, bytes; /* offsets, and the whole */
} nsasi_layout;

static uint64_t round64(uint64_t x)
{
    return (x + 63u) / 64u * 64u;
}

/* The scratch of a block gathering at most kc slots. */
static nsasi_layout layout_of(const nsasi_shape *sh, int64_t kc)
{
    const uint64_t rows = (uint64_t)kc * (uint64_t)sh->bs, es = elem_bytes(sh->dtype);
    uint64_t kernel; /* kc <= 4096, bs <= 4096, dims <= 768, gp <= 128: no overflow */
    if (sh->dtype == SPA_FLOAT64)
        kernel = 8u * (uint64_t)SPA_NSAS_F64_FWD_SCRATCH(sh->g, sh->d, sh->dv, kc, sh->bs);
    else /* qt [dp][GP], scores [K*bs][GP], out [dvp][GP], max and sum [GP] */
        kernel = 4u * (uint64_t)(sh->dp * sh->gp + (int64_t)rows * sh->gp + sh->dvp * sh->gp + 2 * sh->gp);
    nsasi_layout l;
    l.kg = round64(kernel);
    l.vg = l.kg + round64(rows * (uint64_t)sh->dp * es);
    l.slots = l.vg + round64(rows * (uint64_t)sh->dvp * es);
    l.sink = l.slots + round64(4u * (uint64_t)kc);
    l.bytes = l.sink + 64u;
    return l;
}

/* Parts per unit: from K and bs alone (never T or the runner). */
static bool is_half(const nsasi_shape *sh)
{
    return sh->dtype != SPA_FLOAT32 && sh->dtype != SPA_FLOAT64;
}

static int64_t parts_of(const nsasi_shape *sh)
{
    if (is_half(sh) && sh->g > 32) /* the split's scores are one chunk of heads */
        return 1;
    int64_t parts = sh->kc * sh->bs / SPA_SELECT_INFER_PART_ROWS; /* kc, bs <= 4096 */
    parts = parts < SPA_SELECT_INFER_PARTS_MAX ? parts : SPA_SELECT_INFER_PARTS_MAX;
    parts = parts < sh->kc ? parts : sh->kc;
    return parts > 1 ? parts : 1;
}

static void make_plan(const nsasi_shape *sh, nsasi_plan *p)
{
    memset(p, 0, sizeof *p);
    p->sh = *sh;
    p->units = sh->t * sh->n2;
    p->parts = parts_of(sh);
    if (p->parts > 1) {
        p->kcp = (sh->kc + p->parts - 1) / p->parts;
        p->parts = (sh->kc + p->kcp - 1) / p->kcp; /* no empty last part */
        p->scratch_bytes = layout_of(sh, p->kcp).bytes; /* a part's slots only */
        p->round = SPA_SELECT_INFER_BLOCKS_MAX / p->parts;
        p->round = p->round < p->units ? p->round : p->units;
        p->per_block = 1;
        p->blocks = (uint32_t)(p->round * p->parts); /* a block per part of a round's units */
        return;
    }
    p->scratch_bytes = layout_of(sh, sh->kc).bytes;
    p->per_block = (p->units + SPA_SELECT_INFER_BLOCKS_MAX - 1) / SPA_SELECT_INFER_BLOCKS_MAX;
    if (p->per_block < 1)
        p->per_block = 1;
    p->blocks = (uint32_t)((p->units + p->per_block - 1) / p->per_block);
}

/* The partial results of a round (parts > 1, attn_parts.h). */
static uint64_t partial_elems(const nsasi_plan *p)
{
    return p->parts > 1 ? spa_attn_parts_elems(p->round, p->parts, p->sh.g, p->sh.dv) : 0;
}

/* The workspace: the sequence copies, a scratch per block, the partials. */
static void carve(spa_ws *ws, const nsasi_plan *p, int64_t **sq, int64_t **kv, int64_t **qs,
                  unsigned char **scratch, unsigned char **partial)
{
    *sq = spa_ws_take(ws, (uint64_t)p->sh.batches, sizeof(int64_t));
    *kv = spa_ws_take(ws, (uint64_t)p->sh.batches, sizeof(int64_t));
    *qs = spa_ws_take(ws, (uint64_t)p->sh.batches, sizeof(int64_t));
    *scratch = spa_ws_take(ws, (uint64_t)p->blocks, p->scratch_bytes);
    *partial = p->parts > 1 ? spa_ws_take(ws, partial_elems(p), spa_attn_parts_elem_bytes(p->sh.dtype)) : NULL;
}

static uint64_t planned_bytes(const nsasi_plan *p)
{
    spa_ws ws;
    int64_t *a, *b, *c;
    unsigned char *s, *part;
    spa_ws_plan(&ws);
    carve(&ws, p, &a, &b, &c, &s, &part);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
                         const spa_tensor *topk_indices, const spa_tensor *block_table,
                         const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
                         double scale_value, int64_t selected_block_size, const spa_tensor *attention_out,
                         uint64_t *workspace_size, spa_executor *executor)
{
    if (query == NULL || key == NULL || value == NULL || topk_indices == NULL ||
        actual_seq_kv_len == NULL || attention_out == NULL || workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    nsasi_exec e;
    memset(&e, 0, sizeof e);
    e.q = *query, e.k = *key, e.v = *value, e.topk = *topk_indices, e.o = *attention_out;
    if (block_table != NULL)
        e.table = *block_table, e.has_table = 1;
    if (actual_seq_q_len != NULL)
        e.sq = *actual_seq_q_len, e.has_sq = 1;
    e.skv = *actual_seq_kv_len;
    e.scale = scale_value, e.bs = selected_block_size;
    SPA_REQUIRE(scale_value == scale_value && scale_value - scale_value == 0.0 /* scale_value finite */);
    nsasi_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_TRY(check_seq(&e, &sh, NULL, NULL));
    nsasi_plan p;
    make_plan(&sh, &p);
    e.head.ws_size = planned_bytes(&p);
    SPA_REQUIRE(e.head.ws_size > 0);
    SPA_TRY(check_indices(&e, &sh, NULL, NULL)); /* last: its cost grows with T * K */
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_NSA_SELECT_INFER);
    return SPA_OK;
}

typedef struct nsasi_run {
    const nsasi_exec *e;
    const nsasi_plan *p;
    const int64_t *sq, *kv, *qs; /* trusted: per-batch counts, lengths, first query */
    unsigned char *scratch;
    spa_attn_parts partial; /* parts > 1: the round's partials */
    int64_t u0;             /* parts > 1: the round's first unit */
    spa_nsas_args args; /* the kernel arguments every unit starts from */
} nsasi_run;

/* The kernel arguments for the kc slots gather_slots left in scratch. */
static void slot_args(const nsasi_run *r, int64_t kc, unsigned char *scratch, spa_nsas_args *a)
{
    const nsasi_layout lay = layout_of(&r->p->sh, block_slots(r->p));
    *a = r->args;
    a->idx = (const int32_t *)(const void *)(scratch + lay.slots), a->is0 = 0, a->is1 = 0, a->is2 = 1;
    a->kc = kc;
    a->mx = scratch + lay.sink, a->ms0 = a->ms1 = a->ms2 = 0;
    a->sm = scratch + lay.sink, a->ss0 = a->ss1 = a->ss2 = 0;
}

/* bf16 on a layer with the bf16 dot product: the rows gathered as the
 * kernel's bf16 pairs (spa_nsas_args.kb / vp) instead of widened. */
static bool dot_rows(const nsasi_shape *sh)
{
    return SPA_ISA_BF16_DOT && sh->dtype == SPA_BFLOAT16;
}

/* Block x of batch b, head h, as the n-th gathered block in pairs: its key
 * rows as words of element pairs at kg (dp / 2 words a row), its value rows
 * in pairs of rows at vg (dvp words a pair row). The value rows are first
 * copied as bits into the second half of the value region (vbytes long),
 * which the pairs (half the rows of twice the width) leave free. */
static void gather_block_pairs(const nsasi_run *r, int64_t b, int64_t h, int64_t kv, int64_t x, int64_t n,
                               unsigned char *kg, unsigned char *vg, uint64_t vbytes)
{
    const nsasi_exec *e = r->e;
    const nsasi_shape *sh = &r->p->sh;
    const int64_t kw = sh->dp / 2, bs = sh->bs;
    uint32_t *kd = (uint32_t *)(void *)kg + n * bs * kw;
    uint32_t *vd = (uint32_t *)(void *)vg + n * bs / 2 * sh->dvp;
    uint16_t *raw = (uint16_t *)(void *)(vg + vbytes / 2) + n * bs * sh->dvp;
    for (int64_t i = 0; i < bs; i++) {
        const int64_t p = x * bs + i;
        const int64_t pg = p < kv ? page_of(e, sh, b, p) : -1; /* -1: zeros */
        const int64_t in_page = e->has_table ? p % sh->page_size : p;
        spa_nsa_cache_row_words(&e->k, pg, in_page, h, sh->d, kw, kd + i * kw);
        spa_nsa_cache_row_bits(&e->v, pg, in_page, h, sh->dv, sh->dvp, raw + i * sh->dvp);
    }
    for (int64_t i = 0; i < bs; i += 2) /* bs is a multiple of 16 */
        spa_vbp_zip_rows(vd + i / 2 * sh->dvp, raw + i * sh->dvp, raw + (i + 1) * sh->dvp, (ptrdiff_t)sh->dvp);
}

/* Slots j0 .. j1-1 of unit (t, h) of batch b: the checked slots, then their
 * rows into scratch; *a: the kernel arguments for them. */
static void gather_slots(const nsasi_run *r, int64_t t, int64_t h, int64_t b, int64_t j0, int64_t j1,
                         unsigned char *scratch, spa_nsas_args *a)
{
    const nsasi_exec *e = r->e;
    const nsasi_shape *sh = &r->p->sh;
    const size_t es = elem_bytes(sh->dtype);
    const int64_t kv = r->kv[b];
    const int64_t pos = kv - r->sq[b] + (t - r->qs[b]); /* the query's position */
    const int64_t nblk = (kv + sh->bs - 1) / sh->bs;
    const nsasi_layout lay = layout_of(sh, block_slots(r->p));
    unsigned char *kg = scratch + lay.kg, *vg = scratch + lay.vg;
    int32_t *slots = (int32_t *)(void *)(scratch + lay.slots);
    const int32_t *idx = (const int32_t *)e->topk.data + t * e->topk.strides[0] + h * e->topk.strides[1];
    int64_t n = 0;
    for (int64_t j = j0; j < j1; j++) {
        const int64_t x = idx[j * e->topk.strides[2]]; /* read once */
        int32_t *slot = &slots[j - j0];
        /* padding, a block after the query's position, or (an array
         * rewritten during the call) a value phase 2 did not check: none */
        *slot = x >= 0 && x < nblk && x * sh->bs <= pos ? (int32_t)x : -1;
        if (*slot < 0)
            continue;
        if (dot_rows(sh)) {
            gather_block_pairs(r, b, h, kv, x, n, kg, vg, lay.slots - lay.vg);
            n++;
            continue;
        }
        for (int64_t i = 0; i < sh->bs; i++) {
            const int64_t p = x * sh->bs + i, row = n * sh->bs + i;
            void *kd = kg + (uint64_t)(row * sh->dp) * es, *vd = vg + (uint64_t)(row * sh->dvp) * es;
            const int64_t pg = p < kv ? page_of(e, sh, b, p) : -1;
            if (pg < 0) { /* past the sequence (never attended), or a rewritten table entry */
                spa_nsa_zero_row(kd, sh->dp, sh->dtype);
                spa_nsa_zero_row(vd, sh->dvp, sh->dtype);
                continue;
            }
            const int64_t in_page = e->has_table ? p % sh->page_size : p;
            spa_nsa_cache_row(&e->k, pg, in_page, h, sh->d, sh->dp, kd);
            spa_nsa_cache_row(&e->v, pg, in_page, h, sh->dv, sh->dvp, vd);
        }
        n++;
    }
    slot_args(r, j1 - j0, scratch, a);
}

/* The kernel on the rows gather_slots left in scratch: token t against
 * n2's queries and outputs as a gives them (the kernel's head h is
 * n2 * G + g). */
static void run_kernel(const nsasi_run *r, const spa_nsas_args *a, int64_t n2, int64_t t, int64_t b,
                       unsigned char *scratch)
{
    const nsasi_shape *sh = &r->p->sh;
    const nsasi_layout lay = layout_of(sh, block_slots(r->p));
    const int64_t kv = r->kv[b];
    /* the kernel's in-batch position s = t - qstart is the query's position */
    const int64_t qstart = t - (kv - r->sq[b] + (t - r->qs[b]));
#if SPA_FLOAT64_NSA_SELECT
    if (sh->dtype == SPA_FLOAT64) {
        spa_nsas_f64_args f;
        memset(&f, 0, sizeof f);
        f.a = *a;
        f.k = (const double *)(const void *)(scratch + lay.kg), f.ks0 = sh->dp, f.ks1 = 0, f.ks2 = 1;
        f.v = (const double *)(const void *)(scratch + lay.vg), f.vs0 = sh->dvp, f.vs1 = 0, f.vs2 = 1;
        f.scale = r->e->scale;
        SPA_K_NSA_SELECT_F64(&f, n2, t, t + 1, qstart, 0, kv, (double *)(void *)scratch);
        return;
    }
#endif
    spa_nsas_args k = *a;
    if (dot_rows(sh)) { /* gather_block_pairs' rows */
        k.kb = (const uint32_t *)(const void *)(scratch + lay.kg), k.kbr = sh->dp / 2;
        k.vp = (const uint32_t *)(const void *)(scratch + lay.vg), k.vpr = sh->dvp;
    } else {
        k.kf = (const float *)(const void *)(scratch + lay.kg), k.kfr = sh->dp;
        k.vf = (const float *)(const void *)(scratch + lay.vg), k.vfr = sh->dvp;
    }
    /* direct calls: the stack bound (tools/stack.awk) follows them; a
     * part's passes (f16 / bf16) run the kernel's split build */
    float *s = (float *)(void *)scratch;
    if (sh->dtype == SPA_FLOAT16 && k.split)
        SPA_K_NSA_SELECT_SPLIT_F16(&k, n2, t, t + 1, qstart, 0, kv, s);
    else if (sh->dtype == SPA_FLOAT16)
        SPA_K_NSA_SELECT_F16(&k, n2, t, t + 1, qstart, 0, kv, s);
    else if (sh->dtype == SPA_BFLOAT16 && k.split)
        SPA_K_NSA_SELECT_SPLIT_BF16(&k, n2, t, t + 1, qstart, 0, kv, s);
    else if (sh->dtype == SPA_BFLOAT16)
        SPA_K_NSA_SELECT_BF16(&k, n2, t, t + 1, qstart, 0, kv, s);
    else
        SPA_K_NSA_SELECT_F32(&k, n2, t, t + 1, qstart, 0, kv, s);
}

static void run_block(void *arg, uint32_t blk)
{
    const nsasi_run *r = arg;
    const nsasi_plan *p = r->p;
    unsigned char *scratch = r->scratch + (uint64_t)blk * p->scratch_bytes;
    const int64_t u0 = (int64_t)blk * p->per_block;
    const int64_t u1 = u0 + p->per_block < p->units ? u0 + p->per_block : p->units;
    int64_t b = 0;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t t = u / p->sh.n2, h = u - t * p->sh.n2;
        while (t >= r->qs[b] + r->sq[b]) /* batches in order; t < T */
            b++;
        spa_nsas_args a;
        gather_slots(r, t, h, b, 0, p->sh.kc, scratch, &a);
        run_kernel(r, &a, h, t, b, scratch);
    }
}

/* The arguments of part `part` of round unit ru: its query rows (kv head h
 * offset into a, so that the kernel runs as kv head 0), its partials. */
static void part_args(const nsasi_run *r, int64_t ru, int64_t part, int64_t h, spa_nsas_args *a)
{
    const int64_t g = r->p->sh.g;
    a->q = (const unsigned char *)a->q + (uint64_t)(h * g * a->qs1) * spa_dtype_size(r->p->sh.dtype);
    a->o = spa_attn_parts_at(&r->partial, ru, part, 0), a->os0 = 0, a->os1 = r->p->sh.dv, a->os2 = 1;
    a->mx = spa_attn_parts_at(&r->partial, ru, part, 1), a->ms0 = 0, a->ms1 = 1, a->ms2 = 0;
    a->sm = spa_attn_parts_at(&r->partial, ru, part, 2), a->ss0 = 0, a->ss1 = 1, a->ss2 = 0;
}

/* Block blk of a round's parts: its round unit, part, token, kv head,
 * batch and slots [j0, j1); false past the units. */
static bool part_block(const nsasi_run *r, uint32_t blk, int64_t *ru, int64_t *part, int64_t *t, int64_t *h,
                       int64_t *b, int64_t *j0, int64_t *j1)
{
    const nsasi_plan *p = r->p;
    *ru = (int64_t)blk / p->parts, *part = (int64_t)blk - *ru * p->parts;
    const int64_t u = r->u0 + *ru;
    if (u >= p->units)
        return false;
    *t = u / p->sh.n2, *h = u - *t * p->sh.n2, *b = spa_nsa_cache_batch_of(r->qs, r->p->sh.batches, *t);
    *j0 = *part * p->kcp, *j1 = *j0 + p->kcp < p->sh.kc ? *j0 + p->kcp : p->sh.kc;
    return true;
}

/* Part blk % parts of unit u0 + blk / parts: its slots into its partial
 * output, max and sum (a half dtype: its max and sum, the scores kept in
 * its scratch for run_finish_block). */
static void run_part_block(void *arg, uint32_t blk)
{
    const nsasi_run *r = arg;
    int64_t ru, part, t, h, b, j0, j1;
    if (!part_block(r, blk, &ru, &part, &t, &h, &b, &j0, &j1))
        return;
    unsigned char *scratch = r->scratch + (uint64_t)blk * r->p->scratch_bytes;
    spa_nsas_args a;
    gather_slots(r, t, h, b, j0, j1, scratch, &a);
    part_args(r, ru, part, h, &a);
    a.split = is_half(&r->p->sh) ? SPA_NSAS_SPLIT_STATS : 0;
    run_kernel(r, &a, 0, t, b, scratch);
}

/* A half dtype's part blk (as run_part_block), again on its scratch: with
 * the row's max M and sum L from every part's statistics (double, part
 * order; the same in each part), its P rounded and its P V into its
 * partial output. */
static void run_finish_block(void *arg, uint32_t blk)
{
    const nsasi_run *r = arg;
    int64_t ru, part, t, h, b, j0, j1;
    if (!part_block(r, blk, &ru, &part, &t, &h, &b, &j0, &j1))
        return;
    unsigned char *scratch = r->scratch + (uint64_t)blk * r->p->scratch_bytes;
    float pscale[32] = {0.0f}; /* g <= 32; padded lanes 0 */
    spa_attn_parts_scale(&r->partial, ru, part, r->p->sh.g, pscale);
    spa_nsas_args a;
    slot_args(r, j1 - j0, scratch, &a);
    part_args(r, ru, part, h, &a);
    a.split = SPA_NSAS_SPLIT_FINISH, a.pscale = pscale;
    run_kernel(r, &a, 0, t, b, scratch);
}

/* Unit u0 + blk: its parts merged in part order (attn_parts.h). */
static void run_merge_block(void *arg, uint32_t blk)
{
    const nsasi_run *r = arg;
    const nsasi_plan *p = r->p;
    const int64_t u = r->u0 + (int64_t)blk;
    if (u >= p->units)
        return;
    const spa_tensor *o = &r->e->o;
    const int64_t t = u / p->sh.n2, h = u - t * p->sh.n2;
    void *row = (unsigned char *)o->data +
                (uint64_t)(t * o->strides[0] + h * p->sh.g * o->strides[1]) * spa_dtype_size(o->dtype);
    spa_attn_parts_merge(&r->partial, (int64_t)blk, p->sh.g, row, o->strides[1], o->strides[2], NULL, 0, NULL, 0);
}

spa_status spa_nsa_select_infer_phase2(void *workspace, uint64_t workspace_size,
                                       const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    nsasi_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_NSA_SELECT_INFER));
    nsasi_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    const spa_tensor *tensors[] = {&e.q, &e.k, &e.v, &e.topk, &e.o, e.has_table ? &e.table : NULL};
    const spa_int_array *arrays[] = {&e.skv, e.has_sq ? &e.sq : NULL};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 6, arrays, 2));
    nsasi_plan p;
    make_plan(&sh, &p);
    SPA_REQUIRE(planned_bytes(&p) == e.head.ws_size);
    spa_ws ws;
    nsasi_run r;
    int64_t *sq, *kv, *qs;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    carve(&ws, &p, &sq, &kv, &qs, &r.scratch, &r.partial.base);
    r.partial.round = p.round, r.partial.parts = p.parts, r.partial.g = sh.g, r.partial.dv = sh.dv;
    r.partial.dtype = sh.dtype;
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(check_seq(&e, &sh, sq, kv));
    for (int64_t b = 0, t = 0; b < sh.batches; t += sq[b], b++)
        qs[b] = t;
    SPA_TRY(check_indices(&e, &sh, sq, kv));
    if (sh.t == 0)
        return SPA_OK;
    r.e = &e, r.p = &p, r.sq = sq, r.kv = kv, r.qs = qs;
    memset(&r.args, 0, sizeof r.args);
    r.args.q = e.q.data;
    r.args.qs0 = e.q.strides[0], r.args.qs1 = e.q.strides[1], r.args.qs2 = e.q.strides[2];
    r.args.o = e.o.data;
    r.args.os0 = e.o.strides[0], r.args.os1 = e.o.strides[1], r.args.os2 = e.o.strides[2];
    r.args.n2 = sh.n2, r.args.g = sh.g, r.args.gp = sh.gp;
    r.args.d = sh.d, r.args.dv = sh.dv, r.args.dp = sh.dp, r.args.dvp = sh.dvp;
    r.args.bs = sh.bs, r.args.kc = sh.kc;
    r.args.scale = (float)e.scale;
    r.args.causal = 1;
    r.args.gathered = 1;
    if (p.parts == 1) {
        spa_run_blocks(&rn, run_block, &r, p.blocks);
        return SPA_OK;
    }
    for (r.u0 = 0; r.u0 < p.units; r.u0 += p.round) { /* the parts of a round's units, then their merges */
        const int64_t n = p.units - r.u0 < p.round ? p.units - r.u0 : p.round;
        spa_run_blocks(&rn, run_part_block, &r, (uint32_t)(n * p.parts));
        if (is_half(&sh))
            spa_run_blocks(&rn, run_finish_block, &r, (uint32_t)(n * p.parts));
        spa_run_blocks(&rn, run_merge_block, &r, (uint32_t)n);
    }
    return SPA_OK;
}

spa_status spa_nsa_select_infer_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *topk_indices, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    double scale_value, int64_t selected_block_size, const spa_tensor *attention_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(query, key, value, topk_indices, block_table, actual_seq_q_len,
                                     actual_seq_kv_len, scale_value, selected_block_size, attention_out,
                                     workspace_size, executor),
                              executor, SPA_OP_NSA_SELECT_INFER, 1);
}

spa_status spa_nsa_select_infer(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                const spa_runner *runner)
{
    return spa_public_status(spa_nsa_select_infer_phase2(workspace, workspace_size, executor, runner));
}
