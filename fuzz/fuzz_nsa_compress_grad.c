/* NsaCompressGrad under libFuzzer (see engine.h). Baseline: the NsaCompress
 * one (f32, batches of 48 and 32 tokens, N 2, D 48, block 32, stride 16). */
#include "engine.h"

static const fz_tensor_spec tensors[] = {
    {"outputGrad", SPA_FLOAT32, 3, {3, 2, 48}, FZ_IN, false, NULL, 0},
    {"input", SPA_FLOAT32, 3, {80, 2, 48}, FZ_IN, false, NULL, 0},
    {"weight", SPA_FLOAT32, 2, {32, 2}, FZ_IN, false, NULL, 0},
    {"inputGrad", SPA_FLOAT32, 3, {80, 2, 48}, FZ_OUT, false, NULL, 0},
    {"weightGrad", SPA_FLOAT32, 2, {32, 2}, FZ_OUT, false, NULL, 0},
};
static const fz_array_spec arrays[] = {{{48, 80}, 2}};
static const int64_t attrs[] = {32, 16, 0}; /* blockSize, stride, actSeqLenType */

static spa_status phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_nsa_compress_grad_get_workspace_size(
        FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_A(c, 0), c->attr[0], c->attr[1], c->attr[2],
        c->layout, FZ_T(c, 3), FZ_T(c, 4), FZ_WS(c, ws), FZ_EX(c, ex));
}

static const fz_op op = {"nsa_compress_grad", 5, tensors, 1, arrays, 3, attrs, 0.0, "TND",
                         phase1, spa_nsa_compress_grad};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&op, data, size);
}
