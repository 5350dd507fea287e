"""DeepSeek sparse attention (DSA): the lightning indexer and sparse MLA.

npu_lightning_indexer and npu_sparse_flash_attention are the library's
spa_dsa_lightning_indexer and spa_dsa_sparse_attention as the operators
torch.ops.spattn.npu_lightning_indexer and
torch.ops.spattn.npu_sparse_flash_attention (python/spattn/_ops.py), with
torch_npu's arguments; in a script the call is the operator itself
(keyword-only arguments with defaults, which TorchScript cannot compile in a
function, are in its schema).
"""
import torch
from torch.jit import _builtins

from . import _ops


def npu_lightning_indexer(query, key, weights, *, actual_seq_lengths_query=None,
                          actual_seq_lengths_key=None, block_table=None, layout_query="BSND",
                          layout_key="BSND", sparse_count=2048, sparse_mode=3,
                          pre_tokens=2**63 - 1, next_tokens=2**63 - 1, return_value=False):
    """DSA's lightning indexer (torch_npu.npu_lightning_indexer's arguments):
    per query token and key head, I[s] = sum_g weights[g] * relu(q[g] . k[s])
    over the keys the token sees (sparse_mode 3: query i of a batch's S
    newest stands at position L - S + i and sees keys up to it; 0: all L
    keys), and the sparse_count keys of the largest I, descending, equal
    scores by ascending key, NaN last, -1 past the keys seen. query BSND
    [B, S1, N1, D] or TND [T1, N1, D]; key PA_BSND [blocks, block_size, N2, D]
    with block_table [B, max_blocks] (int32), BSND [B, S2, N2, D] or TND
    [T2, N2, D]; weights [B, S1, N1] / [T1, N1] (float32 or the query's
    dtype); actual_seq_lengths_query / _key int tensors, prefix sums for TND
    (required for a TND query, a TND or PA_BSND key). Any N1, N2, D up to 768,
    sparse_count up to 65536, float16 / bfloat16 / float32 / float64.
    Returns (sparse_indices int32 [B, S1, N2, K] / [T1, N2, K], sparse_values
    of the same shape in the query's dtype with return_value, else an empty
    tensor).

    Differentiable (first derivatives; a second one is refused) through
    sparse_values in query, key and weights, through the library's
    LightningIndexerGrad: sparse_values[j] = I[sparse_indices[j]] is a
    function of the inputs at the selected keys (the selection itself, and
    so sparse_indices, has no gradient; -1 slots and BSND padding rows take
    no gradient, whatever their entries of the incoming gradient hold).
    ReLU'(s) is taken as [s > 0]. Without return_value there is nothing to
    differentiate and no graph is recorded. A PA_BSND key has no gradient:
    key requiring one is refused (ValueError); the gradients of query and
    weights alone are computed (from a BSND copy of the pages)."""
    return torch.ops.spattn.npu_lightning_indexer(
        query, key, weights, actual_seq_lengths_query=actual_seq_lengths_query,
        actual_seq_lengths_key=actual_seq_lengths_key, block_table=block_table,
        layout_query=layout_query, layout_key=layout_key, sparse_count=sparse_count,
        sparse_mode=sparse_mode, pre_tokens=pre_tokens, next_tokens=next_tokens,
        return_value=return_value)


_builtins._register_builtin(npu_lightning_indexer, "%s::npu_lightning_indexer" % _ops.NAMESPACE)


def npu_sparse_flash_attention(query, key, value, sparse_indices, scale_value, *, block_table=None,
                               actual_seq_lengths_query=None, actual_seq_lengths_kv=None,
                               query_rope=None, key_rope=None, sparse_block_size=1,
                               layout_query="BSND", layout_kv="BSND", sparse_mode=3,
                               pre_tokens=2**63 - 1, next_tokens=2**63 - 1, attention_mode=0,
                               return_softmax_lse=False):
    """DSA's sparse MLA (torch_npu.npu_sparse_flash_attention's arguments):
    per query token and query head h of key head n (G = N1 / N2 heads each),
    z = scale_value * ([q | q_rope] . [k | k_rope]) over the tokens the
    token's row of sparse_indices selects, and softmax(z) . value. Each slot
    x of sparse_indices[.., n, :] selects the batch's tokens x S .. x S + S - 1
    (S sparse_block_size) below its length, in slot order (-1: nothing; a
    slot given twice counts twice); sparse_mode 3 keeps those up to query i's
    position L - S_b + i (rightDownCausal), 0 all of them. A query that sees
    no selected token gets 0.

    query BSND [B, S1, N1, D] or TND [T1, N1, D]; key and value PA_BSND
    [blocks, block_size, N2, D / Dv] with block_table [B, max_blocks] (int32),
    BSND [B, S2, N2, D / Dv] or TND [T2, N2, D / Dv]; query_rope / key_rope
    the same with Dr (both or neither); sparse_indices int32 [B, S1, N2, K] /
    [T1, N2, K]; actual_seq_lengths_query / _kv int tensors: per-batch counts,
    prefix sums for TND (required for a TND query, a TND or PA_BSND key); a
    BSND batch with fewer queries than S1 has its rows past them out 0.
    attention_mode 0 and 2 (MLA-absorb) compute the same thing with the value
    given; passing the key itself (or key[..., :Dv]) as value under MLA-absorb
    reads each key row once. Any N1 up to 128 a multiple of N2, D + Dr and Dv
    up to 768, sparse_block_size 1..4096, float16 / bfloat16 / float32 /
    float64; pre_tokens and next_tokens take only their default.

    Returns (attention_out [.., N1, Dv] in the query's dtype, softmax_max,
    softmax_sum): with return_softmax_lse the max of z and the sum of
    exp(z - max), BSND [B, N2, S1, G] / TND [N2, T1, G], float32 (float64 for
    float64 inputs; -FLT_MAX and 0 where a query sees nothing or is
    padding), else empty tensors.

    Differentiable (first derivatives; a second one is refused) in query,
    key, value, query_rope and key_rope, through the library's
    SparseFlashAttentionGrad, which recomputes P from the softmax
    statistics: under grad mode with an input that requires a gradient the
    forward computes and keeps them whatever return_softmax_lse says. The
    statistics, sparse_indices and the lengths have no gradient. BSND
    padding rows of the query and key rows that no query sees get 0. With the
    key itself (or key[..., :Dv]) as value, the key's gradient holds both
    parts. A PA_BSND key has none: key, value or key_rope requiring a
    gradient there is refused; the queries' gradients alone are computed
    (from a BSND copy of the pages)."""
    return torch.ops.spattn.npu_sparse_flash_attention(
        query, key, value, sparse_indices, scale_value, block_table=block_table,
        actual_seq_lengths_query=actual_seq_lengths_query,
        actual_seq_lengths_kv=actual_seq_lengths_kv, query_rope=query_rope, key_rope=key_rope,
        sparse_block_size=sparse_block_size, layout_query=layout_query, layout_kv=layout_kv,
        sparse_mode=sparse_mode, pre_tokens=pre_tokens, next_tokens=next_tokens,
        attention_mode=attention_mode, return_softmax_lse=return_softmax_lse)


_builtins._register_builtin(npu_sparse_flash_attention,
                            "%s::npu_sparse_flash_attention" % _ops.NAMESPACE)
