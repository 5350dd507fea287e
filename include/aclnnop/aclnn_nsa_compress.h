/* spattn aclnn compatibility layer: NsaCompress (spec/nsa.md 1),
 * computed by spa_nsa_compress. Phase 1 validates and plans; phase 2 runs the
 * blocks on the stream's threads (NULL stream: the calling thread). */
#ifndef OP_API_INC_LEVEL2_ACLNN_NSA_COMPRESS_H_
#define OP_API_INC_LEVEL2_ACLNN_NSA_COMPRESS_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaCompressGetWorkspaceSize(
    const aclTensor *input, const aclTensor *weight, const aclIntArray *actSeqLenOptional,
    char *layoutOptional, int64_t compressBlockSize, int64_t compressStride,
    int64_t actSeqLenType, aclTensor *output, uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaCompress(void *workspace, uint64_t workspaceSize,
                                                 aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
