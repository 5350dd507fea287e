"""Compressed attention (NsaCompressAttention) and sliding-window attention,
TND varlen, differentiable; and the compressed branch of the NSA layer.

Both ops are the library's, as the operators torch.ops.spattn.
nsa_compress_attention / sliding_window_attention (python/spattn/_ops.py); a
libspattn.so built before them raises NotImplementedError naming the missing
symbol: nothing here computes them in PyTorch instead.

Both functions script (torch.jit.script), with the index arguments as
tensors there: sliding_window_attention is TorchScript;
nsa_compress_attention, whose keyword-only arguments with defaults
TorchScript cannot compile, is the operator itself in a script (its schema
has this function's signature).
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch._jit_internal import boolean_dispatch
from torch.jit import _builtins

from . import _lib, _ops
from .nsa import _seqlens, nsa_compress


def nsa_compress_attention(query, key, value, scale_value, head_num, compress_block_size,
                           compress_stride, select_block_size, select_block_count, *,
                           topk_mask=None, atten_mask=None, actual_seq_qlen,
                           actual_cmp_seq_kvlen, actual_sel_seq_kvlen=None, sparse_mode=1):
    """CANN's NsaCompressAttention (torch_npu.npu_nsa_compress_attention's
    arguments): queries attend over compressed keys, and the softmax
    probabilities, summed over the G query heads of each kv head and per
    selection block with CANN's indexing, give the top select_block_count
    blocks. query [T1, N1, D1], key [T2, N2, D1], value [T2, N2, D2] (any
    D1, D2 up to 768), TND with cumulative lengths (int tensors; in eager
    code also lists). atten_mask [>=maxSq, >=maxCmp] bool/uint8, nonzero =
    masked (score -FLT_MAX: a fully masked row averages the values);
    topk_mask [>=maxSq, >=maxSel], nonzero = block forced in. sparse_mode
    0/1: the mask only; 2: also the causal rule c*stride +
    compress_block_size - 1 <= s. Returns (attention_out [T1, N1, D2],
    topk_indices int32 [T1, N2, K] (descending importance, ties to the lower
    block, -1 past a sequence's blocks), softmax_max, softmax_sum [T1, N1, 8]
    float32 (float64 for float64)); attention_out is differentiable in query,
    key and value."""
    return torch.ops.spattn.nsa_compress_attention(
        query, key, value, float(scale_value), head_num, compress_block_size, compress_stride,
        select_block_size, select_block_count, topk_mask=topk_mask, atten_mask=atten_mask,
        actual_seq_qlen=_seqlens(actual_seq_qlen),
        actual_cmp_seq_kvlen=_seqlens(actual_cmp_seq_kvlen),
        actual_sel_seq_kvlen=(None if actual_sel_seq_kvlen is None
                              else _seqlens(actual_sel_seq_kvlen)),
        sparse_mode=sparse_mode)


# In a script the call is the operator, bound by the schema's argument names.
_builtins._register_builtin(nsa_compress_attention,
                           "%s::nsa_compress_attention" % _ops.NAMESPACE)


def _window_type(window_type: str) -> int:
    if window_type == "keys":
        return 0
    if window_type == "left":
        return 1
    raise ValueError("spattn: window_type must be 'keys' or 'left', got '" + window_type + "'")


def _swa_with_softmax(q: Tensor, k: Tensor, v: Tensor, window_size: int, cu_seqlens: Tensor,
                      scale: Optional[float] = None, window_type: str = "keys",
                      return_softmax: bool = False) -> Tuple[Tensor, Tensor, Tensor]:
    if scale is None and q.shape[-1] < 1:
        raise ValueError("spattn: the head dim D of q must be >= 1 for the default scale "
                         "1/sqrt(D) (a score over no dims means nothing)")
    s = q.shape[-1] ** -0.5 if scale is None else scale
    return torch.ops.spattn.sliding_window_attention(q, k, v, int(window_size),
                                                     _seqlens(cu_seqlens), float(s),
                                                     _window_type(window_type))


def _swa(q: Tensor, k: Tensor, v: Tensor, window_size: int, cu_seqlens: Tensor,
         scale: Optional[float] = None, window_type: str = "keys",
         return_softmax: bool = False) -> Tensor:
    """Causal sliding-window self-attention, TND varlen: q [T, N1, D], k
    [T, N2, D], v [T, N2, Dv] (query head h uses kv head h // (N1 // N2)),
    cu_seqlens the cumulative ends (flash-attn's leading 0 taken too; an int
    tensor, in eager code also a list). window_type "keys" (fla's
    window_size W): query position t sees keys t-W+1 .. t of its sequence;
    "left" (FlashAttention's window_size[0], CANN's preTokens): keys
    t-left .. t, -1 unbounded. scale None: 1/sqrt(D). Returns out [T, N1, Dv]
    (with return_softmax, also the softmax max and sum of the scaled scores,
    [T, N1]; in TorchScript return_softmax must be a constant)."""
    return _swa_with_softmax(q, k, v, window_size, cu_seqlens, scale, window_type)[0]


# One name, two return types (as nsa_selected_attention's return_softmax).
sliding_window_attention = boolean_dispatch(
    arg_name="return_softmax", arg_index=7, default=False, if_true=_swa_with_softmax,
    if_false=_swa, module_name=__name__, func_name="sliding_window_attention")


def _lead_each(x, counts):
    """x's rows per sequence (counts of them, in turn) behind one zero row each."""
    zero = x.new_zeros((1,) + tuple(x.shape[1:]))
    pieces, row = [], 0
    for n in counts:
        pieces += [zero, x[row:row + n]]
        row += n
    return torch.cat(pieces)


def compressed_branch(q, k, v, weight, seqs, block_size, scale, count):
    """The NSA layer's compressed branch and block selection (fla's rules)
    over TND q [T, HQ, K], k [T, H, K], v [T, H, V] at the sequences seqs
    ((start, end) rows), all in the library's ops:
    - k and v mean-pooled per complete block (nsa_compress, weight 1/block);
    - NsaCompressAttention with l = d = l' = block_size over those blocks
      behind one leading key per sequence that every query has masked: the
      op's importance of selection block j is the probability of compressed
      key j + 1 (CANN's indexing), which behind the leading key is block j's
      own, summed over the G heads (fla's importance). The mask is fla's
      causal rule (block c seen by position p iff c < (p+1) // block); the
      topk mask forces the current block p // block in (fla counts it 1 per
      head, more than any other block can reach but a probability of exactly
      1, so it ranks first here); later blocks, of importance 0, are cleared
      to -1.
    Returns (o_cmp [T, HQ, V], seen [T, 1, 1] (0 where a query sees no
    block: fla's o_cmp is 0 there, the op's the mean of the values, so the
    gate is masked), slots int32 [T, H, count])."""
    rows = q.shape[0]
    ends = [e for _, e in seqs]
    pos = torch.empty(rows, dtype=torch.int64)
    blocks, lead_ends, total = [], [], 0
    for start, end in seqs:
        pos[start:end] = torch.arange(end - start)
        blocks.append((end - start) // block_size)
        total += blocks[-1] + 1
        lead_ends.append(total)
    seen = (pos >= block_size - 1).reshape(rows, 1, 1)
    _ops.require(_lib.nsa_cattn_ws, "spa_nsa_compress_attention")
    if sum(blocks):
        k_cmp = nsa_compress(k, weight, ends, block_size, block_size)
        v_cmp = nsa_compress(v, weight, ends, block_size, block_size)
    else:  # no complete block anywhere: only the leading keys
        k_cmp = k.new_zeros((0,) + tuple(k.shape[1:]))
        v_cmp = v.new_zeros((0,) + tuple(v.shape[1:]))
    k_lead, v_lead = _lead_each(k_cmp, blocks), _lead_each(v_cmp, blocks)
    max_len, width = max(e - s for s, e in seqs), max(blocks) + 1
    p = torch.arange(max(max_len, 1))[:, None]
    c = torch.arange(width)[None, :]
    atten_mask = (c == 0) | (c - 1 >= (p + 1) // block_size)
    topk_mask = c == p // block_size
    out, slots, _, _ = nsa_compress_attention(
        q, k_lead, v_lead, scale, q.shape[1], block_size, block_size, block_size, max(count, 1),
        topk_mask=topk_mask, atten_mask=atten_mask, actual_seq_qlen=ends,
        actual_cmp_seq_kvlen=lead_ends, sparse_mode=1)
    slots = slots[:, :, :count]
    slots.masked_fill_(slots.long() > (pos // block_size)[:, None, None], -1)
    return out, seen, slots
