/* aclOpExecutor: the native executor plus what it points into (copies of the
 * host int arrays), created by phase 1 and consumed by phase 2.
 *
 * The handle a caller holds is not the record's address: it is a fresh
 * address that is never handed out again (handles.c), mapped to the record by
 * the registry. A run retires the executor (unless repeatable): the record is
 * freed and the handle leaves the registry, so a second run, or any later use
 * of a stale handle, is refused and can never reach another executor's plan.
 *
 * A live executor pins the memory blocks (aclrtMalloc / aclrtMallocHost) its
 * tensors lie in, and a run pins its workspace block: aclrtFree of a pinned
 * block is refused, so phase 2 never writes freed memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl_internal.h"

enum exec_state { EXEC_LIVE = 1, EXEC_RUNNING };

typedef struct exec_rec {
    int state;
    bool repeatable;
    spa_acl_run_fn run;
    uint64_t ws_size;
    int64_t *arrays[SPA_ACL_CALL_ARRAYS];
    spa_executor *native;
    const void *pinned[SPA_ACL_CALL_TENSORS]; /* blocks pinned, each once */
    unsigned npinned;
} exec_rec;

static void free_arrays(int64_t **arrays)
{
    for (int i = 0; i < SPA_ACL_CALL_ARRAYS; i++) {
        free(arrays[i]);
        arrays[i] = NULL;
    }
}

/* Registry lock held: unpins and forgets the handle; the record is then the
 * caller's to free (outside the lock). */
static void retire_locked(aclOpExecutor *handle, exec_rec *rec)
{
    for (unsigned i = 0; i < rec->npinned; i++)
        spa_acl_unpin_locked(rec->pinned[i]);
    rec->npinned = 0;
    spa_acl_reg_remove_locked(handle, SPA_ACL_EXECUTOR);
}

static void free_rec(exec_rec *rec)
{
    if (rec == NULL)
        return;
    free_arrays(rec->arrays);
    free(rec->native);
    free(rec);
}

void spa_acl_call_begin(spa_acl_call *c, aclOpExecutor **executor)
{
    memset(c, 0, sizeof *c);
    if (executor == NULL)
        return; /* native phase 1 answers the NULL slot */
    c->rec = calloc(1, sizeof(exec_rec));
    exec_rec *rec = c->rec;
    if (rec != NULL)
        rec->native = malloc(sizeof *rec->native);
    if (rec == NULL || rec->native == NULL) {
        c->alloc_failed = true;
        c->native = &c->spare; /* still validate, to report the right code */
    } else {
        c->native = rec->native;
    }
}

const spa_tensor *spa_acl_call_tensor(spa_acl_call *c, const aclTensor *t, spa_tensor *out)
{
    const spa_tensor *v = spa_acl_tensor(t, out);
    if (v != NULL && v->data != NULL && c->ndata < SPA_ACL_CALL_TENSORS)
        c->data[c->ndata++] = v->data;
    return v;
}

const spa_int_array *spa_acl_call_array(spa_acl_call *c, const aclIntArray *a)
{
    if (a == NULL || c->narrays >= SPA_ACL_CALL_ARRAYS)
        return NULL;
    unsigned i = c->narrays++;
    int64_t *values;
    uint64_t size;
    if (!spa_acl_int_array_copy(a, &values, &size)) {
        c->alloc_failed = true;
        values = NULL;
        size = 0;
    }
    c->owned[i] = values;
    c->arrays[i].data = values;
    c->arrays[i].size = size;
    return &c->arrays[i];
}

const spa_int_array *spa_acl_call_tensor_lengths(spa_acl_call *c, const aclTensor *t, bool cumulative, bool *ok)
{
    *ok = true;
    if (t == NULL || c->narrays >= SPA_ACL_CALL_ARRAYS)
        return NULL;
    spa_tensor v;
    const spa_tensor *tv = spa_acl_tensor(t, &v);
    if (tv->rank != 1 || tv->dtype != SPA_INT32 || tv->dims[0] < 0 || tv->dims[0] > 65536 ||
        (tv->dims[0] > 0 && tv->data == NULL)) {
        *ok = false;
        return NULL;
    }
    const unsigned i = c->narrays++;
    const uint64_t n = (uint64_t)tv->dims[0];
    int64_t *values = malloc((size_t)(n > 0 ? n : 1) * sizeof *values);
    if (values == NULL)
        c->alloc_failed = true;
    const int32_t *src = tv->data;
    int64_t prev = 0;
    for (uint64_t k = 0; values != NULL && k < n; k++) {
        const int64_t x = src[(int64_t)k * tv->strides[0]]; /* read once */
        values[k] = cumulative ? x - prev : x;
        if (cumulative && x < prev)
            *ok = false; /* a prefix sum that decreases */
        prev = x;
    }
    c->owned[i] = values;
    c->arrays[i].data = values;
    c->arrays[i].size = values != NULL ? n : 0;
    return &c->arrays[i];
}

static aclnnStatus map_status(spa_status st)
{
    return st == SPA_ERR_WORKSPACE ? ACLNN_ERR_PARAM_INVALID : (aclnnStatus)st;
}

/* The aclnn name of an op's phase 2, for aclGetRecentErrMsg. */
static const char *api_name(spa_acl_run_fn run)
{
    static const struct {
        spa_acl_run_fn run;
        const char *name;
    } names[] = {
        {spa_nsa_compress, "aclnnNsaCompress"},
        {spa_nsa_compress_grad, "aclnnNsaCompressGrad"},
        {spa_nsa_select, "aclnnNsaSelectedAttention"},
        {spa_nsa_select_grad, "aclnnNsaSelectedAttentionGrad"},
        {spa_msda, "aclnnMultiScaleDeformableAttnFunction"},
        {spa_msda_grad, "aclnnMultiScaleDeformableAttentionGrad"},
        {spa_nsa_compress_attention, "aclnnNsaCompressAttention"},
        {spa_nsa_select_infer, "aclnnNsaSelectedAttentionInfer"},
        {spa_dsa_lightning_indexer, "aclnnLightningIndexer"},
        {spa_dsa_sparse_attention, "aclnnSparseFlashAttention"},
        {spa_dsa_sparse_attention_grad, "aclnnSparseFlashAttentionGrad"},
        {spa_dsa_lightning_indexer_grad, "aclnnLightningIndexerGrad"},
        {spa_nsa_compress_with_cache, "aclnnNsaCompressWithCache"},
        {spa_nsa_compress_attention_infer, "aclnnNsaCompressAttentionInfer"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].run == run)
            return names[i].name;
    return "aclnn";
}

/* Registry lock held: pins the block of each tensor once. */
static void pin_tensors_locked(exec_rec *rec, const spa_acl_call *c)
{
    for (unsigned i = 0; i < c->ndata; i++) {
        const void *block = spa_acl_pin_locked(c->data[i]);
        if (block == NULL)
            continue; /* caller memory the layer does not track */
        bool again = false;
        for (unsigned j = 0; j < rec->npinned; j++)
            again = again || rec->pinned[j] == block;
        if (again)
            spa_acl_unpin_locked(block);
        else
            rec->pinned[rec->npinned++] = block;
    }
}

aclnnStatus spa_acl_call_end(spa_acl_call *c, spa_status st, spa_acl_run_fn run,
                             const uint64_t *workspace_size, aclOpExecutor **executor)
{
    aclnnStatus r = map_status(st);
    exec_rec *rec = c->rec;
    if (r != ACLNN_SUCCESS) {
        char api[96];
        snprintf(api, sizeof api, "%sGetWorkspaceSize", api_name(run));
        spa_acl_error_refusal(api, st, c->native);
    }
    if (r == ACLNN_SUCCESS && (c->alloc_failed || rec == NULL))
        r = ACLNN_ERR_INNER_CREATE_EXECUTOR;
    if (r == ACLNN_SUCCESS) {
        rec->state = EXEC_LIVE;
        rec->run = run;
        rec->ws_size = *workspace_size;
        for (int i = 0; i < SPA_ACL_CALL_ARRAYS; i++)
            rec->arrays[i] = c->owned[i];
        spa_acl_lock();
        aclOpExecutor *handle = spa_acl_handle_new_locked();
        bool ok = handle != NULL && spa_acl_reg_add_obj_locked(handle, 1, SPA_ACL_EXECUTOR, rec);
        if (ok)
            pin_tensors_locked(rec, c);
        spa_acl_unlock();
        if (ok) {
            *executor = handle;
            return ACLNN_SUCCESS;
        }
        for (int i = 0; i < SPA_ACL_CALL_ARRAYS; i++)
            rec->arrays[i] = NULL;
        r = ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    if (r == ACLNN_ERR_INNER_CREATE_EXECUTOR)
        spa_acl_error("%sGetWorkspaceSize: %d: the executor could not be allocated", api_name(run),
                      (int)r);
    free_arrays(c->owned);
    free_rec(rec);
    return r;
}

aclnnStatus spa_acl_call_refuse(spa_acl_call *c, aclnnStatus code, const char *rule, spa_acl_run_fn run,
                                const uint64_t *workspace_size, aclOpExecutor **executor)
{
    if (c->native != NULL) /* no native phase 1 ran into it: nothing of it is this answer */
        memset(c->native, 0, sizeof *c->native);
    (void)spa_acl_call_end(c, SPA_ERR_INVALID, run, workspace_size, executor);
    spa_acl_error("%sGetWorkspaceSize: %d: %s (a CANN rule)", api_name(run), (int)code, rule);
    return code;
}

typedef struct launch {
    exec_rec *rec;
    void *ws;
    uint64_t ws_size;
} launch;

/* Through spa_executor_run, which records a refusal's reason in the
 * native executor (phase 2 of the op rec->run names). */
static spa_status launch_native(void *ctx, const spa_runner *runner)
{
    launch *l = ctx;
    return spa_executor_run(l->ws, l->ws_size, l->rec->native, runner);
}

aclnnStatus spa_acl_exec_run(void *workspace, uint64_t workspace_size, aclOpExecutor *executor,
                             aclrtStream stream, spa_acl_run_fn run)
{
    const char *api = api_name(run);
    if (executor == NULL) {
        spa_acl_error("%s: %d: executor is NULL", api, ACLNN_ERR_PARAM_NULLPTR);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    spa_acl_lock();
    exec_rec *rec = spa_acl_reg_obj_locked(executor, SPA_ACL_EXECUTOR);
    /* Unknown (never made, or already run), running, or made by another operator. */
    if (rec == NULL || rec->state != EXEC_LIVE || rec->run != run) {
        spa_acl_unlock();
        spa_acl_error("%s: %d: the executor is unknown, already run, or made by another operator",
                      api, ACLNN_ERR_PARAM_INVALID);
        return ACLNN_ERR_PARAM_INVALID;
    }
    /* Workspace refusals leave the executor unused: the caller may retry. */
    const uint64_t need = rec->ws_size;
    if (need > 0 && workspace == NULL) {
        spa_acl_unlock();
        spa_acl_error("%s: %d: workspace is NULL, phase 1 asked for %llu bytes", api,
                      ACLNN_ERR_PARAM_NULLPTR, (unsigned long long)need);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (workspace_size < need) {
        spa_acl_unlock();
        spa_acl_error("%s: %d: workspace of %llu bytes, phase 1 asked for %llu", api,
                      ACLNN_ERR_PARAM_INVALID, (unsigned long long)workspace_size,
                      (unsigned long long)need);
        return ACLNN_ERR_PARAM_INVALID;
    }
    rec->state = EXEC_RUNNING;
    const void *ws_block = rec->ws_size > 0 ? spa_acl_pin_locked(workspace) : NULL;
    spa_acl_unlock();

    launch l = {rec, workspace, workspace_size};
    spa_status st = SPA_ERR_INVALID;
    bool launched = spa_acl_stream_launch(stream, launch_native, &l, &st);
    if (!launched)
        spa_acl_error("%s: %d: the stream is not a live stream", api, ACLNN_ERR_PARAM_INVALID);
    else if (st != SPA_OK)
        spa_acl_error_refusal(api, st, rec->native); /* read before the record is freed */

    bool spent = launched && !rec->repeatable;
    spa_acl_lock();
    spa_acl_unpin_locked(ws_block);
    if (spent)
        retire_locked(executor, rec);
    else
        rec->state = EXEC_LIVE; /* repeatable, or not a stream: nothing ran */
    spa_acl_unlock();
    if (spent)
        free_rec(rec);
    return launched ? map_status(st) : ACLNN_ERR_PARAM_INVALID;
}

aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor)
{
    if (executor == NULL)
        return ACLNN_ERR_PARAM_NULLPTR;
    aclnnStatus r = ACLNN_ERR_PARAM_INVALID;
    spa_acl_lock();
    exec_rec *rec = spa_acl_reg_obj_locked(executor, SPA_ACL_EXECUTOR);
    if (rec != NULL && rec->state == EXEC_LIVE) {
        rec->repeatable = true;
        r = ACLNN_SUCCESS;
    }
    spa_acl_unlock();
    return r;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor)
{
    if (executor == NULL)
        return ACLNN_ERR_PARAM_NULLPTR;
    spa_acl_lock();
    /* Only an executor that has not been consumed (never run, or repeatable
     * and idle) can be destroyed; a retired one is already released. */
    exec_rec *rec = spa_acl_reg_obj_locked(executor, SPA_ACL_EXECUTOR);
    if (rec == NULL || rec->state != EXEC_LIVE) {
        spa_acl_unlock();
        return ACLNN_ERR_PARAM_INVALID;
    }
    retire_locked(executor, rec);
    spa_acl_unlock();
    free_rec(rec);
    return ACLNN_SUCCESS;
}
