/* CANN's rules of NsaSelectedAttention(+Grad) that the native API no longer
 * applies (spec/nsa.md 0.3b): the aclnn wrappers check them so that ported
 * CANN code sees the NPU's 161002. */
#ifndef SPA_ACL_NSA_SELECTED_RULES_H
#define SPA_ACL_NSA_SELECTED_RULES_H

#include <stdbool.h>

#include "spattn/spattn.h"

/* The rule a call the native phase 1 accepted breaks (spec/nsa.md 3.3 rules 5
 * and 7: D and Dv multiples of 16 with 16 <= Dv <= D, no -1 slot, every
 * selected block whole inside its batch's KV), or NULL. The arguments are
 * the native ones, already checked by it, so reading the indices is safe. */
const char *spa_acl_nsas_cann_rule(const spa_tensor *q, const spa_tensor *v,
                                   const spa_tensor *topk, const spa_int_array *seq_q,
                                   const spa_int_array *seq_kv, int64_t block_size);

/* Whether the forward's outputs are all empty (spec/nsa.md 3.3 rule 2: a
 * no-op the NPU accepts before any other rule). */
bool spa_acl_nsas_noop(const spa_tensor *mx, const spa_tensor *sm, const spa_tensor *o);

#endif
