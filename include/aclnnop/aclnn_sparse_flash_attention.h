/* spattn aclnn compatibility layer: SparseFlashAttention (DeepSeek sparse
 * attention, MLA-absorb), computed by spa_dsa_sparse_attention
 * (spattn/dsa.h) with CANN's rules and codes. */
#ifndef OP_API_INC_LEVEL2_ACLNN_SPARSE_FLASH_ATTENTION_H_
#define OP_API_INC_LEVEL2_ACLNN_SPARSE_FLASH_ATTENTION_H_

#include <stdbool.h>

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnSparseFlashAttentionGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *sparseIndices,
    const aclTensor *blockTableOptional, const aclTensor *actualSeqLengthsQueryOptional,
    const aclTensor *actualSeqLengthsKvOptional, const aclTensor *queryRopeOptional,
    const aclTensor *keyRopeOptional, double scaleValue, int64_t sparseBlockSize, char *layoutQueryOptional,
    char *layoutKvOptional, int64_t sparseMode, int64_t preTokens, int64_t nextTokens, int64_t attentionMode,
    bool returnSoftmaxLse, const aclTensor *attentionOutOut, const aclTensor *softmaxMaxOutOptional,
    const aclTensor *softmaxSumOutOptional, uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnSparseFlashAttention(void *workspace, uint64_t workspaceSize,
                                                          aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
