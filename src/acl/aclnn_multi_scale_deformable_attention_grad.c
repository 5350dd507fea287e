/* aclnnMultiScaleDeformableAttentionGrad over spa_msda_grad. */
#include "aclnnop/aclnn_multi_scale_deformable_attention_grad.h"

#include "acl_double.h"

aclnnStatus aclnnMultiScaleDeformableAttentionGradGetWorkspaceSize(
    const aclTensor *value, const aclTensor *spatialShape, const aclTensor *levelStartIndex,
    const aclTensor *location, const aclTensor *attnWeight, const aclTensor *gradOutput,
    aclTensor *gradValue, aclTensor *gradLocation, aclTensor *gradAttnWeight,
    uint64_t *workspaceSize, aclOpExecutor **executor)
{
    spa_acl_call c;
    spa_tensor v, shape, start, loc, attn, dy, dv, dloc, dattn;
    spa_acl_call_begin(&c, executor);
    const aclTensor *floats[] = {value, spatialShape, levelStartIndex, location, attnWeight, gradOutput, gradValue, gradLocation, gradAttnWeight};
    if (spa_acl_any_double(floats, 9))
        return spa_acl_refuse_double(&c, "aclnnMultiScaleDeformableAttentionGradGetWorkspaceSize", spa_msda_grad, workspaceSize, executor);
    spa_status st = spa_msda_grad_get_workspace_size(
        spa_acl_call_tensor(&c, value, &v), spa_acl_call_tensor(&c, spatialShape, &shape),
        spa_acl_call_tensor(&c, levelStartIndex, &start), spa_acl_call_tensor(&c, location, &loc),
        spa_acl_call_tensor(&c, attnWeight, &attn), spa_acl_call_tensor(&c, gradOutput, &dy),
        spa_acl_call_tensor(&c, gradValue, &dv), spa_acl_call_tensor(&c, gradLocation, &dloc),
        spa_acl_call_tensor(&c, gradAttnWeight, &dattn), workspaceSize, c.native);
    return spa_acl_call_end(&c, st, spa_msda_grad, workspaceSize, executor);
}

aclnnStatus aclnnMultiScaleDeformableAttentionGrad(void *workspace, uint64_t workspaceSize,
                                                   aclOpExecutor *executor, aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_msda_grad);
}
