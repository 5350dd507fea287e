/* aclnnNsaCompressGrad over spa_nsa_compress_grad. */
#include "aclnnop/aclnn_nsa_compress_grad.h"

#include "acl_internal.h"
#include "aclnn_nsa_compress_rules.h"
#include "acl_double.h"

aclnnStatus aclnnNsaCompressGradGetWorkspaceSize(
    const aclTensor *outputGrad, const aclTensor *input, const aclTensor *weight,
    const aclIntArray *actSeqLenOptionalOptional, int64_t compressBlockSize,
    int64_t compressStride, int64_t actSeqLenType, char *layoutOptionalOptional,
    const aclTensor *inputGradOut, const aclTensor *weightGradOut, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    const aclnnStatus npu = spa_acl_nsac_npu_check(
        "aclnnNsaCompressGradGetWorkspaceSize",
        outputGrad != NULL && input != NULL && weight != NULL && actSeqLenOptionalOptional != NULL &&
            inputGradOut != NULL && weightGradOut != NULL && workspaceSize != NULL && executor != NULL,
        input, compressBlockSize, compressStride);
    if (npu != ACLNN_SUCCESS)
        return npu;
    spa_acl_call c;
    spa_tensor dy, x, w, dx, dw;
    spa_acl_call_begin(&c, executor);
    const aclTensor *floats[] = {outputGrad, input, weight, inputGradOut, weightGradOut};
    uint64_t probe; /* the native phase 1 sizes a call refused after into this */
    const bool dbl = spa_acl_any_double(floats, 5);
    spa_status st = spa_nsa_compress_grad_get_workspace_size(
        spa_acl_call_tensor(&c, outputGrad, &dy), spa_acl_call_tensor(&c, input, &x), spa_acl_call_tensor(&c, weight, &w),
        spa_acl_call_array(&c, actSeqLenOptionalOptional), compressBlockSize, compressStride,
        actSeqLenType, layoutOptionalOptional, spa_acl_call_tensor(&c, inputGradOut, &dx),
        spa_acl_call_tensor(&c, weightGradOut, &dw), spa_acl_ws_slot(dbl, workspaceSize, &probe), c.native);
    if (dbl && st != SPA_ERR_NULLPTR) /* CANN: NULL arguments (161001) first, then no double */
        return spa_acl_refuse_double(&c, "aclnnNsaCompressGradGetWorkspaceSize", spa_nsa_compress_grad, workspaceSize, executor);
    return spa_acl_call_end(&c, st, spa_nsa_compress_grad, workspaceSize, executor);
}

aclnnStatus aclnnNsaCompressGrad(void *workspace, uint64_t workspaceSize,
                                 aclOpExecutor *executor, aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_nsa_compress_grad);
}
