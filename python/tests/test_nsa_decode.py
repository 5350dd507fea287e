"""Decode with the NSA layer: NSACache token by token, parallel_nsa with q
shorter than k (batched and varlen), against the full layer's rows (which
test_nsa_layer.py checks against fla's formulation), and the refusals that
keep the top-left and bottom-right readings of causal apart."""
import unittest

import torch

import spattn
from spattn import _lib


def layer_inputs(batch, length, hq, hk, dk, dv, dtype, gen):
    def r(*shape):
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
    q, k, v = r(batch, length, hq, dk), r(batch, length, hk, dk), r(batch, length, hk, dv)
    gates = [torch.rand((batch, length, hq), generator=gen, dtype=torch.float64).to(dtype)
             for _ in range(3)]
    return q, k, v, gates


class TestDecode(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def test_cache_token_by_token_equals_the_layer(self):
        gen = torch.Generator().manual_seed(41)
        for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-5)):
            for block, count, window in ((16, 3, 20), (32, 2, 0)):
                with self.subTest(dtype=dtype, block=block, window=window):
                    q, k, v, (gc, gs, gw) = layer_inputs(2, 110, 8, 2, 24, 16, dtype, gen)
                    full = spattn.parallel_nsa(q, k, v, gc, gs, gw, block_counts=count,
                                               block_size=block, window_size=window)
                    cache = spattn.NSACache(2, 110, 2, 24, 16, block_size=block, block_counts=count,
                                            window_size=window, dtype=dtype)
                    worst = 0.0
                    for t in range(110):
                        cache.append(k[:, t:t + 1], v[:, t:t + 1])
                        o = cache.step(q[:, t:t + 1], gc[:, t:t + 1], gs[:, t:t + 1],
                                       gw[:, t:t + 1] if window else None)
                        worst = max(worst, (o[:, 0].double() - full[:, t].double()).abs().max().item())
                    self.assertLess(worst, tol)

    def test_paper_compression_token_by_token(self):
        """l 32, d 16 under blocks of 64, a learned weight: the cache's steps
        equal the full layer's rows."""
        gen = torch.Generator().manual_seed(43)
        for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-5)):
            with self.subTest(dtype=dtype):
                q, k, v, (gc, gs, gw) = layer_inputs(2, 150, 16, 1, 32, 16, dtype, gen)
                w = (torch.rand((32, 1), generator=gen, dtype=torch.float64) / 16).to(dtype)
                kw = dict(compress_block_size=32, compress_stride=16, compress_weight=w)
                full = spattn.parallel_nsa(q, k, v, gc, gs, gw, block_counts=3, block_size=64,
                                           window_size=24, **kw)
                cache = spattn.NSACache(2, 150, 1, 32, 16, block_size=64, block_counts=3, window_size=24,
                                        dtype=dtype, **kw)
                worst = 0.0
                for t in range(150):
                    cache.append(k[:, t:t + 1], v[:, t:t + 1])
                    o = cache.step(q[:, t:t + 1], gc[:, t:t + 1], gs[:, t:t + 1], gw[:, t:t + 1])
                    worst = max(worst, (o[:, 0].double() - full[:, t].double()).abs().max().item())
                self.assertLess(worst, tol)
                with torch.no_grad():
                    part = spattn.parallel_nsa(q[:, -7:], k, v, gc[:, -7:], gs[:, -7:], gw[:, -7:],
                                               block_counts=3, block_size=64, window_size=24, **kw)
                self.assertLess((part.double() - full[:, -7:].double()).abs().max().item(), tol)

    def test_q_shorter_than_k(self):
        gen = torch.Generator().manual_seed(42)
        q, k, v, (gc, gs, gw) = layer_inputs(2, 90, 4, 1, 16, 16, torch.float64, gen)
        full = spattn.parallel_nsa(q, k, v, gc, gs, gw, block_counts=2, block_size=16, window_size=8)
        with torch.no_grad():
            part = spattn.parallel_nsa(q[:, -5:], k, v, gc[:, -5:], gs[:, -5:], gw[:, -5:],
                                       block_counts=2, block_size=16, window_size=8)
        self.assertLess((part - full[:, -5:]).abs().max().item(), 1e-10)
        # varlen: (cu_seqlens_q, cu_seqlens_k), the queries the last ones of each sequence
        lens, nq = (90, 37), (4, 2)
        kk = torch.cat([k[0, :lens[0]], k[1, :lens[1]]])[None]
        vv = torch.cat([v[0, :lens[0]], v[1, :lens[1]]])[None]
        pick = [(0, lens[0] - nq[0], lens[0]), (1, lens[1] - nq[1], lens[1])]
        qq = torch.cat([q[b, s:e] for b, s, e in pick])[None]
        gg = [torch.cat([g[b, s:e] for b, s, e in pick])[None] for g in (gc, gs, gw)]
        with torch.no_grad():
            out = spattn.parallel_nsa(qq, kk, vv, *gg, block_counts=2, block_size=16, window_size=8,
                                      cu_seqlens=([0, 4, 6], [0, 90, 127]))
        second = spattn.parallel_nsa(q[1:, :37], k[1:, :37], v[1:, :37], gc[1:, :37], gs[1:, :37],
                                     gw[1:, :37], block_counts=2, block_size=16, window_size=8)
        ref = torch.cat([full[0, 86:90], second[0, 35:37]])
        self.assertLess((out[0] - ref).abs().max().item(), 1e-10)

    def test_refusals(self):
        gen = torch.Generator().manual_seed(43)
        q, k, v, (gc, gs, gw) = layer_inputs(1, 40, 4, 1, 16, 16, torch.float32, gen)
        qg = q[:, -1:].clone().requires_grad_()
        with self.assertRaisesRegex(RuntimeError, "inference only"):
            spattn.parallel_nsa(qg, k, v, gc[:, -1:], gs[:, -1:], gw[:, -1:], block_size=16)
        with torch.no_grad(), self.assertRaisesRegex(ValueError, "g_cmp"):
            spattn.parallel_nsa(q[:, -1:], k, v, None, gs[:, -1:], gw[:, -1:], block_size=16,
                                block_indices=torch.zeros(1, 1, 1, 1, dtype=torch.int64))
        # one new query against a 40-key cache: causal is ambiguous, not top-left silently
        topk = torch.zeros(1, 1, 1, dtype=torch.int32)
        with self.assertRaisesRegex(ValueError, "causal_alignment"):
            spattn.nsa_selected_attention(q[0, -1:], k[0], v[0], topk, [1], [40], 0.25, 16, causal=True)
        out = spattn.nsa_selected_attention(q[0, -1:], k[0], v[0], topk, [1], [40], 0.25, 16, causal=True,
                                            causal_alignment="top_left")
        self.assertEqual(tuple(out.shape), (1, 4, 16))
        cache = spattn.NSACache(1, 8, 1, 16, 16, block_size=16)
        with self.assertRaisesRegex(ValueError, "append"):
            cache.step(q[:, :1], gc[:, :1], gs[:, :1])
        with self.assertRaisesRegex(ValueError, "full"):
            cache.append(k[:, :9], v[:, :9])
        self.assertTrue(issubclass(_lib.SpattnError, Exception))


if __name__ == "__main__":
    unittest.main()
