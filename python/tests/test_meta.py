"""The operators' shape functions (Meta kernels): on meta tensors each
returns what its CPU kernel returns, in shape and dtype; nsa_compress, whose
rows depend on cu_seqlens' values, refuses saying so; a module runs on meta
tensors (what FakeTensor tracing does)."""
import unittest

import torch

import refs
import spattn


def meta(x):
    return x.to("meta") if isinstance(x, torch.Tensor) else x


class TestMeta(unittest.TestCase):
    def same(self, what, cpu_out, meta_out):
        cpu_out = cpu_out if isinstance(cpu_out, tuple) else (cpu_out,)
        meta_out = meta_out if isinstance(meta_out, tuple) else (meta_out,)
        self.assertEqual(len(cpu_out), len(meta_out), what)
        for c, m in zip(cpu_out, meta_out):
            self.assertTrue(m.is_meta, what)
            self.assertEqual((tuple(c.shape), c.dtype), (tuple(m.shape), m.dtype), what)

    def check(self, name, *args, **kwargs):
        fn = getattr(torch.ops.spattn, name)
        with torch.no_grad():
            self.same(name, fn(*args, **kwargs),
                      fn(*[meta(a) for a in args], **{k: meta(x) for k, x in kwargs.items()}))

    def test_every_op(self):
        gen = torch.Generator().manual_seed(81)
        shapes = torch.tensor([[4, 5], [2, 3]])
        starts = torch.tensor([0, 20])
        for dt in (torch.float32, torch.bfloat16, torch.float64):
            v = refs.rand((2, 26, 3, 8), dt, gen=gen)
            loc = refs.rand((2, 5, 3, 2, 2, 2), dt, 0.0, 1.0, gen=gen)
            a = refs.rand((2, 5, 3, 2, 2), dt, 0.0, 1.0, gen=gen)
            self.check("ms_deform_attn", v, shapes, starts, loc, a, 64)
            self.check("ms_deform_attn_backward", v, shapes, starts, loc, a, refs.rand((2, 5, 24), dt, gen=gen))
            q = refs.rand((40, 4, 16), dt, gen=gen)
            k = refs.rand((40, 2, 16), dt, gen=gen)
            vv = refs.rand((40, 2, 8), dt, gen=gen)
            cu = torch.tensor([40])
            self.check("sliding_window_attention", q, k, vv, 8, cu, 0.25, 0)
            topk = torch.zeros((40, 2, 2), dtype=torch.int32)
            topk[:, :, 1] = -1
            self.check("nsa_selected_attention", q, k, vv, topk, cu, cu, 0.25, 16, True, "auto")
            w = refs.rand((16, 2), dt, gen=gen)
            self.check("nsa_compress_backward", refs.rand((2, 2, 16), dt, gen=gen), k, w, cu, 16, 16)
            kc, vc = k[:5], vv[:5]
            self.check("nsa_compress_attention", q, kc, vc, 0.25, 4, 16, 16, 32, 2,
                       actual_seq_qlen=torch.tensor([40]), actual_cmp_seq_kvlen=torch.tensor([5]))
            pool_k, pool_v = k.reshape(5, 8, 2, 16), vv.reshape(5, 8, 2, 8)
            table = torch.arange(5, dtype=torch.int32)[None]
            self.check("nsa_select_attention_infer", q[:1], pool_k, pool_v, topk[:1], 0.25, 4, 2, 16, 2, 8, "TND",
                       None, table, [1], [40])
            self.check("nsa_compress_attention_infer", q[:1], pool_k, pool_v, 0.25, 4, 2, 32, 2, 8, 16, 16, None,
                       table, None, [1], [33], [40 * 16], "TND")
        with self.assertRaisesRegex(ValueError, "shape depends on the values"):
            torch.ops.spattn.nsa_compress(meta(k), meta(w), meta(cu), 16, 16)

    def test_module_on_meta(self):
        m = spattn.MSDeformAttn(d_model=16, n_levels=2, n_heads=2, n_points=2).to("meta")
        out = m(torch.empty(1, 5, 16, device="meta"), torch.empty(1, 5, 2, 2, device="meta"),
                torch.empty(1, 26, 16, device="meta"), torch.tensor([[4, 5], [2, 3]], device="meta"),
                torch.tensor([0, 20], device="meta"))
        self.assertEqual((tuple(out.shape), out.is_meta), ((1, 5, 16), True))


if __name__ == "__main__":
    unittest.main()
