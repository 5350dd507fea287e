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

/* NsaSelectedAttention (spec/nsa.md 3): query [T1,N1,D], key [T2,N2,D],
 * value [T2,N2,Dv], topkIndices INT32 [T1,N2,K] (block numbers inside each
 * batch's KV, untrusted: checked), optional 2-D BOOL/UINT8 mask (its presence
 * with sparseMode 2 selects causal masking; contents never read), layout "TND".
 * Outputs: softmaxMax / softmaxSum FLOAT [T1,N1,8] (8 equal lanes) and
 * attentionOut [T1,N1,Dv]. */
spa_status spa_nsa_select_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *topk_indices, const spa_tensor *atten_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    double scale_value, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    int64_t selected_block_size, int64_t selected_block_count, const spa_tensor *softmax_max_out,
    const spa_tensor *softmax_sum_out, const spa_tensor *attention_out, uint64_t *workspace_size,
    spa_executor *executor);
/* The same, planned for a runner of `workers` threads (0: any runner, as
 * above): at most 4 * workers parallel blocks, each with its own scratch in
 * the workspace, instead of the build's 64, so the workspace shrinks to
 * what those threads use (the pthread pool: spa_pool_threads). Each block
 * writes its own rows: the same bits whatever the plan, and phase 2 may
 * still run on any runner. */
spa_status spa_nsa_select_get_workspace_size_for(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *topk_indices, const spa_tensor *atten_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    double scale_value, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    int64_t selected_block_size, int64_t selected_block_count, const spa_tensor *softmax_max_out,
    const spa_tensor *softmax_sum_out, const spa_tensor *attention_out, uint32_t workers,
    uint64_t *workspace_size, spa_executor *executor);
spa_status spa_nsa_select(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                          const spa_runner *runner);

/* NsaSelectedAttentionGrad (spec/nsa.md 4): dq, dk, dv from the forward's
 * inputs, its attentionOut, softmaxMax, softmaxSum and attentionOutGrad. Note
 * the aclnn attribute order differs from the forward. */
spa_status spa_nsa_select_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, const spa_tensor *topk_indices,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    const spa_tensor *atten_mask, double scale_value, int64_t selected_block_size,
    int64_t selected_block_count, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    const spa_tensor *dq_out, const spa_tensor *dk_out, const spa_tensor *dv_out,
    uint64_t *workspace_size, spa_executor *executor);
spa_status spa_nsa_select_grad(void *workspace, uint64_t workspace_size,
                               const spa_executor *executor, const spa_runner *runner);

#ifdef __cplusplus
}
#endif
#endif
