"""float64 through the binding: the NSA ops' outputs are float64, and
torch.autograd.gradcheck (double, eps 1e-6, atol 1e-5) holds for the
gradients their float64 backward paths compute."""
import unittest

import torch

import spattn
from refs import cumulative


class TestFloat64(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def test_compress_gradcheck(self):
        gen = torch.Generator().manual_seed(64)
        ends = cumulative([40, 0, 23])
        x = torch.rand((ends[-1], 2, 16), dtype=torch.float64, generator=gen) * 2 - 1
        w = torch.rand((32, 2), dtype=torch.float64, generator=gen) * 2 - 1
        x.requires_grad_(), w.requires_grad_()
        out = spattn.nsa_compress(x, w, ends, 32, 16)
        self.assertEqual(out.dtype, torch.float64)
        self.assertTrue(torch.autograd.gradcheck(
            lambda a, b: spattn.nsa_compress(a, b, ends, 32, 16), (x, w), eps=1e-6, atol=1e-5))

    def check_select(self, n1, n2, causal, seed):
        gen = torch.Generator().manual_seed(seed)
        ql, kl, bs, kc = [5, 3], [48, 32], 16, 2
        cu_q, cu_kv = cumulative(ql), cumulative(kl)
        q = torch.rand((cu_q[-1], n1, 16), dtype=torch.float64, generator=gen) * 2 - 1
        k = torch.rand((cu_kv[-1], n2, 16), dtype=torch.float64, generator=gen) * 2 - 1
        v = torch.rand((cu_kv[-1], n2, 16), dtype=torch.float64, generator=gen) * 2 - 1
        topk = torch.empty((cu_q[-1], n2, kc), dtype=torch.int32)
        for b, (start, n) in enumerate(zip([0] + cu_q[:-1], ql)):
            for t in range(start, start + n):
                for h in range(n2):
                    topk[t, h] = torch.randperm(kl[b] // bs, generator=gen)[:kc]
        for t in (q, k, v):
            t.requires_grad_()

        def f(a, b, c):
            return spattn.nsa_selected_attention(a, b, c, topk, cu_q, cu_kv, 0.3, bs, causal,
                                                 causal_alignment="top_left")

        out, mx, sm = spattn.nsa_selected_attention(q, k, v, topk, cu_q, cu_kv, 0.3, bs, causal,
                                                    return_softmax=True, causal_alignment="top_left")
        self.assertEqual((out.dtype, mx.dtype, sm.dtype), (torch.float64,) * 3)
        self.assertTrue(torch.autograd.gradcheck(f, (q, k, v), eps=1e-6, atol=1e-5))

    def test_select_gradcheck(self):
        for n1, n2, causal, seed in ((2, 1, False, 65), (4, 2, True, 66), (3, 1, True, 67)):
            with self.subTest(n1=n1, n2=n2, causal=causal):
                self.check_select(n1, n2, causal, seed)


if __name__ == "__main__":
    unittest.main()
