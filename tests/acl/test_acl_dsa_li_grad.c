/* aclnnLightningIndexerGrad: random problems in CANN's fixed shape (D 128,
 * N2 1, K 2048), their indices made by aclnnLightningIndexer on the same
 * query, key and weights, give the native grad's bytes on the native views
 * of the same memory (BSND query merged, TND as it is; BSND and TND key;
 * TND lengths from INT32 prefix sums; dy and sparseIndices (.., K) as
 * (.., 1, K)); CANN's rules give CANN's codes with nothing written; and
 * CANN's sample, as a client runs it (device buffers, the forward, stream,
 * workspace), gives the exact gradients of its all-ones problem. */
#include <CUnit/Basic.h>

#if !defined(SPA_HAVE_ACL)
void suite_acl_dsa_li_grad(void);
void suite_acl_dsa_li_grad(void)
{
}
#else

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_lightning_indexer.h"
#include "aclnnop/aclnn_lightning_indexer_grad.h"
#include "acl_util.h"
#include "spa_acl_ops.h"
#include "spattn/dsa.h"
#include "util.h"

#if SPA_HAVE_DSA_LIGHTNING_INDEXER && SPA_HAVE_DSA_LIGHTNING_INDEXER_GRAD

enum { L_D = 128, L_K = 2048, L_MAX_B = 2 };

/* A problem in CANN's layouts: BSND query [B, S1, N1, 128], key
 * [B, S2, 1, 128], weights [B, S1, N1], dy and sparseIndices [B, S1, K];
 * TND query [B * S1, N1, 128], key [sum L, 1, 128], weights [T1, N1], dy and
 * sparseIndices [T1, K]. Lengths: per batch for BSND (passed only with
 * bsnd_lengths), prefix sums for TND. */
typedef struct l_case {
    ttensor q, k, w, idx, dy, dq, dk, dw, lq, lk;
    int64_t b, s1, n1, t, lens[L_MAX_B];
    bool tnd, bsnd_lengths;
    spa_dtype dt;
    int64_t mode;
} l_case;

static void case_make(l_case *c, spa_dtype dt, bool tnd, int64_t b, int64_t s1, int64_t n1, const int64_t *len,
                      rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = dt, c->tnd = tnd, c->b = b, c->s1 = s1, c->n1 = n1, c->t = b * s1, c->mode = 3;
    int64_t rows = 0, longest = 1;
    for (int64_t i = 0; i < b; i++) {
        c->lens[i] = tnd ? len[i] : len[0]; /* BSND: every batch has the key's S2 rows */
        rows += c->lens[i], longest = c->lens[i] > longest ? c->lens[i] : longest;
    }
    const int32_t rank = tnd ? 3 : 4;
    const int64_t q4[4] = {b, s1, n1, L_D}, q3[3] = {c->t, n1, L_D}, k4[4] = {b, longest, 1, L_D};
    const int64_t k3[3] = {rows, 1, L_D}, w3[3] = {b, s1, n1}, w2[2] = {c->t, n1}, i3[3] = {b, s1, L_K};
    const int64_t i2[2] = {c->t, L_K}, ld[1] = {b};
    tt_make(&c->q, dt, rank, tnd ? q3 : q4, false, r), tt_make(&c->dq, dt, rank, tnd ? q3 : q4, false, r);
    tt_make(&c->k, dt, rank, tnd ? k3 : k4, false, r), tt_make(&c->dk, dt, rank, tnd ? k3 : k4, false, r);
    tt_make(&c->w, dt, rank - 1, tnd ? w2 : w3, false, r), tt_make(&c->dw, dt, rank - 1, tnd ? w2 : w3, false, r);
    tt_make(&c->idx, SPA_INT32, rank - 1, tnd ? i2 : i3, false, r);
    tt_make(&c->dy, dt, rank - 1, tnd ? i2 : i3, false, r);
    tt_make(&c->lq, SPA_INT32, 1, ld, false, r), tt_make(&c->lk, SPA_INT32, 1, ld, false, r);
    for (int64_t i = 0, cq = 0, ck = 0; i < b; i++) {
        cq += s1, ck += c->lens[i];
        tt_set_int(&c->lq, i, tnd ? cq : s1);
        tt_set_int(&c->lk, i, tnd ? ck : c->lens[i]);
    }
    tt_fill_random(&c->q, r, -1.0, 1.0), tt_fill_random(&c->k, r, -1.0, 1.0);
    tt_fill_random(&c->w, r, -1.0, 1.0), tt_fill_random(&c->dy, r, -1.0, 1.0);
    memset(c->idx.t.data, 0, c->idx.span); /* key 0: seen by every query but those before their batch's keys */
}

static void case_free(l_case *c)
{
    ttensor *all[] = {&c->q, &c->k, &c->w, &c->idx, &c->dy, &c->dq, &c->dk, &c->dw, &c->lq, &c->lk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tt_free(all[i]);
}

/* t with a unit dim before its last: (.., K) as (.., 1, K). */
static spa_tensor unit_before_last(const spa_tensor *t)
{
    spa_tensor u = *t;
    const int32_t r = t->rank;
    u.dims[r] = t->dims[r - 1], u.strides[r] = t->strides[r - 1];
    u.dims[r - 1] = 1, u.strides[r - 1] = t->dims[r - 1] * t->strides[r - 1];
    u.rank = r + 1;
    return u;
}

/* The indices, as a client gets them: aclnnLightningIndexer on the case's
 * query, key and weights (top 2048, the case's sparse mode), its
 * (.., 1, K) output over the memory of the grad's (.., K) sparseIndices. */
static void forward(l_case *c)
{
    const spa_tensor idx4 = unit_before_last(&c->idx.t);
    aclTensor *q = acl_of(&c->q.t), *k = acl_of(&c->k.t), *w = acl_of(&c->w.t), *idx = acl_of(&idx4);
    aclTensor *lq = c->tnd ? acl_of(&c->lq.t) : NULL, *lk = c->tnd ? acl_of(&c->lk.t) : NULL;
    char lay[8];
    strcpy(lay, c->tnd ? "TND" : "BSND");
    uint64_t size = 0;
    aclOpExecutor *ex = NULL;
    CU_ASSERT_EQUAL_FATAL(aclnnLightningIndexerGetWorkspaceSize(q, k, w, lq, lk, NULL, lay, lay, L_K, c->mode,
                                                                INT64_MAX, INT64_MAX, false, idx, NULL, &size, &ex),
                          ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(host_phase2(ACLNN_SUCCESS, aclnnLightningIndexer, size, ex), ACLNN_SUCCESS);
    aclDestroyTensor(q), aclDestroyTensor(k), aclDestroyTensor(w), aclDestroyTensor(idx);
    if (c->tnd)
        aclDestroyTensor(lq), aclDestroyTensor(lk);
}

/* The arguments of one phase 1, the case's unless a test changes them. */
typedef struct l_call {
    const aclTensor *q, *k, *dy, *idx, *w, *lq, *lk, *dq, *dk, *dw;
    int64_t heads, mode, pre, next;
    bool deterministic;
    char lay_buf[16];
    char *lay;
    uint64_t size, *ws;
    aclOpExecutor *ex, **exp;
    acl_arena ar;
} l_call;

static void call_of(l_case *c, l_call *a)
{
    memset(a, 0, sizeof *a);
    acl_arena *ar = &a->ar;
    a->q = arena_of(ar, &c->q.t), a->k = arena_of(ar, &c->k.t), a->dy = arena_of(ar, &c->dy.t);
    a->idx = arena_of(ar, &c->idx.t), a->w = arena_of(ar, &c->w.t);
    a->dq = arena_of(ar, &c->dq.t), a->dk = arena_of(ar, &c->dk.t), a->dw = arena_of(ar, &c->dw.t);
    if (c->tnd || c->bsnd_lengths)
        a->lq = arena_of(ar, &c->lq.t), a->lk = arena_of(ar, &c->lk.t);
    a->heads = c->n1, a->mode = c->mode, a->pre = a->next = 65536; /* the values of CANN's sample */
    strcpy(a->lay_buf, c->tnd ? "TND" : "BSND");
    a->lay = a->lay_buf;
    a->ws = &a->size, a->exp = &a->ex;
}

static aclnnStatus phase1(void *arg)
{
    l_call *a = arg;
    return aclnnLightningIndexerGradGetWorkspaceSize(a->q, a->k, a->dy, a->idx, a->w, a->lq, a->lk, a->heads, a->lay,
                                                     a->mode, a->pre, a->next, a->deterministic, a->dq, a->dk,
                                                     a->dw, a->ws, a->exp);
}

/* Both phases through aclnn, as the case gives them. */
static aclnnStatus acl_run(l_case *c)
{
    l_call a;
    call_of(c, &a);
    aclnnStatus st = phase1(&a);
    st = host_phase2(st, aclnnLightningIndexerGrad, a.size, a.ex);
    arena_free(&a.ar);
    return st;
}

/* The native grad on the views aclnn takes (every length given), into the
 * case's outputs. */
static void native_run(l_case *c)
{
    spa_tensor q = c->q.t, w = c->w.t, idx = c->idx.t, dy = c->dy.t, dq = c->dq.t, dw = c->dw.t;
    if (!c->tnd)
        q = merged(&q), w = merged(&w), idx = merged(&idx), dy = merged(&dy), dq = merged(&dq), dw = merged(&dw);
    idx = unit_before_last(&idx), dy = unit_before_last(&dy);
    int64_t s1[L_MAX_B];
    for (int64_t i = 0; i < c->b; i++)
        s1[i] = c->s1;
    const spa_int_array sq = {s1, (uint64_t)c->b}, skv = {c->lens, (uint64_t)c->b};
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(spa_dsa_lightning_indexer_grad_get_workspace_size(&q, &c->k.t, &w, &idx, &dy, &sq, &skv,
                                                                      c->mode, &dq, &c->dk.t, &dw, &size, &ex),
                    SPA_OK);
    CU_ASSERT_EQUAL(native_phase2(spa_dsa_lightning_indexer_grad, size, &ex), SPA_OK);
}

/* One case through aclnn and natively: the same bytes. */
static void check_same_as_native(l_case *c)
{
    ttensor *out[3] = {&c->dq, &c->dk, &c->dw};
    unsigned char *got[3];
    forward(c);
    for (int i = 0; i < 3; i++)
        tt_fill_canary(out[i]);
    CU_ASSERT_EQUAL(acl_run(c), ACLNN_SUCCESS);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(any_nonzero(out[i])); /* something flowed back */
        got[i] = tt_snapshot(out[i]);
        tt_fill_canary(out[i]);
    }
    native_run(c);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(tt_same_bytes(out[i], got[i]));
        free(got[i]);
    }
}

static void test_same_as_native(void)
{
    static const struct {
        bool tnd;
        spa_dtype dt;
        int64_t b, s1, n1, mode, len[L_MAX_B];
        bool bsnd_lengths;
    } runs[] = {
        {false, SPA_FLOAT16, 2, 3, 4, 3, {2048, 0}, false},    /* queries 0 and 1 see 2046, 2047 keys: -1 tails */
        {false, SPA_BFLOAT16, 2, 2, 2, 0, {2048, 0}, true},    /* lengths given with BSND: not read */
        {true, SPA_BFLOAT16, 2, 3, 4, 3, {2048, 2053}, false},
        {true, SPA_FLOAT16, 2, 2, 1, 0, {2049, 2048}, false},
        {false, SPA_BFLOAT16, 1, 1, 64, 3, {2048, 0}, false},  /* N1 64 */
    };
    rng r = rng_seed(3510);
    /* the thin set (emulated targets, valgrind): cases 0 and 2, BSND and
     * TND, both dtypes, both modes (the wrapper is the same C on every
     * target; the native suites cover the kernels there) */
    const size_t n = test_thin ? 3 : sizeof runs / sizeof runs[0];
    for (size_t i = 0; i < n; i += test_thin ? 2 : 1) {
        l_case c;
        case_make(&c, runs[i].dt, runs[i].tnd, runs[i].b, runs[i].s1, runs[i].n1, runs[i].len, &r);
        c.mode = runs[i].mode, c.bsnd_lengths = runs[i].bsnd_lengths;
        check_same_as_native(&c);
        case_free(&c);
    }
}

/* The outputs phase 1 must leave untouched. */
static int outputs_of(l_case *c, ttensor **outs)
{
    outs[0] = &c->dq, outs[1] = &c->dk, outs[2] = &c->dw;
    return 3;
}

/* One phase 1 on the case with the changes after `code` made to its
 * arguments (a is the call), expected to answer `code` with nothing
 * written. */
#define EXPECT(c, code, ...) EXPECT_CALL(l_call, c, code, __VA_ARGS__)

enum { NULLPTR = ACLNN_ERR_PARAM_NULLPTR, INVALID = ACLNN_ERR_PARAM_INVALID };

/* Missing arguments: 161001; the attributes nothing reads: accepted. */
static void test_codes_missing(void)
{
    rng r = rng_seed(3511);
    l_case c;
    const int64_t len[L_MAX_B] = {2048, 2050};
    case_make(&c, SPA_FLOAT16, true, 2, 2, 2, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, NULLPTR, a->q = NULL);
    EXPECT(&c, NULLPTR, a->k = NULL);
    EXPECT(&c, NULLPTR, a->dy = NULL);
    EXPECT(&c, NULLPTR, a->idx = NULL);
    EXPECT(&c, NULLPTR, a->w = NULL);
    EXPECT(&c, NULLPTR, a->dq = NULL);
    EXPECT(&c, NULLPTR, a->dk = NULL);
    EXPECT(&c, NULLPTR, a->dw = NULL);
    EXPECT(&c, NULLPTR, a->ws = NULL);
    EXPECT(&c, NULLPTR, a->exp = NULL);
    EXPECT(&c, NULLPTR, a->lq = NULL); /* TND */
    EXPECT(&c, NULLPTR, a->lk = NULL);
    EXPECT(&c, NULLPTR, a->q = NULL, strcpy(a->lay, "BSH")); /* the missing arguments first */
    EXPECT(&c, ACLNN_SUCCESS, a->heads = 0, a->deterministic = true); /* torch_npu's call */
    EXPECT(&c, ACLNN_SUCCESS, a->heads = -7, a->pre = a->next = INT64_MAX);
    EXPECT(&c, ACLNN_SUCCESS, a->pre = 0, a->next = -1);
    case_free(&c);
    case_make(&c, SPA_BFLOAT16, false, 2, 2, 2, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, (void)a); /* BSND: no lengths */
    EXPECT(&c, ACLNN_SUCCESS, a->lay = NULL); /* the op definition's default: BSND */
    EXPECT(&c, ACLNN_SUCCESS, a->lq = arena_of(&a->ar, &c.lq.t)); /* given: not read */
    case_free(&c);
}

/* dtypes, the layout and sparseMode: 161002. */
static void test_codes_dtypes(void)
{
    rng r = rng_seed(3512);
    l_case c;
    const int64_t len[L_MAX_B] = {2048, 2048};
    case_make(&c, SPA_BFLOAT16, false, 2, 2, 2, len, &r);
    EXPECT(&c, INVALID, strcpy(a->lay, "BSH"));
    EXPECT(&c, INVALID, strcpy(a->lay, "PA_BSND"));
    EXPECT(&c, INVALID, strcpy(a->lay, "TND"), a->lq = arena_of(&a->ar, &c.lq.t),
           a->lk = arena_of(&a->ar, &c.lk.t)); /* 4-D tensors, a 3-letter layout */
    EXPECT(&c, INVALID, a->mode = 1);
    EXPECT(&c, INVALID, a->mode = 2);
    EXPECT(&c, INVALID, a->q = arena_alt(&a->ar, &c.q, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->k = arena_alt(&a->ar, &c.k, SPA_FLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->dy = arena_alt(&a->ar, &c.dy, SPA_FLOAT32, -1, 0)); /* native: accepted */
    EXPECT(&c, INVALID, a->w = arena_alt(&a->ar, &c.w, SPA_FLOAT32, -1, 0));   /* native: accepted */
    EXPECT(&c, INVALID, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT64, -1, 0)); /* native: accepted */
    EXPECT(&c, INVALID, a->dq = arena_alt(&a->ar, &c.dq, SPA_FLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->dk = arena_alt(&a->ar, &c.dk, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->dw = arena_alt(&a->ar, &c.dw, SPA_FLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->lq = arena_alt(&a->ar, &c.lq, SPA_INT64, -1, 0)); /* BSND too: the dtype */
    case_free(&c);
    case_make(&c, SPA_FLOAT16, true, 2, 1, 2, len, &r);
    EXPECT(&c, INVALID, a->lk = arena_alt(&a->ar, &c.lk, SPA_INT64, -1, 0));
    EXPECT(&c, INVALID, strcpy(a->lay, "BSND")); /* 3-D tensors, a 4-letter layout */
    case_free(&c);
}

/* Shapes (161002): CANN's, then the native rules. */
static void test_codes_shapes(void)
{
    rng r = rng_seed(3513);
    l_case c;
    const int64_t len[L_MAX_B] = {2048, 2048};
    case_make(&c, SPA_FLOAT16, false, 2, 2, 2, len, &r);
    EXPECT(&c, INVALID, a->k = arena_alt(&a->ar, &c.k, SPA_FLOAT16, 2, 2));    /* N2 2 */
    EXPECT(&c, INVALID, a->q = arena_alt(&a->ar, &c.q, SPA_FLOAT16, 3, 64));   /* D 64 */
    EXPECT(&c, INVALID, a->k = arena_alt(&a->ar, &c.k, SPA_FLOAT16, 3, 256));  /* key D 256 */
    EXPECT(&c, INVALID, a->q = arena_alt(&a->ar, &c.q, SPA_FLOAT16, 2, 65));   /* N1 65 */
    EXPECT(&c, INVALID, a->dy = arena_alt(&a->ar, &c.dy, SPA_FLOAT16, 2, 1024),
           a->idx = arena_alt(&a->ar, &c.idx, SPA_INT32, 2, 1024));            /* K 1024 */
    EXPECT(&c, INVALID, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT32, 2, 1024)); /* K not dy's */
    EXPECT(&c, INVALID, a->dy = arena_alt(&a->ar, &c.dy, SPA_FLOAT16, 1, 3));  /* S1 3 */
    EXPECT(&c, INVALID, a->w = arena_alt(&a->ar, &c.w, SPA_FLOAT16, 2, 4));    /* N1 4 */
    EXPECT(&c, INVALID, a->dq = arena_alt(&a->ar, &c.dq, SPA_FLOAT16, 1, 1));
    EXPECT(&c, INVALID, a->dk = arena_alt(&a->ar, &c.dk, SPA_FLOAT16, 1, 2049));
    EXPECT(&c, INVALID, a->dw = arena_alt(&a->ar, &c.dw, SPA_FLOAT16, 0, 1));
    EXPECT(&c, INVALID, a->k = arena_alt(&a->ar, &c.k, SPA_FLOAT16, 0, 3),
           a->dk = arena_alt(&a->ar, &c.dk, SPA_FLOAT16, 0, 3));              /* key B 3, query B 2 */
    EXPECT(&c, INVALID, a->k = arena_alt(&a->ar, &c.k, SPA_FLOAT16, 1, 2047),
           a->dk = arena_alt(&a->ar, &c.dk, SPA_FLOAT16, 1, 2047));           /* S2 below K */
    { /* the forward's (B, S1, 1, K) indices and dy, as they come */
        const spa_tensor i4 = unit_before_last(&c.idx.t), d4 = unit_before_last(&c.dy.t);
        EXPECT(&c, INVALID, a->idx = arena_of(&a->ar, &i4), a->dy = arena_of(&a->ar, &d4));
    }
    { /* a query that is a slice [B, S1, ..] of [B, S1 + 1, ..]: B and S1 do not merge */
        spa_tensor slice = c.q.t;
        slice.dims[1] = 1; /* its B stride stays that of S1 2 */
        ttensor dy1, i1, w1, dq1, dw1;
        const int64_t dyd[3] = {2, 1, L_K}, wd[3] = {2, 1, 2}, qd[4] = {2, 1, 2, L_D};
        tt_make(&dy1, SPA_FLOAT16, 3, dyd, false, &r), tt_make(&i1, SPA_INT32, 3, dyd, false, &r);
        tt_make(&w1, SPA_FLOAT16, 3, wd, false, &r), tt_make(&dw1, SPA_FLOAT16, 3, wd, false, &r);
        tt_make(&dq1, SPA_FLOAT16, 4, qd, false, &r);
        EXPECT(&c, INVALID, a->q = arena_of(&a->ar, &slice), a->dy = arena_of(&a->ar, &dy1.t),
               a->idx = arena_of(&a->ar, &i1.t), a->w = arena_of(&a->ar, &w1.t), a->dq = arena_of(&a->ar, &dq1.t),
               a->dw = arena_of(&a->ar, &dw1.t));
        tt_free(&dy1), tt_free(&i1), tt_free(&w1), tt_free(&dw1), tt_free(&dq1);
    }
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    tt_set_int(&c.idx, L_K + 3, 2048); /* key 2048 of 2048 rows: the native rule */
    EXPECT(&c, INVALID, (void)a);
    tt_set_int(&c.idx, L_K + 3, 2047); /* query 1 of 2 stands at 2047: seen */
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    tt_set_int(&c.idx, 5, 2047); /* query 0 stands at 2046 (sparse mode 3): not seen */
    EXPECT(&c, INVALID, (void)a);
    EXPECT(&c, ACLNN_SUCCESS, a->mode = 0); /* every key seen */
    tt_set_int(&c.idx, 5, -1);
    case_free(&c);
}

/* TND batches and lengths (161002). */
static void test_codes_lengths(void)
{
    rng r = rng_seed(3514);
    l_case c;
    const int64_t len[L_MAX_B] = {2048, 2049};
    case_make(&c, SPA_BFLOAT16, true, 2, 2, 2, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, INVALID, a->lk = arena_alt(&a->ar, &c.lk, SPA_INT32, 0, 3)); /* 3 key lengths for 2 batches */
    EXPECT(&c, INVALID, tt_set_int(&c.lk, 1, 2047)); /* a prefix sum that decreases */
    EXPECT(&c, INVALID, tt_set_int(&c.lk, 1, 4095)); /* batch 1: 2047 keys, below K */
    tt_set_int(&c.lk, 1, 4097);
    EXPECT(&c, INVALID, tt_set_int(&c.lq, 0, 0));    /* batch 0: no query */
    tt_set_int(&c.lq, 0, 2);
    EXPECT(&c, INVALID, tt_set_int(&c.lq, 1, 3));    /* T1 4, the lengths sum to 3 (native) */
    tt_set_int(&c.lq, 1, 4);
    EXPECT(&c, INVALID, tt_set_int(&c.lq, 0, 131073), tt_set_int(&c.lq, 1, 131075)); /* S1 above 128K */
    tt_set_int(&c.lq, 0, 2), tt_set_int(&c.lq, 1, 4);
    { /* B 1025: 1025 lengths each */
        ttensor lq, lk;
        const int64_t n[1] = {1025};
        tt_make(&lq, SPA_INT32, 1, n, false, &r), tt_make(&lk, SPA_INT32, 1, n, false, &r);
        for (int64_t i = 0; i < 1025; i++)
            tt_set_int(&lq, i, i + 1), tt_set_int(&lk, i, (i + 1) * L_K);
        EXPECT(&c, INVALID, a->lq = arena_of(&a->ar, &lq.t), a->lk = arena_of(&a->ar, &lk.t));
        tt_free(&lq), tt_free(&lk);
    }
    case_free(&c);
}

/* CANN's sample, as a client runs it (its page's example: BSND, B 2, S1 3,
 * S2 2048, N1 64, D 128, K 2048, sparseMode 3, headNum 64, pre / next
 * tokens 65536, deterministic, every input 1.0 in FLOAT16; here the indices
 * come from the forward, as a client's do, and dy is 1/64 so that every
 * result is exact): the forward's equal scores give query i its
 * c_i = 2046 + i keys in order, then -1; s = 128 > 0 everywhere, so
 * dQuery is c_i / 64, dWeights 2 c_i, and dKey row x the number of the
 * batch's queries that see it (3, 2 for key 2046, 1 for key 2047). */
enum { S_B = 2, S_S1 = 3, S_S2 = 2048, S_N1 = 64 };

static void test_client_sample(void)
{
    if (test_thin) /* 2048 keys of 64 heads: seconds under emulation; the quick and full sets run it */
        return;
    aclrtContext ctx;
    aclrtStream stream;
    client_open(&ctx, &stream);

    const int64_t q_shape[4] = {S_B, S_S1, S_N1, L_D}, k_shape[4] = {S_B, S_S2, 1, L_D};
    const int64_t w_shape[3] = {S_B, S_S1, S_N1}, idx_shape[3] = {S_B, S_S1, L_K};
    const int64_t fwd_idx_shape[4] = {S_B, S_S1, 1, L_K};
    const size_t kn = (size_t)S_B * S_S2 * L_D;
    uint16_t *ones = malloc(kn * sizeof *ones), *dys = malloc((size_t)S_B * S_S1 * L_K * sizeof *dys);
    CU_ASSERT_FATAL(ones != NULL && dys != NULL);
    for (size_t i = 0; i < kn; i++)
        ones[i] = aclFloatToFloat16(1.0f);
    for (size_t i = 0; i < (size_t)S_B * S_S1 * L_K; i++)
        dys[i] = aclFloatToFloat16(0.015625f);
    dev_buf q, k, w, idx, dy, dq, dk, dw;
    dev_make(&q, q_shape, 4, ACL_FLOAT16, ones), dev_make(&k, k_shape, 4, ACL_FLOAT16, ones);
    dev_make(&w, w_shape, 3, ACL_FLOAT16, ones), dev_make(&idx, idx_shape, 3, ACL_INT32, NULL);
    dev_make(&dy, idx_shape, 3, ACL_FLOAT16, dys), dev_make(&dq, q_shape, 4, ACL_FLOAT16, NULL);
    dev_make(&dk, k_shape, 4, ACL_FLOAT16, NULL), dev_make(&dw, w_shape, 3, ACL_FLOAT16, NULL);
    const int64_t fwd_strides[4] = {S_S1 * L_K, L_K, L_K, 1};
    aclTensor *fwd_idx = aclCreateTensor(fwd_idx_shape, 4, ACL_INT32, fwd_strides, 0, ACL_FORMAT_ND, fwd_idx_shape,
                                         4, idx.p); /* the forward's view of the same buffer */
    int64_t head_num = 64, sparse_mode = 3, pre = 65536, next = 65536;
    char layout[] = "BSND";
    bool deterministic = true;

    /* The forward: the indices. */
    uint64_t size = 0;
    aclOpExecutor *ex = NULL;
    CU_ASSERT_EQUAL_FATAL(aclnnLightningIndexerGetWorkspaceSize(q.t, k.t, w.t, NULL, NULL, NULL, layout, layout, L_K,
                                                                sparse_mode, INT64_MAX, INT64_MAX, false, fwd_idx,
                                                                NULL, &size, &ex),
                          ACLNN_SUCCESS);
    client_phase2(aclnnLightningIndexer, size, ex, stream);

    /* The grad, as the page's example calls it. */
    size = 0, ex = NULL;
    CU_ASSERT_EQUAL_FATAL(aclnnLightningIndexerGradGetWorkspaceSize(q.t, k.t, dy.t, idx.t, w.t, NULL, NULL, head_num,
                                                                    layout, sparse_mode, pre, next, deterministic,
                                                                    dq.t, dk.t, dw.t, &size, &ex),
                          ACLNN_SUCCESS);
    client_phase2(aclnnLightningIndexerGrad, size, ex, stream);

    float *gq = dev_floats(&dq), *gk = dev_floats(&dk), *gw = dev_floats(&dw);
    int64_t bad = 0;
    for (int64_t t = 0; t < S_B * S_S1; t++) {
        const float seen = (float)(S_S2 - S_S1 + 1 + t % S_S1);
        for (int64_t h = 0; h < S_N1; h++) {
            bad += gw[t * S_N1 + h] != 2.0f * seen;
            for (int64_t d = 0; d < L_D; d++)
                bad += gq[(t * S_N1 + h) * L_D + d] != seen / 64.0f;
        }
    }
    for (int64_t x = 0; x < S_B * S_S2; x++) {
        const int64_t key = x % S_S2;
        const float want = (float)(key <= S_S2 - S_S1 ? S_S1 : S_S2 - key);
        for (int64_t d = 0; d < L_D; d++)
            bad += gk[x * L_D + d] != want;
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(gq), free(gk), free(gw);

    aclDestroyTensor(fwd_idx);
    dev_buf *all[] = {&q, &k, &w, &idx, &dy, &dq, &dk, &dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        dev_free(all[i]);
    free(ones), free(dys);
    client_close(ctx, stream);
}

void suite_acl_dsa_li_grad(void);
void suite_acl_dsa_li_grad(void)
{
    CU_pSuite s = CU_add_suite("acl_dsa_li_grad", NULL, NULL);
    CU_add_test(s, "LightningIndexerGrad: the native bytes (BSND / TND, f16 / bf16, modes 0 and 3)",
                test_same_as_native);
    CU_add_test(s, "LightningIndexerGrad: CANN's codes, missing arguments (161001)", test_codes_missing);
    CU_add_test(s, "LightningIndexerGrad: CANN's codes, dtypes, layout, sparseMode (161002)", test_codes_dtypes);
    CU_add_test(s, "LightningIndexerGrad: CANN's codes, shapes and indices (161002)", test_codes_shapes);
    CU_add_test(s, "LightningIndexerGrad: CANN's codes, TND lengths (161002)", test_codes_lengths);
    CU_add_test(s, "LightningIndexerGrad: CANN's sample as a client runs it (all ones)", test_client_sample);
}
#else
void suite_acl_dsa_li_grad(void);
void suite_acl_dsa_li_grad(void)
{
}
#endif
#endif
