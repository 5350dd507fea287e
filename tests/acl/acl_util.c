/* Helpers of the aclnn compatibility suites: acl_util.h (nothing without
 * the compat layer). */
#if defined(SPA_HAVE_ACL)

#include "acl_util.h"

#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

aclTensor *acl_of(const spa_tensor *t)
{
    int64_t last = 0, storage = 1;
    for (int32_t k = 0; k < t->rank; k++) {
        last += (t->dims[k] - 1) * t->strides[k];
        storage = t->dims[k] == 0 ? 0 : storage;
    }
    storage = storage == 0 ? 0 : last + 1;
    return aclCreateTensor(t->dims, (uint64_t)t->rank, (aclDataType)t->dtype, t->strides, 0, ACL_FORMAT_ND,
                           &storage, 1, t->data);
}

spa_tensor merged(const spa_tensor *t)
{
    spa_tensor m = *t;
    m.dims[0] *= m.dims[1], m.strides[0] = m.strides[1];
    for (int32_t i = 1; i + 1 < m.rank; i++)
        m.dims[i] = m.dims[i + 1], m.strides[i] = m.strides[i + 1];
    m.rank--;
    return m;
}

bool any_nonzero(const ttensor *t)
{
    for (int64_t i = 0; i < tt_numel(t); i++)
        if (tt_get(t, i) != 0.0)
            return true;
    return false;
}

aclnnStatus host_phase2(aclnnStatus phase1, aclnn_phase2_fn run, uint64_t size, aclOpExecutor *ex)
{
    if (phase1 != ACLNN_SUCCESS)
        return phase1;
    void *ws = size ? malloc(size) : NULL;
    CU_ASSERT_FATAL(size == 0 || ws != NULL);
    const aclnnStatus st = run(ws, size, ex, NULL);
    free(ws);
    return st;
}

spa_status native_phase2(spa_status (*run)(void *, uint64_t, const spa_executor *, const spa_runner *),
                         uint64_t size, const spa_executor *ex)
{
    void *ws = malloc(size > 0 ? size : 1);
    CU_ASSERT_FATAL(ws != NULL);
    const spa_status st = run(ws, size, ex, NULL);
    free(ws);
    return st;
}

const aclTensor *arena_of(acl_arena *a, const spa_tensor *t)
{
    aclTensor *x = acl_of(t);
    CU_ASSERT_FATAL(a->nmade < ACL_ARENA_MADE);
    a->made[a->nmade++] = x;
    return x;
}

const aclTensor *arena_alt(acl_arena *a, const ttensor *like, spa_dtype dt, int32_t axis, int64_t size)
{
    CU_ASSERT_FATAL(a->nalts < ACL_ARENA_ALTS);
    ttensor *t = &a->alts[a->nalts++];
    int64_t dims[SPA_MAX_RANK];
    memcpy(dims, like->t.dims, sizeof dims);
    if (axis >= 0)
        dims[axis] = size;
    rng r = rng_seed(3411);
    tt_make(t, dt, like->t.rank, dims, false, &r);
    if (dt == SPA_INT32 || dt == SPA_INT64)
        memset(t->t.data, 0, t->span);
    else
        tt_fill_random(t, &r, -1.0, 1.0);
    return arena_of(a, &t->t);
}

void arena_free(acl_arena *a)
{
    for (int i = 0; i < a->nmade; i++)
        aclDestroyTensor(a->made[i]);
    for (int i = 0; i < a->nalts; i++)
        tt_free(&a->alts[i]);
    a->nmade = a->nalts = 0;
}

void expect_phase1_at(aclnnStatus (*run)(void *arg), void *arg, aclOpExecutor *const *ex, ttensor *const *outs,
                      int n, aclnnStatus code, const char *file, unsigned line)
{
    unsigned char *snap[8];
    CU_ASSERT_FATAL(n <= 8);
    for (int i = 0; i < n; i++)
        tt_fill_canary(outs[i]), snap[i] = tt_snapshot(outs[i]);
    const aclnnStatus st = run(arg);
    CU_assertImplementation(st == code, line, "phase 1 answers the expected code", file, "", CU_FALSE);
    if (st == ACLNN_SUCCESS)
        aclDestroyAclOpExecutor(*ex);
    else
        CU_assertImplementation(*ex == NULL, line, "no executor after a refusal", file, "", CU_FALSE);
    bool same = true;
    for (int i = 0; i < n; i++) {
        same = same && tt_same_bytes(outs[i], snap[i]);
        free(snap[i]);
    }
    CU_assertImplementation(same, line, "the outputs untouched", file, "", CU_FALSE);
}

void client_open(aclrtContext *ctx, aclrtStream *stream)
{
    CU_ASSERT_EQUAL_FATAL(aclInit(NULL), ACL_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(aclrtSetDevice(0), ACL_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(aclrtCreateContext(ctx, 0), ACL_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(aclrtSetCurrentContext(*ctx), ACL_SUCCESS);
    CU_ASSERT_EQUAL_FATAL(aclrtCreateStream(stream), ACL_SUCCESS);
}

void client_close(aclrtContext ctx, aclrtStream stream)
{
    CU_ASSERT_EQUAL(aclrtDestroyStream(stream), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtDestroyContext(ctx), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclrtResetDevice(0), ACL_SUCCESS);
    CU_ASSERT_EQUAL(aclFinalize(), ACL_SUCCESS);
}

void client_phase2(aclnn_phase2_fn run, uint64_t size, aclOpExecutor *ex, aclrtStream stream)
{
    void *ws = NULL;
    if (size > 0)
        CU_ASSERT_FATAL(aclrtMalloc(&ws, size, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    CU_ASSERT_EQUAL(run(ws, size, ex, stream), ACLNN_SUCCESS);
    CU_ASSERT_EQUAL(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    if (ws != NULL)
        CU_ASSERT(aclrtFree(ws) == ACL_SUCCESS);
}

void dev_make(dev_buf *d, const int64_t *shape, uint64_t rank, aclDataType dt, const void *host)
{
    int64_t n = 1, strides[SPA_MAX_RANK];
    for (int64_t i = (int64_t)rank - 1; i >= 0; i--)
        strides[i] = n, n *= shape[i];
    d->bytes = (size_t)n * aclDataTypeSize(dt);
    CU_ASSERT_FATAL(aclrtMalloc(&d->p, d->bytes, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    const aclError st = host != NULL ? aclrtMemcpy(d->p, d->bytes, host, d->bytes, ACL_MEMCPY_HOST_TO_DEVICE)
                                     : aclrtMemset(d->p, d->bytes, 0xA5, d->bytes);
    CU_ASSERT(st == ACL_SUCCESS);
    d->t = aclCreateTensor(shape, rank, dt, strides, 0, ACL_FORMAT_ND, shape, rank, d->p);
}

void dev_free(dev_buf *d)
{
    aclDestroyTensor(d->t);
    CU_ASSERT(aclrtFree(d->p) == ACL_SUCCESS);
}

float *dev_floats(const dev_buf *d)
{
    const size_t n = d->bytes / 2;
    uint16_t *h = malloc(d->bytes);
    float *f = malloc((n > 0 ? n : 1) * sizeof *f);
    CU_ASSERT_FATAL(h != NULL && f != NULL);
    CU_ASSERT(aclrtMemcpy(h, d->bytes, d->p, d->bytes, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS);
    for (size_t i = 0; i < n; i++)
        f[i] = aclFloat16ToFloat(h[i]);
    free(h);
    return f;
}

bool dev_all(const dev_buf *d, float want)
{
    float *f = dev_floats(d);
    bool ok = true;
    for (size_t i = 0; ok && i < d->bytes / 2; i++)
        ok = f[i] == want;
    free(f);
    return ok;
}

#endif
