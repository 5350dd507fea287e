/* spattn aclnn compatibility layer: NsaCompressAttention
 * (docs/nsa_compress_attention.md), computed by spa_nsa_compress_attention
 * with CANN's limits; softmaxMax / softmaxSum in CANN's physical order. */
#ifndef OP_API_INC_LEVEL2_ACLNN_NSA_COMPRESS_ATTENTION_H_
#define OP_API_INC_LEVEL2_ACLNN_NSA_COMPRESS_ATTENTION_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaCompressAttentionGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value,
    const aclTensor *attenMaskOptional, const aclTensor *topkMaskOptional,
    const aclIntArray *actualSeqQLenOptional, const aclIntArray *actualCmpSeqKvLenOptional,
    const aclIntArray *actualSelSeqKvLenOptional, double scaleValue, int64_t headNum,
    char *inputLayout, int64_t sparseMode, int64_t compressBlockSize, int64_t compressStride,
    int64_t selectBlockSize, int64_t selectBlockCount, const aclTensor *softmaxMaxOut,
    const aclTensor *softmaxSumOut, const aclTensor *attentionOutOut,
    const aclTensor *topkIndicesOut, uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaCompressAttention(void *workspace, uint64_t workspaceSize,
                                                          aclOpExecutor *executor,
                                                          const aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
