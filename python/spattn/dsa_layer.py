"""The DeepSeek sparse attention step (DSA, DeepSeek-V3.2-Exp) on the CPU:
the lightning indexer's top-k selection, then sparse MLA over the selected
tokens, composed of the library's two operators (npu_lightning_indexer and
npu_sparse_flash_attention, python/spattn/dsa.py).

dsa_attention is Python (its checks and the clipping of K): torch.jit.script
of it is not supported; the two operators it calls script on their own.
"""
import torch

from . import _lib
from ._ops import _NO_WINDOW, _dsa_layouts, _lengths
from .dsa import npu_lightning_indexer, npu_sparse_flash_attention


def _visible_keys(key, layout_kv, actual_seq_lengths_kv):
    """The most keys a batch has (the reference's end_pos): what K is clipped
    to; None where the layout does not say it (the operators then refuse)."""
    if actual_seq_lengths_kv is None:
        return key.shape[1] if layout_kv == "BSND" and key.dim() == 4 else None
    lengths = _lengths("actual_seq_lengths_kv", actual_seq_lengths_kv, layout_kv == "TND")
    return max(lengths, default=0)


def dsa_attention(query, key, query_rope, key_rope, index_query, index_key, weights, scale_value, *,
                  sparse_count=2048, actual_seq_lengths_query=None, actual_seq_lengths_kv=None,
                  block_table=None, layout_query="BSND", layout_kv="BSND", sparse_mode=3,
                  return_indices=False):
    """DeepSeek-V3.2-Exp's sparse attention step (its inference/model.py:
    Indexer, then MLA in absorb mode), on CPU tensors:

      1. the lightning indexer scores every key a query sees (sparse_mode 3,
         causal: query i of a batch's S1 newest stands at position
         L - S1 + i and sees keys up to it; 0: all L keys),
           I[t, s] = sum_h weights[t, h] * relu(index_query[t, h] . index_key[s]),
         and keeps the top K = min(sparse_count, the batch's key count) keys
         per query (the reference's topk(min(index_topk, end_pos)) over the
         causally masked scores: a query that sees fewer keys keeps those
         it sees; equal scores by ascending key);
      2. sparse MLA over the selected keys, MLA-absorb: one latent head per
         key head, the key [key | key_rope] (D + Dr: 512 + 64 in the model),
         the value the latent key itself (key, D),
           z = scale_value * (query . key[s] + query_rope . key_rope[s]),
           attention_out[t, h] = sum_s softmax(z)[s] * key[s]
         over the selected s: the reference's dense scores with -inf outside
         the selection, softmax in float32, P rounded to the dtype before
         P V (bfloat16 / float16).

    Arguments (torch_npu's names where they overlap):
      query       [B, S1, N1, D] (BSND) / [T1, N1, D] (TND): the queries
                  absorbed into the latent space (q_nope . W_UK).
      key         [B, S2, N2, D] / [T2, N2, D]: the latent kv (kv_norm's
                  output, kv_cache); N2 = 1 in the model. PA_BSND pages with
                  block_table for inference (no key gradient there).
      query_rope  [.., N1, Dr], key_rope [.., N2, Dr]: the rotary parts.
      index_query [.., Hi, Di] (64 x 128 in the model), index_key
                  [.., N2, Di] (the key's layout, one head per key head),
                  weights [.., Hi] (float32 or the index query's dtype): the
                  indexer's, as npu_lightning_indexer takes them. The
                  reference's positive factors n_heads^-0.5 and
                  head_dim^-0.5 on the weights scale every score of a query
                  alike and do not change the selection.
      scale_value the softmax scale (the reference's qk_head_dim^-0.5, with
                  its YaRN mscale^2: not (D + Dr)^-0.5).
      sparse_count index_topk (2048), clipped to the most keys a batch has.
      actual_seq_lengths_query / _kv, layout_query, layout_kv, sparse_mode
                  as the two operators take them (the indexer's key lengths
                  are the kv's).
    Returns attention_out [.., N1, D] in the query's dtype; with
    return_indices, (attention_out, sparse_indices int32 [.., N2, K]).

    Gradient: through sparse MLA to query, query_rope, key (as the key and
    as the value) and key_rope (npu_sparse_flash_attention's grad). The
    selection is not differentiable (integer indices, as in the reference),
    and the indexer's inputs (index_query, index_key, weights, hence the
    indexer's own parameters) get no gradient from attention_out: the
    reference trains the indexer with its own loss (DeepSeek-V3.2's KL
    divergence to the main attention's distribution, on detached inputs),
    for which npu_lightning_indexer(..., return_value=True) gives the scores
    at the selected keys with their gradient.

    Not the reference's numerics: no FP8 (the reference quantizes the
    indexer's q and k to FP8 with per-128 scales, act_quant / fp8_index) and
    no Hadamard rotation (rotate_activation: orthonormal, so it leaves
    q . k unchanged up to that FP8 rounding); the indexer's products are the
    inputs' values (bfloat16 / float32, float16 and float64 too) summed in
    float32 (double for float64), so keys whose scores the reference's FP8
    rounding would reorder near the K-th may be selected differently."""
    for name, t in (("query", query), ("key", key), ("query_rope", query_rope), ("key_rope", key_rope),
                    ("index_query", index_query), ("index_key", index_key), ("weights", weights)):
        _lib.check_tensor(name, t)
    _dsa_layouts(layout_query, layout_kv, "layout_kv", _NO_WINDOW, _NO_WINDOW)
    if not isinstance(sparse_count, int) or sparse_count < 1:
        raise ValueError("spattn: dsa_attention: sparse_count is a positive int, not %r" % (sparse_count,))
    if index_key.shape[-2] != key.shape[-2]:
        raise ValueError("spattn: dsa_attention: index_key has %d heads and key %d: the indexer selects "
                         "per key head (one each in the model)" % (index_key.shape[-2], key.shape[-2]))
    visible = _visible_keys(key, layout_kv, actual_seq_lengths_kv)
    k = sparse_count if visible is None else max(1, min(sparse_count, visible))
    with torch.no_grad():  # the selection: no gradient, none for the indexer's inputs
        sparse_indices, _ = npu_lightning_indexer(
            index_query.detach(), index_key.detach(), weights.detach(),
            actual_seq_lengths_query=actual_seq_lengths_query, actual_seq_lengths_key=actual_seq_lengths_kv,
            block_table=block_table, layout_query=layout_query, layout_key=layout_kv, sparse_count=k,
            sparse_mode=sparse_mode)
    out, _, _ = npu_sparse_flash_attention(
        query, key, key, sparse_indices, scale_value, block_table=block_table,
        actual_seq_lengths_query=actual_seq_lengths_query, actual_seq_lengths_kv=actual_seq_lengths_kv,
        query_rope=query_rope, key_rope=key_rope, layout_query=layout_query, layout_kv=layout_kv,
        sparse_mode=sparse_mode, attention_mode=2)
    return (out, sparse_indices) if return_indices else out
