/* LightningIndexer, native (spattn/dsa.h): each query token's scores over
 * the keys it sees, and their top K.
 *
 * A unit is one (query token, key head). The units run in rounds of up to
 * SPA_DSLI_ROUND_UNITS, each round in two steps:
 * - scores: a block per (round unit, part of SPA_DSLI_PART_ROWS keys). It
 *   widens the token's heads and weights to f32 (transposed, chunks of up
 *   to 32 heads), gathers its keys' rows from the cache as f32, TK at a
 *   time, and runs the generated kernel on them (spa_dsli_kernel); the
 *   scores land, as doubles, in the unit's row of the round's score array.
 *   float64 computes the same sums in double here (no kernel: the f64 path
 *   is the exact one, not the fast one).
 * - top K: a block per round unit, over its row (dsa_topk.h), writes the
 *   unit's indices and values.
 * Each score depends on its key row alone and the top K on the scores
 * alone, so the bits do not depend on the runner or its threads, and a
 * decode step (one unit) still spreads over the parts.
 *
 * Validation: phase 1 and phase 2 both check every argument, the sequence
 * arrays (copied in phase 2) and every block-table entry of the pages the
 * sequences' rows lie on, before anything is written. A gather reads each
 * page number once more and uses it only if it is still a page of the cache
 * (a table rewritten during the call gives zero rows, never an access
 * outside the cache). */
#include <math.h>
#include <string.h>

#include "dsa_kv.h"
#include "dsa_li_kernel.h"
#include "dsa_topk.h"
#include "f64.h"
#include "half.h"
#include "internal.h"
#include "nsa_cache_rows.h"
#include "nsa_select_plan.h"
#include "spa_kernels.h"
#include "spattn/dsa.h"

/* Units per round at most (each keeps a row of scores in the workspace). */
#ifndef SPA_DSLI_ROUND_UNITS
#define SPA_DSLI_ROUND_UNITS 16
#endif
/* Keys per part of a unit's scores. */
#ifndef SPA_DSLI_PART_ROWS
#define SPA_DSLI_PART_ROWS 1024
#endif
/* Blocks of the scores step at most (each owns a scratch); block i runs
 * parts i, i + blocks, ... of the round. */
#ifndef SPA_DSLI_BLOCKS_MAX
#define SPA_DSLI_BLOCKS_MAX 64
#endif

enum { DSLI_CHUNK = 32 }; /* heads per chunk of the kernel's lanes */

/* The call's arguments as phase 1 took them: all phase 2 reads of it. */
typedef struct dsli_exec {
    spa_exec_head head;
    spa_tensor q, k, w, table, idx, val;
    spa_int_array sq, skv;
    int64_t kc, mode, lmax; /* lmax: the longest sequence phase 1 read (sizes the workspace) */
    int32_t has_table, has_sq, has_skv, has_val;
} dsli_exec;
_Static_assert(sizeof(dsli_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

/* What the arguments determine (derived again in phase 2). */
typedef struct dsli_shape {
    spa_dsa_kv kv; /* the key's layout and batches */
    int64_t t, n1, n2, g, d, dp, kc, batches;
    int64_t chunks, gp; /* heads in chunks of gp lanes */
    int32_t dtype;
} dsli_shape;

typedef struct dsli_plan {
    dsli_shape sh;
    int64_t units, round, parts, lmax; /* parts: of SPA_DSLI_PART_ROWS keys per unit */
    uint32_t blocks;        /* of the scores step (the top-K step has round) */
    uint64_t scratch_bytes; /* per block */
} dsli_plan;

static bool is_f64(const dsli_shape *sh)
{
    return sh->dtype == SPA_FLOAT64;
}

/* The rules that read no array contents. */
static spa_status check_args(const dsli_exec *e, dsli_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    SPA_TRY(spa_tensor_check(&e->q, 3));
    SPA_TRY(spa_dsa_kv_check(&e->k, e->has_table ? &e->table : NULL, e->has_sq ? &e->sq : NULL,
                             e->has_skv ? &e->skv : NULL, e->q.dims[0], &sh->kv));
    SPA_TRY(spa_tensor_check(&e->w, 2));
    SPA_TRY(spa_tensor_check_output(&e->idx, 3));
    const int32_t dt = e->q.dtype;
    SPA_REQUIRE(spa_is_float_dtype(dt) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_FLOAT64_DSA_LIGHTNING_INDEXER);
    SPA_REQUIRE(e->k.dtype == dt /* key: the dtype of query */);
    SPA_REQUIRE(e->w.dtype == dt || e->w.dtype == SPA_FLOAT32 /* weights: the query's dtype or FLOAT32 */);
    SPA_REQUIRE(e->idx.dtype == SPA_INT32 /* sparse_indices_out: INT32 */);
    SPA_REQUIRE(e->mode == 0 || e->mode == 3 /* sparse_mode: 0 or 3 */);
    SPA_REQUIRE(e->kc >= 1 && e->kc <= 65536 /* sparse_count: 1 .. 65536 */);
    sh->t = e->q.dims[0], sh->n1 = e->q.dims[1], sh->d = e->q.dims[2];
    sh->n2 = sh->kv.kx.dims[2], sh->kc = e->kc;
    SPA_REQUIRE(sh->n2 >= 1);
    SPA_REQUIRE(sh->n1 >= 1 && sh->n1 <= 256 /* query heads: 1 .. 256 */);
    SPA_REQUIRE(sh->n1 % sh->n2 == 0 /* query heads a multiple of key heads */);
    SPA_REQUIRE(sh->d >= 1 && sh->d <= 768 /* head dim: 1 .. 768 */);
    SPA_REQUIRE(sh->kv.kx.dims[3] == sh->d /* key head dim == query head dim */);
    const int64_t wd[2] = {sh->t, sh->n1}, od[3] = {sh->t, sh->n2, sh->kc};
    SPA_REQUIRE(spa_tensor_dims_are(&e->w, 2, wd) /* weights: [T, N1] */);
    SPA_REQUIRE(spa_tensor_dims_are(&e->idx, 3, od) /* sparse_indices_out: [T, N2, K] */);
    if (e->has_val) {
        SPA_TRY(spa_tensor_check_output(&e->val, 3));
        SPA_REQUIRE(e->val.dtype == dt || e->val.dtype == SPA_FLOAT32 /* sparse_values_out: query's dtype or FLOAT32 */);
        SPA_REQUIRE(spa_tensor_dims_are(&e->val, 3, od) /* sparse_values_out: [T, N2, K] */);
    }
    sh->batches = sh->kv.batches;
    int64_t units;
    SPA_REQUIRE(spa_mul_ok(sh->t, sh->n2, &units) /* T * N2 units */);
    sh->g = sh->n1 / sh->n2;
    sh->chunks = (sh->g + DSLI_CHUNK - 1) / DSLI_CHUNK;
    sh->gp = spa_nsas_lanes(sh->g < DSLI_CHUNK ? sh->g : DSLI_CHUNK);
    sh->dp = (sh->d + 15) / 16 * 16;
    sh->dtype = dt;
    return SPA_OK;
}

/* The sequence arrays (spa_dsa_kv_check_seq), the table entries of every
 * page the sequences' rows lie on (len: the trusted copies, or NULL). */
static spa_status check_seq(const dsli_exec *e, const dsli_shape *sh, int64_t *sq_copy, int64_t *kv_copy,
                            int64_t *start_copy, int64_t *lmax)
{
    return spa_dsa_kv_check_seq(&sh->kv, e->has_sq ? &e->sq : NULL, e->has_skv ? &e->skv : NULL, sh->t, sq_copy,
                                kv_copy, start_copy, lmax);
}

static spa_status check_table(const dsli_exec *e, const dsli_shape *sh, const int64_t *kv)
{
    return spa_dsa_kv_check_table(&sh->kv, &e->table, &e->skv, kv);
}

static uint64_t round64(uint64_t x)
{
    return (x + 63u) / 64u * 64u;
}

/* A block's scratch, 64-byte aligned parts at these offsets: the scores
 * step's (f32: qt, w, TK rows, the kernel's scores and out; f64: the heads,
 * w and one row, in double) or the top-K step's (K doubles, then K indices),
 * whichever is larger. Dims are bounded (dp <= 768, chunks * gp <= 256,
 * kc <= 65536): no overflow. */
typedef struct dsli_layout {
    uint64_t w, rows, s, out; /* the scores step's w, key rows, kernel scores, kernel out (q at 0) */
    uint64_t keys;            /* the top-K step's indices (values at 0) */
    uint64_t bytes;
} dsli_layout;

static dsli_layout layout_of(const dsli_shape *sh)
{
    const uint64_t dp = (uint64_t)sh->dp, lanes = (uint64_t)(sh->chunks * sh->gp), tk = SPA_DSLI_TK;
    const uint64_t es = is_f64(sh) ? 8u : 4u, heads = is_f64(sh) ? (uint64_t)sh->g : lanes;
    const uint64_t rows = is_f64(sh) ? 1u : tk;
    dsli_layout l;
    l.w = round64(es * heads * dp);
    l.rows = l.w + round64(es * heads);
    l.s = l.rows + round64(es * rows * dp);
    l.out = l.s + (is_f64(sh) ? 0u : round64(4u * tk * (uint64_t)sh->gp));
    const uint64_t scores = l.out + (is_f64(sh) ? 0u : round64(4u * tk));
    l.keys = round64(8u * (uint64_t)sh->kc);
    const uint64_t topk = l.keys + round64(4u * (uint64_t)sh->kc);
    l.bytes = scores > topk ? scores : topk;
    return l;
}

static void make_plan(const dsli_shape *sh, int64_t lmax, dsli_plan *p)
{
    memset(p, 0, sizeof *p);
    p->sh = *sh;
    p->lmax = lmax;
    p->units = sh->t * sh->n2; /* check_args: no overflow */
    p->round = p->units < SPA_DSLI_ROUND_UNITS ? p->units : SPA_DSLI_ROUND_UNITS;
    p->parts = lmax > 0 ? (lmax + SPA_DSLI_PART_ROWS - 1) / SPA_DSLI_PART_ROWS : 1;
    const int64_t items = p->round * p->parts; /* lmax < 2^31: parts < 2^21 */
    p->blocks = (uint32_t)(items < SPA_DSLI_BLOCKS_MAX ? items : SPA_DSLI_BLOCKS_MAX);
    if (p->blocks < p->round)
        p->blocks = (uint32_t)p->round; /* the top-K step's blocks share the scratches */
    p->scratch_bytes = layout_of(sh).bytes;
}

/* The workspace: the sequence copies, the round's scores, a scratch per block. */
static void carve(spa_ws *ws, const dsli_plan *p, int64_t **sq, int64_t **kv, int64_t **qs, int64_t **ks,
                  double **scores, unsigned char **scratch)
{
    *sq = spa_ws_take(ws, (uint64_t)p->sh.batches, sizeof(int64_t));
    *kv = spa_ws_take(ws, (uint64_t)p->sh.batches, sizeof(int64_t));
    *qs = spa_ws_take(ws, (uint64_t)p->sh.batches, sizeof(int64_t));
    *ks = spa_ws_take(ws, (uint64_t)p->sh.batches, sizeof(int64_t));
    *scores = spa_ws_take(ws, (uint64_t)p->round * (uint64_t)(p->lmax > 0 ? p->lmax : 1), sizeof(double));
    *scratch = spa_ws_take(ws, (uint64_t)p->blocks, p->scratch_bytes);
}

static uint64_t planned_bytes(const dsli_plan *p)
{
    spa_ws ws;
    int64_t *a, *b, *c, *d;
    double *s;
    unsigned char *x;
    spa_ws_plan(&ws);
    carve(&ws, p, &a, &b, &c, &d, &s, &x);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *query, const spa_tensor *key, const spa_tensor *weights,
                         const spa_tensor *block_table, const spa_int_array *actual_seq_q_len,
                         const spa_int_array *actual_seq_kv_len, int64_t sparse_count, int64_t sparse_mode,
                         const spa_tensor *sparse_indices_out, const spa_tensor *sparse_values_out,
                         uint64_t *workspace_size, spa_executor *executor)
{
    if (query == NULL || key == NULL || weights == NULL || sparse_indices_out == NULL || workspace_size == NULL ||
        executor == NULL)
        return SPA_ERR_NULLPTR;
    if ((block_table != NULL || key->rank == 3) && actual_seq_kv_len == NULL)
        return SPA_ERR_NULLPTR; /* a paged or TND key has no lengths of its own */
    dsli_exec e;
    memset(&e, 0, sizeof e);
    e.q = *query, e.k = *key, e.w = *weights, e.idx = *sparse_indices_out;
    if (sparse_values_out != NULL)
        e.val = *sparse_values_out, e.has_val = 1;
    if (block_table != NULL)
        e.table = *block_table, e.has_table = 1;
    if (actual_seq_q_len != NULL)
        e.sq = *actual_seq_q_len, e.has_sq = 1;
    if (actual_seq_kv_len != NULL)
        e.skv = *actual_seq_kv_len, e.has_skv = 1;
    e.kc = sparse_count, e.mode = sparse_mode;
    dsli_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_TRY(check_seq(&e, &sh, NULL, NULL, NULL, &e.lmax));
    dsli_plan p;
    make_plan(&sh, e.lmax, &p);
    e.head.ws_size = planned_bytes(&p);
    SPA_REQUIRE(e.head.ws_size > 0);
    SPA_TRY(check_table(&e, &sh, NULL)); /* last: its cost grows with the lengths */
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_DSA_LIGHTNING_INDEXER);
    return SPA_OK;
}

typedef struct dsli_run {
    const dsli_exec *e;
    const dsli_plan *p;
    const int64_t *sq, *kv, *qs, *ks; /* trusted: per-batch counts, lengths, first query, first key row (TND) */
    double *scores;              /* [round][lmax] */
    unsigned char *scratch;
    int64_t u0; /* the round's first unit */
} dsli_run;

/* Round unit ru: its token, key head, batch and the keys it sees; false
 * past the units. */
static bool unit_of(const dsli_run *r, int64_t ru, int64_t *t, int64_t *h, int64_t *b, int64_t *seen)
{
    const dsli_plan *p = r->p;
    const int64_t u = r->u0 + ru;
    if (u >= p->units)
        return false;
    *t = u / p->sh.n2, *h = u - *t * p->sh.n2, *b = spa_nsa_cache_batch_of(r->qs, r->p->sh.batches, *t);
    *seen = spa_dsa_seen(r->e->mode, r->kv[*b], r->sq[*b], *t - r->qs[*b]);
    return true;
}

/* Key row s of batch b, head h, into dst (pitch dp, the kernels' element):
 * zeros where its table entry no longer names a page. */
static void gather_row(const dsli_run *r, int64_t b, int64_t h, int64_t s, void *dst)
{
    const dsli_exec *e = r->e;
    const dsli_shape *sh = &r->p->sh;
    const int64_t pg = spa_dsa_kv_page(&sh->kv, &e->table, b, s);
    if (pg < 0) {
        spa_nsa_zero_row(dst, sh->dp, sh->dtype);
        return;
    }
    spa_nsa_cache_row(&sh->kv.kx, pg, spa_dsa_kv_row(&sh->kv, r->ks[b], s), h, sh->d, sh->dp, dst);
}

/* Keys [s0, s1) of a unit in f32 on the generated kernel. */
static void scores_f32(const dsli_run *r, int64_t t, int64_t h, int64_t b, int64_t s0, int64_t s1,
                       unsigned char *scratch, double *out)
{
    const dsli_exec *e = r->e;
    const dsli_shape *sh = &r->p->sh;
    const int64_t dp = sh->dp, gp = sh->gp, tk = SPA_DSLI_TK, lanes = sh->chunks * gp;
    const dsli_layout lay = layout_of(sh);
    float *qt = (float *)(void *)scratch, *w = (float *)(void *)(scratch + lay.w);
    float *kr = (float *)(void *)(scratch + lay.rows), *s = (float *)(void *)(scratch + lay.s);
    float *o = (float *)(void *)(scratch + lay.out);
    memset(qt, 0, 4u * (size_t)(lanes * dp));
    memset(w, 0, 4u * (size_t)lanes);
    for (int64_t g = 0; g < sh->g; g++) { /* head g: chunk g / 32, lane g % 32 */
        const int64_t hq = h * sh->g + g, c = g / DSLI_CHUNK, l = g % DSLI_CHUNK;
        float *col = qt + c * dp * gp + l;
        for (int64_t d = 0; d < sh->d; d++)
            col[d * gp] = (float)spa_dsa_value(&e->q, t * e->q.strides[0] + hq * e->q.strides[1] + d * e->q.strides[2]);
        w[c * gp + l] = (float)spa_dsa_value(&e->w, t * e->w.strides[0] + hq * e->w.strides[1]);
    }
    const spa_dsli_args a = {qt, w, sh->chunks, sh->g, gp, dp};
    for (int64_t r0 = s0; r0 < s1; r0 += tk) {
        const int64_t n = s1 - r0 < tk ? s1 - r0 : tk, rows = (n + 15) / 16 * 16;
        for (int64_t i = 0; i < rows; i++) {
            if (i < n)
                gather_row(r, b, h, r0 + i, kr + i * dp);
            else
                memset(kr + i * dp, 0, 4u * (size_t)dp);
        }
        SPA_K_DSA_LIGHTNING_INDEXER(&a, kr, rows, s, o);
        for (int64_t i = 0; i < n; i++)
            out[r0 + i] = (double)o[i];
    }
}

#if SPA_FLOAT64_DSA_LIGHTNING_INDEXER
/* The same sums in double (float64): per head q . k over the head dim in
 * order, max(0, x) under the kernel's rule (NaN kept), the heads' products
 * with w in order. */
static void scores_f64(const dsli_run *r, int64_t t, int64_t h, int64_t b, int64_t s0, int64_t s1,
                       unsigned char *scratch, double *out)
{
    const dsli_exec *e = r->e;
    const dsli_shape *sh = &r->p->sh;
    const int64_t dp = sh->dp;
    const dsli_layout lay = layout_of(sh);
    double *q = (double *)(void *)scratch, *w = (double *)(void *)(scratch + lay.w);
    double *kr = (double *)(void *)(scratch + lay.rows);
    for (int64_t g = 0; g < sh->g; g++) {
        const int64_t hq = h * sh->g + g;
        for (int64_t d = 0; d < sh->d; d++)
            q[g * dp + d] = spa_dsa_value(&e->q, t * e->q.strides[0] + hq * e->q.strides[1] + d * e->q.strides[2]);
        w[g] = spa_dsa_value(&e->w, t * e->w.strides[0] + hq * e->w.strides[1]);
    }
    for (int64_t s = s0; s < s1; s++) {
        gather_row(r, b, h, s, kr);
        double acc = 0.0;
        for (int64_t g = 0; g < sh->g; g++) {
            double dot = 0.0;
            for (int64_t d = 0; d < sh->d; d++)
                dot += q[g * dp + d] * kr[d];
            acc += w[g] * (0.0 > dot ? 0.0 : dot);
        }
        out[s] = acc;
    }
}
#endif

/* Parts blk, blk + blocks, ... of the round (part i: keys of part i %
 * parts of round unit i / parts): their scores. */
static void run_scores_block(void *arg, uint32_t blk)
{
    const dsli_run *r = arg;
    const dsli_plan *p = r->p;
    unsigned char *scratch = r->scratch + (uint64_t)blk * p->scratch_bytes;
    for (int64_t i = (int64_t)blk; i < p->round * p->parts; i += (int64_t)p->blocks) {
        const int64_t ru = i / p->parts, part = i - ru * p->parts;
        int64_t t, h, b, seen;
        if (!unit_of(r, ru, &t, &h, &b, &seen))
            return; /* past the last unit: so are the later parts */
        const int64_t s0 = part * SPA_DSLI_PART_ROWS;
        const int64_t s1 = s0 + SPA_DSLI_PART_ROWS < seen ? s0 + SPA_DSLI_PART_ROWS : seen;
        if (s0 >= s1)
            continue;
        double *out = r->scores + ru * p->lmax;
#if SPA_FLOAT64_DSA_LIGHTNING_INDEXER
        if (is_f64(&p->sh)) {
            scores_f64(r, t, h, b, s0, s1, scratch, out);
            continue;
        }
#endif
        scores_f32(r, t, h, b, s0, s1, scratch, out);
    }
}

/* Element i of output x (values: a float dtype) set to v. */
static void put_value(const spa_tensor *x, int64_t i, double v)
{
    switch (x->dtype) {
    case SPA_FLOAT64:
        ((double *)x->data)[i] = v;
        break;
    case SPA_FLOAT32:
        ((float *)x->data)[i] = (float)v;
        break;
    case SPA_BFLOAT16:
        ((uint16_t *)x->data)[i] = spa_f32_to_bf16((float)v);
        break;
    default:
        ((uint16_t *)x->data)[i] = spa_f32_to_f16((float)v);
        break;
    }
}

/* Round unit blk: the top K of its scores into its output rows. */
static void run_topk_block(void *arg, uint32_t blk)
{
    const dsli_run *r = arg;
    const dsli_plan *p = r->p;
    const dsli_exec *e = r->e;
    int64_t t, h, b, seen;
    if (!unit_of(r, (int64_t)blk, &t, &h, &b, &seen))
        return;
    unsigned char *scratch = r->scratch + (uint64_t)blk * p->scratch_bytes;
    double *hv = (double *)(void *)scratch;
    int32_t *hk = (int32_t *)(void *)(scratch + layout_of(&p->sh).keys);
    const int64_t m = spa_dsa_topk(r->scores + (int64_t)blk * p->lmax, seen, p->sh.kc, hv, hk);
    for (int64_t j = 0; j < p->sh.kc; j++) {
        const int64_t io = t * e->idx.strides[0] + h * e->idx.strides[1] + j * e->idx.strides[2];
        ((int32_t *)e->idx.data)[io] = j < m ? hk[j] : -1;
        if (e->has_val)
            put_value(&e->val, t * e->val.strides[0] + h * e->val.strides[1] + j * e->val.strides[2],
                      j < m ? hv[j] : -HUGE_VAL);
    }
}

spa_status spa_dsa_lightning_indexer_phase2(void *workspace, uint64_t workspace_size,
                                            const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    dsli_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_DSA_LIGHTNING_INDEXER));
    dsli_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_REQUIRE(e.lmax >= 0 && e.lmax <= sh.kv.kv_cap && e.lmax <= INT32_MAX);
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    const spa_tensor *tensors[] = {&e.q, &e.k, &e.w, &e.idx, e.has_val ? &e.val : NULL,
                                   e.has_table ? &e.table : NULL};
    const spa_int_array *arrays[] = {e.has_skv ? &e.skv : NULL, e.has_sq ? &e.sq : NULL};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 6, arrays, 2));
    dsli_plan p;
    make_plan(&sh, e.lmax, &p);
    SPA_REQUIRE(planned_bytes(&p) == e.head.ws_size);
    spa_ws ws;
    dsli_run r;
    int64_t *sq, *kv, *qs, *ks, lmax;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    carve(&ws, &p, &sq, &kv, &qs, &ks, &r.scores, &r.scratch);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(check_seq(&e, &sh, sq, kv, ks, &lmax));
    SPA_REQUIRE(lmax <= e.lmax /* the lengths phase 1 planned for */);
    for (int64_t b = 0, t = 0; b < sh.batches; t += sq[b], b++)
        qs[b] = t;
    SPA_TRY(check_table(&e, &sh, kv));
    if (sh.t == 0)
        return SPA_OK;
    r.e = &e, r.p = &p, r.sq = sq, r.kv = kv, r.qs = qs, r.ks = ks;
    for (r.u0 = 0; r.u0 < p.units; r.u0 += p.round) { /* a round's scores, then its top K */
        spa_run_blocks(&rn, run_scores_block, &r, p.blocks);
        const int64_t n = p.units - r.u0 < p.round ? p.units - r.u0 : p.round;
        spa_run_blocks(&rn, run_topk_block, &r, (uint32_t)n);
    }
    return SPA_OK;
}

spa_status spa_dsa_lightning_indexer_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *weights, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len, int64_t sparse_count,
    int64_t sparse_mode, const spa_tensor *sparse_indices_out, const spa_tensor *sparse_values_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(query, key, weights, block_table, actual_seq_q_len, actual_seq_kv_len,
                                     sparse_count, sparse_mode, sparse_indices_out, sparse_values_out,
                                     workspace_size, executor),
                              executor, SPA_OP_DSA_LIGHTNING_INDEXER, 1);
}

spa_status spa_dsa_lightning_indexer(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                     const spa_runner *runner)
{
    return spa_public_status(spa_dsa_lightning_indexer_phase2(workspace, workspace_size, executor, runner));
}
