/* spattn aclnn compatibility layer: MultiScaleDeformableAttnFunction
 * (spec/msda.md 5), computed by spa_msda. */
#ifndef OP_API_INC_LEVEL2_ACLNN_MULTI_SCALE_DEFORMABLE_ATTN_FUNCTION_H_
#define OP_API_INC_LEVEL2_ACLNN_MULTI_SCALE_DEFORMABLE_ATTN_FUNCTION_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnMultiScaleDeformableAttnFunctionGetWorkspaceSize(
    const aclTensor *value, const aclTensor *spatialShape, const aclTensor *levelStartIndex,
    const aclTensor *location, const aclTensor *attnWeight, aclTensor *output,
    uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnMultiScaleDeformableAttnFunction(void *workspace,
                                                                      uint64_t workspaceSize,
                                                                      aclOpExecutor *executor,
                                                                      aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
