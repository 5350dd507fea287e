/* The aclnn layer's refusal of double tensors (acl_double.h). */
#include "acl_double.h"

#include <string.h>

bool spa_acl_any_double(const aclTensor *const *t, int n)
{
    for (int i = 0; i < n; i++) {
        spa_tensor v;
        if (t[i] != NULL && spa_acl_tensor(t[i], &v) != NULL && v.dtype == ACL_DOUBLE)
            return true;
    }
    return false;
}

uint64_t *spa_acl_ws_slot(bool dbl, uint64_t *ws, uint64_t *probe)
{
    return dbl && ws != NULL ? probe : ws;
}

aclnnStatus spa_acl_refuse_double(spa_acl_call *c, const char *api, spa_acl_run_fn run,
                                  const uint64_t *workspace_size, aclOpExecutor **executor)
{
    const bool null_slot = workspace_size == NULL || executor == NULL;
    /* Whatever the native phase 1 planned or recorded is not this answer. */
    if (c->native != NULL)
        memset(c->native, 0, sizeof *c->native);
    aclnnStatus r = spa_acl_call_end(c, null_slot ? SPA_ERR_NULLPTR : SPA_ERR_INVALID, run,
                                     workspace_size, executor);
    if (!null_slot)
        spa_acl_error("%s: %d: CANN takes no ACL_DOUBLE (float64) tensor for this op", api, (int)r);
    return r;
}
