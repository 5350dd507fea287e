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


# mmcv's names: the Function, and the 4-argument pure-PyTorch function of
# mmcv.ops.multi_scale_deform_attn (no level_start_index: the levels' rows
# follow one another).
MultiScaleDeformableAttnFunction = MSDeformAttnFunction


def multi_scale_deformable_attn_pytorch(value: Tensor, value_spatial_shapes: Tensor,
                                        sampling_locations: Tensor,
                                        attention_weights: Tensor) -> Tensor:
    """mmcv's multi_scale_deformable_attn_pytorch(value, value_spatial_shapes,
    sampling_locations, attention_weights), computed by spattn: the levels'
    rows of value one after the other, level l starting at the sum of the
    earlier levels' H*W."""
    shapes = _index(value_spatial_shapes)
    sizes = shapes[:, 0] * shapes[:, 1]
    starts = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    return torch.ops.spattn.ms_deform_attn(value, shapes, starts, sampling_locations,
                                           attention_weights, 64)


def _check_keys(shapes: Tensor, keys: int, what: str):
    """Deformable-DETR's and mmcv's assert: the levels' H*W sum to the keys
    (skipped while tracing, where it would be a constant of the trace, and
    on meta tensors, which hold no values)."""
    if not torch.jit.is_tracing() and not shapes.is_meta:
        total = int((shapes[:, 0] * shapes[:, 1]).sum())
        if total != keys:
            raise ValueError("spattn: the levels' H*W (spatial_shapes) sum to " + str(total)
                             + " but " + what + " has " + str(keys) + " rows")


def _grid_bias(n_heads: int, n_levels: int, n_points: int) -> Tensor:
    """The sampling offsets' initial bias of Deformable-DETR and mmcv: head h
    looks along angle 2 pi h / n_heads, point p at (p + 1) steps (the
    direction scaled to a max-norm of 1), every level alike."""
    angles = torch.arange(n_heads, dtype=torch.float64) * (2.0 * math.pi / n_heads)
    direction = torch.stack([angles.cos(), angles.sin()], -1)
    direction = direction / direction.abs().max(-1, keepdim=True)[0]
    steps = torch.arange(1, n_points + 1, dtype=torch.float64)
    bias = direction[:, None, None, :] * steps[None, None, :, None]
    return bias.expand(n_heads, n_levels, n_points, 2).reshape(-1)


def _locations(reference_points: Tensor, offsets: Tensor, shapes: Tensor, npt: int) -> Tensor:
    """Sampling locations from reference points [N, Lq, L, 2] (offsets in
    pixels of each level, normalised by (W, H)) or [N, Lq, L, 4] (boxes:
    offsets in halves of the box over n_points)."""
    ref = reference_points[:, :, None, :, None, :]
    if reference_points.shape[-1] == 2:
        size = torch.stack([shapes[..., 1], shapes[..., 0]], -1).to(offsets.dtype)
        return ref + offsets / size[None, None, None, :, None, :]
    if reference_points.shape[-1] == 4:
        return ref[..., :2] + offsets / npt * ref[..., 2:] * 0.5
    raise ValueError("spattn: the last dimension of reference_points must be 2 or 4")


def _init_parameters(m: nn.Module, n_heads: int, n_levels: int, n_points: int):
    """Deformable-DETR's and mmcv's initialisation of the layer's parameters:
    the sampling offsets start as a fan (_grid_bias), zero attention weights
    (uniform after the softmax), Xavier-uniform projections with zero bias."""
    nn.init.zeros_(m.sampling_offsets.weight)
    with torch.no_grad():
        m.sampling_offsets.bias.copy_(_grid_bias(n_heads, n_levels, n_points))
    nn.init.zeros_(m.attention_weights.weight)
    nn.init.zeros_(m.attention_weights.bias)
    for proj in (m.value_proj, m.output_proj):
        nn.init.xavier_uniform_(proj.weight)
        nn.init.zeros_(proj.bias)


def _attend(value: Tensor, offsets: Tensor, logits: Tensor, reference_points: Tensor, shapes: Tensor,
            level_start_index: Tensor, nh: int, nl: int, npt: int, im2col_step: int) -> Tensor:
    """Both modules' attention after their projections: value [N, Lin, nh, C],
    the offsets and weight logits of each query, the locations from the
    reference points, the operator; [N, Lq, nh * C]."""
    n, lq = offsets.shape[0], offsets.shape[1]
    weights = logits.view(n, lq, nh, nl * npt).softmax(-1).view(n, lq, nh, nl, npt)
    loc = _locations(reference_points, offsets.view(n, lq, nh, nl, npt, 2), shapes, npt)
    return MSDeformAttnFunction.apply(value, shapes, _index(level_start_index), loc, weights, im2col_step)


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
        _init_parameters(self, self.n_heads, self.n_levels, self.n_points)

    @torch.jit.unused
    def _reset_parameters(self):
        """Deformable-DETR's name (its DeformableTransformer calls it on each
        MSDeformAttn)."""
        self.reset_parameters()

    def forward(self, query: Tensor, reference_points: Tensor, input_flatten: Tensor,
                input_spatial_shapes: Tensor,
                input_level_start_index: Tensor,
                input_padding_mask: Optional[Tensor] = None) -> Tensor:
        shapes = _index(input_spatial_shapes)
        n = query.shape[0]
        lin = input_flatten.shape[1]
        nh, nl, npt = self.n_heads, self.n_levels, self.n_points
        _check_keys(shapes, lin, "input_flatten")
        value = self.value_proj(input_flatten)
        if input_padding_mask is not None:
            value = value.masked_fill(input_padding_mask[..., None], 0.0)
        value = value.view(n, lin, nh, self.d_model // nh)
        out = _attend(value, self.sampling_offsets(query), self.attention_weights(query), reference_points,
                      shapes, input_level_start_index, nh, nl, npt, self.im2col_step)
        return self.output_proj(out)


class MultiScaleDeformableAttention(nn.Module):
    """mmcv's MultiScaleDeformableAttention (mmcv.ops), its constructor,
    parameter names (so its checkpoints load), forward and init_weights,
    over spattn's operator. norm_cfg and init_cfg are accepted (mmcv's
    BaseModule reads init_cfg; init_weights() here is mmcv's default
    initialisation).

    forward(query [Lq, N, C] ([N, Lq, C] with batch_first), key (unused, as
    in mmcv), value (default query), identity (default query), query_pos
    (added to query), key_padding_mask [N, Lv] (True: padding),
    reference_points [N, Lq, L, 2 or 4], spatial_shapes [L, 2],
    level_start_index [L]) -> dropout(output_proj(attention)) + identity,
    in query's layout."""

    def __init__(self, embed_dims: int = 256, num_heads: int = 8, num_levels: int = 4,
                 num_points: int = 4, im2col_step: int = 64, dropout: float = 0.1,
                 batch_first: bool = False, norm_cfg: Optional[dict] = None,
                 init_cfg: Optional[dict] = None, value_proj_ratio: float = 1.0):
        super().__init__()
        if embed_dims % num_heads != 0:
            raise ValueError("spattn: embed_dims (%d) must be divisible by num_heads (%d)"
                             % (embed_dims, num_heads))
        value_dims = int(embed_dims * value_proj_ratio)
        if value_dims % num_heads != 0:
            raise ValueError("spattn: embed_dims * value_proj_ratio (%d) must be divisible by "
                             "num_heads (%d)" % (value_dims, num_heads))
        self.norm_cfg, self.init_cfg = norm_cfg, init_cfg
        self.dropout = nn.Dropout(dropout)
        self.batch_first = batch_first
        self.im2col_step = im2col_step
        self.embed_dims, self.num_levels = embed_dims, num_levels
        self.num_heads, self.num_points = num_heads, num_points
        self.sampling_offsets = nn.Linear(embed_dims, num_heads * num_levels * num_points * 2)
        self.attention_weights = nn.Linear(embed_dims, num_heads * num_levels * num_points)
        self.value_proj = nn.Linear(embed_dims, value_dims)
        self.output_proj = nn.Linear(value_dims, embed_dims)
        self.init_weights()

    @torch.jit.unused
    def init_weights(self):
        """mmcv's default initialisation (_init_parameters)."""
        _init_parameters(self, self.num_heads, self.num_levels, self.num_points)
        self._is_init = True

    def forward(self, query: Tensor, key: Optional[Tensor] = None, value: Optional[Tensor] = None,
                identity: Optional[Tensor] = None, query_pos: Optional[Tensor] = None,
                key_padding_mask: Optional[Tensor] = None, reference_points: Optional[Tensor] = None,
                spatial_shapes: Optional[Tensor] = None, level_start_index: Optional[Tensor] = None,
                **kwargs) -> Tensor:
        if reference_points is None or spatial_shapes is None or level_start_index is None:
            raise ValueError("spattn: MultiScaleDeformableAttention needs reference_points, "
                             "spatial_shapes and level_start_index")
        if value is None:
            value = query
        if identity is None:
            identity = query
        if query_pos is not None:
            query = query + query_pos
        if not self.batch_first:
            query = query.permute(1, 0, 2)
            value = value.permute(1, 0, 2)
        shapes = _index(spatial_shapes)
        bs = query.shape[0]
        nv = value.shape[1]
        _check_keys(shapes, nv, "value")
        nh, nl, npt = self.num_heads, self.num_levels, self.num_points
        value = self.value_proj(value)
        if key_padding_mask is not None:
            value = value.masked_fill(key_padding_mask[..., None], 0.0)
        value = value.view(bs, nv, nh, -1)
        out = _attend(value, self.sampling_offsets(query), self.attention_weights(query), reference_points,
                      shapes, level_start_index, nh, nl, npt, self.im2col_step)
        out = self.output_proj(out)
        if not self.batch_first:
            out = out.permute(1, 0, 2)
        return self.dropout(out) + identity
