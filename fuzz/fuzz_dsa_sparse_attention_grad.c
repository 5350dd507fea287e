/* DSA sparse attention's grad under libFuzzer (see fz_engine.h). Baseline
 * (tests/core/fz_ops.c): bf16, a contiguous key of two sequences of 50 and
 * 37 tokens, their last 3 and 2 tokens as queries, N1 4 over N2 1, D 24 +
 * rope 8, value Dv 16, K 12 slots of 2 tokens, causal, every gradient out. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_dsa_sparse_attention_grad, data, size);
}
