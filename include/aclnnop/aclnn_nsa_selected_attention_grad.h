/* spattn aclnn compatibility layer: NsaSelectedAttentionGrad
 * (spec/nsa.md 4), computed by spa_nsa_select_grad. Note the attribute order
 * differs from the forward. */
#ifndef OP_API_INC_LEVEL2_ACLNN_NSA_SELECTED_ATTENTION_GRAD_H_
#define OP_API_INC_LEVEL2_ACLNN_NSA_SELECTED_ATTENTION_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaSelectedAttentionGradGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value,
    const aclTensor *attentionOut, const aclTensor *attentionOutGrad,
    const aclTensor *softmaxMax, const aclTensor *softmaxSum, const aclTensor *topkIndices,
    const aclIntArray *actualSeqQLenOptional, const aclIntArray *actualSeqKvLenOptional,
    const aclTensor *attenMaskOptional, double scaleValue, int64_t selectedBlockSize,
    int64_t selectedBlockCount, int64_t headNum, char *inputLayout, int64_t sparseMode,
    const aclTensor *dqOut, const aclTensor *dkOut, const aclTensor *dvOut,
    uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaSelectedAttentionGrad(void *workspace,
                                                              uint64_t workspaceSize,
                                                              aclOpExecutor *executor,
                                                              aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
