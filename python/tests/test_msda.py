"""ms_deform_attn / MSDeformAttnFunction against the grid_sample formulation
in float64: forward and the gradients of value, locations and weights, for
every dtype, several batches and levels, and non-contiguous inputs."""
import unittest

import torch

import refs
import spattn
from spattn import _lib


def make_case(gen, dtype, bs, nh, c, nq, levels, npts, layout="contiguous"):
    """Inputs in dtype (as views of the given layout) and their float64 copies."""
    shapes = torch.tensor(levels, dtype=torch.int64)
    areas = shapes[:, 0] * shapes[:, 1]
    starts = torch.cat([torch.zeros(1, dtype=torch.int64), areas.cumsum(0)[:-1]])
    nk, nl = int(areas.sum()), len(levels)
    value = refs.rand((bs, nk, nh, c), dtype, gen=gen)
    # locations past the borders too: zero padding and half-pixel edges
    loc = refs.rand((bs, nq, nh, nl, npts, 2), dtype, -0.1, 1.1, gen=gen)
    attn = refs.rand((bs, nq, nh, nl, npts), dtype, 0.0, 1.0, gen=gen)
    if layout != "contiguous":
        value, loc, attn = (refs.strided(t, layout) for t in (value, loc, attn))
    return shapes, starts, value, loc, attn


def run_both(case, dtype, shapes, starts, value, loc, attn, gen, fn=None):
    """Forward and backward through spattn and through the reference; compares
    the output and the three gradients."""
    ins = [t.detach().requires_grad_() for t in (value, loc, attn)]
    refs64 = [t.detach().double().requires_grad_() for t in (value, loc, attn)]
    if fn is None:
        out = spattn.ms_deform_attn(ins[0], shapes, starts, ins[1], ins[2])
    else:
        out = fn(ins[0], shapes, starts, ins[1], ins[2])
    ref = refs.msda_ref(refs64[0], shapes, starts, refs64[1], refs64[2])
    refs.assert_close(case, "output", out, ref, dtype)
    grad = refs.rand(tuple(out.shape), dtype, gen=gen)
    out.backward(grad)
    ref.backward(grad.double())
    for name, t, r in zip(("grad value", "grad locations", "grad weights"), ins, refs64):
        refs.assert_close(case, name, t.grad, r.grad, dtype)
        case.assertEqual(t.grad.dtype, dtype)


class TestMSDA(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def test_dtypes_and_layouts(self):
        gen = torch.Generator().manual_seed(11)
        for dtype in refs.DTYPES:
            for layout in ("contiguous", "pad", "perm"):
                with self.subTest(dtype=dtype, layout=layout):
                    case = make_case(gen, dtype, 2, 2, 16, 40, [(6, 5), (3, 4)], 3, layout)
                    run_both(self, dtype, *case, gen)

    def test_shapes(self):
        """One level, four levels, many heads and points, wide channels, bs 3."""
        gen = torch.Generator().manual_seed(12)
        for bs, nh, c, nq, levels, npts in [
                (1, 1, 8, 32, [(7, 9)], 1),
                (3, 4, 8, 33, [(8, 8), (4, 4), (2, 2), (1, 1)], 4),
                (2, 8, 32, 64, [(10, 6), (5, 3)], 2),
                (1, 2, 64, 35, [(4, 5), (2, 3), (1, 2)], 5)]:
            with self.subTest(bs=bs, nh=nh, c=c, levels=levels):
                run_both(self, torch.float32, *make_case(gen, torch.float32, bs, nh, c, nq,
                                                         levels, npts), gen)

    def test_deformable_detr_signature(self):
        gen = torch.Generator().manual_seed(13)
        case = make_case(gen, torch.float32, 2, 2, 8, 32, [(4, 4), (2, 2)], 2)
        run_both(self, torch.float32, *case, gen,
                 fn=lambda v, s, ls, lo, a: spattn.MSDeformAttnFunction.apply(v, s, ls, lo, a, 64))

    def test_expanded_and_list_indices(self):
        """Weights broadcast over points (stride 0), shapes given as lists."""
        gen = torch.Generator().manual_seed(14)
        shapes, starts, value, loc, attn = make_case(gen, torch.float32, 2, 2, 8, 32,
                                                     [(4, 6), (2, 3)], 3)
        attn = attn[..., :1].expand(attn.shape)
        run_both(self, torch.float32, shapes.tolist(), starts.tolist(), value, loc, attn, gen)

    def test_every_output_written(self):
        """Outputs start as NaN: any element the library does not write shows."""
        gen = torch.Generator().manual_seed(15)
        _lib.poison_outputs = True
        try:
            for dtype in refs.DTYPES:
                with self.subTest(dtype=dtype):
                    run_both(self, dtype, *make_case(gen, dtype, 2, 2, 8, 32, [(3, 3), (2, 5)],
                                                     2, "perm"), gen)
        finally:
            _lib.poison_outputs = False

    def test_threads_bit_identical(self):
        gen = torch.Generator().manual_seed(16)
        shapes, starts, value, loc, attn = make_case(gen, torch.bfloat16, 2, 4, 16, 64,
                                                     [(8, 8), (4, 4)], 4)
        results = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            v, lo, a = (t.detach().requires_grad_() for t in (value, loc, attn))
            out = spattn.ms_deform_attn(v, shapes, starts, lo, a)
            out.sum().backward()
            results.append([out.detach(), v.grad, lo.grad, a.grad])
        for other in results[1:]:
            for x, y in zip(results[0], other):
                self.assertTrue(torch.equal(x, y))

    def test_reuse_freed_memory(self):
        """The opt-in allocator setting (process-wide, glibc) changes where
        memory comes from, not a single result bit; gradient tensors over
        32 MB, the size glibc would otherwise map afresh, included."""
        gen = torch.Generator().manual_seed(17)
        shapes, starts, value, loc, attn = make_case(gen, torch.float32, 1, 8, 32, 256,
                                                     [(160, 160), (80, 80), (40, 40)], 4)
        self.assertGreater(value.numel() * 4, 32 << 20)

        def fwd_bwd():
            v, lo, a = (t.detach().requires_grad_() for t in (value, loc, attn))
            out = spattn.ms_deform_attn(v, shapes, starts, lo, a)
            out.sum().backward()
            return [out.detach(), v.grad, lo.grad, a.grad]

        before = fwd_bwd()
        self.assertTrue(spattn.reuse_freed_memory())
        for _ in range(2):
            for x, y in zip(before, fwd_bwd()):
                self.assertTrue(torch.equal(x, y))


if __name__ == "__main__":
    unittest.main()
