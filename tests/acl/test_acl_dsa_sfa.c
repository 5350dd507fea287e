/* aclnnSparseFlashAttention: random problems in CANN's fixed shape (D 512,
 * rope D 64, N2 1) give the native operator's bytes on the native views of
 * the same memory (BSND query merged, TND as it is; PA_BSND, BSND and TND
 * kv; lengths from INT32 tensors, TND prefix sums; value the key's storage
 * or its own; the statistics as [1, T, N1]), and CANN's rules give CANN's
 * codes with nothing written. */
#include <CUnit/Basic.h>

#if !defined(SPA_HAVE_ACL)
void suite_acl_dsa_sfa(void);
void suite_acl_dsa_sfa(void)
{
}
#else

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_sparse_flash_attention.h"
#include "spa_acl_ops.h"
#include "spattn/dsa.h"
#include "acl_util.h"
#include "util.h"

#if SPA_HAVE_DSA_SPARSE_ATTENTION

enum { SFA_D = 512, SFA_DR = 64, SFA_MAX_B = 2 };

static const double sfa_scale = 0.041666666666666664; /* 1 / sqrt(576), CANN's example */

/* A problem in CANN's layouts: query BSND [B, S1, N1, 512] or TND
 * [B * S1, N1, 512]; kv PA_BSND (pages of `page` rows in reverse order,
 * table entries past a batch -1), BSND [B, max L, 1, 512] or TND
 * [sum L, 1, 512]; indices: block 0 first, random blocks of the batch,
 * -1 last. */
typedef struct sfa_case {
    ttensor q, qr, k, kr, v, idx, table, o, mx, sm, lq, lk;
    int64_t b, s1, n1, kc, sbs, page, t, lens[SFA_MAX_B];
    const char *lay_q, *lay_k;
    spa_dtype dt;
    int64_t mode;
    bool lse, absorb; /* absorb: value is the key's storage (CANN's MLA-absorb call) */
    bool no_lens;     /* BSND: both lengths tensors left out (S1 queries, S2 keys a batch) */
} sfa_case;

static bool is_tnd(const char *layout)
{
    return strcmp(layout, "TND") == 0;
}

static bool is_pa(const char *layout)
{
    return strcmp(layout, "PA_BSND") == 0;
}

/* query, queryRope, attentionOut, sparseIndices and the statistics. */
static void make_query_side(sfa_case *c, rng *r)
{
    const bool tnd = is_tnd(c->lay_q);
    const int32_t rank = tnd ? 3 : 4;
    const int64_t q4[4] = {c->b, c->s1, c->n1, SFA_D}, q3[3] = {c->t, c->n1, SFA_D};
    const int64_t r4[4] = {c->b, c->s1, c->n1, SFA_DR}, r3[3] = {c->t, c->n1, SFA_DR};
    const int64_t i4[4] = {c->b, c->s1, 1, c->kc}, i3[3] = {c->t, 1, c->kc};
    const int64_t m4[4] = {c->b, 1, c->s1, c->n1}, m3[3] = {1, c->t, c->n1};
    tt_make(&c->q, c->dt, rank, tnd ? q3 : q4, false, r);
    tt_make(&c->o, c->dt, rank, tnd ? q3 : q4, false, r);
    tt_make(&c->qr, c->dt, rank, tnd ? r3 : r4, false, r);
    tt_make(&c->idx, SPA_INT32, rank, tnd ? i3 : i4, false, r);
    tt_make(&c->mx, SPA_FLOAT32, rank, tnd ? m3 : m4, false, r);
    tt_make(&c->sm, SPA_FLOAT32, rank, tnd ? m3 : m4, false, r);
    tt_fill_random(&c->q, r, -1.0, 1.0);
    tt_fill_random(&c->qr, r, -1.0, 1.0);
}

/* key, keyRope, value of the kv layout (rows: the leading dims), the table. */
static void make_kv_side(sfa_case *c, rng *r)
{
    int64_t pages = 0, cols = 1, rows = 0, longest = 1;
    for (int64_t i = 0; i < c->b; i++) {
        const int64_t np = (c->lens[i] + c->page - 1) / c->page;
        pages += np, rows += c->lens[i];
        cols = np > cols ? np : cols, longest = c->lens[i] > longest ? c->lens[i] : longest;
    }
    int64_t lead[3] = {c->b, longest, 1};
    int32_t rank = 4;
    if (is_pa(c->lay_k)) {
        lead[0] = pages, lead[1] = c->page;
        const int64_t td[2] = {c->b, cols};
        tt_make(&c->table, SPA_INT32, 2, td, false, r);
        for (int64_t i = 0, used = 0; i < c->b; i++)
            for (int64_t j = 0; j < cols; j++)
                tt_set_int(&c->table, i * cols + j, j < (c->lens[i] + c->page - 1) / c->page ? pages - 1 - used++ : -1);
    } else if (is_tnd(c->lay_k)) {
        lead[0] = rows, lead[1] = 1, rank = 3;
    }
    int64_t kd[4] = {lead[0], lead[1], lead[2], 0};
    kd[rank - 1] = SFA_D;
    tt_make(&c->k, c->dt, rank, kd, false, r);
    tt_make(&c->v, c->dt, rank, kd, false, r);
    kd[rank - 1] = SFA_DR;
    tt_make(&c->kr, c->dt, rank, kd, false, r);
    tt_fill_random(&c->k, r, -1.0, 1.0);
    tt_fill_random(&c->v, r, -1.0, 1.0);
    tt_fill_random(&c->kr, r, -1.0, 1.0);
}

/* The lengths tensors (prefix sums for TND) and the indices. */
static void make_lengths_and_indices(sfa_case *c, rng *r)
{
    const int64_t ld[1] = {c->b};
    tt_make(&c->lq, SPA_INT32, 1, ld, false, r);
    tt_make(&c->lk, SPA_INT32, 1, ld, false, r);
    for (int64_t i = 0, cq = 0, ck = 0; i < c->b; i++) {
        cq += c->s1, ck += c->lens[i];
        tt_set_int(&c->lq, i, is_tnd(c->lay_q) ? cq : c->s1);
        tt_set_int(&c->lk, i, is_tnd(c->lay_k) ? ck : c->lens[i]);
    }
    for (int64_t i = 0, t = 0; i < c->b; i++) {
        const int64_t blocks = (c->lens[i] + c->sbs - 1) / c->sbs;
        for (int64_t s = 0; s < c->s1; s++, t++)
            for (int64_t j = 0; j < c->kc; j++)
                tt_set_int(&c->idx, t * c->kc + j, j == 0 ? 0 : j == c->kc - 1 ? -1 : rng_int(r, 0, blocks - 1));
    }
}

static void case_make(sfa_case *c, spa_dtype dt, const char *lay_q, const char *lay_k, int64_t b, int64_t s1,
                      int64_t n1, int64_t kc, int64_t sbs, int64_t page, const int64_t *len, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = dt, c->lay_q = lay_q, c->lay_k = lay_k, c->b = b, c->s1 = s1, c->n1 = n1, c->kc = kc;
    c->sbs = sbs, c->page = page, c->t = b * s1, c->mode = 3;
    for (int64_t i = 0; i < b; i++)
        c->lens[i] = len[i];
    make_query_side(c, r);
    make_kv_side(c, r);
    make_lengths_and_indices(c, r);
}

static void case_free(sfa_case *c)
{
    tt_free(&c->q), tt_free(&c->qr), tt_free(&c->k), tt_free(&c->kr), tt_free(&c->v), tt_free(&c->idx);
    tt_free(&c->table), tt_free(&c->o), tt_free(&c->mx), tt_free(&c->sm), tt_free(&c->lq), tt_free(&c->lk);
}

/* The arguments of one phase 1, the case's unless a test changes them; the
 * tensors it made are destroyed with it. */
typedef struct sfa_call {
    const aclTensor *q, *k, *v, *idx, *table, *lq, *lk, *qr, *kr, *o, *mx, *sm;
    int64_t sbs, mode, pre, next, attention_mode;
    bool lse;
    char lay_q_buf[16], lay_k_buf[16];
    char *lay_q, *lay_k;
    uint64_t size, *ws;
    aclOpExecutor *ex, **exp;
    acl_arena ar;
} sfa_call;

static void call_of(sfa_case *c, sfa_call *a)
{
    memset(a, 0, sizeof *a);
    a->q = arena_of(&a->ar, &c->q.t), a->k = arena_of(&a->ar, &c->k.t);
    a->v = c->absorb ? arena_of(&a->ar, &c->k.t) : arena_of(&a->ar, &c->v.t);
    a->idx = arena_of(&a->ar, &c->idx.t), a->lq = arena_of(&a->ar, &c->lq.t), a->lk = arena_of(&a->ar, &c->lk.t);
    a->qr = arena_of(&a->ar, &c->qr.t), a->kr = arena_of(&a->ar, &c->kr.t), a->o = arena_of(&a->ar, &c->o.t);
    a->mx = arena_of(&a->ar, &c->mx.t), a->sm = arena_of(&a->ar, &c->sm.t);
    a->table = is_pa(c->lay_k) ? arena_of(&a->ar, &c->table.t) : NULL;
    if (c->no_lens)
        a->lq = a->lk = NULL;
    a->sbs = c->sbs, a->mode = c->mode, a->pre = a->next = INT64_MAX, a->attention_mode = 2, a->lse = c->lse;
    strcpy(a->lay_q_buf, c->lay_q), strcpy(a->lay_k_buf, c->lay_k);
    a->lay_q = a->lay_q_buf, a->lay_k = a->lay_k_buf;
    a->ws = &a->size, a->exp = &a->ex;
}

static aclnnStatus phase1(void *arg)
{
    sfa_call *a = arg;
    return aclnnSparseFlashAttentionGetWorkspaceSize(a->q, a->k, a->v, a->idx, a->table, a->lq, a->lk, a->qr, a->kr,
                                                     sfa_scale, a->sbs, a->lay_q, a->lay_k, a->mode, a->pre, a->next,
                                                     a->attention_mode, a->lse, a->o, a->mx, a->sm, a->ws, a->exp);
}

/* Both phases through aclnn, as the case gives them. */
static aclnnStatus acl_run(sfa_case *c)
{
    sfa_call a;
    call_of(c, &a);
    aclnnStatus st = phase1(&a);
    st = host_phase2(st, aclnnSparseFlashAttention, a.size, a.ex);
    arena_free(&a.ar);
    return st;
}

/* A contiguous BSND statistics output [B, 1, S1, N1] as [1, B * S1, N1]. */
static spa_tensor stat_flat(const sfa_case *c, const spa_tensor *t)
{
    spa_tensor m = *t;
    m.rank = 3;
    m.dims[0] = 1, m.dims[1] = c->t, m.dims[2] = c->n1;
    m.strides[0] = c->t * c->n1, m.strides[1] = c->n1, m.strides[2] = 1;
    return m;
}

/* The native operator on the views aclnn takes, into the case's outputs. */
static void native_run(sfa_case *c)
{
    const bool bsnd = !is_tnd(c->lay_q);
    spa_tensor q = c->q.t, qr = c->qr.t, idx = c->idx.t, o = c->o.t, mx = c->mx.t, sm = c->sm.t;
    if (bsnd) {
        q = merged(&q), qr = merged(&qr), idx = merged(&idx), o = merged(&o);
        mx = stat_flat(c, &mx), sm = stat_flat(c, &sm);
    }
    int64_t sq_vals[SFA_MAX_B];
    for (int64_t i = 0; i < c->b; i++)
        sq_vals[i] = c->s1;
    const spa_int_array sq = {sq_vals, (uint64_t)c->b}, skv = {c->lens, (uint64_t)c->b};
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention_get_workspace_size(
                        &q, &qr, &c->k.t, &c->kr.t, c->absorb ? &c->k.t : &c->v.t, &idx,
                        is_pa(c->lay_k) ? &c->table.t : NULL, &sq, &skv, sfa_scale, c->sbs, c->mode, &o,
                        c->lse ? &mx : NULL, c->lse ? &sm : NULL, &size, &ex),
                    SPA_OK);
    CU_ASSERT_EQUAL(native_phase2(spa_dsa_sparse_attention, size, &ex), SPA_OK);
}

/* One case through aclnn and natively: the same bytes; the statistics
 * outputs written only with returnSoftmaxLse. */
static void check_same_as_native(sfa_case *c)
{
    tt_fill_canary(&c->o), tt_fill_canary(&c->mx), tt_fill_canary(&c->sm);
    unsigned char *canary_mx = tt_snapshot(&c->mx), *canary_sm = tt_snapshot(&c->sm);
    CU_ASSERT_EQUAL(acl_run(c), ACLNN_SUCCESS);
    unsigned char *acl_o = tt_snapshot(&c->o), *acl_mx = tt_snapshot(&c->mx), *acl_sm = tt_snapshot(&c->sm);
    CU_ASSERT(any_nonzero(&c->o)); /* something was attended */
    CU_ASSERT(tt_same_bytes(&c->mx, canary_mx) == !c->lse && tt_same_bytes(&c->sm, canary_sm) == !c->lse);
    tt_fill_canary(&c->o), tt_fill_canary(&c->mx), tt_fill_canary(&c->sm);
    native_run(c);
    CU_ASSERT(tt_same_bytes(&c->o, acl_o));
    CU_ASSERT(tt_same_bytes(&c->mx, acl_mx));
    CU_ASSERT(tt_same_bytes(&c->sm, acl_sm));
    free(canary_mx), free(canary_sm), free(acl_o), free(acl_mx), free(acl_sm);
}

static void test_same_as_native(void)
{
    static const struct {
        const char *lay_q, *lay_k;
        spa_dtype dt;
        int64_t n1, sbs, mode;
        bool lse, absorb, no_lens;
    } runs[] = {
        {"BSND", "BSND", SPA_FLOAT16, 2, 1, 3, false, true, false},
        {"BSND", "BSND", SPA_BFLOAT16, 4, 2, 0, true, false, false},
        {"BSND", "BSND", SPA_FLOAT16, 1, 1, 3, true, true, true},
        {"TND", "TND", SPA_BFLOAT16, 1, 4, 3, false, false, false},
        {"TND", "TND", SPA_FLOAT16, 2, 1, 3, true, true, false},
        {"BSND", "PA_BSND", SPA_BFLOAT16, 4, 8, 3, false, true, false},
        {"TND", "PA_BSND", SPA_FLOAT16, 2, 16, 0, false, false, false},
    };
    rng r = rng_seed(3310);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        sfa_case c;
        const int64_t len[SFA_MAX_B] = {40, runs[i].no_lens ? 40 : 23};
        case_make(&c, runs[i].dt, runs[i].lay_q, runs[i].lay_k, 2, 2, runs[i].n1, 6, runs[i].sbs, 16, len, &r);
        c.mode = runs[i].mode, c.lse = runs[i].lse, c.absorb = runs[i].absorb, c.no_lens = runs[i].no_lens;
        check_same_as_native(&c);
        case_free(&c);
    }
}

/* The outputs phase 1 must leave untouched. */
static int outputs_of(sfa_case *c, ttensor **outs)
{
    outs[0] = &c->o, outs[1] = &c->mx, outs[2] = &c->sm;
    return 3;
}

/* One phase 1 on the case with the changes after `code` made to its
 * arguments (a is the call), expected to answer `code`. */
#define EXPECT(c, code, ...) EXPECT_CALL(sfa_call, c, code, __VA_ARGS__)

enum { NULLPTR = ACLNN_ERR_PARAM_NULLPTR, INVALID = ACLNN_ERR_PARAM_INVALID };

/* A missing required argument: 161001. */
static void test_codes_missing(void)
{
    rng r = rng_seed(3312);
    sfa_case c;
    const int64_t len[SFA_MAX_B] = {40, 23};
    case_make(&c, SPA_FLOAT16, "TND", "PA_BSND", 2, 1, 2, 4, 1, 16, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, NULLPTR, a->q = NULL);
    EXPECT(&c, NULLPTR, a->k = NULL);
    EXPECT(&c, NULLPTR, a->v = NULL);
    EXPECT(&c, NULLPTR, a->idx = NULL);
    EXPECT(&c, NULLPTR, a->qr = NULL); /* the ropes: required by the tiling */
    EXPECT(&c, NULLPTR, a->kr = NULL);
    EXPECT(&c, NULLPTR, a->o = NULL);
    EXPECT(&c, NULLPTR, a->ws = NULL);
    EXPECT(&c, NULLPTR, a->exp = NULL);
    EXPECT(&c, NULLPTR, a->lq = NULL); /* TND query */
    EXPECT(&c, NULLPTR, a->lk = NULL); /* PA_BSND kv */
    EXPECT(&c, NULLPTR, a->table = NULL);
    case_free(&c);
    case_make(&c, SPA_BFLOAT16, "TND", "TND", 2, 1, 2, 4, 1, 16, len, &r);
    c.lse = true;
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, NULLPTR, a->lk = NULL); /* TND kv */
    EXPECT(&c, NULLPTR, a->mx = NULL);
    EXPECT(&c, NULLPTR, a->sm = NULL);
    EXPECT(&c, ACLNN_SUCCESS, a->lse = false, a->mx = a->sm = NULL); /* not asked for: not needed */
    case_free(&c);
}

/* Layouts, dtypes and attributes: 161002. */
static void test_codes_arguments(void)
{
    rng r = rng_seed(3313);
    sfa_case c;
    const int64_t len[SFA_MAX_B] = {40, 23};
    case_make(&c, SPA_FLOAT16, "BSND", "BSND", 2, 2, 2, 4, 2, 16, len, &r);
    c.lse = true;
    EXPECT(&c, ACLNN_SUCCESS, a->lay_q = a->lay_k = NULL); /* CANN's defaults: BSND */
    EXPECT(&c, INVALID, strcpy(a->lay_q, "BSH"));
    EXPECT(&c, INVALID, strcpy(a->lay_k, "PA_TND"));
    EXPECT(&c, INVALID, strcpy(a->lay_k, "TND")); /* layoutKv that of the query unless PA_BSND */
    EXPECT(&c, INVALID, a->table = a->lk); /* a blockTable without PA_BSND */
    EXPECT(&c, INVALID, a->q = arena_alt(&a->ar, &c.q, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->k = a->v = arena_alt(&a->ar, &c.k, SPA_BFLOAT16, -1, 0)); /* key not of query's dtype */
    EXPECT(&c, INVALID, a->v = arena_alt(&a->ar, &c.v, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->qr = arena_alt(&a->ar, &c.qr, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->kr = arena_alt(&a->ar, &c.kr, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->o = arena_alt(&a->ar, &c.o, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT64, -1, 0));
    EXPECT(&c, INVALID, a->mx = arena_alt(&a->ar, &c.mx, SPA_FLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->lk = arena_alt(&a->ar, &c.lk, SPA_INT64, -1, 0));
    EXPECT(&c, INVALID, a->mode = 1);
    EXPECT(&c, INVALID, a->sbs = 3);
    EXPECT(&c, INVALID, a->sbs = 0);
    EXPECT(&c, INVALID, a->sbs = 256);
    EXPECT(&c, INVALID, a->pre = 100);
    EXPECT(&c, INVALID, a->next = 0);
    EXPECT(&c, INVALID, a->attention_mode = 0);
    EXPECT(&c, INVALID, tt_set_int(&c.lq, 1, 1)); /* a BSND padding query */
    tt_set_int(&c.lq, 1, 2);
    tt_set_int(&c.idx, 9, 20); /* block 20 of 2 rows: past batch 1's 23 rows (the native rule) */
    EXPECT(&c, INVALID, (void)a);
    case_free(&c);
    case_make(&c, SPA_BFLOAT16, "BSND", "PA_BSND", 2, 2, 2, 4, 2, 16, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, INVALID, a->lse = true); /* softmax outputs with a paged kv */
    EXPECT(&c, INVALID, a->sbs = 32);   /* not dividing blockSize 16 */
    EXPECT(&c, INVALID, a->table = arena_alt(&a->ar, &c.table, SPA_INT64, -1, 0));
    EXPECT(&c, INVALID, a->table = arena_alt(&a->ar, &c.table, SPA_INT32, 0, 3)); /* rows != B */
    tt_set_int(&c.table, 0, 99); /* a page outside the pool (the native rule) */
    EXPECT(&c, INVALID, (void)a);
    case_free(&c);
    case_make(&c, SPA_FLOAT16, "TND", "TND", 2, 2, 2, 4, 1, 16, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, INVALID, strcpy(a->lay_k, "BSND")); /* a TND query with a BSND kv */
    EXPECT(&c, INVALID, tt_set_int(&c.lk, 1, 30)); /* a prefix sum that decreases */
    case_free(&c);
}

/* Shapes: 161002. */
static void test_codes_shapes(void)
{
    rng r = rng_seed(3314);
    sfa_case c;
    const int64_t len[SFA_MAX_B] = {40, 23};
    case_make(&c, SPA_FLOAT16, "BSND", "BSND", 2, 2, 2, 4, 1, 16, len, &r);
    c.lse = true;
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, INVALID, a->q = arena_alt(&a->ar, &c.q, SPA_FLOAT16, 3, 256));   /* D 256 */
    EXPECT(&c, INVALID, a->v = arena_alt(&a->ar, &c.v, SPA_FLOAT16, 3, 256));   /* Dv != D */
    EXPECT(&c, INVALID, a->qr = arena_alt(&a->ar, &c.qr, SPA_FLOAT16, 3, 32));  /* rope D 32 */
    EXPECT(&c, INVALID, a->kr = arena_alt(&a->ar, &c.kr, SPA_FLOAT16, 3, 128));
    EXPECT(&c, INVALID, a->k = a->v = arena_alt(&a->ar, &c.k, SPA_FLOAT16, 2, 2)); /* N2 2 */
    EXPECT(&c, INVALID, a->k = arena_alt(&a->ar, &c.k, SPA_FLOAT16, 0, 3),
           a->v = arena_alt(&a->ar, &c.v, SPA_FLOAT16, 0, 3),
           a->kr = arena_alt(&a->ar, &c.kr, SPA_FLOAT16, 0, 3)); /* kv B 3 against the query's 2 */
    EXPECT(&c, INVALID, a->kr = arena_alt(&a->ar, &c.kr, SPA_FLOAT16, 1, 8));    /* keyRope's S2 not the key's */
    EXPECT(&c, INVALID, a->o = arena_alt(&a->ar, &c.o, SPA_FLOAT16, 2, 4));
    EXPECT(&c, INVALID, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT32, 2, 2));   /* N2 2 */
    EXPECT(&c, INVALID, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT32, 3, 0));   /* K 0 */
    EXPECT(&c, INVALID, a->sm = arena_alt(&a->ar, &c.sm, SPA_FLOAT32, 3, 4));   /* N1 4 */
    EXPECT(&c, INVALID, a->mx = arena_alt(&a->ar, &c.o, SPA_FLOAT32, -1, 0));   /* [B, S1, N1, D] */
    EXPECT(&c, INVALID, a->lk = arena_alt(&a->ar, &c.lk, SPA_INT32, 0, 3));     /* 3 lengths for 2 batches */
    case_free(&c);
    case_make(&c, SPA_FLOAT16, "BSND", "BSND", 1, 1, 3, 4, 1, 16, len, &r); /* N1 3 */
    EXPECT(&c, INVALID, (void)a);
    case_free(&c);
    case_make(&c, SPA_FLOAT16, "BSND", "BSND", 1, 1, 256, 4, 1, 16, len, &r); /* N1 256 */
    EXPECT(&c, INVALID, (void)a);
    case_free(&c);
    case_make(&c, SPA_FLOAT16, "BSND", "PA_BSND", 1, 1, 1, 4, 1, 8, len, &r); /* blockSize 8 */
    EXPECT(&c, INVALID, (void)a);
    case_free(&c);
    const int64_t one[1] = {1040};
    case_make(&c, SPA_FLOAT16, "BSND", "PA_BSND", 1, 1, 1, 4, 1, 1040, one, &r); /* blockSize 1040 */
    EXPECT(&c, INVALID, (void)a);
    case_free(&c);
}

void suite_acl_dsa_sfa(void);
void suite_acl_dsa_sfa(void)
{
    CU_pSuite s = CU_add_suite("acl_dsa_sfa", NULL, NULL);
    CU_add_test(s, "SparseFlashAttention: the native bytes (BSND / TND query, BSND / TND / PA_BSND kv)",
                test_same_as_native);
    CU_add_test(s, "SparseFlashAttention: CANN's codes, missing arguments (161001)", test_codes_missing);
    CU_add_test(s, "SparseFlashAttention: CANN's codes, layouts, dtypes, attributes (161002)", test_codes_arguments);
    CU_add_test(s, "SparseFlashAttention: CANN's codes, shapes (161002)", test_codes_shapes);
}
#else
void suite_acl_dsa_sfa(void);
void suite_acl_dsa_sfa(void)
{
}
#endif
#endif
