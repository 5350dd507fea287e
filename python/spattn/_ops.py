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

then one user-facing function in its family module (msda.py, nsa.py,
attention.py) that turns Python conveniences (lists for index tensors) into
the schema's types, written in TorchScript's subset so that scripted models
can call it, and a symbolic (or a refusal) in _register_onnx_ops.py. A
signature TorchScript cannot compile (keyword-only arguments with defaults,
as CANN's nsa_compress_attention) goes into the schema itself, after "*"; the
function is then registered as that operator for scripts
(torch.jit._builtins._register_builtin), and the kernels still get every
argument in order (_library.positional).

Autocast needs nothing: the library takes mixed float dtypes, so the ops run
under torch.autocast as they are (autocast falls through for operators without
an autocast kernel) and return value's / input's dtype.
"""
import torch
from torch.autograd import forward_ad

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


def _shape(t):
    return str(tuple(t.shape))


def _msda_hint(value, shapes, starts, loc, attn, grad_out=None):
    """Which argument disagrees with which, in the names and shapes of
    mmcv's signature: the first such reading, or "" (then the rule alone
    says it)."""
    bs, nk, nh, c = value.shape
    if shapes.dim() != 2 or shapes.shape[1] != 2:
        return "value_spatial_shapes has shape %s, expected (num_levels, 2)" % _shape(shapes)
    nl = shapes.shape[0]
    if starts.shape != (nl,):
        return ("value_level_start_index has shape %s, expected (%d,): one start per level of "
                "value_spatial_shapes %s" % (_shape(starts), nl, _shape(shapes)))
    want = (bs, None, nh, nl, None, 2)
    if any(w is not None and w != g for w, g in zip(want, loc.shape)):
        return ("sampling_locations has shape %s, expected (%d, num_queries, %d, %d, num_points, 2) "
                "from value %s and value_spatial_shapes %s"
                % (_shape(loc), bs, nh, nl, _shape(value), _shape(shapes)))
    if tuple(attn.shape) != tuple(loc.shape[:5]):
        return ("attention_weights has shape %s, expected %s: sampling_locations' dims but the last"
                % (_shape(attn), str(tuple(loc.shape[:5]))))
    if grad_out is not None and tuple(grad_out.shape) != (bs, loc.shape[1], nh * c):
        return "grad_output has shape %s, expected (%d, %d, %d)" % (_shape(grad_out), bs, loc.shape[1],
                                                                     nh * c)
    if shapes.numel() and starts.numel():
        hw = [int(h) * int(w) for h, w in shapes.tolist()]
        for lvl, (s0, n) in enumerate(zip(starts.tolist(), hw)):
            if s0 < 0 or s0 + n > nk:
                return ("level %d starts at row %d of value (value_level_start_index) and holds %d "
                        "rows (value_spatial_shapes %s), past value's %d rows"
                        % (lvl, s0, n, shapes[lvl].tolist(), nk))
    return ""


def _msda_call(symbol, ws, args, tensors):
    try:
        _lib.call(symbol, ws, args)
    except _lib.SpattnError as e:
        hint = _msda_hint(*tensors)
        if not hint:
            raise
        raise e.with_hint(hint) from None


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
    _msda_call("spa_msda", _lib.msda_ws, (d(value), d(shapes), d(starts), d(loc), d(attn), d(out)),
               (value, shapes, starts, loc, attn))
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
    _msda_call("spa_msda_grad", _lib.msda_grad_ws,
               (d(value), d(shapes), d(starts), d(loc), d(attn), d(grad_out),
                d(grad_value), d(grad_loc), d(grad_attn)), (value, shapes, starts, loc, attn, grad_out))
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
        "bool causal=False, str causal_alignment=\"auto\") "
        "-> (Tensor out, Tensor softmax_max, Tensor softmax_sum)")
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


def _causal_lengths_agree(causal, alignment, ends_q, ends_kv):
    """causal where a sequence has fewer queries than keys: the operator's
    rule is top-left (query i sees keys 0..i, CANN's), flash-attn's and
    fla's is bottom-right (the queries are the newest tokens). Neither is
    taken silently: causal_alignment="top_left" asks for CANN's; the
    bottom-right reading is the inference operator's and parallel_nsa's."""
    if alignment not in ("auto", "top_left"):
        raise ValueError("spattn: causal_alignment must be \"auto\" or \"top_left\" (bottom-right: "
                         "spattn.npu_nsa_select_attention_infer), got %r" % (alignment,))
    if not causal or alignment == "top_left":
        return
    start_q = start_kv = 0
    for eq, ekv in zip(ends_q, ends_kv):
        if eq - start_q != ekv - start_kv:
            raise ValueError(
                "spattn: nsa_selected_attention(causal=True) with a sequence of %d queries and %d keys "
                "is ambiguous: pass causal_alignment=\"top_left\" for CANN's rule (query i sees keys "
                "0..i); for queries that are the newest tokens (bottom-right, flash-attn's and fla's) use "
                "spattn.npu_nsa_select_attention_infer or parallel_nsa with q shorter than k"
                % (eq - start_q, ekv - start_kv))
        start_q, start_kv = eq, ekv


@L.cpu("nsa_selected_attention")
def _select_cpu(q, k, v, topk, cu_q, cu_kv, scale, block_size, causal=False, causal_alignment="auto"):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _lib.check_tensor(name, t, 3)
    topk = _indices(topk)
    ends_q, (sq, _keep_q) = _ends("cu_seqlens_q", cu_q)
    ends_kv, (skv, _keep_kv) = _ends("cu_seqlens_kv", cu_kv)
    _causal_lengths_agree(causal, causal_alignment, ends_q, ends_kv)
    t1, n1 = q.shape[0], q.shape[1]
    out = _lib.new_output((t1, n1, v.shape[2]), q.dtype)
    # float64 statistics with float64 inputs (the grad recomputes P from them)
    stat = torch.float64 if q.dtype == torch.float64 else torch.float32
    mx = _lib.new_output((t1, n1, _LANES), stat)
    sm = _lib.new_output((t1, n1, _LANES), stat)
    d = _lib.describe
    _lib.call("spa_nsa_select", _lib.nsa_select_ws,
              (d(q), d(k), d(v), d(topk), d(_MASK) if causal else None, sq, skv, scale, n1,
               b"TND", 2 if causal else 0, block_size, topk.shape[2], d(mx), d(sm), d(out),
               _lib.workers()))
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
    def forward(ctx, q, k, v, topk, cu_q, cu_kv, scale, block_size, causal=False,
                causal_alignment="auto"):
        out, mx, sm = L.below_autograd(L.op("nsa_selected_attention"), q, k, v, topk, cu_q, cu_kv,
                                      scale, block_size, causal, causal_alignment)
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
        return L.needed(grads + (None,) * 7, ctx.needs_input_grad)


L.differentiable("nsa_selected_attention", SelectAutograd)
L.not_differentiable("nsa_selected_attention_backward")


# ---- NSA selected attention on a KV cache (NsaSelectedAttentionInfer) ----
# torch_npu.npu_nsa_select_attention_infer's arguments, names and order. The
# union contract: layouts BSND and BSH (torch_npu) and TND (CANN, with
# actual_seq_qlen as per-batch query counts); a paged cache [blocks,
# page_block_size, N2 * D] or [blocks, page_block_size, N2, D] with a
# block_table, or a contiguous [B, S, N2, D] one without; any query length
# per batch (the newest tokens: bottom-right aligned). Inference only.

L.define("nsa_select_attention_infer(Tensor query, Tensor key, Tensor value, Tensor topk_indices, "
        "float scale_value, int head_num, int key_value_head_num, int select_block_size, "
        "int select_block_count, int page_block_size, str layout=\"BSND\", "
        "Tensor? atten_mask=None, Tensor? block_table=None, int[]? actual_seq_qlen=None, "
        "int[]? actual_seq_kvlen=None) -> Tensor")


def _heads_view(name, t, heads):
    """[.., N * D] as [.., N, D] (a view of the same memory)."""
    if t.shape[-1] % heads:
        raise ValueError("spattn: the last dim of %s (%d) is not a multiple of its %d heads"
                         % (name, t.shape[-1], heads))
    return t.unflatten(-1, (heads, t.shape[-1] // heads))


def _infer_queries(query, layout, layouts, said, head_num, actual_seq_qlen, kv_name, batches):
    """The inference ops' query in one of its layouts as [T, N1, D] and each
    batch's query count: BSND / BSH (S queries in every batch, the batch
    count that of the kv lengths named kv_name) or TND (actual_seq_qlen, or
    one query per batch)."""
    if layout not in layouts:
        raise ValueError("spattn: layout must be %s, got %r" % (said, layout))
    if layout == "TND":
        _lib.check_tensor("query", query, 3)
        q = query
        counts = list(actual_seq_qlen) if actual_seq_qlen is not None else [1] * batches
    else:
        if layout == "BSH":
            _lib.check_tensor("query", query, 3)
            query = _heads_view("query", query, head_num)
        _lib.check_tensor("query", query, 4)
        if query.shape[0] != batches:
            raise ValueError("spattn: query has %d batches, %s %d" % (query.shape[0], kv_name, batches))
        per = query.shape[1]
        if actual_seq_qlen is not None and any(int(x) != per for x in actual_seq_qlen):
            raise ValueError("spattn: with layout %s every batch has S = %d queries; "
                             "actual_seq_qlen says %s" % (layout, per, list(actual_seq_qlen)))
        counts = [per] * batches
        q = query.reshape(batches * per, query.shape[2], query.shape[3])
    if q.shape[1] != head_num:
        raise ValueError("spattn: query has %d heads, head_num is %d" % (q.shape[1], head_num))
    return q, counts


def _infer_cache(key, value, key_value_head_num, block_table, page_block_size):
    """The inference ops' key and value caches as [pages or B, rows, N2, D]
    ([.., N2 * D] viewed by heads), checked against the head count and, with
    a block table, the page size."""
    if key.dim() == 3:
        key = _heads_view("key", key, key_value_head_num)
    if value.dim() == 3:
        value = _heads_view("value", value, key_value_head_num)
    _lib.check_tensor("key", key, 4)
    _lib.check_tensor("value", value, 4)
    if key.shape[2] != key_value_head_num:
        raise ValueError("spattn: key has %d heads, key_value_head_num is %d"
                         % (key.shape[2], key_value_head_num))
    if block_table is not None:
        _lib.check_tensor("block_table", block_table, 2, (torch.int32,))
        if key.shape[1] != page_block_size:
            raise ValueError("spattn: key's pages hold %d rows, page_block_size is %d"
                             % (key.shape[1], page_block_size))
    return key, value


@L.cpu("nsa_select_attention_infer")
def _select_infer_cpu(query, key, value, topk, scale_value, head_num, key_value_head_num,
                      select_block_size, select_block_count, page_block_size, layout="BSND",
                      atten_mask=None, block_table=None, actual_seq_qlen=None, actual_seq_kvlen=None):
    if _lib.nsa_select_infer_ws is None:
        raise RuntimeError("spattn: the loaded libspattn has no spa_nsa_select_infer")
    if atten_mask is not None:
        raise ValueError("spattn: atten_mask is not read by the inference operator (each query "
                         "attends up to its own position); pass None")
    if actual_seq_kvlen is None:
        raise ValueError("spattn: actual_seq_kvlen (each sequence's length) is required")
    for name, t in (("query", query), ("key", key), ("value", value)):
        _lib.check_tensor(name, t)
    topk = _indices_any_rank(topk)
    q, counts = _infer_queries(query, layout, ("BSND", "BSH", "TND"), "BSND, BSH or TND", head_num,
                               actual_seq_qlen, "actual_seq_kvlen", len(actual_seq_kvlen))
    if layout in ("BSND", "BSH"):
        per, batches = query.shape[1], len(counts)
        if topk.dim() == 3 and per == 1:
            topk = topk.unsqueeze(1)
        _lib.check_tensor("topk_indices", topk, 4, (torch.int32,))
        topk = topk.reshape(batches * per, topk.shape[2], topk.shape[3])
    else:
        _lib.check_tensor("topk_indices", topk, 3, (torch.int32,))
    key, value = _infer_cache(key, value, key_value_head_num, block_table, page_block_size)
    if topk.shape[-1] != select_block_count:
        raise ValueError("spattn: topk_indices has %d slots, select_block_count is %d"
                         % (topk.shape[-1], select_block_count))
    out = _lib.new_output((q.shape[0], head_num, value.shape[3]), q.dtype)
    sq, keep_q = _lib.int_array([int(x) for x in counts])
    skv, keep_kv = _lib.int_array([int(x) for x in actual_seq_kvlen])
    d = _lib.describe
    _lib.call("spa_nsa_select_infer", _lib.nsa_select_infer_ws,
              (d(q), d(key), d(value), d(topk), d(block_table) if block_table is not None else None,
               sq, skv, scale_value, select_block_size, d(out)))
    if layout == "BSND":
        return out.reshape(query.shape[0], query.shape[1], head_num, value.shape[3])
    if layout == "BSH":
        return out.reshape(query.shape[0], query.shape[1], head_num * value.shape[3])
    return out


def _indices_any_rank(topk):
    if isinstance(topk, torch.Tensor) and topk.dtype == torch.int64 and topk.device.type == "cpu":
        if topk.numel() and (int(topk.max()) > 2**31 - 1 or int(topk.min()) < -2**31):
            raise ValueError("spattn: topk_indices hold values outside int32")
        topk = topk.to(torch.int32)
    _lib.check_tensor("topk_indices", topk, None, (torch.int32,))
    return topk


L.not_differentiable("nsa_select_attention_infer",
                     "an inference operator: run it under torch.no_grad(), or train with "
                     "nsa_selected_attention")


# ---- compressed attention on a cache of compressed keys (NsaCompressAttentionInfer) ----
# torch_npu.npu_nsa_compress_attention_infer's arguments, names and order, and
# a layout (TND, torch_npu's only one, or BSND). As CANN's operator: an
# atten_mask (never read) turns the causal rule on, at the positions
# actual_sel_seq_kvlen[b] - S_b + i; topk_mask is reserved. The union
# contract: a paged cache [blocks, page_block_size, N2 * D] or [.., N2, D]
# with block_table, or contiguous [B, C, N2, D] without one; any G, D, Dv
# up to 768, float16 / bfloat16 / float32 / float64. Inference only.

L.define("nsa_compress_attention_infer(Tensor query, Tensor key, Tensor value, float scale_value, "
        "int head_num, int key_value_head_num, int select_block_size, int select_block_count, "
        "int page_block_size, int compress_block_size, int compress_stride, Tensor? atten_mask=None, "
        "Tensor? block_table=None, Tensor? topk_mask=None, int[]? actual_seq_qlen=None, "
        "int[]? actual_cmp_seq_kvlen=None, int[]? actual_sel_seq_kvlen=None, str layout=\"TND\") "
        "-> (Tensor, Tensor)")


@L.cpu("nsa_compress_attention_infer")
def _cattn_infer_cpu(query, key, value, scale_value, head_num, key_value_head_num, select_block_size,
                     select_block_count, page_block_size, compress_block_size, compress_stride,
                     atten_mask=None, block_table=None, topk_mask=None, actual_seq_qlen=None,
                     actual_cmp_seq_kvlen=None, actual_sel_seq_kvlen=None, layout="TND"):
    if _lib.nsa_cattn_infer_ws is None:
        raise RuntimeError("spattn: the loaded libspattn has no spa_nsa_compress_attention_infer")
    if topk_mask is not None:
        raise ValueError("spattn: topk_mask is reserved in the inference operator (block 0 and the "
                         "last two are forced in); pass None")
    if actual_cmp_seq_kvlen is None:
        raise ValueError("spattn: actual_cmp_seq_kvlen (each sequence's compressed keys) is required")
    causal = atten_mask is not None
    if causal and actual_sel_seq_kvlen is None:
        raise ValueError("spattn: atten_mask (the causal rule) needs actual_sel_seq_kvlen, each "
                         "sequence's length")
    for name, t in (("query", query), ("key", key), ("value", value)):
        _lib.check_tensor(name, t)
    q, counts = _infer_queries(query, layout, ("BSND", "TND"), "TND or BSND", head_num, actual_seq_qlen,
                               "actual_cmp_seq_kvlen", len(actual_cmp_seq_kvlen))
    key, value = _infer_cache(key, value, key_value_head_num, block_table, page_block_size)
    out = _lib.new_output((q.shape[0], head_num, value.shape[3]), q.dtype)
    topk = _lib.new_output((q.shape[0], key_value_head_num, select_block_count), torch.int32)
    sq, keep_q = _lib.int_array([int(x) for x in counts])
    scmp, keep_c = _lib.int_array([int(x) for x in actual_cmp_seq_kvlen])
    ssel, keep_s = (_lib.int_array([int(x) for x in actual_sel_seq_kvlen])
                    if actual_sel_seq_kvlen is not None else (None, None))
    d = _lib.describe
    _lib.call("spa_nsa_compress_attention_infer", _lib.nsa_cattn_infer_ws,
              (d(q), d(key), d(value), d(block_table) if block_table is not None else None,
               sq, scmp, ssel, scale_value, 1 if causal else 0, compress_block_size, compress_stride,
               select_block_size, select_block_count, d(out), d(topk)))
    if layout == "BSND":
        return (out.reshape(query.shape[0], query.shape[1], head_num, value.shape[3]),
                topk.reshape(query.shape[0], query.shape[1], key_value_head_num, select_block_count))
    return out, topk


L.not_differentiable("nsa_compress_attention_infer",
                     "an inference operator: run it under torch.no_grad(), or train with "
                     "nsa_compress_attention")


# ---- the compression of a KV cache's newest window (NsaCompressWithCache) ----
# torch_npu.npu_nsa_compress_infer's arguments (cache, keyword-only there, is the
# seventh here); cache is written in place
# (the rows of the batches that close a window) and returned.

L.define("nsa_compress_infer(Tensor input, Tensor weight, Tensor slot_mapping, int compress_block_size, "
        "int compress_stride, int page_block_size, Tensor(a!) cache, Tensor? block_table=None, "
        "int[]? actual_seq_len=None) -> Tensor(a!)")


@L.cpu("nsa_compress_infer")
def _compress_infer_cpu(x, weight, slot_mapping, compress_block_size, compress_stride, page_block_size,
                        cache, block_table=None, actual_seq_len=None):
    if _lib.nsa_compress_cache_ws is None:
        raise RuntimeError("spattn: the loaded libspattn has no spa_nsa_compress_with_cache")
    if actual_seq_len is None:
        raise ValueError("spattn: actual_seq_len (each sequence's length) is required")
    _lib.check_tensor("input", x, 4)
    _lib.check_tensor("weight", weight, 2)
    _lib.check_tensor("slot_mapping", slot_mapping, 1, (torch.int32,))
    _lib.check_tensor("cache", cache, 3)
    if block_table is not None:
        _lib.check_tensor("block_table", block_table, 2, (torch.int32,))
        if x.shape[1] != page_block_size:
            raise ValueError("spattn: input's pages hold %d rows, page_block_size is %d"
                             % (x.shape[1], page_block_size))
    lens, keep = _lib.int_array([int(n) for n in actual_seq_len])
    d = _lib.describe
    _lib.call("spa_nsa_compress_with_cache", _lib.nsa_compress_cache_ws,
              (d(x), d(weight), d(slot_mapping), d(block_table) if block_table is not None else None,
               lens, compress_block_size, compress_stride, d(cache)))
    return cache


L.not_differentiable("nsa_compress_infer", "an inference operator: it writes its cache in place")


# ---- NSA compressed attention (NsaCompressAttention) ----
# CANN's argument names and order (torch_npu.npu_nsa_compress_attention),
# its keyword-only arguments included: the user-facing function is this
# schema (attention.py), so that a scripted call binds to it by name.

L.define("nsa_compress_attention(Tensor query, Tensor key, Tensor value, float scale_value, "
        "int head_num, int compress_block_size, int compress_stride, int select_block_size, "
        "int select_block_count, *, Tensor? topk_mask=None, Tensor? atten_mask=None, "
        "Tensor actual_seq_qlen, Tensor actual_cmp_seq_kvlen, Tensor? actual_sel_seq_kvlen=None, "
        "int sparse_mode=1) -> (Tensor attention_out, Tensor topk_indices, Tensor softmax_max, "
        "Tensor softmax_sum)")
L.define("nsa_compress_attention_backward(Tensor grad_output, Tensor query, Tensor key, "
        "Tensor value, Tensor attention_out, Tensor softmax_max, Tensor softmax_sum, "
        "Tensor? atten_mask, Tensor actual_seq_qlen, Tensor actual_cmp_seq_kvlen, "
        "float scale_value, int head_num, int sparse_mode, int compress_block_size, "
        "int compress_stride) -> (Tensor, Tensor, Tensor)")

_MASK_DTYPES = (torch.bool, torch.uint8)


def require(phase1, symbol):
    """The attention ops of the NSA layer are optional symbols of _lib (None
    where the loaded libspattn.so predates them): said, never computed here."""
    if phase1 is None:
        raise NotImplementedError("spattn: %s is not in %s (a library built before it); rebuild "
                                  "libspattn.so" % (symbol, _lib.LIBRARY_PATH))


def _mask(name, m):
    if m is None:
        return None
    _lib.check_tensor(name, m, 2, _MASK_DTYPES)
    return _lib.describe(m)


def _stat_dtype(t):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


@L.cpu("nsa_compress_attention")
def _cattn_cpu(q, k, v, scale, head_num, block, stride, select_block, count, topk_mask,
               atten_mask, cu_q, cu_cmp, cu_sel, sparse_mode):
    require(_lib.nsa_cattn_ws, "spa_nsa_compress_attention")
    for name, t in (("query", q), ("key", k), ("value", v)):
        _lib.check_tensor(name, t, 3)
    t1, n1 = q.shape[0], q.shape[1]
    if head_num != n1:
        raise ValueError("spattn: head_num (%d) must equal query's N1 (%d)" % (head_num, n1))
    _, (sq, _keep_q) = _ends("actual_seq_qlen", cu_q)
    _, (sc, _keep_c) = _ends("actual_cmp_seq_kvlen", cu_cmp)
    ssel = _ends("actual_sel_seq_kvlen", cu_sel)[1] if cu_sel is not None else (None, None)
    out = _lib.new_output((t1, n1, v.shape[2]), q.dtype)
    mx = _lib.new_output((t1, n1, _LANES), _stat_dtype(q))
    sm = _lib.new_output((t1, n1, _LANES), _stat_dtype(q))
    # a negative count sizes an empty output: the library refuses it by its rule
    topk = _lib.new_output((t1, k.shape[1], max(count, 0)), torch.int32)
    d = _lib.describe
    _lib.call("spa_nsa_compress_attention", _lib.nsa_cattn_ws,
              (d(q), d(k), d(v), _mask("atten_mask", atten_mask), _mask("topk_mask", topk_mask),
               sq, sc, ssel[0], scale, head_num, b"TND", sparse_mode, block, stride, select_block,
               count, d(mx), d(sm), d(out), d(topk), _lib.workers()))
    return out, topk, mx, sm


@L.cpu("nsa_compress_attention_backward")
def _cattn_backward_cpu(grad_out, q, k, v, out, mx, sm, atten_mask, cu_q, cu_cmp, scale,
                        head_num, sparse_mode, block, stride):
    require(_lib.nsa_cattn_grad_ws, "spa_nsa_compress_attention_grad")
    for name, t, rank in (("grad_output", grad_out, 3), ("query", q, 3), ("key", k, 3),
                          ("value", v, 3), ("attention_out", out, 3), ("softmax_max", mx, 3),
                          ("softmax_sum", sm, 3)):
        _lib.check_tensor(name, t, rank)
    _, (sq, _keep_q) = _ends("actual_seq_qlen", cu_q)
    _, (sc, _keep_c) = _ends("actual_cmp_seq_kvlen", cu_cmp)
    dq = _lib.new_output(q.shape, q.dtype)
    dk = _lib.new_output(k.shape, k.dtype)
    dv = _lib.new_output(v.shape, v.dtype)
    d = _lib.describe
    _lib.call("spa_nsa_compress_attention_grad", _lib.nsa_cattn_grad_ws,
              (d(q), d(k), d(v), d(out), d(grad_out), d(mx), d(sm),
               _mask("atten_mask", atten_mask), sq, sc, scale, head_num, b"TND", sparse_mode,
               block, stride, d(dq), d(dk), d(dv)))
    return dq, dk, dv


_NO_MASK = torch.empty(0, dtype=torch.bool)  # saved in place of an absent mask


class CompressAttentionAutograd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale, head_num, block, stride, select_block, count, topk_mask,
                atten_mask, cu_q, cu_cmp, cu_sel, sparse_mode):
        out, topk, mx, sm = L.below_autograd(
            L.op("nsa_compress_attention"), q, k, v, scale, head_num, block, stride, select_block,
            count, topk_mask=topk_mask, atten_mask=atten_mask, actual_seq_qlen=cu_q,
            actual_cmp_seq_kvlen=cu_cmp, actual_sel_seq_kvlen=cu_sel, sparse_mode=sparse_mode)
        ctx.save_for_backward(q, k, v, out, mx, sm, cu_q, cu_cmp,
                              _NO_MASK if atten_mask is None else atten_mask)
        ctx.has_mask = atten_mask is not None
        ctx.args = (scale, head_num, sparse_mode, block, stride)
        ctx.mark_non_differentiable(topk, mx, sm)
        ctx.set_materialize_grads(False)  # no zero gradients made for unused outputs
        return out, topk, mx, sm

    @staticmethod
    @first_order_only
    def backward(ctx, grad_output, _grad_topk, _grad_max, _grad_sum):
        if grad_output is None:  # attention_out unused: only the indices were
            return (None,) * 15
        q, k, v, out, mx, sm, cu_q, cu_cmp, mask = ctx.saved_tensors
        grads = L.below_autograd(L.op("nsa_compress_attention_backward"), grad_output, q, k, v,
                                 out, mx, sm, mask if ctx.has_mask else None, cu_q, cu_cmp,
                                 *ctx.args)
        return L.needed(grads + (None,) * 12, ctx.needs_input_grad)


L.differentiable("nsa_compress_attention", CompressAttentionAutograd)
L.not_differentiable("nsa_compress_attention_backward")


# ---- sliding-window attention ----

L.define("sliding_window_attention(Tensor q, Tensor k, Tensor v, int window_size, "
        "Tensor cu_seqlens, float scale, int window_type) "
        "-> (Tensor out, Tensor softmax_max, Tensor softmax_sum)")
L.define("sliding_window_attention_backward(Tensor grad_output, Tensor q, Tensor k, Tensor v, "
        "Tensor out, Tensor softmax_max, Tensor softmax_sum, Tensor cu_seqlens, int window_size, "
        "float scale, int window_type) -> (Tensor, Tensor, Tensor)")


@L.cpu("sliding_window_attention")
def _swa_cpu(q, k, v, window, cu_seqlens, scale, window_type):
    require(_lib.swa_ws, "spa_swa")
    for name, t in (("q", q), ("k", k), ("v", v)):
        _lib.check_tensor(name, t, 3)
    _, (seq, _keep) = _ends("cu_seqlens", cu_seqlens)
    t1, n1 = q.shape[0], q.shape[1]
    out = _lib.new_output((t1, n1, v.shape[2]), q.dtype)
    mx = _lib.new_output((t1, n1), _stat_dtype(q))
    sm = _lib.new_output((t1, n1), _stat_dtype(q))
    d = _lib.describe
    _lib.call("spa_swa", _lib.swa_ws,
              (d(q), d(k), d(v), seq, 0, scale, n1, b"TND", window, window_type, d(mx), d(sm),
               d(out), _lib.workers()))
    return out, mx, sm


@L.cpu("sliding_window_attention_backward")
def _swa_backward_cpu(grad_out, q, k, v, out, mx, sm, cu_seqlens, window, scale, window_type):
    require(_lib.swa_grad_ws, "spa_swa_grad")
    for name, t, rank in (("grad_output", grad_out, 3), ("q", q, 3), ("k", k, 3), ("v", v, 3),
                          ("out", out, 3), ("softmax_max", mx, 2), ("softmax_sum", sm, 2)):
        _lib.check_tensor(name, t, rank)
    _, (seq, _keep) = _ends("cu_seqlens", cu_seqlens)
    dq = _lib.new_output(q.shape, q.dtype)
    dk = _lib.new_output(k.shape, k.dtype)
    dv = _lib.new_output(v.shape, v.dtype)
    d = _lib.describe
    _lib.call("spa_swa_grad", _lib.swa_grad_ws,
              (d(q), d(k), d(v), d(out), d(grad_out), d(mx), d(sm), seq, 0, scale, q.shape[1],
               b"TND", window, window_type, d(dq), d(dk), d(dv)))
    return dq, dk, dv


class SlidingWindowAutograd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, window, cu_seqlens, scale, window_type):
        out, mx, sm = L.below_autograd(L.op("sliding_window_attention"), q, k, v, window,
                                       cu_seqlens, scale, window_type)
        ctx.save_for_backward(q, k, v, out, mx, sm, cu_seqlens)
        ctx.args = (window, scale, window_type)
        ctx.mark_non_differentiable(mx, sm)
        ctx.set_materialize_grads(False)
        return out, mx, sm

    @staticmethod
    @first_order_only
    def backward(ctx, grad_output, _grad_max, _grad_sum):
        if grad_output is None:
            return (None,) * 7
        q, k, v, out, mx, sm, cu_seqlens = ctx.saved_tensors
        grads = L.below_autograd(L.op("sliding_window_attention_backward"), grad_output, q, k, v,
                                 out, mx, sm, cu_seqlens, *ctx.args)
        return L.needed(grads + (None,) * 4, ctx.needs_input_grad)


L.differentiable("sliding_window_attention", SlidingWindowAutograd)
L.not_differentiable("sliding_window_attention_backward")


# ---- DeepSeek sparse attention: what its two operators share ----
# torch_npu's layouts over the native [T, N, D] queries: a BSND query [B, S1,
# N1, D] holds batch b's S_b queries (actual_seq_lengths_query, per-batch
# counts) in its first S_b rows, the rest padding the native operators never
# see; a TND query [T1, N1, D] holds them one batch after the other
# (actual_seq_lengths_query, prefix sums) in its first sum S_b rows. The
# binding packs the rows that hold queries (a view where those are a prefix),
# runs the native operator on them and gives the padding rows a fill.

_NO_WINDOW = 2**63 - 1  # pre_tokens / next_tokens: their default, the only value with a meaning here


def _lengths(name, t, cumulative):
    """An int32 / int64 lengths tensor (or list) as per-batch ints; prefix sums
    (TND) as their differences."""
    if isinstance(t, torch.Tensor):
        if t.dim() != 1 or t.dtype not in (torch.int32, torch.int64):
            raise ValueError("spattn: %s must be a 1-D int32 tensor of one value per batch" % name)
        values = [int(x) for x in t.tolist()]
    else:
        values = [int(x) for x in t]
    if not cumulative:
        return values
    out, prev = [], 0
    for x in values:
        if x < prev:
            raise ValueError("spattn: %s holds prefix sums (TND), which must not decrease: %s"
                             % (name, values))
        out.append(x - prev)
        prev = x
    return out


def _dsa_layouts(layout_query, layout_kv, kv_name, pre_tokens, next_tokens):
    if layout_query not in ("BSND", "TND"):
        raise ValueError("spattn: layout_query is BSND or TND, not %r" % (layout_query,))
    if layout_kv not in ("PA_BSND", "BSND", "TND"):
        raise ValueError("spattn: %s is PA_BSND, BSND or TND, not %r" % (kv_name, layout_kv))
    if pre_tokens != _NO_WINDOW or next_tokens != _NO_WINDOW:
        raise ValueError("spattn: pre_tokens and next_tokens take only their default 2^63 - 1 "
                         "(sparse_mode says which keys a query sees)")


def _dsa_queries(query, layout_query, actual_seq_lengths_query):
    """Each batch's query count S_b, the rows of query's leading dims
    (flattened) that hold those queries, and the leading dims."""
    if layout_query == "BSND":
        b, s1 = query.shape[0], query.shape[1]
        counts = [s1] * b
        if actual_seq_lengths_query is not None:
            counts = _lengths("actual_seq_lengths_query", actual_seq_lengths_query, False)
            if len(counts) != b or any(c < 0 or c > s1 for c in counts):
                raise ValueError("spattn: actual_seq_lengths_query must give each of the %d batches "
                                 "0..%d queries, got %s" % (b, s1, counts))
        return counts, [bi * s1 + i for bi in range(b) for i in range(counts[bi])], (b, s1)
    if actual_seq_lengths_query is None:
        raise ValueError("spattn: a TND query needs actual_seq_lengths_query (prefix sums)")
    counts = _lengths("actual_seq_lengths_query", actual_seq_lengths_query, True)
    if sum(counts) > query.shape[0]:
        raise ValueError("spattn: actual_seq_lengths_query ends at %d, past the query's %d rows"
                         % (sum(counts), query.shape[0]))
    return counts, list(range(sum(counts))), (query.shape[0],)


def _dsa_key_lengths(layout_kv, kv_name, key, block_table, actual, actual_name, batches):
    """Each batch's key count L_b (per-batch counts; prefix sums for TND), or
    None where a BSND key's S2 is every batch's, after the layout's rules."""
    if layout_kv in ("TND", "PA_BSND") and actual is None:
        raise ValueError("spattn: a %s key needs %s" % (layout_kv, actual_name))
    if layout_kv == "PA_BSND" and block_table is None:
        raise ValueError("spattn: a PA_BSND key needs block_table")
    if layout_kv != "PA_BSND" and block_table is not None:
        raise ValueError("spattn: block_table goes with %s PA_BSND" % kv_name)
    if block_table is not None:
        _lib.check_tensor("block_table", block_table, 2, (torch.int32,))
    lengths = _lengths(actual_name, actual, layout_kv == "TND") if actual is not None else None
    if lengths is None and layout_kv == "BSND" and key.shape[0] != batches:
        raise ValueError("spattn: key has %d batches, the query %d" % (key.shape[0], batches))
    return lengths


def _dsa_pack(name, t, lead, rows):
    """t [*lead, ...] as [len(rows), ...], the rows that hold queries."""
    if tuple(t.shape[:len(lead)]) != tuple(lead):
        raise ValueError("spattn: %s has shape %s; its leading dims must be the query's %s"
                         % (name, _shape(t), str(tuple(lead))))
    flat = t.reshape((-1,) + tuple(t.shape[len(lead):]))
    if rows == list(range(len(rows))):  # all of them, or a prefix: a view
        return flat[:len(rows)]
    return flat.index_select(0, torch.tensor(rows, dtype=torch.long))


def _dsa_all_rows(lead, rows):
    """Whether every row of the leading dims holds a query."""
    total = 1
    for n in lead:
        total *= n
    return len(rows) == total


def _dsa_unpack(x, lead, rows, fill):
    """x [len(rows), ...], the native operator's rows, as [*lead, ...]: the
    rows without a query are fill."""
    rest = tuple(x.shape[1:])
    if _dsa_all_rows(lead, rows):
        return x.reshape(tuple(lead) + rest)
    full = torch.full(tuple(lead) + rest, fill, dtype=x.dtype)
    full.view((-1,) + rest)[torch.tensor(rows, dtype=torch.long)] = x
    return full


# ---- DeepSeek sparse attention: the lightning indexer (LightningIndexer) ----
# torch_npu.npu_lightning_indexer's arguments, names, order and defaults. The
# union contract: query BSND [B, S1, N1, D] (batches with fewer queries than
# S1 as actual_seq_lengths_query says: their rows past it get -1 / -inf) or
# TND [T1, N1, D] (prefix sums); key PA_BSND [blocks, block_size, N2, D]
# through block_table, BSND [B, S2, N2, D] or TND [T2, N2, D] (prefix sums);
# any N1, N2, D up to 768, sparse_count up to 65536, float16 / bfloat16 /
# float32 / float64, weights float32 or the query's dtype. Returns
# (sparse_indices int32, sparse_values in the query's dtype, or an empty
# tensor without return_value). Differentiable through sparse_values (the
# scores at the selected keys) in query, key and weights
# (LightningIndexerGrad, the backward operator npu_lightning_indexer_backward
# after the SFA section); the indices have none. A paged key has gradients
# for the query and weights only.

L.define("npu_lightning_indexer(Tensor query, Tensor key, Tensor weights, *, "
        "Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, "
        "Tensor? block_table=None, str layout_query=\"BSND\", str layout_key=\"BSND\", "
        "int sparse_count=2048, int sparse_mode=3, int pre_tokens=9223372036854775807, "
        "int next_tokens=9223372036854775807, bool return_value=False) -> (Tensor, Tensor)")


@L.cpu("npu_lightning_indexer")
def _lightning_indexer_cpu(query, key, weights, actual_seq_lengths_query=None,
                           actual_seq_lengths_key=None, block_table=None, layout_query="BSND",
                           layout_key="BSND", sparse_count=2048, sparse_mode=3,
                           pre_tokens=2**63 - 1, next_tokens=2**63 - 1, return_value=False):
    if _lib.dsa_li_ws is None:
        raise RuntimeError("spattn: the loaded libspattn has no spa_dsa_lightning_indexer")
    _dsa_layouts(layout_query, layout_key, "layout_key", pre_tokens, next_tokens)
    _lib.check_tensor("query", query, 4 if layout_query == "BSND" else 3)
    _lib.check_tensor("key", key, 3 if layout_key == "TND" else 4)
    _lib.check_tensor("weights", weights, 3 if layout_query == "BSND" else 2)
    counts, rows, lead = _dsa_queries(query, layout_query, actual_seq_lengths_query)
    skv = _dsa_key_lengths(layout_key, "layout_key", key, block_table, actual_seq_lengths_key,
                           "actual_seq_lengths_key", len(counts))
    q = _dsa_pack("query", query, lead, rows)
    w = _dsa_pack("weights", weights, lead, rows)
    n2 = key.shape[-2]
    idx = _lib.new_output((q.shape[0], n2, sparse_count), torch.int32)
    val = _lib.new_output((q.shape[0], n2, sparse_count), query.dtype) if return_value else None
    sq, keep_q = _lib.int_array(counts)
    kv, keep_kv = (_lib.int_array(skv) if skv is not None else (None, None))
    d = _lib.describe
    _lib.call("spa_dsa_lightning_indexer", _lib.dsa_li_ws,
              (d(q), d(key), d(w), d(block_table) if block_table is not None else None, sq, kv,
               sparse_count, sparse_mode, d(idx), d(val) if val is not None else None))
    # padding rows: -1 and -inf, as CANN leaves them
    idx = _dsa_unpack(idx, lead, rows, -1)
    val = _dsa_unpack(val, lead, rows, float("-inf")) if val is not None else query.new_empty((0,))
    return idx, val




# ---- DeepSeek sparse attention: sparse MLA (SparseFlashAttention) ----
# torch_npu.npu_sparse_flash_attention's arguments, names, order and
# defaults. The union contract: query BSND / TND as the indexer's (BSND
# padding rows: out 0, softmax_max -FLT_MAX, softmax_sum 0); key, key_rope
# and value PA_BSND through block_table, BSND or TND; any N1 (up to 128) a
# multiple of any N2, D + Dr and Dv up to 768, sparse_block_size 1..4096,
# sparse_mode 0 or 3, float16 / bfloat16 / float32 / float64. attention_mode
# 0 and 2 compute the same thing: scores over [query | query_rope] .
# [key | key_rope], P times the value given; MLA-absorb (2) passes the key
# itself (or a view of its first Dv elements) as value, which the native
# operator sees and then reads each selected key row once. Returns
# (attention_out [.., N1, Dv], softmax_max, softmax_sum), the statistics
# BSND [B, N2, S1, G] / TND [N2, T1, G] float32 (float64 for float64 inputs)
# with return_softmax_lse, else empty. Differentiable in query, key, value,
# query_rope and key_rope (SparseFlashAttentionGrad, the backward operator
# npu_sparse_flash_attention_backward below); a paged key has gradients for
# the queries only.

L.define("npu_sparse_flash_attention(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, "
        "float scale_value, *, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, "
        "Tensor? actual_seq_lengths_kv=None, Tensor? query_rope=None, Tensor? key_rope=None, "
        "int sparse_block_size=1, str layout_query=\"BSND\", str layout_kv=\"BSND\", "
        "int sparse_mode=3, int pre_tokens=9223372036854775807, "
        "int next_tokens=9223372036854775807, int attention_mode=0, bool return_softmax_lse=False) "
        "-> (Tensor attention_out, Tensor softmax_max, Tensor softmax_sum)")

_NOT_SEEN_MAX = -torch.finfo(torch.float32).max  # softmax_max of a query that sees no token


def _sparse_indices(t):
    """sparse_indices as the native operator takes them: int32 (int64
    converted, checked to fit, so that no index wraps into a valid one)."""
    if isinstance(t, torch.Tensor) and t.dtype == torch.int64 and t.device.type == "cpu":
        if t.numel() and (int(t.max()) > 2**31 - 1 or int(t.min()) < -2**31):
            raise ValueError("spattn: sparse_indices hold values outside int32")
        t = t.to(torch.int32)
    _lib.check_tensor("sparse_indices", t, None, (torch.int32,))
    return t


def _described(t):
    """The spa_tensor of t, or None (NULL) for an absent optional tensor."""
    return _lib.describe(t) if t is not None else None


def _sfa_stats(lead, n2, g, rows, dtype):
    """softmax_max / softmax_sum: the tensor torch_npu returns (BSND [B, N2,
    S1, G], TND [N2, T1, G]) where the native operator's [N2, T, G] is a view
    of it (no padding rows; BSND with N2, B or S1 of 1), else None; and the
    [N2, T, G] the native operator writes."""
    if _dsa_all_rows(lead, rows):
        if len(lead) == 1:
            out = _lib.new_output((n2, lead[0], g), dtype)
            return out, out
        b, s1 = lead
        if n2 == 1 or b == 1 or s1 == 1:  # then B and S1 merge into one stride
            out = _lib.new_output((b, n2, s1, g), dtype)
            return out, out.permute(1, 0, 2, 3).view(n2, b * s1, g)
    return None, _lib.new_output((n2, len(rows), g), dtype)


def _sfa_stats_placed(out, native, lead, rows, fill):
    """The statistics in torch_npu's layout from the native [N2, T, G]."""
    if out is not None:
        return out
    x = _dsa_unpack(native.transpose(0, 1), lead, rows, fill)  # [*lead, N2, G]
    return (x.permute(1, 0, 2) if len(lead) == 1 else x.permute(0, 2, 1, 3)).contiguous()


def _sfa_index_hint(idx, counts, lengths, sbs, lead, rows):
    """The first entry of sparse_indices that selects no token of its batch,
    in the caller's coordinates, or "" (then the rule alone says it)."""
    if sbs < 1 or len(lengths) != len(counts):
        return ""
    t0 = 0
    for b, (n, length) in enumerate(zip(counts, lengths)):
        x = idx[t0:t0 + n].long()
        bad = ((x != -1) & ((x < 0) | (x * sbs >= length))).nonzero()
        if len(bad):
            t, head, slot = bad[0].tolist()
            at = divmod(rows[t0 + t], lead[1]) if len(lead) == 2 else (rows[t0 + t],)
            where = "sparse_indices[%s] = %d" % (", ".join(str(i) for i in at + (head, slot)),
                                                 int(x[t, head, slot]))
            if length <= 0:
                return "%s: batch %d has no tokens (its entries must be -1)" % (where, b)
            return ("%s: batch %d has %d tokens, blocks 0..%d of sparse_block_size %d (or -1 "
                    "for none)" % (where, b, length, (length + sbs - 1) // sbs - 1, sbs))
        t0 += n
    return ""


@L.cpu("npu_sparse_flash_attention")
def _sparse_flash_attention_cpu(query, key, value, sparse_indices, scale_value, block_table=None,
                                actual_seq_lengths_query=None, actual_seq_lengths_kv=None,
                                query_rope=None, key_rope=None, sparse_block_size=1,
                                layout_query="BSND", layout_kv="BSND", sparse_mode=3,
                                pre_tokens=2**63 - 1, next_tokens=2**63 - 1, attention_mode=0,
                                return_softmax_lse=False):
    if _lib.dsa_sfa_ws is None:
        raise RuntimeError("spattn: the loaded libspattn has no spa_dsa_sparse_attention")
    _dsa_layouts(layout_query, layout_kv, "layout_kv", pre_tokens, next_tokens)
    if sparse_mode not in (0, 3):
        raise ValueError("spattn: sparse_mode is 0 (every key of the batch) or 3 (rightDownCausal), "
                         "not %d" % sparse_mode)
    if attention_mode not in (0, 2):
        raise ValueError("spattn: attention_mode is 0 or 2 (MLA-absorb: value is the key), not %d"
                         % attention_mode)
    if (query_rope is None) != (key_rope is None):
        raise ValueError("spattn: query_rope and key_rope go together (both or neither)")
    q_rank, kv_rank = (4 if layout_query == "BSND" else 3), (3 if layout_kv == "TND" else 4)
    _lib.check_tensor("query", query, q_rank)
    _lib.check_tensor("key", key, kv_rank)
    _lib.check_tensor("value", value, kv_rank)
    if query_rope is not None:
        _lib.check_tensor("query_rope", query_rope, q_rank)
        _lib.check_tensor("key_rope", key_rope, kv_rank)
    sparse_indices = _sparse_indices(sparse_indices)
    if sparse_indices.dim() != q_rank:
        raise ValueError("spattn: sparse_indices must have %d dimensions (%s), got shape %s"
                         % (q_rank, "[B, S1, N2, K]" if q_rank == 4 else "[T1, N2, K]",
                            _shape(sparse_indices)))
    counts, rows, lead = _dsa_queries(query, layout_query, actual_seq_lengths_query)
    skv = _dsa_key_lengths(layout_kv, "layout_kv", key, block_table, actual_seq_lengths_kv,
                           "actual_seq_lengths_kv", len(counts))
    q = _dsa_pack("query", query, lead, rows)
    qr = _dsa_pack("query_rope", query_rope, lead, rows) if query_rope is not None else None
    idx = _dsa_pack("sparse_indices", sparse_indices, lead, rows)
    n1, n2 = query.shape[-2], key.shape[-2]
    g = n1 // n2 if n2 else 0  # N1 not a multiple of N2: the native operator refuses, naming it
    out = _lib.new_output((q.shape[0], n1, value.shape[-1]), query.dtype)
    stat_dtype = _stat_dtype(query)
    mx_out = mx = sm_out = sm = None
    if return_softmax_lse:
        mx_out, mx = _sfa_stats(lead, n2, g, rows, stat_dtype)
        sm_out, sm = _sfa_stats(lead, n2, g, rows, stat_dtype)
    sq, keep_q = _lib.int_array(counts)
    kv, keep_kv = (_lib.int_array(skv) if skv is not None else (None, None))
    d = _described
    try:
        _lib.call("spa_dsa_sparse_attention", _lib.dsa_sfa_ws,
                  (d(q), d(qr), d(key), d(key_rope), d(value), d(idx), d(block_table), sq, kv,
                   scale_value, sparse_block_size, sparse_mode, d(out), d(mx), d(sm)))
    except _lib.SpattnError as e:
        lengths = skv if skv is not None else [key.shape[1]] * len(counts)
        hint = "sparse_indices" in e.rule and _sfa_index_hint(idx, counts, lengths, sparse_block_size,
                                                              lead, rows)
        if not hint:
            raise
        raise e.with_hint(hint) from None
    out = _dsa_unpack(out, lead, rows, 0.0)  # a padding row attends to nothing: 0
    if not return_softmax_lse:  # torch_npu's empty statistics
        return out, query.new_empty((0,), dtype=stat_dtype), query.new_empty((0,), dtype=stat_dtype)
    return (out, _sfa_stats_placed(mx_out, mx, lead, rows, _NOT_SEEN_MAX),
            _sfa_stats_placed(sm_out, sm, lead, rows, 0.0))


# The backward operator: the forward's arguments, attention_out and its
# statistics as the forward returned them (return_softmax_lse=True), and
# grad_out, the gradient of attention_out. Returns (dquery, dkey, dvalue,
# dquery_rope, dkey_rope) in the layouts and dtype of their inputs; BSND
# padding rows of dquery / dquery_rope are 0; dquery_rope and dkey_rope are
# empty without rope. merge_value: value is key or a view of its first Dv
# elements (the native operator's MLA-absorb test), and dkey holds the
# gradient of both (dvalue empty). A PA_BSND key: its pages are gathered into
# a BSND copy for the native grad (which takes no block table), and dkey,
# dvalue and dkey_rope are empty (the pages get no gradient).

L.define("npu_sparse_flash_attention_backward(Tensor grad_out, Tensor query, Tensor key, "
        "Tensor value, Tensor sparse_indices, float scale_value, Tensor attention_out, "
        "Tensor softmax_max, Tensor softmax_sum, *, Tensor? block_table=None, "
        "Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_kv=None, "
        "Tensor? query_rope=None, Tensor? key_rope=None, int sparse_block_size=1, "
        "str layout_query=\"BSND\", str layout_kv=\"BSND\", int sparse_mode=3, "
        "bool merge_value=False) "
        "-> (Tensor dquery, Tensor dkey, Tensor dvalue, Tensor dquery_rope, Tensor dkey_rope)")


def _sfa_value_in_key(key, value, at=torch.Tensor.data_ptr):
    """The native operator's MLA-absorb test: value is key's memory (at:
    where a tensor starts) with key's strides and leading dims, its last dim
    at most key's."""
    return (at(value) == at(key) and value.dtype == key.dtype
            and value.dim() == key.dim() and tuple(value.stride()) == tuple(key.stride())
            and tuple(value.shape[:-1]) == tuple(key.shape[:-1]) and value.shape[-1] <= key.shape[-1])


def _sfa_gather_pages(table, lengths, page, blocks):
    """The (page, row) of each BSND row [B, max L] of a paged cache of
    `blocks` pages; rows past a batch's length read row 0 of page 0 (the grad
    never reads them). The table's pages of every batch's rows are checked
    first, as the native operator checks them."""
    batches, lmax = len(lengths), max(max(lengths, default=0), 1)
    if table.shape[0] != batches or table.shape[1] * page < max(lengths, default=0):
        raise ValueError("spattn: block_table has shape %s; it needs a row per batch (%d) and the "
                         "pages of %d rows of page size %d" % (_shape(table), batches, lmax, page))
    pos = torch.arange(lmax)
    seen = pos[None, :] < torch.tensor(lengths, dtype=torch.long)[:, None]
    pages = table.long()[:, torch.clamp(pos // page, max=max(table.shape[1] - 1, 0))]
    if bool((seen & ((pages < 0) | (pages >= blocks))).any()):
        raise ValueError("spattn: block_table: the pages of the batches' rows must be pages of the "
                         "key cache (0 .. %d)" % (blocks - 1))
    zero = torch.zeros((), dtype=torch.long)
    return torch.where(seen, pages, zero), torch.where(seen, (pos % page).expand(batches, lmax), zero)


def _sfa_native_stats(name, s, lead, rows, n2, g, dtype):
    """softmax_max / softmax_sum as the forward returned them (BSND [B, N2,
    S1, G], TND [N2, T1, G]) as the native [N2, T, G] (a view where it can)."""
    want = (lead[0], n2, lead[1], g) if len(lead) == 2 else (n2, lead[0], g)
    _lib.check_tensor(name, s, len(want), (dtype,))
    if tuple(s.shape) != want:
        raise ValueError("spattn: %s has shape %s; the forward's (return_softmax_lse=True) is %s"
                         % (name, _shape(s), str(want)))
    x = s.permute(0, 2, 1, 3) if len(lead) == 2 else s.transpose(0, 1)  # [*lead, N2, G]
    return _dsa_pack(name, x, lead, rows).transpose(0, 1)


@L.cpu("npu_sparse_flash_attention_backward")
def _sparse_flash_attention_backward_cpu(grad_out, query, key, value, sparse_indices, scale_value,
                                         attention_out, softmax_max, softmax_sum, block_table=None,
                                         actual_seq_lengths_query=None, actual_seq_lengths_kv=None,
                                         query_rope=None, key_rope=None, sparse_block_size=1,
                                         layout_query="BSND", layout_kv="BSND", sparse_mode=3,
                                         merge_value=False):
    require(_lib.dsa_sfa_grad_ws, "spa_dsa_sparse_attention_grad")
    _dsa_layouts(layout_query, layout_kv, "layout_kv", _NO_WINDOW, _NO_WINDOW)
    if (query_rope is None) != (key_rope is None):
        raise ValueError("spattn: query_rope and key_rope go together (both or neither)")
    q_rank, kv_rank = (4 if layout_query == "BSND" else 3), (3 if layout_kv == "TND" else 4)
    for name, t, rank in (("grad_out", grad_out, q_rank), ("query", query, q_rank), ("key", key, kv_rank),
                          ("value", value, kv_rank), ("attention_out", attention_out, q_rank)):
        _lib.check_tensor(name, t, rank)
    if query_rope is not None:
        _lib.check_tensor("query_rope", query_rope, q_rank)
        _lib.check_tensor("key_rope", key_rope, kv_rank)
    sparse_indices = _sparse_indices(sparse_indices)
    counts, rows, lead = _dsa_queries(query, layout_query, actual_seq_lengths_query)
    skv = _dsa_key_lengths(layout_kv, "layout_kv", key, block_table, actual_seq_lengths_kv,
                           "actual_seq_lengths_kv", len(counts))
    n1, n2 = query.shape[-2], key.shape[-2]
    g = n1 // n2 if n2 and n1 % n2 == 0 else 0  # else the native operator refuses, naming it
    stat_dtype = _stat_dtype(query)
    mx = _sfa_native_stats("softmax_max", softmax_max, lead, rows, n2, g, stat_dtype)
    sm = _sfa_native_stats("softmax_sum", softmax_sum, lead, rows, n2, g, stat_dtype)
    q = _dsa_pack("query", query, lead, rows)
    qr = _dsa_pack("query_rope", query_rope, lead, rows) if query_rope is not None else None
    idx = _dsa_pack("sparse_indices", sparse_indices, lead, rows)
    out = _dsa_pack("attention_out", attention_out, lead, rows)
    dy = _dsa_pack("grad_out", grad_out, lead, rows)
    k, v, kr = key, value, key_rope
    paged = layout_kv == "PA_BSND"
    if paged:  # the native grad takes no block table: the batches' rows as a BSND copy
        page, row = _sfa_gather_pages(block_table, skv, key.shape[1], key.shape[0])
        k = key[page, row]
        kr = key_rope[page, row] if key_rope is not None else None
        if _sfa_value_in_key(key, value):  # no key gradient is returned: none for value either
            v, merge_value = k[..., :value.shape[-1]], True
        else:
            v = value[page, row]
    dq = _lib.new_output(q.shape, query.dtype)
    dqr = _lib.new_output(qr.shape, query.dtype) if qr is not None else None
    dk = _lib.new_output(k.shape, query.dtype)
    dkr = _lib.new_output(kr.shape, query.dtype) if kr is not None else None
    dv = None if merge_value else _lib.new_output(v.shape, query.dtype)
    sq, keep_q = _lib.int_array(counts)
    kv, keep_kv = (_lib.int_array(skv) if skv is not None else (None, None))
    d = _described
    _lib.call("spa_dsa_sparse_attention_grad", _lib.dsa_sfa_grad_ws,
              (d(q), d(qr), d(k), d(kr), d(v), d(idx), sq, kv, d(out), d(dy), d(mx), d(sm),
               scale_value, sparse_block_size, sparse_mode, d(dq), d(dqr), d(dk), d(dkr), d(dv)))
    empty = query.new_empty((0,))
    dq = _dsa_unpack(dq, lead, rows, 0.0)  # a padding row has no gradient: 0
    dqr = _dsa_unpack(dqr, lead, rows, 0.0) if dqr is not None else empty
    if paged:
        return dq, empty, empty, dqr, empty
    return (dq, dk, dv if dv is not None else empty, dqr, dkr if dkr is not None else empty)


def _sfa_root(t):
    return t._base if t._base is not None else t


_SFA_KEY_INPUTS = (("key", 1), ("value", 2), ("key_rope", 9))  # the paged ones (PA_BSND)


class SparseFlashAttentionAutograd(torch.autograd.Function):
    """apply(*the operator's arguments): the forward computes the softmax
    statistics (saved for the grad) whether or not return_softmax_lse asks
    for them."""

    @staticmethod
    def forward(ctx, query, key, value, sparse_indices, scale_value, block_table, sq, skv, query_rope,
                key_rope, sparse_block_size, layout_query, layout_kv, sparse_mode, pre_tokens,
                next_tokens, attention_mode, return_softmax_lse):
        out, mx, sm = L.below_autograd(
            L.op("npu_sparse_flash_attention"), query, key, value, sparse_indices, scale_value,
            block_table=block_table, actual_seq_lengths_query=sq, actual_seq_lengths_kv=skv,
            query_rope=query_rope, key_rope=key_rope, sparse_block_size=sparse_block_size,
            layout_query=layout_query, layout_kv=layout_kv, sparse_mode=sparse_mode,
            pre_tokens=pre_tokens, next_tokens=next_tokens, attention_mode=attention_mode,
            return_softmax_lse=True)
        needs = ctx.needs_input_grad
        # value is the key (MLA-absorb) for autograd too (the same tensor, or
        # views of one tensor): dkey gets both gradients, value none; else
        # (a separate value, or one aliasing the key's memory outside the
        # graph) each its own
        ctx.merge_value = layout_kv != "PA_BSND" and (
            value is key or (needs[1] and needs[2] and _sfa_root(value) is _sfa_root(key)
                             and _sfa_value_in_key(key, value, torch.Tensor.storage_offset)))
        ctx.save_for_backward(query, key, value, sparse_indices, block_table, sq, skv, query_rope,
                              key_rope, out, mx, sm)
        ctx.args = (scale_value, sparse_block_size, layout_query, layout_kv, sparse_mode)
        if not return_softmax_lse:  # torch_npu's empty statistics; the grad's are saved
            mx, sm = mx.new_empty((0,)), sm.new_empty((0,))
        ctx.mark_non_differentiable(mx, sm)
        return out, mx, sm

    @staticmethod
    @first_order_only
    def backward(ctx, grad_out, _grad_max, _grad_sum):
        query, key, value, idx, table, sq, skv, query_rope, key_rope, out, mx, sm = ctx.saved_tensors
        scale, sbs, layout_query, layout_kv, mode = ctx.args
        dq, dk, dv, dqr, dkr = L.below_autograd(
            L.op("npu_sparse_flash_attention_backward"), grad_out, query, key, value, idx, scale, out,
            mx, sm, block_table=table, actual_seq_lengths_query=sq, actual_seq_lengths_kv=skv,
            query_rope=query_rope, key_rope=key_rope, sparse_block_size=sbs,
            layout_query=layout_query, layout_kv=layout_kv, sparse_mode=mode,
            merge_value=ctx.merge_value)
        grads = (dq, dk, None if ctx.merge_value else dv, None, None, None, None, None, dqr, dkr)
        return L.needed(grads + (None,) * 8, ctx.needs_input_grad)


def _sparse_flash_attention_autograd(*args):
    """The operator's autograd kernel (args in the schema's order): a graph
    is recorded only under grad mode with an input that requires a gradient;
    the key's pages (PA_BSND) have none, said before anything runs."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    graph = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    if not graph and not (forward_ad._current_level >= 0  # forward mode: the Function says it has no jvp
                          and any(forward_ad.unpack_dual(t).tangent is not None for t in tensors)):
        return L.below_autograd(L.op("npu_sparse_flash_attention"), *args[:5],
                                **dict(zip(_SFA_KEYWORDS, args[5:])))
    paged = " and ".join(name for name, i in _SFA_KEY_INPUTS
                         if graph and args[12] == "PA_BSND" and isinstance(args[i], torch.Tensor)
                         and args[i].requires_grad)
    if paged:
        raise ValueError(
            "spattn: npu_sparse_flash_attention: %s cannot have a gradient with "
            "layout_kv=\"PA_BSND\" (a paged cache): the gradient needs a BSND or TND key; detach "
            "%s for the gradients of the queries alone" % (paged, paged))
    return SparseFlashAttentionAutograd.apply(*args)


_SFA_KEYWORDS = tuple(a.name for a in L.op("npu_sparse_flash_attention").default._schema.arguments
                      if a.kwarg_only)
L.register("npu_sparse_flash_attention", _sparse_flash_attention_autograd, "Autograd")
L.not_differentiable("npu_sparse_flash_attention_backward")


# ---- the lightning indexer's backward (LightningIndexerGrad) ----
# The forward's arguments (no sparse_count / return_value: K is
# sparse_indices' last dim), its sparse_indices (int32 or int64, -1 skipped;
# any other entry must be a key the query sees) and grad_values, the
# gradient of sparse_values (the query's dtype or float32). Returns (dquery,
# dkey, dweights) in the layouts and dtypes of their inputs; BSND padding
# rows of dquery / dweights are 0, key rows no index selects 0. A PA_BSND
# key: its pages are gathered into a BSND copy for the native grad (which
# takes no block table), and dkey is empty (the pages get no gradient).

L.define("npu_lightning_indexer_backward(Tensor grad_values, Tensor query, Tensor key, "
        "Tensor weights, Tensor sparse_indices, *, Tensor? actual_seq_lengths_query=None, "
        "Tensor? actual_seq_lengths_key=None, Tensor? block_table=None, "
        "str layout_query=\"BSND\", str layout_key=\"BSND\", int sparse_mode=3) "
        "-> (Tensor dquery, Tensor dkey, Tensor dweights)")


@L.cpu("npu_lightning_indexer_backward")
def _lightning_indexer_backward_cpu(grad_values, query, key, weights, sparse_indices,
                                    actual_seq_lengths_query=None, actual_seq_lengths_key=None,
                                    block_table=None, layout_query="BSND", layout_key="BSND",
                                    sparse_mode=3):
    require(_lib.dsa_li_grad_ws, "spa_dsa_lightning_indexer_grad")
    _dsa_layouts(layout_query, layout_key, "layout_key", _NO_WINDOW, _NO_WINDOW)
    q_rank = 4 if layout_query == "BSND" else 3
    _lib.check_tensor("query", query, q_rank)
    _lib.check_tensor("key", key, 3 if layout_key == "TND" else 4)
    _lib.check_tensor("weights", weights, q_rank - 1)
    _lib.check_tensor("grad_values", grad_values, q_rank)
    _lib.check_tensor("sparse_indices", sparse_indices, q_rank, (torch.int32, torch.int64))
    counts, rows, lead = _dsa_queries(query, layout_query, actual_seq_lengths_query)
    skv = _dsa_key_lengths(layout_key, "layout_key", key, block_table, actual_seq_lengths_key,
                           "actual_seq_lengths_key", len(counts))
    q = _dsa_pack("query", query, lead, rows)
    w = _dsa_pack("weights", weights, lead, rows)
    idx = _dsa_pack("sparse_indices", sparse_indices, lead, rows)
    dy = _dsa_pack("grad_values", grad_values, lead, rows)
    k = key
    paged = layout_key == "PA_BSND"
    if paged:  # the native grad takes no block table: the batches' rows as a BSND copy
        page, row = _sfa_gather_pages(block_table, skv, key.shape[1], key.shape[0])
        k = key[page, row]
    dq = _lib.new_output(q.shape, query.dtype)
    dk = _lib.new_output(k.shape, query.dtype)
    dw = _lib.new_output(w.shape, weights.dtype)
    sq, keep_q = _lib.int_array(counts)
    kv, keep_kv = (_lib.int_array(skv) if skv is not None else (None, None))
    d = _lib.describe
    _lib.call("spa_dsa_lightning_indexer_grad", _lib.dsa_li_grad_ws,
              (d(q), d(k), d(w), d(idx), d(dy), sq, kv, sparse_mode, d(dq), d(dk), d(dw)))
    dq = _dsa_unpack(dq, lead, rows, 0.0)  # a padding row has no gradient: 0
    dw = _dsa_unpack(dw, lead, rows, 0.0)
    return dq, (query.new_empty((0,)) if paged else dk), dw


class LightningIndexerAutograd(torch.autograd.Function):
    """apply(*the operator's arguments) with return_value=True: sparse_values
    is differentiable, sparse_indices (saved for the grad) is not."""

    @staticmethod
    def forward(ctx, query, key, weights, sq, skv, block_table, layout_query, layout_key,
                sparse_count, sparse_mode, pre_tokens, next_tokens, return_value):
        idx, val = L.below_autograd(
            L.op("npu_lightning_indexer"), query, key, weights, actual_seq_lengths_query=sq,
            actual_seq_lengths_key=skv, block_table=block_table, layout_query=layout_query,
            layout_key=layout_key, sparse_count=sparse_count, sparse_mode=sparse_mode,
            pre_tokens=pre_tokens, next_tokens=next_tokens, return_value=return_value)
        ctx.save_for_backward(query, key, weights, idx, sq, skv, block_table)
        ctx.args = (layout_query, layout_key, sparse_mode)
        ctx.mark_non_differentiable(idx)
        return idx, val

    @staticmethod
    @first_order_only
    def backward(ctx, _grad_idx, grad_values):
        query, key, weights, idx, sq, skv, table = ctx.saved_tensors
        layout_query, layout_key, mode = ctx.args
        dq, dk, dw = L.below_autograd(
            L.op("npu_lightning_indexer_backward"), grad_values, query, key, weights, idx,
            actual_seq_lengths_query=sq, actual_seq_lengths_key=skv, block_table=table,
            layout_query=layout_query, layout_key=layout_key, sparse_mode=mode)
        return L.needed((dq, dk, dw) + (None,) * 10, ctx.needs_input_grad)


def _lightning_indexer_autograd(*args):
    """The operator's autograd kernel (args in the schema's order): a graph
    is recorded only under grad mode with return_value=True (sparse_values,
    the one output with a gradient) and an input that requires a gradient;
    the key's pages (PA_BSND) have none, said before anything runs."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    graph = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    dual = (forward_ad._current_level >= 0
            and any(forward_ad.unpack_dual(t).tangent is not None for t in tensors))
    if not args[12] or (not graph and not dual):  # no values (indices only), or no derivative asked
        return L.below_autograd(L.op("npu_lightning_indexer"), *args[:3],
                                **dict(zip(_LI_KEYWORDS, args[3:])))
    if graph and args[7] == "PA_BSND" and isinstance(args[1], torch.Tensor) and args[1].requires_grad:
        raise ValueError(
            "spattn: npu_lightning_indexer: key cannot have a gradient with layout_key=\"PA_BSND\" "
            "(a paged cache): the gradient needs a BSND or TND key; detach key for the gradients "
            "of query and weights alone")
    return LightningIndexerAutograd.apply(*args)


_LI_KEYWORDS = tuple(a.name for a in L.op("npu_lightning_indexer").default._schema.arguments
                     if a.kwarg_only)
L.register("npu_lightning_indexer", _lightning_indexer_autograd, "Autograd")
L.not_differentiable("npu_lightning_indexer_backward")
