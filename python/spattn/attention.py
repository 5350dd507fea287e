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


def _lead_each(x, counts, pads=None):
    """x's rows per sequence (counts of them, in turn) behind one zero row
    each, and pads[b] zero rows after them."""
    zero = x.new_zeros((1,) + tuple(x.shape[1:]))
    pieces, row = [], 0
    for b, n in enumerate(counts):
        pieces += [zero, x[row:row + n]]
        if pads is not None and pads[b]:
            pieces.append(x.new_zeros((pads[b],) + tuple(x.shape[1:])))
        row += n
    return torch.cat(pieces)


class Compression:
    """The layer's compression: windows of l tokens every d, each made one
    key by weight [l, H] (NsaCompress). fla's: l = d = the selection block,
    weight 1/l (mean pooling); the paper's: l 32, d 16 under blocks of 64,
    a learnable weight. Window c covers tokens [c d, c d + l); it is seen
    by position p iff c d + l - 1 <= p; selection block j's importance is
    the probability of the windows that overlap it, summed over the group's
    heads. l must be a multiple of d (so that the windows overlapping a
    block are the l'/d + l/d - 1 of NsaCompressAttention's importance),
    at most the selection block, which d divides."""

    def __init__(self, block_size, kv_heads, dtype, l=None, d=None, weight=None):
        l = block_size if l is None else l
        d = l if d is None else d
        for name, x in (("compress_block_size", l), ("compress_stride", d)):
            if not isinstance(x, int) or isinstance(x, bool) or x < 1:
                raise ValueError("spattn: %s must be an int >= 1, got %r" % (name, x))
        if l % d or l > block_size or block_size % d:
            raise ValueError("spattn: compress_block_size (%d) must be a multiple of compress_stride (%d), "
                             "at most block_size (%d), which the stride divides" % (l, d, block_size))
        if weight is None:
            weight = torch.full((l, kv_heads), 1.0 / l, dtype=dtype)
        else:
            _lib.check_tensor("compress_weight", weight, 2)
            if tuple(weight.shape) != (l, kv_heads):
                raise ValueError("spattn: compress_weight must be [compress_block_size, H] = %s, got %s"
                                 % ((l, kv_heads), tuple(weight.shape)))
        self.l, self.d, self.weight, self.block = l, d, weight, block_size

    def windows(self, n):
        """Compressed keys of a sequence of n tokens."""
        return (n - self.l) // self.d + 1 if n >= self.l else 0

    def pad(self, n, c):
        """Zero rows after a sequence's lead and c keys so that the op's
        selection blocks reach its last block (every position's current
        block is one of them)."""
        m = self.block // self.d
        need = (-(-n // self.block) - 1) * m  # keys past the lead for ceil(n / block) blocks
        return max(0, need - c)

    def masks(self, pos, width):
        """Per query position (a column tensor), over `width` keys of a
        sequence behind its lead: the attention mask (the lead, and windows
        not yet complete) and the topk mask (the current block forced)."""
        c = torch.arange(width)[None, :]
        atten_mask = (c == 0) | ((c - 1) * self.d + self.l - 1 > pos)
        topk_mask = c == pos // self.block
        return atten_mask, topk_mask

    def select(self, q, k_cmp, v_cmp, counts, pos, mask_pos, q_ends, n_tokens, scale, count):
        """NsaCompressAttention over each sequence's compressed keys (counts
        of them in k_cmp / v_cmp, in turn) behind one leading key every query
        has masked, with zero rows after them as pad() asks: the op's
        importance of selection block j (CANN's indexing, one key further)
        is then the probability of the windows overlapping block j. pos: the
        queries' positions [T, 1]; mask_pos: the position of in-batch query
        s, [S_max, 1]; q_ends: cumulative query counts;
        n_tokens: each sequence's length. Returns (o_cmp [T, HQ, V], seen
        [T, 1, 1] (0 where a query sees no window: fla's o_cmp is 0 there),
        slots int32 [T, H, count], later blocks cleared)."""
        pads = [self.pad(n, c) for n, c in zip(n_tokens, counts)]
        k_lead, v_lead = _lead_each(k_cmp, counts, pads), _lead_each(v_cmp, counts, pads)
        widths = [1 + c + x for c, x in zip(counts, pads)]
        cum, total = [], 0
        for w in widths:
            total += w
            cum.append(total)
        rows = q.shape[0]
        # the op reads row s of the masks for in-batch query s of every
        # sequence: mask_pos [S_max, 1] is the position of row s (the same
        # in every sequence the call holds)
        atten_mask, topk_mask = self.masks(mask_pos, max(widths))
        out, slots, _, _ = nsa_compress_attention(
            q, k_lead, v_lead, scale, q.shape[1], self.l, self.d, self.block, max(count, 1),
            topk_mask=topk_mask, atten_mask=atten_mask, actual_seq_qlen=list(q_ends),
            actual_cmp_seq_kvlen=cum, sparse_mode=1)
        slots = slots[:, :, :count].clone()
        slots.masked_fill_(slots.long() > (pos // self.block)[:, :, None], -1)
        return out, (pos >= self.l - 1).reshape(rows, 1, 1), slots


def compressed_branch(q, k, v, cmp, seqs, scale, count):
    """The NSA layer's compressed branch and block selection (fla's rules,
    the compression cmp: Compression) over TND q [T, HQ, K], k [T, H, K],
    v [T, H, V] at the sequences seqs ((start, end) rows), all in the
    library's ops: k and v compressed per window (nsa_compress), then
    Compression.select with the current block forced in (fla counts it 1
    per head, more than any other block can reach but a probability of
    exactly 1, so it ranks first here) and later blocks cleared to -1.
    Returns (o_cmp [T, HQ, V], seen [T, 1, 1], slots int32 [T, H, count])."""
    rows = q.shape[0]
    ends = [e for _, e in seqs]
    pos = torch.empty(rows, 1, dtype=torch.int64)
    lengths = [e - s for s, e in seqs]
    counts = [cmp.windows(n) for n in lengths]
    for start, end in seqs:
        pos[start:end, 0] = torch.arange(end - start)
    _ops.require(_lib.nsa_cattn_ws, "spa_nsa_compress_attention")
    if sum(counts):
        k_cmp = nsa_compress(k, cmp.weight, ends, cmp.l, cmp.d)
        v_cmp = nsa_compress(v, cmp.weight, ends, cmp.l, cmp.d)
    else:  # no complete window anywhere: only the leading keys
        k_cmp = k.new_zeros((0,) + tuple(k.shape[1:]))
        v_cmp = v.new_zeros((0,) + tuple(v.shape[1:]))
    mask_pos = torch.arange(max(max(lengths), 1))[:, None]
    return cmp.select(q, k_cmp, v_cmp, counts, pos, mask_pos, ends, lengths, scale, count)
