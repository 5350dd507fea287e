"""Multi-scale deformable attention with the shapes of Deformable-DETR and mmcv.

    value               [bs, num_keys, num_heads, C]       f32, f16, bf16 or f64
    spatial_shapes      [num_levels, 2] rows (H, W)        int64 or int32
    level_start_index   [num_levels]                       int64 or int32
    sampling_locations  [bs, num_queries, num_heads, num_levels, num_points, 2]  (x, y) in [0, 1]
    attention_weights   [bs, num_queries, num_heads, num_levels, num_points]
    -> output           [bs, num_queries, num_heads * C]  in value's dtype

Any sizes (C, queries, heads, levels, points; no NPU limits). The float
tensors may differ in dtype, as torch.autocast hands them over (e.g. bf16
value, f32 locations and weights): each is widened to f32 (to f64 when any
is float64), the output is in value's dtype and each gradient in its input's
dtype. All three float inputs get gradients.
"""
import torch

from . import _lib, _onnx
from ._autograd import first_order_only


def _index(name, t):
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t, dtype=torch.int64)
    _lib.check_tensor(name, t, None, (torch.int64, torch.int32))
    return t


def _forward(value, shapes, starts, loc, attn):
    _lib.check_tensor("value", value, 4)
    _lib.check_tensor("sampling_locations", loc, 6)
    _lib.check_tensor("attention_weights", attn, 5)
    bs, _, nh, c = value.shape
    out = _lib.new_output((bs, loc.shape[1], nh * c), value.dtype)
    d = _lib.describe
    _lib.call("spa_msda", _lib.msda_ws,
              (d(value), d(shapes), d(starts), d(loc), d(attn), d(out)))
    return out


def _backward(value, shapes, starts, loc, attn, grad_out):
    grad_value = _lib.new_output(value.shape, value.dtype)
    grad_loc = _lib.new_output(loc.shape, loc.dtype)
    grad_attn = _lib.new_output(attn.shape, attn.dtype)
    d = _lib.describe
    _lib.call("spa_msda_grad", _lib.msda_grad_ws,
              (d(value), d(shapes), d(starts), d(loc), d(attn), d(grad_out),
               d(grad_value), d(grad_loc), d(grad_attn)))
    return grad_value, grad_loc, grad_attn


class MSDeformAttnFunction(torch.autograd.Function):
    """Deformable-DETR's MSDeformAttnFunction: the same apply() signature
    (im2col_step is accepted and not needed), so replacing the CUDA
    extension is a one-line import change."""

    @staticmethod
    def forward(ctx, value, value_spatial_shapes, value_level_start_index, sampling_locations,
                attention_weights, im2col_step=64):
        shapes = _index("value_spatial_shapes", value_spatial_shapes)
        starts = _index("value_level_start_index", value_level_start_index)
        out = _forward(value, shapes, starts, sampling_locations, attention_weights)
        ctx.save_for_backward(value, shapes, starts, sampling_locations, attention_weights)
        return out

    @staticmethod
    def symbolic(g, value, value_spatial_shapes, value_level_start_index, sampling_locations,
                 attention_weights, im2col_step=64):
        # ONNX: the node of mmdeploy's ONNX Runtime custom op, its inputs in
        # its order and im2col_step as an attribute (never the result of the
        # example run baked in as a constant).
        return g.op("mmdeploy::MMCVMultiScaleDeformableAttention", value,
                    _onnx.as_value(g, value_spatial_shapes),
                    _onnx.as_value(g, value_level_start_index), sampling_locations,
                    attention_weights, im2col_step_i=int(im2col_step))

    @staticmethod
    @first_order_only
    def backward(ctx, grad_output):
        value, shapes, starts, loc, attn = ctx.saved_tensors
        gv, gl, ga = _backward(value, shapes, starts, loc, attn, grad_output)
        need = ctx.needs_input_grad
        return (gv if need[0] else None, None, None, gl if need[3] else None,
                ga if need[4] else None, None)


def ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations,
                   attention_weights):
    """mmcv's multi_scale_deformable_attn_pytorch / Deformable-DETR's
    ms_deform_attn_core_pytorch, differentiable, computed by spattn.
    spatial_shapes and level_start_index may be tensors or sequences."""
    return MSDeformAttnFunction.apply(value, spatial_shapes, level_start_index,
                                      sampling_locations, attention_weights, 64)
