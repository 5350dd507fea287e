"""ms_deform_attn / MSDeformAttnFunction against the grid_sample formulation
in float64: forward and the gradients of value, locations and weights, for
every dtype, mixed dtypes (what torch.autocast hands over), any channel
count and few queries, several batches and levels, and non-contiguous
inputs."""
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


def coarsest(*dtypes):
    """The least precise of the dtypes: the tolerance of a mixed call."""
    for d in (torch.bfloat16, torch.float16):
        if d in dtypes:
            return d
    return torch.float32


def run_both(case, dtype, shapes, starts, value, loc, attn, gen, fn=None):
    """Forward and backward through spattn and through the reference; compares
    the output (in value's dtype) and the three gradients (each in its
    input's dtype), within dtype's tolerance."""
    ins = [t.detach().requires_grad_() for t in (value, loc, attn)]
    refs64 = [t.detach().double().requires_grad_() for t in (value, loc, attn)]
    if fn is None:
        out = spattn.ms_deform_attn(ins[0], shapes, starts, ins[1], ins[2])
    else:
        out = fn(ins[0], shapes, starts, ins[1], ins[2])
    ref = refs.msda_ref(refs64[0], shapes, starts, refs64[1], refs64[2])
    refs.assert_close(case, "output", out, ref, dtype)
    case.assertEqual(out.dtype, value.dtype)
    grad = refs.rand(tuple(out.shape), out.dtype, gen=gen)
    out.backward(grad)
    ref.backward(grad.double())
    for name, t, r in zip(("grad value", "grad locations", "grad weights"), ins, refs64):
        refs.assert_close(case, name, t.grad, r.grad, dtype)
        case.assertEqual(t.grad.dtype, t.dtype)


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

    def test_mixed_dtypes(self):
        """value, locations and weights each in its own float dtype, as under
        torch.autocast: output in value's dtype, each gradient in its input's."""
        gen = torch.Generator().manual_seed(18)
        f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
        for dv, dl, da in [(bf16, f32, f32), (f16, f32, bf16), (f32, f16, bf16), (bf16, bf16, f32),
                           (f16, f16, f32)]:
            with self.subTest(value=dv, loc=dl, attn=da):
                shapes, starts, value, loc, attn = make_case(gen, f32, 2, 2, 13, 7,
                                                             [(5, 4), (2, 3)], 3)
                run_both(self, coarsest(dv, dl, da), shapes, starts, value.to(dv), loc.to(dl),
                         attn.to(da), gen)

    def test_autocast(self):
        """A Deformable-DETR-like head under CPU autocast (bf16 projections,
        f32 reference points): spattn takes what autocast produces."""
        gen = torch.Generator().manual_seed(19)
        torch.manual_seed(19)
        bs, nq, nh, c, levels, npts = 1, 6, 2, 4, [(4, 4), (2, 2)], 2
        shapes, starts, value, _, _ = make_case(gen, torch.float32, bs, nh, c, nq, levels, npts)
        nl = len(levels)
        proj = torch.nn.Linear(nh * c, nh * c)
        offsets = torch.nn.Linear(nh * c, nh * nl * npts * 2)
        weights = torch.nn.Linear(nh * c, nh * nl * npts)
        query = refs.rand((bs, nq, nh * c), torch.float32, gen=gen)
        ref_pts = refs.rand((bs, nq, 1, 1, 1, 2), torch.float32, 0.1, 0.9, gen=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            v = proj(value.flatten(2)).view(value.shape)
            loc = ref_pts + 0.1 * offsets(query).view(bs, nq, nh, nl, npts, 2).tanh()
            attn = weights(query).view(bs, nq, nh, nl * npts).softmax(-1).view(bs, nq, nh, nl, npts)
            self.assertEqual(v.dtype, torch.bfloat16)
            run_both(self, coarsest(v.dtype, loc.dtype, attn.dtype), shapes, starts, v, loc, attn,
                     gen)

    def test_any_channels_few_queries(self):
        """C 1, 2 (mmcv's module: embed 3 or 6 over 3 heads), 30 and 71 (off
        the vector width), and 2 or 5 queries: no NPU limits in the binding."""
        gen = torch.Generator().manual_seed(20)
        for dtype in refs.DTYPES:
            for nh, c, nq in [(3, 1, 5), (3, 2, 5), (2, 30, 2), (2, 71, 2), (1, 2, 2)]:
                with self.subTest(dtype=dtype, c=c, nq=nq):
                    case = make_case(gen, dtype, 1, nh, c, nq, [(6, 4), (3, 2)], 2)
                    run_both(self, dtype, *case, gen)

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
