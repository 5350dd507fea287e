/* aclnnNsaCompressAttention over spa_nsa_compress_attention: the native
 * rules first (NULL and invalid descriptors keep the native codes), then
 * CANN's limits (docs/nsa_compress_attention.md 4), and the softmax
 * statistics in CANN's physical order (nsa_cattn_acl.h). */
#include "aclnnop/aclnn_nsa_compress_attention.h"

#include "acl_double.h"
#include "acl_internal.h"
#include "nsa_cattn_acl.h"

static bool in_steps(int64_t x, int64_t lo, int64_t hi, int64_t step)
{
    return x >= lo && x <= hi && x % step == 0;
}

/* CANN's limits on arguments the native phase 1 accepted (so the arrays are
 * checked cumulative ends). NULL: none broken. */
static const char *cann_rule(const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                             const spa_int_array *sq, const spa_int_array *sc, int64_t sparse_mode,
                             int64_t l, int64_t st, int64_t ls, int64_t kc)
{
    if (q->dtype != SPA_FLOAT16 && q->dtype != SPA_BFLOAT16)
        return "query dtype FLOAT16 or BFLOAT16";
    if (v->dims[2] > q->dims[2])
        return "value D2 <= query D1";
    const int64_t g = q->dims[1] / k->dims[1];
    if (g >= 128 || 128 % g != 0)
        return "G < 128 and 128 % G == 0";
    if (sparse_mode != 0 && sparse_mode != 1)
        return "sparseMode 0 or 1";
    if (!in_steps(l, 16, 128, 16))
        return "compressBlockSize in {16, 32, ..., 128}";
    if (st != 16 && st != 32 && st != 48 && st != 64)
        return "compressStride in {16, 32, 48, 64}";
    if (!in_steps(ls, 16, 128, 16))
        return "selectBlockSize in {16, 32, ..., 128}";
    if (l > ls)
        return "compressBlockSize <= selectBlockSize";
    if (kc > 32)
        return "selectBlockCount <= 32";
    if (sq->size > 4096)
        return "batch <= 4096";
    const int64_t m = ls / st;
    for (uint64_t b = 0; b < sc->size; b++) {
        const int64_t c = sc->data[b] - (b == 0 ? 0 : sc->data[b - 1]);
        if (c > 14000)
            return "CmpSkv_b <= 14000";
        if (kc > (c + m - 1) / m)
            return "selectBlockCount <= ceil(CmpSkv_b / (selectBlockSize / compressStride))";
    }
    return NULL;
}

aclnnStatus aclnnNsaCompressAttentionGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value,
    const aclTensor *attenMaskOptional, const aclTensor *topkMaskOptional,
    const aclIntArray *actualSeqQLenOptional, const aclIntArray *actualCmpSeqKvLenOptional,
    const aclIntArray *actualSelSeqKvLenOptional, double scaleValue, int64_t headNum,
    char *inputLayout, int64_t sparseMode, int64_t compressBlockSize, int64_t compressStride,
    int64_t selectBlockSize, int64_t selectBlockCount, const aclTensor *softmaxMaxOut,
    const aclTensor *softmaxSumOut, const aclTensor *attentionOutOut,
    const aclTensor *topkIndicesOut, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    spa_acl_call c;
    spa_tensor q, k, v, mask, tmask, mx, sm, out, topk;
    spa_acl_call_begin(&c, executor);
    const aclTensor *floats[] = {query, key, value, softmaxMaxOut, softmaxSumOut, attentionOutOut};
    if (spa_acl_any_double(floats, 6))
        return spa_acl_refuse_double(&c, "aclnnNsaCompressAttentionGetWorkspaceSize",
                                     spa_nsa_compress_attention, workspaceSize, executor);
    const spa_int_array *sq = spa_acl_call_array(&c, actualSeqQLenOptional);
    const spa_int_array *sc = spa_acl_call_array(&c, actualCmpSeqKvLenOptional);
    const spa_int_array *ss = spa_acl_call_array(&c, actualSelSeqKvLenOptional);
    spa_status st = spa_nsa_cattn_acl_phase1(
        spa_acl_call_tensor(&c, query, &q), spa_acl_call_tensor(&c, key, &k),
        spa_acl_call_tensor(&c, value, &v), spa_acl_call_tensor(&c, attenMaskOptional, &mask),
        spa_acl_call_tensor(&c, topkMaskOptional, &tmask), sq, sc, ss, scaleValue, headNum,
        inputLayout, sparseMode, compressBlockSize, compressStride, selectBlockSize,
        selectBlockCount, spa_acl_call_tensor(&c, softmaxMaxOut, &mx),
        spa_acl_call_tensor(&c, softmaxSumOut, &sm), spa_acl_call_tensor(&c, attentionOutOut, &out),
        spa_acl_call_tensor(&c, topkIndicesOut, &topk), workspaceSize, c.native);
    const char *rule = st == SPA_OK && q.dims[0] > 0
                           ? cann_rule(&q, &k, &v, sq, sc, sparseMode, compressBlockSize,
                                       compressStride, selectBlockSize, selectBlockCount)
                           : NULL;
    if (rule != NULL)
        st = SPA_ERR_INVALID;
    aclnnStatus r = spa_acl_call_end(&c, st, spa_nsa_compress_attention, workspaceSize, executor);
    if (rule != NULL)
        spa_acl_error("aclnnNsaCompressAttentionGetWorkspaceSize: %d (ACLNN_ERR_PARAM_INVALID): %s (a CANN rule)",
                      (int)r, rule);
    return r;
}

aclnnStatus aclnnNsaCompressAttention(void *workspace, uint64_t workspaceSize,
                                      aclOpExecutor *executor, const aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_nsa_compress_attention);
}
