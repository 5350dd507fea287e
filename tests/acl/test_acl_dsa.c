/* aclnnLightningIndexer: equal scores rank by key (a CANN-style all-ones
 * call), random problems give the native operator's bytes (on the native
 * views of the same memory: BSND query merged, PA_BSND / BSND / TND key,
 * lengths from INT32 tensors, TND prefix sums), and CANN's rules give
 * CANN's codes. */
#include <CUnit/Basic.h>

#if !defined(SPA_HAVE_ACL)
void suite_acl_dsa(void);
void suite_acl_dsa(void)
{
}
#else

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_lightning_indexer.h"
#include "spa_acl_ops.h"
#include "spattn/dsa.h"
#include "acl_util.h"
#include "util.h"

#if SPA_HAVE_DSA_LIGHTNING_INDEXER

enum { LI_D = 128 };

/* A problem in CANN's layouts: query BSND [B, S1, N1, 128] or TND, key
 * PA_BSND (pages of `page` rows, in reverse order, table entries past a
 * batch -1), BSND [B, S2, 1, 128] or TND, weights f32, lengths tensors. */
typedef struct li_case {
    ttensor q, k, w, table, idx, val, lq, lk;
    int64_t b, s1, n1, kc, page, t, lens_q[4], lens_k[4];
    const char *lay_q, *lay_k;
    spa_dtype dt;
    int64_t mode;
    bool values;
} li_case;

static void case_make(li_case *c, spa_dtype dt, const char *lay_q, const char *lay_k, int64_t b, int64_t s1,
                      int64_t n1, int64_t page, int64_t kc, const int64_t *len, rng *r)
{
    memset(c, 0, sizeof *c);
    c->dt = dt, c->lay_q = lay_q, c->lay_k = lay_k, c->b = b, c->s1 = s1, c->n1 = n1, c->page = page, c->kc = kc;
    c->mode = 3;
    const bool q_tnd = strcmp(lay_q, "TND") == 0;
    int64_t pages = 0, cols = 1, t2 = 0, s2 = 1;
    for (int64_t i = 0; i < b; i++) {
        c->lens_k[i] = len[i], c->lens_q[i] = s1;
        const int64_t np = (len[i] + page - 1) / page;
        pages += np, t2 += len[i];
        cols = np > cols ? np : cols, s2 = len[i] > s2 ? len[i] : s2;
    }
    c->t = b * s1;
    const int64_t qd4[4] = {b, s1, n1, LI_D}, qd3[3] = {c->t, n1, LI_D};
    const int64_t wd3[3] = {b, s1, n1}, wd2[2] = {c->t, n1};
    const int64_t id4[4] = {b, s1, 1, kc}, id3[3] = {c->t, 1, kc};
    tt_make(&c->q, dt, q_tnd ? 3 : 4, q_tnd ? qd3 : qd4, false, r);
    tt_make(&c->w, SPA_FLOAT32, q_tnd ? 2 : 3, q_tnd ? wd2 : wd3, false, r);
    tt_make(&c->idx, SPA_INT32, q_tnd ? 3 : 4, q_tnd ? id3 : id4, false, r);
    tt_make(&c->val, dt, q_tnd ? 3 : 4, q_tnd ? id3 : id4, false, r);
    if (strcmp(lay_k, "PA_BSND") == 0) {
        const int64_t kd[4] = {pages, page, 1, LI_D}, td[2] = {b, cols};
        tt_make(&c->k, dt, 4, kd, false, r);
        tt_make(&c->table, SPA_INT32, 2, td, false, r);
        for (int64_t i = 0, used = 0; i < b; i++)
            for (int64_t j = 0; j < cols; j++)
                tt_set_int(&c->table, i * cols + j, j < (len[i] + page - 1) / page ? pages - 1 - used++ : -1);
    } else if (strcmp(lay_k, "TND") == 0) {
        const int64_t kd[3] = {t2, 1, LI_D};
        tt_make(&c->k, dt, 3, kd, false, r);
    } else {
        const int64_t kd[4] = {b, s2, 1, LI_D};
        tt_make(&c->k, dt, 4, kd, false, r);
    }
    const int64_t ld[1] = {b};
    tt_make(&c->lq, SPA_INT32, 1, ld, false, r);
    tt_make(&c->lk, SPA_INT32, 1, ld, false, r);
    for (int64_t i = 0, cq = 0, ck = 0; i < b; i++) { /* TND: prefix sums */
        cq += s1, ck += len[i];
        tt_set_int(&c->lq, i, q_tnd ? cq : s1);
        tt_set_int(&c->lk, i, strcmp(lay_k, "TND") == 0 ? ck : len[i]);
    }
    tt_fill_random(&c->q, r, -1.0, 1.0);
    tt_fill_random(&c->k, r, -1.0, 1.0);
    tt_fill_random(&c->w, r, -1.0, 1.0);
}

static void case_free(li_case *c)
{
    tt_free(&c->q), tt_free(&c->k), tt_free(&c->w), tt_free(&c->table), tt_free(&c->idx), tt_free(&c->val);
    tt_free(&c->lq), tt_free(&c->lk);
}

/* Phase 1 through aclnn with the case's arguments and these overrides. */
static aclnnStatus acl_phase1(li_case *c, bool no_query, bool no_lk, int64_t count, int64_t pre,
                              uint64_t *size, aclOpExecutor **ex)
{
    const bool pa = strcmp(c->lay_k, "PA_BSND") == 0;
    aclTensor *q = acl_of(&c->q.t), *k = acl_of(&c->k.t), *w = acl_of(&c->w.t), *i = acl_of(&c->idx.t);
    aclTensor *v = acl_of(&c->val.t), *lq = acl_of(&c->lq.t), *lk = acl_of(&c->lk.t);
    aclTensor *t = pa ? acl_of(&c->table.t) : NULL;
    char layq[8], layk[8];
    strcpy(layq, c->lay_q), strcpy(layk, c->lay_k);
    aclnnStatus st = aclnnLightningIndexerGetWorkspaceSize(
        no_query ? NULL : q, k, w, lq, no_lk ? NULL : lk, t, layq, layk, count, c->mode, pre, INT64_MAX, c->values, i,
        c->values ? v : NULL, size, ex);
    aclDestroyTensor(q), aclDestroyTensor(k), aclDestroyTensor(w), aclDestroyTensor(i), aclDestroyTensor(v);
    aclDestroyTensor(lq), aclDestroyTensor(lk);
    if (t != NULL)
        aclDestroyTensor(t);
    return st;
}

static aclnnStatus acl_run(li_case *c)
{
    uint64_t size = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = acl_phase1(c, false, false, c->kc, INT64_MAX, &size, &ex);
    if (st != ACLNN_SUCCESS)
        return st;
    void *ws = size ? malloc(size) : NULL;
    st = aclnnLightningIndexer(ws, size, ex, NULL);
    free(ws);
    return st;
}

/* All ones: every score equal, so each query's indices are its keys in
 * ascending order, then -1 (causal: query i of S1 = 2 at the end of 2 keys
 * sees i + 1 keys). */
static void test_all_ones(void)
{
    rng r = rng_seed(3301);
    li_case c;
    const int64_t len[1] = {2};
    case_make(&c, SPA_FLOAT16, "BSND", "BSND", 1, 2, 1, 16, 2048, len, &r);
    for (int64_t i = 0; i < tt_numel(&c.q); i++) /* 1.0 in f16 */
        ((uint16_t *)c.q.t.data)[i] = 0x3C00;
    for (int64_t i = 0; i < tt_numel(&c.k); i++)
        ((uint16_t *)c.k.t.data)[i] = 0x3C00;
    for (int64_t i = 0; i < tt_numel(&c.w); i++)
        ((float *)c.w.t.data)[i] = 1.0f;
    CU_ASSERT_EQUAL(acl_run(&c), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(tt_get(&c.idx, 0), 0.0);
    CU_ASSERT_EQUAL(tt_get(&c.idx, 1), -1.0);
    CU_ASSERT_EQUAL(tt_get(&c.idx, 2048), 0.0);
    CU_ASSERT_EQUAL(tt_get(&c.idx, 2049), 1.0);
    CU_ASSERT_EQUAL(tt_get(&c.idx, 2050), -1.0);
    case_free(&c);
}

/* The native operator on the views aclnn takes, compared byte for byte. */
static void native_of(li_case *c, unsigned char **idx_bytes, unsigned char **val_bytes)
{
    const bool q_tnd = strcmp(c->lay_q, "TND") == 0, pa = strcmp(c->lay_k, "PA_BSND") == 0;
    spa_tensor q = c->q.t, w = c->w.t, idx = c->idx.t, val = c->val.t;
    if (!q_tnd) { /* B and S merged (contiguous tensors) */
        q.rank = 3, q.dims[0] = c->t, q.dims[1] = c->n1, q.dims[2] = LI_D;
        q.strides[0] = c->n1 * LI_D, q.strides[1] = LI_D, q.strides[2] = 1;
        w.rank = 2, w.dims[0] = c->t, w.dims[1] = c->n1, w.strides[0] = c->n1, w.strides[1] = 1;
        idx.rank = val.rank = 3, idx.dims[0] = val.dims[0] = c->t, idx.dims[1] = val.dims[1] = 1;
        idx.dims[2] = val.dims[2] = c->kc, idx.strides[0] = val.strides[0] = c->kc;
        idx.strides[1] = val.strides[1] = c->kc, idx.strides[2] = val.strides[2] = 1;
    }
    const spa_int_array sq = {c->lens_q, (uint64_t)c->b}, skv = {c->lens_k, (uint64_t)c->b};
    uint64_t size;
    spa_executor ex;
    tt_fill_canary(&c->idx), tt_fill_canary(&c->val);
    CU_ASSERT_EQUAL(spa_dsa_lightning_indexer_get_workspace_size(&q, &c->k.t, &w, pa ? &c->table.t : NULL, &sq,
                                                                 &skv, c->kc, c->mode, &idx, c->values ? &val : NULL,
                                                                 &size, &ex),
                    SPA_OK);
    void *ws = malloc(size);
    CU_ASSERT_EQUAL(spa_dsa_lightning_indexer(ws, size, &ex, NULL), SPA_OK);
    free(ws);
    *idx_bytes = tt_snapshot(&c->idx), *val_bytes = tt_snapshot(&c->val);
}

static void test_same_as_native(void)
{
    static const char *const lq[3] = {"BSND", "TND", "TND"}, *const lk[3] = {"PA_BSND", "TND", "BSND"};
    rng r = rng_seed(3302);
    for (int k = 0; k < 3; k++) {
        li_case c;
        const int64_t len[2] = {300, 170};
        case_make(&c, k == 1 ? SPA_FLOAT16 : SPA_BFLOAT16, lq[k], lk[k], 2, 2, 8, 64, 100, len, &r);
        c.values = k != 0, c.mode = k == 2 ? 0 : 3;
        tt_fill_canary(&c.val);
        CU_ASSERT_EQUAL(acl_run(&c), ACLNN_SUCCESS);
        unsigned char *acl_idx = tt_snapshot(&c.idx), *acl_val = tt_snapshot(&c.val);
        unsigned char *nat_idx, *nat_val;
        native_of(&c, &nat_idx, &nat_val);
        CU_ASSERT(memcmp(acl_idx, nat_idx, c.idx.span) == 0);
        CU_ASSERT(memcmp(acl_val, nat_val, c.val.span) == 0);
        CU_ASSERT(tt_get(&c.idx, 0) >= 0.0); /* something was selected */
        free(acl_idx), free(acl_val), free(nat_idx), free(nat_val);
        case_free(&c);
    }
}

/* CANN's rules and codes. */
static void test_cann_codes(void)
{
    rng r = rng_seed(3303);
    li_case c;
    const int64_t len[1] = {100};
    uint64_t size;
    aclOpExecutor *ex;
    case_make(&c, SPA_FLOAT16, "BSND", "PA_BSND", 1, 1, 4, 64, 16, len, &r);
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 16, INT64_MAX, &size, &ex), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(acl_phase1(&c, true, false, 16, INT64_MAX, &size, &ex), (aclnnStatus)-1); /* GRAPH_FAILED */
    CU_ASSERT_EQUAL(acl_phase1(&c, false, true, 16, INT64_MAX, &size, &ex), ACLNN_ERR_PARAM_NULLPTR);
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 2049, INT64_MAX, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 16, 100, &size, &ex), ACLNN_ERR_PARAM_INVALID); /* preTokens */
    c.mode = 1;
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 16, INT64_MAX, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    c.mode = 3, c.values = true; /* values with a paged key */
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 16, INT64_MAX, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    c.values = false;
    tt_set_int(&c.table, 1, 99); /* a page of the sequence outside the pool: the native rule */
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 16, INT64_MAX, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    case_free(&c);
    case_make(&c, SPA_FLOAT16, "BSND", "BSND", 1, 1, 65, 64, 16, len, &r); /* N1 65 */
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 16, INT64_MAX, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    case_free(&c);
    case_make(&c, SPA_FLOAT32, "BSND", "BSND", 1, 1, 4, 64, 16, len, &r); /* f32 */
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 16, INT64_MAX, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    case_free(&c);
    const int64_t len2[2] = {40, 30};
    case_make(&c, SPA_FLOAT16, "TND", "TND", 2, 1, 4, 64, 16, len2, &r);
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 3072, INT64_MAX, &size, &ex), ACLNN_ERR_PARAM_INVALID); /* out dim */
    tt_set_int(&c.lk, 1, 20); /* a prefix sum that decreases */
    CU_ASSERT_EQUAL(acl_phase1(&c, false, false, 16, INT64_MAX, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    case_free(&c);
}

void suite_acl_dsa(void);
void suite_acl_dsa(void)
{
    CU_pSuite s = CU_add_suite("acl_dsa", NULL, NULL);
    CU_add_test(s, "LightningIndexer: all ones, keys in order", test_all_ones);
    CU_add_test(s, "LightningIndexer: the native bytes (PA_BSND, TND, BSND keys)", test_same_as_native);
    CU_add_test(s, "LightningIndexer: CANN's codes", test_cann_codes);
}
#else
void suite_acl_dsa(void);
void suite_acl_dsa(void)
{
}
#endif
#endif
