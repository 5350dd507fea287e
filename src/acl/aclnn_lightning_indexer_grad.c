/* aclnnLightningIndexerGrad over spa_dsa_lightning_indexer_grad. CANN's
 * layouts become the native views of the same memory: a BSND query
 * [B, S1, N1, 128] (weights [B, S1, N1], dqOut and dweightsOut alike) as
 * [B * S1, ..], a TND one as it is; dy and sparseIndices, (B, S1, K) /
 * (T1, K), as the native [T, 1, K] (N2 is 1); a BSND key [B, S2, 1, 128]
 * (dkOut alike) is the native contiguous key, a TND one the native TND key.
 * The TND lengths (INT32 prefix sums) are read in phase 1 into per-batch
 * copies; a BSND call's lengths are not read (CANN's kernel takes S1 and S2
 * from the shapes and reads the lengths for TND only): their dtype is
 * checked, nothing else. Not read either, as CANN's tiling stores them and
 * nothing uses them: headNum (torch_npu passes 0, CANN's sample 64),
 * preTokens and nextTokens (sparse modes 0 and 3 have no window; the op
 * definition's default is 65536, torch_npu passes 2^63 - 1), and
 * `deterministic`: the native op is deterministic either way (sums in an
 * order fixed by the shape, no atomics).
 *
 * The codes are those the page documents (attention/lightning_indexer_grad/
 * docs/aclnnLightningIndexerGrad.md, Dec 2025 and the newer copy alike):
 * 161001 (ACLNN_ERR_PARAM_NULLPTR) for a missing required argument, 161002
 * (ACLNN_ERR_PARAM_INVALID) for dtypes, formats and the layout; the page's
 * constraints (B, N, S1, S2, D, TopK) have no code of their own there and
 * answer 161002 too, as the forward's. The missing arguments first, in the
 * order of the op_api's CheckParams. The rules:
 *  161001: query, key, dy, sparseIndices, weights, dqOut, dkOut,
 *    dweightsOut (the op_api's list), workspaceSize, executor;
 *    actualSeqQLen and actualSeqKvLen for TND (the page: "TND needs them").
 *  161002: inputLayout BSND or TND (NULL: BSND, the op definition's
 *    default); query FLOAT16 or BFLOAT16 and key, dy, weights and the three
 *    outputs of its dtype (the op definition's dtype columns pair them);
 *    sparseIndices and the lengths INT32; sparseMode 0 or 3; query, key,
 *    dqOut, dkOut 4-D for BSND, 3-D for TND, dy, sparseIndices, weights,
 *    dweightsOut one dim fewer; key N2 1; query and key D 128; query N1
 *    1..64; dy and sparseIndices (B, S1, K) / (T1, K) with K 2048; weights
 *    (B, S1, N1) / (T1, N1); each output of its input's shape; one batch
 *    count B in 1..1024 (the query's and the key's for BSND, both lengths'
 *    for TND); per batch S1 in 1..128K and S2 in K..128K (BSND: the dims;
 *    TND: the lengths, 1-D, prefix sums non-decreasing); a BSND query,
 *    weights, dy, sparseIndices and outputs with mergeable B and S1 (a view
 *    spattn takes without a copy). The native op's own refusals answer
 *    161002: an index neither -1 nor a key of its batch the query sees
 *    (sparse mode 3: at most its position L_b - S_b + i), TND query lengths
 *    not summing to T1, key lengths summing past T2.
 * Readings where CANN's sources disagree:
 *  - dy (B, S1, K) / (T1, K): the tiling's (topK is dy's last dim), the
 *    kernel tests' and torch_npu's golden test's; the page's table gives dy
 *    the query's shape (its example allocates [B, S1, N1, D]): refused.
 *  - sparseIndices and the lengths INT32: the op definition's, the
 *    kernel's and the newer page's; the Dec 2025 page's table says INT64.
 *  - N1 1..64: the newer page and tiling; the Dec 2025 ones ask 64 only.
 *  - K 2048: both pages (TopK "取值为2048"); the newest tiling accepts
 *    1..2048, the Dec 2025 one checks none. S2 >= K: the page's (the
 *    kernel clamps sparse mode 3 to the keys a query sees).
 *  - the codes: the page's. The op_api (Dec 2025 source) turns every
 *    infershape and tiling failure into a NULL l0op result and answers
 *    561103 (ACLNN_ERR_INNER_NULLPTR), a code the page does not list; and
 *    it answers an empty query with success and nothing launched: here the
 *    page's B and S1 ranges refuse it.
 * Beyond CANN: -1 anywhere in a row is skipped (CANN's kernel reads the
 * first min(K, seen) slots in sparse mode 3, all K in mode 0, and expects
 * the forward's order); every other slot counts, so rows that are not the
 * forward's (duplicates, or entries past the seen count) count in full
 * where CANN would drop them. ReLU'(0) is 0, as CANN's kernel (its golden
 * test lets s == 0 through). */
#include <stdint.h>
#include <string.h>

#include "aclnnop/aclnn_lightning_indexer_grad.h"

#include "acl_internal.h"
#include "spattn/dsa.h"

enum {
    LIG_D = 128,       /* query and key head dim */
    LIG_N1_MAX = 64,   /* query heads */
    LIG_K = 2048,      /* dy's and sparseIndices' K */
    LIG_B_MAX = 1024,  /* batches */
    LIG_S_MAX = 131072 /* S1 and S2 a batch */
};

/* The call's arguments, as native views once checked. */
typedef struct lig_args {
    spa_acl_call c;
    spa_tensor q, k, dy, idx, w, dq, dk, dw;
    const spa_int_array *sq, *skv;
    bool tnd;
} lig_args;

static aclnnStatus cann_refuse(lig_args *a, aclnnStatus code, const char *rule, const uint64_t *ws,
                               aclOpExecutor **executor)
{
    return spa_acl_call_refuse(&a->c, code, rule, spa_dsa_lightning_indexer_grad, ws, executor);
}

static const char *dtype_rule(const lig_args *a)
{
    const int32_t dt = a->q.dtype;
    if (!spa_acl_is_half(dt))
        return "query FLOAT16 or BFLOAT16";
    if (a->k.dtype != dt || a->dy.dtype != dt || a->w.dtype != dt)
        return "key, dy and weights of the query's dtype";
    if (a->dq.dtype != dt || a->dk.dtype != dt || a->dw.dtype != dt)
        return "dqOut, dkOut and dweightsOut of the query's dtype";
    if (a->idx.dtype != SPA_INT32)
        return "sparseIndices INT32";
    return NULL;
}

static const char *rank_rule(const lig_args *a)
{
    const int32_t r = a->tnd ? 3 : 4;
    if (a->q.rank != r)
        return "query of as many dims as the layout has letters";
    if (a->k.rank != r || a->dq.rank != r || a->dk.rank != r)
        return "key, dqOut and dkOut 4-D for BSND, 3-D for TND";
    if (a->dy.rank != r - 1 || a->idx.rank != r - 1 || a->w.rank != r - 1 || a->dw.rank != r - 1)
        return "dy, sparseIndices, weights and dweightsOut 3-D for BSND, 2-D for TND";
    return NULL;
}

/* CANN's one indexer shape: N2 1, D 128, N1 up to 64. */
static const char *head_rule(const lig_args *a)
{
    const int32_t r = a->q.rank;
    if (a->k.dims[r - 2] != 1)
        return "key N2 1";
    if (a->q.dims[r - 1] != LIG_D || a->k.dims[r - 1] != LIG_D)
        return "query and key D 128";
    if (a->q.dims[r - 2] < 1 || a->q.dims[r - 2] > LIG_N1_MAX)
        return "query N1 1..64";
    return NULL;
}

/* Every tensor's shape against the query's and the key's. */
static const char *shape_rule(const lig_args *a)
{
    const int32_t r = a->q.rank;
    if (!spa_acl_dims_lead(&a->dy, &a->q, r - 2) || a->dy.dims[r - 2] != LIG_K ||
        !spa_acl_dims_lead(&a->idx, &a->dy, r - 1))
        return "dy and sparseIndices (B, S1, K) / (T1, K), K 2048";
    if (!spa_acl_dims_lead(&a->w, &a->q, r - 1))
        return "weights (B, S1, N1) / (T1, N1)";
    if (!spa_acl_dims_lead(&a->dq, &a->q, r) || !spa_acl_dims_lead(&a->dk, &a->k, r) ||
        !spa_acl_dims_lead(&a->dw, &a->w, r - 1))
        return "dqOut, dkOut and dweightsOut of their input's shape";
    return NULL;
}

/* One batch count B in 1..1024: the query's and the key's (BSND), the two
 * lengths tensors' (TND). */
static const char *batch_rule(const lig_args *a)
{
    const int64_t b = a->tnd ? (int64_t)a->sq->size : a->q.dims[0];
    if (b < 1 || b > LIG_B_MAX)
        return "B in 1..1024";
    if (a->tnd ? (int64_t)a->skv->size != b : a->k.dims[0] != b)
        return "one batch count: the query's and the key's B (BSND), actualSeqQLen's and actualSeqKvLen's (TND)";
    return NULL;
}

/* S1 in 1..128K and S2 in K..128K a batch: the dims (BSND), the lengths
 * (TND). */
static bool seq_ok(int64_t s1, int64_t s2)
{
    return s1 >= 1 && s1 <= LIG_S_MAX && s2 >= LIG_K && s2 <= LIG_S_MAX;
}

static const char *seq_rule(const lig_args *a)
{
    if (!a->tnd)
        return seq_ok(a->q.dims[1], a->k.dims[1]) ? NULL : "S1 in 1..128K, S2 in K..128K";
    for (uint64_t b = 0; b < a->sq->size; b++)
        if (!seq_ok(a->sq->data[b], a->skv->data[b]))
            return "actualSeqQLen in 1..128K, actualSeqKvLen in K..128K a batch";
    return NULL;
}

/* The native views: a BSND query's tensors with B and S1 merged; dy and
 * sparseIndices [T, K] as [T, 1, K]. */
static const char *view_rule(lig_args *a)
{
    bool ok = true;
    if (!a->tnd)
        ok = spa_acl_merge_dims(&a->q, 0) && spa_acl_merge_dims(&a->w, 0) && spa_acl_merge_dims(&a->dy, 0) &&
             spa_acl_merge_dims(&a->idx, 0) && spa_acl_merge_dims(&a->dq, 0) && spa_acl_merge_dims(&a->dw, 0);
    if (!ok || !spa_acl_split_last(&a->dy, 1) || !spa_acl_split_last(&a->idx, 1))
        return "query, weights, dy, sparseIndices, dqOut and dweightsOut with mergeable B and S1 (a view spattn "
               "takes without a copy)";
    return NULL;
}

/* The rules on the loaded tensors, in order: the first broken one. */
static const char *tensor_rule(lig_args *a, int64_t mode)
{
    const char *rule;
    if ((rule = dtype_rule(a)) != NULL)
        return rule;
    if (mode != 0 && mode != 3)
        return "sparseMode 0 or 3";
    if ((rule = rank_rule(a)) != NULL || (rule = head_rule(a)) != NULL || (rule = shape_rule(a)) != NULL ||
        (rule = batch_rule(a)) != NULL || (rule = seq_rule(a)) != NULL)
        return rule;
    return view_rule(a);
}

aclnnStatus aclnnLightningIndexerGradGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *dy, const aclTensor *sparseIndices,
    const aclTensor *weights, const aclTensor *actualSeqQLenOptional, const aclTensor *actualSeqKvLenOptional,
    int64_t headNum, char *inputLayout, int64_t sparseMode, int64_t preTokens, int64_t nextTokens,
    bool deterministic, const aclTensor *dqOut, const aclTensor *dkOut, const aclTensor *dweightsOut,
    uint64_t *workspaceSize, aclOpExecutor **executor)
{
    (void)headNum, (void)preTokens, (void)nextTokens; /* stored by CANN's tiling, used by nothing */
    (void)deterministic;                              /* the native op is deterministic either way */
    lig_args a;
    memset(&a, 0, sizeof a);
    spa_acl_call_begin(&a.c, executor);
    if (query == NULL || key == NULL || dy == NULL || sparseIndices == NULL || weights == NULL || dqOut == NULL ||
        dkOut == NULL || dweightsOut == NULL || workspaceSize == NULL || executor == NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_NULLPTR,
                           "query, key, dy, sparseIndices, weights, dqOut, dkOut, dweightsOut present", workspaceSize,
                           executor);
    const char *layout = inputLayout != NULL ? inputLayout : "BSND";
    a.tnd = strcmp(layout, "TND") == 0;
    if (!a.tnd && strcmp(layout, "BSND") != 0)
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID, "inputLayout BSND or TND", workspaceSize, executor);
    if (a.tnd && (actualSeqQLenOptional == NULL || actualSeqKvLenOptional == NULL))
        return cann_refuse(&a, ACLNN_ERR_PARAM_NULLPTR, "actualSeqQLen and actualSeqKvLen present for TND",
                           workspaceSize, executor);
    if (!spa_acl_dtype_or_null(actualSeqQLenOptional, SPA_INT32) ||
        !spa_acl_dtype_or_null(actualSeqKvLenOptional, SPA_INT32))
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID, "actualSeqQLen and actualSeqKvLen INT32", workspaceSize,
                           executor);
    spa_acl_call_tensor(&a.c, query, &a.q), spa_acl_call_tensor(&a.c, key, &a.k);
    spa_acl_call_tensor(&a.c, dy, &a.dy), spa_acl_call_tensor(&a.c, sparseIndices, &a.idx);
    spa_acl_call_tensor(&a.c, weights, &a.w), spa_acl_call_tensor(&a.c, dqOut, &a.dq);
    spa_acl_call_tensor(&a.c, dkOut, &a.dk), spa_acl_call_tensor(&a.c, dweightsOut, &a.dw);
    if (a.tnd) { /* BSND: not read (CANN's kernel takes S1 and S2 from the shapes) */
        bool ok_q, ok_kv;
        a.sq = spa_acl_call_tensor_lengths(&a.c, actualSeqQLenOptional, true, &ok_q);
        a.skv = spa_acl_call_tensor_lengths(&a.c, actualSeqKvLenOptional, true, &ok_kv);
        if (!ok_q || !ok_kv)
            return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID,
                               "actualSeqQLen and actualSeqKvLen of shape (B,), non-decreasing prefix sums",
                               workspaceSize, executor);
    }
    const char *rule = tensor_rule(&a, sparseMode);
    if (rule != NULL)
        return cann_refuse(&a, ACLNN_ERR_PARAM_INVALID, rule, workspaceSize, executor);
    spa_status st = spa_dsa_lightning_indexer_grad_get_workspace_size(&a.q, &a.k, &a.w, &a.idx, &a.dy, a.sq, a.skv,
                                                                      sparseMode, &a.dq, &a.dk, &a.dw, workspaceSize,
                                                                      a.c.native);
    return spa_acl_call_end(&a.c, st, spa_dsa_lightning_indexer_grad, workspaceSize, executor);
}

aclnnStatus aclnnLightningIndexerGrad(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                      const aclrtStream stream)
{
    return spa_acl_exec_run(workspace, workspaceSize, executor, stream, spa_dsa_lightning_indexer_grad);
}
