"""npu_lightning_indexer (torch.ops.spattn.npu_lightning_indexer) against a
float64 formulation written from its definition: I[s] = sum_g w[g] *
relu(q[g] . k[s]) over the keys a query sees (sparse_mode 3: query i of a
batch's S newest at position L - S + i sees keys up to it; 0: all L), the
top K descending with equal scores by ascending key; in torch_npu's layouts
(BSND / TND query, PA_BSND / BSND / TND key), every dtype. Its gradient:
test_dsa_li_grad.py."""
import unittest

import torch

import refs
import spattn

FLOATS = refs.DTYPES + (torch.float64,)


def indexer_ref(q, w, keys, counts, lengths, mode):
    """q [T, N1, D], w [T, N1], keys: each batch's rows [L, N2, D] ->
    per (token, key head) the float64 scores of the keys it sees."""
    n1, n2 = q.shape[1], keys[0].shape[1] if keys else 1
    g = n1 // n2
    out, t = [], 0
    for b, (s_b, l_b) in enumerate(zip(counts, lengths)):
        kb = keys[b].double()
        for i in range(s_b):
            seen = l_b if mode == 0 else max(0, min(l_b, l_b - s_b + i + 1))
            row = []
            for h in range(n2):
                qs = q[t, h * g:(h + 1) * g].double()            # [G, D]
                dots = qs @ kb[:seen, h].T                         # [G, seen]
                row.append((w[t, h * g:(h + 1) * g].double()[:, None] * dots.clamp_min(0)).sum(0))
            out.append(row)
            t += 1
    return out


def check_ranking(case, idx, scores, k, tol):
    """idx [K] of one (token, head): the min(K, seen) keys, each scoring the
    j-th largest reference score (up to tol), distinct, then -1."""
    seen = scores.numel()
    m = min(k, seen)
    got = idx.tolist()
    case.assertEqual(got[m:], [-1] * (k - m))
    case.assertEqual(len(set(got[:m])), m)
    if m:
        want = torch.sort(scores, descending=True, stable=True).values[:m]
        have = scores[torch.tensor(got[:m], dtype=torch.long)]
        bound = tol * (1 + scores.abs().max())
        case.assertLessEqual(float((have - want).abs().max()), float(bound))


def paged(rows_per_batch, page, n2, d, dtype, gen):
    """A pool of pages in shuffled order, its table, each batch's logical rows."""
    pages = [(n + page - 1) // page for n in rows_per_batch]
    total = sum(pages) + 1
    pool = refs.rand((total, page, n2, d), dtype, gen=gen)
    order = torch.randperm(total, generator=gen)
    table = torch.full((len(pages), max(pages) + 1), -1, dtype=torch.int32)
    rows, used = [], 0
    for b, n in enumerate(rows_per_batch):
        table[b, :pages[b]] = order[used:used + pages[b]].to(torch.int32)
        used += pages[b]
        pos = torch.arange(n)
        rows.append(pool[table[b, pos // page].long(), pos % page])
    return pool, table, rows


class LightningIndexer(unittest.TestCase):
    def test_bsnd_query_paged_key(self):
        gen = torch.Generator().manual_seed(3401)
        for dtype in FLOATS:
            b, s1, n1, n2, d, k = 2, 3, 8, 1, 64, 40
            lengths = [70, 33]
            pool, table, rows = paged(lengths, 16, n2, d, dtype, gen)
            q = refs.rand((b, s1, n1, d), dtype, gen=gen)
            w = refs.rand((b, s1, n1), torch.float32, gen=gen)
            idx, val = spattn.npu_lightning_indexer(
                q, pool, w, actual_seq_lengths_key=torch.tensor(lengths, dtype=torch.int32),
                block_table=table, layout_key="PA_BSND", sparse_count=k)
            self.assertEqual(tuple(idx.shape), (b, s1, n2, k))
            self.assertEqual(val.numel(), 0)
            ref = indexer_ref(q.reshape(b * s1, n1, d), w.reshape(b * s1, n1), rows, [s1] * b, lengths, 3)
            tol = 1e-12 if dtype == torch.float64 else 1e-5
            for t in range(b * s1):
                check_ranking(self, idx.reshape(b * s1, n2, k)[t, 0], ref[t][0], k, tol)

    def test_tnd_values_and_modes(self):
        gen = torch.Generator().manual_seed(3402)
        for dtype, mode in ((torch.float32, 0), (torch.bfloat16, 3), (torch.float16, 3)):
            counts, lengths, n1, n2, d, k = [2, 3], [20, 45], 6, 2, 32, 30
            q = refs.rand((sum(counts), n1, d), dtype, gen=gen)
            w = refs.rand((sum(counts), n1), dtype, gen=gen)
            key = refs.rand((sum(lengths), n2, d), dtype, gen=gen)
            rows = [key[:20], key[20:]]
            idx, val = spattn.npu_lightning_indexer(
                q, key, w, actual_seq_lengths_query=torch.tensor([2, 5], dtype=torch.int32),
                actual_seq_lengths_key=torch.tensor([20, 65], dtype=torch.int32), layout_query="TND",
                layout_key="TND", sparse_count=k, sparse_mode=mode, return_value=True)
            ref = indexer_ref(q, w, rows, counts, lengths, mode)
            for t in range(sum(counts)):
                for h in range(n2):
                    check_ranking(self, idx[t, h], ref[t][h], k, 1e-5)
                    m = min(k, ref[t][h].numel())
                    chosen = ref[t][h][idx[t, h, :m].long()]
                    refs.assert_close(self, "sparse_values", val[t, h, :m], chosen.to(dtype), dtype)
                    self.assertTrue(torch.isinf(val[t, h, m:]).all())

    def test_padding_queries_and_ties(self):
        """A BSND batch with fewer queries than S1: its rows past them are -1.
        Small integers: every score exact, ties by ascending key."""
        q = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).reshape(1, 1, 2, 2).repeat(2, 2, 1, 1)
        key = torch.tensor([[1.0, 1.0], [2.0, 0.0], [0.0, 2.0], [-1.0, -1.0], [1.0, 1.0]])
        key = key.reshape(1, 5, 1, 2).repeat(2, 1, 1, 1)
        w = torch.ones(2, 2, 2)
        idx, val = spattn.npu_lightning_indexer(
            q, key, w, actual_seq_lengths_query=torch.tensor([2, 1], dtype=torch.int32),
            sparse_count=6, sparse_mode=0, return_value=True)
        # scores: key 0: 2, key 1: 2, key 2: 2, key 3: 0, key 4: 2 -> 0, 1, 2, 4, 3, -1
        self.assertEqual(idx[0, 0, 0].tolist(), [0, 1, 2, 4, 3, -1])
        self.assertEqual(idx[0, 1, 0].tolist(), [0, 1, 2, 4, 3, -1])
        self.assertEqual(idx[1, 0, 0].tolist(), [0, 1, 2, 4, 3, -1])
        self.assertEqual(idx[1, 1, 0].tolist(), [-1] * 6)  # batch 1 has one query
        self.assertEqual(val[0, 0, 0, :5].tolist(), [2.0, 2.0, 2.0, 2.0, 0.0])
        self.assertTrue(torch.isinf(val[1, 1, 0]).all())

    def test_refusals_and_indices_without_gradient(self):
        q, key, w = torch.randn(1, 1, 4, 8), torch.randn(1, 5, 1, 8), torch.randn(1, 1, 4)
        with self.assertRaises(ValueError):
            spattn.npu_lightning_indexer(q, key, w, pre_tokens=100)
        with self.assertRaises(ValueError):
            spattn.npu_lightning_indexer(q, key, w, layout_key="PA_BSND")
        with self.assertRaises(spattn.SpattnError):
            spattn.npu_lightning_indexer(q, key, w, sparse_mode=1)
        # the indices have no gradient (sparse_values do: test_dsa_li_grad.py)
        idx, val = spattn.npu_lightning_indexer(q.requires_grad_(), key, w)
        self.assertFalse(idx.requires_grad or val.requires_grad)

    def test_meta_and_script(self):
        q = torch.empty(2, 3, 4, 8, device="meta")
        idx, val = torch.ops.spattn.npu_lightning_indexer(q, torch.empty(2, 9, 1, 8, device="meta"),
                                                          torch.empty(2, 3, 4, device="meta"),
                                                          sparse_count=5, return_value=True)
        self.assertEqual(tuple(idx.shape), (2, 3, 1, 5))
        self.assertEqual(tuple(val.shape), (2, 3, 1, 5))

        @torch.jit.script
        def top(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return spattn.npu_lightning_indexer(q, k, w, sparse_count=3, sparse_mode=0)[0]

        gen = torch.Generator().manual_seed(3405)
        qq, kk, ww = (refs.rand(s, torch.float32, gen=gen) for s in ((1, 2, 4, 8), (1, 6, 1, 8), (1, 2, 4)))
        self.assertEqual(top(qq, kk, ww).tolist(),
                         spattn.npu_lightning_indexer(qq, kk, ww, sparse_count=3, sparse_mode=0)[0].tolist())


if __name__ == "__main__":
    unittest.main()
