/* aclnnMultiScaleDeformableAttentionGrad over spa_msda_grad. The native API
 * lifts the NPU's limits; this layer keeps CANN's rules (spec/msda.md 8.2):
 * the sizes of rule 5 are checked here first. */
#include "aclnnop/aclnn_multi_scale_deformable_attention_grad.h"

#include <string.h>

#include "acl_double.h"

/* The first CANN-only rule the inputs break, NULL when none does (or when a
 * tensor is missing or of the wrong rank: the native checks answer those
 * with the same codes). */
static const char *npu_limit(const spa_tensor *value, const spa_tensor *spatial_shape, const spa_tensor *location)
{
    if (value == NULL || spatial_shape == NULL || location == NULL || value->rank != 4 || spatial_shape->rank != 2 ||
        location->rank != 6)
        return NULL;
    if (value->dims[3] % 8 != 0)
        return "channels % 8 == 0";
    if (value->dims[3] > 256)
        return "channels <= 256";
    if (location->dims[1] >= 500000)
        return "num_queries < 500000";
    if (spatial_shape->dims[0] > 16)
        return "num_levels <= 16";
    if (value->dims[2] > 16)
        return "num_heads <= 16";
    if (location->dims[4] > 16)
        return "num_points <= 16";
    return NULL;
}

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
    uint64_t probe; /* the native phase 1 sizes a call refused after into this */
    const bool dbl = spa_acl_any_double(floats, 9);
    const spa_tensor *t[9] = {
        spa_acl_call_tensor(&c, value, &v),        spa_acl_call_tensor(&c, spatialShape, &shape),
        spa_acl_call_tensor(&c, levelStartIndex, &start), spa_acl_call_tensor(&c, location, &loc),
        spa_acl_call_tensor(&c, attnWeight, &attn), spa_acl_call_tensor(&c, gradOutput, &dy),
        spa_acl_call_tensor(&c, gradValue, &dv),   spa_acl_call_tensor(&c, gradLocation, &dloc),
        spa_acl_call_tensor(&c, gradAttnWeight, &dattn)};
    /* gradOutput as the page's table gives it, (bs, num_queries, num_heads,
     * channels), is the native (bs, num_queries, num_heads * channels) where
     * its last two dims merge into one stride; the 3-D form is taken too. */
    if (t[5] != NULL && dy.rank == 4 &&
        (dy.dims[2] == 1 || dy.dims[3] == 1 || dy.strides[2] == dy.dims[3] * dy.strides[3])) {
        const int64_t step = dy.dims[3] == 1 && dy.dims[2] != 1 ? dy.strides[2] : dy.strides[3];
        dy.dims[2] *= dy.dims[3];
        dy.strides[2] = step;
        dy.rank = 3;
    }
    bool all = workspaceSize != NULL && executor != NULL; /* NULL arguments first: 161001 */
    for (int k = 0; k < 9; k++)
        all = all && t[k] != NULL;
    const char *limit = all && !dbl ? npu_limit(t[0], t[1], t[3]) : NULL;
    if (limit != NULL) {
        memset(c.native, 0, sizeof *c.native); /* no native refusal recorded */
        aclnnStatus r = spa_acl_call_end(&c, SPA_ERR_INVALID, spa_msda_grad, workspaceSize, executor);
        spa_acl_error("aclnnMultiScaleDeformableAttentionGradGetWorkspaceSize: %d: %s (an NPU limit)", (int)r, limit);
        return r;
    }
    spa_status st = spa_msda_grad_get_workspace_size(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8],
                                                     spa_acl_ws_slot(dbl, workspaceSize, &probe), c.native);
    if (dbl && st != SPA_ERR_NULLPTR) /* CANN: NULL arguments (161001) first, then no double */
        return spa_acl_refuse_double(&c, "aclnnMultiScaleDeformableAttentionGradGetWorkspaceSize", spa_msda_grad, workspaceSize, executor);
    return spa_acl_call_end(&c, st, spa_msda_grad, workspaceSize, executor);
}

aclnnStatus aclnnMultiScaleDeformableAttentionGrad(void *workspace, uint64_t workspaceSize,
                                                   aclOpExecutor *executor, aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_msda_grad);
}
