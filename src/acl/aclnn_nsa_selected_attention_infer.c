/* aclnnNsaSelectedAttentionInfer over spa_nsa_select_infer. CANN's layouts
 * become the native TND views of the same memory: BSND / BSH query
 * [B, S, ..] as [B * S, N1, D], a key / value pool [blocks, page, H] as
 * [blocks, page, N2, D], topkIndices [B, S, N2, K] (or [B, N2, K] for S = 1)
 * as [B * S, N2, K]. CANN's checks, in its order and with its codes (its
 * op_api source, which the NPU runs: a NULL required argument, a head count
 * that does not divide, a group over 16 and what its tiling refuses give
 * 561103, ACLNN_ERR_INNER_NULLPTR; dtypes, layouts and head dims 161002),
 * then the native rules on the views (indices, block table and lengths
 * checked against the cache). */
#include <string.h>

#include "aclnnop/aclnn_nsa_selected_attention_infer.h"

#include "acl_internal.h"
#include "spattn/nsa_infer.h"

/* A CANN refusal: the code it gives and its rule, after the call's executor
 * is released. */
static aclnnStatus cann_refuse(spa_acl_call *c, aclnnStatus code, const char *rule, const uint64_t *ws,
                               aclOpExecutor **executor)
{
    return spa_acl_call_refuse(c, code, rule, spa_nsa_select_infer, ws, executor);
}

aclnnStatus aclnnNsaSelectedAttentionInferGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *topkIndices,
    const aclTensor *attenMaskOptional, const aclTensor *blockTableOptional,
    const aclIntArray *actualQSeqLenOptional, const aclIntArray *actualKvSeqLenOptional, char *layoutOptional,
    int64_t numHeads, int64_t numKeyValueHeads, int64_t selectBlockSize, int64_t selectBlockCount,
    int64_t pageBlockSize, double scaleValue, int64_t sparseMode, aclTensor *output, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    (void)attenMaskOptional, (void)sparseMode; /* reserved in CANN: never read */
    spa_acl_call c;
    spa_tensor q, k, v, idx, table, out;
    spa_acl_call_begin(&c, executor);
    if (query == NULL || key == NULL || value == NULL || topkIndices == NULL || blockTableOptional == NULL ||
        actualQSeqLenOptional == NULL || actualKvSeqLenOptional == NULL || layoutOptional == NULL ||
        executor == NULL || workspaceSize == NULL || output == NULL)
        return cann_refuse(&c, ACLNN_ERR_INNER_NULLPTR, "every argument but attenMask present", workspaceSize,
                           executor);
    const spa_tensor *tq = spa_acl_call_tensor(&c, query, &q), *tk = spa_acl_call_tensor(&c, key, &k);
    const spa_tensor *tv = spa_acl_call_tensor(&c, value, &v), *ti = spa_acl_call_tensor(&c, topkIndices, &idx);
    const spa_tensor *tt = spa_acl_call_tensor(&c, blockTableOptional, &table);
    const spa_tensor *to = spa_acl_call_tensor(&c, output, &out);
    const spa_int_array *sq = spa_acl_call_array(&c, actualQSeqLenOptional);
    const spa_int_array *skv = spa_acl_call_array(&c, actualKvSeqLenOptional);
    const char *layout = layoutOptional;
    if (strcmp(layout, "BSND") != 0 && strcmp(layout, "BSH") != 0 && strcmp(layout, "TND") != 0)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "layout BSND, BSH or TND", workspaceSize, executor);
    if (numHeads == 0 || numKeyValueHeads == 0 || numHeads % numKeyValueHeads != 0)
        return cann_refuse(&c, ACLNN_ERR_INNER_NULLPTR, "numHeads a nonzero multiple of numKeyValueHeads",
                           workspaceSize, executor);
    if (numHeads / numKeyValueHeads > 16)
        return cann_refuse(&c, ACLNN_ERR_INNER_NULLPTR, "numHeads / numKeyValueHeads <= 16", workspaceSize,
                           executor);
    if (q.dtype != k.dtype || k.dtype != v.dtype || !spa_acl_is_half(q.dtype) || idx.dtype != SPA_INT32)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                           "query, key and value all FLOAT16 or all BFLOAT16, topkIndices INT32", workspaceSize,
                           executor);
    const bool bsh = strcmp(layout, "BSH") == 0, tnd = strcmp(layout, "TND") == 0;
    if (q.rank != (bsh || tnd ? 3 : 4))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "query 3-D for BSH and TND, 4-D for BSND", workspaceSize,
                           executor);
    /* the views the native operator takes */
    const int64_t batch = q.dims[0], s1 = tnd ? 0 : q.dims[1];
    if (bsh && !spa_acl_split_last(&q, numHeads))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "query H a multiple of numHeads", workspaceSize, executor);
    if (k.rank == 3 && !spa_acl_split_last(&k, numKeyValueHeads))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "key H a multiple of numKeyValueHeads", workspaceSize,
                           executor);
    if (v.rank == 3 && !spa_acl_split_last(&v, numKeyValueHeads))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "value H a multiple of numKeyValueHeads", workspaceSize,
                           executor);
    const int64_t d = q.rank == 4 ? q.dims[3] : q.dims[2];
    if (k.rank != 4 || v.rank != 4 || k.dims[3] != d || v.dims[3] > d)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "key D == query D >= value D", workspaceSize, executor);
    if (d != 192 || v.dims[3] != 128)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "query / key D 192, value D 128", workspaceSize, executor);
    if (sq->size > 3072 || skv->size > 3072)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "actualQSeqLen and actualKvSeqLen sizes <= 3072",
                           workspaceSize, executor);
    /* the kernel tiling's limits (an NPU refuses them with 561103) */
    if (pageBlockSize != 64 && pageBlockSize != 128)
        return cann_refuse(&c, ACLNN_ERR_INNER_NULLPTR, "pageBlockSize 64 or 128", workspaceSize, executor);
    if (selectBlockSize <= 0 || selectBlockSize % 16 != 0 || selectBlockSize > 128)
        return cann_refuse(&c, ACLNN_ERR_INNER_NULLPTR, "selectBlockSize a multiple of 16 up to 128", workspaceSize,
                           executor);
    if (k.dims[2] > 256 || (!tnd && batch > 3072) || (!tnd && (s1 < 1 || s1 > 4)))
        return cann_refuse(&c, ACLNN_ERR_INNER_NULLPTR, "numKeyValueHeads <= 256, B <= 3072, 1 <= S <= 4",
                           workspaceSize, executor);
    if ((q.rank == 4 ? q.dims[2] : q.dims[1]) != numHeads || k.dims[2] != numKeyValueHeads)
        return cann_refuse(&c, ACLNN_ERR_INNER_NULLPTR, "query N == numHeads, key N == numKeyValueHeads",
                           workspaceSize, executor);
    if (k.dims[1] != pageBlockSize)
        return cann_refuse(&c, ACLNN_ERR_INNER_NULLPTR, "key pages of pageBlockSize rows", workspaceSize, executor);
    if (!tnd) {
        if (!spa_acl_merge_dims(&q, 0) || !spa_acl_merge_dims(&out, 0))
            return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "query / output with mergeable B and S (a view spattn "
                               "takes without a copy)", workspaceSize, executor);
        if (bsh && !spa_acl_split_last(&out, numHeads))
            return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "output H a multiple of numHeads", workspaceSize,
                               executor);
        if (idx.rank == 4 && !spa_acl_merge_dims(&idx, 0))
            return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "topkIndices with mergeable B and S", workspaceSize,
                               executor);
        /* BSND / BSH: S queries per batch (CANN's padding queries past
         * actualQSeqLen are not reproduced) */
        for (uint64_t b = 0; b < sq->size; b++)
            if (sq->data[b] != s1)
                return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "actualQSeqLen[b] == S (BSND / BSH)",
                                   workspaceSize, executor);
    }
    if (selectBlockCount != idx.dims[idx.rank - 1])
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "selectBlockCount == the slots of topkIndices",
                           workspaceSize, executor);
    spa_status st = spa_nsa_select_infer_get_workspace_size(tq, tk, tv, ti, tt, sq, skv, scaleValue,
                                                           selectBlockSize, to, workspaceSize, c.native);
    return spa_acl_call_end(&c, st, spa_nsa_select_infer, workspaceSize, executor);
}

aclnnStatus aclnnNsaSelectedAttentionInfer(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                           const aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_nsa_select_infer);
}
