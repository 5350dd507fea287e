/* aclnnLightningIndexer over spa_dsa_lightning_indexer. CANN's layouts
 * become the native views of the same memory: a BSND query [B, S1, N1, D]
 * (weights [B, S1, N1], outputs [B, S1, N2, K]) as [B * S1, ..], a TND one
 * as it is; a PA_BSND key is the native paged key, BSND the contiguous one,
 * TND the native TND key. The lengths tensors (INT32, prefix sums for TND)
 * are read in phase 1 into per-batch copies.
 *
 * The codes: the op_api source (what the NPU runs) answers a NULL query,
 * and returnValues without sparseValuesOut, with ge::GRAPH_FAILED
 * (0xFFFFFFFF as an aclnnStatus); its page gives 161001 for the other
 * NULL required arguments and 161002 for dtypes, formats and the listed
 * attributes; the page's constraints (key N 1, D 128, query N <= 64, page
 * size a multiple of 16 up to 1024, pre/next tokens INT64_MAX, values only
 * without PA_BSND) have no code of their own on the page and answer 161002
 * here. Not reproduced: CANN's padding queries past a BSND batch's
 * actualSeqLengthsQuery (refused, 161002). */
#include <stdint.h>
#include <string.h>

#include "aclnnop/aclnn_lightning_indexer.h"

#include "acl_internal.h"
#include "spattn/dsa.h"

#define GRAPH_FAILED ((aclnnStatus)-1) /* ge::GRAPH_FAILED, 0xFFFFFFFF */

/* A CANN refusal: the code it gives and its rule, after the call's executor
 * is released. */
static aclnnStatus cann_refuse(spa_acl_call *c, aclnnStatus code, const char *rule, const uint64_t *ws,
                               aclOpExecutor **executor)
{
    return spa_acl_call_refuse(c, code, rule, spa_dsa_lightning_indexer, ws, executor);
}

/* sparseCount: 1 .. 2048, or 3072 .. 8192 in steps of 1024. */
static bool count_ok(int64_t k)
{
    return (k >= 1 && k <= 2048) || (k >= 3072 && k <= 8192 && k % 1024 == 0);
}

/* A BSND tensor's B and S merged (false where the strides do not allow it). */
static bool merge_bs(spa_tensor *t, bool bsnd)
{
    return !bsnd || spa_acl_merge_dims(t, 0);
}

aclnnStatus aclnnLightningIndexerGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *weights,
    const aclTensor *actualSeqLengthsQueryOptional, const aclTensor *actualSeqLengthsKeyOptional,
    const aclTensor *blockTableOptional, char *layoutQueryOptional, char *layoutKeyOptional, int64_t sparseCount,
    int64_t sparseMode, int64_t preTokens, int64_t nextTokens, bool returnValues, const aclTensor *sparseIndicesOut,
    const aclTensor *sparseValuesOut, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    spa_acl_call c;
    spa_tensor q, k, w, table, idx, val;
    spa_acl_call_begin(&c, executor);
    if (query == NULL)
        return cann_refuse(&c, GRAPH_FAILED, "query present", workspaceSize, executor);
    if (returnValues && sparseValuesOut == NULL)
        return cann_refuse(&c, GRAPH_FAILED, "sparseValuesOut present when returnValues", workspaceSize, executor);
    if (key == NULL || weights == NULL || sparseIndicesOut == NULL || workspaceSize == NULL || executor == NULL)
        return cann_refuse(&c, ACLNN_ERR_PARAM_NULLPTR, "query, key, weights, sparseIndicesOut present",
                           workspaceSize, executor);
    const char *lq = layoutQueryOptional != NULL ? layoutQueryOptional : "BSND";
    const char *lk = layoutKeyOptional != NULL ? layoutKeyOptional : "BSND";
    const bool q_tnd = strcmp(lq, "TND") == 0, q_bsnd = strcmp(lq, "BSND") == 0;
    const bool k_pa = strcmp(lk, "PA_BSND") == 0, k_tnd = strcmp(lk, "TND") == 0, k_bsnd = strcmp(lk, "BSND") == 0;
    if (!q_tnd && !q_bsnd)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "layoutQuery BSND or TND", workspaceSize, executor);
    if (!k_pa && !k_tnd && !k_bsnd)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "layoutKey PA_BSND, BSND or TND", workspaceSize, executor);
    if ((q_tnd && actualSeqLengthsQueryOptional == NULL) ||
        ((k_tnd || k_pa) && actualSeqLengthsKeyOptional == NULL) || (k_pa && blockTableOptional == NULL))
        return cann_refuse(&c, ACLNN_ERR_PARAM_NULLPTR,
                           "actualSeqLengthsQuery for TND query, actualSeqLengthsKey for TND / PA_BSND key, "
                           "blockTable for PA_BSND",
                           workspaceSize, executor);
    const spa_tensor *tq = spa_acl_call_tensor(&c, query, &q), *tk = spa_acl_call_tensor(&c, key, &k);
    const spa_tensor *tw = spa_acl_call_tensor(&c, weights, &w), *ti = spa_acl_call_tensor(&c, sparseIndicesOut, &idx);
    const spa_tensor *tt = k_pa ? spa_acl_call_tensor(&c, blockTableOptional, &table) : NULL;
    const spa_tensor *tv = returnValues ? spa_acl_call_tensor(&c, sparseValuesOut, &val) : NULL;
    bool ok_q, ok_k;
    const spa_int_array *sq = spa_acl_call_tensor_lengths(&c, actualSeqLengthsQueryOptional, q_tnd, &ok_q);
    const spa_int_array *skv = spa_acl_call_tensor_lengths(&c, actualSeqLengthsKeyOptional, k_tnd, &ok_k);
    if (!ok_q || !ok_k)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                           "actualSeqLengths INT32 of shape (B,), non-decreasing prefix sums for TND",
                           workspaceSize, executor);
    if (!spa_acl_is_half(q.dtype) || k.dtype != q.dtype)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "query and key both FLOAT16 or both BFLOAT16",
                           workspaceSize, executor);
    if (w.dtype != SPA_FLOAT32 && w.dtype != q.dtype)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "weights FLOAT32 or the dtype of query", workspaceSize,
                           executor);
    if (idx.dtype != SPA_INT32 || (returnValues && val.dtype != q.dtype))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "sparseIndicesOut INT32, sparseValuesOut the dtype of query",
                           workspaceSize, executor);
    if (!count_ok(sparseCount))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "sparseCount in [1, 2048] or 3072 .. 8192 by 1024",
                           workspaceSize, executor);
    if (sparseMode != 0 && sparseMode != 3)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "sparseMode 0 or 3", workspaceSize, executor);
    if (preTokens != INT64_MAX || nextTokens != INT64_MAX)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "preTokens and nextTokens 2^63 - 1", workspaceSize,
                           executor);
    if (returnValues && k_pa)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "returnValues only without a PA_BSND key", workspaceSize,
                           executor);
    if (q.rank != (q_tnd ? 3 : 4) || w.rank != (q_tnd ? 2 : 3) || idx.rank != (q_tnd ? 3 : 4) ||
        k.rank != (k_tnd ? 3 : 4) || (returnValues && val.rank != idx.rank))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                           "ranks: query (B,S1,N1,D) / (T1,N1,D), weights (B,S1,N1) / (T1,N1), key 4-D or "
                           "(T2,N2,D), outputs (B,S1,N2,K) / (T1,N2,K)",
                           workspaceSize, executor);
    const int64_t n1 = q.dims[q.rank - 2], d = q.dims[q.rank - 1], n2 = k.dims[k.rank - 2];
    if (n2 != 1 || d != 128 || k.dims[k.rank - 1] != 128)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "key N 1, query and key D 128", workspaceSize, executor);
    if (n1 < 1 || n1 > 64)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "query N 1..64", workspaceSize, executor);
    if (k_pa && (k.dims[1] % 16 != 0 || k.dims[1] < 16 || k.dims[1] > 1024))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "blockSize a multiple of 16 up to 1024", workspaceSize,
                           executor);
    if (idx.dims[idx.rank - 1] != sparseCount)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "sparseIndicesOut's last dim == sparseCount", workspaceSize,
                           executor);
    const int64_t batch = q_tnd ? (int64_t)sq->size : q.dims[0];
    if ((skv != NULL && (int64_t)skv->size != batch) || (k_bsnd && k.dims[0] != batch) ||
        (k_pa && table.dims[0] != batch))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                           "one batch count: query's B (or actualSeqLengthsQuery's), actualSeqLengthsKey's, key's B "
                           "(BSND), blockTable's rows (PA_BSND)",
                           workspaceSize, executor);
    if (q_bsnd) {
        const int64_t s1 = q.dims[1];
        if (sq != NULL)
            for (uint64_t b = 0; b < sq->size; b++)
                if (sq->data[b] != s1)
                    return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                                       "actualSeqLengthsQuery[b] == S1 (BSND: padding queries are not reproduced)",
                                       workspaceSize, executor);
        if (!merge_bs(&q, true) || !merge_bs(&w, true) || !merge_bs(&idx, true) || (tv != NULL && !merge_bs(&val, true)))
            return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                               "query / weights / outputs with mergeable B and S (a view spattn takes without a copy)",
                               workspaceSize, executor);
    }
    spa_status st = spa_dsa_lightning_indexer_get_workspace_size(tq, tk, tw, tt, sq, skv, sparseCount, sparseMode, ti,
                                                                 tv, workspaceSize, c.native);
    return spa_acl_call_end(&c, st, spa_dsa_lightning_indexer, workspaceSize, executor);
}

aclnnStatus aclnnLightningIndexer(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                  const aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_dsa_lightning_indexer);
}
