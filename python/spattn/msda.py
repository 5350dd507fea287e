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

The functions and the module here are TorchScript: a scripted model calls
the operator torch.ops.spattn.ms_deform_attn (python/spattn/_ops.py).
"""
import math
from typing import Optional

import torch
from torch import Tensor, nn

from . import _ops


def _index(t: Tensor) -> Tensor:
    """Index arguments: tensors; in eager code also lists or tuples, made
    int64 tensors here. TorchScript takes tensors (the conversion folds away
    there, which keeps scripted graphs exportable)."""
    if not isinstance(t, Tensor):
        t = torch.tensor(t, dtype=torch.int64)
    return t


def ms_deform_attn(value: Tensor, spatial_shapes: Tensor,
                   level_start_index: Tensor, sampling_locations: Tensor,
                   attention_weights: Tensor) -> Tensor:
    """mmcv's multi_scale_deformable_attn_pytorch / Deformable-DETR's
    ms_deform_attn_core_pytorch, differentiable, computed by spattn.
    spatial_shapes and level_start_index are tensors (in eager code also
    lists)."""
    return torch.ops.spattn.ms_deform_attn(value, _index(spatial_shapes),
                                           _index(level_start_index), sampling_locations,
                                           attention_weights, 64)


def _function_apply(value: Tensor, value_spatial_shapes: Tensor,
                    value_level_start_index: Tensor, sampling_locations: Tensor,
                    attention_weights: Tensor, im2col_step: int = 64) -> Tensor:
    return torch.ops.spattn.ms_deform_attn(value, _index(value_spatial_shapes),
                                           _index(value_level_start_index), sampling_locations,
                                           attention_weights, im2col_step)


class MSDeformAttnFunction(_ops.MsdaAutograd):
    """Deformable-DETR's MSDeformAttnFunction: the same apply() signature
    (im2col_step is accepted and not needed), so replacing the CUDA
    extension is a one-line import change. apply() calls the operator
    (whose autograd kernel is this Function's formula), so that modules
    calling it script, save and export."""
    apply = staticmethod(_function_apply)


class MSDeformAttn(nn.Module):
    """The multi-scale deformable attention layer of Deformable-DETR (same
    constructor, forward signature and parameter names, so its checkpoints
    load), over spattn's operator.

    forward(query [N, Lq, d_model], reference_points [N, Lq, n_levels, 2]
    ((x, y) in [0, 1]) or [..., 4] (boxes cx, cy, w, h), input_flatten
    [N, sum of H*W, d_model], input_spatial_shapes [n_levels, 2],
    input_level_start_index [n_levels], input_padding_mask [N, sum of H*W]
    (True: padding) or None) -> [N, Lq, d_model]."""

    def __init__(self, d_model: int = 256, n_levels: int = 4, n_heads: int = 8,
                 n_points: int = 4):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("spattn: d_model (%d) must be divisible by n_heads (%d)"
                             % (d_model, n_heads))
        self.d_model, self.n_levels = d_model, n_levels
        self.n_heads, self.n_points = n_heads, n_points
        self.im2col_step = 64
        self.sampling_offsets = nn.Linear(d_model, n_heads * n_levels * n_points * 2)
        self.attention_weights = nn.Linear(d_model, n_heads * n_levels * n_points)
        self.value_proj = nn.Linear(d_model, d_model)
        self.output_proj = nn.Linear(d_model, d_model)
        self.reset_parameters()

    def reset_parameters(self):
        # Offsets start as a fan: head h looks along angle 2*pi*h/n_heads,
        # point p at (p + 1) steps, every level alike; uniform weights.
        nn.init.zeros_(self.sampling_offsets.weight)
        angles = torch.arange(self.n_heads, dtype=torch.float64) * (2.0 * math.pi / self.n_heads)
        direction = torch.stack([angles.cos(), angles.sin()], -1)
        direction = direction / direction.abs().max(-1, keepdim=True)[0]
        steps = torch.arange(1, self.n_points + 1, dtype=torch.float64)
        bias = direction[:, None, None, :] * steps[None, None, :, None]
        bias = bias.expand(self.n_heads, self.n_levels, self.n_points, 2)
        with torch.no_grad():
            self.sampling_offsets.bias.copy_(bias.reshape(-1))
        nn.init.zeros_(self.attention_weights.weight)
        nn.init.zeros_(self.attention_weights.bias)
        for proj in (self.value_proj, self.output_proj):
            nn.init.xavier_uniform_(proj.weight)
            nn.init.zeros_(proj.bias)

    def forward(self, query: Tensor, reference_points: Tensor, input_flatten: Tensor,
                input_spatial_shapes: Tensor,
                input_level_start_index: Tensor,
                input_padding_mask: Optional[Tensor] = None) -> Tensor:
        shapes = _index(input_spatial_shapes)
        n, lq = query.shape[0], query.shape[1]
        lin = input_flatten.shape[1]
        nh, nl, npt = self.n_heads, self.n_levels, self.n_points
        value = self.value_proj(input_flatten)
        if input_padding_mask is not None:
            value = value.masked_fill(input_padding_mask[..., None], 0.0)
        value = value.view(n, lin, nh, self.d_model // nh)
        offsets = self.sampling_offsets(query).view(n, lq, nh, nl, npt, 2)
        weights = self.attention_weights(query).view(n, lq, nh, nl * npt).softmax(-1)
        weights = weights.view(n, lq, nh, nl, npt)
        ref = reference_points[:, :, None, :, None, :]
        if reference_points.shape[-1] == 2:
            # offsets are in pixels of each level: (W, H) normalises them
            size = torch.stack([shapes[..., 1], shapes[..., 0]], -1).to(offsets.dtype)
            loc = ref + offsets / size[None, None, None, :, None, :]
        elif reference_points.shape[-1] == 4:
            # offsets are in halves of the box over n_points
            loc = ref[..., :2] + offsets / npt * ref[..., 2:] * 0.5
        else:
            raise ValueError("spattn: the last dimension of reference_points must be 2 or 4")
        out = MSDeformAttnFunction.apply(value, shapes, _index(input_level_start_index), loc,
                                         weights, self.im2col_step)
        return self.output_proj(out)
