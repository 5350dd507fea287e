/* MultiScaleDeformableAttnFunction under libFuzzer (see engine.h). Baseline
 * (spec/msda.md): f32, bs 2, levels 2x3 and 1x2 (nk 8), nh 2, C 16, nq 32,
 * np 3; locations drawn in [-1, 1), so many samples fall off the map. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_msda, data, size);
}
