/* aclnnMultiScaleDeformableAttnFunction over spa_msda. The native API lifts
 * the NPU's limits; this layer keeps CANN's rules (spec/msda.md 8.1): the
 * single dtype of rule 2 and the sizes of rule 5 are checked here first. */
#include "aclnnop/aclnn_multi_scale_deformable_attn_function.h"

#include <string.h>

#include "acl_double.h"

/* The first CANN-only rule the inputs break, NULL when none does (or when a
 * tensor is missing or of the wrong rank: the native checks answer those
 * with the same codes). */
static const char *npu_limit(const spa_tensor *value, const spa_tensor *location, const spa_tensor *attn_weight,
                             const spa_tensor *output)
{
    if (value == NULL || location == NULL || attn_weight == NULL || output == NULL)
        return NULL;
    if (location->dtype != value->dtype)
        return "location dtype == value dtype";
    if (attn_weight->dtype != value->dtype)
        return "attnWeight dtype == value dtype";
    if (output->dtype != value->dtype)
        return "output dtype == value dtype";
    if (value->rank != 4 || location->rank != 6)
        return NULL;
    if (location->dims[1] < 32)
        return "num_queries >= 32";
    if (location->dims[2] > 16)
        return "num_heads <= 16";
    if (location->dims[3] > 16)
        return "num_levels <= 16";
    if (location->dims[4] > 16)
        return "num_points <= 16";
    if (value->dims[3] % 8 != 0)
        return "channels % 8 == 0";
    if (value->dims[3] > 256)
        return "channels <= 256";
    return NULL;
}

aclnnStatus aclnnMultiScaleDeformableAttnFunctionGetWorkspaceSize(
    const aclTensor *value, const aclTensor *spatialShape, const aclTensor *levelStartIndex,
    const aclTensor *location, const aclTensor *attnWeight, aclTensor *output,
    uint64_t *workspaceSize, aclOpExecutor **executor)
{
    spa_acl_call c;
    spa_tensor v, shape, start, loc, attn, out;
    spa_acl_call_begin(&c, executor);
    const aclTensor *floats[] = {value, spatialShape, levelStartIndex, location, attnWeight, output};
    uint64_t probe; /* the native phase 1 sizes a call refused after into this */
    const bool dbl = spa_acl_any_double(floats, 6);
    const spa_tensor *tv = spa_acl_call_tensor(&c, value, &v), *tshape = spa_acl_call_tensor(&c, spatialShape, &shape);
    const spa_tensor *tstart = spa_acl_call_tensor(&c, levelStartIndex, &start);
    const spa_tensor *tloc = spa_acl_call_tensor(&c, location, &loc), *tattn = spa_acl_call_tensor(&c, attnWeight, &attn);
    const spa_tensor *tout = spa_acl_call_tensor(&c, output, &out);
    const char *limit = NULL;
    if (!dbl && tshape != NULL && tstart != NULL && workspaceSize != NULL && executor != NULL)
        limit = npu_limit(tv, tloc, tattn, tout); /* NULL arguments first: 161001 */
    if (limit != NULL) {
        memset(c.native, 0, sizeof *c.native); /* no native refusal recorded */
        aclnnStatus r = spa_acl_call_end(&c, SPA_ERR_INVALID, spa_msda, workspaceSize, executor);
        spa_acl_error("aclnnMultiScaleDeformableAttnFunctionGetWorkspaceSize: %d: %s (an NPU limit)", (int)r, limit);
        return r;
    }
    spa_status st = spa_msda_get_workspace_size(tv, tshape, tstart, tloc, tattn, tout, spa_acl_ws_slot(dbl, workspaceSize, &probe), c.native);
    if (dbl && st != SPA_ERR_NULLPTR) /* CANN: NULL arguments (161001) first, then no double */
        return spa_acl_refuse_double(&c, "aclnnMultiScaleDeformableAttnFunctionGetWorkspaceSize", spa_msda, workspaceSize, executor);
    return spa_acl_call_end(&c, st, spa_msda, workspaceSize, executor);
}

aclnnStatus aclnnMultiScaleDeformableAttnFunction(void *workspace, uint64_t workspaceSize,
                                                  aclOpExecutor *executor, aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_msda);
}
