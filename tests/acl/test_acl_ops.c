/* The aclnn wrappers of NsaSelectedAttention(+Grad) and
 * MultiScaleDeformableAttention(+Grad): for a valid problem they produce the
 * native bytes, and for every NULL argument and a set of invalid ones they
 * answer the native code. Each operator's cases are built only when the core
 * archive defines it (spa_acl_ops.h); otherwise the suite says so. */
#include <CUnit/Basic.h>
#include <stdio.h>

#if !defined(SPA_HAVE_ACL)
void suite_acl_ops(void);
void suite_acl_ops(void)
{
}
#else

#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_multi_scale_deformable_attention_grad.h"
#include "aclnnop/aclnn_multi_scale_deformable_attn_function.h"
#include "aclnnop/aclnn_nsa_selected_attention.h"
#include "aclnnop/aclnn_nsa_selected_attention_grad.h"
#include "spa_acl_ops.h"
#include "util.h"

#define ANY_OP (SPA_HAVE_NSA_SELECT || SPA_HAVE_NSA_SELECT_GRAD || SPA_HAVE_MSDA || SPA_HAVE_MSDA_GRAD)
#if ANY_OP

#define MAX_T 12

/* One problem of an operator: its tensors (owned), the descriptors passed
 * (mutable by the invalid cases), its host arrays and attributes. */
typedef struct op_case {
    int n;                   /* tensors, in aclnn argument order */
    ttensor tt[MAX_T];
    spa_tensor t[MAX_T];
    bool absent[MAX_T];      /* optional tensor not given */
    int64_t seq[2][4];
    spa_int_array arr[2];
    const char *layout;
    double scale;
    int64_t attr[4];         /* op-specific integer attributes */
    int outputs[3], nout;    /* indices of the outputs */
    bool cann_only;          /* breaks a rule only aclnn keeps: native 0, aclnn 161002 */
} op_case;

typedef spa_status (*native_fn)(const op_case *c, const spa_tensor **t, const spa_int_array **a,
                                uint64_t *ws, spa_executor *ex);
typedef aclnnStatus (*acl_fn)(const op_case *c, aclTensor **t, aclIntArray **a, char *layout,
                              uint64_t *ws, aclOpExecutor **ex);
typedef spa_status (*native_run_fn)(void *ws, uint64_t size, const spa_executor *ex,
                                    const spa_runner *r);
typedef aclnnStatus (*acl_run_fn)(void *ws, uint64_t size, aclOpExecutor *ex, aclrtStream s);

typedef struct op_api {
    const char *name;
    int narrays;
    native_fn native;
    acl_fn acl;
    native_run_fn native_run;
    acl_run_fn acl_run;
} op_api;

static int64_t span_elems(const spa_tensor *t)
{
    int64_t last = 0;
    for (int32_t k = 0; k < t->rank && k < SPA_MAX_RANK; k++) {
        if (t->dims[k] < 0 || t->strides[k] < 0)
            return 1;
        if (t->dims[k] == 0)
            return 0;
    }
    for (int32_t k = 0; k < t->rank && k < SPA_MAX_RANK; k++) {
        int64_t d = t->dims[k] - 1;
        if (d != 0 && t->strides[k] > (INT64_MAX - 1 - last) / d)
            return 1;
        last += d * t->strides[k];
    }
    return last + 1;
}

/* Same view over a 1-D storage just large enough; ranks above 8 are kept. */
static aclTensor *acl_of(const spa_tensor *t)
{
    int64_t dims[10], strides[10];
    uint64_t rank = t->rank < 0 ? 0 : (uint64_t)t->rank;
    if (rank > 10)
        rank = 10;
    for (uint64_t k = 0; k < rank; k++) {
        dims[k] = k < SPA_MAX_RANK ? t->dims[k] : 1;
        strides[k] = k < SPA_MAX_RANK ? t->strides[k] : 1;
    }
    int64_t storage = span_elems(t);
    return aclCreateTensor(dims, rank, (aclDataType)t->dtype, strides, 0, ACL_FORMAT_ND, &storage, 1,
                           t->data);
}

static void case_tensor(op_case *c, int i, spa_dtype dt, int32_t rank, const int64_t *dims, rng *r)
{
    tt_make(&c->tt[i], dt, rank, dims, rng_int(r, 0, 2) == 0, r);
    if (dt == SPA_FLOAT32 || dt == SPA_FLOAT16 || dt == SPA_BFLOAT16)
        tt_fill_random(&c->tt[i], r, -1.0, 1.0);
    c->t[i] = c->tt[i].t;
}

static void case_free(op_case *c)
{
    for (int i = 0; i < c->n; i++)
        tt_free(&c->tt[i]);
}

static void case_reset(op_case *c)
{
    for (int i = 0; i < c->n; i++)
        c->t[i] = c->tt[i].t;
}

/* Both planned executors run on one workspace: the aclnn one writes the
 * bytes the native one wrote (outputs reset to the canary in between);
 * single_use: a second aclnn run is refused. */
static void runs_write_same_bytes(const op_api *api, op_case *c, uint64_t nsize, const spa_executor *nex,
                                  aclOpExecutor *ex, bool single_use)
{
    tws ws;
    tws_make(&ws, nsize, 1);
    CU_ASSERT_EQUAL(api->native_run(ws.ptr, nsize, nex, NULL), SPA_OK);
    unsigned char *snap[3];
    for (int k = 0; k < c->nout; k++) {
        snap[k] = tt_snapshot(&c->tt[c->outputs[k]]);
        tt_fill_canary(&c->tt[c->outputs[k]]);
    }
    CU_ASSERT_EQUAL(api->acl_run(ws.ptr, nsize, ex, NULL), ACLNN_SUCCESS);
    if (single_use)
        CU_ASSERT_EQUAL(api->acl_run(ws.ptr, nsize, ex, NULL), ACLNN_ERR_PARAM_INVALID);
    for (int k = 0; k < c->nout; k++) {
        CU_ASSERT(tt_same_bytes(&c->tt[c->outputs[k]], snap[k]));
        free(snap[k]);
    }
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
}

/* Phase 1 through both APIs with argument `hole` NULL (-1: none; n..n+1: an
 * array; n+2: workspaceSize; n+3: executor); the codes must agree, and on
 * success both executors run and write the same bytes. */
static spa_status compare(const op_api *api, op_case *c, int hole, const char *what)
{
    const spa_tensor *nt[MAX_T];
    aclTensor *at[MAX_T];
    const spa_int_array *na[2] = {NULL, NULL};
    aclIntArray *aa[2] = {NULL, NULL};
    for (int i = 0; i < c->n; i++) {
        bool null = hole == i || c->absent[i];
        nt[i] = null ? NULL : &c->t[i];
        at[i] = null ? NULL : acl_of(&c->t[i]);
    }
    for (int i = 0; i < api->narrays; i++) {
        na[i] = hole == c->n + i ? NULL : &c->arr[i];
        aa[i] = hole == c->n + i ? NULL : aclCreateIntArray(c->arr[i].data, c->arr[i].size);
    }
    uint64_t nsize = 0, size = 0;
    spa_executor nex;
    aclOpExecutor *ex = NULL;
    char *layout = c->layout ? strdup(c->layout) : NULL;
    spa_status want = api->native(c, nt, na, hole == c->n + 2 ? NULL : &nsize,
                                  hole == c->n + 3 ? NULL : &nex);
    aclnnStatus got = api->acl(c, at, aa, layout, hole == c->n + 2 ? NULL : &size,
                               hole == c->n + 3 ? NULL : &ex);
    if (c->cann_only ? want != SPA_OK || got != ACLNN_ERR_PARAM_INVALID : got != want)
        fprintf(stderr, "  %s %s (hole %d): aclnn %d, native %d\n", api->name, what, hole, (int)got,
                (int)want);
    if (c->cann_only) {
        CU_ASSERT_EQUAL(want, SPA_OK);
        CU_ASSERT_EQUAL(got, ACLNN_ERR_PARAM_INVALID);
    } else
        CU_ASSERT_EQUAL(got, want);
    if (got == ACLNN_SUCCESS && want == SPA_OK) {
        CU_ASSERT_EQUAL(size, nsize);
        runs_write_same_bytes(api, c, nsize, &nex, ex, true);
    } else if (got == ACLNN_SUCCESS) {
        aclDestroyAclOpExecutor(ex);
    }
    for (int i = 0; i < c->n; i++)
        aclDestroyTensor(at[i]);
    for (int i = 0; i < api->narrays; i++)
        aclDestroyIntArray(aa[i]);
    free(layout);
    return want;
}

/* CANN takes no double: with every float tensor ACL_DOUBLE the wrapper
 * answers 161002 and makes no executor, whatever the native API accepts;
 * but CANN checks pointers first, so with argument `hole` NULL (as in
 * compare) it answers 161001 where the native phase 1 of the float problem
 * with that hole does, and leaves workspaceSize alone either way. */
static void refuses_double(const op_api *api, op_case *c, int hole)
{
    const spa_tensor *nt[MAX_T];
    aclTensor *at[MAX_T];
    const spa_int_array *na[2] = {NULL, NULL};
    aclIntArray *aa[2] = {NULL, NULL};
    for (int i = 0; i < c->n; i++) {
        const bool null = hole == i || c->absent[i];
        spa_tensor d = c->t[i];
        if (d.dtype == SPA_FLOAT32 || d.dtype == SPA_FLOAT16 || d.dtype == SPA_BFLOAT16)
            d.dtype = SPA_FLOAT64;
        nt[i] = null ? NULL : &c->t[i];
        at[i] = null ? NULL : acl_of(&d);
    }
    for (int i = 0; i < api->narrays; i++) {
        na[i] = hole == c->n + i ? NULL : &c->arr[i];
        aa[i] = hole == c->n + i ? NULL : aclCreateIntArray(c->arr[i].data, c->arr[i].size);
    }
    uint64_t nsize = 0, size = 12345;
    spa_executor nex;
    aclOpExecutor *ex = NULL;
    char *layout = c->layout ? strdup(c->layout) : NULL;
    const spa_status native = api->native(c, nt, na, hole == c->n + 2 ? NULL : &nsize,
                                          hole == c->n + 3 ? NULL : &nex);
    const aclnnStatus want = native == SPA_ERR_NULLPTR ? ACLNN_ERR_PARAM_NULLPTR : ACLNN_ERR_PARAM_INVALID;
    const aclnnStatus got = api->acl(c, at, aa, layout, hole == c->n + 2 ? NULL : &size,
                                     hole == c->n + 3 ? NULL : &ex);
    if (got != want)
        fprintf(stderr, "  %s double (hole %d): aclnn %d, want %d\n", api->name, hole, (int)got, (int)want);
    CU_ASSERT_EQUAL(got, want);
    CU_ASSERT_PTR_NULL(ex);
    CU_ASSERT_EQUAL(size, 12345);
    for (int i = 0; i < c->n; i++)
        aclDestroyTensor(at[i]);
    for (int i = 0; i < api->narrays; i++)
        aclDestroyIntArray(aa[i]);
    free(layout);
}

typedef void (*mutation)(op_case *c);
typedef struct named_mutation {
    const char *name;
    mutation fn;
} named_mutation;

static void run_all(const op_api *api, op_case *c, const named_mutation *m, size_t nm)
{
    op_case base = *c;
    /* The base problem is valid (spec), so the byte comparison runs. */
    CU_ASSERT_EQUAL(compare(api, c, -1, "valid"), SPA_OK);
    refuses_double(api, c, -1);
    for (int hole = 0; hole < c->n + 4; hole++) {
        if (hole >= c->n && hole < c->n + 2 && hole - c->n >= api->narrays)
            continue;
        compare(api, c, hole, "NULL argument");
        refuses_double(api, c, hole);
    }
    for (size_t k = 0; k < nm; k++) {
        *c = base;
        case_reset(c);
        m[k].fn(c);
        compare(api, c, -1, m[k].name);
    }
    *c = base;
}

#endif /* ANY_OP */

/* ---------------- NsaSelectedAttention ---------------- */
#if SPA_HAVE_NSA_SELECT || SPA_HAVE_NSA_SELECT_GRAD

enum { SEL_BS, SEL_K, SEL_HEADS, SEL_SPARSE };

static void sel_common(op_case *c)
{
    c->seq[0][0] = 32;
    c->seq[1][0] = 48;
    c->arr[0] = (spa_int_array){c->seq[0], 1};
    c->arr[1] = (spa_int_array){c->seq[1], 1};
    c->layout = "TND";
    c->scale = 0.25;
    c->attr[SEL_BS] = 16;
    c->attr[SEL_K] = 2;
    c->attr[SEL_HEADS] = 4;
    c->attr[SEL_SPARSE] = 0;
}

static void fill_topk(ttensor *tt, rng *r)
{
    for (int64_t i = 0; i < tt_numel(tt); i++)
        tt_set_int(tt, i, rng_int(r, 0, 2)); /* 48 keys: blocks 0..2 */
}

/* What the native API accepts and CANN refuses (spec/nsa.md 0.3b): head dims
 * not multiples of 16, Dv < 16, a -1 slot, a partial block (KV 40 of 48
 * keys, block 2), more than 32 selected blocks. q, k, v: tensors 0, 1, 2; o and the other Dv-shaped
 * tensors at dv_at; topk at topk. */
static void sel_cann_only(const op_api *api, op_case *c, int topk, const int *dv_at, int ndv)
{
    op_case base = *c;
    ttensor wide; /* topkIndices of 33 slots */
    const int64_t wd[3] = {c->t[topk].dims[0], c->t[topk].dims[1], 33};
    rng r = rng_seed(958);
    tt_make(&wide, SPA_INT32, 3, wd, false, &r);
    fill_topk(&wide, &r);
    for (int m = 0; m < 6; m++) {
        *c = base;
        case_reset(c);
        c->cann_only = true;
        int32_t *p = c->tt[topk].t.data, saved = p[0];
        const char *what = "";
        switch (m) {
        case 4: /* the native API takes any number of slots, CANN 32 */
            what = "selectedBlockCount 33";
            c->t[topk] = wide.t;
            c->attr[SEL_K] = 33;
            break;
        case 0: /* D 24: the first 24 of 32 columns */
            what = "D 24";
            for (int i = 0; i < c->n; i++)
                if (c->t[i].rank == 3 && c->t[i].dims[2] == 32)
                    c->t[i].dims[2] = 24;
            break;
        case 1:
            what = "Dv 8";
            c->t[2].dims[2] = 8;
            for (int i = 0; i < ndv; i++)
                c->t[dv_at[i]].dims[2] = 8;
            break;
        case 2:
            what = "topk slot -1";
            p[0] = -1;
            break;
        case 3:
            what = "partial block";
            c->seq[1][0] = 40;
            p[0] = 2;
            break;
        default: /* the baseline: both accept */
            what = "baseline";
            c->cann_only = false;
            break;
        }
        compare(api, c, -1, what);
        p[0] = saved;
    }
    *c = base;
    tt_free(&wide);
}

#endif

#if SPA_HAVE_NSA_SELECT
/* query, key, value, topk, mask, softmaxMax, softmaxSum, attentionOut */
static void sel_make(op_case *c, rng *r)
{
    memset(c, 0, sizeof *c);
    sel_common(c);
    c->n = 8;
    const int64_t q[3] = {32, 4, 32}, k[3] = {48, 2, 32}, v[3] = {48, 2, 16}, ti[3] = {32, 2, 2},
                  mk[2] = {32, 48}, st[3] = {32, 4, 8}, o[3] = {32, 4, 16};
    case_tensor(c, 0, SPA_FLOAT16, 3, q, r);
    case_tensor(c, 1, SPA_FLOAT16, 3, k, r);
    case_tensor(c, 2, SPA_FLOAT16, 3, v, r);
    case_tensor(c, 3, SPA_INT32, 3, ti, r);
    fill_topk(&c->tt[3], r);
    c->t[3] = c->tt[3].t;
    case_tensor(c, 4, SPA_BOOL, 2, mk, r);
    case_tensor(c, 5, SPA_FLOAT32, 3, st, r);
    case_tensor(c, 6, SPA_FLOAT32, 3, st, r);
    case_tensor(c, 7, SPA_FLOAT16, 3, o, r);
    c->absent[4] = true;
    c->outputs[0] = 5, c->outputs[1] = 6, c->outputs[2] = 7, c->nout = 3;
}

static spa_status sel_native(const op_case *c, const spa_tensor **t, const spa_int_array **a,
                             uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_select_get_workspace_size(t[0], t[1], t[2], t[3], t[4], a[0], a[1], c->scale,
                                             c->attr[SEL_HEADS], c->layout, c->attr[SEL_SPARSE],
                                             c->attr[SEL_BS], c->attr[SEL_K], t[5], t[6], t[7], ws,
                                             ex);
}

static aclnnStatus sel_acl(const op_case *c, aclTensor **t, aclIntArray **a, char *layout,
                           uint64_t *ws, aclOpExecutor **ex)
{
    return aclnnNsaSelectedAttentionGetWorkspaceSize(t[0], t[1], t[2], t[3], t[4], a[0], a[1],
                                                     c->scale, c->attr[SEL_HEADS], layout,
                                                     c->attr[SEL_SPARSE], c->attr[SEL_BS],
                                                     c->attr[SEL_K], t[5], t[6], t[7], ws, ex);
}

static void sm_layout(op_case *c) { c->layout = "BSH"; }
static void sm_layout_null(op_case *c) { c->layout = NULL; }
static void sm_sparse1(op_case *c) { c->attr[SEL_SPARSE] = 1; }
static void sm_causal(op_case *c) { c->attr[SEL_SPARSE] = 2; c->absent[4] = false; }
static void sm_bs24(op_case *c) { c->attr[SEL_BS] = 24; }
static void sm_k3(op_case *c) { c->attr[SEL_K] = 3; }
static void sm_heads(op_case *c) { c->attr[SEL_HEADS] = 2; }
static void sm_key_f32(op_case *c) { c->t[1].dtype = SPA_FLOAT32; }
static void sm_topk_i64(op_case *c) { c->t[3].dtype = SPA_INT64; }
static void sm_mask_f32(op_case *c) { c->absent[4] = false; c->t[4].dtype = SPA_FLOAT32; }
static void sm_out_rank(op_case *c) { c->t[7].rank = 2; }
static void sm_seq_short(op_case *c) { c->arr[0].data = c->seq[1]; }
static void sm_q_bad_rank9(op_case *c) { c->t[0].rank = 9; }
static int32_t saved_index;
static void sm_index_range(op_case *c)
{
    int32_t *p = c->tt[3].t.data;
    saved_index = p[0];
    p[0] = 3; /* block 3 of a 48-key batch: out of range */
}

static const named_mutation sel_mutations[] = {
    {"layout BSH", sm_layout},        {"layout NULL", sm_layout_null},
    {"sparseMode 1", sm_sparse1},     {"causal with mask", sm_causal},
    {"blockSize 24", sm_bs24},        {"blockCount 3", sm_k3},
    {"headNum 2", sm_heads},          {"key FLOAT", sm_key_f32},
    {"topk INT64", sm_topk_i64},      {"mask FLOAT", sm_mask_f32},
    {"output rank 2", sm_out_rank},   {"q lengths total 48", sm_seq_short},
    {"query rank 9", sm_q_bad_rank9}, {"index out of range", sm_index_range},
};

static void test_select(void)
{
    static const op_api api = {"NsaSelectedAttention", 2, sel_native, sel_acl, spa_nsa_select,
                               aclnnNsaSelectedAttention};
    rng r = rng_seed(951);
    op_case c;
    sel_make(&c, &r);
    run_all(&api, &c, sel_mutations, sizeof sel_mutations / sizeof sel_mutations[0]);
    ((int32_t *)c.tt[3].t.data)[0] = saved_index;
    const int dv_at[1] = {7};
    sel_cann_only(&api, &c, 3, dv_at, 1);
    case_free(&c);
}
#endif

#if SPA_HAVE_NSA_SELECT_GRAD
/* query, key, value, attentionOut, attentionOutGrad, softmaxMax, softmaxSum,
 * topk, mask, dq, dk, dv */
static void selg_make(op_case *c, rng *r)
{
    memset(c, 0, sizeof *c);
    sel_common(c);
    c->n = 12;
    const int64_t q[3] = {32, 4, 32}, k[3] = {48, 2, 32}, v[3] = {48, 2, 16}, o[3] = {32, 4, 16},
                  st[3] = {32, 4, 8}, ti[3] = {32, 2, 2}, mk[2] = {32, 48};
    case_tensor(c, 0, SPA_FLOAT16, 3, q, r);
    case_tensor(c, 1, SPA_FLOAT16, 3, k, r);
    case_tensor(c, 2, SPA_FLOAT16, 3, v, r);
    case_tensor(c, 3, SPA_FLOAT16, 3, o, r);
    case_tensor(c, 4, SPA_FLOAT16, 3, o, r);
    case_tensor(c, 5, SPA_FLOAT32, 3, st, r);
    case_tensor(c, 6, SPA_FLOAT32, 3, st, r);
    tt_fill_random(&c->tt[6], r, 20.0, 30.0); /* a plausible sum: > 1 */
    case_tensor(c, 7, SPA_INT32, 3, ti, r);
    fill_topk(&c->tt[7], r);
    case_tensor(c, 8, SPA_BOOL, 2, mk, r);
    case_tensor(c, 9, SPA_FLOAT16, 3, q, r);
    case_tensor(c, 10, SPA_FLOAT16, 3, k, r);
    case_tensor(c, 11, SPA_FLOAT16, 3, v, r);
    c->absent[8] = true;
    c->outputs[0] = 9, c->outputs[1] = 10, c->outputs[2] = 11, c->nout = 3;
}

static spa_status selg_native(const op_case *c, const spa_tensor **t, const spa_int_array **a,
                              uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_select_grad_get_workspace_size(
        t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], a[0], a[1], t[8], c->scale,
        c->attr[SEL_BS], c->attr[SEL_K], c->attr[SEL_HEADS], c->layout, c->attr[SEL_SPARSE], t[9],
        t[10], t[11], ws, ex);
}

static aclnnStatus selg_acl(const op_case *c, aclTensor **t, aclIntArray **a, char *layout,
                            uint64_t *ws, aclOpExecutor **ex)
{
    return aclnnNsaSelectedAttentionGradGetWorkspaceSize(
        t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], a[0], a[1], t[8], c->scale,
        c->attr[SEL_BS], c->attr[SEL_K], c->attr[SEL_HEADS], layout, c->attr[SEL_SPARSE], t[9],
        t[10], t[11], ws, ex);
}

static void gm_layout(op_case *c) { c->layout = "TN"; }
static void gm_sparse3(op_case *c) { c->attr[SEL_SPARSE] = 3; }
static void gm_k33(op_case *c) { c->attr[SEL_K] = 33; }
static void gm_softmax_f16(op_case *c) { c->t[5].dtype = SPA_FLOAT16; }
static void gm_dq_shape(op_case *c) { c->t[9].dims[1] = 2; }
static void gm_o_dtype(op_case *c) { c->t[3].dtype = SPA_BFLOAT16; }
static void gm_causal(op_case *c) { c->attr[SEL_SPARSE] = 2; c->absent[8] = false; }

static const named_mutation selg_mutations[] = {
    {"layout TN", gm_layout},          {"sparseMode 3", gm_sparse3},
    {"blockCount 33", gm_k33},         {"softmax FLOAT16", gm_softmax_f16},
    {"dq shape", gm_dq_shape},         {"attentionOut BF16", gm_o_dtype},
    {"causal with mask", gm_causal},
};

static void test_select_grad(void)
{
    static const op_api api = {"NsaSelectedAttentionGrad", 2, selg_native, selg_acl,
                               spa_nsa_select_grad, aclnnNsaSelectedAttentionGrad};
    rng r = rng_seed(952);
    op_case c;
    selg_make(&c, &r);
    run_all(&api, &c, selg_mutations, sizeof selg_mutations / sizeof selg_mutations[0]);
    const int dv_at[3] = {3, 4, 11};
    sel_cann_only(&api, &c, 7, dv_at, 3);
    case_free(&c);
}
#endif

/* ---------------- MultiScaleDeformableAttention ---------------- */
#if SPA_HAVE_MSDA || SPA_HAVE_MSDA_GRAD
/* value [1,30,2,8]; levels 4x6 and 2x3 starting at 0 and 24; 32 queries,
 * 2 levels, 2 points. Tensors 0..4: value, spatialShape, levelStartIndex,
 * location, attnWeight. */
static void msda_inputs(op_case *c, rng *r)
{
    const int64_t v[4] = {1, 30, 2, 8}, sh[2] = {2, 2}, ls[1] = {2}, loc[6] = {1, 32, 2, 2, 2, 2},
                  aw[5] = {1, 32, 2, 2, 2};
    case_tensor(c, 0, SPA_FLOAT32, 4, v, r);
    case_tensor(c, 1, SPA_INT32, 2, sh, r);
    static const int64_t hw[4] = {4, 6, 2, 3};
    for (int i = 0; i < 4; i++)
        tt_set_int(&c->tt[1], i, hw[i]);
    case_tensor(c, 2, SPA_INT64, 1, ls, r);
    tt_set_int(&c->tt[2], 0, 0);
    tt_set_int(&c->tt[2], 1, 24);
    case_tensor(c, 3, SPA_FLOAT32, 6, loc, r);
    tt_fill_random(&c->tt[3], r, -0.2, 1.2);
    case_tensor(c, 4, SPA_FLOAT32, 5, aw, r);
}

static int64_t saved_hw;
static void mm_value_int(op_case *c) { c->t[0].dtype = SPA_INT32; }
static void mm_shape_f32(op_case *c) { c->t[1].dtype = SPA_FLOAT32; }
static void mm_loc_rank(op_case *c) { c->t[3].rank = 5; }
static void mm_attn_levels(op_case *c) { c->t[4].dims[3] = 3; }
static void mm_start_len(op_case *c) { c->t[2].dims[0] = 1; }
static void mm_huge_level(op_case *c)
{
    saved_hw = (int64_t)tt_get(&c->tt[1], 0);
    tt_set_int(&c->tt[1], 0, 1065353216); /* float 1.0 bits read as INT32 (seed 004) */
}

/* The NPU's limits (spec 8.1 rule 2 and 5, 8.2 rule 5), which the native API
 * lifts: phase 1 only, native SPA_OK and aclnn 161002. The float views are
 * packed again for their new dims (phase 1 reads no float data). */
static void msda_npu_limits(const op_api *api, op_case *c, const named_mutation *m, size_t nm)
{
    op_case base = *c;
    for (size_t k = 0; k < nm; k++) {
        *c = base;
        case_reset(c);
        m[k].fn(c);
        const spa_tensor *nt[MAX_T];
        aclTensor *at[MAX_T];
        for (int i = 0; i < c->n; i++) {
            if (i != 1 && i != 2) /* the index tensors keep their views and data */
                spa_tensor_init(&c->t[i], (spa_dtype)c->t[i].dtype, c->t[i].rank, c->t[i].dims, c->t[i].data);
            nt[i] = &c->t[i];
            at[i] = acl_of(&c->t[i]);
        }
        uint64_t nsize = 0, size = 0;
        spa_executor nex;
        aclOpExecutor *ex = NULL;
        spa_status native = api->native(c, nt, NULL, &nsize, &nex);
        aclnnStatus acl = api->acl(c, at, NULL, NULL, &size, &ex);
        if (native != SPA_OK || acl != ACLNN_ERR_PARAM_INVALID)
            fprintf(stderr, "  %s %s: native %d (want 0: %s), aclnn %d (want 161002)\n", api->name, m[k].name,
                    (int)native, native != SPA_OK ? spa_executor_reason(&nex, NULL) : "", (int)acl);
        CU_ASSERT_EQUAL(native, SPA_OK);
        CU_ASSERT_EQUAL(acl, ACLNN_ERR_PARAM_INVALID);
        CU_ASSERT_PTR_NULL(ex);
        for (int i = 0; i < c->n; i++)
            aclDestroyTensor(at[i]);
    }
    *c = base;
}
static void mm_c4(op_case *c) { c->t[0].dims[3] = 4; c->t[c->n == 6 ? 5 : 6].dims[c->n == 6 ? 2 : 3] = c->n == 6 ? 8 : 4; if (c->n == 9) c->t[5].dims[2] = 8; }
static void mm_c264(op_case *c) { c->t[0].dims[3] = 264; c->t[c->n == 6 ? 5 : 6].dims[c->n == 6 ? 2 : 3] = c->n == 6 ? 528 : 264; if (c->n == 9) c->t[5].dims[2] = 528; }
static void mm_nh17(op_case *c)
{
    c->t[0].dims[2] = c->t[3].dims[2] = c->t[4].dims[2] = 17;
    c->t[5].dims[2] = 17 * 8;
    if (c->n == 9)
        c->t[6].dims[2] = c->t[7].dims[2] = c->t[8].dims[2] = 17;
}
static void mm_np17(op_case *c)
{
    c->t[3].dims[4] = c->t[4].dims[4] = 17;
    if (c->n == 9)
        c->t[7].dims[4] = c->t[8].dims[4] = 17;
}
static void mm_nq(op_case *c, int64_t nq)
{
    c->t[3].dims[1] = c->t[4].dims[1] = c->t[5].dims[1] = nq;
    if (c->n == 9)
        c->t[7].dims[1] = c->t[8].dims[1] = nq;
}
static void mm_nq31(op_case *c) { mm_nq(c, 31); }
static void mm_nq0(op_case *c) { mm_nq(c, 0); }
static void mm_nq500000(op_case *c) { mm_nq(c, 500000); }
#endif

#if SPA_HAVE_MSDA
static void msda_make(op_case *c, rng *r)
{
    memset(c, 0, sizeof *c);
    c->n = 6;
    msda_inputs(c, r);
    const int64_t o[3] = {1, 32, 16};
    case_tensor(c, 5, SPA_FLOAT32, 3, o, r);
    c->outputs[0] = 5, c->nout = 1;
}

static spa_status msda_native(const op_case *c, const spa_tensor **t, const spa_int_array **a,
                              uint64_t *ws, spa_executor *ex)
{
    (void)c, (void)a;
    return spa_msda_get_workspace_size(t[0], t[1], t[2], t[3], t[4], t[5], ws, ex);
}

static aclnnStatus msda_acl(const op_case *c, aclTensor **t, aclIntArray **a, char *layout,
                            uint64_t *ws, aclOpExecutor **ex)
{
    (void)c, (void)a, (void)layout;
    return aclnnMultiScaleDeformableAttnFunctionGetWorkspaceSize(t[0], t[1], t[2], t[3], t[4], t[5],
                                                                 ws, ex);
}

static void mm_out_shape(op_case *c) { c->t[5].dims[2] = 8; }

static const named_mutation msda_mutations[] = {
    {"value INT32", mm_value_int},       {"spatialShape FLOAT", mm_shape_f32},
    {"location rank 5", mm_loc_rank},    {"attnWeight levels", mm_attn_levels},
    {"levelStartIndex length", mm_start_len}, {"output shape", mm_out_shape},
    {"level of 1065353216 rows", mm_huge_level},
};

static void mm_loc_f16(op_case *c) { c->t[3].dtype = SPA_FLOAT16; }
static void mm_attn_bf16(op_case *c) { c->t[4].dtype = SPA_BFLOAT16; }
static void mm_out_f16(op_case *c) { c->t[5].dtype = SPA_FLOAT16; }
static const named_mutation msda_npu[] = {
    {"location FLOAT16", mm_loc_f16}, {"attnWeight BFLOAT16", mm_attn_bf16}, {"output FLOAT16", mm_out_f16},
    {"nq 31", mm_nq31},               {"nq 0", mm_nq0},                     {"C 4", mm_c4},
    {"C 264", mm_c264},               {"nh 17", mm_nh17},                   {"np 17", mm_np17},
};

static void test_msda(void)
{
    static const op_api api = {"MultiScaleDeformableAttnFunction", 0, msda_native, msda_acl,
                               spa_msda, aclnnMultiScaleDeformableAttnFunction};
    rng r = rng_seed(953);
    op_case c;
    msda_make(&c, &r);
    run_all(&api, &c, msda_mutations, sizeof msda_mutations / sizeof msda_mutations[0]);
    tt_set_int(&c.tt[1], 0, saved_hw);
    msda_npu_limits(&api, &c, msda_npu, sizeof msda_npu / sizeof msda_npu[0]);
    case_free(&c);
}
#endif

#if SPA_HAVE_MSDA_GRAD
static void msdag_make(op_case *c, rng *r)
{
    memset(c, 0, sizeof *c);
    c->n = 9;
    msda_inputs(c, r);
    const int64_t go[3] = {1, 32, 16}, v[4] = {1, 30, 2, 8}, loc[6] = {1, 32, 2, 2, 2, 2},
                  aw[5] = {1, 32, 2, 2, 2};
    case_tensor(c, 5, SPA_FLOAT32, 3, go, r);
    case_tensor(c, 6, SPA_FLOAT32, 4, v, r);
    case_tensor(c, 7, SPA_FLOAT32, 6, loc, r);
    case_tensor(c, 8, SPA_FLOAT32, 5, aw, r);
    c->outputs[0] = 6, c->outputs[1] = 7, c->outputs[2] = 8, c->nout = 3;
}

static spa_status msdag_native(const op_case *c, const spa_tensor **t, const spa_int_array **a,
                               uint64_t *ws, spa_executor *ex)
{
    (void)c, (void)a;
    return spa_msda_grad_get_workspace_size(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], ws,
                                            ex);
}

static aclnnStatus msdag_acl(const op_case *c, aclTensor **t, aclIntArray **a, char *layout,
                             uint64_t *ws, aclOpExecutor **ex)
{
    (void)c, (void)a, (void)layout;
    return aclnnMultiScaleDeformableAttentionGradGetWorkspaceSize(t[0], t[1], t[2], t[3], t[4], t[5],
                                                                  t[6], t[7], t[8], ws, ex);
}

static void mg_grad_4d(op_case *c)
{
    c->t[5].rank = 4; /* seed 004 passes (bs, nq, nh, C) */
    c->t[5].dims[2] = 2;
    c->t[5].dims[3] = 8;
    c->t[5].strides[3] = c->t[5].strides[2];
    c->t[5].strides[2] = 8 * c->t[5].strides[3];
}
/* A 4-D gradOutput whose heads and channels do not merge into one stride:
 * no 3-D view exists, so both APIs refuse it. */
static void mg_grad_4d_gap(op_case *c)
{
    mg_grad_4d(c);
    c->t[5].strides[2] = 9 * c->t[5].strides[3];
}
static void mg_dvalue_shape(op_case *c) { c->t[6].dims[1] = 29; }

/* gradOutput as seed 004's table gives it, (bs, nq, nh, C): aclnn takes the
 * 4-D view and writes the same bytes as the native call does with the 3-D
 * one over the same memory. */
static void msdag_grad_4d_same(const op_api *api, op_case *c)
{
    case_reset(c);
    op_case four = *c;
    mg_grad_4d(&four);
    const spa_tensor *nt[MAX_T];
    aclTensor *at[MAX_T];
    const spa_int_array *na[2] = {NULL, NULL};
    for (int i = 0; i < c->n; i++) {
        nt[i] = &c->t[i];
        at[i] = acl_of(&four.t[i]);
    }
    uint64_t nsize = 0, size = 0;
    spa_executor nex;
    aclOpExecutor *ex = NULL;
    CU_ASSERT_EQUAL_FATAL(api->native(c, nt, na, &nsize, &nex), SPA_OK);
    CU_ASSERT_EQUAL_FATAL(api->acl(&four, at, NULL, NULL, &size, &ex), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(size, nsize);
    runs_write_same_bytes(api, c, nsize, &nex, ex, false);
    for (int i = 0; i < c->n; i++)
        aclDestroyTensor(at[i]);
}

static const named_mutation msdag_mutations[] = {
    {"value INT32", mm_value_int},       {"spatialShape FLOAT", mm_shape_f32},
    {"location rank 5", mm_loc_rank},    {"attnWeight levels", mm_attn_levels},
    {"levelStartIndex length", mm_start_len}, {"gradOutput 4-D, no 3-D view", mg_grad_4d_gap},
    {"gradValue shape", mg_dvalue_shape}, {"level of 1065353216 rows", mm_huge_level},
};

static const named_mutation msdag_npu[] = {
    {"C 4", mm_c4}, {"C 264", mm_c264}, {"nq 500000", mm_nq500000}, {"nh 17", mm_nh17}, {"np 17", mm_np17},
};

static void test_msda_grad(void)
{
    static const op_api api = {"MultiScaleDeformableAttentionGrad", 0, msdag_native, msdag_acl,
                               spa_msda_grad, aclnnMultiScaleDeformableAttentionGrad};
    rng r = rng_seed(954);
    op_case c;
    msdag_make(&c, &r);
    run_all(&api, &c, msdag_mutations, sizeof msdag_mutations / sizeof msdag_mutations[0]);
    tt_set_int(&c.tt[1], 0, saved_hw);
    msdag_grad_4d_same(&api, &c);
    case_reset(&c);
    msda_npu_limits(&api, &c, msdag_npu, sizeof msdag_npu / sizeof msdag_npu[0]);
    case_free(&c);
}
#endif

/* ---------------- NsaCompressAttention ---------------- */
#if ANY_OP && SPA_HAVE_NSA_CATTN
#include "aclnnop/aclnn_nsa_compress_attention.h"

/* q, k, v, softmaxMax, softmaxSum, attentionOut, topkIndices (dense) */
typedef struct cattn_acl_case {
    ttensor tt[7];
    int64_t sq[2], sc[2];
    int64_t n1, n2, d, dv, l, st, ls, kc, mode;
    spa_dtype dt;
} cattn_acl_case;

static void cattn_make(cattn_acl_case *c, rng *r)
{
    const int64_t t1 = c->sq[1], t2 = c->sc[1];
    const int64_t qd[3] = {t1, c->n1, c->d}, kd[3] = {t2, c->n2, c->d}, vd[3] = {t2, c->n2, c->dv},
                  sd[3] = {t1, c->n1, 8}, od[3] = {t1, c->n1, c->dv}, td[3] = {t1, c->n2, c->kc};
    const spa_dtype sdt = c->dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32;
    tt_make(&c->tt[0], c->dt, 3, qd, false, r);
    tt_make(&c->tt[1], c->dt, 3, kd, false, r);
    tt_make(&c->tt[2], c->dt, 3, vd, false, r);
    for (int i = 0; i < 3; i++)
        tt_fill_random(&c->tt[i], r, -1.0, 1.0);
    tt_make(&c->tt[3], sdt, 3, sd, false, r);
    tt_make(&c->tt[4], sdt, 3, sd, false, r);
    tt_make(&c->tt[5], c->dt, 3, od, false, r);
    tt_make(&c->tt[6], SPA_INT32, 3, td, false, r);
}

static void cattn_free(cattn_acl_case *c)
{
    for (int i = 0; i < 7; i++)
        tt_free(&c->tt[i]);
}

/* Phase 1 (and 2 when run) through aclnn; its status. */
static aclnnStatus cattn_acl(cattn_acl_case *c, bool run)
{
    aclTensor *t[7];
    for (int i = 0; i < 7; i++)
        t[i] = acl_of(&c->tt[i].t);
    aclIntArray *aq = aclCreateIntArray(c->sq, 2), *ac = aclCreateIntArray(c->sc, 2);
    uint64_t size = 0;
    aclOpExecutor *ex = NULL;
    char layout[] = "TND";
    aclnnStatus st = aclnnNsaCompressAttentionGetWorkspaceSize(
        t[0], t[1], t[2], NULL, NULL, aq, ac, NULL, 0.3, c->n1, layout, c->mode, c->l, c->st,
        c->ls, c->kc, t[3], t[4], t[5], t[6], &size, &ex);
    if (st == ACLNN_SUCCESS && run) {
        void *ws = NULL;
        if (size > 0)
            aclrtMalloc(&ws, size, ACL_MEM_MALLOC_HUGE_FIRST);
        st = aclnnNsaCompressAttention(ws, size, ex, NULL);
        aclrtFree(ws);
    }
    for (int i = 0; i < 7; i++)
        aclDestroyTensor(t[i]);
    aclDestroyIntArray(aq), aclDestroyIntArray(ac);
    return st;
}

static spa_status cattn_native(cattn_acl_case *c, ttensor *o, bool run)
{
    const spa_int_array aq = {c->sq, 2}, ac = {c->sc, 2};
    uint64_t size;
    spa_executor ex;
    spa_status st = spa_nsa_compress_attention_get_workspace_size(
        &c->tt[0].t, &c->tt[1].t, &c->tt[2].t, NULL, NULL, &aq, &ac, NULL, 0.3, c->n1, "TND",
        c->mode, c->l, c->st, c->ls, c->kc, &o[0].t, &o[1].t, &o[2].t, &o[3].t, &size, &ex);
    if (st == SPA_OK && run) {
        void *ws = malloc(size + 1);
        st = spa_nsa_compress_attention(ws, size, &ex, NULL);
        free(ws);
    }
    return st;
}

static void cattn_base(cattn_acl_case *c)
{
    memset(c, 0, sizeof *c);
    c->sq[0] = 5, c->sq[1] = 12, c->sc[0] = 9, c->sc[1] = 21;
    c->n1 = 4, c->n2 = 2, c->d = 32, c->dv = 16, c->l = 32, c->st = 16, c->ls = 64, c->kc = 2;
    c->dt = SPA_FLOAT16;
}

/* A valid problem: the native bytes, the statistics moved to CANN's
 * physical order [N1][S_b][8] per batch; then each CANN limit the native
 * API does not keep: native 0, aclnn 161002. */
static void test_cattn(void)
{
    rng r = rng_seed(2110);
    cattn_acl_case c;
    cattn_base(&c);
    cattn_make(&c, &r);
    ttensor nat[4];
    for (int i = 0; i < 4; i++) {
        spa_tensor *t = &c.tt[3 + i].t;
        tt_make(&nat[i], (spa_dtype)t->dtype, 3, t->dims, false, &r);
    }
    CU_ASSERT_EQUAL(cattn_acl(&c, true), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(cattn_native(&c, nat, true), SPA_OK);
    CU_ASSERT_EQUAL(memcmp(c.tt[5].t.data, nat[2].t.data, c.tt[5].span), 0);
    CU_ASSERT_EQUAL(memcmp(c.tt[6].t.data, nat[3].t.data, c.tt[6].span), 0);
    int64_t bad = 0;
    for (int64_t b = 0; b < 2; b++) {
        const int64_t qs = b == 0 ? 0 : c.sq[0], len = c.sq[b] - qs;
        for (int64_t s = 0; s < len; s++)
            for (int64_t h = 0; h < c.n1; h++)
                for (int64_t l = 0; l < 8; l++) {
                    const int64_t phys = qs * c.n1 * 8 + h * len * 8 + s * 8 + l;
                    const int64_t logical = ((qs + s) * c.n1 + h) * 8 + l;
                    bad += ((float *)c.tt[3].t.data)[phys] != ((float *)nat[0].t.data)[logical];
                    bad += ((float *)c.tt[4].t.data)[phys] != ((float *)nat[1].t.data)[logical];
                }
    }
    CU_ASSERT_EQUAL(bad, 0);
    for (int i = 0; i < 4; i++)
        tt_free(&nat[i]);
    cattn_free(&c);
    /* CANN-only limits */
    for (int m = 0; m < 10; m++) {
        cattn_base(&c);
        switch (m) {
        case 0: c.dt = SPA_FLOAT32; break;
        case 1: c.dv = 48; break;
        case 2: c.n1 = 6; break; /* G 3 */
        case 3: c.mode = 2; break;
        case 4: c.l = 24; break;
        case 5: c.st = 8; c.l = 16; break;
        case 6: c.ls = 144; break;
        case 7: c.l = 80; break; /* l > l' */
        case 8: c.kc = 4; break; /* > ceil(9 / 4) blocks of batch 0 */
        default: c.kc = 33; c.sc[0] = 140, c.sc[1] = 280; break;
        }
        cattn_make(&c, &r);
        ttensor o[4];
        for (int i = 0; i < 4; i++)
            o[i] = c.tt[3 + i];
        const spa_status nst = cattn_native(&c, o, false);
        const aclnnStatus ast = cattn_acl(&c, false);
        if (nst != SPA_OK || ast != ACLNN_ERR_PARAM_INVALID)
            fprintf(stderr, "  NsaCompressAttention CANN rule %d: native %d, aclnn %d\n", m, (int)nst, (int)ast);
        CU_ASSERT_EQUAL(nst, SPA_OK);
        CU_ASSERT_EQUAL(ast, ACLNN_ERR_PARAM_INVALID);
        cattn_free(&c);
    }
    /* float64: native only */
    cattn_base(&c);
    c.dt = SPA_FLOAT64;
    cattn_make(&c, &r);
    CU_ASSERT_EQUAL(cattn_acl(&c, false), ACLNN_ERR_PARAM_INVALID);
    cattn_free(&c);
}
#endif

void suite_acl_ops(void);
void suite_acl_ops(void)
{
    CU_pSuite s = CU_add_suite("acl_ops", NULL, NULL);
    (void)s;
#if SPA_HAVE_NSA_SELECT
    CU_add_test(s, "NsaSelectedAttention: native codes and bytes", test_select);
#else
    fprintf(stderr, "acl_ops: spa_nsa_select not in libspattn.a; its compat tests skipped\n");
#endif
#if SPA_HAVE_NSA_SELECT_GRAD
    CU_add_test(s, "NsaSelectedAttentionGrad: native codes and bytes", test_select_grad);
#else
    fprintf(stderr, "acl_ops: spa_nsa_select_grad not in libspattn.a; its compat tests skipped\n");
#endif
#if SPA_HAVE_MSDA
    CU_add_test(s, "MultiScaleDeformableAttnFunction: native codes and bytes", test_msda);
#else
    fprintf(stderr, "acl_ops: spa_msda not in libspattn.a; its compat tests skipped\n");
#endif
#if SPA_HAVE_MSDA_GRAD
    CU_add_test(s, "MultiScaleDeformableAttentionGrad: native codes and bytes", test_msda_grad);
#else
    fprintf(stderr, "acl_ops: spa_msda_grad not in libspattn.a; its compat tests skipped\n");
#endif
#if ANY_OP && SPA_HAVE_NSA_CATTN
    CU_add_test(s, "NsaCompressAttention: native bytes, CANN statistics order and limits", test_cattn);
#endif
}

#endif /* SPA_HAVE_ACL */
