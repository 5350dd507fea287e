/* spattn aclnn compatibility layer: NsaCompressGrad (spec/nsa.md 2),
 * computed by spa_nsa_compress_grad. Note the layout comes after
 * actSeqLenType here, unlike the forward. */
#ifndef OP_API_INC_LEVEL2_ACLNN_NSA_COMPRESS_GRAD_H_
#define OP_API_INC_LEVEL2_ACLNN_NSA_COMPRESS_GRAD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaCompressGradGetWorkspaceSize(
    const aclTensor *outputGrad, const aclTensor *input, const aclTensor *weight,
    const aclIntArray *actSeqLenOptionalOptional, int64_t compressBlockSize,
    int64_t compressStride, int64_t actSeqLenType, char *layoutOptionalOptional,
    const aclTensor *inputGradOut, const aclTensor *weightGradOut, uint64_t *workspaceSize,
    aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaCompressGrad(void *workspace, uint64_t workspaceSize,
                                                     aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
