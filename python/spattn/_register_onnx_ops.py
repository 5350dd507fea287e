"""ONNX export of the spattn operators: every symbolic, in one place.

torch.onnx.export traces a model into torch.ops.spattn.* nodes and maps each
through the symbolic registered here for it. An operator with a runtime's
custom op becomes that node with all of the operator's inputs (multi-scale
deformable attention: mmdeploy's ONNX Runtime op
mmdeploy::MMCVMultiScaleDeformableAttention); one without refuses with an
error that says why. Never the example run's result written as a constant.
A new operator gets its symbolic (or a refusal) in _SYMBOLICS.
"""
import contextlib

import torch
from torch.onnx import symbolic_helper

# The lowest opset torch.onnx writes: a symbolic registered for opset N
# serves every opset from N up.
_FROM_OPSET = 7

# How ms_deform_attn exports: "custom_op" (mmdeploy's node, run by
# libspattn_ort.so or mmdeploy's TensorRT plugin) or "grid_sample" (standard
# ONNX operators only, GridSample of opset 16, for runtimes that load no
# third-party library). onnx_export_mode() switches it.
_MODES = ("custom_op", "grid_sample")
_mode = ["custom_op"]


@contextlib.contextmanager
def onnx_export_mode(mode):
    """with spattn.onnx_export_mode("grid_sample"): torch.onnx.export(...,
    opset_version=16) writes multi-scale deformable attention as standard
    ONNX operators (per level a Slice of value's rows and a GridSample, then
    the weighted sum), which any ONNX runtime with opset 16 runs, slower than
    the custom op; "custom_op" (the default) writes mmdeploy's node."""
    if mode not in _MODES:
        raise ValueError("spattn: onnx_export_mode takes %s, not %r" % (" or ".join(_MODES), mode))
    saved = _mode[0]
    _mode[0] = mode
    try:
        yield
    finally:
        _mode[0] = saved


def refuse(op):
    raise RuntimeError(
        "spattn: %s has no ONNX operator (no runtime implements it as a custom op), so "
        "torch.onnx.export refuses it rather than writing the example's result as a "
        "constant" % op)


def _sizes(v):
    sizes = symbolic_helper._get_tensor_sizes(v)
    return list(sizes) if sizes is not None else None


def _output_type(value, sampling_locations):
    """The custom node's output type: value's dtype, shape [bs, nq, nh * C]
    where the export knows the dims (None where they are dynamic)."""
    vs, ls = _sizes(value), _sizes(sampling_locations)
    if vs is None or ls is None or len(vs) != 4 or len(ls) != 6:
        return value.type()
    nhc = vs[2] * vs[3] if vs[2] is not None and vs[3] is not None else None
    return value.type().with_sizes([ls[0], ls[1], nhc])


def _const(g, values):
    return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))


def _dim(g, shape, i):
    """Dim i of a Shape output, as a 1-element tensor."""
    return g.op("Gather", shape, _const(g, [i]), axis_i=0)


def _grid_sample_lowering(g, value, spatial_shapes, level_start_index, loc, attn):
    """mmcv's multi_scale_deformable_attn_pytorch in opset-16 operators: for
    each level, value's rows [start, start + H*W) as [bs*nh, C, H, W] and the
    locations as a grid 2*loc - 1 of [bs*nh, nq, np, 2], GridSample
    (bilinear, zero padding, align_corners 0: x*W - 0.5 as the operator
    samples); the samples of all levels times the weights, summed. The
    levels' shapes and starts are read from the tensors at run time; nl must
    be known at export (sampling_locations' dim 3)."""
    if symbolic_helper.GLOBALS.export_onnx_opset_version < 16:
        raise RuntimeError("spattn: onnx_export_mode('grid_sample') needs opset_version >= 16 "
                           "(GridSample), not %d" % symbolic_helper.GLOBALS.export_onnx_opset_version)
    ls = _sizes(loc)
    if ls is None or len(ls) != 6 or ls[3] is None:
        raise RuntimeError("spattn: onnx_export_mode('grid_sample') needs the number of levels "
                           "(sampling_locations' dim 3) known at export")
    nl = ls[3]
    vshape, lshape = g.op("Shape", value), g.op("Shape", loc)
    bs, nk, nh, c = (_dim(g, vshape, i) for i in range(4))
    nq, npt = _dim(g, lshape, 1), _dim(g, lshape, 4)
    bnh = g.op("Mul", bs, nh)
    shapes = g.op("Cast", spatial_shapes, to_i=7)  # int64
    starts = g.op("Cast", level_start_index, to_i=7)
    # [bs, nk, nh, C] -> [bs, nh, C, nk]
    v = g.op("Transpose", value, perm_i=[0, 2, 3, 1])
    # locations as the grid 2 * loc - 1, [bs, nq, nh, nl, np, 2] -> [bs, nh, nq, nl, np, 2]
    two = g.op("Constant", value_t=torch.tensor(2.0))
    one = g.op("Constant", value_t=torch.tensor(1.0))
    grid = g.op("Sub", g.op("Mul", loc, g.op("CastLike", two, loc)), g.op("CastLike", one, loc))
    grid = g.op("Transpose", grid, perm_i=[0, 2, 1, 3, 4, 5])
    samples = []
    for lvl in range(nl):
        h = g.op("Gather", g.op("Gather", shapes, _const(g, [lvl]), axis_i=0), _const(g, [0]), axis_i=1)
        w = g.op("Gather", g.op("Gather", shapes, _const(g, [lvl]), axis_i=0), _const(g, [1]), axis_i=1)
        h, w = g.op("Reshape", h, _const(g, [1])), g.op("Reshape", w, _const(g, [1]))
        start = g.op("Gather", starts, _const(g, [lvl]), axis_i=0)
        end = g.op("Add", start, g.op("Mul", h, w))
        vl = g.op("Slice", v, start, end, _const(g, [3]))
        vl = g.op("Reshape", vl, g.op("Concat", bnh, c, h, w, axis_i=0))
        gl = g.op("Gather", grid, _const(g, lvl), axis_i=3)  # [bs, nh, nq, np, 2]
        gl = g.op("Reshape", gl, g.op("Concat", bnh, nq, npt, _const(g, [2]), axis_i=0))
        samples.append(g.op("GridSample", vl, gl, mode_s="bilinear", padding_mode_s="zeros",
                            align_corners_i=0))  # [bs*nh, C, nq, np]
    sampled = g.op("Concat", *samples, axis_i=3)  # [bs*nh, C, nq, nl*np]
    a = g.op("Transpose", attn, perm_i=[0, 2, 1, 3, 4])  # [bs, nh, nq, nl, np]
    a = g.op("Reshape", a, g.op("Concat", bnh, _const(g, [1]), nq, _const(g, [-1]), axis_i=0))
    out = g.op("ReduceSum", g.op("Mul", sampled, a), _const(g, [3]), keepdims_i=0)  # [bs*nh, C, nq]
    out = g.op("Reshape", out, g.op("Concat", bs, g.op("Mul", nh, c), nq, axis_i=0))
    out = g.op("Transpose", out, perm_i=[0, 2, 1])
    out.setType(_output_type(value, loc))
    return out


@symbolic_helper.parse_args("v", "v", "v", "v", "v", "i")
def ms_deform_attn(g, value, spatial_shapes, level_start_index, sampling_locations,
                   attention_weights, im2col_step):
    if _mode[0] == "grid_sample":
        return _grid_sample_lowering(g, value, spatial_shapes, level_start_index,
                                     sampling_locations, attention_weights)
    # mmdeploy's inputs in its order, im2col_step as its attribute
    out = g.op("mmdeploy::MMCVMultiScaleDeformableAttention", value, spatial_shapes,
               level_start_index, sampling_locations, attention_weights,
               im2col_step_i=im2col_step)
    out.setType(_output_type(value, sampling_locations))
    return out


def _refusal(op):
    def symbolic(g, *args):
        return refuse(op)
    return symbolic


_SYMBOLICS = {
    "ms_deform_attn": ms_deform_attn,
    "nsa_compress": _refusal("nsa_compress"),
    "nsa_selected_attention": _refusal("nsa_selected_attention"),
    "nsa_compress_attention": _refusal("nsa_compress_attention"),
    "sliding_window_attention": _refusal("sliding_window_attention"),
    "npu_lightning_indexer": _refusal("npu_lightning_indexer"),
    "npu_sparse_flash_attention": _refusal("npu_sparse_flash_attention"),
    # the backward operators appear in no forward graph; said plainly if they do
    "ms_deform_attn_backward": _refusal("ms_deform_attn_backward"),
    "nsa_compress_backward": _refusal("nsa_compress_backward"),
    "nsa_selected_attention_backward": _refusal("nsa_selected_attention_backward"),
    "nsa_compress_attention_backward": _refusal("nsa_compress_attention_backward"),
    "sliding_window_attention_backward": _refusal("sliding_window_attention_backward"),
    "npu_sparse_flash_attention_backward": _refusal("npu_sparse_flash_attention_backward"),
    "npu_lightning_indexer_backward": _refusal("npu_lightning_indexer_backward"),
}


def register(namespace):
    for name, symbolic in _SYMBOLICS.items():
        torch.onnx.register_custom_op_symbolic("%s::%s" % (namespace, name), symbolic,
                                               _FROM_OPSET)
