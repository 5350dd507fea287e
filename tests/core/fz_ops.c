/* The six operators as the hostile-input engine (fz_engine.h) sees them:
 * one small VALID call each (tensors, sequence arrays, attributes, index
 * contents) and thunks for both phases. Shared by the fuzz harnesses
 * (fuzz/fuzz_<op>.c) and the test suite (tests/core/test_hostile.c). */
#include "fz_engine.h"

/* ---- nsa_compress ---- */
/* NsaCompress. Baseline: f32, 2 batches of
 * 48 and 32 tokens (cumulative ends), N 2, D 50 (a channel tail on every
 * layer), block 24, stride 8 (off the NPU's grid): 6 windows. */
static const fz_tensor_spec nsa_compress_tensors[] = {
    {"input", SPA_FLOAT32, 3, {80, 2, 50}, FZ_IN, false, NULL, 0},
    {"weight", SPA_FLOAT32, 2, {24, 2}, FZ_IN, false, NULL, 0},
    {"output", SPA_FLOAT32, 3, {6, 2, 50}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec nsa_compress_arrays[] = {{{48, 80}, 2}};
static const int64_t nsa_compress_attrs[] = {24, 8, 0}; /* blockSize, stride, actSeqLenType */

/* Multiply-adds bound of the compress ops: every window row of the output
 * (tensor out) reads blockSize (attr 0) input rows of N x D. With stride 1
 * and a long block, inputs within the byte caps ask for minutes. */
static double compress_work(const fz_call *c, int out)
{
    const spa_tensor *o = &c->t[out];
    if (o->rank != 3 || c->attr[0] < 0)
        return 0.0;
    return (double)o->dims[0] * (double)o->dims[1] * (double)o->dims[2] * (double)c->attr[0];
}
static double nsa_compress_work(const fz_call *c)
{
    return compress_work(c, 2);
}
static double nsa_compress_grad_work(const fz_call *c)
{
    return 2.0 * compress_work(c, 0); /* inputGrad and weightGrad, from outputGrad's windows */
}

static spa_status nsa_compress_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_compress_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_A(c, 0), c->layout,
                                               c->attr[0], c->attr[1], c->attr[2], FZ_T(c, 2),
                                               FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_nsa_compress = {
    "nsa_compress", 3, nsa_compress_tensors, 1, nsa_compress_arrays,
    3, nsa_compress_attrs, 0.0, "TND",
    nsa_compress_phase1, spa_nsa_compress, nsa_compress_work,
};

/* ---- nsa_compress_grad ---- */
/* NsaCompressGrad. Baseline: f32, batches of 48 and 32 tokens, N 2, D 20
 * (a channel tail), block 12, stride 5 (off the NPU's grid): 8 + 5 windows. */
static const fz_tensor_spec nsa_compress_grad_tensors[] = {
    {"outputGrad", SPA_FLOAT32, 3, {13, 2, 20}, FZ_IN, false, NULL, 0},
    {"input", SPA_FLOAT32, 3, {80, 2, 20}, FZ_IN, false, NULL, 0},
    {"weight", SPA_FLOAT32, 2, {12, 2}, FZ_IN, false, NULL, 0},
    {"inputGrad", SPA_FLOAT32, 3, {80, 2, 20}, FZ_OUT, false, NULL, 0},
    {"weightGrad", SPA_FLOAT32, 2, {12, 2}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec nsa_compress_grad_arrays[] = {{{48, 80}, 2}};
static const int64_t nsa_compress_grad_attrs[] = {12, 5, 0}; /* blockSize, stride, actSeqLenType */

static spa_status nsa_compress_grad_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_compress_grad_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_A(c, 0), c->attr[0], c->attr[1], c->attr[2],
        c->layout, FZ_T(c, 3), FZ_T(c, 4), FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_nsa_compress_grad = {
    "nsa_compress_grad", 5, nsa_compress_grad_tensors, 1, nsa_compress_grad_arrays,
    3, nsa_compress_grad_attrs, 0.0, "TND",
    nsa_compress_grad_phase1, spa_nsa_compress_grad, nsa_compress_grad_work,
};

/* ---- nsa_select ---- */
/* NsaSelectedAttention. Baseline (spec/nsa.md
 * 3, 0.3b): f16, one batch of 24 queries over 58 of 64 keys (a partial last
 * block), N1 2 over N2 1, D 40, Dv 20 (head-dim tails), blocks of 16, K 2
 * valid block indices with -1 padding (every third row fully padded), no mask
 * (the mutations add one). */
static const int64_t nsa_select_topk_vals[] = {0, 3, -1, -1, 2, -1};
static const fz_tensor_spec nsa_select_tensors[] = {
    {"query", SPA_FLOAT16, 3, {24, 2, 40}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT16, 3, {64, 1, 40}, FZ_IN, false, NULL, 0},
    {"value", SPA_FLOAT16, 3, {64, 1, 20}, FZ_IN, false, NULL, 0},
    {"topkIndices", SPA_INT32, 3, {24, 1, 2}, FZ_INDEX, false, nsa_select_topk_vals, 6},
    {"attenMask", SPA_BOOL, 2, {24, 64}, FZ_IN, true, NULL, 0},
    {"softmaxMax", SPA_FLOAT32, 3, {24, 2, 8}, FZ_OUT, false, NULL, 0},
    {"softmaxSum", SPA_FLOAT32, 3, {24, 2, 8}, FZ_OUT, false, NULL, 0},
    {"attentionOut", SPA_FLOAT16, 3, {24, 2, 20}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec nsa_select_arrays[] = {{{24}, 1}, {{58}, 1}};
static const int64_t nsa_select_attrs[] = {2, 0, 16, 2}; /* headNum, sparseMode, blockSize, blockCount */

static spa_status nsa_select_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_select_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4), FZ_A(c, 0), FZ_A(c, 1),
        c->dattr, c->attr[0], c->layout, c->attr[1], c->attr[2], c->attr[3], FZ_T(c, 5),
        FZ_T(c, 6), FZ_T(c, 7), FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_nsa_select = {
    "nsa_select", 8, nsa_select_tensors, 2, nsa_select_arrays,
    4, nsa_select_attrs, 0.125, "TND",
    nsa_select_phase1, spa_nsa_select, NULL,
};

/* ---- nsa_select_grad ---- */
/* NsaSelectedAttentionGrad. Baseline: the
 * NsaSelectedAttention one (f16, 24 queries, 58 of 64 keys, N1 2, N2 1, D 40,
 * Dv 20, blocks of 16, K 2 with -1 slots), with the forward's outputs as inputs. */
static const int64_t nsa_select_grad_topk_vals[] = {0, 3, -1, -1, 2, -1};
static const fz_tensor_spec nsa_select_grad_tensors[] = {
    {"query", SPA_FLOAT16, 3, {24, 2, 40}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT16, 3, {64, 1, 40}, FZ_IN, false, NULL, 0},
    {"value", SPA_FLOAT16, 3, {64, 1, 20}, FZ_IN, false, NULL, 0},
    {"attentionOut", SPA_FLOAT16, 3, {24, 2, 20}, FZ_IN, false, NULL, 0},
    {"attentionOutGrad", SPA_FLOAT16, 3, {24, 2, 20}, FZ_IN, false, NULL, 0},
    {"softmaxMax", SPA_FLOAT32, 3, {24, 2, 8}, FZ_IN, false, NULL, 0},
    {"softmaxSum", SPA_FLOAT32, 3, {24, 2, 8}, FZ_IN, false, NULL, 0},
    {"topkIndices", SPA_INT32, 3, {24, 1, 2}, FZ_INDEX, false, nsa_select_grad_topk_vals, 6},
    {"attenMask", SPA_BOOL, 2, {24, 64}, FZ_IN, true, NULL, 0},
    {"dq", SPA_FLOAT16, 3, {24, 2, 40}, FZ_OUT, false, NULL, 0},
    {"dk", SPA_FLOAT16, 3, {64, 1, 40}, FZ_OUT, false, NULL, 0},
    {"dv", SPA_FLOAT16, 3, {64, 1, 20}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec nsa_select_grad_arrays[] = {{{24}, 1}, {{58}, 1}};
static const int64_t nsa_select_grad_attrs[] = {16, 2, 2, 0}; /* blockSize, blockCount, headNum, sparseMode */

static spa_status nsa_select_grad_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_select_grad_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4), FZ_T(c, 5), FZ_T(c, 6),
        FZ_T(c, 7), FZ_A(c, 0), FZ_A(c, 1), FZ_T(c, 8), c->dattr, c->attr[0], c->attr[1],
        c->attr[2], c->layout, c->attr[3], FZ_T(c, 9), FZ_T(c, 10), FZ_T(c, 11), FZ_WS(c, ws),
        FZ_EX(c, ex));
}

const fz_op fz_op_nsa_select_grad = {
    "nsa_select_grad", 12, nsa_select_grad_tensors, 2, nsa_select_grad_arrays,
    4, nsa_select_grad_attrs, 0.125, "TND",
    nsa_select_grad_phase1, spa_nsa_select_grad, NULL,
};

/* ---- msda ---- */
/* MultiScaleDeformableAttnFunction. Baseline
 * (spec/msda.md), inside the native contract but outside the NPU's: value and
 * output f32, location f16, attnWeight bf16, bs 2, levels 2x3 and 1x2 (nk 8),
 * nh 2, C 13 (a channel tail), nq 5, np 3 (C, nq and np unique among the
 * dims, so that mutations reshape them consistently); locations drawn in
 * [-1, 1), so many samples fall off the map. */
static const int64_t msda_shape_vals[] = {2, 3, 1, 2};
static const int64_t msda_start_vals[] = {0, 6};
static const fz_tensor_spec msda_tensors[] = {
    {"value", SPA_FLOAT32, 4, {2, 8, 2, 13}, FZ_IN, false, NULL, 0},
    {"spatialShape", SPA_INT64, 2, {2, 2}, FZ_INDEX, false, msda_shape_vals, 4},
    {"levelStartIndex", SPA_INT64, 1, {2}, FZ_INDEX, false, msda_start_vals, 2},
    {"location", SPA_FLOAT16, 6, {2, 5, 2, 2, 3, 2}, FZ_IN, false, NULL, 0},
    {"attnWeight", SPA_BFLOAT16, 5, {2, 5, 2, 2, 3}, FZ_IN, false, NULL, 0},
    {"output", SPA_FLOAT32, 3, {2, 5, 26}, FZ_OUT, false, NULL, 0},
};

static spa_status msda_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_msda_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4),
                                       FZ_T(c, 5), FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_msda = {
    "msda", 6, msda_tensors, 0, NULL,
    0, NULL, 0.0, NULL,
    msda_phase1, spa_msda, NULL,
};

/* ---- msda_grad ---- */
/* MultiScaleDeformableAttentionGrad. Baseline: the MSDA forward one (bs 2,
 * levels 2x3 and 1x2, nh 2, C 13, nq 5, np 3) with gradOutput [2, 5, 26],
 * value and gradValue f32, location and gradLocation f16, the rest bf16. */
static const int64_t msda_grad_shape_vals[] = {2, 3, 1, 2};
static const int64_t msda_grad_start_vals[] = {0, 6};
static const fz_tensor_spec msda_grad_tensors[] = {
    {"value", SPA_FLOAT32, 4, {2, 8, 2, 13}, FZ_IN, false, NULL, 0},
    {"spatialShape", SPA_INT64, 2, {2, 2}, FZ_INDEX, false, msda_grad_shape_vals, 4},
    {"levelStartIndex", SPA_INT64, 1, {2}, FZ_INDEX, false, msda_grad_start_vals, 2},
    {"location", SPA_FLOAT16, 6, {2, 5, 2, 2, 3, 2}, FZ_IN, false, NULL, 0},
    {"attnWeight", SPA_BFLOAT16, 5, {2, 5, 2, 2, 3}, FZ_IN, false, NULL, 0},
    {"gradOutput", SPA_BFLOAT16, 3, {2, 5, 26}, FZ_IN, false, NULL, 0},
    {"gradValue", SPA_FLOAT32, 4, {2, 8, 2, 13}, FZ_OUT, false, NULL, 0},
    {"gradLocation", SPA_FLOAT16, 6, {2, 5, 2, 2, 3, 2}, FZ_OUT, false, NULL, 0},
    {"gradAttnWeight", SPA_BFLOAT16, 5, {2, 5, 2, 2, 3}, FZ_OUT, false, NULL, 0},
};

static spa_status msda_grad_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_msda_grad_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3),
                                            FZ_T(c, 4), FZ_T(c, 5), FZ_T(c, 6), FZ_T(c, 7),
                                            FZ_T(c, 8), FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_msda_grad = {
    "msda_grad", 9, msda_grad_tensors, 0, NULL,
    0, NULL, 0.0, NULL,
    msda_grad_phase1, spa_msda_grad, NULL,
};

/* Multiply-adds bound of the attention ops (query, key, value first): every
 * query head against every key, over both head dims. */
static double attention_work(const fz_call *c)
{
    const spa_tensor *q = &c->t[0], *k = &c->t[1], *v = &c->t[2];
    if (q->rank != 3 || k->rank != 3 || v->rank != 3)
        return 0.0;
    return (double)q->dims[0] * (double)q->dims[1] * (double)(q->dims[2] + v->dims[2]) *
           (double)k->dims[0];
}

/* ---- nsa_compress_attention ---- */
/* NsaCompressAttention (docs/nsa_compress_attention.md). Baseline: f32, 2
 * batches of 10 and 10 queries over 7 and 9 compressed keys, N1 4 over N2 2,
 * D 20, Dv 12 (head-dim tails), l 3, d 2, l' 4 (off the NPU's grid: M 2,
 * Nn 1), K 3, the causal rule (sparse mode 2); both masks given, as index
 * inputs (their bytes are read once into checked copies). */
static const int64_t nsa_cattn_mask_vals[] = {0, 0, 1, 0, 1};
static const int64_t nsa_cattn_tmask_vals[] = {0, 0, 0, 7, 0, 0};
static const fz_tensor_spec nsa_cattn_tensors[] = {
    {"query", SPA_FLOAT32, 3, {20, 4, 20}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT32, 3, {16, 2, 20}, FZ_IN, false, NULL, 0},
    {"value", SPA_FLOAT32, 3, {16, 2, 12}, FZ_IN, false, NULL, 0},
    {"attenMask", SPA_BOOL, 2, {10, 9}, FZ_INDEX, false, nsa_cattn_mask_vals, 5},
    {"topkMask", SPA_UINT8, 2, {10, 5}, FZ_INDEX, false, nsa_cattn_tmask_vals, 6},
    {"softmaxMax", SPA_FLOAT32, 3, {20, 4, 8}, FZ_OUT, false, NULL, 0},
    {"softmaxSum", SPA_FLOAT32, 3, {20, 4, 8}, FZ_OUT, false, NULL, 0},
    {"attentionOut", SPA_FLOAT32, 3, {20, 4, 12}, FZ_OUT, false, NULL, 0},
    {"topkIndices", SPA_INT32, 3, {20, 2, 3}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec nsa_cattn_arrays[] = {{{10, 20}, 2}, {{7, 16}, 2}};
/* headNum, sparseMode, compressBlockSize, compressStride, selectBlockSize, selectBlockCount */
static const int64_t nsa_cattn_attrs[] = {4, 2, 3, 2, 4, 3};

static spa_status nsa_cattn_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_compress_attention_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4), FZ_A(c, 0), FZ_A(c, 1), NULL,
        c->dattr, c->attr[0], c->layout, c->attr[1], c->attr[2], c->attr[3], c->attr[4],
        c->attr[5], FZ_T(c, 5), FZ_T(c, 6), FZ_T(c, 7), FZ_T(c, 8), FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_nsa_compress_attention = {
    "nsa_compress_attention", 9, nsa_cattn_tensors, 2, nsa_cattn_arrays,
    6, nsa_cattn_attrs, 0.25, "TND",
    nsa_cattn_phase1, spa_nsa_compress_attention, attention_work,
};

/* ---- nsa_compress_attention_grad ---- */
/* Its backward on the same problem, the forward's outputs as inputs. */
static const fz_tensor_spec nsa_cattn_grad_tensors[] = {
    {"query", SPA_FLOAT32, 3, {20, 4, 20}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT32, 3, {16, 2, 20}, FZ_IN, false, NULL, 0},
    {"value", SPA_FLOAT32, 3, {16, 2, 12}, FZ_IN, false, NULL, 0},
    {"attentionOut", SPA_FLOAT32, 3, {20, 4, 12}, FZ_IN, false, NULL, 0},
    {"attentionOutGrad", SPA_FLOAT32, 3, {20, 4, 12}, FZ_IN, false, NULL, 0},
    {"softmaxMax", SPA_FLOAT32, 3, {20, 4, 8}, FZ_IN, false, NULL, 0},
    {"softmaxSum", SPA_FLOAT32, 3, {20, 4, 8}, FZ_IN, false, NULL, 0},
    {"attenMask", SPA_BOOL, 2, {10, 9}, FZ_INDEX, false, nsa_cattn_mask_vals, 5},
    {"dq", SPA_FLOAT32, 3, {20, 4, 20}, FZ_OUT, false, NULL, 0},
    {"dk", SPA_FLOAT32, 3, {16, 2, 20}, FZ_OUT, false, NULL, 0},
    {"dv", SPA_FLOAT32, 3, {16, 2, 12}, FZ_OUT, false, NULL, 0},
};
/* headNum, sparseMode, compressBlockSize, compressStride */
static const int64_t nsa_cattn_grad_attrs[] = {4, 2, 3, 2};

static spa_status nsa_cattn_grad_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_compress_attention_grad_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4), FZ_T(c, 5), FZ_T(c, 6),
        FZ_T(c, 7), FZ_A(c, 0), FZ_A(c, 1), c->dattr, c->attr[0], c->layout, c->attr[1],
        c->attr[2], c->attr[3], FZ_T(c, 8), FZ_T(c, 9), FZ_T(c, 10), FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_nsa_compress_attention_grad = {
    "nsa_compress_attention_grad", 11, nsa_cattn_grad_tensors, 2, nsa_cattn_arrays,
    4, nsa_cattn_grad_attrs, 0.25, "TND",
    nsa_cattn_grad_phase1, spa_nsa_compress_attention_grad, attention_work,
};

/* ---- swa ---- */
/* Sliding-window attention (docs/sliding_window_attention.md). Baseline:
 * f32, batches of 13 and 20 tokens (cumulative ends), N1 4 over N2 2, D 20
 * and Dv 12 (head-dim tails), a window of 6 keys; statistics [T, N1, 8]. */
static const fz_tensor_spec swa_tensors[] = {
    {"query", SPA_FLOAT32, 3, {33, 4, 20}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT32, 3, {33, 2, 20}, FZ_IN, false, NULL, 0},
    {"value", SPA_FLOAT32, 3, {33, 2, 12}, FZ_IN, false, NULL, 0},
    {"softmaxMax", SPA_FLOAT32, 3, {33, 4, 8}, FZ_OUT, false, NULL, 0},
    {"softmaxSum", SPA_FLOAT32, 3, {33, 4, 8}, FZ_OUT, false, NULL, 0},
    {"attentionOut", SPA_FLOAT32, 3, {33, 4, 12}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec swa_arrays[] = {{{13, 33}, 2}};
static const int64_t swa_attrs[] = {0, 4, 6, 0}; /* seq_len_type, head_num, window, window_type */

static spa_status swa_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_swa_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_A(c, 0), c->attr[0],
                                      c->dattr, c->attr[1], c->layout, c->attr[2], c->attr[3],
                                      FZ_T(c, 3), FZ_T(c, 4), FZ_T(c, 5), FZ_WS(c, ws),
                                      FZ_EX(c, ex));
}

const fz_op fz_op_swa = {
    "swa", 6, swa_tensors, 1, swa_arrays,
    4, swa_attrs, 0.25, "TND",
    swa_phase1, spa_swa, attention_work,
};

/* ---- swa_grad ---- */
/* Its grad, on the same baseline (attentionOut, its grad and the
 * statistics random: the op checks shapes, not values). */
static const fz_tensor_spec swa_grad_tensors[] = {
    {"query", SPA_FLOAT32, 3, {33, 4, 20}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT32, 3, {33, 2, 20}, FZ_IN, false, NULL, 0},
    {"value", SPA_FLOAT32, 3, {33, 2, 12}, FZ_IN, false, NULL, 0},
    {"attentionOut", SPA_FLOAT32, 3, {33, 4, 12}, FZ_IN, false, NULL, 0},
    {"attentionOutGrad", SPA_FLOAT32, 3, {33, 4, 12}, FZ_IN, false, NULL, 0},
    {"softmaxMax", SPA_FLOAT32, 3, {33, 4, 8}, FZ_IN, false, NULL, 0},
    {"softmaxSum", SPA_FLOAT32, 3, {33, 4, 8}, FZ_IN, false, NULL, 0},
    {"dq", SPA_FLOAT32, 3, {33, 4, 20}, FZ_OUT, false, NULL, 0},
    {"dk", SPA_FLOAT32, 3, {33, 2, 20}, FZ_OUT, false, NULL, 0},
    {"dv", SPA_FLOAT32, 3, {33, 2, 12}, FZ_OUT, false, NULL, 0},
};

static spa_status swa_grad_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_swa_grad_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4), FZ_T(c, 5), FZ_T(c, 6),
        FZ_A(c, 0), c->attr[0], c->dattr, c->attr[1], c->layout, c->attr[2], c->attr[3],
        FZ_T(c, 7), FZ_T(c, 8), FZ_T(c, 9), FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_swa_grad = {
    "swa_grad", 10, swa_grad_tensors, 1, swa_arrays,
    4, swa_attrs, 0.25, "TND",
    swa_grad_phase1, spa_swa_grad, attention_work,
};

/* ---- nsa_select_infer ---- */
/* Selected attention on a KV cache (spattn/nsa_infer.h). Baseline: f16, two
 * sequences of 60 and 40 keys in a pool of 8 pages of 16 rows (N2 2, D 40,
 * Dv 20), their last 4 and 2 tokens as queries (N1 4), blocks of 16, K 3
 * slots with -1 padding; the block table's entries past each sequence -1. */
static const int64_t nsa_select_infer_topk_vals[] = {0, 2, -1, 1, -1, 2};
static const int64_t nsa_select_infer_table_vals[] = {3, 0, 6, 1, -1, 4, 7, 2, -1, -1};
static const fz_tensor_spec nsa_select_infer_tensors[] = {
    {"query", SPA_FLOAT16, 3, {6, 4, 40}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT16, 4, {8, 16, 2, 40}, FZ_IN, false, NULL, 0},
    {"value", SPA_FLOAT16, 4, {8, 16, 2, 20}, FZ_IN, false, NULL, 0},
    {"topkIndices", SPA_INT32, 3, {6, 2, 3}, FZ_INDEX, false, nsa_select_infer_topk_vals, 6},
    {"blockTable", SPA_INT32, 2, {2, 5}, FZ_INDEX, false, nsa_select_infer_table_vals, 10},
    {"attentionOut", SPA_FLOAT16, 3, {6, 4, 20}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec nsa_select_infer_arrays[] = {{{4, 2}, 2}, {{60, 40}, 2}};
static const int64_t nsa_select_infer_attrs[] = {16}; /* selectedBlockSize */

static spa_status nsa_select_infer_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_select_infer_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4),
                                                   FZ_A(c, 0), FZ_A(c, 1), c->dattr, c->attr[0], FZ_T(c, 5),
                                                   FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_nsa_select_infer = {
    "nsa_select_infer", 6, nsa_select_infer_tensors, 2, nsa_select_infer_arrays,
    1, nsa_select_infer_attrs, 0.125, "TND",
    nsa_select_infer_phase1, spa_nsa_select_infer, NULL,
};

/* ---- nsa_compress_cache ---- */
/* The compression of a KV cache's newest window (spattn/nsa_infer.h).
 * Baseline: f16, a pool of 6 pages of 16 rows (N 2, D 24) through a block
 * table, three sequences of 48, 40 and 20 rows (blocks of 32, stride 8: the
 * first two close a window, the third does not), slots 2, 0, 1 of a cache of
 * 4 rows. */
static const int64_t nsa_compress_cache_slot_vals[] = {2, 0, 1};
static const int64_t nsa_compress_cache_table_vals[] = {5, 1, 3, 0, 2, 4, 3, -1, -1};
static const fz_tensor_spec nsa_compress_cache_tensors[] = {
    {"input", SPA_FLOAT16, 4, {6, 16, 2, 24}, FZ_IN, false, NULL, 0},
    {"weight", SPA_FLOAT16, 2, {32, 2}, FZ_IN, false, NULL, 0},
    {"slotMapping", SPA_INT32, 1, {3}, FZ_INDEX, false, nsa_compress_cache_slot_vals, 3},
    {"blockTable", SPA_INT32, 2, {3, 3}, FZ_INDEX, false, nsa_compress_cache_table_vals, 9},
    {"outputCache", SPA_FLOAT16, 3, {4, 2, 24}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec nsa_compress_cache_arrays[] = {{{48, 40, 20}, 3}};
static const int64_t nsa_compress_cache_attrs[] = {32, 8}; /* compressBlockSize, compressStride */

static spa_status nsa_compress_cache_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_compress_with_cache_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3),
                                                          FZ_A(c, 0), c->attr[0], c->attr[1], FZ_T(c, 4),
                                                          FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_nsa_compress_cache = {
    "nsa_compress_cache", 5, nsa_compress_cache_tensors, 1, nsa_compress_cache_arrays,
    2, nsa_compress_cache_attrs, 0.0, "TND",
    nsa_compress_cache_phase1, spa_nsa_compress_with_cache, NULL,
};

/* ---- nsa_cattn_infer ---- */
/* Compressed attention on a cache of compressed keys (spattn/nsa_infer.h).
 * Baseline: f16, two sequences with 20 and 9 compressed keys in a pool of 6
 * pages of 8 rows (N2 2, D 24, Dv 16) through a block table whose entries
 * past each batch are -1, their last 2 and 1 tokens as queries (N1 4) at
 * lengths 170 and 81; l 16, d 8, l' 32, K 3, causal. */
static const int64_t nsa_cattn_infer_table_vals[] = {5, 0, 3, -1, 1, 4, -1, -1};
static const fz_tensor_spec nsa_cattn_infer_tensors[] = {
    {"query", SPA_FLOAT16, 3, {3, 4, 24}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT16, 4, {6, 8, 2, 24}, FZ_IN, false, NULL, 0},
    {"value", SPA_FLOAT16, 4, {6, 8, 2, 16}, FZ_IN, false, NULL, 0},
    {"blockTable", SPA_INT32, 2, {2, 4}, FZ_INDEX, false, nsa_cattn_infer_table_vals, 8},
    {"attentionOut", SPA_FLOAT16, 3, {3, 4, 16}, FZ_OUT, false, NULL, 0},
    {"topkIndicesOut", SPA_INT32, 3, {3, 2, 3}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec nsa_cattn_infer_arrays[] = {{{2, 1}, 2}, {{20, 9}, 2}, {{170, 81}, 2}};
/* causal, compressBlockSize, compressStride, selectBlockSize, selectBlockCount */
static const int64_t nsa_cattn_infer_attrs[] = {1, 16, 8, 32, 3};

static spa_status nsa_cattn_infer_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_compress_attention_infer_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_A(c, 0), FZ_A(c, 1), FZ_A(c, 2), c->dattr, c->attr[0],
        c->attr[1], c->attr[2], c->attr[3], c->attr[4], FZ_T(c, 4), FZ_T(c, 5), FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_nsa_cattn_infer = {
    "nsa_cattn_infer", 6, nsa_cattn_infer_tensors, 3, nsa_cattn_infer_arrays,
    5, nsa_cattn_infer_attrs, 0.125, "TND",
    nsa_cattn_infer_phase1, spa_nsa_compress_attention_infer, NULL,
};

/* ---- dsa_lightning_indexer ---- */
/* The DSA lightning indexer (spattn/dsa.h). Baseline: f16, two sequences
 * of 60 and 40 keys in a pool of 8 pages of 16 rows through a block table
 * whose entries past each sequence are -1 (N2 2, D 40), their last 4 and 2
 * tokens as queries (N1 4), f32 weights, K 24 (more than some queries
 * see), causal, values out in f16. */
static const int64_t dsa_li_table_vals[] = {3, 0, 6, 1, -1, 4, 7, 2, -1, -1};
static const fz_tensor_spec dsa_li_tensors[] = {
    {"query", SPA_FLOAT16, 3, {6, 4, 40}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT16, 4, {8, 16, 2, 40}, FZ_IN, false, NULL, 0},
    {"weights", SPA_FLOAT32, 2, {6, 4}, FZ_IN, false, NULL, 0},
    {"blockTable", SPA_INT32, 2, {2, 5}, FZ_INDEX, false, dsa_li_table_vals, 10},
    {"sparseIndicesOut", SPA_INT32, 3, {6, 2, 24}, FZ_OUT, false, NULL, 0},
    {"sparseValuesOut", SPA_FLOAT16, 3, {6, 2, 24}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec dsa_li_arrays[] = {{{4, 2}, 2}, {{60, 40}, 2}};
static const int64_t dsa_li_attrs[] = {24, 3}; /* sparseCount, sparseMode */

/* Multiply-adds bound: every query head against every row the lengths may
 * reach (the table's pages may repeat one page of the pool). */
static double dsa_li_work(const fz_call *c)
{
    const spa_tensor *q = &c->t[0], *k = &c->t[1], *tb = &c->t[3];
    if (q->rank != 3 || k->rank != 4 || tb->rank != 2)
        return 0.0;
    const double rows = c->present[3] ? (double)tb->dims[1] * (double)k->dims[1] : (double)k->dims[1];
    return (double)q->dims[0] * (double)q->dims[1] * (double)q->dims[2] * rows;
}

static spa_status dsa_li_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_dsa_lightning_indexer_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3),
                                                        FZ_A(c, 0), FZ_A(c, 1), c->attr[0], c->attr[1],
                                                        FZ_T(c, 4), FZ_T(c, 5), FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_dsa_lightning_indexer = {
    "dsa_lightning_indexer", 6, dsa_li_tensors, 2, dsa_li_arrays,
    2, dsa_li_attrs, 0.0, "TND",
    dsa_li_phase1, spa_dsa_lightning_indexer, dsa_li_work,
};

/* ---- dsa_sparse_attention ---- */
/* DSA's sparse attention (spattn/dsa.h). Baseline: bf16, two sequences of
 * 50 and 37 tokens in a pool of 8 pages of 16 rows through a block table
 * (N2 1, D 24 + rope 8, a value of its own, Dv 16), their last 3 and 2 tokens as queries (N1 4), K 12
 * slots of 2 tokens (-1 among them), causal, both statistics out. */
static const int64_t dsa_sa_table_vals[] = {3, 0, 6, 1, 4, 7, 2, 5};
static const int64_t dsa_sa_index_vals[] = {0, 5, -1, 3, 17, 1, 9, 2, -1, 11, 4, 6};
static const fz_tensor_spec dsa_sa_tensors[] = {
    {"query", SPA_BFLOAT16, 3, {5, 4, 24}, FZ_IN, false, NULL, 0},
    {"queryRope", SPA_BFLOAT16, 3, {5, 4, 8}, FZ_IN, false, NULL, 0},
    {"key", SPA_BFLOAT16, 4, {8, 16, 1, 24}, FZ_IN, false, NULL, 0},
    {"keyRope", SPA_BFLOAT16, 4, {8, 16, 1, 8}, FZ_IN, false, NULL, 0},
    {"value", SPA_BFLOAT16, 4, {8, 16, 1, 16}, FZ_IN, false, NULL, 0},
    {"sparseIndices", SPA_INT32, 3, {5, 1, 12}, FZ_INDEX, false, dsa_sa_index_vals, 12},
    {"blockTable", SPA_INT32, 2, {2, 4}, FZ_INDEX, false, dsa_sa_table_vals, 8},
    {"attentionOut", SPA_BFLOAT16, 3, {5, 4, 16}, FZ_OUT, false, NULL, 0},
    {"softmaxMax", SPA_FLOAT32, 3, {1, 5, 4}, FZ_OUT, false, NULL, 0},
    {"softmaxSum", SPA_FLOAT32, 3, {1, 5, 4}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec dsa_sa_arrays[] = {{{3, 2}, 2}, {{50, 37}, 2}};
static const int64_t dsa_sa_attrs[] = {2, 3}; /* sparseBlockSize, sparseMode */

/* Multiply-adds bound: every query head against every token its slots may
 * select, over the key, rope and value dims. */
static double dsa_sa_work(const fz_call *c)
{
    const spa_tensor *q = &c->t[0], *ix = &c->t[5], *k = &c->t[2];
    if (q->rank != 3 || ix->rank != 3 || k->rank < 3)
        return 0.0;
    const double dims = (double)q->dims[2] + 64.0 + (double)c->t[4].dims[c->t[4].rank > 0 ? c->t[4].rank - 1 : 0];
    return (double)q->dims[0] * (double)q->dims[1] * (double)ix->dims[2] * (double)c->attr[0] * dims;
}

static spa_status dsa_sa_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_dsa_sparse_attention_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4),
                                                       FZ_T(c, 5), FZ_T(c, 6), FZ_A(c, 0), FZ_A(c, 1), c->dattr,
                                                       c->attr[0], c->attr[1], FZ_T(c, 7), FZ_T(c, 8), FZ_T(c, 9),
                                                       FZ_WS(c, ws), FZ_EX(c, ex));
}

const fz_op fz_op_dsa_sparse_attention = {
    "dsa_sparse_attention", 10, dsa_sa_tensors, 2, dsa_sa_arrays,
    2, dsa_sa_attrs, 0.125, "TND",
    dsa_sa_phase1, spa_dsa_sparse_attention, dsa_sa_work,
};

/* ---- dsa_sparse_attention_grad ---- */
/* DSA sparse attention's grad (spattn/dsa.h). Baseline: bf16, a contiguous
 * key [2, 56, 1, 24] whose sequences hold 50 and 37 tokens (rope 8, a
 * value of its own, Dv 16), their last 3 and 2 tokens as queries (N1 4),
 * K 12 slots of 2 tokens (-1 among them), causal; out, its grad and the
 * statistics drawn like every input; all five gradients out. */
static const fz_tensor_spec dsa_sag_tensors[] = {
    {"query", SPA_BFLOAT16, 3, {5, 4, 24}, FZ_IN, false, NULL, 0},
    {"queryRope", SPA_BFLOAT16, 3, {5, 4, 8}, FZ_IN, false, NULL, 0},
    {"key", SPA_BFLOAT16, 4, {2, 56, 1, 24}, FZ_IN, false, NULL, 0},
    {"keyRope", SPA_BFLOAT16, 4, {2, 56, 1, 8}, FZ_IN, false, NULL, 0},
    {"value", SPA_BFLOAT16, 4, {2, 56, 1, 16}, FZ_IN, false, NULL, 0},
    {"sparseIndices", SPA_INT32, 3, {5, 1, 12}, FZ_INDEX, false, dsa_sa_index_vals, 12},
    {"attentionOut", SPA_BFLOAT16, 3, {5, 4, 16}, FZ_IN, false, NULL, 0},
    {"attentionOutGrad", SPA_BFLOAT16, 3, {5, 4, 16}, FZ_IN, false, NULL, 0},
    {"softmaxMax", SPA_FLOAT32, 3, {1, 5, 4}, FZ_IN, false, NULL, 0},
    {"softmaxSum", SPA_FLOAT32, 3, {1, 5, 4}, FZ_IN, false, NULL, 0},
    {"dqueryOut", SPA_BFLOAT16, 3, {5, 4, 24}, FZ_OUT, false, NULL, 0},
    {"dqueryRopeOut", SPA_BFLOAT16, 3, {5, 4, 8}, FZ_OUT, false, NULL, 0},
    {"dkeyOut", SPA_BFLOAT16, 4, {2, 56, 1, 24}, FZ_OUT, false, NULL, 0},
    {"dkeyRopeOut", SPA_BFLOAT16, 4, {2, 56, 1, 8}, FZ_OUT, false, NULL, 0},
    {"dvalueOut", SPA_BFLOAT16, 4, {2, 56, 1, 16}, FZ_OUT, false, NULL, 0},
};

static spa_status dsa_sag_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_dsa_sparse_attention_grad_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4), FZ_T(c, 5), FZ_A(c, 0), FZ_A(c, 1), FZ_T(c, 6),
        FZ_T(c, 7), FZ_T(c, 8), FZ_T(c, 9), c->dattr, c->attr[0], c->attr[1], FZ_T(c, 10), FZ_T(c, 11),
        FZ_T(c, 12), FZ_T(c, 13), FZ_T(c, 14), FZ_WS(c, ws), FZ_EX(c, ex));
}

/* Multiply-adds bound: the forward's, about twice over (the scores again,
 * dP, dQ, dK and dV), plus the key rows packed and reduced. */
static double dsa_sag_work(const fz_call *c)
{
    const spa_tensor *k = &c->t[2];
    const double fwd = dsa_sa_work(c);
    if (fwd <= 0.0 || k->rank < 3)
        return fwd;
    double rows = 1.0;
    for (int32_t i = 0; i < k->rank - 1; i++)
        rows *= (double)k->dims[i];
    return 2.5 * fwd + rows * 64.0;
}

const fz_op fz_op_dsa_sparse_attention_grad = {
    "dsa_sparse_attention_grad", 15, dsa_sag_tensors, 2, dsa_sa_arrays,
    2, dsa_sa_attrs, 0.125, "TND",
    dsa_sag_phase1, spa_dsa_sparse_attention_grad, dsa_sag_work,
};

/* ---- dsa_lightning_indexer_grad ---- */
/* The lightning indexer's grad (spattn/dsa.h). Baseline: f16, a contiguous
 * key [2, 64, 2, 40] whose sequences hold 60 and 40 keys (N2 2), their
 * last 4 and 2 tokens as queries (N1 4), f32 weights, INT64 indices of K
 * 12 (-1 among them, every one a key each query sees), causal, the
 * indices' gradient in f16. */
static const int64_t dsa_lig_index_vals[] = {0, 5, -1, 3, 37, 1, 9, 2, -1, 11, 4, 6};
static const fz_tensor_spec dsa_lig_tensors[] = {
    {"query", SPA_FLOAT16, 3, {6, 4, 40}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT16, 4, {2, 64, 2, 40}, FZ_IN, false, NULL, 0},
    {"weights", SPA_FLOAT32, 2, {6, 4}, FZ_IN, false, NULL, 0},
    {"sparseIndices", SPA_INT64, 3, {6, 2, 12}, FZ_INDEX, false, dsa_lig_index_vals, 12},
    {"indicesGrad", SPA_FLOAT16, 3, {6, 2, 12}, FZ_IN, false, NULL, 0},
    {"dqueryOut", SPA_FLOAT16, 3, {6, 4, 40}, FZ_OUT, false, NULL, 0},
    {"dkeyOut", SPA_FLOAT16, 4, {2, 64, 2, 40}, FZ_OUT, false, NULL, 0},
    {"dweightsOut", SPA_FLOAT32, 2, {6, 4}, FZ_OUT, false, NULL, 0},
};
static const int64_t dsa_lig_attrs[] = {3}; /* sparseMode */

/* Multiply-adds bound: three products of every query head with every
 * slot's key, and the key rows reduced. */
static double dsa_lig_work(const fz_call *c)
{
    const spa_tensor *q = &c->t[0], *ix = &c->t[3], *k = &c->t[1];
    if (q->rank != 3 || ix->rank != 3 || k->rank < 3)
        return 0.0;
    double rows = 1.0;
    for (int32_t i = 0; i < k->rank - 1; i++)
        rows *= (double)k->dims[i];
    return 3.0 * (double)q->dims[0] * (double)q->dims[1] * (double)ix->dims[2] * (double)q->dims[2] +
           rows * (double)q->dims[2];
}

static spa_status dsa_lig_phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_dsa_lightning_indexer_grad_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3),
                                                             FZ_T(c, 4), FZ_A(c, 0), FZ_A(c, 1), c->attr[0],
                                                             FZ_T(c, 5), FZ_T(c, 6), FZ_T(c, 7), FZ_WS(c, ws),
                                                             FZ_EX(c, ex));
}

const fz_op fz_op_dsa_lightning_indexer_grad = {
    "dsa_lightning_indexer_grad", 8, dsa_lig_tensors, 2, dsa_li_arrays,
    1, dsa_lig_attrs, 0.0, "TND",
    dsa_lig_phase1, spa_dsa_lightning_indexer_grad, dsa_lig_work,
};
