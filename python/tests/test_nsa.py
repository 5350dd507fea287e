"""nsa_compress and nsa_selected_attention against the spec's formulas in
float64: forward, softmax statistics and every gradient, for every dtype,
several sequences, GQA ratios, causal or not, and non-contiguous inputs."""
import unittest

import torch

import refs
import spattn
from refs import cumulative
from spattn import _lib


class TestCompress(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def check(self, dtype, n, d, block, stride, lengths, layout, gen, cu_form=list):
        ends = cumulative(lengths)
        x = refs.rand((ends[-1], n, d), dtype, gen=gen)
        w = refs.rand((block, n), dtype, gen=gen)
        if layout != "contiguous":
            x, w = refs.strided(x, layout), refs.strided(w, "perm")
        xs, ws = x.detach().requires_grad_(), w.detach().requires_grad_()
        x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
        out = spattn.nsa_compress(xs, ws, cu_form(ends), block, stride)
        ref = refs.compress_ref(x64, w64, ends, block, stride)
        refs.assert_close(self, "output", out, ref, dtype)
        grad = refs.rand(tuple(out.shape), dtype, gen=gen)
        out.backward(grad)
        ref.backward(grad.double())
        refs.assert_close(self, "grad input", xs.grad, x64.grad, dtype)
        refs.assert_close(self, "grad weight", ws.grad, w64.grad, dtype)

    def test_dtypes_and_layouts(self):
        gen = torch.Generator().manual_seed(21)
        for dtype in refs.DTYPES:
            for layout in ("contiguous", "pad", "perm"):
                with self.subTest(dtype=dtype, layout=layout):
                    self.check(dtype, 2, 32, 32, 16, [70, 0, 33, 5, 48], layout, gen)

    def test_shapes(self):
        """Block = stride, long blocks, many heads, wide D, flash-attn style ends, int32 ends."""
        gen = torch.Generator().manual_seed(22)
        cases = [(1, 16, 16, 16, [64], list),
                 (4, 64, 64, 16, [100, 130], lambda e: torch.tensor([0] + e)),
                 (3, 128, 128, 32, [200, 17], lambda e: torch.tensor(e, dtype=torch.int32)),
                 (8, 256, 48, 48, [96, 95, 97], list)]
        for n, d, block, stride, lengths, form in cases:
            with self.subTest(n=n, d=d, block=block, stride=stride):
                self.check(torch.float32, n, d, block, stride, lengths, "contiguous", gen, form)

    def test_any_head_dim_block_and_stride(self):
        """What fla and the other public NSA code pass (the NPU's D, block and
        stride limits are the aclnn layer's only): head dims with channel tails,
        blocks and strides off the multiples of 16, lengths that are not
        multiples of anything, every dtype."""
        gen = torch.Generator().manual_seed(24)
        cases = [(2, 48, 24, 8, [70, 0, 33, 5]),
                 (3, 100, 7, 7, [50, 13]),
                 (2, 1, 5, 3, [29, 4, 41]),
                 (1, 300, 20, 2, [45])]
        for dtype in refs.DTYPES:
            for n, d, block, stride, lengths in cases:
                with self.subTest(dtype=dtype, d=d, block=block, stride=stride):
                    self.check(dtype, n, d, block, stride, lengths,
                               "pad" if d == 48 else "contiguous", gen)

    def test_every_output_written(self):
        gen = torch.Generator().manual_seed(23)
        _lib.poison_outputs = True
        try:
            for dtype in refs.DTYPES:
                with self.subTest(dtype=dtype):
                    # tokens no window covers: their input gradient is +0, written too
                    self.check(dtype, 2, 16, 32, 32, [40, 10, 70], "pad", gen)
        finally:
            _lib.poison_outputs = False


def select_case(gen, dtype, n1, n2, d, dv, block, kc, qlens, klens, causal, pad=False):
    """pad: random -1 slots (some rows partly, every fourth row fully padded)."""
    ends_q, ends_kv = cumulative(qlens), cumulative(klens)
    t1, t2 = ends_q[-1], ends_kv[-1] + 3  # rows past the last sequence: never read
    q = refs.rand((t1, n1, d), dtype, gen=gen)
    k = refs.rand((t2, n2, d), dtype, gen=gen)
    v = refs.rand((t2, n2, dv), dtype, gen=gen)
    topk = torch.empty((t1, n2, kc), dtype=torch.int32)
    qs = 0
    for qe, kl in zip(ends_q, klens):
        blocks = -(-kl // block)  # the last one may be partial
        for t in range(qs, qe):
            s = t - qs
            for h in range(n2):
                if blocks == 0:
                    picks = torch.full((kc,), -1)
                elif causal and s // block + 1 >= kc and blocks >= kc:
                    # the usual causal selection: blocks at or before the query's
                    picks = torch.randperm(min(s // block + 1, blocks), generator=gen)[:kc]
                else:
                    picks = torch.randint(0, blocks, (kc,), generator=gen)  # duplicates too
                if pad and t % 4 == 3:
                    picks = torch.full((kc,), -1)
                elif pad:
                    picks = picks.masked_fill(torch.rand(kc, generator=gen) < 0.4, -1)
                topk[t, h] = picks.to(torch.int32)
        qs = qe
    return q, k, v, topk, ends_q, ends_kv


class TestSelect(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def check(self, dtype, n1, n2, d, dv, block, kc, qlens, klens, causal, gen, layout="contiguous",
              pad=False, index_dtype=torch.int32):
        q, k, v, topk, ends_q, ends_kv = select_case(gen, dtype, n1, n2, d, dv, block, kc, qlens,
                                                     klens, causal, pad)
        topk = topk.to(index_dtype)
        if layout != "contiguous":
            q, k, v = refs.strided(q, layout), refs.strided(k, "pad"), refs.strided(v, "perm")
            topk = refs.strided(topk, "perm")
        scale = d ** -0.5
        ins = [t.detach().requires_grad_() for t in (q, k, v)]
        r64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
        out, mx, sm = spattn.nsa_selected_attention(*ins, topk, ends_q, torch.tensor(ends_kv),
                                                    scale, block, causal=causal,
                                                    return_softmax=True, causal_alignment="top_left")
        ref, rmx, rsm = refs.select_ref(*r64, topk, ends_q, ends_kv, scale, block, causal)
        refs.assert_close(self, "output", out, ref, dtype)
        # the statistics of the f32 scores (of inputs already in dtype); a row
        # whose keys are all masked has max -FLT_MAX and sum K*block
        stat_tol = torch.float32 if dtype == torch.float32 else torch.float16
        seen = rmx > -1e30
        refs.assert_close(self, "softmax max", mx[seen], rmx[seen], stat_tol)
        refs.assert_close(self, "softmax sum", sm, rsm, stat_tol)
        self.assertTrue(bool((mx[~seen] == -refs.FLT_MAX).all()))
        grad = refs.rand(tuple(out.shape), dtype, gen=gen)
        out.backward(grad)
        ref.backward(grad.double())
        for name, t, r in zip(("dq", "dk", "dv"), ins, r64):
            refs.assert_close(self, name, t.grad, r.grad, dtype)

    def test_dtypes_and_layouts(self):
        gen = torch.Generator().manual_seed(31)
        for dtype in refs.DTYPES:
            for layout in ("contiguous", "pad", "perm"):
                for causal in (False, True):
                    with self.subTest(dtype=dtype, layout=layout, causal=causal):
                        self.check(dtype, 4, 2, 32, 32, 16, 3, [9, 20], [64, 80], causal, gen,
                                   layout)

    def test_gqa_and_shapes(self):
        """G from 1 to 16, Dv < D, D 192, long blocks, K 1 and 32, 3 sequences."""
        gen = torch.Generator().manual_seed(32)
        for n1, n2, d, dv, block, kc, qlens, klens in [
                (2, 2, 16, 16, 16, 1, [5], [16]),
                (8, 1, 64, 32, 32, 4, [7, 0, 12], [128, 32, 160]),
                (16, 1, 192, 128, 64, 2, [6], [192]),
                (6, 3, 48, 16, 16, 32, [4, 3], [512, 528]),
                (32, 2, 16, 16, 128, 2, [3], [256])]:
            with self.subTest(n1=n1, n2=n2, d=d, dv=dv, block=block, kc=kc):
                self.check(torch.float32, n1, n2, d, dv, block, kc, qlens, klens, True, gen)

    def test_public_conventions(self):
        """-1 padded int64 / int32 indices (a fully padded row: out 0, max
        -FLT_MAX, sum 0, no gradient), partial last blocks, D 100 and 48,
        Dv != D (above D too), G 1 to 16, causal or not, each dtype."""
        gen = torch.Generator().manual_seed(35)
        cases = [(2, 2, 100, 100, 16, 3, [7, 5], [37, 50], True),
                 (4, 2, 48, 100, 32, 2, [6], [41], False),
                 (4, 1, 100, 48, 16, 3, [5, 4], [20, 33], True),
                 (16, 1, 48, 24, 16, 2, [4], [29], False)]
        for i, (n1, n2, d, dv, block, kc, qlens, klens, causal) in enumerate(cases):
            for dtype in refs.DTYPES:
                index_dtype = torch.int64 if i % 2 else torch.int32
                with self.subTest(n1=n1, n2=n2, d=d, dv=dv, dtype=dtype):
                    self.check(dtype, n1, n2, d, dv, block, kc, qlens, klens, causal, gen,
                               "pad" if i == 1 else "contiguous", True, index_dtype)

    def test_output_only(self):
        """Without return_softmax: the output alone, still differentiable."""
        gen = torch.Generator().manual_seed(33)
        q, k, v, topk, ends_q, ends_kv = select_case(gen, torch.float32, 2, 1, 16, 16, 16, 2,
                                                     [8], [32], False)
        q.requires_grad_()
        out = spattn.nsa_selected_attention(q, k, v, topk.long(), ends_q, ends_kv, 0.25, 16)
        self.assertIsInstance(out, torch.Tensor)
        out.sum().backward()
        self.assertEqual(q.grad.shape, q.shape)

    def test_every_output_written(self):
        gen = torch.Generator().manual_seed(34)
        _lib.poison_outputs = True
        try:
            for dtype in refs.DTYPES:
                with self.subTest(dtype=dtype):
                    # most kv rows are never selected: their gradients are +0, written
                    self.check(dtype, 2, 1, 16, 16, 16, 1, [3, 2], [96, 64], False, gen)
        finally:
            _lib.poison_outputs = False


if __name__ == "__main__":
    unittest.main()
