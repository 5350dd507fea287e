/* CANN's NSA and deformable-attention kernels take no double: the aclnn
 * wrappers refuse ACL_DOUBLE tensors themselves (161002), before the native
 * phase 1, which accepts float64 where this build has the path. */
#ifndef SPA_ACL_DOUBLE_H
#define SPA_ACL_DOUBLE_H

#include "acl_internal.h"

/* Whether any of the n tensors (NULL ones skipped) is ACL_DOUBLE. */
bool spa_acl_any_double(const aclTensor *const *t, int n);
/* The refusal of such a call, in place of the native phase 1 (c begun):
 * 161002 with a message naming the rule, nothing planned; a NULL
 * workspaceSize or executor slot still answers 161001, as CANN checks
 * pointers first. */
aclnnStatus spa_acl_refuse_double(spa_acl_call *c, const char *api, spa_acl_run_fn run,
                                  const uint64_t *workspace_size, aclOpExecutor **executor);

#endif
