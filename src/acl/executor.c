/* aclOpExecutor: the native executor plus what it points into (copies of the
 * host int arrays), created by phase 1 and consumed by phase 2.
 *
 * Single use: a run retires the executor and frees the plan and the arrays.
 * Only the small handle stays allocated (a tombstone, still in the registry)
 * until SPA_ACL_TOMBSTONES later retirements, so a second run of it is
 * refused instead of reading freed memory, and its address cannot be handed
 * out to a new executor meanwhile. */
#include <stdlib.h>
#include <string.h>

#include "acl_internal.h"

#define SPA_ACL_TOMBSTONES 64

enum exec_state { EXEC_LIVE = 1, EXEC_RUNNING, EXEC_SPENT };

struct aclOpExecutor {
    int state;
    bool repeatable;
    spa_acl_run_fn run;
    uint64_t ws_size;
    int64_t *arrays[2];
    aclOpExecutor *next_spent;
    spa_executor *native; /* NULL once retired */
};

/* Retired executors, oldest first; guarded by the registry lock. */
static aclOpExecutor *spent_head, *spent_tail;
static unsigned spent_count;

static void free_arrays(int64_t **arrays)
{
    for (int i = 0; i < 2; i++) {
        free(arrays[i]);
        arrays[i] = NULL;
    }
}

static void release(aclOpExecutor *ex)
{
    free_arrays(ex->arrays);
    free(ex->native);
    ex->native = NULL;
}

static void retire_locked(aclOpExecutor *ex)
{
    release(ex);
    ex->state = EXEC_SPENT;
    ex->next_spent = NULL;
    if (spent_tail != NULL)
        spent_tail->next_spent = ex;
    else
        spent_head = ex;
    spent_tail = ex;
    if (++spent_count > SPA_ACL_TOMBSTONES) {
        aclOpExecutor *old = spent_head;
        spent_head = old->next_spent;
        spent_count--;
        spa_acl_reg_remove_locked(old, SPA_ACL_EXECUTOR);
        free(old);
    }
}

void spa_acl_call_begin(spa_acl_call *c, aclOpExecutor **executor)
{
    memset(c, 0, sizeof *c);
    if (executor == NULL)
        return; /* native phase 1 answers the NULL slot */
    c->ex = calloc(1, sizeof *c->ex);
    if (c->ex != NULL)
        c->ex->native = malloc(sizeof *c->ex->native);
    if (c->ex == NULL || c->ex->native == NULL) {
        c->alloc_failed = true;
        c->native = &c->spare; /* still validate, to report the right code */
    } else {
        c->native = c->ex->native;
    }
}

const spa_int_array *spa_acl_call_array(spa_acl_call *c, const aclIntArray *a)
{
    if (a == NULL || c->narrays >= 2)
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

static aclnnStatus map_status(spa_status st)
{
    return st == SPA_ERR_WORKSPACE ? ACLNN_ERR_PARAM_INVALID : (aclnnStatus)st;
}

aclnnStatus spa_acl_call_end(spa_acl_call *c, spa_status st, spa_acl_run_fn run,
                             const uint64_t *workspace_size, aclOpExecutor **executor)
{
    aclnnStatus r = map_status(st);
    if (r == ACLNN_SUCCESS && (c->alloc_failed || c->ex == NULL))
        r = ACLNN_ERR_INNER_CREATE_EXECUTOR;
    if (r == ACLNN_SUCCESS) {
        aclOpExecutor *ex = c->ex;
        ex->state = EXEC_LIVE;
        ex->run = run;
        ex->ws_size = *workspace_size;
        ex->arrays[0] = c->owned[0];
        ex->arrays[1] = c->owned[1];
        if (spa_acl_reg_add(ex, sizeof *ex, SPA_ACL_EXECUTOR)) {
            *executor = ex;
            return ACLNN_SUCCESS;
        }
        r = ACLNN_ERR_INNER_CREATE_EXECUTOR;
    }
    free_arrays(c->owned);
    if (c->ex != NULL)
        free(c->ex->native);
    free(c->ex);
    return r;
}

typedef struct launch {
    aclOpExecutor *ex;
    void *ws;
    uint64_t ws_size;
} launch;

static spa_status launch_native(void *ctx, const spa_runner *runner)
{
    launch *l = ctx;
    return l->ex->run(l->ws, l->ws_size, l->ex->native, runner);
}

aclnnStatus spa_acl_exec_run(void *workspace, uint64_t workspace_size, aclOpExecutor *executor,
                             aclrtStream stream, spa_acl_run_fn run)
{
    if (executor == NULL)
        return ACLNN_ERR_PARAM_NULLPTR;
    spa_acl_lock();
    /* Unknown, already run (or running), or made by another operator. */
    if (!spa_acl_reg_has_locked(executor, SPA_ACL_EXECUTOR) || executor->state != EXEC_LIVE ||
        executor->run != run) {
        spa_acl_unlock();
        return ACLNN_ERR_PARAM_INVALID;
    }
    /* Workspace refusals leave the executor unused: the caller may retry. */
    if (executor->ws_size > 0 && workspace == NULL) {
        spa_acl_unlock();
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (workspace_size < executor->ws_size) {
        spa_acl_unlock();
        return ACLNN_ERR_PARAM_INVALID;
    }
    executor->state = EXEC_RUNNING;
    spa_acl_unlock();

    launch l = {executor, workspace, workspace_size};
    spa_status st = SPA_ERR_INVALID;
    bool launched = spa_acl_stream_launch(stream, launch_native, &l, &st);

    spa_acl_lock();
    if (!launched || executor->repeatable)
        executor->state = EXEC_LIVE; /* not a stream: nothing ran */
    else
        retire_locked(executor);
    spa_acl_unlock();
    return launched ? map_status(st) : ACLNN_ERR_PARAM_INVALID;
}

aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor)
{
    if (executor == NULL)
        return ACLNN_ERR_PARAM_NULLPTR;
    aclnnStatus r = ACLNN_ERR_PARAM_INVALID;
    spa_acl_lock();
    if (spa_acl_reg_has_locked(executor, SPA_ACL_EXECUTOR) && executor->state == EXEC_LIVE) {
        executor->repeatable = true;
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
    if (!spa_acl_reg_has_locked(executor, SPA_ACL_EXECUTOR) || executor->state != EXEC_LIVE) {
        spa_acl_unlock();
        return ACLNN_ERR_PARAM_INVALID;
    }
    spa_acl_reg_remove_locked(executor, SPA_ACL_EXECUTOR);
    spa_acl_unlock();
    release(executor);
    free(executor);
    return ACLNN_SUCCESS;
}
