/* aclnnNsaCompressAttentionInfer over spa_nsa_compress_attention_infer.
 * CANN's layouts become the native views of the same memory: BSND query /
 * output [B, S, N, D] as [B * S, N, D], the key / value pools [blocks, page,
 * N2 * D] as [blocks, page, N2, D], topKOutput [B, S, N2, K] as
 * [B * S, N2, K]. CANN's checks, with the codes its page gives (161001 for a
 * missing required argument, 161002 for dtypes and layouts) and 561002
 * (ACLNN_ERR_INNER_TILING_ERROR) for what its tiling refuses; then the
 * native rules on the views.
 *
 * CANN's two scenarios (its page, "Constraints"): multi-token where
 * actualQSeqLen (each 1..4) and actualSelKvSeqLen are given and every batch
 * has C_b = (L_b - l) / d + 1 compressed keys, the causal rule applied when
 * attentionMask is given (its contents are never read); otherwise
 * single-token, one query per batch seeing all its compressed keys. Where
 * CANN would fall back to single-token on a query tensor holding more than
 * one query per batch, this layer refuses (161002): the fallback computes
 * rows nobody asked for. topKMask and sparseMode are reserved. */
#include <string.h>

#include "aclnnop/aclnn_nsa_compress_attention_infer.h"

#include "acl_internal.h"
#include "spattn/nsa_infer.h"

static aclnnStatus cann_refuse(spa_acl_call *c, aclnnStatus code, const char *rule, const uint64_t *ws,
                               aclOpExecutor **executor)
{
    return spa_acl_call_refuse(c, code, rule, spa_nsa_compress_attention_infer, ws, executor);
}

static bool in_steps(int64_t x, int64_t step, int64_t max)
{
    return x >= step && x <= max && x % step == 0;
}

/* CANN's multi-token scenario (see above). */
static bool multi_token(const spa_int_array *sq, const spa_int_array *scmp, const spa_int_array *ssel, int64_t l,
                        int64_t d, int64_t batches)
{
    if (sq == NULL || ssel == NULL || (int64_t)sq->size != batches || ssel->size != scmp->size)
        return false;
    for (uint64_t b = 0; b < sq->size; b++)
        if (sq->data[b] < 1 || sq->data[b] > 4 || ssel->data[b] < l ||
            scmp->data[b] != (ssel->data[b] - l) / d + 1)
            return false;
    return true;
}

aclnnStatus aclnnNsaCompressAttentionInferGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *attentionMaskOptional,
    const aclTensor *blockTableOptional, const aclIntArray *actualQSeqLenOptional,
    const aclIntArray *actualCmpKvSeqLenOptional, const aclIntArray *actualSelKvSeqLenOptional,
    const aclTensor *topKMaskOptional, int64_t numHeads, int64_t numKeyValueHeads, int64_t selectBlockSize,
    int64_t selectBlockCount, int64_t compressBlockSize, int64_t compressBlockStride, double scaleValue,
    char *layoutOptional, int64_t pageBlockSize, int64_t sparseMode, const aclTensor *output,
    const aclTensor *topKOutput, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    (void)topKMaskOptional, (void)sparseMode; /* reserved in CANN: never read */
    spa_acl_call c;
    spa_tensor q, k, v, table, out, topk;
    spa_acl_call_begin(&c, executor);
    if (query == NULL || key == NULL || value == NULL || blockTableOptional == NULL ||
        actualCmpKvSeqLenOptional == NULL || output == NULL || topKOutput == NULL || workspaceSize == NULL ||
        executor == NULL)
        return cann_refuse(&c, ACLNN_ERR_PARAM_NULLPTR,
                           "query, key, value, blockTable, actualCmpKvSeqLen, output, topKOutput present",
                           workspaceSize, executor);
    const spa_tensor *tq = spa_acl_call_tensor(&c, query, &q), *tk = spa_acl_call_tensor(&c, key, &k);
    const spa_tensor *tv = spa_acl_call_tensor(&c, value, &v), *tt = spa_acl_call_tensor(&c, blockTableOptional, &table);
    const spa_tensor *to = spa_acl_call_tensor(&c, output, &out), *tk2 = spa_acl_call_tensor(&c, topKOutput, &topk);
    const spa_int_array *sq = spa_acl_call_array(&c, actualQSeqLenOptional);
    const spa_int_array *scmp = spa_acl_call_array(&c, actualCmpKvSeqLenOptional);
    const spa_int_array *ssel = spa_acl_call_array(&c, actualSelKvSeqLenOptional);
    const char *layout = layoutOptional != NULL ? layoutOptional : "BSND";
    const bool tnd = strcmp(layout, "TND") == 0;
    if (!tnd && strcmp(layout, "BSND") != 0)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "layout TND or BSND", workspaceSize, executor);
    if (q.dtype != k.dtype || k.dtype != v.dtype || out.dtype != q.dtype ||
        (q.dtype != SPA_FLOAT16 && q.dtype != SPA_BFLOAT16) || table.dtype != SPA_INT32 || topk.dtype != SPA_INT32)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                           "query, key, value and output all FLOAT16 or all BFLOAT16; blockTable and topKOutput "
                           "INT32",
                           workspaceSize, executor);
    if (q.rank != (tnd ? 3 : 4) || out.rank != q.rank || k.rank != 3 || v.rank != 3 || table.rank != 2)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                           "query / output 3-D (TND) or 4-D (BSND), key / value [blocks, page, N * D], "
                           "blockTable 2-D",
                           workspaceSize, executor);
    /* the tiling's limits */
    if (numHeads <= 0 || numKeyValueHeads <= 0 || numHeads % numKeyValueHeads != 0 ||
        numHeads / numKeyValueHeads > 128 || 128 % (numHeads / numKeyValueHeads) != 0)
        return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR,
                           "numHeads a multiple of numKeyValueHeads, the group G <= 128 with 128 % G == 0",
                           workspaceSize, executor);
    if (!in_steps(compressBlockStride, 16, 64) || !in_steps(compressBlockSize, 16, 128) ||
        !in_steps(selectBlockSize, 16, 128) || compressBlockSize < compressBlockStride ||
        selectBlockSize < compressBlockSize || selectBlockSize % compressBlockStride != 0)
        return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR,
                           "compressBlockStride 16..64, compressBlockSize and selectBlockSize 16..128 (steps of "
                           "16), stride <= compressBlockSize <= selectBlockSize, selectBlockSize a multiple of the "
                           "stride",
                           workspaceSize, executor);
    if (pageBlockSize <= 0 || pageBlockSize > 128 || pageBlockSize % 16 != 0 || k.dims[1] != pageBlockSize ||
        v.dims[1] != pageBlockSize)
        return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR,
                           "pageBlockSize a multiple of 16 up to 128, the key / value pages of it", workspaceSize,
                           executor);
    const int64_t batch = (int64_t)scmp->size;
    if (batch < 1 || batch > 10000 || table.dims[0] != batch)
        return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR,
                           "B (actualCmpKvSeqLen's size, blockTable's rows) in 1..10000", workspaceSize, executor);
    if (!spa_acl_split_last(&k, numKeyValueHeads) || !spa_acl_split_last(&v, numKeyValueHeads))
        return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR, "key / value H a multiple of numKeyValueHeads",
                           workspaceSize, executor);
    const int64_t d = q.dims[q.rank - 1], dv = v.dims[3];
    if (k.dims[3] != d || d > 192 || dv > 128 || dv > d)
        return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR, "key D == query D <= 192, value D <= 128 and <= D",
                           workspaceSize, executor);
    if (q.dims[q.rank - 2] != numHeads)
        return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR, "query N == numHeads", workspaceSize, executor);
    int64_t blocks_max = 0;
    for (int64_t b = 0; b < batch; b++) {
        const int64_t cb = scmp->data[b];
        if (cb < 0 || cb > 8192)
            return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR, "actualCmpKvSeqLen[b] in 0..8192", workspaceSize,
                               executor);
        const int64_t nb = cb == 0 ? 0 : ((cb - 1) * compressBlockStride + compressBlockSize + selectBlockSize - 1) /
                                             selectBlockSize;
        blocks_max = nb > blocks_max ? nb : blocks_max;
    }
    if (blocks_max > 4096 || selectBlockCount < 1 || selectBlockCount > blocks_max)
        return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR,
                           "ceil(((C - 1) d + l) / l') <= 4096 and 1 <= selectBlockCount <= it", workspaceSize,
                           executor);
    const bool multi = multi_token(sq, scmp, ssel, compressBlockSize, compressBlockStride, batch);
    const int64_t s1 = tnd ? 0 : q.dims[1];
    if (!tnd) {
        if (!spa_acl_merge_dims(&q, 0) || !spa_acl_merge_dims(&out, 0) ||
            (topk.rank == 4 && !spa_acl_merge_dims(&topk, 0)))
            return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                               "query / output / topKOutput with mergeable B and S (a view spattn takes without a "
                               "copy)",
                               workspaceSize, executor);
        if (s1 < 1 || s1 > 4)
            return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR, "query S in 1..4", workspaceSize, executor);
        if (multi)
            for (int64_t b = 0; b < batch; b++)
                if (sq->data[b] != s1)
                    return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID, "actualQSeqLen[b] == S (BSND)", workspaceSize,
                                       executor);
    }
    if (!multi && q.dims[0] != batch)
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                           "one query per batch unless the multi-token arguments hold (actualQSeqLen 1..4 and "
                           "actualSelKvSeqLen with C_b = (L_b - l) / d + 1); CANN would fall back to one query",
                           workspaceSize, executor);
    spa_status st = spa_nsa_compress_attention_infer_get_workspace_size(
        tq, tk, tv, tt, multi ? sq : NULL, scmp, multi ? ssel : NULL, scaleValue,
        multi && attentionMaskOptional != NULL ? 1 : 0, compressBlockSize, compressBlockStride, selectBlockSize,
        selectBlockCount, to, tk2, workspaceSize, c.native);
    return spa_acl_call_end(&c, st, spa_nsa_compress_attention_infer, workspaceSize, executor);
}

aclnnStatus aclnnNsaCompressAttentionInfer(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                           aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_nsa_compress_attention_infer);
}
