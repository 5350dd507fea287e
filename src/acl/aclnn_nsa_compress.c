/* aclnnNsaCompress over spa_nsa_compress. */
#include "aclnnop/aclnn_nsa_compress.h"

#include "acl_internal.h"
#include "aclnn_nsa_compress_rules.h"
#include "acl_double.h"

aclnnStatus aclnnNsaCompressGetWorkspaceSize(const aclTensor *input, const aclTensor *weight,
                                             const aclIntArray *actSeqLenOptional,
                                             char *layoutOptional, int64_t compressBlockSize,
                                             int64_t compressStride, int64_t actSeqLenType,
                                             aclTensor *output, uint64_t *workspaceSize,
                                             aclOpExecutor **executor)
{
    const aclnnStatus npu = spa_acl_nsac_npu_check(
        "aclnnNsaCompressGetWorkspaceSize",
        input != NULL && weight != NULL && actSeqLenOptional != NULL && output != NULL &&
            workspaceSize != NULL && executor != NULL,
        input, compressBlockSize, compressStride);
    if (npu != ACLNN_SUCCESS)
        return npu;
    spa_acl_call c;
    spa_tensor x, w, y;
    spa_acl_call_begin(&c, executor);
    const aclTensor *floats[] = {input, weight, output};
    uint64_t probe; /* the native phase 1 sizes a call refused after into this */
    const bool dbl = spa_acl_any_double(floats, 3);
    spa_status st = spa_nsa_compress_get_workspace_size(
        spa_acl_call_tensor(&c, input, &x), spa_acl_call_tensor(&c, weight, &w),
        spa_acl_call_array(&c, actSeqLenOptional), layoutOptional, compressBlockSize,
        compressStride, actSeqLenType, spa_acl_call_tensor(&c, output, &y), spa_acl_ws_slot(dbl, workspaceSize, &probe), c.native);
    if (dbl && st != SPA_ERR_NULLPTR) /* CANN: NULL arguments (161001) first, then no double */
        return spa_acl_refuse_double(&c, "aclnnNsaCompressGetWorkspaceSize", spa_nsa_compress, workspaceSize, executor);
    return spa_acl_call_end(&c, st, spa_nsa_compress, workspaceSize, executor);
}

aclnnStatus aclnnNsaCompress(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                             aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_nsa_compress);
}
