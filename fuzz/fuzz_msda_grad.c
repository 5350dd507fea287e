/* MultiScaleDeformableAttentionGrad under libFuzzer (see engine.h).
 * Baseline: the MSDA forward one (f32, bs 2, levels 2x3 and 1x2, nh 2, C 16,
 * nq 32, np 3) with gradOutput [2, 32, 32]. */
#include "engine.h"

static const int64_t shape_vals[] = {2, 3, 1, 2};
static const int64_t start_vals[] = {0, 6};
static const fz_tensor_spec tensors[] = {
    {"value", SPA_FLOAT32, 4, {2, 8, 2, 16}, FZ_IN, false, NULL, 0},
    {"spatialShape", SPA_INT64, 2, {2, 2}, FZ_INDEX, false, shape_vals, 4},
    {"levelStartIndex", SPA_INT64, 1, {2}, FZ_INDEX, false, start_vals, 2},
    {"location", SPA_FLOAT32, 6, {2, 32, 2, 2, 3, 2}, FZ_IN, false, NULL, 0},
    {"attnWeight", SPA_FLOAT32, 5, {2, 32, 2, 2, 3}, FZ_IN, false, NULL, 0},
    {"gradOutput", SPA_FLOAT32, 3, {2, 32, 32}, FZ_IN, false, NULL, 0},
    {"gradValue", SPA_FLOAT32, 4, {2, 8, 2, 16}, FZ_OUT, false, NULL, 0},
    {"gradLocation", SPA_FLOAT32, 6, {2, 32, 2, 2, 3, 2}, FZ_OUT, false, NULL, 0},
    {"gradAttnWeight", SPA_FLOAT32, 5, {2, 32, 2, 2, 3}, FZ_OUT, false, NULL, 0},
};

static spa_status phase1(const fz_call *c, uint64_t *ws, spa_executor *ex)
{
    return spa_msda_grad_get_workspace_size(FZ_T(c, 0), FZ_T(c, 1), FZ_T(c, 2), FZ_T(c, 3),
                                            FZ_T(c, 4), FZ_T(c, 5), FZ_T(c, 6), FZ_T(c, 7),
                                            FZ_T(c, 8), FZ_WS(c, ws), FZ_EX(c, ex));
}

static const fz_op op = {"msda_grad", 9, tensors, 0, NULL, 0, NULL, 0.0, NULL, phase1,
                         spa_msda_grad};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&op, data, size);
}
