/* spattn aclnn compatibility layer: SparseFlashAttentionGrad (the gradient
 * of DeepSeek sparse attention, MLA-absorb), computed by
 * spa_dsa_sparse_attention_grad (spattn/dsa.h) with CANN's rules and codes.
 * value and dValueOut may both be NULL (CANN's KV merge: value is the key,
 * dKeyOut receives dK + dV). */
#ifndef OP_API_INC_LEVEL2_ACLNN_SPARSE_FLASH_ATTENTION_GRAD_H_
#define OP_API_INC_LEVEL2_ACLNN_SPARSE_FLASH_ATTENTION_GRAD_H_

#include <stdbool.h>

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnSparseFlashAttentionGradGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *sparseIndices,
    const aclTensor *dOut, const aclTensor *out, const aclTensor *softmaxMax, const aclTensor *softmaxSum,
    const aclTensor *actualSeqLengthsQueryOptional, const aclTensor *actualSeqLengthsKvOptional,
    const aclTensor *queryRopeOptional, const aclTensor *keyRopeOptional, double scaleValue, int64_t sparseBlockSize,
    char *layoutOptional, int64_t sparseMode, int64_t preTokens, int64_t nextTokens, bool deterministic,
    const aclTensor *dQueryOut, const aclTensor *dKeyOut, const aclTensor *dValueOut,
    const aclTensor *dQueryRopeOutOptional, const aclTensor *dKeyRopeOutOptional, uint64_t *workspaceSize,
    aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnSparseFlashAttentionGrad(void *workspace, uint64_t workspaceSize,
                                                              aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
