"""Compressed attention (NsaCompressAttention) and sliding-window attention,
TND varlen, differentiable; and the compressed branch of the NSA layer.

Both ops are the library's (spa_nsa_compress_attention, spa_swa and their
grads); a libspattn.so built before them raises NotImplementedError naming
the missing symbol: nothing here computes them in PyTorch instead.
"""
import torch

from . import _lib, _onnx
from ._autograd import first_order_only
from .nsa import _ends, nsa_compress

_MASK_DTYPES = (torch.bool, torch.uint8)


def _require(phase1, symbol):
    if phase1 is None:
        raise NotImplementedError("spattn: %s is not in %s (a library built before it); rebuild "
                                  "libspattn.so" % (symbol, _lib.LIBRARY_PATH))


def _stat_dtype(t):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _mask(name, m):
    if m is not None:
        _lib.check_tensor(name, m, 2, _MASK_DTYPES)
        return _lib.describe(m)
    return None


class _CompressAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, atten_mask, topk_mask, cu_q, cu_cmp, cu_sel, scale, sparse_mode,
                block, stride, select_block, count):
        _require(_lib.nsa_cattn_ws, "spa_nsa_compress_attention")
        for name, t in (("query", q), ("key", k), ("value", v)):
            _lib.check_tensor(name, t, 3)
        _, sq = _ends("actual_seq_qlen", cu_q)
        _, sc = _ends("actual_cmp_seq_kvlen", cu_cmp)
        ssel = _ends("actual_sel_seq_kvlen", cu_sel)[1] if cu_sel is not None else None
        t1, n1 = q.shape[0], q.shape[1]
        out = _lib.new_output((t1, n1, v.shape[2]), q.dtype)
        mx = _lib.new_output((t1, n1, 8), _stat_dtype(q))
        sm = _lib.new_output((t1, n1, 8), _stat_dtype(q))
        topk = _lib.new_output((t1, k.shape[1], count), torch.int32)
        d = _lib.describe
        _lib.call("spa_nsa_compress_attention", _lib.nsa_cattn_ws,
                  (d(q), d(k), d(v), _mask("atten_mask", atten_mask), _mask("topk_mask", topk_mask),
                   sq[0], sc[0], ssel[0] if ssel else None, float(scale), n1, b"TND", sparse_mode,
                   block, stride, select_block, count, d(mx), d(sm), d(out), d(topk)))
        mask = atten_mask if atten_mask is not None else torch.empty(0)
        ctx.save_for_backward(q, k, v, out, mx, sm, mask)
        ctx.has_mask = atten_mask is not None
        ctx.seqs, ctx.args = (sq, sc), (float(scale), sparse_mode, block, stride)
        ctx.mark_non_differentiable(topk, mx, sm)
        ctx.set_materialize_grads(False)  # no zero tensors for the statistics
        return out, topk, mx, sm

    @staticmethod
    def symbolic(g, *args):
        return _onnx.refuse("nsa_compress_attention")

    @staticmethod
    @first_order_only
    def backward(ctx, grad_out, _grad_topk, _grad_max, _grad_sum):
        _require(_lib.nsa_cattn_grad_ws, "spa_nsa_compress_attention_grad")
        if grad_out is None:
            return (None,) * 14
        q, k, v, out, mx, sm, mask = ctx.saved_tensors
        dq = _lib.new_output(q.shape, q.dtype)
        dk = _lib.new_output(k.shape, k.dtype)
        dv = _lib.new_output(v.shape, v.dtype)
        d = _lib.describe
        sq, sc = ctx.seqs
        scale, sparse_mode, block, stride = ctx.args
        _lib.call("spa_nsa_compress_attention_grad", _lib.nsa_cattn_grad_ws,
                  (d(q), d(k), d(v), d(out), d(grad_out), d(mx), d(sm),
                   d(mask) if ctx.has_mask else None, sq[0], sc[0], scale, q.shape[1], b"TND",
                   sparse_mode, block, stride, d(dq), d(dk), d(dv)))
        need = ctx.needs_input_grad
        return ((dq if need[0] else None, dk if need[1] else None, dv if need[2] else None)
                + (None,) * 11)


def nsa_compress_attention(query, key, value, scale_value, head_num, compress_block_size,
                           compress_stride, select_block_size, select_block_count, *,
                           topk_mask=None, atten_mask=None, actual_seq_qlen,
                           actual_cmp_seq_kvlen, actual_sel_seq_kvlen=None, sparse_mode=1):
    """CANN's NsaCompressAttention (torch_npu.npu_nsa_compress_attention's
    arguments): queries attend over compressed keys, and the softmax
    probabilities, summed over the G query heads of each kv head and per
    selection block with CANN's indexing, give the top select_block_count
    blocks. query [T1, N1, D1], key [T2, N2, D1], value [T2, N2, D2] (any
    D1, D2 up to 768), TND with cumulative lengths (tensors or lists).
    atten_mask [>=maxSq, >=maxCmp] bool/uint8, nonzero = masked (score
    -FLT_MAX: a fully masked row averages the values); topk_mask [>=maxSq,
    >=maxSel], nonzero = block forced in. sparse_mode 0/1: the mask only;
    2: also the causal rule c*stride + compress_block_size - 1 <= s.
    Returns (attention_out [T1, N1, D2], topk_indices int32 [T1, N2, K]
    (descending importance, ties to the lower block, -1 past a sequence's
    blocks), softmax_max, softmax_sum [T1, N1, 8] float32 (float64 for
    float64)); attention_out is differentiable in query, key and value."""
    if head_num != query.shape[1]:
        raise ValueError("spattn: head_num (%d) must equal query's N1 (%d)"
                         % (head_num, query.shape[1]))
    return _CompressAttention.apply(query, key, value, atten_mask, topk_mask, actual_seq_qlen,
                                    actual_cmp_seq_kvlen, actual_sel_seq_kvlen, scale_value,
                                    sparse_mode, compress_block_size, compress_stride,
                                    select_block_size, select_block_count)


_WINDOW_TYPES = {"keys": 0, "left": 1}


class _SlidingWindow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, window, cu_seqlens, scale, window_type):
        _require(_lib.swa_ws, "spa_swa")
        for name, t in (("q", q), ("k", k), ("v", v)):
            _lib.check_tensor(name, t, 3)
        _, seq = _ends("cu_seqlens", cu_seqlens)
        t1, n1 = q.shape[0], q.shape[1]
        out = _lib.new_output((t1, n1, v.shape[2]), q.dtype)
        mx = _lib.new_output((t1, n1), _stat_dtype(q))
        sm = _lib.new_output((t1, n1), _stat_dtype(q))
        d = _lib.describe
        _lib.call("spa_swa", _lib.swa_ws,
                  (d(q), d(k), d(v), seq[0], 0, float(scale), n1, b"TND", window, window_type,
                   d(mx), d(sm), d(out)))
        ctx.save_for_backward(q, k, v, out, mx, sm)
        ctx.seq, ctx.args = seq, (float(scale), window, window_type)
        ctx.mark_non_differentiable(mx, sm)
        ctx.set_materialize_grads(False)
        return out, mx, sm

    @staticmethod
    def symbolic(g, *args):
        return _onnx.refuse("sliding_window_attention")

    @staticmethod
    @first_order_only
    def backward(ctx, grad_out, _grad_max, _grad_sum):
        _require(_lib.swa_grad_ws, "spa_swa_grad")
        if grad_out is None:
            return (None,) * 7
        q, k, v, out, mx, sm = ctx.saved_tensors
        dq = _lib.new_output(q.shape, q.dtype)
        dk = _lib.new_output(k.shape, k.dtype)
        dv = _lib.new_output(v.shape, v.dtype)
        d = _lib.describe
        scale, window, window_type = ctx.args
        _lib.call("spa_swa_grad", _lib.swa_grad_ws,
                  (d(q), d(k), d(v), d(out), d(grad_out), d(mx), d(sm), ctx.seq[0], 0, scale,
                   q.shape[1], b"TND", window, window_type, d(dq), d(dk), d(dv)))
        need = ctx.needs_input_grad
        return (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None,
                None, None, None, None)


def sliding_window_attention(q, k, v, window_size, cu_seqlens, scale=None, window_type="keys",
                             return_softmax=False):
    """Causal sliding-window self-attention, TND varlen: q [T, N1, D], k
    [T, N2, D], v [T, N2, Dv] (query head h uses kv head h // (N1 // N2)),
    cu_seqlens the cumulative ends (flash-attn's leading 0 taken too).
    window_type "keys" (fla's window_size W): query position t sees keys
    t-W+1 .. t of its sequence; "left" (FlashAttention's window_size[0],
    CANN's preTokens): keys t-left .. t, -1 unbounded. scale None:
    1/sqrt(D). Returns out [T, N1, Dv] (with return_softmax, also the
    softmax max and sum of the scaled scores, [T, N1])."""
    if window_type not in _WINDOW_TYPES:
        raise ValueError("spattn: window_type must be 'keys' or 'left', got %r" % (window_type,))
    if scale is None:
        scale = q.shape[-1] ** -0.5
    out, mx, sm = _SlidingWindow.apply(q, k, v, int(window_size), cu_seqlens, scale,
                                       _WINDOW_TYPES[window_type])
    return (out, mx, sm) if return_softmax else out


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
    _require(_lib.nsa_cattn_ws, "spa_nsa_compress_attention")
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
    out, slots, _, _ = _CompressAttention.apply(q, k_lead, v_lead, atten_mask, topk_mask, ends,
                                                lead_ends, None, scale, 1, block_size,
                                                block_size, block_size, max(count, 1))
    slots = slots[:, :, :count]
    slots.masked_fill_(slots.long() > (pos // block_size)[:, None, None], -1)
    return out, seen, slots
