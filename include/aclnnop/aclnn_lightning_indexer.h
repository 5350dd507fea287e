/* spattn aclnn compatibility layer: LightningIndexer (DeepSeek sparse
 * attention's indexer), computed by spa_dsa_lightning_indexer (spattn/dsa.h)
 * with CANN's rules and codes. */
#ifndef OP_API_INC_LEVEL2_ACLNN_LIGHTNING_INDEXER_H_
#define OP_API_INC_LEVEL2_ACLNN_LIGHTNING_INDEXER_H_

#include <stdbool.h>

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnLightningIndexerGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *weights,
    const aclTensor *actualSeqLengthsQueryOptional, const aclTensor *actualSeqLengthsKeyOptional,
    const aclTensor *blockTableOptional, char *layoutQueryOptional, char *layoutKeyOptional, int64_t sparseCount,
    int64_t sparseMode, int64_t preTokens, int64_t nextTokens, bool returnValues, const aclTensor *sparseIndicesOut,
    const aclTensor *sparseValuesOut, uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnLightningIndexer(void *workspace, uint64_t workspaceSize,
                                                      aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
