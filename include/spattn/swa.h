/* spattn: sliding-window attention (TND layout), forward and backward.
 * Normative semantics: docs/sliding_window_attention.md. Two calls per op, as
 * every spattn operator (see spattn/nsa.h). */
#ifndef SPATTN_SWA_H
#define SPATTN_SWA_H

#include <math.h> /* NAN */

#include "spattn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* window_type: how `window` counts the band of query position t. */
#define SPA_SWA_WINDOW_KEYS 0 /* fla's window_size W: keys t-W+1 .. t (W >= 1) */
#define SPA_SWA_WINDOW_LEFT 1 /* FlashAttention's left / CANN's preTokens: keys t-left .. t
                               * (left >= 0; -1 = unbounded, plain causal) */
/* scale_value NaN (any NaN): 1/sqrt(D), fla's scale=None. */
#define SPA_SWA_SCALE_DEFAULT ((double)NAN)

/* Sliding-window attention: query [T,N1,D], key [T,N2,D], value [T,N2,Dv]
 * (N1 % N2 == 0), seq_len int64 cumulative ends (seq_len_type 0; a leading 0
 * is an empty batch, so flash-attn's cu_seqlens work) or per-batch lengths
 * (1), totalling T. Outputs: softmaxMax / softmaxSum f32 (f64 for f64
 * tensors) [T,N1,8] (8 equal lanes) or [T,N1], attentionOut [T,N1,Dv].
 * layout NULL = "TND". */
spa_status spa_swa_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_int_array *seq_len, int64_t seq_len_type, double scale_value, int64_t head_num,
    const char *input_layout, int64_t window, int64_t window_type,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
    const spa_tensor *attention_out, uint64_t *workspace_size, spa_executor *executor);
/* The same, planned for a runner of `workers` threads (0: any runner): at
 * most 4 * workers blocks, each with its own scratch, instead of the build's
 * 64 (as spa_nsa_select_get_workspace_size_for; the same bits either way). */
spa_status spa_swa_get_workspace_size_for(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_int_array *seq_len, int64_t seq_len_type, double scale_value, int64_t head_num,
    const char *input_layout, int64_t window, int64_t window_type,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
    const spa_tensor *attention_out, uint32_t workers, uint64_t *workspace_size, spa_executor *executor);
spa_status spa_swa(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                   const spa_runner *runner);

/* Its gradient: dq, dk, dv from the forward's inputs, its attentionOut and
 * statistics, and attentionOutGrad [T,N1,Dv]. Deterministic. */
spa_status spa_swa_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, const spa_int_array *seq_len,
    int64_t seq_len_type, double scale_value, int64_t head_num, const char *input_layout,
    int64_t window, int64_t window_type, const spa_tensor *dq_out, const spa_tensor *dk_out,
    const spa_tensor *dv_out, uint64_t *workspace_size, spa_executor *executor);
spa_status spa_swa_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                        const spa_runner *runner);

#ifdef __cplusplus
}
#endif
#endif
