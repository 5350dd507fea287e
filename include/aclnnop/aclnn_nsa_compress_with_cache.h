/* spattn aclnn compatibility layer: NsaCompressWithCache (the compression of
 * a KV cache's newest window), computed by spa_nsa_compress_with_cache
 * (spattn/nsa_infer.h) with CANN's rules and codes. */
#ifndef OP_API_INC_LEVEL2_ACLNN_NSA_COMPRESS_WITH_CACHE_H_
#define OP_API_INC_LEVEL2_ACLNN_NSA_COMPRESS_WITH_CACHE_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaCompressWithCacheGetWorkspaceSize(
    const aclTensor *input, const aclTensor *weight, const aclTensor *slotMapping,
    const aclIntArray *actSeqLenOptional, const aclTensor *blockTableOptional, char *layoutOptional,
    int64_t compressBlockSize, int64_t compressStride, int64_t actSeqLenType, int64_t pageBlockSize,
    aclTensor *outputCache, uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaCompressWithCache(void *workspace, uint64_t workspaceSize,
                                                          aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
