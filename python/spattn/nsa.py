"""Native Sparse Attention: compression and selected attention, TND varlen.

Sequences are concatenated along the token dimension; cu_seqlens gives the
cumulative end of each sequence ([e0, e1, ...]; a leading 0 as in
flash-attn's [0, e0, e1, ...] is an empty first sequence, so both forms
work), as a tensor or a sequence of ints.
"""
import torch

from . import _lib, _onnx
from ._autograd import first_order_only


def _ends(name, cu):
    """The cumulative ends as a list, and the library's array over them."""
    if isinstance(cu, torch.Tensor):
        _lib.check_tensor(name, cu, 1, (torch.int64, torch.int32))
        values = [int(v) for v in cu.tolist()]
    else:
        values = [int(v) for v in cu]
    if not values:
        raise ValueError("spattn: %s is empty" % name)
    arr, keep = _lib.int_array(values)
    return values, (arr, keep)


def _windows(ends, block, stride):
    total, start = 0, 0
    for e in ends:
        n = e - start
        if n >= block and stride > 0:
            total += (n - block) // stride + 1
        start = e
    return total


class _Compress(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, cu_seqlens, block_size, stride):
        _lib.check_tensor("input", x, 3)
        _lib.check_tensor("weight", weight, 2)
        ends, seq = _ends("cu_seqlens", cu_seqlens)
        out = _lib.new_output((_windows(ends, block_size, stride), x.shape[1], x.shape[2]),
                              x.dtype)
        d = _lib.describe
        _lib.call("spa_nsa_compress", _lib.nsa_compress_ws,
                  (d(x), d(weight), seq[0], b"TND", block_size, stride, 0, d(out)))
        ctx.save_for_backward(x, weight)
        ctx.seq, ctx.block, ctx.stride = seq, block_size, stride
        return out

    @staticmethod
    def symbolic(g, *args):
        return _onnx.refuse("nsa_compress")

    @staticmethod
    @first_order_only
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        gx = _lib.new_output(x.shape, x.dtype)
        gw = _lib.new_output(weight.shape, weight.dtype)
        d = _lib.describe
        _lib.call("spa_nsa_compress_grad", _lib.nsa_compress_grad_ws,
                  (d(grad_out), d(x), d(weight), ctx.seq[0], ctx.block, ctx.stride, 0, b"TND",
                   d(gx), d(gw)))
        need = ctx.needs_input_grad
        return gx if need[0] else None, gw if need[1] else None, None, None, None


def nsa_compress(input, weight, cu_seqlens, block_size, stride):
    """NSA compression: every window of block_size tokens (step stride) of each
    sequence becomes one token, out[w, n, :] = sum_j weight[j, n] * input[s_w + j, n, :].
    input [T, N, D], weight [block_size, N] -> [sum of windows, N, D]. Any D >= 1
    and any block_size >= stride >= 1 (the NPU's multiples of 16 are not needed)."""
    return _Compress.apply(input, weight, cu_seqlens, block_size, stride)


def _indices(topk):
    """topkIndices as the library takes them: int32 (int64 converted, checked
    to fit, so that no out-of-range index wraps into a valid one)."""
    if isinstance(topk, torch.Tensor) and topk.dtype == torch.int64 and topk.device.type == "cpu":
        if topk.numel() and (int(topk.max()) > 2**31 - 1 or int(topk.min()) < -2**31):
            raise ValueError("spattn: topk_indices hold values outside int32")
        topk = topk.to(torch.int32)
    _lib.check_tensor("topk_indices", topk, 3, (torch.int32,))
    return topk


# The causal mask's presence is what the library reads (never its contents).
_MASK = torch.zeros((1, 1), dtype=torch.uint8)


class _Select(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, topk, cu_q, cu_kv, scale, block_size, causal):
        for name, t in (("q", q), ("k", k), ("v", v)):
            _lib.check_tensor(name, t, 3)
        topk = _indices(topk)
        _, sq = _ends("cu_seqlens_q", cu_q)
        _, skv = _ends("cu_seqlens_kv", cu_kv)
        t1, n1 = q.shape[0], q.shape[1]
        out = _lib.new_output((t1, n1, v.shape[2]), q.dtype)
        # float64 statistics with float64 inputs (the grad recomputes P from them)
        stat = torch.float64 if q.dtype == torch.float64 else torch.float32
        mx = _lib.new_output((t1, n1, 8), stat)
        sm = _lib.new_output((t1, n1, 8), stat)
        d = _lib.describe
        mask = d(_MASK) if causal else None
        mode = 2 if causal else 0
        _lib.call("spa_nsa_select", _lib.nsa_select_ws,
                  (d(q), d(k), d(v), d(topk), mask, sq[0], skv[0], float(scale), n1, b"TND",
                   mode, block_size, topk.shape[2], d(mx), d(sm), d(out)))
        ctx.save_for_backward(q, k, v, topk, out, mx, sm)
        ctx.seqs, ctx.scale, ctx.block, ctx.causal = (sq, skv), float(scale), block_size, causal
        mx0, sm0 = mx[..., 0], sm[..., 0]  # the 8 lanes are equal
        ctx.mark_non_differentiable(mx0, sm0)
        return out, mx0, sm0

    @staticmethod
    def symbolic(g, *args):
        return _onnx.refuse("nsa_selected_attention")

    @staticmethod
    @first_order_only
    def backward(ctx, grad_out, _grad_max, _grad_sum):
        q, k, v, topk, out, mx, sm = ctx.saved_tensors
        dq = _lib.new_output(q.shape, q.dtype)
        dk = _lib.new_output(k.shape, k.dtype)
        dv = _lib.new_output(v.shape, v.dtype)
        d = _lib.describe
        sq, skv = ctx.seqs
        mask = d(_MASK) if ctx.causal else None
        _lib.call("spa_nsa_select_grad", _lib.nsa_select_grad_ws,
                  (d(q), d(k), d(v), d(out), d(grad_out), d(mx), d(sm), d(topk), sq[0], skv[0],
                   mask, ctx.scale, ctx.block, topk.shape[2], q.shape[1], b"TND",
                   2 if ctx.causal else 0, d(dq), d(dk), d(dv)))
        need = ctx.needs_input_grad
        return (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None,
                None, None, None, None, None, None)


def nsa_selected_attention(q, k, v, topk_indices, cu_seqlens_q, cu_seqlens_kv, scale, block_size,
                           causal=False, return_softmax=False):
    """NSA selected attention: each query token attends to the K blocks of
    block_size keys that topk_indices [T1, N2, K] (int32 or int64) names
    (block numbers inside its sequence's keys; query head h uses kv head
    h // (N1 // N2)). A slot of -1 is padding and selects nothing; a row with
    every slot -1 gives out 0 (max -FLT_MAX, sum 0) and no gradient. A
    sequence's key count need not be a multiple of block_size: its last
    block is clipped to the sequence. Any other negative index, or a block
    starting at or after its sequence's end, is refused.
    q [T1, N1, D], k [T2, N2, D], v [T2, N2, Dv] -> out [T1, N1, Dv], any D
    and Dv from 1 to 768. causal: key position p is visible to query
    position s iff p <= s (both counted from their sequence's start). With
    return_softmax, also the softmax max and sum of the scaled scores,
    [T1, N1] float32 each."""
    out, mx, sm = _Select.apply(q, k, v, topk_indices, cu_seqlens_q, cu_seqlens_kv, scale,
                                block_size, causal)
    return (out, mx, sm) if return_softmax else out
