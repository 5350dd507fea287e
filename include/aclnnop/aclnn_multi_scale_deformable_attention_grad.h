/* spattn aclnn compatibility layer: MultiScaleDeformableAttentionGrad
 * (spec/msda.md 6), computed by spa_msda_grad. */
#ifndef OP_API_INC_LEVEL2_ACLNN_MULTI_SCALE_DEFORMABLE_ATTENTION_GRAD_H_
#define OP_API_INC_LEVEL2_ACLNN_MULTI_SCALE_DEFORMABLE_ATTENTION_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMultiScaleDeformableAttentionGradGetWorkspaceSize(
    const aclTensor *value, const aclTensor *spatialShape, const aclTensor *levelStartIndex,
    const aclTensor *location, const aclTensor *attnWeight, const aclTensor *gradOutput,
    aclTensor *gradValue, aclTensor *gradLocation, aclTensor *gradAttnWeight,
    uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnMultiScaleDeformableAttentionGrad(void *workspace,
                                                                       uint64_t workspaceSize,
                                                                       aclOpExecutor *executor,
                                                                       aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
