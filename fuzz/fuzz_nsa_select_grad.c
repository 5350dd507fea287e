/* NsaSelectedAttentionGrad under libFuzzer (see engine.h). Baseline: the
 * NsaSelectedAttention one (f16, 24 queries, 64 keys, N1 2, N2 1, D 48,
 * Dv 32, blocks of 16, K 2), with the forward's outputs as inputs. */
#include "fz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_run(&fz_op_nsa_select_grad, data, size);
}
