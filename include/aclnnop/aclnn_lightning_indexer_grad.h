/* spattn aclnn compatibility layer: LightningIndexerGrad (the gradient of
 * DeepSeek sparse attention's indexer scores at the keys the indexer
 * selected), computed by spa_dsa_lightning_indexer_grad (spattn/dsa.h) with
 * CANN's rules and codes. dy and sparseIndices are (B, S1, K) / (T1, K),
 * sparseIndices INT32; headNum, preTokens and nextTokens are not read (as
 * CANN's tiling); `deterministic` either way (spattn always is; CANN's
 * Dec 2025 op_api header spells it `determinstic`). The rules and the
 * readings taken where CANN's sources disagree: docs/aclnn.md. */
#ifndef OP_API_INC_LEVEL2_ACLNN_LIGHTNING_INDEXER_GRAD_H_
#define OP_API_INC_LEVEL2_ACLNN_LIGHTNING_INDEXER_GRAD_H_

#include <stdbool.h>

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnLightningIndexerGradGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *dy, const aclTensor *sparseIndices,
    const aclTensor *weights, const aclTensor *actualSeqQLenOptional, const aclTensor *actualSeqKvLenOptional,
    int64_t headNum, char *inputLayout, int64_t sparseMode, int64_t preTokens, int64_t nextTokens,
    bool deterministic, const aclTensor *dqOut, const aclTensor *dkOut, const aclTensor *dweightsOut,
    uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnLightningIndexerGrad(void *workspace, uint64_t workspaceSize,
                                                          aclOpExecutor *executor, const aclrtStream stream);

#ifdef __cplusplus
}
#endif
#endif
