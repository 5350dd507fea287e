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

/* The gradient of the lightning indexer's scores at the keys an index
 * selects (CANN's LightningIndexerGrad, on the union contract): with
 * s[h][j] = q[t][h] . k[x_j][n] for slot j of sparse_indices[t][n] (key
 * x_j of the token's batch; -1: nothing) and dy[t][n][j] the gradient of
 * the score I[x_j] (h = n G + g, g < G):
 *   dweights[t][h] = sum_j dy[j] ReLU(s[h][j])
 *   dquery[t][h]   = sum_j dy[j] w[t][h] [s[h][j] > 0] k[x_j][n]
 *   dkey[x][n]     = sum over (t, j) with x_j = x of dy[j] sum_g w[t][h] [s[h][j] > 0] q[t][h]
 * (a key given twice in a row counts twice; a key no index gives gets 0).
 *   query, weights, actual_seq_q_len, actual_seq_kv_len, sparse_mode: as
 *               the indexer's.
 *   key         contiguous [B, S, N2, D] or TND [T2, N2, D] (no block
 *               table: a gradient lives in the key's own layout).
 *   sparse_indices INT32 or INT64 [T, N2, K]: -1, or a key of the batch
 *               (0 <= x < L_b) that the query sees (sparse_mode 3: x at
 *               most its position); anything else is refused (161002).
 *   indices_grad [T, N2, K] (dy), the query's dtype or FLOAT32; its
 *               entries at -1 slots are not read.
 * Out: dquery_out [T, N1, D] and dkey_out (key's dims) in the query's
 * dtype, dweights_out [T, N1] in the weights' dtype. q . k, and every sum,
 * in f32 over the values widened exactly (double for FLOAT64); ReLU'(s) is
 * [s > 0] (0 for s = 0 and for a NaN s, whose ReLU, NaN, still reaches
 * dweights). dkey sums over the queries in token order, each query's
 * slots in order: bit-identical across runners and thread counts, no
 * atomics. N1 up to 256, D 1 .. 768, K 1 .. 65536, f16 / bf16 / f32 /
 * f64. */
spa_status spa_dsa_lightning_indexer_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *weights, const spa_tensor *sparse_indices,
    const spa_tensor *indices_grad, const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    int64_t sparse_mode, const spa_tensor *dquery_out, const spa_tensor *dkey_out, const spa_tensor *dweights_out,
    uint64_t *workspace_size, spa_executor *executor);
spa_status spa_dsa_lightning_indexer_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                          const spa_runner *runner);

/* Sparse attention over the tokens an index selects (CANN's
 * SparseFlashAttention, MLA-absorb and the general form; FlashMLA's sparse
 * decoding), with the union of what CANN and the public implementations
 * accept: for each query token t, query head h = n G + g (G = N1 / N2) of
 * key head n,
 *   z[r] = scale * (q[t][h] . k[r][n] + qr[t][h] . kr[r][n])
 *   out[t][h] = sum_r softmax(z)[r] * v[r][n]
 * over the rows r the token selects and sees: every slot j of
 * sparse_indices[t][n] that is not -1 selects the tokens x S .. x S + S - 1
 * of its batch (x the entry, S sparse_block_size), those below L_b, in slot
 * order then token order (a slot given twice counts twice).
 *   query       [T, N1, D]: batch 0's queries, then batch 1's, ...
 *   query_rope  [T, N1, Dr] or NULL (no rope part: Dr 0).
 *   key         paged / contiguous / TND, as the lightning indexer's:
 *               [pages, page_size, N2, D] through block_table,
 *               [B, S, N2, D], or [T2, N2, D].
 *   key_rope    key's leading dims with Dr, or NULL (with query_rope NULL).
 *   value       key's leading dims with Dv; may be key itself or a view of
 *               its first Dv elements (MLA-absorb: out = P k[:Dv]).
 *   sparse_indices INT32 [T, N2, K]: -1 (skipped, anywhere in a row) or a
 *               block x with x S < L_b; anything else is refused (161002).
 *   block_table, actual_seq_q_len, actual_seq_kv_len: as the indexer's.
 *   sparse_mode 3 (causal, CANN's rightDownCausal): query i of batch b sees
 *               the tokens up to L_b - S_b + i; 0: all L_b tokens.
 *   sparse_block_size S: 1 .. 4096, K * S at most 1048576.
 * Out: attention_out [T, N1, Dv] (the query's dtype); softmax_max_out and
 * softmax_sum_out (each NULL or [N2, T, G], FLOAT32; FLOAT64 for f64
 * inputs): M = max z, L = sum exp(z - M), as the grad reads them. A query
 * that sees no selected token gets out 0, M -FLT_MAX, L 0.
 * q . k (with the rope part) is summed in f32 (double for FLOAT64) over
 * the values widened exactly; for f16 / bf16, P is rounded to the dtype
 * before P V (f32 sums). The order of every sum is fixed by the shape, so
 * results are bit-identical across runners and thread counts. N1 1 .. 128,
 * N1 a multiple of N2, D + Dr 1 .. 768, Dv 1 .. 768, K 1 .. 65536, any page
 * size, f16 / bf16 / f32 / f64 (every float tensor of one dtype). */
spa_status spa_dsa_sparse_attention_get_workspace_size(
    const spa_tensor *query, const spa_tensor *query_rope, const spa_tensor *key, const spa_tensor *key_rope,
    const spa_tensor *value, const spa_tensor *sparse_indices, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len, double scale_value,
    int64_t sparse_block_size, int64_t sparse_mode, const spa_tensor *attention_out,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out, uint64_t *workspace_size,
    spa_executor *executor);
spa_status spa_dsa_sparse_attention(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                    const spa_runner *runner);

/* The gradient of spa_dsa_sparse_attention (CANN's SparseFlashAttentionGrad
 * on the union contract), with P recomputed from the forward's statistics:
 *   P[r] = exp(z[r] - M) / L,  dP[r] = dy[t][h] . v[r][n],
 *   Delta = dy[t][h] . out[t][h],  dS[r] = P[r] (dP[r] - Delta),
 *   dq[t][h]  = scale * sum_r dS[r] k[r][n],   dqr = scale * sum_r dS[r] kr[r][n],
 *   dk[r][n]  = scale * sum_(t,h,slot) dS q[t][h],  dkr likewise with qr,
 *   dv[r][n]  = sum_(t,h,slot) P dy[t][h],
 * over the same rows as the forward (a row selected twice by one query
 * counts twice; a row no query sees gets 0). Arguments as the forward's,
 * except:
 *   key         contiguous [B, S, N2, D] or TND [T2, N2, D] (no block
 *               table: a gradient lives in the key's own layout).
 *   attention_out, attention_out_grad [T, N1, Dv]; softmax_max,
 *               softmax_sum [N2, T, G] FLOAT32 (FLOAT64 for f64): the
 *               forward's outputs, read.
 * Out: dquery_out [T, N1, D]; dquery_rope_out [T, N1, Dr] or NULL (not
 * written); dkey_out with key's dims (rows past L_b of a contiguous key get
 * 0); dkey_rope_out with key_rope's dims or NULL; dvalue_out with value's
 * dims, or NULL when value is key or a view of its first Dv elements: dkey
 * then holds both (dk[:Dv] += dv, rounded once). A query that sees no
 * selected token gets dq 0 and adds nothing. For f16 / bf16, P and dS are
 * rounded to the dtype before the products that read them (the forward's
 * rounding); every sum is f32 (double for FLOAT64) in an order fixed by the
 * shape: dk and dv sum over the queries in token order, so the results are
 * bit-identical across runners and thread counts, without atomics. */
spa_status spa_dsa_sparse_attention_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *query_rope, const spa_tensor *key, const spa_tensor *key_rope,
    const spa_tensor *value, const spa_tensor *sparse_indices, const spa_int_array *actual_seq_q_len,
    const spa_int_array *actual_seq_kv_len, const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, double scale_value, int64_t sparse_block_size,
    int64_t sparse_mode, const spa_tensor *dquery_out, const spa_tensor *dquery_rope_out,
    const spa_tensor *dkey_out, const spa_tensor *dkey_rope_out, const spa_tensor *dvalue_out,
    uint64_t *workspace_size, spa_executor *executor);
spa_status spa_dsa_sparse_attention_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                         const spa_runner *runner);

#ifdef __cplusplus
}
#endif
#endif
