"""DeepSeek sparse attention (DSA): the lightning indexer.

npu_lightning_indexer is the library's spa_dsa_lightning_indexer as the
operator torch.ops.spattn.npu_lightning_indexer (python/spattn/_ops.py),
with torch_npu.npu_lightning_indexer's arguments; in a script the call is
the operator itself (keyword-only arguments with defaults, which TorchScript
cannot compile in a function, are in its schema).
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
    tensor). Not differentiable."""
    return torch.ops.spattn.npu_lightning_indexer(
        query, key, weights, actual_seq_lengths_query=actual_seq_lengths_query,
        actual_seq_lengths_key=actual_seq_lengths_key, block_table=block_table,
        layout_query=layout_query, layout_key=layout_key, sparse_count=sparse_count,
        sparse_mode=sparse_mode, pre_tokens=pre_tokens, next_tokens=next_tokens,
        return_value=return_value)


_builtins._register_builtin(npu_lightning_indexer, "%s::npu_lightning_indexer" % _ops.NAMESPACE)
