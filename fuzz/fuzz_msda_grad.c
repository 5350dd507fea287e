/* MultiScaleDeformableAttentionGrad under libFuzzer (see engine.h).
 * Baseline: the MSDA forward one (f32, bs 2, levels 2x3 and 1x2, nh 2, C 16,
 * nq 32, np 3) with gradOutput [2, 32, 32]. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_msda_grad, data, size);
}
