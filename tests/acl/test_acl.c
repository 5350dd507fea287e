/* The aclnn compatibility layer: every wrapper answers exactly what the native
 * API answers (NULL and invalid arguments, results bit for bit), views with
 * offsets and strides map to the same elements, bad views are refused instead
 * of read, workspaces are checked, executors are single-use, and the host
 * runtime keeps device copies inside their allocations.
 * Operators the core does not provide yet are skipped (spa_acl_ops.h). */
#include <CUnit/Basic.h>

#ifndef SPA_HAVE_ACL
void suite_acl(void);
void suite_acl(void)
{
}
#else

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_multi_scale_deformable_attention_grad.h"
#include "aclnnop/aclnn_multi_scale_deformable_attn_function.h"
#include "aclnnop/aclnn_nsa_compress.h"
#include "aclnnop/aclnn_nsa_compress_grad.h"
#include "aclnnop/aclnn_nsa_selected_attention.h"
#include "aclnnop/aclnn_nsa_selected_attention_grad.h"
#include "nsac_case.h"
#include "spa_acl_ops.h"

/* ---- building aclTensors over the same memory as a spa_tensor ---- */

/* Elements the view spans (last offset + 1), or 1 when that is not
 * computable (negative or overflowing sizes, which the operators refuse). */
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

/* The aclTensor describing t: same dtype, view, strides and data, over a 1-D
 * storage just large enough. A rank above 8 (the native limit) is kept. */
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

static aclIntArray *acl_array_of(const spa_int_array *a)
{
    return aclCreateIntArray(a->data, a->size);
}

/* One stream shared by the tests, destroyed with the suite. */
static aclrtStream shared_stream;

static aclrtStream test_stream(void)
{
    if (shared_stream == NULL)
        CU_ASSERT_FATAL(aclrtCreateStream(&shared_stream) == ACL_SUCCESS);
    return shared_stream;
}

static int suite_done(void)
{
    if (shared_stream != NULL && aclrtDestroyStream(shared_stream) != ACL_SUCCESS)
        return 1;
    shared_stream = NULL;
    return 0;
}

#if SPA_HAVE_NSA_COMPRESS && SPA_HAVE_NSA_COMPRESS_GRAD

typedef struct fwd_io {
    ttensor x, w, y;
} fwd_io;

static void fwd_make(fwd_io *io, const nsac_case *c, rng *r)
{
    const int64_t xd[3] = {c->tokens, c->n, c->d}, wd[2] = {c->bs, c->n},
                  yd[3] = {c->windows, c->n, c->d};
    tt_make(&io->x, c->dt, 3, xd, c->strided, r);
    tt_make(&io->w, c->dt, 2, wd, c->strided, r);
    tt_make(&io->y, c->dt, 3, yd, c->strided, r);
    tt_fill_random(&io->x, r, -1.0, 1.0);
    tt_fill_random(&io->w, r, -1.0, 1.0);
}

static void fwd_free(fwd_io *io)
{
    tt_free(&io->x);
    tt_free(&io->w);
    tt_free(&io->y);
}

/* Runs NsaCompress through the aclnn API; 0 or the first failing status. */
static aclnnStatus acl_fwd(const nsac_case *c, const fwd_io *io, aclrtStream stream)
{
    aclTensor *x = acl_of(&io->x.t), *w = acl_of(&io->w.t), *y = acl_of(&io->y.t);
    aclIntArray *seq = acl_array_of(&c->seq);
    char layout[] = "TND";
    uint64_t size = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus st = aclnnNsaCompressGetWorkspaceSize(x, w, seq, layout, c->bs, c->st, c->seq_type, y,
                                                      &size, &ex);
    /* CANN lets the caller release the descriptors once phase 1 is done. */
    aclDestroyTensor(x);
    aclDestroyTensor(w);
    aclDestroyTensor(y);
    aclDestroyIntArray(seq);
    if (st != ACLNN_SUCCESS)
        return st;
    tws ws;
    tws_make(&ws, size, 3);
    st = aclnnNsaCompress(ws.ptr, size, ex, stream);
    CU_ASSERT(tws_guard_ok(&ws));
    tws_free(&ws);
    return st;
}

static spa_status native_fwd(const nsac_case *c, const fwd_io *io)
{
    uint64_t size = 0;
    spa_executor ex;
    spa_status st = spa_nsa_compress_get_workspace_size(&io->x.t, &io->w.t, &c->seq, "TND", c->bs,
                                                        c->st, c->seq_type, &io->y.t, &size, &ex);
    if (st != SPA_OK)
        return st;
    tws ws;
    tws_make(&ws, size, 0);
    st = spa_nsa_compress(ws.ptr, size, &ex, NULL);
    tws_free(&ws);
    return st;
}

/* Random problems: the aclnn results on a stream equal the native results on
 * the calling thread bit for bit, and nothing is written outside the views. */
static void test_compress_same_as_native(void)
{
    rng r = rng_seed(901);
    for (int i = 0; i < 24; i++) {
        nsac_case c;
        do /* the aclnn layer keeps the NPU's limits */
            nsac_case_draw(&c, i, &r);
        while (!nsac_case_on_npu_grid(&c));
        fwd_io io;
        fwd_make(&io, &c, &r);
        CU_ASSERT_EQUAL(native_fwd(&c, &io), SPA_OK);
        unsigned char *want = tt_snapshot(&io.y);
        tt_fill_canary(&io.y);
        CU_ASSERT_EQUAL(acl_fwd(&c, &io, i % 2 ? test_stream() : NULL), ACLNN_SUCCESS);
        CU_ASSERT(tt_same_bytes(&io.y, want));
        CU_ASSERT(tt_guard_ok(&io.y));
        free(want);
        fwd_free(&io);
    }
}

typedef struct bwd_io {
    ttensor dy, x, w, dx, dw;
} bwd_io;

static void bwd_make(bwd_io *io, const nsac_case *c, rng *r)
{
    const int64_t xd[3] = {c->tokens, c->n, c->d}, wd[2] = {c->bs, c->n},
                  yd[3] = {c->windows, c->n, c->d};
    tt_make(&io->dy, c->dt, 3, yd, c->strided, r);
    tt_make(&io->x, c->dt, 3, xd, c->strided, r);
    tt_make(&io->w, c->dt, 2, wd, c->strided, r);
    tt_make(&io->dx, c->dt, 3, xd, c->strided, r);
    tt_make(&io->dw, c->dt, 2, wd, c->strided, r);
    tt_fill_random(&io->dy, r, -1.0, 1.0);
    tt_fill_random(&io->x, r, -1.0, 1.0);
    tt_fill_random(&io->w, r, -1.0, 1.0);
}

static void bwd_free(bwd_io *io)
{
    tt_free(&io->dy);
    tt_free(&io->x);
    tt_free(&io->w);
    tt_free(&io->dx);
    tt_free(&io->dw);
}

static void test_compress_grad_same_as_native(void)
{
    rng r = rng_seed(902);
    for (int i = 0; i < 16; i++) {
        nsac_case c;
        do /* the aclnn layer keeps the NPU's limits */
            nsac_case_draw(&c, i, &r);
        while (!nsac_case_on_npu_grid(&c));
        bwd_io io;
        bwd_make(&io, &c, &r);
        uint64_t size;
        spa_executor nex;
        CU_ASSERT_EQUAL_FATAL(spa_nsa_compress_grad_get_workspace_size(
                                  &io.dy.t, &io.x.t, &io.w.t, &c.seq, c.bs, c.st, c.seq_type, "TND",
                                  &io.dx.t, &io.dw.t, &size, &nex),
                              SPA_OK);
        tws ws;
        tws_make(&ws, size, 0);
        CU_ASSERT_EQUAL(spa_nsa_compress_grad(ws.ptr, size, &nex, NULL), SPA_OK);
        tws_free(&ws);
        unsigned char *want_dx = tt_snapshot(&io.dx), *want_dw = tt_snapshot(&io.dw);
        tt_fill_canary(&io.dx);
        tt_fill_canary(&io.dw);

        aclTensor *dy = acl_of(&io.dy.t), *x = acl_of(&io.x.t), *w = acl_of(&io.w.t),
                  *dx = acl_of(&io.dx.t), *dw = acl_of(&io.dw.t);
        aclIntArray *seq = acl_array_of(&c.seq);
        char layout[] = "TND";
        uint64_t asize = 0;
        aclOpExecutor *ex = NULL;
        CU_ASSERT_EQUAL_FATAL(aclnnNsaCompressGradGetWorkspaceSize(dy, x, w, seq, c.bs, c.st,
                                                                   c.seq_type, layout, dx, dw,
                                                                   &asize, &ex),
                              ACLNN_SUCCESS);
        CU_ASSERT_EQUAL(asize, size);
        tws_make(&ws, asize, 5);
        CU_ASSERT_EQUAL(aclnnNsaCompressGrad(ws.ptr, asize, ex, i % 2 ? test_stream() : NULL),
                        ACLNN_SUCCESS);
        CU_ASSERT(tws_guard_ok(&ws));
        tws_free(&ws);
        CU_ASSERT(tt_same_bytes(&io.dx, want_dx));
        CU_ASSERT(tt_same_bytes(&io.dw, want_dw));
        aclDestroyTensor(dy);
        aclDestroyTensor(x);
        aclDestroyTensor(w);
        aclDestroyTensor(dx);
        aclDestroyTensor(dw);
        aclDestroyIntArray(seq);
        free(want_dx);
        free(want_dw);
        bwd_free(&io);
    }
}

/* ---- NULL and invalid arguments: the native code, through the wrapper ---- */

typedef struct fwd_args {
    spa_tensor x, w, y;
    spa_int_array seq;
    const char *layout;
    int64_t bs, st, type;
    bool null_x, null_w, null_y, null_seq, null_size, null_ex;
} fwd_args;

typedef void (*mutate_fn)(fwd_args *a);
#define MUT(name, body) \
    static void name(fwd_args *a) { body; }
static int64_t seq_bad[3];
MUT(m_none, (void)a)
MUT(m_null_x, a->null_x = true)
MUT(m_null_w, a->null_w = true)
MUT(m_null_y, a->null_y = true)
MUT(m_null_seq, a->null_seq = true)
MUT(m_null_size, a->null_size = true)
MUT(m_null_ex, a->null_ex = true)
MUT(m_null_all, a->null_x = a->null_w = a->null_y = a->null_seq = a->null_size = a->null_ex = true)
MUT(m_null_x_data, a->x.data = NULL)
MUT(m_rank_x, a->x.rank = 2)
MUT(m_rank_y, a->y.rank = 4; a->y.dims[3] = 1; a->y.strides[3] = 1)
MUT(m_rank_huge, a->x.rank = 9)
MUT(m_dtype_int, a->x.dtype = SPA_INT32; a->w.dtype = SPA_INT32; a->y.dtype = SPA_INT32)
MUT(m_dtype_w, a->w.dtype = SPA_FLOAT16)
MUT(m_dtype_unknown, a->x.dtype = 99)
MUT(m_dtype_double, a->x.dtype = ACL_DOUBLE)
MUT(m_layout_bsh, a->layout = "BSH")
MUT(m_layout_null, a->layout = NULL)
MUT(m_type_2, a->type = 2)
MUT(m_seq_empty, a->seq.size = 0)
MUT(m_seq_decreasing, seq_bad[0] = 64; seq_bad[1] = 32; seq_bad[2] = 96; a->seq.data = seq_bad)
MUT(m_seq_short_total, seq_bad[0] = 32; seq_bad[1] = 64; seq_bad[2] = 95; a->seq.data = seq_bad)
MUT(m_bs_w_rows, a->bs = 48)
MUT(m_st_over_bs, a->st = 48)
MUT(m_w_heads, a->w.dims[1] = 3)
MUT(m_y_rows, a->y.dims[0] += 1)
MUT(m_stride_negative, a->x.strides[0] = -a->x.strides[0])
MUT(m_dim_negative, a->y.dims[0] = -1)
MUT(m_span_overflow, a->x.strides[0] = INT64_MAX / 2)

static const struct {
    const char *name;
    mutate_fn fn;
} fwd_mutations[] = {
    {"valid", m_none},
    {"NULL input", m_null_x},
    {"NULL weight", m_null_w},
    {"NULL output", m_null_y},
    {"NULL actSeqLen", m_null_seq},
    {"NULL workspaceSize", m_null_size},
    {"NULL executor", m_null_ex},
    {"everything NULL", m_null_all},
    {"NULL input data", m_null_x_data},
    {"input rank 2", m_rank_x},
    {"output rank 4", m_rank_y},
    {"rank 9", m_rank_huge},
    {"int32 tensors", m_dtype_int},
    {"weight dtype differs", m_dtype_w},
    {"unknown dtype", m_dtype_unknown},
    {"double", m_dtype_double},
    {"layout BSH", m_layout_bsh},
    {"layout NULL", m_layout_null},
    {"actSeqLenType 2", m_type_2},
    {"actSeqLen empty", m_seq_empty},
    {"actSeqLen decreasing", m_seq_decreasing},
    {"actSeqLen total < T", m_seq_short_total},
    {"blockSize 48 != weight rows", m_bs_w_rows},
    {"stride > blockSize", m_st_over_bs},
    {"weight heads != N", m_w_heads},
    {"output rows != windows", m_y_rows},
    {"negative stride", m_stride_negative},
    {"negative dim", m_dim_negative},
    {"span overflows", m_span_overflow},
};

static void test_compress_codes_as_native(void)
{
    const int64_t lens[3] = {32, 32, 32};
    nsac_case c;
    nsac_case_fixed(&c, SPA_FLOAT32, 4, 32, 32, 16, 3, lens, 0);
    rng r = rng_seed(903);
    fwd_io io;
    fwd_make(&io, &c, &r);
    unsigned char *y_before = tt_snapshot(&io.y);
    for (size_t k = 0; k < sizeof fwd_mutations / sizeof fwd_mutations[0]; k++) {
        fwd_args a = {io.x.t, io.w.t, io.y.t, c.seq, "TND", c.bs, c.st, 0,
                      false, false, false, false, false, false};
        fwd_mutations[k].fn(&a);
        uint64_t nsize = 77;
        spa_executor nex;
        spa_status want = spa_nsa_compress_get_workspace_size(
            a.null_x ? NULL : &a.x, a.null_w ? NULL : &a.w, a.null_seq ? NULL : &a.seq, a.layout,
            a.bs, a.st, a.type, a.null_y ? NULL : &a.y, a.null_size ? NULL : &nsize,
            a.null_ex ? NULL : &nex);

        aclTensor *x = a.null_x ? NULL : acl_of(&a.x), *w = a.null_w ? NULL : acl_of(&a.w),
                  *y = a.null_y ? NULL : acl_of(&a.y);
        aclIntArray *seq = a.null_seq ? NULL : acl_array_of(&a.seq);
        CU_ASSERT(a.null_x || x != NULL);
        char *layout = a.layout ? strdup(a.layout) : NULL;
        uint64_t size = 77;
        aclOpExecutor *ex = (aclOpExecutor *)&size; /* must stay untouched on error */
        aclnnStatus got = aclnnNsaCompressGetWorkspaceSize(x, w, seq, layout, a.bs, a.st, a.type, y,
                                                           a.null_size ? NULL : &size,
                                                           a.null_ex ? NULL : &ex);
        if (got != want)
            fprintf(stderr, "  %s: aclnn %d, native %d\n", fwd_mutations[k].name, (int)got, (int)want);
        CU_ASSERT_EQUAL(got, want);
        const char *msg = aclGetRecentErrMsg();
        if (got == ACLNN_SUCCESS) {
            CU_ASSERT_PTR_NULL(msg);
            CU_ASSERT_EQUAL(size, nsize);
            CU_ASSERT_EQUAL(aclDestroyAclOpExecutor(ex), ACLNN_SUCCESS); /* never run */
        } else {
            /* the message names the call, the code and the native rule */
            const char *rule = a.null_ex ? "" : spa_executor_reason(&nex, NULL);
            if (fwd_mutations[k].fn == m_dtype_double)
                rule = "ACL_DOUBLE"; /* the wrapper's own rule: CANN takes no double */
            char code[16];
            snprintf(code, sizeof code, "%d", (int)got);
            CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
            CU_ASSERT(strstr(msg, "aclnnNsaCompressGetWorkspaceSize") != NULL);
            CU_ASSERT(strstr(msg, code) != NULL);
            CU_ASSERT(strstr(msg, rule) != NULL);
            if (strstr(msg, rule) == NULL)
                fprintf(stderr, "  %s: message '%s' lacks '%s'\n", fwd_mutations[k].name, msg, rule);
            CU_ASSERT_PTR_NULL(aclGetRecentErrMsg()); /* read once */
            CU_ASSERT_EQUAL(size, 77);
            CU_ASSERT(ex == (aclOpExecutor *)&size);
        }
        CU_ASSERT(tt_same_bytes(&io.y, y_before));
        aclDestroyTensor(x);
        aclDestroyTensor(w);
        aclDestroyTensor(y);
        aclDestroyIntArray(seq);
        free(layout);
    }
    free(y_before);
    fwd_free(&io);
}

/* The NPU's limits the native API does not keep (spec/nsa.md 1.3, 2.3): the
 * native ops take these shapes, both aclnn wrappers answer 161002 naming the
 * limit, before anything is allocated (the executor slot stays untouched). */
static void test_compress_npu_limits(void)
{
    static const struct {
        int64_t n, d, bs, st;
        const char *rule;
    } cases[] = {
        {2, 24, 32, 16, "D % 16 == 0"},     {2, 8, 32, 16, "D % 16 == 0"},
        {1, 272, 32, 16, "D <= 256"},       {129, 16, 16, 16, "N <= 128"},
        {2, 32, 24, 8, "compressBlockSize % 16 == 0"}, {2, 32, 144, 16, "compressBlockSize <= 128"},
        {2, 32, 32, 8, "compressStride % 16 == 0"},
    };
    rng r = rng_seed(904);
    const int64_t lens[2] = {150, 37};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        nsac_case c;
        nsac_case_fixed(&c, k % 2 ? SPA_BFLOAT16 : SPA_FLOAT32, cases[k].n, cases[k].d, cases[k].bs, cases[k].st,
                        2, lens, 0);
        bwd_io io;
        bwd_make(&io, &c, &r);
        uint64_t nsize;
        spa_executor nex;
        CU_ASSERT_EQUAL(spa_nsa_compress_get_workspace_size(&io.x.t, &io.w.t, &c.seq, "TND", c.bs, c.st, 0,
                                                            &io.dy.t, &nsize, &nex),
                        SPA_OK);
        CU_ASSERT_EQUAL(spa_nsa_compress_grad_get_workspace_size(&io.dy.t, &io.x.t, &io.w.t, &c.seq, c.bs, c.st, 0,
                                                                 "TND", &io.dx.t, &io.dw.t, &nsize, &nex),
                        SPA_OK);
        aclTensor *dy = acl_of(&io.dy.t), *x = acl_of(&io.x.t), *w = acl_of(&io.w.t),
                  *dx = acl_of(&io.dx.t), *dw = acl_of(&io.dw.t);
        aclIntArray *seq = acl_array_of(&c.seq);
        char layout[] = "TND";
        for (int grad = 0; grad < 2; grad++) {
            uint64_t size = 77;
            aclOpExecutor *ex = (aclOpExecutor *)&size; /* must stay untouched */
            aclnnStatus got = grad ? aclnnNsaCompressGradGetWorkspaceSize(dy, x, w, seq, c.bs, c.st, 0, layout, dx,
                                                                          dw, &size, &ex)
                                   : aclnnNsaCompressGetWorkspaceSize(x, w, seq, layout, c.bs, c.st, 0, dy, &size,
                                                                      &ex);
            CU_ASSERT_EQUAL(got, ACLNN_ERR_PARAM_INVALID);
            const char *msg = aclGetRecentErrMsg();
            CU_ASSERT(msg != NULL && strstr(msg, cases[k].rule) != NULL);
            if (msg == NULL || strstr(msg, cases[k].rule) == NULL)
                fprintf(stderr, "  case %zu: message '%s' lacks '%s'\n", k, msg ? msg : "(none)", cases[k].rule);
            CU_ASSERT_EQUAL(size, 77);
            CU_ASSERT(ex == (aclOpExecutor *)&size);
            /* a NULL still gives the native 161001 */
            got = grad ? aclnnNsaCompressGradGetWorkspaceSize(dy, x, w, seq, c.bs, c.st, 0, layout, NULL, dw, &size,
                                                              &ex)
                       : aclnnNsaCompressGetWorkspaceSize(x, w, NULL, layout, c.bs, c.st, 0, dy, &size, &ex);
            CU_ASSERT_EQUAL(got, ACLNN_ERR_PARAM_NULLPTR);
            (void)aclGetRecentErrMsg();
        }
        aclDestroyTensor(dy);
        aclDestroyTensor(x);
        aclDestroyTensor(w);
        aclDestroyTensor(dx);
        aclDestroyTensor(dw);
        aclDestroyIntArray(seq);
        bwd_free(&io);
    }
}

/* NsaCompressGrad: each NULL argument gives the native code, with float or
 * double tensors. */
static void test_compress_grad_null_codes(void)
{
    const int64_t lens[2] = {48, 40};
    nsac_case c;
    nsac_case_fixed(&c, SPA_FLOAT16, 2, 16, 32, 16, 2, lens, 0);
    rng r = rng_seed(904);
    bwd_io io;
    bwd_make(&io, &c, &r);
    aclTensor *t[5] = {acl_of(&io.dy.t), acl_of(&io.x.t), acl_of(&io.w.t), acl_of(&io.dx.t),
                       acl_of(&io.dw.t)};
    const spa_tensor *n[5] = {&io.dy.t, &io.x.t, &io.w.t, &io.dx.t, &io.dw.t};
    aclIntArray *seq = acl_array_of(&c.seq);
    char layout[] = "TND";
    for (int hole = 0; hole < 8; hole++) { /* 5 tensors, seq, size, executor */
        uint64_t size, nsize;
        spa_executor nex;
        aclOpExecutor *ex = NULL;
#define T_(i) (hole == (i) ? NULL : t[i])
#define N_(i) (hole == (i) ? NULL : n[i])
        spa_status want = spa_nsa_compress_grad_get_workspace_size(
            N_(0), N_(1), N_(2), hole == 5 ? NULL : &c.seq, c.bs, c.st, 0, "TND", N_(3), N_(4),
            hole == 6 ? NULL : &nsize, hole == 7 ? NULL : &nex);
        aclnnStatus got = aclnnNsaCompressGradGetWorkspaceSize(
            T_(0), T_(1), T_(2), hole == 5 ? NULL : seq, c.bs, c.st, 0, layout, T_(3), T_(4),
            hole == 6 ? NULL : &size, hole == 7 ? NULL : &ex);
#undef T_
#undef N_
        CU_ASSERT_EQUAL(got, want);
        CU_ASSERT_EQUAL(got, ACLNN_ERR_PARAM_NULLPTR);
    }
    /* The same with every float tensor ACL_DOUBLE (CANN takes no double): a
     * NULL argument still answers 161001 first, as CANN checks pointers
     * before dtypes; with none, 161002. The forward too. */
    aclTensor *d[5];
    for (int i = 0; i < 5; i++) {
        spa_tensor v = *n[i];
        v.dtype = SPA_FLOAT64;
        d[i] = acl_of(&v);
    }
    for (int hole = -1; hole < 8; hole++) {
        uint64_t size = 77;
        aclOpExecutor *ex = NULL;
        const aclnnStatus want = hole < 0 ? ACLNN_ERR_PARAM_INVALID : ACLNN_ERR_PARAM_NULLPTR;
#define D_(i) (hole == (i) ? NULL : d[i])
        CU_ASSERT_EQUAL(aclnnNsaCompressGradGetWorkspaceSize(D_(0), D_(1), D_(2), hole == 5 ? NULL : seq, c.bs,
                                                             c.st, 0, layout, D_(3), D_(4),
                                                             hole == 6 ? NULL : &size, hole == 7 ? NULL : &ex),
                        want);
        CU_ASSERT_EQUAL(size, 77);
        CU_ASSERT_PTR_NULL(ex);
        if (hole == 0 || hole == 3 || hole == 4)
            continue; /* the forward has input (x), weight, seq, output (dy) */
        CU_ASSERT_EQUAL(aclnnNsaCompressGetWorkspaceSize(D_(1), D_(2), hole == 5 ? NULL : seq, layout, c.bs, c.st, 0,
                                                         d[0], hole == 6 ? NULL : &size, hole == 7 ? NULL : &ex),
                        want);
#undef D_
        CU_ASSERT_EQUAL(size, 77);
        CU_ASSERT_PTR_NULL(ex);
        (void)aclGetRecentErrMsg();
    }
    for (int i = 0; i < 5; i++) {
        aclDestroyTensor(t[i]);
        aclDestroyTensor(d[i]);
    }
    aclDestroyIntArray(seq);
    bwd_free(&io);
}

/* ---- views: offset, strides and storage map onto the native descriptor ---- */

/* One NsaCompress problem whose tensors live in aclrtMalloc'd device buffers
 * at an element offset, with padded strides. */
typedef struct dev_case {
    nsac_case c;
    fwd_io io; /* host copies: the native run uses them */
    void *xdev, *wdev, *ydev;
    aclTensor *x, *w, *y;
    aclIntArray *seq;
    size_t ybytes;
} dev_case;

static void *to_device(const ttensor *tt, int64_t offset_elems, size_t *bytes)
{
    size_t esz = (size_t)aclDataTypeSize((aclDataType)tt->t.dtype);
    *bytes = (size_t)offset_elems * esz + tt->span;
    void *p = NULL;
    CU_ASSERT_FATAL(aclrtMalloc(&p, *bytes, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    CU_ASSERT(aclrtMemset(p, *bytes, 0x5A, *bytes) == ACL_SUCCESS);
    CU_ASSERT(aclrtMemcpy((char *)p + offset_elems * (int64_t)esz, tt->span, tt->t.data, tt->span,
                          ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS);
    return p;
}

static aclTensor *dev_view(const ttensor *tt, void *dev, int64_t offset, int64_t storage,
                           aclFormat fmt)
{
    return aclCreateTensor(tt->t.dims, (uint64_t)tt->t.rank, (aclDataType)tt->t.dtype,
                           tt->t.strides, offset, fmt, &storage, 1, dev);
}

static void dev_make(dev_case *d, rng *r)
{
    const int64_t lens[3] = {70, 0, 45};
    nsac_case_fixed(&d->c, SPA_BFLOAT16, 3, 48, 32, 16, 3, lens, 0);
    d->c.strided = true;
    fwd_make(&d->io, &d->c, r);
    size_t xb, wb;
    d->xdev = to_device(&d->io.x, 5, &xb);
    d->wdev = to_device(&d->io.w, 0, &wb);
    d->ydev = to_device(&d->io.y, 11, &d->ybytes);
    d->x = dev_view(&d->io.x, d->xdev, 5, (int64_t)xb / 2, ACL_FORMAT_ND);
    d->w = dev_view(&d->io.w, d->wdev, 0, (int64_t)wb / 2, ACL_FORMAT_ND);
    d->y = dev_view(&d->io.y, d->ydev, 11, (int64_t)d->ybytes / 2, ACL_FORMAT_ND);
    d->seq = acl_array_of(&d->c.seq);
}

static void dev_free(dev_case *d)
{
    aclDestroyTensor(d->x);
    aclDestroyTensor(d->w);
    aclDestroyTensor(d->y);
    aclDestroyIntArray(d->seq);
    CU_ASSERT(aclrtFree(d->xdev) == ACL_SUCCESS);
    CU_ASSERT(aclrtFree(d->wdev) == ACL_SUCCESS);
    CU_ASSERT(aclrtFree(d->ydev) == ACL_SUCCESS);
    fwd_free(&d->io);
}

static aclnnStatus dev_phase1(dev_case *d, aclTensor *x, aclTensor *y, uint64_t *size,
                              aclOpExecutor **ex)
{
    char layout[] = "TND";
    return aclnnNsaCompressGetWorkspaceSize(x, d->w, d->seq, layout, d->c.bs, d->c.st, 0, y, size,
                                            ex);
}

static void test_views_offset_strides(void)
{
    rng r = rng_seed(905);
    dev_case d;
    dev_make(&d, &r);
    CU_ASSERT_EQUAL(native_fwd(&d.c, &d.io), SPA_OK);
    uint64_t size;
    aclOpExecutor *ex;
    CU_ASSERT_EQUAL_FATAL(dev_phase1(&d, d.x, d.y, &size, &ex), ACLNN_SUCCESS);
    void *ws = NULL;
    if (size > 0)
        CU_ASSERT_FATAL(aclrtMalloc(&ws, size, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, ex, test_stream()), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(aclrtSynchronizeStream(test_stream()), ACL_SUCCESS);
    /* Device bytes: 11 untouched elements, then exactly the native output
     * (gaps of the strided view keep the canary). */
    unsigned char *back = malloc(d.ybytes);
    CU_ASSERT(aclrtMemcpy(back, d.ybytes, d.ydev, d.ybytes, ACL_MEMCPY_DEVICE_TO_HOST) ==
              ACL_SUCCESS);
    for (int i = 0; i < 22; i++)
        CU_ASSERT_EQUAL(back[i], 0x5A);
    CU_ASSERT(memcmp(back + 22, d.io.y.t.data, d.io.y.span) == 0);
    free(back);
    if (ws)
        aclrtFree(ws);
    dev_free(&d);
}

/* Views that would reach outside their memory are refused before any read. */
static void test_views_refused(void)
{
    rng r = rng_seed(906);
    dev_case d;
    dev_make(&d, &r);
    int64_t ystore = (int64_t)d.ybytes / 2;
    struct {
        const char *name;
        aclTensor *y;
    } bad[] = {
        /* offset past what the allocation holds */
        {"view beyond its aclrtMalloc block", dev_view(&d.io.y, d.ydev, 12, ystore + 1, ACL_FORMAT_ND)},
        {"view beyond its storage shape", dev_view(&d.io.y, d.ydev, 11, ystore - 1, ACL_FORMAT_ND)},
        {"negative offset", dev_view(&d.io.y, d.ydev, -1, ystore, ACL_FORMAT_ND)},
        {"fractal format", dev_view(&d.io.y, d.ydev, 11, ystore, ACL_FORMAT_FRACTAL_NZ)},
        {"pointer into the middle, past the end",
         dev_view(&d.io.y, (char *)d.ydev + 64, 11, ystore, ACL_FORMAT_ND)},
    };
    unsigned char *before = malloc(d.ybytes);
    memcpy(before, d.ydev, d.ybytes);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        uint64_t size = 5;
        aclOpExecutor *ex = NULL;
        CU_ASSERT_PTR_NOT_NULL(bad[k].y);
        aclnnStatus st = dev_phase1(&d, d.x, bad[k].y, &size, &ex);
        if (st != ACLNN_ERR_PARAM_INVALID)
            fprintf(stderr, "  %s: %d\n", bad[k].name, (int)st);
        CU_ASSERT_EQUAL(st, ACLNN_ERR_PARAM_INVALID);
        CU_ASSERT_EQUAL(size, 5);
        CU_ASSERT_PTR_NULL(ex);
        aclDestroyTensor(bad[k].y);
    }
    /* aclrtMallocHost blocks are checked the same way. */
    void *host = NULL;
    CU_ASSERT_FATAL(aclrtMallocHost(&host, d.ybytes - 2) == ACL_SUCCESS);
    aclTensor *short_host = dev_view(&d.io.y, host, 11, ystore, ACL_FORMAT_ND);
    uint64_t hsize = 5;
    aclOpExecutor *hex = NULL;
    CU_ASSERT_EQUAL(dev_phase1(&d, d.x, short_host, &hsize, &hex), ACLNN_ERR_PARAM_INVALID);
    aclDestroyTensor(short_host);
    CU_ASSERT(aclrtFreeHost(host) == ACL_SUCCESS);
    /* A destroyed tensor and a pointer that never was a tensor. */
    aclTensor *gone = dev_view(&d.io.y, d.ydev, 11, ystore, ACL_FORMAT_ND);
    CU_ASSERT_EQUAL(aclDestroyTensor(gone), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(aclDestroyTensor(gone), ACLNN_ERR_PARAM_INVALID);
    uint64_t size;
    aclOpExecutor *ex = NULL;
    CU_ASSERT_EQUAL(dev_phase1(&d, d.x, gone, &size, &ex), ACLNN_ERR_PARAM_INVALID);
    int64_t not_a_tensor[64] = {0};
    CU_ASSERT_EQUAL(dev_phase1(&d, (aclTensor *)not_a_tensor, d.y, &size, &ex),
                    ACLNN_ERR_PARAM_INVALID);
    CU_ASSERT(memcmp(before, d.ydev, d.ybytes) == 0);
    free(before);
    dev_free(&d);
}

/* ---- phase 2: workspace, single use, foreign and repeatable executors ---- */

static void test_executor_rules(void)
{
    rng r = rng_seed(907);
    dev_case d;
    dev_make(&d, &r);
    uint64_t size;
    aclOpExecutor *ex;
    CU_ASSERT_EQUAL_FATAL(dev_phase1(&d, d.x, d.y, &size, &ex), ACLNN_SUCCESS);
    CU_ASSERT_FATAL(size > 0);
    void *ws;
    CU_ASSERT_FATAL(aclrtMalloc(&ws, size, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    unsigned char *before = malloc(d.ybytes), *orig = malloc(d.ybytes);
    memcpy(before, d.ydev, d.ybytes);
    memcpy(orig, d.ydev, d.ybytes);
    /* Refusals that leave the executor unused (nothing written). */
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, NULL, NULL), ACLNN_ERR_PARAM_NULLPTR);
    CU_ASSERT_EQUAL(aclnnNsaCompress(NULL, size, ex, NULL), ACLNN_ERR_PARAM_NULLPTR);
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size - 1, ex, NULL), ACLNN_ERR_PARAM_INVALID);
    const char *msg = aclGetRecentErrMsg();
    CU_ASSERT(msg != NULL && strstr(msg, "aclnnNsaCompress: 161002") != NULL &&
              strstr(msg, "phase 1 asked for") != NULL);
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, 0, ex, NULL), ACLNN_ERR_PARAM_INVALID);
    CU_ASSERT_EQUAL(aclnnNsaCompressGrad(ws, size, ex, NULL), ACLNN_ERR_PARAM_INVALID);
    int not_a_stream;
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, ex, &not_a_stream), ACLNN_ERR_PARAM_INVALID);
    CU_ASSERT(memcmp(before, d.ydev, d.ybytes) == 0);
    /* The run, then a second run of the same executor is refused. */
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, ex, test_stream()), ACLNN_SUCCESS);
    CU_ASSERT(memcmp(before, d.ydev, d.ybytes) != 0);
    memcpy(before, d.ydev, d.ybytes);
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, ex, test_stream()), ACLNN_ERR_PARAM_INVALID);
    msg = aclGetRecentErrMsg();
    CU_ASSERT(msg != NULL && strstr(msg, "already run") != NULL);
    CU_ASSERT_EQUAL(aclDestroyAclOpExecutor(ex), ACLNN_ERR_PARAM_INVALID);
    CU_ASSERT_EQUAL(aclSetAclOpExecutorRepeatable(ex), ACLNN_ERR_PARAM_INVALID);

    /* Repeatable: runs twice with the same result, then is destroyed. */
#define RESTORE() \
    CU_ASSERT(aclrtMemcpy(d.ydev, d.ybytes, orig, d.ybytes, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS)
    RESTORE();
    CU_ASSERT_EQUAL_FATAL(dev_phase1(&d, d.x, d.y, &size, &ex), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(aclSetAclOpExecutorRepeatable(ex), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, ex, NULL), ACLNN_SUCCESS);
    CU_ASSERT(memcmp(before, d.ydev, d.ybytes) == 0);
    RESTORE();
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, ex, test_stream()), ACLNN_SUCCESS);
    CU_ASSERT(memcmp(before, d.ydev, d.ybytes) == 0);
    CU_ASSERT_EQUAL(aclDestroyAclOpExecutor(ex), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(aclDestroyAclOpExecutor(NULL), ACLNN_ERR_PARAM_NULLPTR);

    /* Many single-use executors: each runs once, each second run refused. */
    aclOpExecutor *many[80];
    for (int i = 0; i < 80; i++) {
        RESTORE();
        CU_ASSERT_EQUAL_FATAL(dev_phase1(&d, d.x, d.y, &size, &many[i]), ACLNN_SUCCESS);
        CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, many[i], NULL), ACLNN_SUCCESS);
        CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, many[i], NULL), ACLNN_ERR_PARAM_INVALID);
    }
    CU_ASSERT(memcmp(before, d.ydev, d.ybytes) == 0);
#undef RESTORE
    free(before);
    free(orig);
    aclrtFree(ws);
    dev_free(&d);
}

/* ---- lifetimes: blocks an executor uses, handles of spent executors ---- */

/* aclrtFree of a block a live executor's tensors lie in is refused (phase 2
 * would write freed memory); once the executor is spent or destroyed the
 * block can go. A spent executor's handle is never handed out again, so it
 * never runs another executor's plan. */
static void test_executor_lifetimes(void)
{
    rng r = rng_seed(908);
    dev_case d;
    dev_make(&d, &r);
    uint64_t size;
    aclOpExecutor *ex;
    CU_ASSERT_EQUAL_FATAL(dev_phase1(&d, d.x, d.y, &size, &ex), ACLNN_SUCCESS);
    void *ws;
    CU_ASSERT_FATAL(aclrtMalloc(&ws, size, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtFree(d.ydev), ACL_ERROR_RT_MEMORY_FREE);
    CU_ASSERT_EQUAL(aclrtFree(d.xdev), ACL_ERROR_RT_MEMORY_FREE);
    CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, ex, NULL), ACLNN_SUCCESS);
    /* spent: the blocks are free to go (dev_free frees them) */
    aclOpExecutor *spent = ex;
    /* a destroyed executor lets go of its blocks as well */
    CU_ASSERT_EQUAL_FATAL(dev_phase1(&d, d.x, d.y, &size, &ex), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(aclrtFree(d.wdev), ACL_ERROR_RT_MEMORY_FREE);
    CU_ASSERT_EQUAL(aclDestroyAclOpExecutor(ex), ACLNN_SUCCESS);
    /* many executors made after it: none gets the spent handle, and the spent
     * handle runs none of them */
    for (int i = 0; i < 300; i++) {
        aclOpExecutor *fresh;
        CU_ASSERT_EQUAL_FATAL(dev_phase1(&d, d.x, d.y, &size, &fresh), ACLNN_SUCCESS);
        CU_ASSERT(fresh != spent);
        CU_ASSERT_EQUAL(aclnnNsaCompress(ws, size, spent, NULL), ACLNN_ERR_PARAM_INVALID);
        const aclnnStatus st = i % 2 ? aclnnNsaCompress(ws, size, fresh, NULL)
                                     : aclDestroyAclOpExecutor(fresh);
        CU_ASSERT_EQUAL(st, ACLNN_SUCCESS);
    }
    CU_ASSERT_EQUAL(aclrtFree(ws), ACL_SUCCESS);
    dev_free(&d);
}

/* ---- several host threads launching on one stream ---- */

typedef struct thread_job {
    const nsac_case *c;
    fwd_io io;       /* x and w shared (read only), y per thread */
    aclrtStream stream;
    int failures;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    for (int k = 0; k < 20; k++)
        j->failures += acl_fwd(j->c, &j->io, j->stream) != ACLNN_SUCCESS;
    return NULL;
}

static void test_threads_share_stream(void)
{
    const int64_t lens[4] = {200, 64, 0, 130};
    nsac_case c;
    nsac_case_fixed(&c, SPA_FLOAT16, 4, 64, 64, 32, 4, lens, 0);
    rng r = rng_seed(908);
    fwd_io ref;
    fwd_make(&ref, &c, &r);
    CU_ASSERT_EQUAL_FATAL(native_fwd(&c, &ref), SPA_OK);
    aclrtStream stream;
    CU_ASSERT_EQUAL_FATAL(aclrtCreateStream(&stream), ACL_SUCCESS);
    enum { THREADS = 4 };
    thread_job jobs[THREADS];
    pthread_t tid[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (thread_job){&c, ref, stream, 0};
        const int64_t yd[3] = {c.windows, c.n, c.d};
        tt_make(&jobs[i].io.y, c.dt, 3, yd, false, &r);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&tid[i], NULL, thread_main, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(tid[i], NULL);
        CU_ASSERT_EQUAL(jobs[i].failures, 0);
        CU_ASSERT(memcmp(jobs[i].io.y.t.data, ref.y.t.data, ref.y.span) == 0);
        tt_free(&jobs[i].io.y);
    }
    CU_ASSERT_EQUAL(aclrtDestroyStream(stream), ACL_SUCCESS);
    fwd_free(&ref);
}

#endif /* compress ops */

/* ---- host runtime ---- */

static void test_runtime(void)
{
    CU_ASSERT_EQUAL(aclInit(NULL), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    CU_ASSERT_EQUAL(aclrtSetDevice(0), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtSetDevice(1), ACL_ERROR_RT_INVALID_DEVICEID);
    uint32_t count = 0;
    CU_ASSERT_EQUAL(aclrtGetDeviceCount(&count), ACL_SUCCESS);
    CU_ASSERT_EQUAL(count, 1);

    aclrtContext ctx, cur;
    CU_ASSERT_EQUAL(aclrtCreateContext(&ctx, 0), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtSetCurrentContext(ctx), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
    CU_ASSERT_PTR_EQUAL(cur, ctx);
    CU_ASSERT_EQUAL(aclrtSetCurrentContext(&count), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(aclrtCreateContext(&cur, 3), ACL_ERROR_RT_INVALID_DEVICEID);
    CU_ASSERT_EQUAL(aclrtDestroyContext(ctx), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtDestroyContext(ctx), ACL_ERROR_INVALID_PARAM);

    aclrtStream s;
    CU_ASSERT_EQUAL(aclrtCreateStream(&s), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtSynchronizeStream(s), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtDestroyStream(s), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtDestroyStream(s), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(aclrtSynchronizeStream(s), ACL_ERROR_INVALID_PARAM);

    /* Device copies stay inside their allocation. */
    void *dev = NULL;
    CU_ASSERT_EQUAL(aclrtMalloc(&dev, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(aclrtMalloc(NULL, 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL_FATAL(aclrtMalloc(&dev, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    CU_ASSERT_EQUAL((uintptr_t)dev % 32, 0);
    unsigned char host[256], back[256];
    for (int i = 0; i < 256; i++)
        host[i] = (unsigned char)i;
    memset(back, 0, sizeof back);
    CU_ASSERT_EQUAL(aclrtMemcpy(dev, 100, host, 100, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtMemcpy(dev, 100, host, 101, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(aclrtMemcpy(dev, 200, host, 101, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(aclrtMemcpy(back, 256, dev, 101, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(aclrtMemcpy(back, 256, (char *)dev + 50, 51, ACL_MEMCPY_DEVICE_TO_HOST),
                    ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(aclrtMemcpy(back, 256, host, 10, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(aclrtMemcpy(back, 256, dev, 10, (aclrtMemcpyKind)9), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(back[0], 0); /* nothing copied by the refusals */
    CU_ASSERT_EQUAL(aclrtMemcpy(back, 256, dev, 100, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    CU_ASSERT(memcmp(back, host, 100) == 0);
    CU_ASSERT_EQUAL(aclrtMemcpy(back, 256, (char *)dev + 40, 60, ACL_MEMCPY_DEFAULT), ACL_SUCCESS);
    CU_ASSERT(memcmp(back, host + 40, 60) == 0);
    CU_ASSERT_EQUAL(aclrtMemset(dev, 100, 7, 100), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtMemset(dev, 200, 7, 101), ACL_ERROR_INVALID_PARAM);
    CU_ASSERT_EQUAL(aclrtFree(dev), ACL_SUCCESS);
    CU_ASSERT_NOT_EQUAL(aclrtFree(dev), ACL_SUCCESS);
    CU_ASSERT_NOT_EQUAL(aclrtFree(host), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtMemcpy(back, 256, dev, 10, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM);

    /* fp16 helpers: every finite half round-trips; floats round to nearest even. */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7C00u) == 0x7C00u)
            continue;
        float f = aclFloat16ToFloat((aclFloat16)h);
        bad += aclFloatToFloat16(f) != (aclFloat16)h;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(aclFloatToFloat16(1.0f), 0x3C00);
    CU_ASSERT_EQUAL(aclFloatToFloat16(-2.0f), 0xC000);
    CU_ASSERT_EQUAL(aclFloatToFloat16(1.0f + 0x1p-11f), 0x3C00); /* tie to even */
    CU_ASSERT_EQUAL(aclFloatToFloat16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
    CU_ASSERT_EQUAL(aclFloatToFloat16(65504.0f), 0x7BFF);
    CU_ASSERT_EQUAL(aclFloat16ToFloat(0x0001), 0x1p-24f);
    CU_ASSERT_EQUAL(aclDataTypeSize(ACL_FLOAT16), 2);
    CU_ASSERT_EQUAL(aclDataTypeSize(ACL_BF16), 2);
    CU_ASSERT_EQUAL(aclDataTypeSize(ACL_INT64), 8);
    CU_ASSERT_EQUAL(aclDataTypeSize(ACL_STRING), 0);

    /* Descriptors that cannot be represented are not created. */
    int64_t dims[26] = {0};
    CU_ASSERT_PTR_NULL(aclCreateTensor(dims, 26, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 1, host));
    CU_ASSERT_PTR_NULL(aclCreateTensor(NULL, 2, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, dims, 1, host));
    CU_ASSERT_PTR_NULL(aclCreateIntArray(NULL, 3));
    aclIntArray *a = aclCreateIntArray(NULL, 0);
    uint64_t n = 9;
    CU_ASSERT_EQUAL(aclGetIntArraySize(a, &n), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(aclDestroyIntArray(a), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(aclDestroyIntArray(a), ACLNN_ERR_PARAM_INVALID);
    CU_ASSERT_EQUAL(aclDestroyTensor(NULL), ACLNN_ERR_PARAM_NULLPTR);

    CU_ASSERT_EQUAL(aclrtResetDevice(0), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclFinalize(), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
}

static void acl_ops_register(CU_pSuite s)
{
    (void)s;
}

void suite_acl(void);
void suite_acl(void)
{
    CU_pSuite s = CU_add_suite("acl", NULL, suite_done);
    CU_add_test(s, "host runtime", test_runtime);
#if SPA_HAVE_NSA_COMPRESS && SPA_HAVE_NSA_COMPRESS_GRAD
    CU_add_test(s, "NsaCompress: same bytes as native", test_compress_same_as_native);
    CU_add_test(s, "NsaCompressGrad: same bytes as native", test_compress_grad_same_as_native);
    CU_add_test(s, "NsaCompress: codes of the native API", test_compress_codes_as_native);
    CU_add_test(s, "NsaCompress(Grad): NULL codes, before the double refusal", test_compress_grad_null_codes);
    CU_add_test(s, "NsaCompress, NsaCompressGrad: the NPU's limits", test_compress_npu_limits);
    CU_add_test(s, "views: offset, strides, storage", test_views_offset_strides);
    CU_add_test(s, "views reaching outside refused", test_views_refused);
    CU_add_test(s, "executors: workspace, single use", test_executor_rules);
    CU_add_test(s, "executors: pinned blocks, handles never reused", test_executor_lifetimes);
    CU_add_test(s, "host threads sharing a stream", test_threads_share_stream);
#else
    fprintf(stderr, "acl: NsaCompress not in libspattn.a; its compat tests skipped\n");
#endif
    acl_ops_register(s);
}

#endif /* SPA_HAVE_ACL */
