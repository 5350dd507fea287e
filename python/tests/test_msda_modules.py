"""The deformable-attention names and modules users swap in: mmcv's
MultiScaleDeformableAttnFunction, its 4-argument
multi_scale_deformable_attn_pytorch and its MultiScaleDeformableAttention
module (constructor, forward, init_weights), and Deformable-DETR's
MSDeformAttn._reset_parameters and its keys assert; each against a float64
formulation (refs.msda_ref: grid_sample) composed in the test."""
import math
import unittest

import torch

import refs
import spattn

LEVELS = [(6, 5), (3, 3), (2, 1)]


def shapes_starts():
    shapes = torch.tensor(LEVELS, dtype=torch.int64)
    areas = shapes[:, 0] * shapes[:, 1]
    return shapes, torch.cat([torch.zeros(1, dtype=torch.int64), areas.cumsum(0)[:-1]]), int(areas.sum())


def fan_bias(heads, levels, points):
    """Deformable-DETR's and mmcv's initial offsets, as their code describes
    them: direction (cos, sin) of 2 pi h / heads over its max-norm, times
    point index + 1, repeated over the levels."""
    out = torch.empty(heads, levels, points, 2, dtype=torch.float64)
    for h in range(heads):
        a = 2 * math.pi * h / heads
        x, y = math.cos(a), math.sin(a)
        m = max(abs(x), abs(y))
        for lv in range(levels):
            for p in range(points):
                out[h, lv, p] = torch.tensor([x / m * (p + 1), y / m * (p + 1)])
    return out.reshape(-1)


def module_ref(m, query, value, ref_points, shapes, starts, mask, heads, levels, points):
    """The module's arithmetic in float64 on its own parameters, batch-first:
    projections, softmax of the weights, sampling locations, grid_sample."""
    p = {k: v.double() for k, v in m.state_dict().items()}
    bs, nq, _ = query.shape
    nv = value.shape[1]
    val = value @ p["value_proj.weight"].t() + p["value_proj.bias"]
    if mask is not None:
        val = val.masked_fill(mask[..., None], 0.0)
    val = val.view(bs, nv, heads, -1)
    off = (query @ p["sampling_offsets.weight"].t() + p["sampling_offsets.bias"]).view(
        bs, nq, heads, levels, points, 2)
    w = (query @ p["attention_weights.weight"].t() + p["attention_weights.bias"]).view(
        bs, nq, heads, levels * points).softmax(-1).view(bs, nq, heads, levels, points)
    r = ref_points[:, :, None, :, None, :]
    if ref_points.shape[-1] == 2:
        size = torch.stack([shapes[:, 1], shapes[:, 0]], -1).double()
        loc = r + off / size[None, None, None, :, None, :]
    else:
        loc = r[..., :2] + off / points * r[..., 2:] * 0.5
    out = refs.msda_ref(val, shapes, starts, loc, w)
    return out @ p["output_proj.weight"].t() + p["output_proj.bias"]


class TestMmcvNames(unittest.TestCase):
    def test_four_argument_function(self):
        gen = torch.Generator().manual_seed(71)
        shapes, starts, nk = shapes_starts()
        value = refs.rand((2, nk, 3, 5), torch.float64, gen=gen)
        loc = refs.rand((2, 4, 3, len(LEVELS), 2, 2), torch.float64, -0.1, 1.1, gen=gen)
        attn = refs.rand((2, 4, 3, len(LEVELS), 2), torch.float64, 0.0, 1.0, gen=gen)
        got = spattn.multi_scale_deformable_attn_pytorch(value, shapes, loc, attn)
        exp = refs.msda_ref(value, shapes, starts, loc, attn)
        self.assertLess((got - exp).abs().max().item(), 1e-12)
        self.assertIs(spattn.MultiScaleDeformableAttnFunction, spattn.MSDeformAttnFunction)
        via_fn = spattn.MultiScaleDeformableAttnFunction.apply(value, shapes, starts, loc, attn, 64)
        self.assertTrue(torch.equal(via_fn, got))

    def test_module_forward(self):
        gen = torch.Generator().manual_seed(72)
        shapes, starts, nk = shapes_starts()
        for batch_first in (False, True):
            for ref_dims in (2, 4):
                for ratio in (1.0, 0.5):
                    with self.subTest(batch_first=batch_first, ref_dims=ref_dims, ratio=ratio):
                        m = spattn.MultiScaleDeformableAttention(embed_dims=16, num_heads=2, num_levels=3,
                                                                 num_points=2, batch_first=batch_first,
                                                                 value_proj_ratio=ratio).double().eval()
                        with torch.no_grad():  # parameters away from their initial values
                            for prm in m.parameters():
                                prm.add_(refs.rand(tuple(prm.shape), torch.float64, -0.3, 0.3, gen=gen))
                        q = refs.rand((2, 5, 16), torch.float64, gen=gen)
                        pos = refs.rand((2, 5, 16), torch.float64, gen=gen)
                        v = refs.rand((2, nk, 16), torch.float64, gen=gen)
                        ident = refs.rand((2, 5, 16), torch.float64, gen=gen)
                        mask = torch.rand((2, nk), generator=gen) < 0.2
                        rp = refs.rand((2, 5, 3, ref_dims), torch.float64, 0.1, 0.9, gen=gen)
                        t = (lambda x: x) if batch_first else (lambda x: x.transpose(0, 1))
                        got = m(t(q), value=t(v), identity=t(ident), query_pos=t(pos), key_padding_mask=mask,
                                reference_points=rp, spatial_shapes=shapes, level_start_index=starts)
                        exp = module_ref(m, q + pos, v, rp, shapes, starts, mask, 2, 3, 2) + ident
                        self.assertLess((t(got) - exp).abs().max().item(), 1e-12)

    def test_init_weights_and_defaults(self):
        m = spattn.MultiScaleDeformableAttention(embed_dims=32, num_heads=4, num_levels=2, num_points=3)
        self.assertTrue(torch.allclose(m.sampling_offsets.bias.double(), fan_bias(4, 2, 3), atol=1e-6))
        self.assertEqual(m.sampling_offsets.weight.abs().max().item(), 0.0)
        self.assertEqual(m.attention_weights.weight.abs().max().item(), 0.0)
        self.assertEqual(m.value_proj.bias.abs().max().item(), 0.0)
        with torch.no_grad():
            m.sampling_offsets.bias.zero_()
        m.init_weights()
        self.assertTrue(torch.allclose(m.sampling_offsets.bias.double(), fan_bias(4, 2, 3), atol=1e-6))
        # value defaults to query, identity to query (self-attention of an encoder)
        shapes = torch.tensor([[2, 3], [1, 2]])
        x = torch.randn(8, 1, 32)
        rp = torch.rand(1, 8, 2, 2)
        out = m.eval()(x, reference_points=rp, spatial_shapes=shapes, level_start_index=torch.tensor([0, 6]))
        self.assertEqual(tuple(out.shape), (8, 1, 32))
        with self.assertRaisesRegex(ValueError, "spatial_shapes"):
            m(x, reference_points=rp, spatial_shapes=torch.tensor([[2, 3], [1, 3]]),
              level_start_index=torch.tensor([0, 6]))


class TestDeformableDetr(unittest.TestCase):
    def test_reset_parameters_and_keys_assert(self):
        m = spattn.MSDeformAttn(d_model=16, n_levels=3, n_heads=2, n_points=2)
        with torch.no_grad():
            for prm in m.parameters():
                prm.fill_(0.5)
        m._reset_parameters()  # DeformableTransformer._reset_parameters calls it
        self.assertTrue(torch.allclose(m.sampling_offsets.bias.double(), fan_bias(2, 3, 2), atol=1e-6))
        self.assertEqual(m.attention_weights.bias.abs().max().item(), 0.0)
        shapes, starts, nk = shapes_starts()
        q = torch.randn(1, 4, 16)
        rp = torch.rand(1, 4, 3, 2)
        m(q, rp, torch.randn(1, nk, 16), shapes, starts)
        with self.assertRaisesRegex(ValueError, "sum to %d but input_flatten has %d rows" % (nk, nk + 1)):
            m(q, rp, torch.randn(1, nk + 1, 16), shapes, starts)
        scripted = torch.jit.script(m)
        self.assertTrue(torch.equal(scripted(q, rp, torch.ones(1, nk, 16), shapes, starts),
                                    m(q, rp, torch.ones(1, nk, 16), shapes, starts)))


if __name__ == "__main__":
    unittest.main()
