/* The compression of a KV cache's newest window under libFuzzer (see
 * fz_engine.h). Baseline (tests/core/fz_ops.c): f16, a paged pool of 6
 * pages of 16 rows, three sequences of 48, 40 and 20 rows, blocks of 32
 * with stride 8, slots 2, 0, 1 of a 4-row cache. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_nsa_compress_cache, data, size);
}
