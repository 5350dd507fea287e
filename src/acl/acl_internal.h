/* Internals of the aclnn compatibility layer (libspattn_acl.a). Unlike the
 * core, this layer allocates, locks and owns threads: it is CANN's host
 * runtime on the CPU. Every global it defines beyond the CANN API starts with
 * spa_acl_. */
#ifndef SPA_ACL_INTERNAL_H
#define SPA_ACL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "spattn/runner.h"
#include "spattn/spattn.h"

/* ---- handle and allocation registry (registry.c) ----
 * Every object this layer hands out is recorded, so that a stale, foreign or
 * freed pointer is answered with an error instead of being dereferenced, and
 * device ranges can be checked against their allocation. */
enum spa_acl_kind {
    SPA_ACL_DEVICE_MEM = 1, /* aclrtMalloc */
    SPA_ACL_HOST_MEM,       /* aclrtMallocHost */
    SPA_ACL_CONTEXT,
    SPA_ACL_STREAM,
    SPA_ACL_TENSOR,
    SPA_ACL_INT_ARRAY,
    SPA_ACL_EXECUTOR
};
void spa_acl_lock(void);
void spa_acl_unlock(void);
/* pthread_cond_wait on the registry lock (held by the caller). */
void spa_acl_wait_locked(pthread_cond_t *cond);
/* The *_locked variants expect spa_acl_lock() to be held. */
bool spa_acl_reg_add(const void *p, uint64_t size, int kind);
bool spa_acl_reg_add_obj_locked(const void *p, uint64_t size, int kind, void *obj);
/* The object recorded with handle p of that kind, or NULL. */
void *spa_acl_reg_obj_locked(const void *p, int kind);
/* Pins: a memory block a live executor (or a running op) uses cannot be
 * freed. pin takes the block holding p, if any, and returns its base (NULL if
 * p lies in no tracked block); unpin gives back a base pin returned. */
const void *spa_acl_pin_locked(const void *p);
void spa_acl_unpin_locked(const void *block);
bool spa_acl_reg_pinned_locked(const void *p, int kind);
/* A fresh handle address, never handed out before nor after (handles.c). */
void *spa_acl_handle_new_locked(void);
bool spa_acl_reg_remove_locked(const void *p, int kind);
bool spa_acl_reg_remove(const void *p, int kind);
bool spa_acl_reg_has_locked(const void *p, int kind);
bool spa_acl_reg_has(const void *p, int kind);
/* Where [p, p+len) lies relative to the device allocations. */
enum spa_acl_range {
    SPA_ACL_RANGE_UNTRACKED = 0, /* p is in no device allocation */
    SPA_ACL_RANGE_INSIDE = 1,    /* the whole range is inside one */
    SPA_ACL_RANGE_OVERRUN = -1   /* p is in one, the range runs past its end */
};
int spa_acl_device_range(const void *p, uint64_t len);
/* The same over aclrtMalloc and aclrtMallocHost blocks (tensor views). */
int spa_acl_alloc_range(const void *p, uint64_t len);

/* ---- tensors and arrays (tensor.c) ---- */
/* spa_tensor view of t, or NULL when t is NULL. A tensor that cannot be used
 * (unknown handle, private format, negative offset, view outside its storage
 * or its device allocation) becomes a descriptor the native checks refuse with
 * SPA_ERR_INVALID, so NULL-before-invalid ordering stays the native one. */
const spa_tensor *spa_acl_tensor(const aclTensor *t, spa_tensor *out);
/* t NULL, or a tensor of dtype dt (an optional input's dtype rule). */
bool spa_acl_dtype_or_null(const aclTensor *t, int32_t dt);
/* A heap copy of a registered array's values (an unknown handle gives an
 * empty array, which the native checks refuse). False on allocation failure. */
bool spa_acl_int_array_copy(const aclIntArray *a, int64_t **values, uint64_t *size);

/* ---- executors (executor.c) ---- */
typedef spa_status (*spa_acl_run_fn)(void *workspace, uint64_t workspace_size,
                                     const spa_executor *executor, const spa_runner *runner);
#define SPA_ACL_CALL_TENSORS 16
#define SPA_ACL_CALL_ARRAYS 3 /* host int arrays of one call */
/* One phase-1 call: owns the executor under construction and the copies of
 * the host int arrays that the native plan will point into. */
typedef struct spa_acl_call {
    void *rec;             /* the executor record (executor.c); NULL without an executor slot */
    spa_executor spare;    /* planning target when ex could not be allocated */
    spa_executor *native;  /* what the native phase 1 receives */
    bool alloc_failed;
    spa_int_array arrays[SPA_ACL_CALL_ARRAYS];
    int64_t *owned[SPA_ACL_CALL_ARRAYS]; /* heap copies behind arrays[] */
    unsigned narrays;
    const void *data[SPA_ACL_CALL_TENSORS]; /* the tensors' data, pinned by the executor */
    unsigned ndata;
} spa_acl_call;
void spa_acl_call_begin(spa_acl_call *c, aclOpExecutor **executor);
/* Tensor argument: spa_acl_tensor, and its data is recorded so that the
 * executor pins the memory block it lies in. */
const spa_tensor *spa_acl_call_tensor(spa_acl_call *c, const aclTensor *t, spa_tensor *out);
/* Array argument: NULL stays NULL; otherwise an executor-owned copy. */
const spa_int_array *spa_acl_call_array(spa_acl_call *c, const aclIntArray *a);
/* Lengths given as a 1-D INT32 tensor (CANN's actualSeqLengths*): an
 * executor-owned int64 copy of its values, read once here (CANN's kernel
 * reads them at run time; a caller that rewrites them between the phases
 * gets the values of phase 1), per batch, from a prefix sum where
 * cumulative (TND). NULL stays NULL; *ok false: not a 1-D INT32 tensor of
 * at most 65536 values, or a prefix sum that decreases. */
const spa_int_array *spa_acl_call_tensor_lengths(spa_acl_call *c, const aclTensor *t, bool cumulative, bool *ok);
aclnnStatus spa_acl_call_end(spa_acl_call *c, spa_status st, spa_acl_run_fn run,
                             const uint64_t *workspace_size, aclOpExecutor **executor);
/* A CANN rule that refuses the call before the native phase 1 runs: the
 * call ends (its executor released, nothing of a native refusal recorded),
 * aclGetRecentErrMsg says "<api>GetWorkspaceSize: <code>: <rule> (a CANN
 * rule)", and code is returned. */
aclnnStatus spa_acl_call_refuse(spa_acl_call *c, aclnnStatus code, const char *rule, spa_acl_run_fn run,
                                const uint64_t *workspace_size, aclOpExecutor **executor);
/* Phase 2 of every op. */
aclnnStatus spa_acl_exec_run(void *workspace, uint64_t workspace_size, aclOpExecutor *executor,
                             aclrtStream stream, spa_acl_run_fn run);

/* ---- layout views (views.c) ---- */
/* Dims a and a + 1 of t as one (false where the strides do not allow it). */
bool spa_acl_merge_dims(spa_tensor *t, int32_t a);
/* The last dim of t as [n, dims / n] (false where it does not divide). */
bool spa_acl_split_last(spa_tensor *t, int64_t n);
/* Whether the first n dims of x are those of ref. */
bool spa_acl_dims_lead(const spa_tensor *x, const spa_tensor *ref, int32_t n);
/* FLOAT16 or BFLOAT16: the dtypes of CANN's half-precision operators. */
static inline bool spa_acl_is_half(int32_t dt)
{
    return dt == SPA_FLOAT16 || dt == SPA_BFLOAT16;
}

/* ---- error messages (errmsg.c) ---- */
/* Sets this thread's message for aclGetRecentErrMsg (printf format). */
void spa_acl_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* The message of a native refusal: "<api>: <status>: <rule> (in <context>)",
 * the rule and context read from the executor the refusal was recorded in
 * (NULL: none was). */
void spa_acl_error_refusal(const char *api, spa_status st, const spa_executor *native);

/* ---- streams (stream.c) ---- */
/* Runs fn(ctx, runner) with the stream's runner (NULL stream: inline), one
 * launch at a time per stream. False if stream is not a live stream. */
bool spa_acl_stream_launch(aclrtStream stream, spa_status (*fn)(void *ctx, const spa_runner *r),
                           void *ctx, spa_status *result);

#endif
