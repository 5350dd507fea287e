"""A whole Native Sparse Attention layer: fla's parallel_nsa on the CPU.

The layer is composed of the library's operators: nsa_compress (mean pooling
of K and V per block), the compressed attention with the block importance and
top-K selection (spa_nsa_compress_attention), nsa_selected_attention (causal)
and the sliding window (spa_swa). Each is differentiable; the selection is
not (block indices have no gradient), as in fla.

parallel_nsa itself is Python (its checks, sequence bounds and masks):
torch.jit.script of it is not supported. torch.jit.trace of a module calling
it records the operators, and the trace saves and loads (valid for the traced
shapes and cu_seqlens, the trace's constants).
"""
import warnings

import torch

from . import _lib, attention, nsa_decode
from ._autograd import first_order_only
from .nsa import nsa_selected_attention


def _sequences(cu_seqlens, batch, length):
    """(start, end) token rows of each sequence in the [B*T] order: the batch
    rows, or cu_seqlens (flash-attn's [0, e0, e1, ...]; the form without the
    leading 0 is taken too) over the one batch row."""
    if cu_seqlens is None:  # (an empty batch: one empty sequence, for the ops' arrays)
        return [(b * length, (b + 1) * length) for b in range(batch)] or [(0, 0)]
    if batch != 1:
        raise ValueError("spattn: parallel_nsa takes cu_seqlens with batch size 1 only "
                         "(the sequences are concatenated along T), got batch %d" % batch)
    if isinstance(cu_seqlens, torch.Tensor):
        _lib.check_tensor("cu_seqlens", cu_seqlens, 1, (torch.int64, torch.int32))
        cu = [int(x) for x in cu_seqlens.tolist()]
    else:
        cu = [int(x) for x in cu_seqlens]
    if not cu or cu[0] != 0:
        cu = [0] + cu
    if any(b < a for a, b in zip(cu, cu[1:])) or cu[-1] != length:
        raise ValueError("spattn: cu_seqlens must be non-decreasing and end at T = %d, got %s"
                         % (length, cu))
    # cu_seqlens [0] (no sequence, T = 0): one empty sequence, as for an empty batch
    return list(zip(cu[:-1], cu[1:])) or [(0, 0)]


def _check_gate(name, g, batch, length, heads):
    if g is None:
        raise ValueError("spattn: %s must be a [B, T, HQ] tensor here, got None" % name)
    _lib.check_tensor(name, g, 3)
    if tuple(g.shape) != (batch, length, heads):
        raise ValueError("spattn: %s must have shape %s (as q's [B, T, HQ]), got %s"
                         % (name, (batch, length, heads), tuple(g.shape)))


class _GatedSum(torch.autograd.Function):
    """sum_i o_i * g_i[..., None] over the branches (o_i [T, HQ, V], g_i
    [T, HQ], one dtype) in one output buffer, and a backward that allocates
    only the branches' gradients: at training shapes each [T, HQ, V]
    temporary of the plain expression is fresh memory whose page faults cost
    more than the arithmetic (the buffers ask for huge pages, as the ops'
    outputs do)."""

    @staticmethod
    def forward(ctx, *flat):
        outs, gates = flat[0::2], flat[1::2]
        o = torch.mul(outs[0], gates[0][..., None], out=_lib.new_output(outs[0].shape,
                                                                         outs[0].dtype))
        for x, g in zip(outs[1:], gates[1:]):
            if o.dtype == torch.float16:  # torch 1.13 has no CPU addcmul for it
                o.add_(x * g[..., None])
            else:
                o.addcmul_(x, g[..., None])
        ctx.save_for_backward(*flat)
        return o

    @staticmethod
    @first_order_only  # its branches' backwards build no graph either
    def backward(ctx, grad):
        flat = ctx.saved_tensors
        need = ctx.needs_input_grad
        grads = []
        for i in range(0, len(flat), 2):
            x, g = flat[i], flat[i + 1]
            grads.append(torch.mul(grad, g[..., None], out=_lib.new_output(x.shape, x.dtype))
                         if need[i] else None)
            dg = None
            if need[i + 1] and x.dtype in (torch.float32, torch.float64):
                v = x.shape[-1]  # a dot product per (token, head): no [T, HQ, V] temporary
                dg = torch.bmm(grad.reshape(-1, 1, v), x.reshape(-1, v, 1)).reshape(g.shape)
            elif need[i + 1]:  # torch 1.13 has no CPU bmm for float16
                dg = (grad * x).sum(-1)
            grads.append(dg)
        return tuple(grads)


def _gated_sum(branches):
    if torch.jit.is_tracing():
        # a Python autograd.Function cannot be saved in a traced module: the
        # same arithmetic (mul, then addcmul per branch) in torch's operators
        o = branches[0][0] * branches[0][1][..., None]
        for x, g in branches[1:]:
            if o.dtype == torch.float16 or x.dtype != o.dtype or g.dtype != o.dtype:
                o = o + x * g[..., None]
            else:
                o = torch.addcmul(o, x, g[..., None])
        return o
    if len({t.dtype for pair in branches for t in pair}) == 1:
        return _GatedSum.apply(*[t for pair in branches for t in pair])
    o = 0  # mixed dtypes: torch's promotion, as fla's expression
    for x, g in branches:
        o = o + x * g[..., None]
    return o


def _given_indices(block_indices, shape, seqs, block_size):
    """The caller's block_indices [B, T, H, S] as [B*T, H, S] int32 slots; as
    fla's kernel, a block that is negative, past its sequence or starting
    after the query selects nothing (-1), whatever its magnitude."""
    if not isinstance(block_indices, torch.Tensor):
        raise TypeError("spattn: block_indices must be a tensor when g_cmp is None")
    _lib.check_tensor("block_indices", block_indices, 4, (torch.int64, torch.int32))
    if tuple(block_indices.shape[:3]) != shape:
        raise ValueError("spattn: block_indices must have shape %s + (S,) ([B, T, H, S]), got %s"
                         % (shape, tuple(block_indices.shape)))
    rows = shape[0] * shape[1]
    idx = block_indices.reshape(rows, shape[2], block_indices.shape[-1]).long()
    pos = torch.empty(rows, dtype=torch.int64)
    for start, end in seqs:
        pos[start:end] = torch.arange(end - start)
    skip = (idx < 0) | (idx > (pos // block_size)[:, None, None])
    return idx.masked_fill(skip, -1).to(torch.int32)


_SELECT_MAX_BLOCK = 128  # the selected attention's largest block


def _sub_blocks(slots, block_size, seqs):
    """Selected blocks larger than the selected attention takes, as the
    sub-blocks of the largest size it takes that divides block_size: block b
    is sub-blocks b*r .. b*r + r - 1, the same keys (a -1 slot stays -1 in
    each, and so does a sub-block past the end of its sequence, the missing
    part of a partial last block). Returns (slots [T, H, count * r],
    sub-block size)."""
    if block_size <= _SELECT_MAX_BLOCK:
        return slots, block_size
    sub = max(s for s in range(16, _SELECT_MAX_BLOCK + 1, 16) if block_size % s == 0)
    r = block_size // sub
    exist = torch.empty(slots.shape[0], dtype=torch.int64)  # sub-blocks of each row's sequence
    for start, end in seqs:
        exist[start:end] = (end - start + sub - 1) // sub
    parts = slots.long()[:, :, :, None] * r + torch.arange(r)[None, None, None, :]
    gone = (slots < 0)[:, :, :, None] | (parts >= exist[:, None, None, None])
    parts = parts.masked_fill(gone, -1)
    return parts.reshape(slots.shape[0], slots.shape[1], -1).to(torch.int32), sub


def parallel_nsa(q, k, v, g_cmp, g_slc, g_swa, block_indices=None, block_counts=16,
                 block_size=64, window_size=0, scale=None, cu_seqlens=None, head_first=False, *,
                 compress_block_size=None, compress_stride=None, compress_weight=None):
    """fla's parallel_nsa (fla-org/native-sparse-attention) on CPU tensors,
    differentiable in q, k, v and the three gates.

    q [B, T, HQ, K], k [B, T, H, K], v [B, T, H, V], gates [B, T, HQ]
    (head_first: [B, HQ, T, K], [B, H, T, *], gates [B, HQ, T]) -> o
    [B, T, HQ, V] ([B, HQ, T, V]). Any G = HQ / H >= 1, any K and V the
    operators take, any T (a sequence's last partial block is never seen
    compressed, and is selected as the current block). cu_seqlens (B == 1):
    the sequences' cumulative bounds along T, flash-attn's form.

    g_cmp given: the compressed branch runs and selects the blocks
    (block_indices is ignored, with a warning, as in fla): for token t, the
    current block t // block_size first, then the earlier blocks by
    descending importance (the compressed attention's probability summed
    over the G query heads), ties to the lower block, -1 padded; else
    block_indices [B, T, H, S] are the blocks (a negative block, or one
    starting after the query, selects nothing). block_counts: an int S
    (exactly S blocks are attended; fla's GPU kernel rounds S up to a power
    of 2, its naive reference does not), or a tensor [B, T, H] ([B, H, T])
    of per-token counts (S = its maximum). window_size > 0 adds the sliding
    window (query t sees t-W+1 .. t) with the same scale (fla's naive
    reference; its GPU path uses flash-attn's default 1/sqrt(K), the same
    when scale is None). o = o_slc g_slc + o_cmp g_cmp + o_swa g_swa.
    q shorter than k (inference: chunked prefill, decode): k / v [B, Tk, ..]
    with Tk >= Tq, the queries (and gates) being the last Tq positions of
    each sequence, query i at Tk - Tq + i; varlen with cu_seqlens =
    (cu_seqlens_q, cu_seqlens_k), fla's convention. Each branch then reads
    what the queries need (spattn.nsa_decode); no gradient (under grad mode
    with an input that requires one, refused). spattn.NSACache keeps a
    batch's cache and runs one such step per generated token.
    The compression (keyword-only; fla's by default): compress_block_size
    l and compress_stride d (windows of l tokens every d; l a multiple of
    d, at most block_size, which d divides) and compress_weight [l, H]
    (default 1/l: mean pooling; a tensor that requires grad is learned,
    through nsa_compress's weight gradient), the paper's l 32, d 16 under
    blocks of 64: window c covers tokens [c d, c d + l), is seen by
    position p iff c d + l - 1 <= p, and a block's importance is the
    probability of the windows overlapping it.
    Not scriptable (torch.jit.script); torch.jit.trace works, for the traced
    shapes."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _lib.check_tensor(name, t, 4)
    if isinstance(cu_seqlens, (tuple, list)) and len(cu_seqlens) == 2 and \
            all(isinstance(c, (torch.Tensor, list, tuple)) for c in cu_seqlens):
        return _suffix(q, k, v, g_cmp, g_slc, g_swa, block_indices, block_counts, block_size, window_size,
                       scale, cu_seqlens, head_first, (compress_block_size, compress_stride, compress_weight))
    if q.shape[2 if head_first else 1] != k.shape[2 if head_first else 1]:
        return _suffix(q, k, v, g_cmp, g_slc, g_swa, block_indices, block_counts, block_size, window_size,
                       scale, None, head_first, (compress_block_size, compress_stride, compress_weight))
    if head_first:
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
        g_cmp, g_slc, g_swa = (g.transpose(1, 2) if isinstance(g, torch.Tensor) and g.dim() == 3
                               else g for g in (g_cmp, g_slc, g_swa))
        if isinstance(block_indices, torch.Tensor) and block_indices.dim() == 4:
            block_indices = block_indices.transpose(1, 2)
        if isinstance(block_counts, torch.Tensor) and block_counts.dim() == 3:
            block_counts = block_counts.transpose(1, 2)
    batch, length, hq, dk = q.shape
    hk = k.shape[2]
    if tuple(k.shape[:2]) != (batch, length) or k.shape[3] != dk or hk < 1:
        raise ValueError("spattn: k must be [B, T, H, K] with q's B, T and K; q %s, k %s"
                         % (tuple(q.shape), tuple(k.shape)))
    if tuple(v.shape[:3]) != (batch, length, hk):
        raise ValueError("spattn: v must be [B, T, H, V] with k's B, T and H; k %s, v %s"
                         % (tuple(k.shape), tuple(v.shape)))
    if hq % hk:
        raise ValueError("spattn: the query heads (%d) must be a multiple of the kv heads (%d)"
                         % (hq, hk))
    if dk < 1:
        raise ValueError("spattn: the head dim K of q and k must be >= 1 (a score over no "
                         "dims, and the default scale 1/sqrt(K), mean nothing); q %s"
                         % (tuple(q.shape),))
    if not isinstance(block_size, int) or block_size < 16 or block_size % 16:
        raise ValueError("spattn: block_size must be a multiple of 16 (the selected attention's "
                         "16-row tiles), got %r" % (block_size,))
    if not isinstance(window_size, int) or window_size < 0:
        raise ValueError("spattn: window_size must be an int >= 0, got %r" % (window_size,))
    _check_gate("g_slc", g_slc, batch, length, hq)
    if g_cmp is not None:
        _check_gate("g_cmp", g_cmp, batch, length, hq)
    if window_size > 0:
        _check_gate("g_swa", g_swa, batch, length, hq)
    if scale is None:
        scale = dk ** -0.5
    seqs = _sequences(cu_seqlens, batch, length)
    ends = [e for _, e in seqs]
    rows = batch * length
    qf, kf, vf = (x.reshape((rows,) + tuple(x.shape[2:])) for x in (q, k, v))

    counts = None
    if isinstance(block_counts, torch.Tensor):
        _lib.check_tensor("block_counts", block_counts, 3, (torch.int64, torch.int32))
        if tuple(block_counts.shape) != (batch, length, hk):
            raise ValueError("spattn: block_counts must have shape %s ([B, T, H]), got %s"
                             % ((batch, length, hk), tuple(block_counts.shape)))
        counts = block_counts.reshape(rows, hk).long()
        count = int(counts.max()) if counts.numel() else 0
    elif isinstance(block_counts, int) and not isinstance(block_counts, bool):
        count = block_counts
    else:
        raise TypeError("spattn: block_counts must be an int or a [B, T, H] tensor")
    if count < 0 or (counts is not None and int(counts.min()) < 0):
        raise ValueError("spattn: block_counts must be >= 0")

    o_cmp = None
    if g_cmp is not None:
        if block_indices is not None:
            warnings.warn("spattn.parallel_nsa: block_indices is ignored when g_cmp is given "
                          "(the compressed attention selects the blocks)")
        cmp = attention.Compression(block_size, hk, k.dtype, compress_block_size, compress_stride,
                                    compress_weight)
        o_cmp, seen, slots = attention.compressed_branch(qf, kf, vf, cmp, seqs, scale, count)
    else:
        if block_indices is None:
            raise ValueError("spattn: parallel_nsa needs g_cmp (to select the blocks) or "
                             "block_indices")
        slots = _given_indices(block_indices, (batch, length, hk), seqs, block_size)[:, :, :count]
    if counts is not None:
        unused = torch.arange(slots.shape[2])[None, None, :] >= counts[:, :, None]
        slots = slots.masked_fill(unused, -1)
    if slots.shape[2] == 0:  # nothing selected anywhere
        slots = torch.full((rows, hk, 1), -1, dtype=torch.int32)

    sub_slots, sub_size = _sub_blocks(slots, block_size, seqs)
    branches = [(nsa_selected_attention(qf, kf, vf, sub_slots, ends, ends, scale, sub_size,
                                        causal=True),
                 g_slc.reshape(rows, hq))]
    if o_cmp is not None:
        branches.append((o_cmp, g_cmp.reshape(rows, hq) * seen.reshape(rows, 1)))
    if window_size > 0:
        branches.append((attention.sliding_window_attention(qf, kf, vf, window_size, ends,
                                                             scale), g_swa.reshape(rows, hq)))
    o = _gated_sum(branches)
    o = o.reshape(batch, length, hq, o.shape[-1])
    return o.transpose(1, 2) if head_first else o


def _suffix(q, k, v, g_cmp, g_slc, g_swa, block_indices, block_counts, block_size, window_size, scale,
            cu_pair, head_first, compression):
    """parallel_nsa with the queries the last Tq tokens of their sequences
    (nsa_decode.suffix_layer): inference only."""
    if head_first:
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
        g_cmp, g_slc, g_swa = (g.transpose(1, 2) if isinstance(g, torch.Tensor) and g.dim() == 3 else g
                               for g in (g_cmp, g_slc, g_swa))
    tensors = [t for t in (q, k, v, g_cmp, g_slc, g_swa, compression[2]) if isinstance(t, torch.Tensor)]
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise RuntimeError("spattn: parallel_nsa with q shorter than k is inference only (no gradient); "
                           "call it under torch.no_grad()")
    if g_cmp is None or block_indices is not None:
        raise ValueError("spattn: parallel_nsa with q shorter than k selects the blocks itself: pass "
                         "g_cmp, and no block_indices")
    if not isinstance(block_counts, int) or isinstance(block_counts, bool) or block_counts < 0:
        raise ValueError("spattn: parallel_nsa with q shorter than k takes an int block_counts >= 0")
    if not isinstance(block_size, int) or block_size < 16 or block_size % 16:
        raise ValueError("spattn: block_size must be a multiple of 16, got %r" % (block_size,))
    if not isinstance(window_size, int) or window_size < 0:
        raise ValueError("spattn: window_size must be an int >= 0, got %r" % (window_size,))
    batch, tq, hq, dk = q.shape
    tk, hk = k.shape[1], k.shape[2]
    if k.shape[0] != batch or k.shape[3] != dk or tuple(v.shape[:3]) != (batch, tk, hk) or hq % hk:
        raise ValueError("spattn: q [B, Tq, HQ, K], k [B, Tk, H, K], v [B, Tk, H, V] with HQ a multiple "
                         "of H; got q %s, k %s, v %s" % (tuple(q.shape), tuple(k.shape), tuple(v.shape)))
    for name, g in (("g_cmp", g_cmp), ("g_slc", g_slc)) + ((("g_swa", g_swa),) if window_size else ()):
        _check_gate(name, g, batch, tq, hq)
    if scale is None:
        scale = dk ** -0.5
    cmp = attention.Compression(block_size, hk, k.dtype, *compression)
    if cu_pair is None:
        if tq > tk:
            raise ValueError("spattn: q has more tokens (%d) than k (%d)" % (tq, tk))
        q_counts, lengths = [tq] * batch, [tk] * batch
        pool_k, pool_v, table = k, v, None
        flat_k, flat_v = k.reshape(batch * tk, hk, dk), v.reshape(batch * tk, hk, v.shape[3])
        starts = [b * tk for b in range(batch)]
    else:
        if batch != 1:
            raise ValueError("spattn: parallel_nsa takes cu_seqlens with batch size 1 only")
        seq_q = _sequences(cu_pair[0], 1, tq)
        seq_k = _sequences(cu_pair[1], 1, tk)
        if len(seq_q) != len(seq_k):
            raise ValueError("spattn: cu_seqlens_q and cu_seqlens_k name %d and %d sequences"
                             % (len(seq_q), len(seq_k)))
        q_counts = [e - s for s, e in seq_q]
        lengths = [e - s for s, e in seq_k]
        if any(n > m for n, m in zip(q_counts, lengths)):
            raise ValueError("spattn: a sequence has more queries than keys: %s vs %s" % (q_counts, lengths))
        flat_k, flat_v = k[0], v[0]
        starts = [s for s, _ in seq_k]
        # the key rows as pages of one row: a sequence need not start on a block boundary
        pool_k, pool_v = flat_k.unsqueeze(1), flat_v.unsqueeze(1)
        table = torch.full((len(seq_k), max(max(lengths), 1)), -1, dtype=torch.int32)
        for b, (s, e) in enumerate(seq_k):
            table[b, :e - s] = torch.arange(s, e, dtype=torch.int32)
    with torch.no_grad():
        o = nsa_decode.suffix_layer(q.reshape(batch * tq, hq, dk), q_counts, pool_k, pool_v, table, lengths,
                                    flat_k, flat_v, starts, g_cmp.reshape(batch * tq, hq),
                                    g_slc.reshape(batch * tq, hq),
                                    g_swa.reshape(batch * tq, hq) if window_size else None, cmp,
                                    block_counts, window_size, scale)
    o = o.reshape(batch, tq, hq, o.shape[-1])
    return o.transpose(1, 2) if head_first else o
