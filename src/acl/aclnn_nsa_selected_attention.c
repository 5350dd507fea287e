/* aclnnNsaSelectedAttention over spa_nsa_select. */
#include "aclnnop/aclnn_nsa_selected_attention.h"

#include "acl_internal.h"
#include "aclnn_nsa_selected_rules.h"
#include "acl_double.h"

aclnnStatus aclnnNsaSelectedAttentionGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value,
    const aclTensor *topkIndices, const aclTensor *attenMaskOptional,
    const aclIntArray *actualSeqQLenOptional, const aclIntArray *actualSeqKvLenOptional,
    double scaleValue, int64_t headNum, char *inputLayout, int64_t sparseMode,
    int64_t selectedBlockSize, int64_t selectedBlockCount, const aclTensor *softmaxMaxOut,
    const aclTensor *softmaxSumOut, const aclTensor *attentionOut, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    spa_acl_call c;
    spa_tensor q, k, v, idx, mask, mx, sm, out;
    spa_acl_call_begin(&c, executor);
    const aclTensor *floats[] = {query, key, value, topkIndices, attenMaskOptional, softmaxMaxOut, softmaxSumOut, attentionOut};
    uint64_t probe; /* the native phase 1 sizes a call refused after into this */
    const bool dbl = spa_acl_any_double(floats, 8);
    const spa_int_array *seq_q = spa_acl_call_array(&c, actualSeqQLenOptional);
    const spa_int_array *seq_kv = spa_acl_call_array(&c, actualSeqKvLenOptional);
    spa_status st = spa_nsa_select_get_workspace_size(
        spa_acl_call_tensor(&c, query, &q), spa_acl_call_tensor(&c, key, &k), spa_acl_call_tensor(&c, value, &v),
        spa_acl_call_tensor(&c, topkIndices, &idx), spa_acl_call_tensor(&c, attenMaskOptional, &mask), seq_q,
        seq_kv, scaleValue, headNum, inputLayout, sparseMode, selectedBlockSize,
        selectedBlockCount, spa_acl_call_tensor(&c, softmaxMaxOut, &mx), spa_acl_call_tensor(&c, softmaxSumOut, &sm),
        spa_acl_call_tensor(&c, attentionOut, &out), spa_acl_ws_slot(dbl, workspaceSize, &probe), c.native);
    if (dbl && st != SPA_ERR_NULLPTR) /* CANN: NULL arguments (161001) first, then no double */
        return spa_acl_refuse_double(&c, "aclnnNsaSelectedAttentionGetWorkspaceSize", spa_nsa_select, workspaceSize, executor);
    /* CANN's own rules, on what the native phase 1 accepted (so that NULL
     * arguments and invalid descriptors keep the native codes, and the
     * indices are read only once checked) */
    const char *cann_rule = st == SPA_OK && !spa_acl_nsas_noop(&mx, &sm, &out)
                                ? spa_acl_nsas_cann_rule(&q, &v, &idx, seq_q, seq_kv, selectedBlockSize) : NULL;
    if (cann_rule != NULL)
        st = SPA_ERR_INVALID;
    aclnnStatus r = spa_acl_call_end(&c, st, spa_nsa_select, workspaceSize, executor);
    if (cann_rule != NULL)
        spa_acl_error("aclnnNsaSelectedAttentionGetWorkspaceSize: %d (ACLNN_ERR_PARAM_INVALID): %s (a CANN rule)", (int)r, cann_rule);
    return r;
}

aclnnStatus aclnnNsaSelectedAttention(void *workspace, uint64_t workspaceSize,
                                      aclOpExecutor *executor, const aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_nsa_select);
}
