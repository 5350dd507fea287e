/* LightningIndexerGrad, native (spattn/dsa.h): the gradient of the
 * lightning indexer's scores at the keys an index selects.
 *
 * A unit is one (query token, key head) with all G heads of the group. It
 * widens its heads (transposed and as rows) and weights, then walks its
 * slots in order, a tile at a time (tile_rows: the generated tile's
 * buffer, SPA_DSLI_GRAD_TK rows of the widest head dim, holds more rows of
 * a narrower one: 80 of DeepSeek's D 128): the keys they select are
 * gathered as f32 rows with the gradient of their score, and the
 * generated kernel (templates/dsa/dsa_lightning_indexer_grad.c.m4) adds
 * their terms to dq and dweights (kept per unit) and writes their dk rows,
 * which the unit then adds, in slot order, into its token range's partial
 * (dsa_grad_rows.h: the ranges run as parallel blocks, each key row's
 * partials are summed in range order, so nothing depends on the runner).
 * float64 runs the same walk in double, one key at a time.
 *
 * Every index is checked in phase 1 and again in phase 2 before anything
 * is written; the walk reads each index once more and uses it only if it
 * is still a key the query sees (an array rewritten during the call loses
 * those keys, never reads outside the key). */
#include <string.h>

#include "attn_plan.h"
#include "dsa_grad_rows.h"
#include "dsa_kv.h"
#include "f64.h"
#include "half.h"
#include "internal.h"
#include "nsa_cache_rows.h"
#include "nsa_select_plan.h"
#include "spa_kernels.h"
#include "spattn/dsa.h"

/* float64: the walk in double, where the build has float64 */
#define SPA_FLOAT64_DSA_LIGHTNING_INDEXER_GRAD SPA_HAVE_F64

enum { DSLIG_CHUNK = 32 }; /* heads per chunk of the kernel's lanes */

/* The call's arguments as phase 1 took them: all phase 2 reads of it. */
typedef struct dslig_exec {
    spa_exec_head head;
    spa_tensor q, k, w, idx, dy, dq, dk, dw;
    spa_int_array sq, skv;
    int64_t mode;
    int32_t has_sq, has_skv;
} dslig_exec;
_Static_assert(sizeof(dslig_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

/* What the arguments determine (derived again in phase 2). */
typedef struct dslig_shape {
    spa_dsa_kv kv;
    int64_t t, n1, n2, g, d, dp, kc, batches;
    int64_t chunks, gp; /* heads in chunks of gp lanes */
    int32_t dtype;
} dslig_shape;

/* A range's scratch (64-byte aligned parts). f32: qt and dqt
 * [chunks][dp][gp], qn [chunks][gp][dp], w and dw [chunks][gp], key and
 * dk rows [tk][dp], dy [tk], scores [tk][gp], the rows' keys [tk]. f64:
 * q and dq [G][dp], w and dw [G], a key and a dk row [dp]. */
typedef struct dslig_layout {
    uint64_t qt, dqt, qn, w, dw, kr, dkr, dy, s, pos, bytes;
} dslig_layout;

typedef struct dslig_plan {
    dslig_shape sh;
    spa_dsa_ranges rg; /* partial rows of dp floats (f64: D doubles) */
    dslig_layout lay;
} dslig_plan;

static bool is_f64(const dslig_shape *sh)
{
    return sh->dtype == SPA_FLOAT64;
}

/* x: an output of like's dims and dtype dt. */
static spa_status check_out(const spa_tensor *x, const spa_tensor *like, int32_t dt)
{
    SPA_TRY(spa_tensor_check_output(x, like->rank));
    SPA_REQUIRE(x->dtype == dt /* dquery_out, dkey_out: the query's dtype; dweights_out: the weights' */);
    SPA_REQUIRE(spa_tensor_dims_are(x, like->rank, like->dims) /* gradient outputs: the dims of their input */);
    return SPA_OK;
}

/* The rules that read no array contents. */
static spa_status check_args(const dslig_exec *e, dslig_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    SPA_TRY(spa_tensor_check(&e->q, 3));
    SPA_TRY(spa_dsa_kv_check(&e->k, NULL, e->has_sq ? &e->sq : NULL, e->has_skv ? &e->skv : NULL, e->q.dims[0],
                             &sh->kv));
    SPA_TRY(spa_tensor_check(&e->w, 2));
    SPA_TRY(spa_tensor_check(&e->idx, 3));
    SPA_TRY(spa_tensor_check(&e->dy, 3));
    const int32_t dt = e->q.dtype;
    SPA_REQUIRE(spa_is_float_dtype(dt) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_FLOAT64_DSA_LIGHTNING_INDEXER_GRAD);
    SPA_REQUIRE(e->k.dtype == dt /* key: the dtype of query */);
    SPA_REQUIRE(e->w.dtype == dt || e->w.dtype == SPA_FLOAT32 /* weights: the query's dtype or FLOAT32 */);
    SPA_REQUIRE(e->idx.dtype == SPA_INT32 || e->idx.dtype == SPA_INT64 /* sparse_indices: INT32 or INT64 */);
    SPA_REQUIRE(e->dy.dtype == dt || e->dy.dtype == SPA_FLOAT32 /* indices_grad: the query's dtype or FLOAT32 */);
    SPA_REQUIRE(e->mode == 0 || e->mode == 3 /* sparse_mode: 0 or 3 */);
    sh->t = e->q.dims[0], sh->n1 = e->q.dims[1], sh->d = e->q.dims[2];
    sh->n2 = sh->kv.kx.dims[2], sh->kc = e->idx.dims[2];
    SPA_REQUIRE(sh->n2 >= 1);
    SPA_REQUIRE(sh->n1 >= 1 && sh->n1 <= 256 /* query heads: 1 .. 256 */);
    SPA_REQUIRE(sh->n1 % sh->n2 == 0 /* query heads a multiple of key heads */);
    SPA_REQUIRE(sh->d >= 1 && sh->d <= 768 /* head dim: 1 .. 768 */);
    SPA_REQUIRE(sh->kv.kx.dims[3] == sh->d /* key head dim == query head dim */);
    SPA_REQUIRE(sh->kc >= 1 && sh->kc <= 65536 /* sparse_indices: K 1 .. 65536 */);
    const int64_t wd[2] = {sh->t, sh->n1}, id[3] = {sh->t, sh->n2, sh->kc};
    SPA_REQUIRE(spa_tensor_dims_are(&e->w, 2, wd) /* weights: [T, N1] */);
    SPA_REQUIRE(spa_tensor_dims_are(&e->idx, 3, id) /* sparse_indices: [T, N2, K] */);
    SPA_REQUIRE(spa_tensor_dims_are(&e->dy, 3, id) /* indices_grad: [T, N2, K] */);
    SPA_TRY(check_out(&e->dq, &e->q, dt));
    SPA_TRY(check_out(&e->dk, &e->k, dt));
    SPA_TRY(check_out(&e->dw, &e->w, e->w.dtype));
    sh->batches = sh->kv.batches;
    int64_t units;
    SPA_REQUIRE(spa_mul_ok(sh->t, sh->n1, &units) /* T * N1 heads */);
    sh->g = sh->n1 / sh->n2;
    sh->chunks = (sh->g + DSLIG_CHUNK - 1) / DSLIG_CHUNK;
    sh->gp = spa_nsas_lanes(sh->g < DSLIG_CHUNK ? sh->g : DSLIG_CHUNK);
    sh->dp = (sh->d + 15) / 16 * 16;
    sh->dtype = dt;
    return SPA_OK;
}

/* Index (t, n, j), read once. */
static int64_t index_at(const spa_tensor *idx, int64_t t, int64_t n, int64_t j)
{
    const int64_t i = t * idx->strides[0] + n * idx->strides[1] + j * idx->strides[2];
    if (idx->dtype == SPA_INT64)
        return ((const volatile int64_t *)idx->data)[i];
    return ((const volatile int32_t *)idx->data)[i];
}

static spa_dsa_lens lens_of(const dslig_exec *e, const dslig_shape *sh, const int64_t *sq, const int64_t *kv)
{
    const spa_dsa_lens l = {sq, kv, e->has_sq ? &e->sq : NULL, e->has_skv ? &e->skv : NULL,
                            sh->batches, sh->t, sh->kv.page_size};
    return l;
}

/* Every index: -1, or a key of the batch the query sees. */
static spa_status check_indices(const dslig_exec *e, const dslig_shape *sh, const spa_dsa_lens *l)
{
    for (int64_t b = 0, t = 0; b < sh->batches; b++) {
        const int64_t nq = spa_dsa_lens_nq(l, b), len = spa_dsa_lens_kv(l, b);
        for (int64_t i = 0; i < nq && t < sh->t; i++, t++) {
            const int64_t seen = spa_dsa_seen(e->mode, len, nq, i);
            for (int64_t n = 0; n < sh->n2; n++)
                for (int64_t j = 0; j < sh->kc; j++) {
                    const int64_t x = index_at(&e->idx, t, n, j);
                    SPA_REQUIRE((x == -1 || (x >= 0 && x < seen)) /* sparse_indices: -1 or a key the query sees */);
                }
        }
    }
    return SPA_OK;
}

/* Key rows per kernel call: the rows whose key and dk rows of dp floats
 * and 32 score lanes fit the buffer of SPA_DSLI_GRAD_TK rows of the widest
 * head dim (768; gen/tiles/dsa_lightning_indexer_grad.m4), a multiple of
 * 16. */
static int64_t tile_rows(const dslig_shape *sh)
{
    return SPA_DSLI_GRAD_TK * (2 * 768 + 32) / (2 * sh->dp + 32) / 16 * 16;
}

static uint64_t round64(uint64_t x)
{
    return (x + 63u) / 64u * 64u;
}

static void make_plan(const dslig_shape *sh, const spa_dsa_lens *l, dslig_plan *p)
{
    const dslig_shape shape = *sh; /* sh may be &p->sh */
    memset(p, 0, sizeof *p);
    p->sh = shape;
    sh = &p->sh;
    const bool f64 = is_f64(sh);
    const float work = 3.0f * (float)sh->t * (float)sh->g * (float)sh->kc * (float)sh->dp;
    spa_dsa_ranges_plan(l, work, f64 ? sh->d : sh->dp, f64 ? 8u : 4u, &p->rg);
    /* dims bounded (dp <= 768, chunks * gp <= 256): no overflow */
    dslig_layout *y = &p->lay;
    const uint64_t dp = (uint64_t)sh->dp;
    if (f64) {
        const uint64_t g = (uint64_t)sh->g;
        y->qt = 0, y->dqt = round64(8u * g * dp), y->w = y->dqt + y->dqt;
        y->dw = y->w + round64(8u * g), y->kr = y->dw + round64(8u * g);
        y->dkr = y->kr + round64(8u * dp), y->bytes = y->dkr + round64(8u * dp);
        return;
    }
    const uint64_t lanes = (uint64_t)(sh->chunks * sh->gp), tk = (uint64_t)tile_rows(sh);
    y->qt = 0, y->dqt = round64(4u * lanes * dp), y->qn = y->dqt + y->dqt;
    y->w = y->qn + y->dqt, y->dw = y->w + round64(4u * lanes), y->kr = y->dw + round64(4u * lanes);
    y->dkr = y->kr + round64(4u * tk * dp), y->dy = y->dkr + round64(4u * tk * dp);
    y->s = y->dy + round64(4u * tk), y->pos = y->s + round64(4u * tk * (uint64_t)sh->gp);
    y->bytes = y->pos + round64(8u * tk);
}

static void carve(spa_ws *ws, const dslig_plan *p, spa_dsa_grad_slices *s)
{
    spa_dsa_grad_carve(ws, sizeof(dslig_exec), p->sh.batches, &p->rg, p->lay.bytes, s);
}

static uint64_t planned_bytes(const dslig_plan *p)
{
    spa_ws ws;
    spa_dsa_grad_slices s;
    spa_ws_plan(&ws);
    carve(&ws, p, &s);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *query, const spa_tensor *key, const spa_tensor *weights,
                         const spa_tensor *sparse_indices, const spa_tensor *indices_grad,
                         const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
                         int64_t sparse_mode, const spa_tensor *dquery_out, const spa_tensor *dkey_out,
                         const spa_tensor *dweights_out, uint64_t *workspace_size, spa_executor *executor)
{
    if (query == NULL || key == NULL || weights == NULL || sparse_indices == NULL || indices_grad == NULL ||
        dquery_out == NULL || dkey_out == NULL || dweights_out == NULL || workspace_size == NULL ||
        executor == NULL)
        return SPA_ERR_NULLPTR;
    if (key->rank == 3 && actual_seq_kv_len == NULL)
        return SPA_ERR_NULLPTR; /* a TND key has no lengths of its own */
    dslig_exec e;
    memset(&e, 0, sizeof e);
    e.q = *query, e.k = *key, e.w = *weights, e.idx = *sparse_indices, e.dy = *indices_grad;
    e.dq = *dquery_out, e.dk = *dkey_out, e.dw = *dweights_out;
    if (actual_seq_q_len != NULL)
        e.sq = *actual_seq_q_len, e.has_sq = 1;
    if (actual_seq_kv_len != NULL)
        e.skv = *actual_seq_kv_len, e.has_skv = 1;
    e.mode = sparse_mode;
    dslig_shape sh;
    SPA_TRY(check_args(&e, &sh));
    int64_t lmax;
    SPA_TRY(spa_dsa_kv_check_seq(&sh.kv, e.has_sq ? &e.sq : NULL, e.has_skv ? &e.skv : NULL, sh.t, NULL, NULL,
                                 NULL, &lmax));
    const spa_dsa_lens l = lens_of(&e, &sh, NULL, NULL);
    dslig_plan p;
    make_plan(&sh, &l, &p);
    e.head.ws_size = planned_bytes(&p);
    SPA_REQUIRE(e.head.ws_size > 0);
    SPA_TRY(check_indices(&e, &sh, &l)); /* last: its cost grows with T * K */
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_DSA_LIGHTNING_INDEXER_GRAD);
    return SPA_OK;
}

typedef struct dslig_run {
    const dslig_exec *e;
    const dslig_plan *p;
    spa_dsa_grad_slices s;
    spa_dsa_partials part;
    int64_t n; /* the key head being run */
} dslig_run;

/* Element i of output x set to v, rounded once to its dtype. */
static void put(const spa_tensor *x, int64_t i, double v)
{
    spa_dsa_store_run(x->dtype, (unsigned char *)x->data + (size_t)i * spa_dtype_size(x->dtype), 1, &v, 1);
}

/* Token t's unit: its batch, the keys it sees. */
static int64_t unit_batch(const dslig_run *r, int64_t t, int64_t *seen)
{
    const int64_t b = spa_nsa_cache_batch_of(r->s.qs, r->p->sh.batches, t);
    *seen = spa_dsa_seen(r->e->mode, r->s.kv[b], r->s.sq[b], t - r->s.qs[b]);
    return b;
}

/* Key x of batch b, head r->n, into dst (pitch dp, the kernels' element). */
static void key_row(const dslig_run *r, int64_t b, int64_t x, void *dst)
{
    const dslig_shape *sh = &r->p->sh;
    const int64_t pg = sh->kv.tnd ? 0 : b;
    spa_nsa_cache_row(&sh->kv.kx, pg, spa_dsa_kv_row(&sh->kv, r->s.ks[b], x), r->n, sh->d, sh->dp, dst);
}

/* Unit (t, r->n) in f32 on the generated kernel: dq and dweights out, its
 * dk rows added into part (the range's partial, row 0 at partial row lo). */
static void unit_f32(const dslig_run *r, int64_t t, unsigned char *scratch, unsigned char *part, int64_t lo)
{
    const dslig_exec *e = r->e;
    const dslig_plan *p = r->p;
    const dslig_shape *sh = &p->sh;
    const dslig_layout *y = &p->lay;
    const int64_t dp = sh->dp, gp = sh->gp, tk = tile_rows(sh);
    float *qt = (float *)(void *)(scratch + y->qt), *dqt = (float *)(void *)(scratch + y->dqt);
    float *qn = (float *)(void *)(scratch + y->qn), *w = (float *)(void *)(scratch + y->w);
    float *dw = (float *)(void *)(scratch + y->dw), *kr = (float *)(void *)(scratch + y->kr);
    float *dkr = (float *)(void *)(scratch + y->dkr), *dy = (float *)(void *)(scratch + y->dy);
    float *s = (float *)(void *)(scratch + y->s);
    int64_t *pos = (int64_t *)(void *)(scratch + y->pos);
    memset(scratch, 0, (size_t)y->kr); /* qt, dqt, qn, w, dw: lanes past G stay 0 */
    for (int64_t g = 0; g < sh->g; g++) { /* head g: chunk g / 32, lane g % 32 */
        const int64_t hq = r->n * sh->g + g, c = g / DSLIG_CHUNK, l = g % DSLIG_CHUNK;
        for (int64_t d = 0; d < sh->d; d++) {
            const float x = (float)spa_dsa_value(&e->q, t * e->q.strides[0] + hq * e->q.strides[1] + d * e->q.strides[2]);
            qt[c * dp * gp + d * gp + l] = x;
            qn[c * gp * dp + l * dp + d] = x;
        }
        w[c * gp + l] = (float)spa_dsa_value(&e->w, t * e->w.strides[0] + hq * e->w.strides[1]);
    }
    int64_t seen;
    const int64_t b = unit_batch(r, t, &seen), first = r->s.kf[b] - lo;
    const spa_dsli_grad_args a = {{qt, w, sh->chunks, sh->g, gp, dp}, qn, dqt, dw};
    for (int64_t j0 = 0; j0 < sh->kc; j0 += tk) {
        const int64_t j1 = sh->kc - j0 < tk ? sh->kc : j0 + tk;
        int64_t n = 0;
        for (int64_t j = j0; j < j1; j++) {
            const int64_t x = index_at(&e->idx, t, r->n, j);
            if (x < 0 || x >= seen) /* padding, or a value rewritten since the check */
                continue;
            key_row(r, b, x, kr + n * dp);
            dy[n] = (float)spa_dsa_value(&e->dy, t * e->dy.strides[0] + r->n * e->dy.strides[1] + j * e->dy.strides[2]);
            pos[n++] = x;
        }
        if (n == 0)
            continue;
        const int64_t rows = (n + 15) / 16 * 16;
        memset(kr + n * dp, 0, 4u * (size_t)((rows - n) * dp));
        memset(dkr, 0, 4u * (size_t)(rows * dp));
        SPA_K_DSA_LIGHTNING_INDEXER_GRAD(&a, kr, dy, rows, n, s, dkr);
        for (int64_t i = 0; i < n; i++) { /* pos[i] < seen <= L_b: inside the range's rows */
            float *dst = (float *)(void *)part + (first + pos[i]) * dp;
            for (int64_t d = 0; d < dp; d++)
                dst[d] += dkr[i * dp + d];
        }
    }
    for (int64_t g = 0; g < sh->g; g++) {
        const int64_t hq = r->n * sh->g + g, c = g / DSLIG_CHUNK, l = g % DSLIG_CHUNK;
        for (int64_t d = 0; d < sh->d; d++)
            put(&e->dq, t * e->dq.strides[0] + hq * e->dq.strides[1] + d * e->dq.strides[2],
                (double)(dqt[c * dp * gp + d * gp + l] + 0.0f));
        put(&e->dw, t * e->dw.strides[0] + hq * e->dw.strides[1], (double)(dw[c * gp + l] + 0.0f));
    }
}

#if SPA_FLOAT64_DSA_LIGHTNING_INDEXER_GRAD
/* The same in double, one key at a time: per head q . k over the head dim
 * in order, dw and dq in slot order, the key's dk over the heads in order. */
static void unit_f64(const dslig_run *r, int64_t t, unsigned char *scratch, unsigned char *part, int64_t lo)
{
    const dslig_exec *e = r->e;
    const dslig_plan *p = r->p;
    const dslig_shape *sh = &p->sh;
    const dslig_layout *y = &p->lay;
    const int64_t dp = sh->dp, d = sh->d;
    double *q = (double *)(void *)(scratch + y->qt), *dq = (double *)(void *)(scratch + y->dqt);
    double *w = (double *)(void *)(scratch + y->w), *dw = (double *)(void *)(scratch + y->dw);
    double *kr = (double *)(void *)(scratch + y->kr), *dkr = (double *)(void *)(scratch + y->dkr);
    memset(scratch, 0, (size_t)y->kr);
    for (int64_t g = 0; g < sh->g; g++) {
        const int64_t hq = r->n * sh->g + g;
        for (int64_t i = 0; i < d; i++)
            q[g * dp + i] = spa_dsa_value(&e->q, t * e->q.strides[0] + hq * e->q.strides[1] + i * e->q.strides[2]);
        w[g] = spa_dsa_value(&e->w, t * e->w.strides[0] + hq * e->w.strides[1]);
    }
    int64_t seen;
    const int64_t b = unit_batch(r, t, &seen), first = r->s.kf[b] - lo;
    for (int64_t j = 0; j < sh->kc; j++) {
        const int64_t x = index_at(&e->idx, t, r->n, j);
        if (x < 0 || x >= seen)
            continue;
        key_row(r, b, x, kr);
        const double dyj = spa_dsa_value(&e->dy, t * e->dy.strides[0] + r->n * e->dy.strides[1] + j * e->dy.strides[2]);
        for (int64_t i = 0; i < d; i++)
            dkr[i] = 0.0;
        for (int64_t g = 0; g < sh->g; g++) {
            double dot = 0.0;
            for (int64_t i = 0; i < d; i++)
                dot += q[g * dp + i] * kr[i];
            dw[g] += dyj * (0.0 > dot ? 0.0 : dot); /* NaN kept */
            const double c = dot > 0.0 ? dyj * w[g] : 0.0;
            for (int64_t i = 0; i < d; i++) {
                dq[g * dp + i] += c * kr[i];
                dkr[i] += c * q[g * dp + i];
            }
        }
        double *dst = (double *)(void *)part + (first + x) * d;
        for (int64_t i = 0; i < d; i++)
            dst[i] += dkr[i];
    }
    for (int64_t g = 0; g < sh->g; g++) {
        const int64_t hq = r->n * sh->g + g;
        for (int64_t i = 0; i < d; i++)
            put(&e->dq, t * e->dq.strides[0] + hq * e->dq.strides[1] + i * e->dq.strides[2], dq[g * dp + i] + 0.0);
        put(&e->dw, t * e->dw.strides[0] + hq * e->dw.strides[1], dw[g] + 0.0);
    }
}
#endif

/* Step 1, token range `range` of key head r->n: its partial zeroed, then
 * its units in token order. */
static void run_range(void *arg, uint32_t range)
{
    const dslig_run *r = arg;
    const dslig_plan *p = r->p;
    const int64_t lo = r->s.lo[range], nrows = r->s.hi[range] - lo;
    unsigned char *part = spa_dsa_partial_of(&r->part, range);
    memset(part, 0, (size_t)((uint64_t)(nrows * p->rg.pitch) * p->rg.es)); /* all-zero bits: +0 */
    unsigned char *scratch = r->s.scratch + (uint64_t)range * p->lay.bytes;
    int64_t t0, t1;
    spa_attn_range_tokens((int64_t)range, p->rg.per_range, p->sh.t, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
#if SPA_FLOAT64_DSA_LIGHTNING_INDEXER_GRAD
        if (is_f64(&p->sh)) {
            unit_f64(r, t, scratch, part, lo);
            continue;
        }
#endif
        unit_f32(r, t, scratch, part, lo);
    }
}

/* Step 2: SPA_DSA_REDUCE_ROWS output rows (over pages, then rows) of key
 * head r->n. */
static void run_reduce(void *arg, uint32_t task)
{
    const dslig_run *r = arg;
    const dslig_shape *sh = &r->p->sh;
    const int64_t per_page = (sh->kv.page_size + SPA_DSA_REDUCE_ROWS - 1) / SPA_DSA_REDUCE_ROWS;
    const int64_t pg = (int64_t)task / per_page, row0 = ((int64_t)task % per_page) * SPA_DSA_REDUCE_ROWS;
    const int64_t row1 = row0 + SPA_DSA_REDUCE_ROWS < sh->kv.page_size ? row0 + SPA_DSA_REDUCE_ROWS : sh->kv.page_size;
    const spa_tensor dkx = spa_dsa_kv_view(&r->e->dk);
    const size_t es = spa_dtype_size(sh->dtype);
    enum { CHUNK = SPA_DSA_SUM_MAX };
    double acc[CHUNK];
    for (int64_t row = row0; row < row1; row++) {
        const int64_t prow = spa_dsa_partial_row(&sh->kv, r->s.ks, r->s.kv, r->s.kf, pg, row);
        for (int64_t c0 = 0; c0 < sh->d; c0 += CHUNK) {
            const int64_t cn = sh->d - c0 < CHUNK ? sh->d - c0 : CHUNK;
            spa_dsa_partials_sum(&r->part, prow, c0, cn, acc);
            for (int64_t i = 0; i < cn; i++)
                acc[i] += 0.0; /* -0 sums to +0, as every op stores */
            spa_dsa_store_run(sh->dtype,
                              (unsigned char *)dkx.data + (size_t)(pg * dkx.strides[0] + row * dkx.strides[1] +
                                                                   r->n * dkx.strides[2] + c0 * dkx.strides[3]) * es,
                              dkx.strides[3], acc, cn);
        }
    }
}

/* Phase 2 up to the kernels: every argument checked again, the lengths
 * copied and the plan derived again from the copies, the indices checked,
 * the range table filled. Out of line, so that its locals are off the
 * stack when the kernels run. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static spa_status prepare(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                          dslig_plan *p, spa_dsa_grad_slices *s, spa_dsa_partials *part)
{
    dslig_exec ex, *e = &ex;
    SPA_TRY(spa_exec_open(executor, e, sizeof *e, SPA_OP_DSA_LIGHTNING_INDEXER_GRAD));
    dslig_shape sh;
    SPA_TRY(check_args(e, &sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e->head.ws_size));
    const spa_tensor *tensors[] = {&e->q, &e->k, &e->w, &e->idx, &e->dy, &e->dq, &e->dk, &e->dw};
    const spa_int_array *arrays[] = {e->has_skv ? &e->skv : NULL, e->has_sq ? &e->sq : NULL};
    SPA_TRY(spa_ws_check_disjoint(workspace, e->head.ws_size, tensors, 8, arrays, 2));
    /* the lengths first (their slices, carve's first four, do not depend
     * on them), then the plan from the copies */
    spa_ws ws;
    spa_ws_attach(&ws, workspace, e->head.ws_size);
    spa_dsa_grad_head(&ws, sizeof *e, sh.batches, s);
    SPA_REQUIRE(!ws.overflow);
    int64_t *sq = s->sq, *kv = s->kv, *ks = s->ks;
    int64_t lmax;
    SPA_TRY(spa_dsa_kv_check_seq(&sh.kv, e->has_sq ? &e->sq : NULL, e->has_skv ? &e->skv : NULL, sh.t, sq, kv, ks,
                                 &lmax));
    const spa_dsa_lens l = lens_of(e, &sh, sq, kv);
    make_plan(&sh, &l, p);
    SPA_REQUIRE(planned_bytes(p) == e->head.ws_size);
    spa_ws_attach(&ws, workspace, e->head.ws_size);
    carve(&ws, p, s);
    SPA_REQUIRE(!ws.overflow && s->sq == sq && s->kv == kv && s->ks == ks);
    memcpy(s->exec, e, sizeof *e); /* what phase 2 runs from, off the stack */
    SPA_TRY(check_indices(e, &p->sh, &l));
    spa_dsa_grad_tables(&l, &p->rg, s, part);
    return SPA_OK;
}

spa_status spa_dsa_lightning_indexer_grad_phase2(void *workspace, uint64_t workspace_size,
                                                 const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    dslig_plan p;
    dslig_run r;
    SPA_TRY(prepare(workspace, workspace_size, executor, &p, &r.s, &r.part));
    r.e = r.s.exec, r.p = &p;
    const int64_t reduce_tasks = spa_dsa_reduce_tasks(&p.sh.kv);
    for (r.n = 0; r.n < p.sh.n2; r.n++) {
        if (p.sh.t > 0)
            spa_run_blocks(&rn, run_range, &r, (uint32_t)p.rg.ranges);
        spa_run_blocks(&rn, run_reduce, &r, (uint32_t)reduce_tasks);
    }
    return SPA_OK;
}

spa_status spa_dsa_lightning_indexer_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *weights, const spa_tensor *sparse_indices,
    const spa_tensor *indices_grad, const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    int64_t sparse_mode, const spa_tensor *dquery_out, const spa_tensor *dkey_out, const spa_tensor *dweights_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(query, key, weights, sparse_indices, indices_grad, actual_seq_q_len,
                                     actual_seq_kv_len, sparse_mode, dquery_out, dkey_out, dweights_out,
                                     workspace_size, executor),
                              executor, SPA_OP_DSA_LIGHTNING_INDEXER_GRAD, 1);
}

spa_status spa_dsa_lightning_indexer_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                          const spa_runner *runner)
{
    return spa_public_status(spa_dsa_lightning_indexer_grad_phase2(workspace, workspace_size, executor, runner));
}
