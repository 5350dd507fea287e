/* aclnnSparseFlashAttentionGrad over spa_dsa_sparse_attention_grad. CANN's
 * layouts become the native views of the same memory: a BSND query
 * [B, S1, N1, 512] (queryRope, sparseIndices, dOut, out, dQueryOut and
 * dQueryRopeOut alike) as [B * S1, ..], a TND one as it is; a BSND key
 * [B, S2, 1, 512] (value, keyRope and their gradients alike) is the native
 * contiguous key, a TND one the native TND key (the grad has no paged key:
 * a gradient lives in the key's own layout); the statistics softmaxMax /
 * softmaxSum, [B, N2, S1, G] for BSND, as the native [N2, B * S1, G] (N2 is
 * 1), [N2, T1, G] as they are. The lengths tensors (INT32, prefix sums for
 * TND) are read in phase 1 into per-batch copies. CANN's KV merge (value
 * and dValueOut both NULL): the key goes to the native op as the value and
 * no dvalue is asked for, so dKeyOut receives dK + dV, rounded once.
 * `deterministic` is accepted either way: the native op is always
 * deterministic (sums in an order fixed by the shape, no atomics).
 *
 * The codes are those of CANN's newest page (the one that documents the KV
 * merge and K 1024..8192; ops-transformer's op_api forwards to the
 * generated aclnnInner, so the page is the only statement of them): a
 * missing required argument or output 161001 (ACLNN_ERR_PARAM_NULLPTR);
 * dtypes 161002 (ACLNN_ERR_PARAM_INVALID); out-of-range attribute values
 * (layout, sparseMode, ...) and shapes that break the constraints 561002
 * (ACLNN_ERR_INNER_TILING_ERROR, the tiling's GRAPH_FAILED); the missing
 * arguments first, as aclnn op_api sources check them. The rules:
 *  161001: query, key, sparseIndices, dOut, out, softmaxMax, softmaxSum,
 *    dQueryOut, dKeyOut, workspaceSize, executor; dValueOut when value is
 *    given; actualSeqLengthsQuery and actualSeqLengthsKv for TND;
 *    dQueryRopeOut with a queryRope, dKeyRopeOut with a keyRope.
 *  161002: query FLOAT16 or BFLOAT16 and every other float tensor of its
 *    dtype (the op definition's dtype columns pair them); sparseIndices
 *    and the lengths INT32; the statistics FLOAT32. Pairings: dValueOut
 *    NULL when value is (KV merge); queryRope and keyRope both or neither.
 *  561002: layout BSND or TND (NULL: BSND, the op's default) and the query
 *    of as many dims as the layout has letters; sparseMode 0 or 3;
 *    sparseBlockSize 1, 8, 16, 32 or 64; preTokens and nextTokens
 *    2147483647 or 2^63 - 1; N2 1, N1 1, 2, 4, ..., 128; D 512 (query, key,
 *    value), rope D 64; dOut and out of the query's shape; sparseIndices
 *    (B, S1, 1, K) / (T1, 1, K) with K one of 1024, 2048, ..., 8192; value
 *    and keyRope of the key's leading dims; the statistics (B, 1, S1, N1) /
 *    (1, T1, N1); each gradient of its input's shape; one batch count B in
 *    1..256 (the query's for BSND, actualSeqLengthsQuery's for TND; the
 *    key's and actualSeqLengthsKv's alike); S1 up to 128K and S2 up to 1M
 *    (per batch); the lengths 1-D, TND prefix sums non-decreasing.
 * Readings where CANN's sources disagree:
 *  - value is optional (KV merge) and the codes include 561002: the newest
 *    page's; the Dec 2025 page and op definition make value and dValue
 *    required and list 161001 / 161002 only.
 *  - K in 1024..8192 by 1024: the newest page's; the Dec 2025 tiling asks
 *    K == 2048, the newest tiling checks none.
 *  - the ropes are optional (both or neither; D 64 when given): the tiling
 *    runs without them (a tiling key of its own) and the page lists them
 *    as optional; its spec table's "Drope 64" is read as their D when given.
 *  - D 512 for query, key and value: the page's; the tiling checks only
 *    query D == key D >= value D (CANN's own unit tests pass D 128).
 *  - preTokens / nextTokens: the page allows 2147483647 only, the forward
 *    and CANN's unit tests pass 2^63 - 1 (the tiling reads neither; sparse
 *    modes 0 and 3 ignore them): both accepted.
 *  - sparseIndices INT32: the op definition's and the example's (the Dec
 *    page's table says INT64); the lengths INT32 likewise (its example
 *    made them INT64).
 *  - the statistics of a BSND call [B, N2, S1, G]: the page's (the tiling
 *    checks only the TND shape; a unit test of CANN's passes [1, 8, 64]).
 *  - N1 3, 6, 12, 24, 48 (the page's Ascend 950 extras) are refused: the
 *    A2 / A3 rules, as the forward's.
 *  - a pair of arguments given inconsistently (dValueOut without a value, one
 *    rope without the other) answers 161002: neither the page nor the tiling
 *    names a code (the tiling silently drops a lone rope).
 * Beyond CANN: a value of its own is computed (the page supports only value
 * identical to key; spattn computes dV from any value); a sparseIndices row
 * may hold -1 anywhere; an index past its batch's length is refused (the
 * native rule, 161002). Not reproduced: padding queries past a BSND batch's
 * actualSeqLengthsQuery, and TND query lengths summing to less than T1 (the
 * newest page's EOD case): refused, 161002. The native op's own refusals
 * answer 161002. */
#include <stdint.h>
#include <string.h>

#include "aclnnop/aclnn_sparse_flash_attention_grad.h"

#include "acl_internal.h"
#include "spattn/dsa.h"

enum {
    SFAG_D = 512,        /* query, key and value head dim */
    SFAG_DR = 64,        /* rope head dim */
    SFAG_N1_MAX = 128,   /* query heads: a power of 2 up to this */
    SFAG_K_STEP = 1024,  /* sparseIndices K: a multiple of this ... */
    SFAG_K_MAX = 8192,   /* ... up to this */
    SFAG_B_MAX = 256,    /* batches */
    SFAG_S1_MAX = 131072 /* query tokens a batch */
};
#define SFAG_S2_MAX 1048576 /* key tokens a batch */
#define SFAG_TOKENS_INT32 2147483647

/* The call's arguments, as native views once checked. */
typedef struct sfag_args {
    spa_acl_call c;
    spa_tensor q, qr, k, kr, v, idx, dy, o, mx, sm, dq, dqr, dk, dkr, dv;
    const spa_int_array *sq, *skv;
    bool tnd, rope, merge;
} sfag_args;

/* A CANN refusal: the code it gives and its rule, after the call's executor
 * is released. */
static aclnnStatus cann_refuse(sfag_args *a, aclnnStatus code, const char *rule, const uint64_t *ws,
                               aclOpExecutor **executor)
{
    return spa_acl_call_refuse(&a->c, code, rule, spa_dsa_sparse_attention_grad, ws, executor);
}

static bool pow2_upto(int64_t x, int64_t max)
{
    return x >= 1 && x <= max && (x & (x - 1)) == 0;
}

/* The layout (NULL: CANN's default, "BSND"). */
static const char *layout_rule(sfag_args *a, const char *layout)
{
    layout = layout != NULL ? layout : "BSND";
    a->tnd = strcmp(layout, "TND") == 0;
    if (!a->tnd && strcmp(layout, "BSND") != 0)
        return "layout BSND or TND";
    return NULL;
}

/* The arguments that the layout or another argument makes required. */
static const char *conditional_missing(const sfag_args *a, const aclTensor *sq, const aclTensor *skv,
                                       const aclTensor *qr, const aclTensor *kr, const aclTensor *dqr,
                                       const aclTensor *dkr)
{
    if (a->tnd && (sq == NULL || skv == NULL))
        return "actualSeqLengthsQuery and actualSeqLengthsKv present for TND";
    if ((qr != NULL && dqr == NULL) || (kr != NULL && dkr == NULL))
        return "dQueryRopeOut present with a queryRope, dKeyRopeOut with a keyRope";
    return NULL;
}

static const char *dtype_rule(const sfag_args *a)
{
    const int32_t dt = a->q.dtype;
    if (!spa_acl_is_half(dt))
        return "query FLOAT16 or BFLOAT16";
    if (a->k.dtype != dt || (!a->merge && a->v.dtype != dt) || a->dy.dtype != dt || a->o.dtype != dt ||
        (a->rope && (a->qr.dtype != dt || a->kr.dtype != dt)))
        return "key, value, dOut, out, queryRope and keyRope of the query's dtype";
    if (a->dq.dtype != dt || a->dk.dtype != dt || (!a->merge && a->dv.dtype != dt) ||
        (a->rope && (a->dqr.dtype != dt || a->dkr.dtype != dt)))
        return "dQueryOut, dKeyOut, dValueOut, dQueryRopeOut and dKeyRopeOut of the query's dtype";
    if (a->idx.dtype != SPA_INT32)
        return "sparseIndices INT32";
    if (a->mx.dtype != SPA_FLOAT32 || a->sm.dtype != SPA_FLOAT32)
        return "softmaxMax and softmaxSum FLOAT32";
    return NULL;
}

static const char *attr_rule(int64_t sbs, int64_t mode, int64_t pre, int64_t next)
{
    if (mode != 0 && mode != 3)
        return "sparseMode 0 or 3";
    if (sbs != 1 && sbs != 8 && sbs != 16 && sbs != 32 && sbs != 64)
        return "sparseBlockSize 1, 8, 16, 32 or 64";
    if ((pre != SFAG_TOKENS_INT32 && pre != INT64_MAX) || (next != SFAG_TOKENS_INT32 && next != INT64_MAX))
        return "preTokens and nextTokens 2147483647 (or 2^63 - 1)";
    return NULL;
}

static const char *rank_rule(const sfag_args *a)
{
    const int32_t r = a->tnd ? 3 : 4;
    if (a->q.rank != r)
        return "query of as many dims as the layout has letters";
    if (a->dy.rank != r || a->o.rank != r || a->idx.rank != r || a->dq.rank != r || a->mx.rank != r ||
        a->sm.rank != r || (a->rope && (a->qr.rank != r || a->dqr.rank != r)))
        return "dOut, out, sparseIndices, the statistics, queryRope and the query gradients 4-D for BSND, "
               "3-D for TND";
    if (a->k.rank != r || a->dk.rank != r || (!a->merge && (a->v.rank != r || a->dv.rank != r)) ||
        (a->rope && (a->kr.rank != r || a->dkr.rank != r)))
        return "key, value, keyRope and their gradients 4-D for BSND, 3-D for TND";
    return NULL;
}

/* CANN's one MLA shape: N2 1, N1 a power of 2, D 512, rope D 64. */
static const char *head_rule(const sfag_args *a)
{
    const int32_t r = a->q.rank;
    if (a->k.dims[r - 2] != 1)
        return "key N2 1";
    if (!pow2_upto(a->q.dims[r - 2], SFAG_N1_MAX))
        return "query N1 1, 2, 4, ..., 128";
    if (a->q.dims[r - 1] != SFAG_D || a->k.dims[r - 1] != SFAG_D || (!a->merge && a->v.dims[r - 1] != SFAG_D))
        return "query, key and value D 512";
    if (a->rope && (a->qr.dims[r - 1] != SFAG_DR || a->kr.dims[r - 1] != SFAG_DR))
        return "queryRope and keyRope D 64";
    return NULL;
}

/* A statistics input: [B, N2, S1, N1 / N2] or [N2, T1, N1 / N2], N2 1. */
static bool stat_shape_ok(const spa_tensor *x, const spa_tensor *q, bool tnd)
{
    const int64_t n1 = q->dims[q->rank - 2];
    if (tnd)
        return x->dims[0] == 1 && x->dims[1] == q->dims[0] && x->dims[2] == n1;
    return x->dims[0] == q->dims[0] && x->dims[1] == 1 && x->dims[2] == q->dims[1] && x->dims[3] == n1;
}

/* Every tensor's shape against the query's and the key's. */
static const char *shape_rule(const sfag_args *a)
{
    const int32_t r = a->q.rank;
    if (a->q.dims[0] < 1 || a->k.dims[0] < 1 || (!a->tnd && (a->q.dims[1] < 1 || a->k.dims[1] < 1)))
        return "query's and key's B and S (T) above 0";
    if (!spa_acl_dims_lead(&a->dy, &a->q, r) || !spa_acl_dims_lead(&a->o, &a->q, r))
        return "dOut and out of the query's shape";
    if (a->rope && !spa_acl_dims_lead(&a->qr, &a->q, r - 1))
        return "queryRope (.., N1, 64) of the query's leading dims";
    const int64_t kc = a->idx.dims[r - 1];
    if (!spa_acl_dims_lead(&a->idx, &a->q, r - 2) || a->idx.dims[r - 2] != 1)
        return "sparseIndices (B, S1, 1, K) / (T1, 1, K)";
    if (kc < SFAG_K_STEP || kc > SFAG_K_MAX || kc % SFAG_K_STEP != 0)
        return "sparseIndices K 1024, 2048, 3072, ..., 8192";
    if ((!a->merge && !spa_acl_dims_lead(&a->v, &a->k, r - 1)) || (a->rope && !spa_acl_dims_lead(&a->kr, &a->k, r - 1)))
        return "value (.., 1, 512) and keyRope (.., 1, 64) of the key's leading dims";
    if (!stat_shape_ok(&a->mx, &a->q, a->tnd) || !stat_shape_ok(&a->sm, &a->q, a->tnd))
        return "softmaxMax and softmaxSum (B, N2, S1, N1 / N2) / (N2, T1, N1 / N2)";
    if (!spa_acl_dims_lead(&a->dq, &a->q, r) || !spa_acl_dims_lead(&a->dk, &a->k, r) ||
        (!a->merge && !spa_acl_dims_lead(&a->dv, &a->v, r)) ||
        (a->rope && (!spa_acl_dims_lead(&a->dqr, &a->qr, r) || !spa_acl_dims_lead(&a->dkr, &a->kr, r))))
        return "each gradient of its input's shape";
    return NULL;
}

/* One batch count B in 1..256: the query's (BSND) or actualSeqLengthsQuery's
 * (TND), and that of actualSeqLengthsKv and a BSND key. */
static const char *batch_rule(const sfag_args *a)
{
    const int64_t b = a->tnd ? (int64_t)a->sq->size : a->q.dims[0];
    if (b < 1 || b > SFAG_B_MAX)
        return "B in 1..256";
    if ((a->sq != NULL && (int64_t)a->sq->size != b) || (a->skv != NULL && (int64_t)a->skv->size != b) ||
        (!a->tnd && a->k.dims[0] != b))
        return "one batch count: the query's B (actualSeqLengthsQuery's for TND), actualSeqLengthsKv's, "
               "the key's B (BSND)";
    return NULL;
}

/* S1 up to 128K, S2 up to 1M: the dims (BSND), the lengths (TND). */
static const char *seq_rule(const sfag_args *a)
{
    if (!a->tnd)
        return a->q.dims[1] > SFAG_S1_MAX || a->k.dims[1] > SFAG_S2_MAX ? "S1 up to 128K, S2 up to 1M" : NULL;
    for (uint64_t b = 0; b < a->sq->size; b++)
        if (a->sq->data[b] > SFAG_S1_MAX || a->skv->data[b] > SFAG_S2_MAX)
            return "actualSeqLengthsQuery up to 128K, actualSeqLengthsKv up to 1M a batch";
    return NULL;
}

static const char *padding_rule(const sfag_args *a)
{
    if (a->tnd || a->sq == NULL)
        return NULL;
    for (uint64_t b = 0; b < a->sq->size; b++)
        if (a->sq->data[b] != a->q.dims[1])
            return "actualSeqLengthsQuery[b] == S1 (BSND: padding queries are not reproduced)";
    return NULL;
}

/* A BSND statistics input [B, 1, S1, G] as [1, B * S1, G]: the unit dim
 * goes first (its stride is never stepped), then B and S1 merge. */
static bool stat_view(spa_tensor *t)
{
    const int64_t unit_stride = t->strides[1];
    t->dims[1] = t->dims[0], t->strides[1] = t->strides[0];
    t->dims[0] = 1, t->strides[0] = unit_stride;
    return spa_acl_merge_dims(t, 1);
}

/* A BSND query's tensors with B and S1 merged. */
static const char *view_rule(sfag_args *a)
{
    if (a->tnd)
        return NULL;
    bool ok = spa_acl_merge_dims(&a->q, 0) && spa_acl_merge_dims(&a->idx, 0) && spa_acl_merge_dims(&a->dy, 0) &&
              spa_acl_merge_dims(&a->o, 0) && spa_acl_merge_dims(&a->dq, 0) && stat_view(&a->mx) &&
              stat_view(&a->sm);
    if (ok && a->rope)
        ok = spa_acl_merge_dims(&a->qr, 0) && spa_acl_merge_dims(&a->dqr, 0);
    return ok ? NULL
              : "query, queryRope, sparseIndices, dOut, out, the statistics and the query gradients with mergeable "
                "B and S1 (a view spattn takes without a copy)";
}

/* The rules on the loaded tensors, in order; the first broken one and its
 * code. */
static const char *tensor_rule(sfag_args *a, int64_t sbs, int64_t mode, int64_t pre, int64_t next,
                               aclnnStatus *code)
{
    const char *rule;
    *code = ACLNN_ERR_PARAM_INVALID;
    if ((rule = dtype_rule(a)) != NULL)
        return rule;
    *code = ACLNN_ERR_INNER_TILING_ERROR;
    if ((rule = attr_rule(sbs, mode, pre, next)) != NULL || (rule = rank_rule(a)) != NULL ||
        (rule = head_rule(a)) != NULL || (rule = shape_rule(a)) != NULL || (rule = batch_rule(a)) != NULL ||
        (rule = seq_rule(a)) != NULL)
        return rule;
    *code = ACLNN_ERR_PARAM_INVALID;
    if ((rule = padding_rule(a)) != NULL)
        return rule;
    return view_rule(a);
}

aclnnStatus aclnnSparseFlashAttentionGradGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *sparseIndices,
    const aclTensor *dOut, const aclTensor *out, const aclTensor *softmaxMax, const aclTensor *softmaxSum,
    const aclTensor *actualSeqLengthsQueryOptional, const aclTensor *actualSeqLengthsKvOptional,
    const aclTensor *queryRopeOptional, const aclTensor *keyRopeOptional, double scaleValue, int64_t sparseBlockSize,
    char *layoutOptional, int64_t sparseMode, int64_t preTokens, int64_t nextTokens, bool deterministic,
    const aclTensor *dQueryOut, const aclTensor *dKeyOut, const aclTensor *dValueOut,
    const aclTensor *dQueryRopeOutOptional, const aclTensor *dKeyRopeOutOptional, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    (void)deterministic; /* the native op is deterministic either way */
    sfag_args a;
    memset(&a, 0, sizeof a);
    spa_acl_call_begin(&a.c, executor);
    if (query == NULL || key == NULL || sparseIndices == NULL || dOut == NULL || out == NULL || softmaxMax == NULL ||
        softmaxSum == NULL || dQueryOut == NULL || dKeyOut == NULL || workspaceSize == NULL || executor == NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_NULLPTR,
                           "query, key, sparseIndices, dOut, out, softmaxMax, softmaxSum, dQueryOut, dKeyOut present",
                           workspaceSize, executor);
    if (value != NULL && dValueOut == NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_NULLPTR,
                           "dValueOut present with a value (both NULL only for the KV merge)", workspaceSize,
                           executor);
    const char *rule = layout_rule(&a, layoutOptional);
    if (rule != NULL)
        return cann_refuse(&a, ACLNN_ERR_INNER_TILING_ERROR, rule, workspaceSize, executor);
    rule = conditional_missing(&a, actualSeqLengthsQueryOptional, actualSeqLengthsKvOptional, queryRopeOptional,
                               keyRopeOptional, dQueryRopeOutOptional, dKeyRopeOutOptional);
    if (rule != NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_NULLPTR, rule, workspaceSize, executor);
    if (value == NULL && dValueOut != NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID, "dValueOut NULL when value is NULL (the KV merge)",
                           workspaceSize, executor);
    if ((queryRopeOptional == NULL) != (keyRopeOptional == NULL))
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID, "queryRope and keyRope both or neither", workspaceSize,
                           executor);
    /* the lengths' dtype (161002; their shape and values are checked with the copy) */
    if (!spa_acl_dtype_or_null(actualSeqLengthsQueryOptional, SPA_INT32) ||
        !spa_acl_dtype_or_null(actualSeqLengthsKvOptional, SPA_INT32))
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID, "actualSeqLengthsQuery and actualSeqLengthsKv INT32",
                           workspaceSize, executor);
    a.merge = value == NULL;
    a.rope = queryRopeOptional != NULL;
    spa_acl_call_tensor(&a.c, query, &a.q), spa_acl_call_tensor(&a.c, key, &a.k);
    spa_acl_call_tensor(&a.c, sparseIndices, &a.idx), spa_acl_call_tensor(&a.c, dOut, &a.dy);
    spa_acl_call_tensor(&a.c, out, &a.o), spa_acl_call_tensor(&a.c, softmaxMax, &a.mx);
    spa_acl_call_tensor(&a.c, softmaxSum, &a.sm), spa_acl_call_tensor(&a.c, dQueryOut, &a.dq);
    spa_acl_call_tensor(&a.c, dKeyOut, &a.dk);
    if (!a.merge)
        spa_acl_call_tensor(&a.c, value, &a.v), spa_acl_call_tensor(&a.c, dValueOut, &a.dv);
    if (a.rope) { /* rope gradients without the ropes: neither read nor written */
        spa_acl_call_tensor(&a.c, queryRopeOptional, &a.qr), spa_acl_call_tensor(&a.c, keyRopeOptional, &a.kr);
        spa_acl_call_tensor(&a.c, dQueryRopeOutOptional, &a.dqr);
        spa_acl_call_tensor(&a.c, dKeyRopeOutOptional, &a.dkr);
    }
    bool ok_q, ok_kv;
    a.sq = spa_acl_call_tensor_lengths(&a.c, actualSeqLengthsQueryOptional, a.tnd, &ok_q);
    a.skv = spa_acl_call_tensor_lengths(&a.c, actualSeqLengthsKvOptional, a.tnd, &ok_kv);
    if (!ok_q || !ok_kv)
        return cann_refuse(&a, ACLNN_ERR_INNER_TILING_ERROR,
                           "actualSeqLengths of shape (B,), non-decreasing prefix sums for TND", workspaceSize,
                           executor);
    aclnnStatus code;
    rule = tensor_rule(&a, sparseBlockSize, sparseMode, preTokens, nextTokens, &code);
    if (rule != NULL)
        return cann_refuse(&a, code, rule, workspaceSize, executor);
    spa_status st = spa_dsa_sparse_attention_grad_get_workspace_size(
        &a.q, a.rope ? &a.qr : NULL, &a.k, a.rope ? &a.kr : NULL, a.merge ? &a.k : &a.v, &a.idx, a.sq, a.skv, &a.o,
        &a.dy, &a.mx, &a.sm, scaleValue, sparseBlockSize, sparseMode, &a.dq, a.rope ? &a.dqr : NULL, &a.dk,
        a.rope ? &a.dkr : NULL, a.merge ? NULL : &a.dv, workspaceSize, a.c.native);
    return spa_acl_call_end(&a.c, st, spa_dsa_sparse_attention_grad, workspaceSize, executor);
}

aclnnStatus aclnnSparseFlashAttentionGrad(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                          const aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_dsa_sparse_attention_grad);
}
