/* aclnnMultiScaleDeformableAttnFunction over spa_msda. */
#include "aclnnop/aclnn_multi_scale_deformable_attn_function.h"

#include "acl_double.h"

aclnnStatus aclnnMultiScaleDeformableAttnFunctionGetWorkspaceSize(
    const aclTensor *value, const aclTensor *spatialShape, const aclTensor *levelStartIndex,
    const aclTensor *location, const aclTensor *attnWeight, aclTensor *output,
    uint64_t *workspaceSize, aclOpExecutor **executor)
{
    spa_acl_call c;
    spa_tensor v, shape, start, loc, attn, out;
    spa_acl_call_begin(&c, executor);
    const aclTensor *floats[] = {value, spatialShape, levelStartIndex, location, attnWeight, output};
    if (spa_acl_any_double(floats, 6))
        return spa_acl_refuse_double(&c, "aclnnMultiScaleDeformableAttnFunctionGetWorkspaceSize", spa_msda, workspaceSize, executor);
    spa_status st = spa_msda_get_workspace_size(
        spa_acl_call_tensor(&c, value, &v), spa_acl_call_tensor(&c, spatialShape, &shape),
        spa_acl_call_tensor(&c, levelStartIndex, &start), spa_acl_call_tensor(&c, location, &loc),
        spa_acl_call_tensor(&c, attnWeight, &attn), spa_acl_call_tensor(&c, output, &out), workspaceSize, c.native);
    return spa_acl_call_end(&c, st, spa_msda, workspaceSize, executor);
}

aclnnStatus aclnnMultiScaleDeformableAttnFunction(void *workspace, uint64_t workspaceSize,
                                                  aclOpExecutor *executor, aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_msda);
}
