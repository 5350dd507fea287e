/* NsaSelectedAttentionGrad under libFuzzer (see engine.h). Baseline: the
 * NsaSelectedAttention one (f16, 24 queries, 64 keys, N1 2, N2 1, D 48,
 * Dv 32, blocks of 16, K 2), with the forward's outputs as inputs. */
#include "engine.h"

static const int64_t topk_vals[] = {0, 3, 1, 2, 2, 2};
static const fz_tensor_spec tensors[] = {
    {"query", SPA_FLOAT16, 3, {24, 2, 48}, FZ_IN, false, NULL, 0},
    {"key", SPA_FLOAT16, 3, {64, 1, 48}, FZ_IN, false, NULL, 0},
    {"value", SPA_FLOAT16, 3, {64, 1, 32}, FZ_IN, false, NULL, 0},
    {"attentionOut", SPA_FLOAT16, 3, {24, 2, 32}, FZ_IN, false, NULL, 0},
    {"attentionOutGrad", SPA_FLOAT16, 3, {24, 2, 32}, FZ_IN, false, NULL, 0},
    {"softmaxMax", SPA_FLOAT32, 3, {24, 2, 8}, FZ_IN, false, NULL, 0},
    {"softmaxSum", SPA_FLOAT32, 3, {24, 2, 8}, FZ_IN, false, NULL, 0},
    {"topkIndices", SPA_INT32, 3, {24, 1, 2}, FZ_INDEX, false, topk_vals, 6},
    {"attenMask", SPA_BOOL, 2, {24, 64}, FZ_IN, true, NULL, 0},
    {"dq", SPA_FLOAT16, 3, {24, 2, 48}, FZ_OUT, false, NULL, 0},
    {"dk", SPA_FLOAT16, 3, {64, 1, 48}, FZ_OUT, false, NULL, 0},
    {"dv", SPA_FLOAT16, 3, {64, 1, 32}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec arrays[] = {{{24}, 1}, {{64}, 1}};
static const int64_t attrs[] = {16, 2, 2, 0}; /* blockSize, blockCount, headNum, sparseMode */

static spa_status phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_select_grad_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3), FZ_T(c, 4), FZ_T(c, 5), FZ_T(c, 6),
        FZ_T(c, 7), FZ_A(c, 0), FZ_A(c, 1), FZ_T(c, 8), c->dattr, c->attr[0], c->attr[1],
        c->attr[2], c->layout, c->attr[3], FZ_T(c, 9), FZ_T(c, 10), FZ_T(c, 11), FZ_WS(c, ws),
        FZ_EX(c, ex));
}

static const fz_op op = {"nsa_select_grad", 12, tensors, 2, arrays, 4, attrs, 0.125, "TND",
                         phase1, spa_nsa_select_grad};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&op, data, size);
}
