/* spattn: NsaCompressAttention, the compressed-attention branch of Native
 * Sparse Attention: queries attend over compressed keys, and the softmax
 * probabilities, summed per kv head and per selection block, pick the top-K
 * blocks the selected-attention op then reads. Normative semantics:
 * docs/nsa_compress_attention.md. Two phases as every op (spattn/nsa.h). */
#ifndef SPATTN_NSA_COMPRESS_ATTENTION_H
#define SPATTN_NSA_COMPRESS_ATTENTION_H

#include "spattn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Forward. query [T1,N1,D1], key [T2,N2,D1] and value [T2,N2,D2] (compressed),
 * optional masks (BOOL/UINT8, rank 2): atten_mask [>=maxSq, >=maxCmp]
 * (nonzero = masked), topk_mask [>=maxSq, >=maxSel] (nonzero = forced in);
 * cumulative lengths of queries and compressed keys (actual_sel_seq_kv_len
 * optional, checked, unused); sparse_mode 0/1 mask only, 2 also the causal
 * rule c*stride + blockSize - 1 <= s. Outputs: softmaxMax / softmaxSum
 * [T1,N1,8] (f32; f64 for f64), attentionOut [T1,N1,D2], topkIndices INT32
 * [T1,N2,K] (descending importance, ties to the lower block, -1 past the
 * batch's blocks). */
spa_status spa_nsa_compress_attention_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *atten_mask, const spa_tensor *topk_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    const spa_int_array *actual_sel_seq_kv_len, double scale_value, int64_t head_num,
    const char *input_layout, int64_t sparse_mode, int64_t compress_block_size,
    int64_t compress_stride, int64_t select_block_size, int64_t select_block_count,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
    const spa_tensor *attention_out, const spa_tensor *topk_indices_out,
    uint64_t *workspace_size, spa_executor *executor);
/* The same, planned for a runner of `workers` threads (0: any runner): at
 * most 4 * workers blocks, each with its own scratch, instead of the build's
 * 64 (as spa_nsa_select_get_workspace_size_for; the same bits either way). */
spa_status spa_nsa_compress_attention_get_workspace_size_for(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *atten_mask, const spa_tensor *topk_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    const spa_int_array *actual_sel_seq_kv_len, double scale_value, int64_t head_num,
    const char *input_layout, int64_t sparse_mode, int64_t compress_block_size,
    int64_t compress_stride, int64_t select_block_size, int64_t select_block_count,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
    const spa_tensor *attention_out, const spa_tensor *topk_indices_out, uint32_t workers,
    uint64_t *workspace_size, spa_executor *executor);
spa_status spa_nsa_compress_attention(void *workspace, uint64_t workspace_size,
                                      const spa_executor *executor, const spa_runner *runner);

/* Backward: dq [T1,N1,D1], dk [T2,N2,D1], dv [T2,N2,D2] from the forward's
 * inputs, its attentionOut, softmaxMax / softmaxSum and attentionOutGrad
 * [T1,N1,D2]. Masked scores get no gradient; keys no query reaches get +0. */
spa_status spa_nsa_compress_attention_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, const spa_tensor *atten_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    double scale_value, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    int64_t compress_block_size, int64_t compress_stride, const spa_tensor *dq_out,
    const spa_tensor *dk_out, const spa_tensor *dv_out, uint64_t *workspace_size,
    spa_executor *executor);
spa_status spa_nsa_compress_attention_grad(void *workspace, uint64_t workspace_size,
                                           const spa_executor *executor,
                                           const spa_runner *runner);

#ifdef __cplusplus
}
#endif
#endif
