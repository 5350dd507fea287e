"""The spattn operators of PyTorch's dispatcher (torch.ops.spattn.*), registered once.

Being operators (not Python calls hidden in an autograd.Function) is what
lets torch.jit.script compile a model that calls them, torch.jit.save write
such a model (torch.jit.load reads it back in any process that has imported
spattn), torch.onnx.export map them to a node (_register_onnx_ops.py), and
autocast and DDP see them as they see torch's own.

Each operator is three pieces, all in this file (the machinery they use is
in _library.py, imported as L):

  1. its schema:      L.define("name(Tensor x, int k) -> Tensor")
  2. its CPU kernel:  @L.cpu("name") def _name_cpu(x, k): ... _lib.call(...) ...
                      (checks what ctypes cannot, allocates the outputs, calls
                      the library's two phases; no autograd here)
  3. its autograd:    L.differentiable("name", NameAutograd), an autograd.Function
                      whose forward is L.below_autograd(L.op("name"), ...) and
                      whose backward (decorated with first_order_only) calls the
                      backward operator "name_backward": itself 1 and 2, then
                      L.not_differentiable("name_backward").

then one user-facing function in its family module (msda.py, nsa.py) that
turns Python conveniences (lists for index tensors) into the schema's types,
written in TorchScript's subset so that scripted models can call it, and a
symbolic (or a refusal) in _register_onnx_ops.py.

Autocast needs nothing: the library takes mixed float dtypes, so the ops run
under torch.autocast as they are (autocast falls through for operators without
an autocast kernel) and return value's / input's dtype.
"""
import torch

from . import _lib
from . import _library as L
from ._autograd import first_order_only

NAMESPACE = L.NAMESPACE

# ---- multi-scale deformable attention ----

L.define("ms_deform_attn(Tensor value, Tensor spatial_shapes, Tensor level_start_index, "
        "Tensor sampling_locations, Tensor attention_weights, int im2col_step=64) -> Tensor")
L.define("ms_deform_attn_backward(Tensor value, Tensor spatial_shapes, Tensor level_start_index, "
        "Tensor sampling_locations, Tensor attention_weights, Tensor grad_output) "
        "-> (Tensor, Tensor, Tensor)")

_INDEX_DTYPES = (torch.int64, torch.int32)


@L.cpu("ms_deform_attn")
def _msda_cpu(value, shapes, starts, loc, attn, im2col_step=64):
    # im2col_step: a CUDA batching knob of the original, kept for its signature
    _lib.check_tensor("value", value, 4)
    _lib.check_tensor("value_spatial_shapes", shapes, None, _INDEX_DTYPES)
    _lib.check_tensor("value_level_start_index", starts, None, _INDEX_DTYPES)
    _lib.check_tensor("sampling_locations", loc, 6)
    _lib.check_tensor("attention_weights", attn, 5)
    bs, _, nh, c = value.shape
    out = _lib.new_output((bs, loc.shape[1], nh * c), value.dtype)
    d = _lib.describe
    _lib.call("spa_msda", _lib.msda_ws, (d(value), d(shapes), d(starts), d(loc), d(attn), d(out)))
    return out


@L.cpu("ms_deform_attn_backward")
def _msda_backward_cpu(value, shapes, starts, loc, attn, grad_out):
    for name, t, rank in (("value", value, 4), ("sampling_locations", loc, 6),
                          ("attention_weights", attn, 5), ("grad_output", grad_out, 3)):
        _lib.check_tensor(name, t, rank)
    grad_value = _lib.new_output(value.shape, value.dtype)
    grad_loc = _lib.new_output(loc.shape, loc.dtype)
    grad_attn = _lib.new_output(attn.shape, attn.dtype)
    d = _lib.describe
    _lib.call("spa_msda_grad", _lib.msda_grad_ws,
              (d(value), d(shapes), d(starts), d(loc), d(attn), d(grad_out),
               d(grad_value), d(grad_loc), d(grad_attn)))
    return grad_value, grad_loc, grad_attn


class MsdaAutograd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, value, shapes, starts, loc, attn, im2col_step=64):
        ctx.save_for_backward(value, shapes, starts, loc, attn)
        return L.below_autograd(L.op("ms_deform_attn"), value, shapes, starts, loc, attn,
                               im2col_step)

    @staticmethod
    @first_order_only
    def backward(ctx, grad_output):
        value, shapes, starts, loc, attn = ctx.saved_tensors
        gv, gl, ga = L.below_autograd(L.op("ms_deform_attn_backward"), value, shapes, starts, loc,
                                     attn, grad_output)
        return L.needed((gv, None, None, gl, ga, None), ctx.needs_input_grad)


L.differentiable("ms_deform_attn", MsdaAutograd)
L.not_differentiable("ms_deform_attn_backward")


# ---- NSA compression ----

L.define("nsa_compress(Tensor input, Tensor weight, Tensor cu_seqlens, int block_size, "
        "int stride) -> Tensor")
L.define("nsa_compress_backward(Tensor grad_output, Tensor input, Tensor weight, "
        "Tensor cu_seqlens, int block_size, int stride) -> (Tensor, Tensor)")


def _ends(name, cu):
    """The cumulative ends (an int tensor) as a list, and the library's array
    over them with what keeps its memory alive."""
    _lib.check_tensor(name, cu, 1, _INDEX_DTYPES)
    values = cu.tolist()
    if not values:
        raise ValueError("spattn: %s is empty" % name)
    return values, _lib.int_array(values)


def _windows(ends, block, stride):
    total, start = 0, 0
    for e in ends:
        n = e - start
        if n >= block and stride > 0:
            total += (n - block) // stride + 1
        start = e
    return total


@L.cpu("nsa_compress")
def _compress_cpu(x, weight, cu_seqlens, block_size, stride):
    _lib.check_tensor("input", x, 3)
    _lib.check_tensor("weight", weight, 2)
    ends, (seq, _keep) = _ends("cu_seqlens", cu_seqlens)
    out = _lib.new_output((_windows(ends, block_size, stride), x.shape[1], x.shape[2]), x.dtype)
    d = _lib.describe
    _lib.call("spa_nsa_compress", _lib.nsa_compress_ws,
              (d(x), d(weight), seq, b"TND", block_size, stride, 0, d(out)))
    return out


@L.cpu("nsa_compress_backward")
def _compress_backward_cpu(grad_out, x, weight, cu_seqlens, block_size, stride):
    for name, t, rank in (("grad_output", grad_out, 3), ("input", x, 3), ("weight", weight, 2)):
        _lib.check_tensor(name, t, rank)
    _, (seq, _keep) = _ends("cu_seqlens", cu_seqlens)
    gx = _lib.new_output(x.shape, x.dtype)
    gw = _lib.new_output(weight.shape, weight.dtype)
    d = _lib.describe
    _lib.call("spa_nsa_compress_grad", _lib.nsa_compress_grad_ws,
              (d(grad_out), d(x), d(weight), seq, block_size, stride, 0, b"TND", d(gx), d(gw)))
    return gx, gw


class CompressAutograd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, cu_seqlens, block_size, stride):
        ctx.save_for_backward(x, weight, cu_seqlens)
        ctx.block, ctx.stride = block_size, stride
        return L.below_autograd(L.op("nsa_compress"), x, weight, cu_seqlens, block_size, stride)

    @staticmethod
    @first_order_only
    def backward(ctx, grad_output):
        x, weight, cu_seqlens = ctx.saved_tensors
        gx, gw = L.below_autograd(L.op("nsa_compress_backward"), grad_output, x, weight,
                                 cu_seqlens, ctx.block, ctx.stride)
        return L.needed((gx, gw, None, None, None), ctx.needs_input_grad)


L.differentiable("nsa_compress", CompressAutograd)
L.not_differentiable("nsa_compress_backward")


# ---- NSA selected attention ----

L.define("nsa_selected_attention(Tensor q, Tensor k, Tensor v, Tensor topk_indices, "
        "Tensor cu_seqlens_q, Tensor cu_seqlens_kv, float scale, int block_size, "
        "bool causal=False) -> (Tensor out, Tensor softmax_max, Tensor softmax_sum)")
L.define("nsa_selected_attention_backward(Tensor grad_output, Tensor q, Tensor k, Tensor v, "
        "Tensor out, Tensor softmax_max, Tensor softmax_sum, Tensor topk_indices, "
        "Tensor cu_seqlens_q, Tensor cu_seqlens_kv, float scale, int block_size, "
        "bool causal=False) -> (Tensor, Tensor, Tensor)")

# The causal mask's presence is what the library reads (never its contents).
_MASK = torch.zeros((1, 1), dtype=torch.uint8)
_LANES = 8  # the library's softmax statistics: 8 equal lanes per (token, head)


def _indices(topk):
    """topkIndices as the library takes them: int32 (int64 converted, checked
    to fit, so that no out-of-range index wraps into a valid one)."""
    if isinstance(topk, torch.Tensor) and topk.dtype == torch.int64 and topk.device.type == "cpu":
        if topk.numel() and (int(topk.max()) > 2**31 - 1 or int(topk.min()) < -2**31):
            raise ValueError("spattn: topk_indices hold values outside int32")
        topk = topk.to(torch.int32)
    _lib.check_tensor("topk_indices", topk, 3, (torch.int32,))
    return topk


@L.cpu("nsa_selected_attention")
def _select_cpu(q, k, v, topk, cu_q, cu_kv, scale, block_size, causal=False):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _lib.check_tensor(name, t, 3)
    topk = _indices(topk)
    _, (sq, _keep_q) = _ends("cu_seqlens_q", cu_q)
    _, (skv, _keep_kv) = _ends("cu_seqlens_kv", cu_kv)
    t1, n1 = q.shape[0], q.shape[1]
    out = _lib.new_output((t1, n1, v.shape[2]), q.dtype)
    # float64 statistics with float64 inputs (the grad recomputes P from them)
    stat = torch.float64 if q.dtype == torch.float64 else torch.float32
    mx = _lib.new_output((t1, n1, _LANES), stat)
    sm = _lib.new_output((t1, n1, _LANES), stat)
    d = _lib.describe
    _lib.call("spa_nsa_select", _lib.nsa_select_ws,
              (d(q), d(k), d(v), d(topk), d(_MASK) if causal else None, sq, skv, scale, n1,
               b"TND", 2 if causal else 0, block_size, topk.shape[2], d(mx), d(sm), d(out)))
    return out, mx[..., 0], sm[..., 0]  # the lanes are equal: one of them, as a view


@L.cpu("nsa_selected_attention_backward")
def _select_backward_cpu(grad_out, q, k, v, out, mx, sm, topk, cu_q, cu_kv, scale, block_size,
                         causal=False):
    for name, t, rank in (("grad_output", grad_out, 3), ("q", q, 3), ("k", k, 3), ("v", v, 3),
                          ("out", out, 3), ("softmax_max", mx, 2), ("softmax_sum", sm, 2)):
        _lib.check_tensor(name, t, rank)
    topk = _indices(topk)
    _, (sq, _keep_q) = _ends("cu_seqlens_q", cu_q)
    _, (skv, _keep_kv) = _ends("cu_seqlens_kv", cu_kv)
    lanes = (mx.shape[0], mx.shape[1], _LANES)  # the library's layout, as stride-0 views
    dq = _lib.new_output(q.shape, q.dtype)
    dk = _lib.new_output(k.shape, k.dtype)
    dv = _lib.new_output(v.shape, v.dtype)
    d = _lib.describe
    _lib.call("spa_nsa_select_grad", _lib.nsa_select_grad_ws,
              (d(q), d(k), d(v), d(out), d(grad_out), d(mx.unsqueeze(-1).expand(lanes)),
               d(sm.unsqueeze(-1).expand(lanes)), d(topk), sq, skv,
               d(_MASK) if causal else None, scale, block_size, topk.shape[2], q.shape[1], b"TND",
               2 if causal else 0, d(dq), d(dk), d(dv)))
    return dq, dk, dv


class SelectAutograd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, topk, cu_q, cu_kv, scale, block_size, causal=False):
        out, mx, sm = L.below_autograd(L.op("nsa_selected_attention"), q, k, v, topk, cu_q, cu_kv,
                                      scale, block_size, causal)
        ctx.save_for_backward(q, k, v, topk, cu_q, cu_kv, out, mx, sm)
        ctx.scale, ctx.block, ctx.causal = scale, block_size, causal
        ctx.mark_non_differentiable(mx, sm)
        return out, mx, sm

    @staticmethod
    @first_order_only
    def backward(ctx, grad_output, _grad_max, _grad_sum):
        q, k, v, topk, cu_q, cu_kv, out, mx, sm = ctx.saved_tensors
        grads = L.below_autograd(L.op("nsa_selected_attention_backward"), grad_output, q, k, v, out,
                                mx, sm, topk, cu_q, cu_kv, ctx.scale, ctx.block, ctx.causal)
        return L.needed(grads + (None,) * 6, ctx.needs_input_grad)


L.differentiable("nsa_selected_attention", SelectAutograd)
L.not_differentiable("nsa_selected_attention_backward")
