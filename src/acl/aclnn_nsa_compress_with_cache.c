/* aclnnNsaCompressWithCache over spa_nsa_compress_with_cache. CANN's checks
 * in its order and with its codes (its op_api source and page: a NULL
 * required argument 561103, ACLNN_ERR_INNER_NULLPTR; dtypes 161002; the
 * kernel's limits 561002, the number of the page's table), then the native rules (the
 * lengths, the slots and the block table's entries, checked against the
 * cache). */
#include <string.h>

#include "aclnnop/aclnn_nsa_compress_with_cache.h"

#include "acl_internal.h"
#include "spattn/nsa_infer.h"

static aclnnStatus cann_refuse(spa_acl_call *c, aclnnStatus code, const char *rule, const uint64_t *ws,
                               aclOpExecutor **executor)
{
    return spa_acl_call_refuse(c, code, rule, spa_nsa_compress_with_cache, ws, executor);
}

aclnnStatus aclnnNsaCompressWithCacheGetWorkspaceSize(
    const aclTensor *input, const aclTensor *weight, const aclTensor *slotMapping,
    const aclIntArray *actSeqLenOptional, const aclTensor *blockTableOptional, char *layoutOptional,
    int64_t compressBlockSize, int64_t compressStride, int64_t actSeqLenType, int64_t pageBlockSize,
    aclTensor *outputCache, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    spa_acl_call c;
    spa_tensor x, w, slots, table, out;
    spa_acl_call_begin(&c, executor);
    if (input == NULL || weight == NULL || slotMapping == NULL || outputCache == NULL || workspaceSize == NULL ||
        executor == NULL)
        return cann_refuse(&c, ACLNN_ERR_INNER_NULLPTR, "input, weight, slotMapping, outputCache present",
                           workspaceSize, executor);
    const spa_tensor *tx = spa_acl_call_tensor(&c, input, &x), *tw = spa_acl_call_tensor(&c, weight, &w);
    const spa_tensor *ts = spa_acl_call_tensor(&c, slotMapping, &slots);
    const spa_tensor *tt = spa_acl_call_tensor(&c, blockTableOptional, &table);
    const spa_tensor *to = spa_acl_call_tensor(&c, outputCache, &out);
    const spa_int_array *len = spa_acl_call_array(&c, actSeqLenOptional);
    if (!spa_acl_is_half(x.dtype) || w.dtype != x.dtype || out.dtype != x.dtype || slots.dtype != SPA_INT32 ||
        (tt != NULL && table.dtype != SPA_INT32))
        return cann_refuse(&c, ACLNN_ERR_PARAM_INVALID,
                           "input, weight and outputCache all FLOAT16 or all BFLOAT16; slotMapping, blockTable INT32",
                           workspaceSize, executor);
    /* the kernel's limits: 561002 (the page names the code ACLNN_ERR_RUNTIME_ERROR, whose value is
     * 361001; 561002 is the number it gives, ACLNN_ERR_INNER_TILING_ERROR) */
    const int64_t l = compressBlockSize, d = compressStride;
    const int64_t heads = x.rank >= 3 ? x.dims[x.rank - 2] : 0, dim = x.rank >= 1 ? x.dims[x.rank - 1] : 0;
    const char *limit = NULL;
    if (l % 16 != 0 || d % 16 != 0 || l < d || l > 128)
        limit = "compressBlockSize and compressStride multiples of 16, compressStride <= compressBlockSize <= 128";
    else if (d != 16 && d != 32 && d != 48 && d != 64)
        limit = "compressStride in {16, 32, 48, 64}";
    else if (actSeqLenType != 1)
        limit = "actSeqLenType 1";
    else if (tt != NULL && pageBlockSize != 64 && pageBlockSize != 128)
        limit = "pageBlockSize 64 or 128";
    else if (dim % 16 != 0)
        limit = "headDim a multiple of 16";
    else if (heads > 50 && heads % 2 != 0)
        limit = "headNum even above 50";
    else if (tt == NULL && (layoutOptional == NULL || strcmp(layoutOptional, "TND") != 0))
        limit = "layout TND without a blockTable";
    else if (tt != NULL && x.rank == 4 && x.dims[1] != pageBlockSize)
        limit = "input pages of pageBlockSize rows";
    if (limit != NULL)
        return cann_refuse(&c, ACLNN_ERR_INNER_TILING_ERROR, limit, workspaceSize, executor);
    const spa_status st = spa_nsa_compress_with_cache_get_workspace_size(tx, tw, ts, tt, len, l, d, to, workspaceSize,
                                                                         c.native);
    return spa_acl_call_end(&c, st, spa_nsa_compress_with_cache, workspaceSize, executor);
}

aclnnStatus aclnnNsaCompressWithCache(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                      aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_nsa_compress_with_cache);
}
