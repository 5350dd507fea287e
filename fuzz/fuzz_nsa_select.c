/* NsaSelectedAttention under libFuzzer (see engine.h). Baseline (spec/nsa.md
 * 3): f16, one batch of 24 queries over 64 keys, N1 2 over N2 1, D 48, Dv 32,
 * blocks of 16, K 2 valid block indices, no mask (the mutations add one). */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_nsa_select, data, size);
}
