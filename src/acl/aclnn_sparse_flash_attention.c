/* aclnnSparseFlashAttention over spa_dsa_sparse_attention. CANN's layouts
 * become the native views of the same memory: a BSND query [B, S1, N1, 512]
 * (queryRope, sparseIndices and attentionOut alike) as [B * S1, ..], a TND
 * one as it is; a PA_BSND key (value and keyRope alike) is the native paged
 * key, BSND the contiguous one, TND the native TND key; the statistics,
 * [B, N2, S1, G] for a BSND query, as the native [N2, B * S1, G] (N2 is 1).
 * The lengths tensors (INT32, prefix sums for TND) are read in phase 1 into
 * per-batch copies. value goes to the native op as given: where it is the
 * key's storage (CANN's MLA-absorb calls) the native op sees that and
 * gathers each row once.
 *
 * The codes: ops-transformer has no op_api source for this op (only its
 * definition, infershape and tiling), so a missing required argument
 * answers 161001 and every other refusal 161002 (the tiling's
 * ge::GRAPH_FAILED), the missing arguments first, as aclnn op_api sources
 * check them. The rules are the tiling's (SFAInfoParser, SFATilingCheck)
 * and the README's where the tiling checks less; the readings taken:
 *  - queryRope and keyRope are required (161001): the README lists them as
 *    optional, but the tiling refuses a NULL queryRope, wants both or
 *    neither, and accepts attentionMode 2 (MLA-absorb, rope D 64) only.
 *  - query, key and value of one dtype: the tiling compares value and
 *    keyRope with key, queryRope and attentionOut with query, but never key
 *    with query; the README asks the three alike.
 *  - key D 512 in every layout: the tiling checks a PA_BSND key's D only
 *    through value's (Dv == D); the README gives 512 for both.
 *  - a blockTable with a BSND or TND kv is refused (the tiling's
 *    CheckBlockTable), as are sequence-length tensors that are not 1-D INT32
 *    (prefix sums for TND that decrease, too).
 *  - the statistics outputs are read only when returnSoftmaxLse: CANN's
 *    infershape gives them shape [0] otherwise, and they are then neither
 *    checked nor written; their shapes, [B, N2, S1, N1 / N2] and
 *    [N2, T1, N1 / N2], are the infershape's (the tiling checks none).
 *  - scaleValue is CANN's float attribute; the native op uses it as a float
 *    for f16 / bf16, so it is passed as given.
 * Beyond CANN: a sparseIndices row may hold -1 anywhere (CANN asks for the
 * valid entries first and does not check it); an index past its batch's
 * length is refused (the native rule, 161002). Not reproduced: CANN's
 * padding queries past a BSND batch's actualSeqLengthsQuery (refused,
 * 161002). */
#include <stdint.h>
#include <string.h>

#include "aclnnop/aclnn_sparse_flash_attention.h"

#include "acl_internal.h"
#include "spattn/dsa.h"

enum {
    SFA_D = 512,         /* query, key and value head dim */
    SFA_DR = 64,         /* rope head dim */
    SFA_N1_MAX = 128,    /* query heads: a power of 2 up to this */
    SFA_SBS_MAX = 128,   /* sparseBlockSize: a power of 2 up to this */
    SFA_PAGE_STEP = 16,  /* blockSize: a multiple of this ... */
    SFA_PAGE_MAX = 1024, /* ... up to this */
    SFA_ATTN_MLA = 2     /* attentionMode: MLA-absorb, the only one */
};

/* The call's arguments, as native views once checked. */
typedef struct sfa_args {
    spa_acl_call c;
    spa_tensor q, qr, k, kr, v, idx, table, o, mx, sm;
    const spa_int_array *sq, *skv;
    bool q_tnd, kv_tnd, kv_pa, lse;
} sfa_args;

/* A CANN refusal: the code it gives and its rule, after the call's executor
 * is released. */
static aclnnStatus cann_refuse(sfa_args *a, aclnnStatus code, const char *rule, const uint64_t *ws,
                               aclOpExecutor **executor)
{
    return spa_acl_call_refuse(&a->c, code, rule, spa_dsa_sparse_attention, ws, executor);
}

static bool pow2_upto(int64_t x, int64_t max)
{
    return x >= 1 && x <= max && (x & (x - 1)) == 0;
}

/* The layouts (NULL: CANN's default, "BSND"). */
static const char *layout_rule(sfa_args *a, const char *lq, const char *lk)
{
    lq = lq != NULL ? lq : "BSND";
    lk = lk != NULL ? lk : "BSND";
    a->q_tnd = strcmp(lq, "TND") == 0;
    a->kv_tnd = strcmp(lk, "TND") == 0;
    a->kv_pa = strcmp(lk, "PA_BSND") == 0;
    if (!a->q_tnd && strcmp(lq, "BSND") != 0)
        return "layoutQuery BSND or TND";
    if (!a->kv_tnd && !a->kv_pa && strcmp(lk, "BSND") != 0)
        return "layoutKv BSND, TND or PA_BSND";
    if (!a->kv_pa && a->kv_tnd != a->q_tnd)
        return "layoutKv that of the query unless PA_BSND (a TND query with a BSND kv is not supported)";
    return NULL;
}

/* The arguments that a layout or returnSoftmaxLse makes required. */
static const char *conditional_missing(const sfa_args *a, const aclTensor *sq, const aclTensor *skv,
                                       const aclTensor *table, const aclTensor *mx, const aclTensor *sm)
{
    if (a->q_tnd && sq == NULL)
        return "actualSeqLengthsQuery present for a TND query";
    if ((a->kv_tnd || a->kv_pa) && skv == NULL)
        return "actualSeqLengthsKv present for a TND or PA_BSND kv";
    if (a->kv_pa && table == NULL)
        return "blockTable present for a PA_BSND kv";
    if (a->lse && (mx == NULL || sm == NULL))
        return "softmaxMaxOut and softmaxSumOut present when returnSoftmaxLse";
    return NULL;
}

static const char *dtype_rule(const sfa_args *a)
{
    const int32_t dt = a->q.dtype;
    if (!spa_acl_is_half(dt))
        return "query FLOAT16 or BFLOAT16";
    if (a->k.dtype != dt || a->v.dtype != dt || a->qr.dtype != dt || a->kr.dtype != dt || a->o.dtype != dt)
        return "key, value, queryRope, keyRope and attentionOut of the query's dtype";
    if (a->idx.dtype != SPA_INT32 || (a->kv_pa && a->table.dtype != SPA_INT32))
        return "sparseIndices and blockTable INT32";
    if (a->lse && (a->mx.dtype != SPA_FLOAT32 || a->sm.dtype != SPA_FLOAT32))
        return "softmaxMaxOut and softmaxSumOut FLOAT32";
    return NULL;
}

static const char *attr_rule(const sfa_args *a, int64_t sbs, int64_t mode, int64_t pre, int64_t next,
                             int64_t attention_mode)
{
    if (mode != 0 && mode != 3)
        return "sparseMode 0 or 3";
    if (!pow2_upto(sbs, SFA_SBS_MAX))
        return "sparseBlockSize a power of 2 in [1, 128]";
    if (pre != INT64_MAX || next != INT64_MAX)
        return "preTokens and nextTokens 2^63 - 1";
    if (attention_mode != SFA_ATTN_MLA)
        return "attentionMode 2 (MLA-absorb)";
    if (a->lse && a->kv_pa)
        return "returnSoftmaxLse only without a PA_BSND kv";
    return NULL;
}

static const char *rank_rule(const sfa_args *a)
{
    const int32_t rq = a->q_tnd ? 3 : 4, rk = a->kv_tnd ? 3 : 4;
    if (a->q.rank != rq || a->qr.rank != rq || a->idx.rank != rq || a->o.rank != rq ||
        (a->lse && (a->mx.rank != rq || a->sm.rank != rq)))
        return "query, queryRope, sparseIndices, attentionOut and the softmax outputs 4-D for a BSND query, "
               "3-D for TND";
    if (a->k.rank != rk || a->v.rank != rk || a->kr.rank != rk)
        return "key, value and keyRope 4-D for a BSND or PA_BSND kv, 3-D for TND";
    if (a->kv_pa && a->table.rank != 2)
        return "blockTable 2-D";
    return NULL;
}

/* CANN's one MLA-absorb shape: N2 1, N1 a power of 2, D 512, rope D 64. */
static const char *head_rule(const sfa_args *a)
{
    const int32_t rq = a->q.rank, rk = a->k.rank;
    if (a->k.dims[rk - 2] != 1)
        return "key N2 1";
    if (!pow2_upto(a->q.dims[rq - 2], SFA_N1_MAX))
        return "query N1 1, 2, 4, ..., 128";
    if (a->q.dims[rq - 1] != SFA_D || a->k.dims[rk - 1] != SFA_D || a->v.dims[rk - 1] != SFA_D)
        return "query, key and value D 512";
    if (a->qr.dims[rq - 1] != SFA_DR || a->kr.dims[rk - 1] != SFA_DR)
        return "queryRope and keyRope D 64";
    return NULL;
}

/* A statistics output: [B, N2, S1, N1 / N2] or [N2, T1, N1 / N2], N2 1. */
static bool stat_shape_ok(const spa_tensor *x, const spa_tensor *q, bool q_tnd)
{
    const int64_t n1 = q->dims[q->rank - 2];
    if (q_tnd)
        return x->dims[0] == 1 && x->dims[1] == q->dims[0] && x->dims[2] == n1;
    return x->dims[0] == q->dims[0] && x->dims[1] == 1 && x->dims[2] == q->dims[1] && x->dims[3] == n1;
}

/* Every tensor's shape against the query's and the key's. */
static const char *shape_rule(const sfa_args *a)
{
    const int32_t rq = a->q.rank, rk = a->k.rank;
    if (a->q.dims[0] < 1 || a->k.dims[0] < 1)
        return "query's and key's first dim above 0";
    if (!spa_acl_dims_lead(&a->qr, &a->q, rq - 1) || !spa_acl_dims_lead(&a->o, &a->q, rq))
        return "queryRope (.., N1, 64) and attentionOut (.., N1, 512) of the query's leading dims";
    if (!spa_acl_dims_lead(&a->idx, &a->q, rq - 2) || a->idx.dims[rq - 2] != 1 || a->idx.dims[rq - 1] < 1)
        return "sparseIndices (B, S1, 1, K) / (T1, 1, K), K > 0";
    if (!spa_acl_dims_lead(&a->v, &a->k, rk - 1) || !spa_acl_dims_lead(&a->kr, &a->k, rk - 1))
        return "value (.., 1, 512) and keyRope (.., 1, 64) of the key's leading dims";
    if (a->lse && (!stat_shape_ok(&a->mx, &a->q, a->q_tnd) || !stat_shape_ok(&a->sm, &a->q, a->q_tnd)))
        return "softmaxMaxOut and softmaxSumOut (B, N2, S1, N1 / N2) / (N2, T1, N1 / N2)";
    return NULL;
}

/* One batch count B: the query's (BSND) or actualSeqLengthsQuery's (TND),
 * and that of actualSeqLengthsKv, a BSND key and the blockTable. */
static const char *batch_rule(const sfa_args *a)
{
    const int64_t b = a->q_tnd ? (int64_t)a->sq->size : a->q.dims[0];
    if (b < 1)
        return "actualSeqLengthsQuery of at least one batch";
    if ((a->sq != NULL && (int64_t)a->sq->size != b) || (a->skv != NULL && (int64_t)a->skv->size != b) ||
        (!a->kv_tnd && !a->kv_pa && a->k.dims[0] != b) || (a->kv_pa && a->table.dims[0] != b))
        return "one batch count: the query's B (actualSeqLengthsQuery's for TND), actualSeqLengthsKv's, "
               "the key's B (BSND), the blockTable's rows (PA_BSND)";
    if (a->kv_pa && a->table.dims[1] < 1)
        return "blockTable's second dim above 0";
    return NULL;
}

static const char *page_rule(const sfa_args *a, int64_t sbs)
{
    if (!a->kv_pa)
        return NULL;
    const int64_t bs = a->k.dims[1];
    if (bs < SFA_PAGE_STEP || bs > SFA_PAGE_MAX || bs % SFA_PAGE_STEP != 0)
        return "blockSize a multiple of 16 up to 1024";
    if (bs % sbs != 0)
        return "sparseBlockSize dividing blockSize";
    return NULL;
}

static const char *padding_rule(const sfa_args *a)
{
    if (a->q_tnd || a->sq == NULL)
        return NULL;
    for (uint64_t b = 0; b < a->sq->size; b++)
        if (a->sq->data[b] != a->q.dims[1])
            return "actualSeqLengthsQuery[b] == S1 (BSND: padding queries are not reproduced)";
    return NULL;
}

/* A BSND statistics output [B, 1, S1, G] as [1, B * S1, G]: the unit dim
 * goes first (its stride is never stepped), then B and S1 merge. */
static bool stat_view(spa_tensor *t)
{
    const int64_t unit_stride = t->strides[1];
    t->dims[1] = t->dims[0], t->strides[1] = t->strides[0];
    t->dims[0] = 1, t->strides[0] = unit_stride;
    return spa_acl_merge_dims(t, 1);
}

/* A BSND query's tensors with B and S1 merged. */
static const char *view_rule(sfa_args *a)
{
    if (a->q_tnd)
        return NULL;
    bool ok = spa_acl_merge_dims(&a->q, 0) && spa_acl_merge_dims(&a->qr, 0) && spa_acl_merge_dims(&a->idx, 0) &&
              spa_acl_merge_dims(&a->o, 0);
    if (ok && a->lse)
        ok = stat_view(&a->mx) && stat_view(&a->sm);
    return ok ? NULL
              : "query, queryRope, sparseIndices and the outputs with mergeable B and S1 (a view spattn takes "
                "without a copy)";
}

/* The rules on the loaded tensors, in order; the first broken one. */
static const char *tensor_rule(sfa_args *a, int64_t sbs, int64_t mode, int64_t pre, int64_t next,
                               int64_t attention_mode)
{
    const char *rule;
    if ((rule = dtype_rule(a)) != NULL || (rule = attr_rule(a, sbs, mode, pre, next, attention_mode)) != NULL ||
        (rule = rank_rule(a)) != NULL || (rule = head_rule(a)) != NULL || (rule = shape_rule(a)) != NULL ||
        (rule = batch_rule(a)) != NULL || (rule = page_rule(a, sbs)) != NULL || (rule = padding_rule(a)) != NULL)
        return rule;
    return view_rule(a);
}

aclnnStatus aclnnSparseFlashAttentionGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *sparseIndices,
    const aclTensor *blockTableOptional, const aclTensor *actualSeqLengthsQueryOptional,
    const aclTensor *actualSeqLengthsKvOptional, const aclTensor *queryRopeOptional,
    const aclTensor *keyRopeOptional, double scaleValue, int64_t sparseBlockSize, char *layoutQueryOptional,
    char *layoutKvOptional, int64_t sparseMode, int64_t preTokens, int64_t nextTokens, int64_t attentionMode,
    bool returnSoftmaxLse, const aclTensor *attentionOutOut, const aclTensor *softmaxMaxOutOptional,
    const aclTensor *softmaxSumOutOptional, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    sfa_args a;
    memset(&a, 0, sizeof a);
    spa_acl_call_begin(&a.c, executor);
    a.lse = returnSoftmaxLse;
    if (query == NULL || key == NULL || value == NULL || sparseIndices == NULL || queryRopeOptional == NULL ||
        keyRopeOptional == NULL || attentionOutOut == NULL || workspaceSize == NULL || executor == NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_NULLPTR,
                           "query, key, value, sparseIndices, queryRope and keyRope (attentionMode 2), "
                           "attentionOut present",
                           workspaceSize, executor);
    const char *rule = layout_rule(&a, layoutQueryOptional, layoutKvOptional);
    if (rule != NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID, rule, workspaceSize, executor);
    rule = conditional_missing(&a, actualSeqLengthsQueryOptional, actualSeqLengthsKvOptional, blockTableOptional,
                               softmaxMaxOutOptional, softmaxSumOutOptional);
    if (rule != NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_NULLPTR, rule, workspaceSize, executor);
    if (!a.kv_pa && blockTableOptional != NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID, "blockTable only with a PA_BSND kv", workspaceSize,
                           executor);
    spa_acl_call_tensor(&a.c, query, &a.q), spa_acl_call_tensor(&a.c, queryRopeOptional, &a.qr);
    spa_acl_call_tensor(&a.c, key, &a.k), spa_acl_call_tensor(&a.c, keyRopeOptional, &a.kr);
    spa_acl_call_tensor(&a.c, value, &a.v), spa_acl_call_tensor(&a.c, sparseIndices, &a.idx);
    spa_acl_call_tensor(&a.c, attentionOutOut, &a.o);
    if (a.kv_pa)
        spa_acl_call_tensor(&a.c, blockTableOptional, &a.table);
    if (a.lse) { /* otherwise CANN's outputs of shape [0]: never read nor written */
        spa_acl_call_tensor(&a.c, softmaxMaxOutOptional, &a.mx);
        spa_acl_call_tensor(&a.c, softmaxSumOutOptional, &a.sm);
    }
    bool ok_q, ok_kv;
    a.sq = spa_acl_call_tensor_lengths(&a.c, actualSeqLengthsQueryOptional, a.q_tnd, &ok_q);
    a.skv = spa_acl_call_tensor_lengths(&a.c, actualSeqLengthsKvOptional, a.kv_tnd, &ok_kv);
    if (!ok_q || !ok_kv)
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID,
                           "actualSeqLengths INT32 of shape (B,), non-decreasing prefix sums for TND", workspaceSize,
                           executor);
    rule = tensor_rule(&a, sparseBlockSize, sparseMode, preTokens, nextTokens, attentionMode);
    if (rule != NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID, rule, workspaceSize, executor);
    spa_status st = spa_dsa_sparse_attention_get_workspace_size(
        &a.q, &a.qr, &a.k, &a.kr, &a.v, &a.idx, a.kv_pa ? &a.table : NULL, a.sq, a.skv, scaleValue, sparseBlockSize,
        sparseMode, &a.o, a.lse ? &a.mx : NULL, a.lse ? &a.sm : NULL, workspaceSize, a.c.native);
    return spa_acl_call_end(&a.c, st, spa_dsa_sparse_attention, workspaceSize, executor);
}

aclnnStatus aclnnSparseFlashAttention(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                      const aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_dsa_sparse_attention);
}
