/* Sliding-window attention grad under libFuzzer (see fz_engine.h), on
 * the baseline of tests/fz_ops.c. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_swa_grad, data, size);
}
