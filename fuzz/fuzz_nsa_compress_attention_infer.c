/* Compressed attention on a cache of compressed keys under libFuzzer (see
 * fz_engine.h). Baseline (tests/core/fz_ops.c): f16, a paged pool of 6
 * pages of 8 rows, two sequences with 20 and 9 compressed keys, 2 and 1
 * queries, l 16, d 8, l' 32, K 3, causal. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_nsa_cattn_infer, data, size);
}
