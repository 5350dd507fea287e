/* The public functions of the operators a build leaves out (OPS=,
 * mk/ops.mk; SPA_BUILT_<OP> of the generated spa_ops.h): phase 1 refuses
 * with 161002 and the reason "operator not built", writing nothing but the
 * executor's refusal record; phase 2 refuses (the executor holds no plan).
 * So a firmware that names an op it did not build gets a status, never a
 * link error. The arguments are not read. */
#include "internal.h"
#include "spa_ops.h"
#include "spattn/dsa.h"
#include "spattn/msda.h"
#include "spattn/nsa.h"
#include "spattn/nsa_compress_attention.h"
#include "spattn/nsa_infer.h"
#include "spattn/swa.h"

#if !SPA_BUILT_ALL
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic ignored "-Wunused-parameter" /* the stubs read no argument */
#endif

/* The refusal of an op left out: its reason is this rule's text. */
static spa_status refuse_absent(void)
{
    SPA_REQUIRE(0 /* operator not built: it is not in this build's OPS */);
    return SPA_OK;
}

static spa_status absent_phase1(spa_executor *executor, uint32_t op)
{
    return spa_refusal_record(refuse_absent(), executor, op, 1);
}

static spa_status absent_phase2(void)
{
    return spa_public_status(refuse_absent());
}
#endif

#if !SPA_BUILT_MSDA
spa_status spa_msda_get_workspace_size(const spa_tensor *value, const spa_tensor *spatial_shape,
                                       const spa_tensor *level_start_index, const spa_tensor *location,
                                       const spa_tensor *attn_weight, const spa_tensor *output,
                                       uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_MSDA);
}

spa_status spa_msda(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                    const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_MSDA_GRAD
spa_status spa_msda_grad_get_workspace_size(const spa_tensor *value, const spa_tensor *spatial_shape,
                                            const spa_tensor *level_start_index, const spa_tensor *location,
                                            const spa_tensor *attn_weight, const spa_tensor *grad_output,
                                            const spa_tensor *grad_value, const spa_tensor *grad_location,
                                            const spa_tensor *grad_attn_weight, uint64_t *workspace_size,
                                            spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_MSDA_GRAD);
}

spa_status spa_msda_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                         const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_NSA_COMPRESS
spa_status spa_nsa_compress_get_workspace_size(const spa_tensor *input, const spa_tensor *weight,
                                               const spa_int_array *act_seq_len, const char *layout,
                                               int64_t compress_block_size, int64_t compress_stride,
                                               int64_t act_seq_len_type, const spa_tensor *output,
                                               uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_COMPRESS);
}

spa_status spa_nsa_compress(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                            const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_NSA_COMPRESS_GRAD
spa_status spa_nsa_compress_grad_get_workspace_size(const spa_tensor *output_grad, const spa_tensor *input,
                                                    const spa_tensor *weight,
                                                    const spa_int_array *act_seq_len,
                                                    int64_t compress_block_size, int64_t compress_stride,
                                                    int64_t act_seq_len_type, const char *layout,
                                                    const spa_tensor *input_grad,
                                                    const spa_tensor *weight_grad, uint64_t *workspace_size,
                                                    spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_COMPRESS_GRAD);
}

spa_status spa_nsa_compress_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                 const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_NSA_COMPRESS_WITH_CACHE
spa_status spa_nsa_compress_with_cache_get_workspace_size(const spa_tensor *input, const spa_tensor *weight,
                                                          const spa_tensor *slot_mapping,
                                                          const spa_tensor *block_table,
                                                          const spa_int_array *actual_seq_len,
                                                          int64_t compress_block_size,
                                                          int64_t compress_stride,
                                                          const spa_tensor *output_cache,
                                                          uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_COMPRESS_CACHE);
}

spa_status spa_nsa_compress_with_cache(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                       const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_NSA_COMPRESS_ATTENTION
spa_status spa_nsa_compress_attention_get_workspace_size(const spa_tensor *query, const spa_tensor *key,
                                                         const spa_tensor *value,
                                                         const spa_tensor *atten_mask,
                                                         const spa_tensor *topk_mask,
                                                         const spa_int_array *actual_seq_q_len,
                                                         const spa_int_array *actual_cmp_seq_kv_len,
                                                         const spa_int_array *actual_sel_seq_kv_len,
                                                         double scale_value, int64_t head_num,
                                                         const char *input_layout, int64_t sparse_mode,
                                                         int64_t compress_block_size, int64_t compress_stride,
                                                         int64_t select_block_size,
                                                         int64_t select_block_count,
                                                         const spa_tensor *softmax_max_out,
                                                         const spa_tensor *softmax_sum_out,
                                                         const spa_tensor *attention_out,
                                                         const spa_tensor *topk_indices_out,
                                                         uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_CATTN);
}

spa_status spa_nsa_compress_attention_get_workspace_size_for(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value, const spa_tensor *atten_mask,
    const spa_tensor *topk_mask, const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    const spa_int_array *actual_sel_seq_kv_len, double scale_value, int64_t head_num, const char *input_layout,
    int64_t sparse_mode, int64_t compress_block_size, int64_t compress_stride, int64_t select_block_size,
    int64_t select_block_count, const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
    const spa_tensor *attention_out, const spa_tensor *topk_indices_out, uint32_t workers,
    uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_CATTN);
}

spa_status spa_nsa_compress_attention(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                      const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_NSA_COMPRESS_ATTENTION_GRAD
spa_status spa_nsa_compress_attention_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value, const spa_tensor *attention_out,
    const spa_tensor *attention_out_grad, const spa_tensor *softmax_max, const spa_tensor *softmax_sum,
    const spa_tensor *atten_mask, const spa_int_array *actual_seq_q_len,
    const spa_int_array *actual_cmp_seq_kv_len, double scale_value, int64_t head_num,
    const char *input_layout, int64_t sparse_mode, int64_t compress_block_size, int64_t compress_stride,
    const spa_tensor *dq_out, const spa_tensor *dk_out, const spa_tensor *dv_out, uint64_t *workspace_size,
    spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_CATTN_GRAD);
}

spa_status spa_nsa_compress_attention_grad(void *workspace, uint64_t workspace_size,
                                           const spa_executor *executor, const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_NSA_COMPRESS_ATTENTION_INFER
spa_status spa_nsa_compress_attention_infer_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    const spa_int_array *actual_sel_seq_kv_len, double scale_value, int64_t causal,
    int64_t compress_block_size, int64_t compress_stride, int64_t select_block_size,
    int64_t select_block_count, const spa_tensor *attention_out, const spa_tensor *topk_indices_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_CATTN_INFER);
}

spa_status spa_nsa_compress_attention_infer(void *workspace, uint64_t workspace_size,
                                            const spa_executor *executor, const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_NSA_SELECT
spa_status spa_nsa_select_get_workspace_size(const spa_tensor *query, const spa_tensor *key,
                                             const spa_tensor *value, const spa_tensor *topk_indices,
                                             const spa_tensor *atten_mask,
                                             const spa_int_array *actual_seq_q_len,
                                             const spa_int_array *actual_seq_kv_len, double scale_value,
                                             int64_t head_num, const char *input_layout, int64_t sparse_mode,
                                             int64_t selected_block_size, int64_t selected_block_count,
                                             const spa_tensor *softmax_max_out,
                                             const spa_tensor *softmax_sum_out,
                                             const spa_tensor *attention_out, uint64_t *workspace_size,
                                             spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_SELECT);
}

spa_status spa_nsa_select_get_workspace_size_for(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value, const spa_tensor *topk_indices,
    const spa_tensor *atten_mask, const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    double scale_value, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    int64_t selected_block_size, int64_t selected_block_count, const spa_tensor *softmax_max_out,
    const spa_tensor *softmax_sum_out, const spa_tensor *attention_out, uint32_t workers,
    uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_SELECT);
}

spa_status spa_nsa_select(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                          const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_NSA_SELECT_GRAD
spa_status spa_nsa_select_grad_get_workspace_size(const spa_tensor *query, const spa_tensor *key,
                                                  const spa_tensor *value, const spa_tensor *attention_out,
                                                  const spa_tensor *attention_out_grad,
                                                  const spa_tensor *softmax_max,
                                                  const spa_tensor *softmax_sum,
                                                  const spa_tensor *topk_indices,
                                                  const spa_int_array *actual_seq_q_len,
                                                  const spa_int_array *actual_seq_kv_len,
                                                  const spa_tensor *atten_mask, double scale_value,
                                                  int64_t selected_block_size, int64_t selected_block_count,
                                                  int64_t head_num, const char *input_layout,
                                                  int64_t sparse_mode, const spa_tensor *dq_out,
                                                  const spa_tensor *dk_out, const spa_tensor *dv_out,
                                                  uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_SELECT_GRAD);
}

spa_status spa_nsa_select_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                               const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_NSA_SELECT_INFER
spa_status spa_nsa_select_infer_get_workspace_size(const spa_tensor *query, const spa_tensor *key,
                                                   const spa_tensor *value, const spa_tensor *topk_indices,
                                                   const spa_tensor *block_table,
                                                   const spa_int_array *actual_seq_q_len,
                                                   const spa_int_array *actual_seq_kv_len, double scale_value,
                                                   int64_t selected_block_size,
                                                   const spa_tensor *attention_out, uint64_t *workspace_size,
                                                   spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_NSA_SELECT_INFER);
}

spa_status spa_nsa_select_infer(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_SWA
spa_status spa_swa_get_workspace_size(const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
                                      const spa_int_array *seq_len, int64_t seq_len_type, double scale_value,
                                      int64_t head_num, const char *input_layout, int64_t window,
                                      int64_t window_type, const spa_tensor *softmax_max_out,
                                      const spa_tensor *softmax_sum_out, const spa_tensor *attention_out,
                                      uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_SWA);
}

spa_status spa_swa_get_workspace_size_for(const spa_tensor *query, const spa_tensor *key,
                                          const spa_tensor *value, const spa_int_array *seq_len,
                                          int64_t seq_len_type, double scale_value, int64_t head_num,
                                          const char *input_layout, int64_t window, int64_t window_type,
                                          const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out,
                                          const spa_tensor *attention_out, uint32_t workers,
                                          uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_SWA);
}

spa_status spa_swa(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                   const spa_runner *runner)
{
    return absent_phase2();
}
#endif

#if !SPA_BUILT_SWA_GRAD
spa_status spa_swa_grad_get_workspace_size(const spa_tensor *query, const spa_tensor *key,
                                           const spa_tensor *value, const spa_tensor *attention_out,
                                           const spa_tensor *attention_out_grad,
                                           const spa_tensor *softmax_max, const spa_tensor *softmax_sum,
                                           const spa_int_array *seq_len, int64_t seq_len_type,
                                           double scale_value, int64_t head_num, const char *input_layout,
                                           int64_t window, int64_t window_type, const spa_tensor *dq_out,
                                           const spa_tensor *dk_out, const spa_tensor *dv_out,
                                           uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_SWA_GRAD);
}

spa_status spa_swa_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                        const spa_runner *runner)
{
    return absent_phase2();
}

#if !SPA_BUILT_DSA_LIGHTNING_INDEXER
spa_status spa_dsa_lightning_indexer_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *weights, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len, int64_t sparse_count,
    int64_t sparse_mode, const spa_tensor *sparse_indices_out, const spa_tensor *sparse_values_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_DSA_LIGHTNING_INDEXER);
}

spa_status spa_dsa_lightning_indexer(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                     const spa_runner *runner)
{
    return absent_phase2();
}
#endif
#if !SPA_BUILT_DSA_SPARSE_ATTENTION
spa_status spa_dsa_sparse_attention_get_workspace_size(
    const spa_tensor *query, const spa_tensor *query_rope, const spa_tensor *key, const spa_tensor *key_rope,
    const spa_tensor *value, const spa_tensor *sparse_indices, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len, double scale_value,
    int64_t sparse_block_size, int64_t sparse_mode, const spa_tensor *attention_out,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out, uint64_t *workspace_size,
    spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_DSA_SPARSE_ATTENTION);
}

spa_status spa_dsa_sparse_attention(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                    const spa_runner *runner)
{
    return absent_phase2();
}
#endif
#if !SPA_BUILT_DSA_SPARSE_ATTENTION_GRAD
spa_status spa_dsa_sparse_attention_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *query_rope, const spa_tensor *key, const spa_tensor *key_rope,
    const spa_tensor *value, const spa_tensor *sparse_indices, const spa_int_array *actual_seq_q_len,
    const spa_int_array *actual_seq_kv_len, const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, double scale_value, int64_t sparse_block_size,
    int64_t sparse_mode, const spa_tensor *dquery_out, const spa_tensor *dquery_rope_out,
    const spa_tensor *dkey_out, const spa_tensor *dkey_rope_out, const spa_tensor *dvalue_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_DSA_SPARSE_ATTENTION_GRAD);
}

spa_status spa_dsa_sparse_attention_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                         const spa_runner *runner)
{
    return absent_phase2();
}
#endif
#if !SPA_BUILT_DSA_LIGHTNING_INDEXER_GRAD
spa_status spa_dsa_lightning_indexer_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *weights, const spa_tensor *sparse_indices,
    const spa_tensor *indices_grad, const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    int64_t sparse_mode, const spa_tensor *dquery_out, const spa_tensor *dkey_out, const spa_tensor *dweights_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return absent_phase1(executor, SPA_OP_DSA_LIGHTNING_INDEXER_GRAD);
}

spa_status spa_dsa_lightning_indexer_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                          const spa_runner *runner)
{
    return absent_phase2();
}
#endif
#endif
