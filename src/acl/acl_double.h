/* CANN's NSA and deformable-attention kernels take no double: the aclnn
 * wrappers refuse ACL_DOUBLE tensors themselves (161002), in CANN's order:
 * after the NULL checks (a NULL required argument answers 161001 first, the
 * native phase 1 telling which), before every other rule. The native phase 1
 * accepts float64 where this build has the path, so it runs on such a call
 * only to find a NULL, sizing into a probe (the caller's slot is not
 * written). */
#ifndef SPA_ACL_DOUBLE_H
#define SPA_ACL_DOUBLE_H

#include "acl_internal.h"

/* Whether any of the n tensors (NULL ones skipped) is ACL_DOUBLE. */
bool spa_acl_any_double(const aclTensor *const *t, int n);
/* The workspaceSize slot for the native phase 1: probe when the call has a
 * double tensor (dbl) and ws is given, else ws. */
uint64_t *spa_acl_ws_slot(bool dbl, uint64_t *ws, uint64_t *probe);
/* The refusal of such a call, in place of the native phase 1 (c begun):
 * 161002 with a message naming the rule, nothing planned (what the native
 * phase 1 planned is dropped); a NULL workspaceSize or executor slot still
 * answers 161001. */
aclnnStatus spa_acl_refuse_double(spa_acl_call *c, const char *api, spa_acl_run_fn run,
                                  const uint64_t *workspace_size, aclOpExecutor **executor);

#endif
