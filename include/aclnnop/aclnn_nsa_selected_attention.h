/* spattn aclnn compatibility layer: NsaSelectedAttention
 * (spec/nsa.md 3), computed by spa_nsa_select. */
#ifndef OP_API_INC_LEVEL2_ACLNN_NSA_SELECTED_ATTENTION_H_
#define OP_API_INC_LEVEL2_ACLNN_NSA_SELECTED_ATTENTION_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaSelectedAttentionGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value,
    const aclTensor *topkIndices, const aclTensor *attenMaskOptional,
    const aclIntArray *actualSeqQLenOptional, const aclIntArray *actualSeqKvLenOptional,
    double scaleValue, int64_t headNum, char *inputLayout, int64_t sparseMode,
    int64_t selectedBlockSize, int64_t selectedBlockCount, const aclTensor *softmaxMaxOut,
    const aclTensor *softmaxSumOut, const aclTensor *attentionOut, uint64_t *workspaceSize,
    aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaSelectedAttention(void *workspace, uint64_t workspaceSize,
                                                          aclOpExecutor *executor,
                                                          const aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
