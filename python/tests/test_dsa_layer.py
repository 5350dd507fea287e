"""spattn.dsa_attention (the lightning indexer's top-k, then sparse MLA in
absorb mode) against a float64 dense-masked formulation of DeepSeek-V3.2-Exp's
inference/model.py (Indexer.forward and MLA.forward), written here: the
index scores of every key, the causal mask added, topk(min(K, end_pos)),
the index mask -inf outside the selection (scatter of 0 at the top-k, plus
the causal mask), the MLA-absorb scores over all keys plus that mask,
softmax, P times the latent kv; forward and every gradient (query,
query_rope, kv, k_rope) by torch.autograd on it. The indexer's inputs are
drawn on a grid of eighths so that every index score is exact in float32 and
float64 and the two selections are the same keys in the same order (ties
broken by ascending key in the reference, as the library documents; the
reference's torch.topk leaves ties unordered). BSND, causal with as many
queries as keys and with the newest queries only, sparse_mode 0, a batch
shorter than the other (queries that see no key: out 0), D 512 + 64 and
smaller, float32 / bfloat16 / float64; no gradient reaches the indexer."""
import unittest

import torch

import refs
import spattn
from spattn import _lib
from test_dsa_sfa import kv_layout

HAS_GRAD = _lib.dsa_sfa_grad_ws is not None
NEG = float("-inf")


def grid(shape, dtype, gen):
    """Multiples of 1/8 in [-1, 1]: the index scores are exact."""
    return (torch.randint(-8, 9, shape, generator=gen, dtype=torch.int64).double() / 8).to(dtype)


def dense_reference(q, q_rope, kv, k_rope, index_q, index_k, weights, scale, topk, mode, lengths):
    """model.py's sparse attention step in float64, dense: q [B, S1, N1, D],
    q_rope [B, S1, N1, Dr], kv [B, S2, 1, D], k_rope [B, S2, 1, Dr], index_q
    [B, S1, Hi, Di], index_k [B, S2, 1, Di], weights [B, S1, Hi]; lengths:
    each batch's key count (keys past it masked). Returns (out [B, S1, N1,
    D], the top-k indices [B, S1, min(topk, S2)])."""
    b, s1 = q.shape[:2]
    s2 = kv.shape[1]
    pos = torch.arange(s2)
    mask = torch.zeros(b, s1, s2, dtype=torch.float64)
    for bi, length in enumerate(lengths):
        seen = pos[None, :] < length
        if mode == 3:  # the queries are the batch's newest: query i at position L - S1 + i
            seen = seen & (pos[None, :] <= (length - s1 + torch.arange(s1))[:, None])
        mask[bi] = torch.where(seen, 0.0, NEG)
    # Indexer: sum_h w * relu(q_h . k), plus the mask, topk(min(index_topk, end_pos))
    score = (torch.einsum("bshd,btd->bsht", index_q.double(), index_k[:, :, 0].double()).relu()
             * weights.double()[..., None]).sum(2)
    rank = score * 2.0**21 - pos  # exact: ties by ascending key
    top = (rank + mask).topk(min(topk, s2), dim=-1)[1]
    index_mask = torch.full((b, s1, s2), NEG, dtype=torch.float64).scatter_(-1, top, 0.0) + mask
    # MLA, absorb: scores over every key, the index mask, softmax, P kv
    scores = (torch.einsum("bshc,btc->bsht", q, kv[:, :, 0])
              + torch.einsum("bshr,btr->bsht", q_rope, k_rope[:, :, 0])) * scale
    scores = scores + index_mask.unsqueeze(2)
    none = torch.isinf(scores).all(-1, keepdim=True)  # a query that sees no key: out 0
    p = torch.where(none, torch.zeros(()), scores).softmax(dim=-1) * (~none)
    out = torch.einsum("bsht,btc->bshc", p, kv[:, :, 0])
    return out, top


class Case:
    def __init__(self, gen, dtype, b, s1, s2, n1, d, dr, hi, di, topk, mode, lengths=None):
        self.q = refs.rand((b, s1, n1, d), dtype, gen=gen)
        self.q_rope = refs.rand((b, s1, n1, dr), dtype, gen=gen)
        self.kv = refs.rand((b, s2, 1, d), dtype, gen=gen)
        self.k_rope = refs.rand((b, s2, 1, dr), dtype, gen=gen)
        self.index_q = grid((b, s1, hi, di), dtype, gen)
        self.index_k = grid((b, s2, 1, di), dtype, gen)
        self.weights = grid((b, s1, hi), torch.float32, gen)
        self.grad = refs.rand((b, s1, n1, d), dtype, gen=gen)
        self.scale = 1.0 / (128 + 64) ** 0.5  # the model's qk_head_dim^-0.5
        self.topk, self.mode = topk, mode
        self.lengths = lengths if lengths is not None else [s2] * b
        self.kwargs = dict(sparse_count=topk, sparse_mode=mode)
        if lengths is not None:
            self.kwargs["actual_seq_lengths_kv"] = torch.tensor(lengths, dtype=torch.int32)

    def leaves(self, dtype):
        return [t.to(dtype, copy=True).requires_grad_() for t in (self.q, self.q_rope, self.kv, self.k_rope)]

    def run(self, dtype):
        leaves = self.leaves(dtype)
        index = [t.to(dtype, copy=True).requires_grad_() for t in (self.index_q, self.index_k)]
        w = self.weights.clone().requires_grad_()
        q, q_rope, kv, k_rope = leaves
        out, idx = spattn.dsa_attention(q, kv, q_rope, k_rope, *index, w, self.scale, return_indices=True,
                                        **self.kwargs)
        out.backward(self.grad.to(dtype))
        return out, idx, leaves, index + [w]

    def reference(self):
        leaves = self.leaves(torch.float64)
        out, top = dense_reference(*leaves, self.index_q, self.index_k, self.weights, self.scale, self.topk,
                                   self.mode, self.lengths)
        out.backward(self.grad.double())
        return out, top, leaves


@unittest.skipUnless(HAS_GRAD, "the loaded libspattn has no spa_dsa_sparse_attention_grad")
class DsaAttention(unittest.TestCase):
    def check(self, case, dtype):
        out, idx, leaves, index = case.run(dtype)
        ref_out, top, ref_leaves = case.reference()
        # the same keys, in the same order, as the reference's top-k of what each query sees
        k = top.shape[-1]
        self.assertEqual(tuple(idx.shape), tuple(top.shape[:2]) + (1, k))
        s1 = idx.shape[1]
        for b, length in enumerate(case.lengths):
            for i in range(s1):
                seen = length if case.mode == 0 else max(0, min(length, length - s1 + i + 1))
                m = min(k, seen)
                self.assertEqual(idx[b, i, 0, :m].tolist(), top[b, i, :m].tolist())
                self.assertEqual(idx[b, i, 0, m:].tolist(), [-1] * (k - m))
        refs.assert_close(self, "attention_out", out, ref_out, dtype)
        for name, leaf, ref in zip(("dquery", "dquery_rope", "dkv", "dk_rope"), leaves, ref_leaves):
            self.assertEqual(leaf.grad.dtype, dtype, name)
            refs.assert_close(self, name, leaf.grad, ref.grad, dtype)
        self.assertTrue(all(t.grad is None for t in index), "the indexer gets no gradient")

    def test_prefill_causal(self):
        """As many queries as keys (the reference's prefill), D 512 + 64,
        K below and above the early queries' visible counts."""
        gen = torch.Generator().manual_seed(7101)
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype):
                self.check(Case(gen, dtype, 1, 96, 96, 4, 512, 64, 8, 32, 32, 3), dtype)

    def test_shapes_modes_dtypes(self):
        gen = torch.Generator().manual_seed(7102)
        for dtype, b, s1, s2, n1, topk, mode, lengths in (
                (torch.float32, 2, 256, 256, 16, 64, 3, None),
                (torch.float64, 2, 64, 64, 8, 16, 3, None),
                (torch.bfloat16, 2, 64, 200, 4, 48, 3, None),       # the newest 64 queries of 200 keys
                (torch.float32, 2, 128, 128, 8, 16, 0, None),       # every key seen
                (torch.float32, 2, 100, 160, 4, 64, 3, [160, 70]),  # batch 1: 30 queries see no key
                (torch.float64, 1, 64, 64, 4, 4096, 3, None)):      # K clipped to the 64 keys
            with self.subTest(dtype=dtype, b=b, s1=s1, s2=s2, n1=n1, topk=topk, mode=mode, lengths=lengths):
                self.check(Case(gen, dtype, b, s1, s2, n1, 64, 16, 4, 16, topk, mode, lengths), dtype)

    def test_paged_kv_in_inference(self):
        """A paged cache (kv, k_rope and the index key one page pool) gives
        what the BSND cache gives."""
        gen = torch.Generator().manual_seed(7103)
        case = Case(gen, torch.float32, 2, 8, 40, 4, 32, 8, 4, 16, 16, 3, [40, 29])
        rows = [torch.cat([case.kv[b, :n], case.k_rope[b, :n], case.index_k[b, :n]], -1)
                for b, n in enumerate(case.lengths)]
        cache, table, lens = kv_layout(rows, "PA_BSND", gen)
        with torch.no_grad():
            want = spattn.dsa_attention(case.q, case.kv, case.q_rope, case.k_rope, case.index_q, case.index_k,
                                        case.weights, case.scale, **case.kwargs)
            got = spattn.dsa_attention(case.q, cache[..., :32], case.q_rope, cache[..., 32:40], case.index_q,
                                       cache[..., 40:], case.weights, case.scale, block_table=table,
                                       layout_kv="PA_BSND", **case.kwargs)
        self.assertTrue(torch.equal(got, want))

    def test_refusals(self):
        gen = torch.Generator().manual_seed(7104)
        case = Case(gen, torch.float32, 1, 8, 8, 4, 16, 4, 2, 8, 4, 3)
        args = (case.q, case.kv, case.q_rope, case.k_rope, case.index_q, case.index_k, case.weights, 0.1)
        with self.assertRaisesRegex(ValueError, "sparse_count is a positive int"):
            spattn.dsa_attention(*args, sparse_count=0)
        with self.assertRaisesRegex(ValueError, "index_key has 2 heads and key 1"):
            spattn.dsa_attention(*args[:5], case.index_k.expand(-1, -1, 2, -1), *args[6:])
        with self.assertRaisesRegex(ValueError, "layout_kv"):
            spattn.dsa_attention(*args, layout_kv="BNSD")


if __name__ == "__main__":
    unittest.main()
