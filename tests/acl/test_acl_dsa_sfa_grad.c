/* aclnnSparseFlashAttentionGrad: random problems in CANN's fixed shape
 * (D 512, rope D 64, N2 1), their out and statistics made by
 * aclnnSparseFlashAttention with returnSoftmaxLse, give the native grad's
 * bytes on the native views of the same memory (BSND query merged, TND as
 * it is; BSND and TND kv; lengths from INT32 tensors, TND prefix sums; a
 * value of its own, the key's storage, or none: CANN's KV merge); CANN's
 * rules give CANN's codes with nothing written; and CANN's sample, as a
 * client runs it (device buffers, stream, workspace), gives the exact
 * gradients of its all-ones problem. */
#include <CUnit/Basic.h>

#if !defined(SPA_HAVE_ACL)
void suite_acl_dsa_sfa_grad(void);
void suite_acl_dsa_sfa_grad(void)
{
}
#else

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_sparse_flash_attention.h"
#include "aclnnop/aclnn_sparse_flash_attention_grad.h"
#include "spa_acl_ops.h"
#include "spattn/dsa.h"
#include "acl_util.h"
#include "util.h"

#if SPA_HAVE_DSA_SPARSE_ATTENTION && SPA_HAVE_DSA_SPARSE_ATTENTION_GRAD

enum { G_D = 512, G_DR = 64, G_K = 1024, G_MAX_B = 2, G_VALID = 6 };

static const double g_scale = 0.041666666666666664; /* 1 / sqrt(576) */

/* A problem in CANN's layouts, one layout for query and kv: BSND query
 * [B, S1, N1, 512], key [B, max L, 1, 512]; TND query [B * S1, N1, 512],
 * key [sum L, 1, 512]. Indices: block 0, a few random blocks of the batch,
 * -1 for the rest of K. */
typedef struct g_case {
    ttensor q, qr, k, kr, v, idx, o, mx, sm, dy, dq, dqr, dk, dkr, dv, lq, lk;
    int64_t b, s1, n1, kc, sbs, t, lens[G_MAX_B];
    bool tnd;
    spa_dtype dt;
    int64_t mode;
    bool absorb; /* value is the key's storage (the forward's MLA-absorb call; dValue of its own) */
    bool merge;  /* CANN's KV merge: value and dValueOut NULL */
    bool rope;   /* queryRope / keyRope given */
} g_case;

static void make_query_side(g_case *c, rng *r)
{
    const int32_t rank = c->tnd ? 3 : 4;
    const int64_t q4[4] = {c->b, c->s1, c->n1, G_D}, q3[3] = {c->t, c->n1, G_D};
    const int64_t r4[4] = {c->b, c->s1, c->n1, G_DR}, r3[3] = {c->t, c->n1, G_DR};
    const int64_t i4[4] = {c->b, c->s1, 1, c->kc}, i3[3] = {c->t, 1, c->kc};
    const int64_t m4[4] = {c->b, 1, c->s1, c->n1}, m3[3] = {1, c->t, c->n1};
    tt_make(&c->q, c->dt, rank, c->tnd ? q3 : q4, false, r);
    tt_make(&c->o, c->dt, rank, c->tnd ? q3 : q4, false, r);
    tt_make(&c->dy, c->dt, rank, c->tnd ? q3 : q4, false, r);
    tt_make(&c->dq, c->dt, rank, c->tnd ? q3 : q4, false, r);
    tt_make(&c->qr, c->dt, rank, c->tnd ? r3 : r4, false, r);
    tt_make(&c->dqr, c->dt, rank, c->tnd ? r3 : r4, false, r);
    tt_make(&c->idx, SPA_INT32, rank, c->tnd ? i3 : i4, false, r);
    tt_make(&c->mx, SPA_FLOAT32, rank, c->tnd ? m3 : m4, false, r);
    tt_make(&c->sm, SPA_FLOAT32, rank, c->tnd ? m3 : m4, false, r);
    tt_fill_random(&c->q, r, -1.0, 1.0);
    tt_fill_random(&c->qr, r, -1.0, 1.0);
    tt_fill_random(&c->dy, r, -1.0, 1.0);
}

static void make_kv_side(g_case *c, rng *r)
{
    int64_t rows = 0, longest = 1;
    for (int64_t i = 0; i < c->b; i++)
        rows += c->lens[i], longest = c->lens[i] > longest ? c->lens[i] : longest;
    const int64_t k4[4] = {c->b, longest, 1, G_D}, k3[3] = {rows, 1, G_D};
    const int64_t r4[4] = {c->b, longest, 1, G_DR}, r3[3] = {rows, 1, G_DR};
    const int32_t rank = c->tnd ? 3 : 4;
    tt_make(&c->k, c->dt, rank, c->tnd ? k3 : k4, false, r);
    tt_make(&c->v, c->dt, rank, c->tnd ? k3 : k4, false, r);
    tt_make(&c->dk, c->dt, rank, c->tnd ? k3 : k4, false, r);
    tt_make(&c->dv, c->dt, rank, c->tnd ? k3 : k4, false, r);
    tt_make(&c->kr, c->dt, rank, c->tnd ? r3 : r4, false, r);
    tt_make(&c->dkr, c->dt, rank, c->tnd ? r3 : r4, false, r);
    tt_fill_random(&c->k, r, -1.0, 1.0);
    tt_fill_random(&c->v, r, -1.0, 1.0);
    tt_fill_random(&c->kr, r, -1.0, 1.0);
}

static void make_lengths_and_indices(g_case *c, rng *r)
{
    const int64_t ld[1] = {c->b};
    tt_make(&c->lq, SPA_INT32, 1, ld, false, r);
    tt_make(&c->lk, SPA_INT32, 1, ld, false, r);
    for (int64_t i = 0, cq = 0, ck = 0; i < c->b; i++) {
        cq += c->s1, ck += c->lens[i];
        tt_set_int(&c->lq, i, c->tnd ? cq : c->s1);
        tt_set_int(&c->lk, i, c->tnd ? ck : c->lens[i]);
    }
    for (int64_t i = 0, t = 0; i < c->b; i++) {
        const int64_t blocks = (c->lens[i] + c->sbs - 1) / c->sbs;
        for (int64_t s = 0; s < c->s1; s++, t++)
            for (int64_t j = 0; j < c->kc; j++)
                tt_set_int(&c->idx, t * c->kc + j, j == 0 ? 0 : j < G_VALID ? rng_int(r, 0, blocks - 1) : -1);
    }
}

static void case_make(g_case *c, spa_dtype dt, bool tnd, int64_t b, int64_t s1, int64_t n1, int64_t sbs,
                      const int64_t *len, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = dt, c->tnd = tnd, c->b = b, c->s1 = s1, c->n1 = n1, c->kc = G_K, c->sbs = sbs, c->t = b * s1;
    c->mode = 3, c->rope = true;
    for (int64_t i = 0; i < b; i++)
        c->lens[i] = len[i];
    make_query_side(c, r);
    make_kv_side(c, r);
    make_lengths_and_indices(c, r);
}

static void case_free(g_case *c)
{
    ttensor *all[] = {&c->q, &c->qr, &c->k, &c->kr, &c->v, &c->idx, &c->o, &c->mx, &c->sm,
                      &c->dy, &c->dq, &c->dqr, &c->dk, &c->dkr, &c->dv, &c->lq, &c->lk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tt_free(all[i]);
}

/* A contiguous BSND statistics tensor [B, 1, S1, N1] as [1, B * S1, N1]. */
static spa_tensor stat_flat(const g_case *c, const spa_tensor *t)
{
    spa_tensor m = *t;
    m.rank = 3;
    m.dims[0] = 1, m.dims[1] = c->t, m.dims[2] = c->n1;
    m.strides[0] = c->t * c->n1, m.strides[1] = c->n1, m.strides[2] = 1;
    return m;
}

/* The native views of the query side. */
typedef struct g_views {
    spa_tensor q, qr, idx, o, dy, dq, dqr, mx, sm;
    int64_t sq[G_MAX_B];
    spa_int_array asq, askv;
} g_views;

static void views_of(g_case *c, g_views *w)
{
    w->q = c->q.t, w->qr = c->qr.t, w->idx = c->idx.t, w->o = c->o.t, w->dy = c->dy.t, w->dq = c->dq.t;
    w->dqr = c->dqr.t, w->mx = c->mx.t, w->sm = c->sm.t;
    if (!c->tnd) {
        w->q = merged(&w->q), w->qr = merged(&w->qr), w->idx = merged(&w->idx), w->o = merged(&w->o);
        w->dy = merged(&w->dy), w->dq = merged(&w->dq), w->dqr = merged(&w->dqr);
        w->mx = stat_flat(c, &w->mx), w->sm = stat_flat(c, &w->sm);
    }
    for (int64_t i = 0; i < c->b; i++)
        w->sq[i] = c->s1;
    w->asq.data = w->sq, w->asq.size = (uint64_t)c->b;
    w->askv.data = c->lens, w->askv.size = (uint64_t)c->b;
}

static const ttensor *value_of(const g_case *c)
{
    return c->absorb || c->merge ? &c->k : &c->v;
}

/* The forward that makes out and the statistics: through aclnn (CANN's
 * MLA-absorb call needs the ropes), natively without ropes. */
static void forward(g_case *c)
{
    if (c->rope) {
        aclTensor *q = acl_of(&c->q.t), *k = acl_of(&c->k.t), *v = acl_of(&value_of(c)->t);
        aclTensor *idx = acl_of(&c->idx.t), *lq = acl_of(&c->lq.t), *lk = acl_of(&c->lk.t);
        aclTensor *qr = acl_of(&c->qr.t), *kr = acl_of(&c->kr.t), *o = acl_of(&c->o.t);
        aclTensor *mx = acl_of(&c->mx.t), *sm = acl_of(&c->sm.t);
        char lay_q[8], lay_k[8];
        strcpy(lay_q, c->tnd ? "TND" : "BSND"), strcpy(lay_k, lay_q);
        uint64_t size = 0;
        aclOpExecutor *ex = NULL;
        CU_ASSERT_EQUAL_FATAL(aclnnSparseFlashAttentionGetWorkspaceSize(q, k, v, idx, NULL, lq, lk, qr, kr, g_scale,
                                                                        c->sbs, lay_q, lay_k, c->mode, INT64_MAX,
                                                                        INT64_MAX, 2, true, o, mx, sm, &size, &ex),
                              ACLNN_SUCCESS);
        CU_ASSERT_EQUAL(host_phase2(ACLNN_SUCCESS, aclnnSparseFlashAttention, size, ex), ACLNN_SUCCESS);
        aclTensor *all[] = {q, k, v, idx, lq, lk, qr, kr, o, mx, sm};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            aclDestroyTensor(all[i]);
        return;
    }
    g_views w;
    views_of(c, &w);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL_FATAL(spa_dsa_sparse_attention_get_workspace_size(&w.q, NULL, &c->k.t, NULL, &value_of(c)->t,
                                                                      &w.idx, NULL, &w.asq, &w.askv, g_scale, c->sbs,
                                                                      c->mode, &w.o, &w.mx, &w.sm, &size, &ex),
                          SPA_OK);
    CU_ASSERT_EQUAL(native_phase2(spa_dsa_sparse_attention, size, &ex), SPA_OK);
}

/* The arguments of one phase 1, the case's unless a test changes them; the
 * tensors it made are destroyed with it. */
typedef struct g_call {
    const aclTensor *q, *k, *v, *idx, *dy, *o, *mx, *sm, *lq, *lk, *qr, *kr, *dq, *dk, *dv, *dqr, *dkr;
    int64_t sbs, mode, pre, next;
    bool deterministic;
    char lay_buf[16];
    char *lay;
    uint64_t size, *ws;
    aclOpExecutor *ex, **exp;
    acl_arena ar;
} g_call;

static void call_of(g_case *c, g_call *a)
{
    memset(a, 0, sizeof *a);
    a->q = arena_of(&a->ar, &c->q.t), a->k = arena_of(&a->ar, &c->k.t);
    a->v = c->merge ? NULL : arena_of(&a->ar, &value_of(c)->t);
    a->idx = arena_of(&a->ar, &c->idx.t), a->dy = arena_of(&a->ar, &c->dy.t), a->o = arena_of(&a->ar, &c->o.t);
    a->mx = arena_of(&a->ar, &c->mx.t), a->sm = arena_of(&a->ar, &c->sm.t);
    a->lq = arena_of(&a->ar, &c->lq.t), a->lk = arena_of(&a->ar, &c->lk.t);
    a->qr = c->rope ? arena_of(&a->ar, &c->qr.t) : NULL, a->kr = c->rope ? arena_of(&a->ar, &c->kr.t) : NULL;
    a->dq = arena_of(&a->ar, &c->dq.t), a->dk = arena_of(&a->ar, &c->dk.t);
    a->dv = c->merge ? NULL : arena_of(&a->ar, &c->dv.t);
    a->dqr = c->rope ? arena_of(&a->ar, &c->dqr.t) : NULL, a->dkr = c->rope ? arena_of(&a->ar, &c->dkr.t) : NULL;
    a->sbs = c->sbs, a->mode = c->mode, a->pre = a->next = INT64_MAX;
    strcpy(a->lay_buf, c->tnd ? "TND" : "BSND");
    a->lay = a->lay_buf;
    a->ws = &a->size, a->exp = &a->ex;
}

static aclnnStatus phase1(void *arg)
{
    g_call *a = arg;
    return aclnnSparseFlashAttentionGradGetWorkspaceSize(
        a->q, a->k, a->v, a->idx, a->dy, a->o, a->mx, a->sm, a->lq, a->lk, a->qr, a->kr, g_scale, a->sbs, a->lay,
        a->mode, a->pre, a->next, a->deterministic, a->dq, a->dk, a->dv, a->dqr, a->dkr, a->ws, a->exp);
}

/* Both phases through aclnn, as the case gives them. */
static aclnnStatus acl_run(g_case *c)
{
    g_call a;
    call_of(c, &a);
    aclnnStatus st = phase1(&a);
    st = host_phase2(st, aclnnSparseFlashAttentionGrad, a.size, a.ex);
    arena_free(&a.ar);
    return st;
}

/* The native grad on the views aclnn takes, into the case's outputs. */
static void native_run(g_case *c)
{
    g_views w;
    views_of(c, &w);
    uint64_t size;
    spa_executor ex;
    CU_ASSERT_EQUAL(spa_dsa_sparse_attention_grad_get_workspace_size(
                        &w.q, c->rope ? &w.qr : NULL, &c->k.t, c->rope ? &c->kr.t : NULL, &value_of(c)->t, &w.idx,
                        &w.asq, &w.askv, &w.o, &w.dy, &w.mx, &w.sm, g_scale, c->sbs, c->mode, &w.dq,
                        c->rope ? &w.dqr : NULL, &c->dk.t, c->rope ? &c->dkr.t : NULL, c->merge ? NULL : &c->dv.t,
                        &size, &ex),
                    SPA_OK);
    CU_ASSERT_EQUAL(native_phase2(spa_dsa_sparse_attention_grad, size, &ex), SPA_OK);
}

/* The gradients of a case, in order: dq, dqr, dk, dkr, dv. */
static int outputs_of(g_case *c, ttensor **out)
{
    out[0] = &c->dq, out[1] = &c->dqr, out[2] = &c->dk, out[3] = &c->dkr, out[4] = &c->dv;
    return 5;
}

/* One case through aclnn and natively: the same bytes; dValue (KV merge)
 * and the rope gradients (no ropes) untouched where not asked for. */
static void check_same_as_native(g_case *c)
{
    ttensor *out[5];
    unsigned char *canary[5], *got[5];
    outputs_of(c, out);
    forward(c);
    for (int i = 0; i < 5; i++)
        tt_fill_canary(out[i]), canary[i] = tt_snapshot(out[i]);
    CU_ASSERT_EQUAL(acl_run(c), ACLNN_SUCCESS);
    for (int i = 0; i < 5; i++)
        got[i] = tt_snapshot(out[i]);
    CU_ASSERT(any_nonzero(&c->dq) && any_nonzero(&c->dk)); /* something flowed back */
    CU_ASSERT(tt_same_bytes(&c->dqr, canary[1]) == !c->rope && tt_same_bytes(&c->dkr, canary[3]) == !c->rope);
    CU_ASSERT(tt_same_bytes(&c->dv, canary[4]) == c->merge);
    for (int i = 0; i < 5; i++)
        tt_fill_canary(out[i]);
    native_run(c);
    for (int i = 0; i < 5; i++) {
        CU_ASSERT(tt_same_bytes(out[i], got[i]));
        free(canary[i]), free(got[i]);
    }
}

static void test_same_as_native(void)
{
    static const struct {
        bool tnd;
        spa_dtype dt;
        int64_t n1, sbs, mode;
        bool absorb, merge, rope;
    } runs[] = {
        {false, SPA_FLOAT16, 2, 1, 3, false, false, true},
        {false, SPA_BFLOAT16, 4, 8, 0, true, false, true},
        {false, SPA_FLOAT16, 1, 16, 3, false, true, true},
        {true, SPA_BFLOAT16, 2, 1, 3, false, false, true},
        {true, SPA_FLOAT16, 1, 8, 0, false, true, true},
        {true, SPA_BFLOAT16, 2, 1, 3, true, false, false},
        {false, SPA_FLOAT16, 2, 8, 3, false, true, false},
    };
    rng r = rng_seed(3410);
    /* the thin set (emulated targets, valgrind): cases 0, 3 and 6, BSND and
     * TND, both dtypes, with and without the merge (the wrapper is the same
     * C on every target; the native suites cover the kernels there) */
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i += test_thin ? 3 : 1) {
        g_case c;
        const int64_t len[G_MAX_B] = {40, 23};
        case_make(&c, runs[i].dt, runs[i].tnd, 2, 2, runs[i].n1, runs[i].sbs, len, &r);
        c.mode = runs[i].mode, c.absorb = runs[i].absorb, c.merge = runs[i].merge, c.rope = runs[i].rope;
        check_same_as_native(&c);
        case_free(&c);
    }
}

/* The KV merge is the key's and the value's gradients summed: against a
 * call with the key's storage as value, dKey(merge) is dKey + dValue there
 * (within the one rounding of each). */
static void test_merge_sums(void)
{
    rng r = rng_seed(3415);
    g_case c;
    const int64_t len[G_MAX_B] = {40, 23};
    case_make(&c, SPA_FLOAT16, true, 2, 2, 2, 1, len, &r);
    c.absorb = true;
    forward(&c);
    CU_ASSERT_EQUAL(acl_run(&c), ACLNN_SUCCESS);
    double *dk = tt_to_doubles(&c.dk), *dv = tt_to_doubles(&c.dv);
    c.absorb = false, c.merge = true;
    CU_ASSERT_EQUAL(acl_run(&c), ACLNN_SUCCESS);
    double *both = tt_to_doubles(&c.dk);
    int64_t bad = 0;
    for (int64_t i = 0; i < tt_numel(&c.dk); i++) {
        const double want = dk[i] + dv[i], err = both[i] - want;
        bad += (err < 0 ? -err : err) > 2e-3 * (1.0 + (want < 0 ? -want : want));
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(dk), free(dv), free(both);
    case_free(&c);
}

/* One phase 1 on the case with the changes after `code` made to its
 * arguments (a is the call), expected to answer `code`. */
#define EXPECT(c, code, ...) EXPECT_CALL(g_call, c, code, __VA_ARGS__)

enum { NULLPTR = ACLNN_ERR_PARAM_NULLPTR, INVALID = ACLNN_ERR_PARAM_INVALID, TILING = ACLNN_ERR_INNER_TILING_ERROR };

/* Missing arguments: 161001; the pairings: 161002. */
static void test_codes_missing(void)
{
    rng r = rng_seed(3412);
    g_case c;
    const int64_t len[G_MAX_B] = {40, 23};
    case_make(&c, SPA_FLOAT16, true, 2, 1, 2, 1, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, NULLPTR, a->q = NULL);
    EXPECT(&c, NULLPTR, a->k = NULL);
    EXPECT(&c, NULLPTR, a->idx = NULL);
    EXPECT(&c, NULLPTR, a->dy = NULL);
    EXPECT(&c, NULLPTR, a->o = NULL);
    EXPECT(&c, NULLPTR, a->mx = NULL);
    EXPECT(&c, NULLPTR, a->sm = NULL);
    EXPECT(&c, NULLPTR, a->dq = NULL);
    EXPECT(&c, NULLPTR, a->dk = NULL);
    EXPECT(&c, NULLPTR, a->ws = NULL);
    EXPECT(&c, NULLPTR, a->exp = NULL);
    EXPECT(&c, NULLPTR, a->dv = NULL);              /* a value without its gradient */
    EXPECT(&c, NULLPTR, a->lq = NULL);              /* TND */
    EXPECT(&c, NULLPTR, a->lk = NULL);
    EXPECT(&c, NULLPTR, a->dqr = NULL);             /* a rope without its gradient */
    EXPECT(&c, NULLPTR, a->dkr = NULL);
    EXPECT(&c, ACLNN_SUCCESS, a->v = a->dv = NULL); /* the KV merge */
    EXPECT(&c, INVALID, a->v = NULL);               /* a dValue without a value */
    EXPECT(&c, ACLNN_SUCCESS, a->qr = a->kr = a->dqr = a->dkr = NULL); /* no rope */
    EXPECT(&c, ACLNN_SUCCESS, a->qr = a->kr = NULL); /* rope gradients without the ropes: not read */
    EXPECT(&c, INVALID, a->qr = a->dqr = NULL);     /* one rope without the other */
    EXPECT(&c, INVALID, a->kr = a->dkr = NULL);
    case_free(&c);
    case_make(&c, SPA_BFLOAT16, false, 2, 2, 2, 1, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, a->lq = a->lk = NULL); /* BSND: the lengths are optional */
    case_free(&c);
}

/* dtypes: 161002. */
static void test_codes_dtypes(void)
{
    rng r = rng_seed(3413);
    g_case c;
    const int64_t len[G_MAX_B] = {40, 23};
    case_make(&c, SPA_FLOAT16, false, 2, 2, 2, 8, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, INVALID, a->q = arena_alt(&a->ar, &c.q, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->k = arena_alt(&a->ar, &c.k, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->v = arena_alt(&a->ar, &c.v, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->dy = arena_alt(&a->ar, &c.dy, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->o = arena_alt(&a->ar, &c.o, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->qr = arena_alt(&a->ar, &c.qr, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->kr = arena_alt(&a->ar, &c.kr, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->dq = arena_alt(&a->ar, &c.dq, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->dk = arena_alt(&a->ar, &c.dk, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->dv = arena_alt(&a->ar, &c.dv, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->dqr = arena_alt(&a->ar, &c.dqr, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, a->dkr = arena_alt(&a->ar, &c.dkr, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT64, -1, 0));
    EXPECT(&c, INVALID, a->mx = arena_alt(&a->ar, &c.mx, SPA_FLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->sm = arena_alt(&a->ar, &c.sm, SPA_BFLOAT16, -1, 0));
    EXPECT(&c, INVALID, a->lq = arena_alt(&a->ar, &c.lq, SPA_INT64, -1, 0));
    EXPECT(&c, INVALID, a->lk = arena_alt(&a->ar, &c.lk, SPA_FLOAT32, -1, 0));
    EXPECT(&c, INVALID, tt_set_int(&c.lq, 1, 1)); /* a BSND padding query: not reproduced */
    tt_set_int(&c.lq, 1, 2);
    tt_set_int(&c.idx, G_K + 1, 5); /* block 5 of 8 rows: past batch 0's 40 rows (the native rule) */
    EXPECT(&c, INVALID, (void)a);
    case_free(&c);
}

/* Attribute values and shapes: 561002. */
static void test_codes_tiling(void)
{
    rng r = rng_seed(3414);
    g_case c;
    const int64_t len[G_MAX_B] = {40, 23};
    case_make(&c, SPA_BFLOAT16, false, 2, 2, 2, 1, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, a->lay = NULL);       /* CANN's default: BSND */
    EXPECT(&c, ACLNN_SUCCESS, a->pre = a->next = 2147483647, a->deterministic = true);
    EXPECT(&c, TILING, strcpy(a->lay, "BSH"));
    EXPECT(&c, TILING, strcpy(a->lay, "PA_BSND"));
    EXPECT(&c, TILING, strcpy(a->lay, "TND"));      /* 4-D tensors, a 3-letter layout */
    EXPECT(&c, TILING, a->mode = 1);
    EXPECT(&c, TILING, a->sbs = 2);
    EXPECT(&c, TILING, a->sbs = 128);
    EXPECT(&c, TILING, a->sbs = 0);
    EXPECT(&c, TILING, a->pre = 100);
    EXPECT(&c, TILING, a->next = 0);
    EXPECT(&c, TILING, a->q = arena_alt(&a->ar, &c.q, SPA_BFLOAT16, 3, 256));     /* D 256 */
    EXPECT(&c, TILING, a->v = arena_alt(&a->ar, &c.v, SPA_BFLOAT16, 3, 256));     /* Dv 256 */
    EXPECT(&c, TILING, a->qr = arena_alt(&a->ar, &c.qr, SPA_BFLOAT16, 3, 32));    /* rope D 32 */
    EXPECT(&c, TILING, a->k = a->v = arena_alt(&a->ar, &c.k, SPA_BFLOAT16, 2, 2)); /* N2 2 */
    EXPECT(&c, TILING, a->dy = arena_alt(&a->ar, &c.dy, SPA_BFLOAT16, 2, 4));
    EXPECT(&c, TILING, a->o = arena_alt(&a->ar, &c.o, SPA_BFLOAT16, 1, 3));
    EXPECT(&c, TILING, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT32, 2, 2));      /* N2 2 */
    EXPECT(&c, TILING, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT32, 3, 512));    /* K 512 */
    EXPECT(&c, TILING, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT32, 3, 1536));   /* K not a multiple of 1024 */
    EXPECT(&c, TILING, a->idx = arena_alt(&a->ar, &c.idx, SPA_INT32, 3, 9216));   /* K 9216 */
    EXPECT(&c, TILING, a->v = arena_alt(&a->ar, &c.v, SPA_BFLOAT16, 1, 8));       /* value's S2 not the key's */
    EXPECT(&c, TILING, a->kr = arena_alt(&a->ar, &c.kr, SPA_BFLOAT16, 1, 8));
    EXPECT(&c, TILING, a->mx = arena_alt(&a->ar, &c.mx, SPA_FLOAT32, 3, 4));      /* N1 4 */
    EXPECT(&c, TILING, a->sm = arena_alt(&a->ar, &c.dq, SPA_FLOAT32, -1, 0));     /* [B, S1, N1, D] */
    EXPECT(&c, TILING, a->dq = arena_alt(&a->ar, &c.dq, SPA_BFLOAT16, 0, 1));
    EXPECT(&c, TILING, a->dk = arena_alt(&a->ar, &c.dk, SPA_BFLOAT16, 1, 8));
    EXPECT(&c, TILING, a->dv = arena_alt(&a->ar, &c.dv, SPA_BFLOAT16, 1, 8));
    EXPECT(&c, TILING, a->dqr = arena_alt(&a->ar, &c.dqr, SPA_BFLOAT16, 3, 32));
    EXPECT(&c, TILING, a->dkr = arena_alt(&a->ar, &c.dkr, SPA_BFLOAT16, 1, 8));
    EXPECT(&c, TILING, a->k = arena_alt(&a->ar, &c.k, SPA_BFLOAT16, 0, 3),
           a->v = arena_alt(&a->ar, &c.v, SPA_BFLOAT16, 0, 3),
           a->kr = arena_alt(&a->ar, &c.kr, SPA_BFLOAT16, 0, 3)); /* kv B 3 against the query's 2 */
    EXPECT(&c, TILING, a->lk = arena_alt(&a->ar, &c.lk, SPA_INT32, 0, 3)); /* 3 lengths for 2 batches */
    case_free(&c);
    case_make(&c, SPA_FLOAT16, true, 2, 2, 2, 1, len, &r);
    EXPECT(&c, ACLNN_SUCCESS, (void)a);
    EXPECT(&c, TILING, strcpy(a->lay, "BSND"));     /* 3-D tensors, a 4-letter layout */
    EXPECT(&c, TILING, tt_set_int(&c.lk, 1, 30));  /* a prefix sum that decreases */
    tt_set_int(&c.lk, 1, 63);
    EXPECT(&c, TILING, a->lq = arena_alt(&a->ar, &c.lq, SPA_INT32, 0, 257),
           a->lk = arena_alt(&a->ar, &c.lk, SPA_INT32, 0, 257)); /* B 257 */
    EXPECT(&c, TILING, tt_set_int(&c.lq, 0, 131073), tt_set_int(&c.lq, 1, 131075)); /* S1 above 128K */
    tt_set_int(&c.lq, 0, 2), tt_set_int(&c.lq, 1, 4);
    EXPECT(&c, INVALID, tt_set_int(&c.lq, 1, 3)); /* T1 4, the lengths sum to 3: not reproduced (native) */
    tt_set_int(&c.lq, 1, 4);
    case_free(&c);
    case_make(&c, SPA_FLOAT16, false, 1, 1, 3, 1, len, &r); /* N1 3 */
    EXPECT(&c, TILING, (void)a);
    case_free(&c);
    case_make(&c, SPA_FLOAT16, false, 1, 1, 256, 1, len, &r); /* N1 256 */
    EXPECT(&c, TILING, (void)a);
    case_free(&c);
}

enum { S_T1 = 1, S_N1 = 16, S_T2 = 2048, S_K = 2048 };

/* CANN's sample, as a client runs it (its page's example: TND, one query,
 * N1 16, K 2048 over 2048 key rows, sparseBlockSize 1, sparseMode 0, every
 * input 1.0; here with the statistics of the forward, made the same way,
 * and scale 1/32 so that every score is exact): P is 1 / 2048 everywhere
 * and dP equals its mean, so dQuery, dKey and the rope gradients are 0 and
 * each dValue row 16 / 2048. */

static void test_client_sample(void)
{
    if (test_thin) /* K 2048 at D 512 + 64: seconds under emulation; the quick and full sets run it */
        return;
    aclrtContext ctx;
    aclrtStream stream;
    client_open(&ctx, &stream);

    const int64_t q_shape[3] = {S_T1, S_N1, G_D}, k_shape[3] = {S_T2, 1, G_D}, idx_shape[3] = {S_T1, 1, S_K};
    const int64_t stat_shape[3] = {1, S_T1, S_N1}, len_shape[1] = {1};
    const int64_t qr_shape[3] = {S_T1, S_N1, G_DR}, kr_shape[3] = {S_T2, 1, G_DR};
    const size_t kn = (size_t)S_T2 * G_D;
    uint16_t *ones = malloc(kn * sizeof *ones);
    int32_t *iota = malloc(S_K * sizeof *iota);
    CU_ASSERT_FATAL(ones != NULL && iota != NULL);
    for (size_t i = 0; i < kn; i++)
        ones[i] = aclFloatToFloat16(1.0f);
    for (int32_t i = 0; i < S_K; i++)
        iota[i] = i;
    const int32_t lq[1] = {S_T1}, lk[1] = {S_T2};
    dev_buf q, k, v, idx, out, dout, mx, sm, sq, skv, qr, kr, dq, dk, dv, dqr, dkr;
    dev_make(&q, q_shape, 3, ACL_FLOAT16, ones), dev_make(&k, k_shape, 3, ACL_FLOAT16, ones);
    dev_make(&v, k_shape, 3, ACL_FLOAT16, ones), dev_make(&idx, idx_shape, 3, ACL_INT32, iota);
    dev_make(&out, q_shape, 3, ACL_FLOAT16, NULL), dev_make(&dout, q_shape, 3, ACL_FLOAT16, ones);
    dev_make(&mx, stat_shape, 3, ACL_FLOAT, NULL), dev_make(&sm, stat_shape, 3, ACL_FLOAT, NULL);
    dev_make(&sq, len_shape, 1, ACL_INT32, lq), dev_make(&skv, len_shape, 1, ACL_INT32, lk);
    dev_make(&qr, qr_shape, 3, ACL_FLOAT16, ones), dev_make(&kr, kr_shape, 3, ACL_FLOAT16, ones);
    dev_make(&dq, q_shape, 3, ACL_FLOAT16, NULL), dev_make(&dk, k_shape, 3, ACL_FLOAT16, NULL);
    dev_make(&dv, k_shape, 3, ACL_FLOAT16, NULL), dev_make(&dqr, qr_shape, 3, ACL_FLOAT16, NULL);
    dev_make(&dkr, kr_shape, 3, ACL_FLOAT16, NULL);
    double scale = 0.03125;
    int64_t sparse_block_size = 1, sparse_mode = 0, pre = 2147483647, next = 2147483647;
    char layout[5] = {'T', 'N', 'D', 0};

    /* The forward (its statistics are the grad's inputs). */
    uint64_t size = 0;
    aclOpExecutor *ex = NULL;
    CU_ASSERT_EQUAL_FATAL(aclnnSparseFlashAttentionGetWorkspaceSize(q.t, k.t, v.t, idx.t, NULL, sq.t, skv.t, qr.t, kr.t,
                                                                    scale, sparse_block_size, layout, layout,
                                                                    sparse_mode, INT64_MAX, INT64_MAX, 2, true, out.t,
                                                                    mx.t, sm.t, &size, &ex),
                          ACLNN_SUCCESS);
    client_phase2(aclnnSparseFlashAttention, size, ex, stream);

    /* The grad, as the page's example calls it. */
    size = 0, ex = NULL;
    CU_ASSERT_EQUAL_FATAL(aclnnSparseFlashAttentionGradGetWorkspaceSize(
                              q.t, k.t, v.t, idx.t, dout.t, out.t, mx.t, sm.t, sq.t, skv.t, qr.t, kr.t, scale,
                              sparse_block_size, layout, sparse_mode, pre, next, false, dq.t, dk.t, dv.t, dqr.t,
                              dkr.t, &size, &ex),
                          ACLNN_SUCCESS);
    client_phase2(aclnnSparseFlashAttentionGrad, size, ex, stream);
    CU_ASSERT(dev_all(&out, 1.0f));
    CU_ASSERT(dev_all(&dq, 0.0f) && dev_all(&dqr, 0.0f));
    CU_ASSERT(dev_all(&dk, 0.0f) && dev_all(&dkr, 0.0f));
    CU_ASSERT(dev_all(&dv, (float)(S_T1 * S_N1) / S_K));

    dev_buf *all[] = {&q, &k, &v, &idx, &out, &dout, &mx, &sm, &sq, &skv, &qr, &kr, &dq, &dk, &dv, &dqr, &dkr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        dev_free(all[i]);
    free(ones), free(iota);
    client_close(ctx, stream);
}

void suite_acl_dsa_sfa_grad(void);
void suite_acl_dsa_sfa_grad(void)
{
    CU_pSuite s = CU_add_suite("acl_dsa_sfa_grad", NULL, NULL);
    CU_add_test(s, "SparseFlashAttentionGrad: the native bytes (BSND / TND, value, MLA-absorb, KV merge, ropes)",
                test_same_as_native);
    CU_add_test(s, "SparseFlashAttentionGrad: the KV merge sums dKey and dValue", test_merge_sums);
    CU_add_test(s, "SparseFlashAttentionGrad: CANN's codes, missing arguments (161001) and pairings",
                test_codes_missing);
    CU_add_test(s, "SparseFlashAttentionGrad: CANN's codes, dtypes (161002)", test_codes_dtypes);
    CU_add_test(s, "SparseFlashAttentionGrad: CANN's codes, attributes and shapes (561002)", test_codes_tiling);
    CU_add_test(s, "SparseFlashAttentionGrad: CANN's sample as a client runs it (all ones)", test_client_sample);
}
#else
void suite_acl_dsa_sfa_grad(void);
void suite_acl_dsa_sfa_grad(void)
{
}
#endif
#endif
