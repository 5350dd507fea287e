/* spattn: NSA inference on a KV cache (decode and short query chunks).
 *
 * Two calls each, as every spattn operator (spattn/nsa.h). The cache is read
 * in place through a block table: a call reads the blocks its queries select
 * and nothing else of the cache, so its cost does not grow with the context.
 * Normative semantics: docs/operators.md, "NSA inference". */
#ifndef SPATTN_NSA_INFER_H
#define SPATTN_NSA_INFER_H

#include "spattn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Selected attention of the newest queries of each sequence against its KV
 * cache (CANN's NsaSelectedAttentionInfer, with the union of what it and the
 * public implementations accept).
 *   query       [T, N1, D]: the queries of batch 0, then batch 1, ...
 *               (actual_seq_q_len[b] of them; NULL: one per batch).
 *   key, value  paged (block_table given): [pages, page_size, N2, D] and
 *               [pages, page_size, N2, Dv], any strides (a CANN-style
 *               [pages, page_size, N2 * D] buffer is this view of the same
 *               memory); batch b's row p is row p % page_size of page
 *               block_table[b][p / page_size].
 *               contiguous (block_table NULL): [B, S, N2, D] and
 *               [B, S, N2, Dv], batch b's rows in key[b].
 *   topk_indices INT32 [T, N2, K]: block numbers (block n = rows
 *               [n * bs, (n + 1) * bs) of the sequence); -1 selects nothing;
 *               a block starting after the query's position selects nothing
 *               (as fla); a block at or past the end of the sequence is
 *               refused. Duplicates count twice.
 *   block_table INT32 [B, max_pages] or NULL; its entries are untrusted.
 *   actual_seq_kv_len[b]: the sequence's length L_b (per-batch lengths, as
 *               CANN's inference operators take them).
 * Query i of a batch with S_b queries stands at position L_b - S_b + i and
 * attends the keys of its selected blocks up to that position (the queries
 * are the newest S_b tokens: bottom-right alignment). Any G = N1 / N2 (N1 up
 * to 128), D and Dv 1..768, selected_block_size a multiple of 16 up to 4096,
 * any page size, f16 / bf16 / f32 / f64 (every float tensor of one dtype).
 * attention_out [T, N1, Dv], the query's dtype. A query whose selected
 * blocks hold no visible key gets 0. */
spa_status spa_nsa_select_infer_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *topk_indices, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    double scale_value, int64_t selected_block_size, const spa_tensor *attention_out,
    uint64_t *workspace_size, spa_executor *executor);
spa_status spa_nsa_select_infer(void *workspace, uint64_t workspace_size,
                                const spa_executor *executor, const spa_runner *runner);

/* Compressed attention of the newest queries of each sequence against its
 * cache of compressed keys, and each query's top-K selection blocks (CANN's
 * NsaCompressAttentionInfer, with the union of what it and the public
 * implementations accept).
 *   query       [T, N1, D], as spa_nsa_select_infer's (actual_seq_q_len
 *               NULL: one query per batch).
 *   key, value  the compressed keys and values: paged [pages, page_size,
 *               N2, D] / [.., N2, Dv] through block_table, or contiguous
 *               [B, C, N2, D] (block_table NULL); batch b's compressed key
 *               c is row c of its cache (c < actual_cmp_seq_kv_len[b]).
 *   actual_sel_seq_kv_len[b]: L_b, the sequence's length in tokens (per
 *               batch; needed when causal, checked when given).
 *   causal 1: query i of the S_b newest stands at position L_b - S_b + i
 *               and sees compressed key c iff c * d + l - 1 <= position (a
 *               query that sees none attends every key with equal scores,
 *               as the training op's fully masked rows); 0: every query
 *               sees the batch's C_b keys (CANN without attentionMask).
 * Softmax of scale * q k over the keys seen, O = P V, then per kv head the
 * importance of each of the ceil(((C_b - 1) d + l) / l') selection blocks
 * (P summed over the G heads and the l'/d, l/d windows, as
 * NsaCompressAttention's), block 0 and the last two forced in, and the top
 * K in descending importance (ties to the lower block, -1 past the
 * blocks). l >= d >= 1, l' a multiple of d, l and l' up to 2^30, K up to
 * 4096, D and Dv up to 768, any G, f16 / bf16 / f32 / f64.
 * attention_out [T, N1, Dv] (query's dtype), topk_indices_out INT32
 * [T, N2, K]. */
spa_status spa_nsa_compress_attention_infer_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    const spa_int_array *actual_sel_seq_kv_len, double scale_value, int64_t causal, int64_t compress_block_size,
    int64_t compress_stride, int64_t select_block_size, int64_t select_block_count,
    const spa_tensor *attention_out, const spa_tensor *topk_indices_out, uint64_t *workspace_size,
    spa_executor *executor);
spa_status spa_nsa_compress_attention_infer(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                            const spa_runner *runner);

/* The compression of a KV cache's newest window (CANN's NsaCompressWithCache,
 * torch_npu's npu_nsa_compress_infer): for each batch b whose length L_b
 * closes a window (L_b >= l and (L_b - l) % d == 0), output_cache row
 * slot_mapping[b] = sum_j weight[j][n] * input row L_b - l + j (every head n,
 * channel), as spa_nsa_compress computes a window; every other row of
 * output_cache is left untouched.
 *   input        paged [pages, page_size, N, D] through block_table, or
 *                contiguous [B, S, N, D] (block_table NULL), or TND
 *                [T, N, D] (block_table NULL: the batches' rows one after
 *                the other, L_0 + L_1 + ... <= T); f16 / bf16 / f32 / f64.
 *   weight       [l, N], input's dtype.
 *   slot_mapping INT32 [B]: the output row of each batch (-1: none); the
 *                rows of the batches that write are distinct, inside
 *                output_cache.
 *   actual_seq_len[b]: L_b (per-batch lengths).
 *   output_cache [R, N, D], input's dtype (read and written in place).
 * l >= d >= 1. */
spa_status spa_nsa_compress_with_cache_get_workspace_size(
    const spa_tensor *input, const spa_tensor *weight, const spa_tensor *slot_mapping,
    const spa_tensor *block_table, const spa_int_array *actual_seq_len, int64_t compress_block_size,
    int64_t compress_stride, const spa_tensor *output_cache, uint64_t *workspace_size, spa_executor *executor);
spa_status spa_nsa_compress_with_cache(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                       const spa_runner *runner);

#ifdef __cplusplus
}
#endif
#endif
