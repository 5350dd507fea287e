"""npu_nsa_select_attention_infer (torch.ops.spattn.nsa_select_attention_infer)
against a float64 formulation written from its definition: the newest S
queries of each sequence, query i at position L - S + i attending the keys
of its selected blocks up to there, on paged caches in a shuffled page order
and on contiguous ones, in the layouts BSND, BSH and TND, every dtype."""
import unittest

import torch

import refs
import spattn
from spattn import _lib

FLOATS = refs.DTYPES + (torch.float64,)


def paged_cache(lengths, page, n2, d, dv, dtype, gen, spare=2):
    """A pool in a shuffled page order, its block table (entries past each
    sequence point outside the pool) and each sequence's logical rows."""
    pages = [(n + page - 1) // page for n in lengths]
    total = sum(pages) + spare
    k = refs.rand((total, page, n2 * d), dtype, gen=gen)
    v = refs.rand((total, page, n2 * dv), dtype, gen=gen)
    order = torch.randperm(total, generator=gen)
    table = torch.full((len(lengths), max(pages) + 1), total + 7, dtype=torch.int32)
    used = 0
    rows_k, rows_v = [], []
    for b, n in enumerate(lengths):
        table[b, :pages[b]] = order[used:used + pages[b]].to(torch.int32)
        used += pages[b]
        pos = torch.arange(n)
        pg, off = table[b, (pos // page)].long(), pos % page
        rows_k.append(k[pg, off].reshape(n, n2, d))
        rows_v.append(v[pg, off].reshape(n, n2, dv))
    return k, v, table, rows_k, rows_v


def infer_ref(q, rows_k, rows_v, topk, counts, lengths, scale, block):
    """q [T, N1, D], rows per sequence [L, N2, *], topk [T, N2, K] -> [T, N1, Dv]."""
    t_all, n1, _ = q.shape
    n2 = rows_k[0].shape[1]
    g = n1 // n2
    out = torch.zeros(t_all, n1, rows_v[0].shape[2], dtype=torch.float64)
    t = 0
    for b, (s, n) in enumerate(zip(counts, lengths)):
        for i in range(s):
            pos = n - s + i
            for h in range(n1):
                keys = [r for x in topk[t, h // g].tolist() if x >= 0
                        for r in range(x * block, min(x * block + block, n)) if r <= pos]
                if keys:
                    kr = rows_k[b][keys, h // g].double()
                    vr = rows_v[b][keys, h // g].double()
                    p = torch.softmax(scale * (kr @ q[t, h].double()), 0)
                    out[t, h] = p @ vr
            t += 1
    return out


def draw_topk(t_all, n2, kc, counts, lengths, block, gen):
    topk = torch.empty(t_all, n2, kc, dtype=torch.int32)
    t = 0
    for s, n in zip(counts, lengths):
        nblk = (n + block - 1) // block
        for i in range(s):
            cur = (n - s + i) // block
            topk[t] = torch.randint(-1, cur + 1, (n2, kc), generator=gen, dtype=torch.int32)
            topk[t, :, 0] = cur
            if nblk > cur + 1:
                topk[t, :, -1] = nblk - 1  # after the query: selects nothing
            t += 1
    return topk


class TestSelectInfer(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def test_bsnd_paged_every_dtype(self):
        gen = torch.Generator().manual_seed(29)
        lengths, n1, n2, d, dv, block, page, kc = [700, 64, 129], 16, 2, 64, 48, 64, 32, 5
        for dtype in FLOATS:
            for s in (1, 3):
                with self.subTest(dtype=dtype, s=s):
                    k, v, table, rk, rv = paged_cache(lengths, page, n2, d, dv, dtype, gen)
                    q = refs.rand((len(lengths), s, n1, d), dtype, gen=gen)
                    counts = [s] * len(lengths)
                    topk = draw_topk(len(lengths) * s, n2, kc, counts, lengths, block, gen)
                    o = spattn.npu_nsa_select_attention_infer(
                        q, k, v, topk.reshape(len(lengths), s, n2, kc), d ** -0.5, n1, n2, block, kc,
                        page, block_table=table, actual_seq_kvlen=lengths)
                    ref = infer_ref(q.reshape(-1, n1, d), rk, rv, topk, counts, lengths, d ** -0.5, block)
                    refs.assert_close(self, "out", o.reshape(-1, n1, dv), ref, dtype)

    def test_bsh_decode_and_tnd_chunks(self):
        gen = torch.Generator().manual_seed(30)
        lengths, n1, n2, d, block, page, kc = [300, 5000], 8, 1, 32, 32, 16, 4
        k, v, table, rk, rv = paged_cache(lengths, page, n2, d, d, torch.float32, gen)
        q = refs.rand((2, 1, n1 * d), torch.float32, gen=gen)
        topk = draw_topk(2, n2, kc, [1, 1], lengths, block, gen)
        o = spattn.npu_nsa_select_attention_infer(q, k, v, topk, 0.3, n1, n2, block, kc, page, "BSH",
                                                  block_table=table, actual_seq_kvlen=lengths)
        self.assertEqual(tuple(o.shape), (2, 1, n1 * d))
        ref = infer_ref(q.reshape(2, n1, d), rk, rv, topk, [1, 1], lengths, 0.3, block)
        refs.assert_close(self, "BSH", o.reshape(2, n1, d), ref, torch.float32)
        counts = [4, 2]  # TND: per-batch query counts
        qt = refs.rand((6, n1, d), torch.float32, gen=gen)
        topk = draw_topk(6, n2, kc, counts, lengths, block, gen)
        o = spattn.npu_nsa_select_attention_infer(qt, k, v, topk, 0.3, n1, n2, block, kc, page, "TND",
                                                  block_table=table, actual_seq_qlen=counts,
                                                  actual_seq_kvlen=lengths)
        refs.assert_close(self, "TND", o, infer_ref(qt, rk, rv, topk, counts, lengths, 0.3, block),
                          torch.float32)

    def test_contiguous_cache_and_wide_group(self):
        gen = torch.Generator().manual_seed(31)
        lengths, n1, n2, d, block, kc = [90, 33], 96, 1, 24, 16, 3
        k = refs.rand((2, 100, n2, d), torch.float32, gen=gen)
        v = refs.rand((2, 100, n2, d), torch.float32, gen=gen)
        q = refs.rand((2, 2, n1, d), torch.float32, gen=gen)
        topk = draw_topk(4, n2, kc, [2, 2], lengths, block, gen)
        o = spattn.npu_nsa_select_attention_infer(q, k, v, topk.reshape(2, 2, n2, kc), 0.2, n1, n2,
                                                  block, kc, 0, actual_seq_kvlen=lengths)
        ref = infer_ref(q.reshape(4, n1, d), [k[0], k[1]], [v[0], v[1]], topk, [2, 2], lengths, 0.2,
                        block)
        refs.assert_close(self, "contiguous", o.reshape(4, n1, d), ref, torch.float32)

    def test_refusals(self):
        gen = torch.Generator().manual_seed(32)
        k, v, table, _, _ = paged_cache([100], 16, 1, 16, 16, torch.float32, gen)
        q = refs.rand((1, 1, 4, 16), torch.float32, gen=gen)
        topk = torch.tensor([[[0, 1]]], dtype=torch.int32)
        args = (q, k, v, topk, 0.25, 4, 1, 16, 2, 16)
        with self.assertRaisesRegex(ValueError, "atten_mask"):
            spattn.npu_nsa_select_attention_infer(*args, atten_mask=torch.ones(1, 1, dtype=torch.bool),
                                                  block_table=table, actual_seq_kvlen=[100])
        with self.assertRaisesRegex(_lib.SpattnError, "topk_indices"):
            spattn.npu_nsa_select_attention_infer(q, k, v, torch.tensor([[[0, 7]]], dtype=torch.int32),
                                                  *args[4:], block_table=table, actual_seq_kvlen=[100])
        bad = table.clone()
        bad[0, 0] = -5
        with self.assertRaisesRegex(_lib.SpattnError, "block_table"):
            spattn.npu_nsa_select_attention_infer(*args, block_table=bad, actual_seq_kvlen=[100])
        with self.assertRaisesRegex(RuntimeError, "inference operator"):
            spattn.npu_nsa_select_attention_infer(q.requires_grad_(), *args[1:], block_table=table,
                                                  actual_seq_kvlen=[100])


class TestCompressInfer(unittest.TestCase):
    def test_newest_windows_into_the_cache(self):
        gen = torch.Generator().manual_seed(33)
        for dtype in FLOATS:
            with self.subTest(dtype=dtype):
                lengths, page, n, d, block, stride = [64, 40, 57], 16, 2, 24, 32, 8
                k, _, table, rk, _ = paged_cache(lengths, page, n, d, d, dtype, gen)
                pool = k.unflatten(-1, (n, d))
                weight = refs.rand((block, n), dtype, gen=gen)
                cache = refs.rand((5, n, d), dtype, gen=gen)
                before = cache.clone()
                slots = torch.tensor([3, 0, 1], dtype=torch.int32)
                out = spattn.npu_nsa_compress_infer(pool, weight, slots, block, stride, page, table,
                                                    lengths, cache=cache)
                self.assertIs(out, cache)
                for b, length in enumerate(lengths):
                    row = int(slots[b])
                    if length >= block and (length - block) % stride == 0:
                        win = rk[b][length - block:length].double()
                        ref = (win * weight.double()[:, :, None]).sum(0)
                        refs.assert_close(self, "row %d" % row, cache[row], ref, dtype)
                    else:  # 57 does not close a window: its row as it was
                        self.assertTrue(torch.equal(cache[row], before[row]))
                self.assertTrue(torch.equal(cache[[2, 4]], before[[2, 4]]))


def cattn_infer_ref(q, rows_k, rows_v, counts, cmps, lengths, scale, l, st, ls, kc, causal):
    """Compressed attention of the newest S_b queries against C_b compressed
    keys and the top-K blocks, from the operator's definition: the softmax
    over the keys the query sees (c * st + l - 1 <= its position; every key,
    scored alike, when it sees none), O = P V; per kv head the importance of
    block j, sum over the heads and m < l'/st, n < l/st of P[(j+1) l'/st - m - n],
    for ceil(((C - 1) st + l) / l') blocks, block 0 and the last two first."""
    t_all, n1, _ = q.shape
    n2 = rows_k[0].shape[1]
    g, m_, nn = n1 // n2, ls // st, l // st
    out = torch.zeros(t_all, n1, rows_v[0].shape[2], dtype=torch.float64)
    imp_all, top_all = [], []
    t = 0
    for b, (s, c, n) in enumerate(zip(counts, cmps, lengths)):
        nsel = 0 if c == 0 else ((c - 1) * st + l + ls - 1) // ls
        for i in range(s):
            pos = n - s + i
            seen = [x for x in range(c) if not causal or x * st + l - 1 <= pos] or list(range(c))
            imps, tops = [], []
            for h2 in range(n2):
                pc = torch.zeros(max(c, 1), dtype=torch.float64)
                for h in range(h2 * g, h2 * g + g):
                    if c == 0:
                        continue
                    kr = rows_k[b][seen, h2].double()
                    vr = rows_v[b][seen, h2].double()
                    p = torch.softmax(scale * (kr @ q[t, h].double()), 0)
                    out[t, h] = p @ vr
                    pc[seen] += p
                imp = []
                for j in range(nsel):
                    idx = [m_ * (j + 1) - mm - x for mm in range(m_) for x in range(nn)]
                    v = sum(float(pc[y]) for y in idx if 0 <= y < c)
                    imp.append(float("inf") if j == 0 or j >= nsel - 2 else v)
                order = sorted(range(nsel), key=lambda j: -imp[j])  # stable: ties ascending
                tops.append((order + [-1] * kc)[:kc])
                imps.append(imp)
            imp_all.append(imps)
            top_all.append(tops)
            t += 1
    return out, imp_all, top_all


class TestCompressAttentionInfer(unittest.TestCase):
    def check_topk(self, got, imp_all, top_all, tol):
        for t, (imps, tops) in enumerate(zip(imp_all, top_all)):
            for h2, (imp, top) in enumerate(zip(imps, tops)):
                row = got[t, h2].tolist()
                self.assertEqual(len(set(x for x in row if x >= 0)), len([x for x in row if x >= 0]))
                for a, w in zip(row, top):
                    if a != w:  # only a block of (nearly) the same importance
                        self.assertTrue(a >= 0 and w >= 0 and abs(imp[a] - imp[w]) <= tol,
                                        "token %d head %d: %s vs %s" % (t, h2, row, top))

    def test_paged_decode_and_chunks_every_dtype(self):
        gen = torch.Generator().manual_seed(34)
        l, st, ls, kc, page = 32, 16, 64, 5, 16
        for dtype in FLOATS:
            for causal in (False, True):
                with self.subTest(dtype=dtype, causal=causal):
                    cmps, counts = [37, 9, 70], [1, 3, 2]
                    lengths = [(c - 1) * st + l + 3 for c in cmps]
                    n1, n2, d, dv = 8, 2, 40, 24
                    k, v, table, rk, rv = paged_cache(cmps, page, n2, d, dv, dtype, gen)
                    q = refs.rand((sum(counts), n1, d), dtype, gen=gen)
                    scale = d ** -0.5
                    out, top = spattn.npu_nsa_compress_attention_infer(
                        q, k, v, scale, n1, n2, ls, kc, page, l, st,
                        atten_mask=torch.ones(1, dtype=torch.bool) if causal else None,
                        block_table=table, actual_seq_qlen=counts, actual_cmp_seq_kvlen=cmps,
                        actual_sel_seq_kvlen=lengths)
                    ref, imp, reftop = cattn_infer_ref(q, rk, rv, counts, cmps, lengths, scale, l, st,
                                                       ls, kc, causal)
                    refs.assert_close(self, "attention_out", out, ref, dtype)
                    self.assertEqual(top.dtype, torch.int32)
                    self.check_topk(top, imp, reftop, 1e-12 if dtype == torch.float64 else 1e-4 * n1 / n2)

    def test_refusals(self):
        q = torch.randn(1, 4, 16)
        k = torch.randn(1, 8, 16)
        with self.assertRaisesRegex(ValueError, "actual_cmp_seq_kvlen"):
            spattn.npu_nsa_compress_attention_infer(q, k, k, 0.25, 4, 1, 32, 2, 8, 16, 16)
        with self.assertRaisesRegex(ValueError, "actual_sel_seq_kvlen"):
            spattn.npu_nsa_compress_attention_infer(q, k, k, 0.25, 4, 1, 32, 2, 8, 16, 16,
                                                    atten_mask=torch.ones(1), actual_cmp_seq_kvlen=[3])
        with self.assertRaisesRegex(spattn.SpattnError, "161002"):
            spattn.npu_nsa_compress_attention_infer(q, k, k, 0.25, 4, 1, 24, 2, 8, 16, 16,
                                                    actual_cmp_seq_kvlen=[3])


if __name__ == "__main__":
    unittest.main()
