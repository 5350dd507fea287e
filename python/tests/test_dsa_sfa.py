"""npu_sparse_flash_attention (torch.ops.spattn.npu_sparse_flash_attention)
against a float64 formulation written from its definition: per query token
and key head, the tokens its slots select (slot x: tokens x S .. x S + S - 1
of its batch below L, in slot order, -1 nothing), those it sees (sparse_mode
3: up to L - S_b + i; 0: all), z = scale * [q | q_rope] . [k | k_rope],
softmax, P V; a query that sees none gives 0. In torch_npu's layouts (BSND /
TND query, PA_BSND / BSND / TND key and value), with and without rope, value
separate or the key itself (MLA-absorb), every dtype, BSND padding queries;
the softmax statistics against the reference's max and sum of exp."""
import io
import unittest
import warnings

import torch

import refs
import spattn
from spattn import _lib

try:
    import onnx
except ImportError:  # python3-onnx: only the export test needs it
    onnx = None

FLOATS = refs.DTYPES + (torch.float64,)
FLT_MAX = refs.FLT_MAX


def sfa_ref(q, qr, keys, key_ropes, values, idx, counts, lengths, scale, sbs, mode):
    """q [T, N1, D] and qr [T, N1, Dr] (or None): the queries of batch 0,
    then batch 1, ...; keys / key_ropes / values: each batch's rows [L_b, N2,
    *]; idx [T, N2, K]. Returns out [T, N1, Dv], max and sum [N2, T, G], all
    float64."""
    t1, n1, _ = q.shape
    n2, dv = keys[0].shape[1], values[0].shape[2]
    g = n1 // n2
    out = torch.zeros(t1, n1, dv, dtype=torch.float64)
    mx = torch.full((n2, t1, g), -FLT_MAX, dtype=torch.float64)
    sm = torch.zeros(n2, t1, g, dtype=torch.float64)
    t = 0
    for b, (s_b, l_b) in enumerate(zip(counts, lengths)):
        for i in range(s_b):
            seen = l_b if mode == 0 else max(0, min(l_b, l_b - s_b + i + 1))
            for n in range(n2):
                tokens = [p for x in idx[t, n].tolist() if x >= 0
                          for p in range(x * sbs, (x + 1) * sbs) if p < seen]
                if not tokens:
                    continue
                rows = torch.tensor(tokens, dtype=torch.long)
                heads = slice(n * g, (n + 1) * g)
                z = q[t, heads].double() @ keys[b][rows, n].double().T
                if qr is not None:
                    z = z + qr[t, heads].double() @ key_ropes[b][rows, n].double().T
                z = scale * z                                          # [G, tokens]
                m = z.max(-1).values
                e = torch.exp(z - m[:, None])
                out[t, heads] = (e / e.sum(-1, keepdim=True)) @ values[b][rows, n].double()
                mx[n, t], sm[n, t] = m, e.sum(-1)
            t += 1
    return out, mx, sm


def kv_layout(rows, layout, gen):
    """Each batch's rows [L_b, N2, F] as a key cache of the layout: the
    tensor, block_table (PA_BSND) and actual_seq_lengths_kv. Rows past each
    batch's are random (never read)."""
    lengths = [r.shape[0] for r in rows]
    n2, f, dtype = rows[0].shape[1], rows[0].shape[2], rows[0].dtype
    if layout == "TND":
        cache = torch.cat(rows + [refs.rand((2, n2, f), dtype, gen=gen)])
        return cache, None, torch.tensor(refs.cumulative(lengths), dtype=torch.int32)
    lens = torch.tensor(lengths, dtype=torch.int32)
    if layout == "BSND":
        cache = refs.rand((len(rows), max(lengths) + 3, n2, f), dtype, gen=gen)
        for b, r in enumerate(rows):
            cache[b, :r.shape[0]] = r
        return cache, None, lens
    page = 8  # PA_BSND: pages in shuffled order, a spare page and table column
    pages = [(n + page - 1) // page for n in lengths]
    cache = refs.rand((sum(pages) + 1, page, n2, f), dtype, gen=gen)
    order = torch.randperm(cache.shape[0], generator=gen)
    table = torch.full((len(rows), max(pages) + 1), -1, dtype=torch.int32)
    used = 0
    for b, r in enumerate(rows):
        table[b, :pages[b]] = order[used:used + pages[b]].to(torch.int32)
        used += pages[b]
        pos = torch.arange(r.shape[0])
        cache[table[b, pos // page].long(), pos % page] = r
    return cache, table, lens


def random_indices(t1, n2, k, blocks, gen):
    """[T, N2, K] blocks below each token's block count, about a quarter -1
    (anywhere in a row), the last token's first key head all -1."""
    idx = torch.stack([torch.randint(0, b, (n2, k), generator=gen) for b in blocks])
    idx[torch.rand(idx.shape, generator=gen) < 0.25] = -1
    idx[-1, 0] = -1
    return idx.to(torch.int32)


class Case:
    """One call's inputs in torch_npu's layouts and the reference's view of them."""

    def __init__(self, gen, dtype, layout_query, layout_kv, rope, value_kind, sbs, mode, n2=2):
        b, s1, n1, d, dr = 2, 3, 4, 16, (8 if rope else 0)
        dv = {"separate": 8, "key": d, "key_view": 12}[value_kind]
        lengths = [37, 20]
        self.counts = [3, 2]  # BSND: batch 1 has a padding row; TND: a spare row after them
        extra = dv if value_kind == "separate" else 0
        rows = [refs.rand((n, n2, d + dr + extra), dtype, gen=gen) for n in lengths]
        cache, table, lens = kv_layout(rows, layout_kv, gen)
        key = cache[..., :d]
        value = {"separate": cache[..., d + dr:], "key": key, "key_view": key[..., :dv]}[value_kind]
        self.keys = [r[..., :d] for r in rows]
        self.key_ropes = [r[..., d:d + dr] for r in rows]
        self.values = [r[..., d + dr:] if value_kind == "separate" else r[..., :dv] for r in rows]
        blocks = [(n + sbs - 1) // sbs for n, c in zip(lengths, self.counts) for _ in range(c)]
        t = sum(self.counts)
        qall = refs.rand((t, n1, d + dr), dtype, gen=gen)
        idx = random_indices(t, n2, 6, blocks, gen)
        self.q, self.idx = qall[..., :d], idx
        self.qr = qall[..., d:] if rope else None
        if layout_query == "BSND":  # the real queries in each batch's first rows, junk after
            query = refs.rand((b, s1, n1, d + dr), dtype, gen=gen)
            sparse = torch.full((b, s1, n2, 6), 10**6, dtype=torch.int32)  # never read
            self.rows = [bi * s1 + i for bi in range(b) for i in range(self.counts[bi])]
            query.view(b * s1, n1, -1)[self.rows] = qall
            sparse.view(b * s1, n2, 6)[self.rows] = idx
            seq_q = torch.tensor(self.counts, dtype=torch.int32)
        else:
            query = torch.cat([qall, refs.rand((1, n1, d + dr), dtype, gen=gen)])
            sparse = torch.cat([idx, torch.full((1, n2, 6), 10**6, dtype=torch.int32)])
            self.rows = list(range(t))
            seq_q = torch.tensor(refs.cumulative(self.counts), dtype=torch.int32)
        self.lead = tuple(query.shape[:-2])
        self.args = (query[..., :d], key, value, sparse, 1.0 / (d + dr) ** 0.5)
        self.kwargs = dict(block_table=table, actual_seq_lengths_query=seq_q,
                           actual_seq_lengths_kv=lens, sparse_block_size=sbs,
                           layout_query=layout_query, layout_kv=layout_kv, sparse_mode=mode,
                           attention_mode=2 if value_kind != "separate" else 0,
                           return_softmax_lse=True)
        if rope:
            self.kwargs.update(query_rope=query[..., d:], key_rope=cache[..., d:d + dr])
        self.lengths, self.sbs, self.mode = lengths, sbs, mode

    def run(self):
        return spattn.npu_sparse_flash_attention(*self.args, **self.kwargs)

    def reference(self):
        return sfa_ref(self.q, self.qr, self.keys, self.key_ropes, self.values, self.idx, self.counts,
                       self.lengths, self.args[4], self.sbs, self.mode)

    def packed(self, x):
        """The rows of x [*lead, ...] that hold queries, and the others."""
        flat = x.reshape((-1,) + tuple(x.shape[len(self.lead):]))
        pad = [r for r in range(flat.shape[0]) if r not in self.rows]
        return flat[self.rows], flat[pad]

    def native_stats(self, s):
        """torch_npu's statistics layout (BSND [B, N2, S1, G], TND [N2, T1, G])
        as [*lead, N2, G]."""
        return s.permute(0, 2, 1, 3) if len(self.lead) == 2 else s.permute(1, 0, 2)


class SparseFlashAttention(unittest.TestCase):
    def check(self, case, dtype):
        out, mx, sm = case.run()
        ref_out, ref_mx, ref_sm = case.reference()
        got, pad = case.packed(out)
        refs.assert_close(self, "attention_out", got, ref_out, dtype)
        self.assertTrue((pad == 0).all(), "padding rows: 0")
        stat = torch.float64 if dtype == torch.float64 else torch.float32
        for what, s, ref, fill in (("softmax_max", mx, ref_mx, -FLT_MAX), ("softmax_sum", sm, ref_sm, 0.0)):
            self.assertEqual(s.dtype, stat, what)
            got, pad = case.packed(case.native_stats(s))
            ref = ref.transpose(0, 1)                     # [T, N2, G]
            self.assertTrue((pad == fill).all(), "%s: padding rows" % what)
            seen = ref_sm.transpose(0, 1) > 0
            self.assertTrue((got[~seen] == fill).all(), "%s: a query that sees nothing" % what)
            # the scores are summed in f32 for every dtype below f64
            refs.assert_close(self, what, got[seen], ref[seen], torch.float64 if dtype == torch.float64
                              else torch.float32)

    def test_layouts_rope_value_block_dtypes(self):
        _lib.poison_outputs = True  # new outputs NaN: every element is written
        try:
            self.layouts_rope_value_block_dtypes()
        finally:
            _lib.poison_outputs = False

    def layouts_rope_value_block_dtypes(self):
        gen = torch.Generator().manual_seed(5101)
        i = 0
        for layout_query in ("BSND", "TND"):
            for layout_kv in ("PA_BSND", "BSND", "TND"):
                for dtype in FLOATS:
                    for rope in (False, True):
                        for value_kind in ("separate", "key", "key_view"):
                            i += 1
                            sbs = (1, 4)[i % 2]
                            mode = 0 if i % 3 == 0 else 3
                            n2 = 1 if i % 4 == 0 else 2  # N2 1: the statistics written in place
                            with self.subTest(layout_query=layout_query, layout_kv=layout_kv,
                                              dtype=dtype, rope=rope, value=value_kind, sbs=sbs,
                                              mode=mode, n2=n2):
                                case = Case(gen, dtype, layout_query, layout_kv, rope, value_kind,
                                            sbs, mode, n2)
                                self.check(case, dtype)

    def test_whole_batches_and_decode(self):
        """No padding: the statistics in place (N2 1, or S1 1) or through the
        native [N2, T, G] (N2 2, B and S1 > 1); one query per batch."""
        gen = torch.Generator().manual_seed(5102)
        for s1, n2 in ((3, 1), (3, 2), (1, 2)):
            b, n1, d, k, lengths = 2, 4, 8, 5, [11, 30]
            q = refs.rand((b, s1, n1, d), torch.float32, gen=gen)
            key = refs.rand((b, 32, n2, d), torch.float32, gen=gen)
            idx = torch.randint(0, 11, (b, s1, n2, k), generator=gen, dtype=torch.int32)
            out, mx, sm = spattn.npu_sparse_flash_attention(
                q, key, key, idx, 0.3, actual_seq_lengths_kv=torch.tensor(lengths, dtype=torch.int32),
                return_softmax_lse=True)
            self.assertEqual(tuple(mx.shape), (b, n2, s1, n1 // n2))
            self.assertTrue(mx.is_contiguous() and sm.is_contiguous())
            keys = [key[0, :11], key[1, :30]]
            ref_out, ref_mx, ref_sm = sfa_ref(q.reshape(b * s1, n1, d), None, keys, None, keys,
                                              idx.reshape(b * s1, n2, k), [s1] * b, lengths, 0.3, 1, 3)
            refs.assert_close(self, "attention_out", out.reshape(b * s1, n1, d), ref_out, torch.float32)
            for what, s, ref in (("softmax_max", mx, ref_mx), ("softmax_sum", sm, ref_sm)):
                got = s.permute(1, 0, 2, 3).reshape(n2, b * s1, n1 // n2)
                refs.assert_close(self, what, got, ref, torch.float32)

    def test_without_statistics(self):
        """torch_npu's empty statistics; default arguments: BSND, causal."""
        gen = torch.Generator().manual_seed(5103)
        q = refs.rand((1, 2, 2, 8), torch.bfloat16, gen=gen)
        key = refs.rand((1, 6, 1, 8), torch.bfloat16, gen=gen)
        idx = torch.tensor([[[[0, 5, -1]], [[5, 2, -1]]]], dtype=torch.int32)
        out, mx, sm = spattn.npu_sparse_flash_attention(q, key, key, idx, 0.5)
        self.assertEqual((tuple(mx.shape), tuple(sm.shape)), ((0,), (0,)))
        self.assertEqual(out.dtype, torch.bfloat16)
        ref, _, _ = sfa_ref(q[0], None, [key[0]], None, [key[0]], idx[0], [2], [6], 0.5, 1, 3)
        refs.assert_close(self, "attention_out", out[0], ref, torch.bfloat16)
        # int64 indices are taken after a range check
        same, _, _ = spattn.npu_sparse_flash_attention(q, key, key, idx.long(), 0.5)
        self.assertTrue(torch.equal(same, out))

    def test_meta_and_script(self):
        def m(*shape, dtype=torch.float32):
            return torch.empty(shape, dtype=dtype, device="meta")

        out, mx, sm = torch.ops.spattn.npu_sparse_flash_attention(
            m(2, 3, 8, 16), m(2, 9, 2, 16), m(2, 9, 2, 12), m(2, 3, 2, 4, dtype=torch.int32), 0.1,
            return_softmax_lse=True)
        self.assertEqual([tuple(t.shape) for t in (out, mx, sm)], [(2, 3, 8, 12), (2, 2, 3, 4), (2, 2, 3, 4)])
        self.assertEqual((out.dtype, mx.dtype), (torch.float32, torch.float32))
        out, mx, sm = torch.ops.spattn.npu_sparse_flash_attention(
            m(5, 8, 16, dtype=torch.float64), m(9, 2, 16, dtype=torch.float64),
            m(9, 2, 16, dtype=torch.float64), m(5, 2, 4, dtype=torch.int32), 0.1,
            layout_query="TND", layout_kv="TND", return_softmax_lse=True)
        self.assertEqual([tuple(t.shape) for t in (out, mx, sm)], [(5, 8, 16), (2, 5, 4), (2, 5, 4)])
        self.assertEqual(mx.dtype, torch.float64)
        _, mx, _ = torch.ops.spattn.npu_sparse_flash_attention(
            m(2, 3, 8, 16), m(2, 9, 2, 16), m(2, 9, 2, 16), m(2, 3, 2, 4, dtype=torch.int32), 0.1)
        self.assertEqual(tuple(mx.shape), (0,))

        @torch.jit.script
        def attend(q: torch.Tensor, k: torch.Tensor, idx: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
            return spattn.npu_sparse_flash_attention(q, k, k, idx, 0.25, actual_seq_lengths_kv=lens,
                                                     sparse_mode=0, attention_mode=2)[0]

        gen = torch.Generator().manual_seed(5104)
        q = refs.rand((1, 2, 4, 8), torch.float32, gen=gen)
        k = refs.rand((1, 7, 1, 8), torch.float32, gen=gen)
        idx = torch.tensor([[[[3, 0]], [[-1, 5]]]], dtype=torch.int32)
        lens = torch.tensor([6], dtype=torch.int32)
        self.assertTrue(torch.equal(attend(q, k, idx, lens), spattn.npu_sparse_flash_attention(
            q, k, k, idx, 0.25, actual_seq_lengths_kv=lens, sparse_mode=0, attention_mode=2)[0]))

    def test_refusals(self):
        q, key = torch.randn(1, 2, 4, 8), torch.randn(1, 5, 1, 8)
        idx = torch.zeros(1, 2, 1, 3, dtype=torch.int32)
        sfa = spattn.npu_sparse_flash_attention
        for kwargs, said in ((dict(pre_tokens=100), "pre_tokens"), (dict(next_tokens=0), "next_tokens"),
                             (dict(sparse_mode=1), "sparse_mode"), (dict(attention_mode=1), "attention_mode"),
                             (dict(layout_kv="PA_BSND"), "actual_seq_lengths_kv"),
                             (dict(layout_query="BSH"), "layout_query"),
                             (dict(block_table=torch.zeros(1, 1, dtype=torch.int32)), "block_table"),
                             (dict(query_rope=torch.randn(1, 2, 4, 2)), "key_rope"),
                             (dict(actual_seq_lengths_query=torch.tensor([3], dtype=torch.int32)),
                              "actual_seq_lengths_query")):
            with self.assertRaisesRegex(ValueError, said):
                sfa(q, key, key, idx, 0.3, **kwargs)
        with self.assertRaisesRegex(ValueError, "sparse_indices"):
            sfa(q, key, key, idx[:, :1], 0.3)
        # the first entry that selects no token of its batch, named
        with self.assertRaisesRegex(spattn.SpattnError, r"sparse_indices\[0, 0, 0, 0\] = 5: batch 0 has 5"):
            sfa(q, key, key, idx + 5, 0.3)  # token 5 of a 5-token batch
        bad = idx.clone()
        bad[0, 1, 0, 2] = 2  # tokens 8.. of it
        with self.assertRaisesRegex(spattn.SpattnError, r"sparse_indices\[0, 1, 0, 2\] = 2: .* blocks 0..1"):
            sfa(q, key, key, bad, 0.3, sparse_block_size=4)
        with self.assertRaisesRegex(spattn.SpattnError, "sparse_block_size"):
            sfa(q, key, key, idx, 0.3, sparse_block_size=0)
        # the same refusals with a gradient asked for (gradients: test_dsa_sfa_grad.py)
        with self.assertRaisesRegex(ValueError, "sparse_mode"):
            sfa(q.requires_grad_(), key, key, idx, 0.3, sparse_mode=1)

    @unittest.skipIf(onnx is None, "python3-onnx is not installed")
    def test_onnx_export_refused(self):
        class Attend(torch.nn.Module):
            def forward(self, q, k, idx):
                return spattn.npu_sparse_flash_attention(q, k, k, idx, 0.3)[0]

        args = (torch.randn(1, 2, 4, 8), torch.randn(1, 5, 1, 8), torch.zeros(1, 2, 1, 3, dtype=torch.int32))
        with self.assertRaisesRegex(RuntimeError, "npu_sparse_flash_attention has no ONNX operator"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(Attend(), args, io.BytesIO(), opset_version=13)


if __name__ == "__main__":
    unittest.main()
