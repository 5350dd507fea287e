/* aclnnNsaSelectedAttentionInfer: CANN's sample call gives its result, a
 * random paged problem gives the native operator's bytes (on the TND views
 * of the same memory), and CANN's rules give CANN's codes. */
#include <CUnit/Basic.h>

#if !defined(SPA_HAVE_ACL)
void suite_acl_infer(void);
void suite_acl_infer(void)
{
}
#else

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_nsa_compress_attention_infer.h"
#include "aclnnop/aclnn_nsa_compress_with_cache.h"
#include "aclnnop/aclnn_nsa_select_attention_infer.h"
#include "spa_acl_ops.h"
#include "spattn/nsa_infer.h"
#include "acl_util.h"
#include "util.h"

#if SPA_HAVE_NSA_SELECT_INFER && SPA_HAVE_NSA_COMPRESS_WITH_CACHE && SPA_HAVE_NSA_CATTN_INFER

/* A BSND problem: query [B, S, N1, 192], pools [blocks, page, N2, 192 | 128],
 * table [B, cols], topk [B, S, N2, K], output [B, S, N1, 128]. */
typedef struct infer_case {
    ttensor q, k, v, topk, table, o;
    int64_t b, s, n1, n2, page, bs, kc, sq[4], len[4];
    spa_dtype dt;
} infer_case;

static void case_make(infer_case *c, spa_dtype dt, int64_t b, int64_t s, int64_t n1, int64_t n2, int64_t page,
                      int64_t bs, int64_t kc, const int64_t *len, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = dt, c->b = b, c->s = s, c->n1 = n1, c->n2 = n2, c->page = page, c->bs = bs, c->kc = kc;
    int64_t pages = 0, cols = 1;
    for (int64_t i = 0; i < b; i++) {
        c->len[i] = len[i], c->sq[i] = s;
        const int64_t np = (len[i] + page - 1) / page;
        pages += np;
        cols = np > cols ? np : cols;
    }
    const int64_t qd[4] = {b, s, n1, 192}, kd[4] = {pages, page, n2, 192}, vd[4] = {pages, page, n2, 128};
    const int64_t td[2] = {b, cols}, id[4] = {b, s, n2, kc}, od[4] = {b, s, n1, 128};
    tt_make(&c->q, dt, 4, qd, false, r);
    tt_make(&c->k, dt, 4, kd, false, r);
    tt_make(&c->v, dt, 4, vd, false, r);
    tt_make(&c->table, SPA_INT32, 2, td, false, r);
    tt_make(&c->topk, SPA_INT32, 4, id, false, r);
    tt_make(&c->o, dt, 4, od, false, r);
    tt_fill_random(&c->q, r, -1.0, 1.0);
    tt_fill_random(&c->k, r, -1.0, 1.0);
    tt_fill_random(&c->v, r, -1.0, 1.0);
    for (int64_t i = 0, used = 0; i < b; i++) /* pages in reverse order */
        for (int64_t j = 0; j < cols; j++)
            tt_set_int(&c->table, i * cols + j, j < (len[i] + page - 1) / page ? pages - 1 - used++ : -1);
    for (int64_t i = 0; i < b; i++)
        for (int64_t j = 0; j < s; j++)
            for (int64_t h = 0; h < n2; h++)
                for (int64_t x = 0; x < kc; x++) {
                    const int64_t pos = len[i] - s + j;
                    tt_set_int(&c->topk, ((i * s + j) * n2 + h) * kc + x, x == 0 ? pos / bs : rng_int(r, -1, pos / bs));
                }
}

static void case_free(infer_case *c)
{
    tt_free(&c->q), tt_free(&c->k), tt_free(&c->v), tt_free(&c->table), tt_free(&c->topk), tt_free(&c->o);
}

/* Phase 1 through aclnn with the case's arguments (overridable). */
static aclnnStatus acl_phase1(infer_case *c, const char *layout, int64_t n1_attr, int64_t page_attr, bool no_table,
                              uint64_t *size, aclOpExecutor **ex)
{
    aclTensor *q = acl_of(&c->q.t), *k = acl_of(&c->k.t), *v = acl_of(&c->v.t), *i = acl_of(&c->topk.t);
    aclTensor *t = acl_of(&c->table.t), *o = acl_of(&c->o.t);
    aclIntArray *sq = aclCreateIntArray(c->sq, (uint64_t)c->b), *skv = aclCreateIntArray(c->len, (uint64_t)c->b);
    char lay[8];
    snprintf(lay, sizeof lay, "%s", layout);
    aclnnStatus st = aclnnNsaSelectedAttentionInferGetWorkspaceSize(
        q, k, v, i, NULL, no_table ? NULL : t, sq, skv, lay, n1_attr, c->n2, c->bs, c->kc, page_attr, 0.0721, 0,
        o, size, ex);
    aclDestroyTensor(q), aclDestroyTensor(k), aclDestroyTensor(v), aclDestroyTensor(i), aclDestroyTensor(t);
    aclDestroyTensor(o), aclDestroyIntArray(sq), aclDestroyIntArray(skv);
    return st;
}

static aclnnStatus acl_run(infer_case *c)
{
    uint64_t size = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = acl_phase1(c, "BSND", c->n1, c->page, false, &size, &ex);
    if (st != ACLNN_SUCCESS)
        return st;
    void *ws = size ? malloc(size) : NULL;
    st = aclnnNsaSelectedAttentionInfer(ws, size, ex, NULL);
    free(ws);
    return st;
}

/* CANN's sample: all ones, one block of 48 keys -> every output 1.0. */
static void test_cann_sample(void)
{
    rng r = rng_seed(3001);
    infer_case c;
    const int64_t len[1] = {48};
    case_make(&c, SPA_FLOAT16, 1, 1, 1, 1, 64, 64, 1, len, &r);
    for (int64_t i = 0; i < tt_numel(&c.q); i++) /* 1.0 in f16 */
        ((uint16_t *)c.q.t.data)[i] = 0x3C00;
    for (int64_t i = 0; i < tt_numel(&c.k); i++)
        ((uint16_t *)c.k.t.data)[i] = 0x3C00;
    for (int64_t i = 0; i < tt_numel(&c.v); i++)
        ((uint16_t *)c.v.t.data)[i] = 0x3C00;
    tt_set_int(&c.table, 0, 0);
    tt_set_int(&c.topk, 0, 0);
    CU_ASSERT_EQUAL(acl_run(&c), ACLNN_SUCCESS);
    for (int64_t i = 0; i < tt_numel(&c.o); i++)
        CU_ASSERT_EQUAL(tt_get(&c.o, i), 1.0);
    case_free(&c);
}

/* The bytes of the native operator on the TND views of the same memory. */
static void test_same_as_native(void)
{
    rng r = rng_seed(3002);
    for (int k = 0; k < 2; k++) {
        infer_case c;
        const int64_t len[2] = {300, 700};
        case_make(&c, k ? SPA_BFLOAT16 : SPA_FLOAT16, 2, 2, 32, 2, 128, 64, 4, len, &r);
        CU_ASSERT_EQUAL(acl_run(&c), ACLNN_SUCCESS);
        unsigned char *via_acl = tt_snapshot(&c.o);
        spa_tensor q = c.q.t, o = c.o.t, idx = c.topk.t;
        q.rank = 3, q.dims[0] = 4, q.dims[1] = 32, q.dims[2] = 192, q.strides[0] = 32 * 192, q.strides[1] = 192,
        q.strides[2] = 1;
        o.rank = 3, o.dims[0] = 4, o.dims[1] = 32, o.dims[2] = 128, o.strides[0] = 32 * 128, o.strides[1] = 128,
        o.strides[2] = 1;
        idx.rank = 3, idx.dims[0] = 4, idx.dims[1] = 2, idx.dims[2] = 4, idx.strides[0] = 8, idx.strides[1] = 4,
        idx.strides[2] = 1;
        const spa_int_array sq = {c.sq, 2}, skv = {c.len, 2};
        uint64_t size;
        spa_executor ex;
        tt_fill_canary(&c.o);
        CU_ASSERT_EQUAL(spa_nsa_select_infer_get_workspace_size(&q, &c.k.t, &c.v.t, &idx, &c.table.t, &sq, &skv,
                                                                0.0721, 64, &o, &size, &ex),
                        SPA_OK);
        void *ws = malloc(size);
        CU_ASSERT_EQUAL(spa_nsa_select_infer(ws, size, &ex, NULL), SPA_OK);
        free(ws);
        CU_ASSERT(tt_same_bytes(&c.o, via_acl));
        free(via_acl);
        case_free(&c);
    }
}

/* CANN's rules and codes. */
static void test_cann_codes(void)
{
    rng r = rng_seed(3003);
    infer_case c;
    const int64_t len[1] = {100};
    case_make(&c, SPA_FLOAT16, 1, 1, 4, 1, 64, 64, 2, len, &r);
    uint64_t size;
    aclOpExecutor *ex;
    CU_ASSERT_EQUAL(acl_phase1(&c, "BSND", 4, 64, false, &size, &ex), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(acl_phase1(&c, "BSND", 4, 64, true, &size, &ex), ACLNN_ERR_INNER_NULLPTR); /* no table */
    CU_ASSERT_EQUAL(acl_phase1(&c, "BNSD", 4, 64, false, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    CU_ASSERT_EQUAL(acl_phase1(&c, "BSND", 3, 64, false, &size, &ex), ACLNN_ERR_INNER_NULLPTR); /* numHeads != N1 */
    CU_ASSERT_EQUAL(acl_phase1(&c, "BSND", 4, 32, false, &size, &ex), ACLNN_ERR_INNER_NULLPTR); /* page 32 */
    case_free(&c);
    case_make(&c, SPA_FLOAT16, 1, 1, 32, 1, 64, 64, 2, len, &r); /* G 32 */
    CU_ASSERT_EQUAL(acl_phase1(&c, "BSND", 32, 64, false, &size, &ex), ACLNN_ERR_INNER_NULLPTR);
    case_free(&c);
    case_make(&c, SPA_FLOAT32, 1, 1, 4, 1, 64, 64, 2, len, &r); /* f32 */
    CU_ASSERT_EQUAL(acl_phase1(&c, "BSND", 4, 64, false, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    tt_free(&c.q);
    const int64_t qd[4] = {1, 1, 4, 128}; /* D 128 */
    tt_make(&c.q, SPA_FLOAT16, 4, qd, false, &r);
    c.k.t.dtype = c.v.t.dtype = c.o.t.dtype = SPA_FLOAT16;
    CU_ASSERT_EQUAL(acl_phase1(&c, "BSND", 4, 64, false, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    case_free(&c);
    case_make(&c, SPA_BFLOAT16, 1, 1, 4, 1, 64, 64, 2, len, &r);
    tt_set_int(&c.topk, 0, 2); /* block 2 of a 100-key sequence of 64-key blocks: past it */
    CU_ASSERT_EQUAL(acl_phase1(&c, "BSND", 4, 64, false, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    case_free(&c);
}

/* aclnnNsaCompressWithCache: a paged f16 problem gives the native bytes
 * (the rows of the batches closing a window, the others untouched), and
 * CANN's rules give CANN's codes. */
typedef struct cwc_case {
    ttensor x, w, slots, table, out;
    int64_t len[2];
} cwc_case;

static void cwc_make(cwc_case *c, spa_dtype dt, rng *r)
{
    const int64_t xd[4] = {4, 64, 2, 32}, wd[2] = {32, 2}, sd[1] = {2}, td[2] = {2, 2}, od[3] = {3, 2, 32};
    tt_make(&c->x, dt, 4, xd, false, r);
    tt_make(&c->w, dt, 2, wd, false, r);
    tt_make(&c->slots, SPA_INT32, 1, sd, false, r);
    tt_make(&c->table, SPA_INT32, 2, td, false, r);
    tt_make(&c->out, dt, 3, od, false, r);
    tt_fill_random(&c->x, r, -1.0, 1.0);
    tt_fill_random(&c->w, r, -1.0, 1.0);
    tt_fill_random(&c->out, r, -1.0, 1.0);
    const int64_t tv[4] = {2, 0, 3, 1};
    for (int i = 0; i < 4; i++)
        tt_set_int(&c->table, i, tv[i]);
    tt_set_int(&c->slots, 0, 2), tt_set_int(&c->slots, 1, 0);
    c->len[0] = 96, c->len[1] = 70; /* 96 closes a window (32 + 4 * 16); 70 does not */
}

static void cwc_free(cwc_case *c)
{
    tt_free(&c->x), tt_free(&c->w), tt_free(&c->slots), tt_free(&c->table), tt_free(&c->out);
}

static aclnnStatus cwc_phase1(cwc_case *c, int64_t l, int64_t st, int64_t type, int64_t page, bool null_weight,
                              uint64_t *size, aclOpExecutor **ex)
{
    aclTensor *x = acl_of(&c->x.t), *w = acl_of(&c->w.t), *s = acl_of(&c->slots.t), *t = acl_of(&c->table.t);
    aclTensor *o = acl_of(&c->out.t);
    aclIntArray *len = aclCreateIntArray(c->len, 2);
    char lay[] = "PA";
    aclnnStatus r = aclnnNsaCompressWithCacheGetWorkspaceSize(x, null_weight ? NULL : w, s, len, t, lay, l, st, type,
                                                              page, o, size, ex);
    aclDestroyTensor(x), aclDestroyTensor(w), aclDestroyTensor(s), aclDestroyTensor(t), aclDestroyTensor(o);
    aclDestroyIntArray(len);
    return r;
}

static void test_compress_with_cache(void)
{
    rng r = rng_seed(3004);
    cwc_case c;
    cwc_make(&c, SPA_FLOAT16, &r);
    uint64_t size = 0;
    aclOpExecutor *ex = NULL;
    CU_ASSERT_EQUAL_FATAL(cwc_phase1(&c, 32, 16, 1, 64, false, &size, &ex), ACLNN_SUCCESS);
    void *ws = malloc(size + 1);
    CU_ASSERT_EQUAL(aclnnNsaCompressWithCache(ws, size, ex, NULL), ACLNN_SUCCESS);
    unsigned char *via_acl = tt_snapshot(&c.out);
    tt_fill_random(&c.out, &r, -1.0, 1.0);
    unsigned char *fresh = tt_snapshot(&c.out);
    /* the native operator on the same memory */
    const spa_int_array la = {c.len, 2};
    spa_executor nex;
    CU_ASSERT_EQUAL(spa_nsa_compress_with_cache_get_workspace_size(&c.x.t, &c.w.t, &c.slots.t, &c.table.t, &la, 32,
                                                                   16, &c.out.t, &size, &nex),
                    SPA_OK);
    CU_ASSERT_EQUAL(spa_nsa_compress_with_cache(ws, size, &nex, NULL), SPA_OK);
    /* rows 2 (batch 0's window) equal; rows 0 and 1 untouched in each run */
    const size_t row = 2 * 32 * 2;
    /* (a snapshot holds the red zone before the data) */
    CU_ASSERT(memcmp((char *)c.out.t.data + 2 * row, via_acl + RED_ZONE + 2 * row, row) == 0);
    CU_ASSERT(memcmp(c.out.t.data, fresh + RED_ZONE, 2 * row) == 0);
    free(ws), free(via_acl), free(fresh);
    CU_ASSERT_EQUAL(cwc_phase1(&c, 32, 16, 1, 64, true, &size, &ex), ACLNN_ERR_INNER_NULLPTR);
    CU_ASSERT_EQUAL(cwc_phase1(&c, 24, 16, 1, 64, false, &size, &ex), ACLNN_ERR_INNER_TILING_ERROR);
    CU_ASSERT_EQUAL(cwc_phase1(&c, 32, 16, 0, 64, false, &size, &ex), ACLNN_ERR_INNER_TILING_ERROR);
    CU_ASSERT_EQUAL(cwc_phase1(&c, 32, 16, 1, 32, false, &size, &ex), ACLNN_ERR_INNER_TILING_ERROR);
    tt_set_int(&c.slots, 1, 2); /* batch 1 writes nothing: the same row is no conflict */
    CU_ASSERT_EQUAL(cwc_phase1(&c, 32, 16, 1, 64, false, &size, &ex), ACLNN_SUCCESS);
    c.len[1] = 64; /* now it closes a window too: two writers, one row */
    CU_ASSERT_EQUAL(cwc_phase1(&c, 32, 16, 1, 64, false, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    cwc_free(&c);
    cwc_make(&c, SPA_FLOAT32, &r);
    CU_ASSERT_EQUAL(cwc_phase1(&c, 32, 16, 1, 64, false, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    cwc_free(&c);
}

/* aclnnNsaCompressAttentionInfer: pools [blocks, page, N2 * D] of
 * compressed keys, the query TND [T, N1, 192] or BSND [B, S, N1, 192]. */
typedef struct cai_case {
    ttensor q, k, v, table, o, topk;
    int64_t b, s, n1, n2, page, cmp[2], sel[2], sq[2];
    bool bsnd;
} cai_case;

static void cai_make(cai_case *c, spa_dtype dt, bool bsnd, int64_t s, int64_t n1, int64_t n2, const int64_t *cmp,
                     int64_t kc, rng *r)
{
    memset(c, 0, sizeof *c);
    c->b = 2, c->s = s, c->n1 = n1, c->n2 = n2, c->page = 64, c->bsnd = bsnd;
    int64_t pages = 0, cols = 1;
    for (int64_t i = 0; i < 2; i++) {
        c->cmp[i] = cmp[i], c->sq[i] = s, c->sel[i] = (cmp[i] - 1) * 16 + 32 + 5; /* l 32, d 16 */
        const int64_t np = (cmp[i] + 63) / 64;
        pages += np;
        cols = np > cols ? np : cols;
    }
    const int64_t kd[3] = {pages, 64, n2 * 192}, vd[3] = {pages, 64, n2 * 128}, td[2] = {2, cols};
    tt_make(&c->k, dt, 3, kd, false, r);
    tt_make(&c->v, dt, 3, vd, false, r);
    tt_make(&c->table, SPA_INT32, 2, td, false, r);
    if (bsnd) {
        const int64_t qd[4] = {2, s, n1, 192}, od[4] = {2, s, n1, 128}, id[4] = {2, s, n2, kc};
        tt_make(&c->q, dt, 4, qd, false, r);
        tt_make(&c->o, dt, 4, od, false, r);
        tt_make(&c->topk, SPA_INT32, 4, id, false, r);
    } else {
        const int64_t qd[3] = {2 * s, n1, 192}, od[3] = {2 * s, n1, 128}, id[3] = {2 * s, n2, kc};
        tt_make(&c->q, dt, 3, qd, false, r);
        tt_make(&c->o, dt, 3, od, false, r);
        tt_make(&c->topk, SPA_INT32, 3, id, false, r);
    }
    tt_fill_random(&c->q, r, -1.0, 1.0);
    tt_fill_random(&c->k, r, -1.0, 1.0);
    tt_fill_random(&c->v, r, -1.0, 1.0);
    for (int64_t i = 0, used = 0; i < 2; i++) /* pages in reverse order */
        for (int64_t j = 0; j < cols; j++)
            tt_set_int(&c->table, i * cols + j, j < (cmp[i] + 63) / 64 ? pages - 1 - used++ : -1);
}

static void cai_free(cai_case *c)
{
    tt_free(&c->q), tt_free(&c->k), tt_free(&c->v), tt_free(&c->table), tt_free(&c->o), tt_free(&c->topk);
}

/* Phase 1 with l 32, d 16, l' 64 and the case's arrays (multi: actualQSeqLen
 * and actualSelKvSeqLen given; mask: a (never read) attention mask). */
static aclnnStatus cai_phase1(cai_case *c, bool multi, bool mask, int64_t l, int64_t kc, int64_t n1_attr,
                              uint64_t *size, aclOpExecutor **ex)
{
    aclTensor *q = acl_of(&c->q.t), *k = acl_of(&c->k.t), *v = acl_of(&c->v.t), *t = acl_of(&c->table.t);
    aclTensor *o = acl_of(&c->o.t), *i = acl_of(&c->topk.t);
    aclIntArray *sq = aclCreateIntArray(c->sq, 2), *cmp = aclCreateIntArray(c->cmp, 2);
    aclIntArray *sel = aclCreateIntArray(c->sel, 2);
    char lay[8];
    snprintf(lay, sizeof lay, "%s", c->bsnd ? "BSND" : "TND");
    aclnnStatus st = aclnnNsaCompressAttentionInferGetWorkspaceSize(
        q, k, v, mask ? t : NULL, t, multi ? sq : NULL, cmp, multi ? sel : NULL, NULL, n1_attr, c->n2, 64, kc, l, 16,
        0.0721, lay, 64, 0, o, i, size, ex);
    aclDestroyTensor(q), aclDestroyTensor(k), aclDestroyTensor(v), aclDestroyTensor(t), aclDestroyTensor(o);
    aclDestroyTensor(i), aclDestroyIntArray(sq), aclDestroyIntArray(cmp), aclDestroyIntArray(sel);
    return st;
}

/* CANN's sample at a smaller size: all ones, so every output is 1.0 and the
 * importance ties but for the edge blocks: block 0 and the last two first,
 * then ascending (the ties' order). */
static void test_cai_sample(void)
{
    rng r = rng_seed(3005);
    cai_case c;
    const int64_t cmp[2] = {100, 37};
    cai_make(&c, SPA_FLOAT16, false, 1, 16, 2, cmp, 8, &r);
    uint16_t *bufs[3] = {c.q.t.data, c.k.t.data, c.v.t.data};
    const int64_t ns[3] = {tt_numel(&c.q), tt_numel(&c.k), tt_numel(&c.v)};
    for (int b = 0; b < 3; b++)
        for (int64_t i = 0; i < ns[b]; i++)
            bufs[b][i] = 0x3C00; /* 1.0 in f16 */
    uint64_t size = 0;
    aclOpExecutor *ex = NULL;
    CU_ASSERT_EQUAL_FATAL(cai_phase1(&c, false, false, 32, 8, 16, &size, &ex), ACLNN_SUCCESS);
    void *ws = malloc(size + 1);
    CU_ASSERT_EQUAL(aclnnNsaCompressAttentionInfer(ws, size, ex, NULL), ACLNN_SUCCESS);
    free(ws);
    for (int64_t i = 0; i < tt_numel(&c.o); i++)
        CU_ASSERT_EQUAL(tt_get(&c.o, i), 1.0);
    for (int64_t b = 0; b < 2; b++) {
        const int64_t n = ((c.cmp[b] - 1) * 16 + 32 + 63) / 64; /* 26, then 10 */
        const int64_t want[8] = {0, n - 2, n - 1, 1, 2, 3, 4, 5};
        for (int64_t h = 0; h < 2; h++)
            for (int64_t j = 0; j < 8; j++)
                CU_ASSERT_EQUAL(tt_get(&c.topk, (b * 2 + h) * 8 + j), (double)want[j]);
    }
    cai_free(&c);
}

/* The native operator's bytes on the views of the same memory: TND single
 * token, and BSND multi-token with and without the mask (the causal rule at
 * the queries' positions). */
static void test_cai_same_as_native(void)
{
    rng r = rng_seed(3006);
    for (int k = 0; k < 3; k++) {
        cai_case c;
        const int64_t cmp[2] = {150, 61};
        const bool multi = k > 0, mask = k == 2;
        cai_make(&c, k == 1 ? SPA_BFLOAT16 : SPA_FLOAT16, multi, multi ? 3 : 1, 32, 2, cmp, 5, &r);
        uint64_t size = 0;
        aclOpExecutor *ex = NULL;
        CU_ASSERT_EQUAL_FATAL(cai_phase1(&c, multi, mask, 32, 5, 32, &size, &ex), ACLNN_SUCCESS);
        void *ws = malloc(size + 1);
        CU_ASSERT_EQUAL(aclnnNsaCompressAttentionInfer(ws, size, ex, NULL), ACLNN_SUCCESS);
        free(ws);
        unsigned char *o_acl = tt_snapshot(&c.o), *i_acl = tt_snapshot(&c.topk);
        const int64_t t = 2 * c.s;
        spa_tensor q = c.q.t, o = c.o.t, idx = c.topk.t, kk = c.k.t, vv = c.v.t;
        q.rank = 3, q.dims[0] = t, q.dims[1] = 32, q.dims[2] = 192, q.strides[0] = 32 * 192, q.strides[1] = 192;
        q.strides[2] = 1;
        o.rank = 3, o.dims[0] = t, o.dims[1] = 32, o.dims[2] = 128, o.strides[0] = 32 * 128, o.strides[1] = 128;
        o.strides[2] = 1;
        idx.rank = 3, idx.dims[0] = t, idx.dims[1] = 2, idx.dims[2] = 5, idx.strides[0] = 10, idx.strides[1] = 5;
        idx.strides[2] = 1;
        kk.rank = 4, kk.dims[2] = 2, kk.dims[3] = 192, kk.strides[2] = 192, kk.strides[3] = 1;
        vv.rank = 4, vv.dims[2] = 2, vv.dims[3] = 128, vv.strides[2] = 128, vv.strides[3] = 1;
        const spa_int_array sq = {c.sq, 2}, scmp = {c.cmp, 2}, ssel = {c.sel, 2};
        spa_executor nex;
        tt_fill_canary(&c.o), tt_fill_canary(&c.topk);
        CU_ASSERT_EQUAL(spa_nsa_compress_attention_infer_get_workspace_size(
                            &q, &kk, &vv, &c.table.t, multi ? &sq : NULL, &scmp, multi ? &ssel : NULL, 0.0721,
                            mask ? 1 : 0, 32, 16, 64, 5, &o, &idx, &size, &nex),
                        SPA_OK);
        ws = malloc(size + 1);
        CU_ASSERT_EQUAL(spa_nsa_compress_attention_infer(ws, size, &nex, NULL), SPA_OK);
        free(ws);
        CU_ASSERT(tt_same_bytes(&c.o, o_acl));
        CU_ASSERT(tt_same_bytes(&c.topk, i_acl));
        free(o_acl), free(i_acl);
        cai_free(&c);
    }
}

/* CANN's codes: 161001 for a missing required argument, 161002 for dtypes
 * and layouts, 561002 for the tiling's limits. */
static void test_cai_codes(void)
{
    rng r = rng_seed(3007);
    cai_case c;
    const int64_t cmp[2] = {40, 20};
    cai_make(&c, SPA_FLOAT16, false, 1, 16, 2, cmp, 4, &r);
    uint64_t size;
    aclOpExecutor *ex;
    CU_ASSERT_EQUAL(cai_phase1(&c, false, false, 32, 4, 16, &size, &ex), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(cai_phase1(&c, false, false, 24, 4, 16, &size, &ex), ACLNN_ERR_INNER_TILING_ERROR); /* l 24 */
    CU_ASSERT_EQUAL(cai_phase1(&c, false, false, 32, 0, 16, &size, &ex), ACLNN_ERR_INNER_TILING_ERROR); /* K 0 */
    CU_ASSERT_EQUAL(cai_phase1(&c, false, false, 32, 4, 6, &size, &ex), ACLNN_ERR_INNER_TILING_ERROR); /* G 3 */
    CU_ASSERT_EQUAL(cai_phase1(&c, false, false, 32, 4, 14, &size, &ex), ACLNN_ERR_INNER_TILING_ERROR); /* N1 */
    CU_ASSERT_EQUAL(cai_phase1(&c, false, false, 32, 4, 16, NULL, &ex), ACLNN_ERR_PARAM_NULLPTR);
    c.k.t.dtype = SPA_BFLOAT16;
    CU_ASSERT_EQUAL(cai_phase1(&c, false, false, 32, 4, 16, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    c.k.t.dtype = SPA_FLOAT16;
    cai_free(&c);
    cai_make(&c, SPA_FLOAT16, false, 2, 16, 2, cmp, 4, &r); /* two queries a batch */
    CU_ASSERT_EQUAL(cai_phase1(&c, true, true, 32, 4, 16, &size, &ex), ACLNN_SUCCESS);
    c.sel[1] = 20; /* C_b != (L_b - l) / d + 1: CANN's single-token fallback, refused here */
    CU_ASSERT_EQUAL(cai_phase1(&c, true, true, 32, 4, 16, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    cai_free(&c);
}

void suite_acl_infer(void);
void suite_acl_infer(void)
{
    CU_pSuite s = CU_add_suite("acl_infer", NULL, NULL);
    CU_add_test(s, "NsaCompressWithCache: native bytes, CANN's codes", test_compress_with_cache);
    CU_add_test(s, "NsaSelectedAttentionInfer: CANN's sample", test_cann_sample);
    CU_add_test(s, "NsaSelectedAttentionInfer: the native bytes", test_same_as_native);
    CU_add_test(s, "NsaSelectedAttentionInfer: CANN's codes", test_cann_codes);
    CU_add_test(s, "NsaCompressAttentionInfer: CANN's sample", test_cai_sample);
    CU_add_test(s, "NsaCompressAttentionInfer: the native bytes", test_cai_same_as_native);
    CU_add_test(s, "NsaCompressAttentionInfer: CANN's codes", test_cai_codes);
}
#else
void suite_acl_infer(void);
void suite_acl_infer(void)
{
}
#endif
#endif
