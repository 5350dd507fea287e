"""ms_deform_attn / MSDeformAttnFunction in float64: torch.autograd.gradcheck
of the three gradients (value, sampling locations, attention weights) at the
channel counts of the public test suites, and the forward against the
float64 grid_sample formulation at Deformable-DETR's test shape."""
import unittest

import torch

import refs
import spattn

LEVELS = [(6, 4), (3, 2)]


def make_inputs(gen, bs, nh, c, nq, levels, npts):
    shapes = torch.tensor(levels, dtype=torch.int64)
    areas = shapes[:, 0] * shapes[:, 1]
    starts = torch.cat([torch.zeros(1, dtype=torch.int64), areas.cumsum(0)[:-1]])
    nk, nl = int(areas.sum()), len(levels)
    value = torch.rand((bs, nk, nh, c), generator=gen, dtype=torch.float64) * 2 - 1
    # past the borders too: zero padding and the half-pixel band
    loc = torch.rand((bs, nq, nh, nl, npts, 2), generator=gen, dtype=torch.float64) * 1.2 - 0.1
    attn = torch.rand((bs, nq, nh, nl, npts), generator=gen, dtype=torch.float64)
    return shapes, starts, value, loc, attn


class TestF64MSDA(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def test_forward_vs_grid_sample(self):
        """N 1, M 2, D 2, Lq 2, levels (6,4),(3,2), P 2, as Deformable-DETR's test."""
        gen = torch.Generator().manual_seed(1901)
        shapes, starts, value, loc, attn = make_inputs(gen, 1, 2, 2, 2, LEVELS, 2)
        out = spattn.ms_deform_attn(value, shapes, starts, loc, attn)
        ref = refs.msda_ref(value, shapes, starts, loc, attn)
        self.assertEqual(out.dtype, torch.float64)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
        # the float64 sums are not the float32 ones: a float32 run differs
        out32 = spattn.ms_deform_attn(value.float(), shapes, starts, loc.float(), attn.float())
        self.assertGreater((out32.double() - ref).abs().max().item(), 1e-12)

    def test_gradcheck(self):
        """Value, locations and weights, C 30 .. 3096 (bs 1, 2 heads, nq 2, 2 points)."""
        gen = torch.Generator().manual_seed(1902)
        # no subTest: the first failure stops the loop (a failing fast-mode
        # check re-runs in slow mode for its message, far too long at C 3096)
        for c in (30, 32, 64, 71, 1025, 2048, 3096):
            shapes, starts, value, loc, attn = make_inputs(gen, 1, 2, c, 2, LEVELS, 2)
            ins = tuple(t.requires_grad_() for t in (value, loc, attn))

            def fn(v, l, a):
                return spattn.MSDeformAttnFunction.apply(v, shapes, starts, l, a, 64)

            # the wide ones by random projections (fast mode): every
            # gradient still checked, in far fewer forward runs
            self.assertTrue(torch.autograd.gradcheck(fn, ins, eps=1e-6, atol=1e-5,
                                                     fast_mode=c > 100))


if __name__ == "__main__":
    unittest.main()
