/* spattn: DeepSeek Sparse Attention (DSA, DeepSeek-V3.2-Exp).
 *
 * Two calls each, as every spattn operator (spattn/nsa.h). Normative
 * semantics: docs/dsa.md. */
#ifndef SPATTN_DSA_H
#define SPATTN_DSA_H

#include "spattn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The lightning indexer (CANN's LightningIndexer, with the union of what it
 * and the public implementations accept): for each query token t and key
 * head n, the scores
 *   I[s] = sum_{g < G} w[t][n G + g] * ReLU(q[t][n G + g] . k[s][n])
 * over the keys s the token sees, and the indices of the K largest.
 *   query       [T, N1, D]: the queries of batch 0, then batch 1, ...
 *               (actual_seq_q_len[b] of them; NULL: T / B each).
 *   key         paged (block_table given): [pages, page_size, N2, D], batch
 *               b's row p is row p % page_size of page
 *               block_table[b][p / page_size]; contiguous (block_table
 *               NULL): [B, S, N2, D], batch b's rows in key[b]; TND
 *               (block_table NULL): [T2, N2, D], the batches' rows one
 *               after the other (L_0 + L_1 + ... <= T2). Any strides.
 *   weights     [T, N1], the query's dtype or FLOAT32.
 *   block_table INT32 [B, max_pages] or NULL; its entries are untrusted
 *               (every page batch b's L_b rows lie on must be a page of
 *               key: checked in both phases).
 *   actual_seq_q_len[b]: S_b, the query count of batch b (NULL: T / B,
 *               T a multiple of B).
 *   actual_seq_kv_len[b]: L_b, the key count of batch b (NULL: a
 *               [B, S, N2, D] key only, every L_b = S; 161001 for a paged or
 *               TND key).
 *   sparse_mode 3 (causal, CANN's rightDownCausal): query i of batch b
 *               stands at position L_b - S_b + i and sees keys 0 .. that
 *               position (none where it is negative); 0: every query sees
 *               the batch's L_b keys.
 *   sparse_count K (1 .. 65536).
 * Out: sparse_indices_out INT32 [T, N2, K]: the min(K, seen) keys of the
 * largest I in descending order, equal values by ascending key, NaN after
 * every number; -1 past them. sparse_values_out (NULL, or [T, N2, K] in the
 * query's dtype or FLOAT32): I of each index, -inf past them.
 * q . k is summed in f32 (double for FLOAT64) over the values widened
 * exactly, ReLU, then the G products with w summed in f32 (double): the
 * order of each sum is fixed, so results do not depend on the runner or its
 * threads. Any N2 and G = N1 / N2 (N1 up to 256), D 1 .. 768, any page
 * size, f16 / bf16 / f32 / f64 (query and key of one dtype). */
spa_status spa_dsa_lightning_indexer_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *weights, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len, int64_t sparse_count,
    int64_t sparse_mode, const spa_tensor *sparse_indices_out, const spa_tensor *sparse_values_out,
    uint64_t *workspace_size, spa_executor *executor);
spa_status spa_dsa_lightning_indexer(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                     const spa_runner *runner);

#ifdef __cplusplus
}
#endif
#endif
