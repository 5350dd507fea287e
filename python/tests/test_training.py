"""A small training run of a Deformable-DETR encoder layer: the loss curve
with spattn's ms_deform_attn matches the one with the grid_sample path,
step by step, from the same initial weights and data."""
import copy
import unittest

import torch
from torch import nn

import refs
import spattn


class MSDeformAttn(nn.Module):
    """Deformable-DETR's MSDeformAttn module around a pluggable core."""

    def __init__(self, core, d_model=32, n_levels=2, n_heads=4, n_points=4):
        super().__init__()
        self.core, self.nl, self.nh, self.np = core, n_levels, n_heads, n_points
        self.sampling_offsets = nn.Linear(d_model, n_heads * n_levels * n_points * 2)
        self.attention_weights = nn.Linear(d_model, n_heads * n_levels * n_points)
        self.value_proj = nn.Linear(d_model, d_model)
        self.output_proj = nn.Linear(d_model, d_model)

    def forward(self, query, reference_points, src, shapes, starts):
        n, nq, d = query.shape
        value = self.value_proj(src).view(n, src.shape[1], self.nh, d // self.nh)
        offsets = self.sampling_offsets(query).view(n, nq, self.nh, self.nl, self.np, 2)
        attn = self.attention_weights(query).view(n, nq, self.nh, self.nl * self.np)
        attn = attn.softmax(-1).view(n, nq, self.nh, self.nl, self.np)
        normalizer = torch.stack([shapes[:, 1], shapes[:, 0]], -1).to(query.dtype)
        loc = (reference_points[:, :, None, :, None, :]
               + offsets / normalizer[None, None, None, :, None, :])
        return self.output_proj(self.core(value, shapes, starts, loc, attn))


class EncoderLayer(nn.Module):
    def __init__(self, core, d_model=32, d_ffn=64):
        super().__init__()
        self.attn = MSDeformAttn(core, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ffn), nn.ReLU(), nn.Linear(d_ffn, d_model))

    def forward(self, src, pos, reference_points, shapes, starts):
        src = self.norm1(src + self.attn(src + pos, reference_points, src, shapes, starts))
        return self.norm2(src + self.ffn(src))


def reference_points(shapes):
    """The pixel centres of every level, normalised (valid ratios 1)."""
    pts = []
    for h, w in shapes.tolist():
        y, x = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
        pts.append(torch.stack([x.flatten() / w, y.flatten() / h], -1))
    pts = torch.cat(pts)
    return pts[None, :, None, :].expand(2, -1, len(shapes), -1)


class TestTraining(unittest.TestCase):
    def test_loss_curve_matches_grid_sample(self):
        torch.set_num_threads(2)
        torch.manual_seed(5)
        shapes = torch.tensor([[8, 8], [4, 4]])
        starts = torch.tensor([0, 64])
        nk = 80
        src = torch.randn(2, nk, 32)
        pos = torch.randn(2, nk, 32) * 0.1
        target = torch.randn(2, nk, 32)
        ref_pts = reference_points(shapes)
        ours = EncoderLayer(spattn.ms_deform_attn)
        theirs = copy.deepcopy(ours)
        theirs.attn.core = refs.msda_ref  # the grid_sample path, in float32 here
        curves = []
        for model in (ours, theirs):
            opt = torch.optim.Adam(model.parameters(), lr=3e-3)
            losses = []
            for _ in range(25):
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(src, pos, ref_pts, shapes, starts), target)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            curves.append(losses)
        ours_c, theirs_c = curves
        self.assertLess(ours_c[-1], 0.9 * ours_c[0])  # it trains
        for step, (a, b) in enumerate(zip(ours_c, theirs_c)):
            self.assertLess(abs(a - b), 1e-4 * abs(b), "step %d: %.9g vs %.9g" % (step, a, b))


if __name__ == "__main__":
    unittest.main()
