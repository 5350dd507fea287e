/* NsaCompressAttention backward under libFuzzer (tests/fz_engine.h); the baseline
 * call is in tests/fz_ops.c. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_nsa_compress_attention_grad, data, size);
}
