/* The lightning indexer's grad under libFuzzer (see fz_engine.h). Baseline
 * (tests/core/fz_ops.c): f16, a contiguous key of two sequences of 60 and
 * 40 keys (N2 2), their last 4 and 2 tokens as queries (N1 4), INT64
 * indices of K 12, causal, every gradient out. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_dsa_lightning_indexer_grad, data, size);
}
