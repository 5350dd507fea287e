/* NsaCompressGrad under libFuzzer (see engine.h). Baseline: the NsaCompress
 * one (f32, batches of 48 and 32 tokens, N 2, D 48, block 32, stride 16). */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_nsa_compress_grad, data, size);
}
