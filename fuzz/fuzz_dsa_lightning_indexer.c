/* The DSA lightning indexer under libFuzzer (see fz_engine.h). Baseline
 * (tests/core/fz_ops.c): f16, a pool of 8 pages of 16 rows through a block
 * table, two sequences of 60 and 40 keys, their last 4 and 2 tokens as
 * queries, N1 4 over N2 2, D 40, f32 weights, K 24, causal, values out. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_dsa_lightning_indexer, data, size);
}
