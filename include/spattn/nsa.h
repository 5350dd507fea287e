/* spattn: Native Sparse Attention operators (TND layout).
 *
 * Every operator is two calls, as in aclnn:
 *   phase 1  spa_<op>_get_workspace_size(<aclnn arguments>, &ws_size, &executor)
 *            validates every argument, plans the work and writes only ws_size and
 *            the executor;
 *   phase 2  spa_<op>(workspace, ws_size, &executor, runner)
 *            runs the plan with caller memory (any alignment) of at least ws_size
 *            bytes, through the runner (NULL: on the calling thread).
 * Normative semantics: spec/nsa.md. */
#ifndef SPATTN_NSA_H
#define SPATTN_NSA_H

#include "spattn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NsaCompress: output[O_b+i][n][:] = sum_j weight[j][n] * input[start_b + i*stride + j][n][:].
 * input [T,N,D], weight [blockSize,N], output [sum_b n_b, N, D]; one of f16/bf16/f32.
 * layout may be NULL (= "TND"); actSeqLenType 0 = cumulative ends, 1 = per-batch lengths. */
spa_status spa_nsa_compress_get_workspace_size(
    const spa_tensor *input, const spa_tensor *weight, const spa_int_array *act_seq_len,
    const char *layout, int64_t compress_block_size, int64_t compress_stride,
    int64_t act_seq_len_type, const spa_tensor *output, uint64_t *workspace_size,
    spa_executor *executor);
spa_status spa_nsa_compress(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                            const spa_runner *runner);

/* NsaCompressGrad: inputGrad [T,N,D] and weightGrad [blockSize,N] from outputGrad
 * [sum_b n_b, N, D]. Tokens no window covers get +0. Note the aclnn argument order:
 * the layout comes after actSeqLenType here. */
spa_status spa_nsa_compress_grad_get_workspace_size(
    const spa_tensor *output_grad, const spa_tensor *input, const spa_tensor *weight,
    const spa_int_array *act_seq_len, int64_t compress_block_size, int64_t compress_stride,
    int64_t act_seq_len_type, const char *layout, const spa_tensor *input_grad,
    const spa_tensor *weight_grad, uint64_t *workspace_size, spa_executor *executor);
spa_status spa_nsa_compress_grad(void *workspace, uint64_t workspace_size,
                                 const spa_executor *executor, const spa_runner *runner);

#ifdef __cplusplus
}
#endif
#endif
