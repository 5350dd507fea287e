/* What the aclnn layer (src/acl/) needs of NsaCompressAttention beyond the
 * public API: phase 1 of an executor that writes softmaxMax / softmaxSum in
 * CANN's physical order, per batch [N1][S_b][8] from element qs_b*N1*8 of
 * a dense [T1,N1,8] tensor (docs/nsa_compress_attention.md 6, erratum 4).
 * The same arguments and rules as spa_nsa_compress_attention_get_workspace_size,
 * plus: both statistics tensors dense. Phase 2 is spa_nsa_compress_attention. */
#ifndef SPA_NSA_CATTN_ACL_H
#define SPA_NSA_CATTN_ACL_H

#include "spattn/types.h"

spa_status spa_nsa_cattn_acl_phase1(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *atten_mask, const spa_tensor *topk_mask, const spa_int_array *sq,
    const spa_int_array *scmp, const spa_int_array *ssel, double scale_value, int64_t head_num,
    const char *input_layout, int64_t sparse_mode, int64_t l, int64_t st, int64_t ls, int64_t kc,
    const spa_tensor *mx, const spa_tensor *sm, const spa_tensor *o, const spa_tensor *topk,
    uint64_t *workspace_size, spa_executor *executor);

#endif
