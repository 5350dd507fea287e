/* spattn aclnn compatibility layer: NsaSelectedAttentionInfer (selected
 * attention on a paged KV cache), computed by spa_nsa_select_infer
 * (spattn/nsa_infer.h) with CANN's rules and codes. */
#ifndef OP_API_INC_LEVEL2_ACLNN_NSA_SELECTED_ATTENTION_INFER_H_
#define OP_API_INC_LEVEL2_ACLNN_NSA_SELECTED_ATTENTION_INFER_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaSelectedAttentionInferGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *topkIndices,
    const aclTensor *attenMaskOptional, const aclTensor *blockTableOptional,
    const aclIntArray *actualQSeqLenOptional, const aclIntArray *actualKvSeqLenOptional, char *layoutOptional,
    int64_t numHeads, int64_t numKeyValueHeads, int64_t selectBlockSize, int64_t selectBlockCount,
    int64_t pageBlockSize, double scaleValue, int64_t sparseMode, aclTensor *output, uint64_t *workspaceSize,
    aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnNsaSelectedAttentionInfer(void *workspace, uint64_t workspaceSize,
                                                               aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
