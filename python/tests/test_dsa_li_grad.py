"""The gradients of npu_lightning_indexer (the native LightningIndexerGrad)
against torch.autograd on a float64 formulation written here from the
definition, in the caller's layouts: per query token t and key head n, the
scores of the keys its sparse_indices select,
    sparse_values[t, n, j] = sum_g w[t, h] * relu(q[t, h] . k[x_j, n])
(h = n G + g, x_j the forward's index j, -1: nothing), so that the gradient
of sparse_values reaches query, key and weights; the indices themselves
have none. Every dtype, BSND / TND queries and keys, sparse_mode 0 and 3,
N2 1 and 2, weights float32 or the query's dtype, leaves that are views of
a larger tensor; the gradient entries at -1 slots and at BSND padding rows
are NaN (never read). q and k are drawn on a grid of eighths, so that every
score is exact in every dtype and the library's ReLU'(s) = [s > 0] and
torch's agree at every key (s = 0 included). A paged key with the query's
and weights' gradients only, and its refusal when the key asks for one; the
backward operator on its own (a key given twice, int64 indices, an index the
query does not see refused); gradcheck in float64 away from ReLU's kink;
second derivatives refused; meta tensors, TorchScript, ONNX refusal."""
import io
import unittest
import warnings

import torch

import refs
import spattn
from spattn import _lib
from test_dsa_sfa import kv_layout

try:
    import onnx
except ImportError:  # python3-onnx: only the export test needs it
    onnx = None

FLOATS = refs.DTYPES + (torch.float64,)
HAS_GRAD = _lib.dsa_li_grad_ws is not None
NAN = float("nan")


def grid(shape, dtype, gen):
    """Multiples of 1/8 in [-1, 1]: every dot product of D <= 64 of them is
    exact in float32 (and in the reference's float64)."""
    return (torch.randint(-8, 9, shape, generator=gen, dtype=torch.int64).double() / 8).to(dtype)


def reference(query, key, weights, sparse_indices, block_table, counts, lengths, layout_query,
              layout_key):
    """sparse_values in the query's layout (0 at -1 slots and padding rows),
    a function of query, key and weights for torch.autograd."""
    lead, n1, d = tuple(query.shape[:-2]), query.shape[-2], query.shape[-1]
    n2, kc = key.shape[-2], sparse_indices.shape[-1]
    g = n1 // n2
    q = query.reshape(-1, n1, d)
    w = weights.reshape(-1, n1)
    idx = sparse_indices.reshape(-1, n2, kc)
    k_starts = refs.cumulative([0] + list(lengths))[:-1]

    def rows(x, b, pos):  # batch b's key rows pos: [len(pos), N2, D]
        if layout_key == "BSND":
            return x[b, pos]
        if layout_key == "TND":
            return x[k_starts[b] + pos]
        page = x.shape[1]
        return x[block_table[b, pos // page].long(), pos % page]

    out = [query.new_zeros((n2, kc))] * q.shape[0]
    start = 0
    for b, s_b in enumerate(counts):
        for i in range(s_b):
            t = b * lead[1] + i if layout_query == "BSND" else start + i
            heads = []
            for n in range(n2):
                slots = [j for j, x in enumerate(idx[t, n].tolist()) if x >= 0]
                row = query.new_zeros((kc,))
                if slots:
                    pos = idx[t, n, slots].long()
                    hs = slice(n * g, (n + 1) * g)
                    s = q[t, hs] @ rows(key, b, pos)[:, n].T                       # [G, slots]
                    score = (w[t, hs, None].to(s.dtype) * torch.relu(s)).sum(0)   # [slots]
                    row = row.index_put((torch.tensor(slots),), score)
                heads.append(row)
            out[t] = torch.stack(heads)
        start += s_b
    return torch.stack(out).reshape(lead + (n2, kc))


def seen(counts, lengths, mode):
    """The number of keys each query (in order) sees."""
    return [l_b if mode == 0 else max(0, min(l_b, l_b - s_b + i + 1))
            for s_b, l_b in zip(counts, lengths) for i in range(s_b)]


class Case:
    """One call's raw values; inputs() makes its leaves and arguments in a
    dtype (the native call's, or float64 for the reference)."""

    def __init__(self, gen, dtype, layout_query, layout_key, mode, n2, w_dtype, leaves,
                 counts=(3, 2), lengths=(37, 13), kc=16):
        b, s1, n1, self.d = len(counts), max(counts), 4 * n2, 16
        self.counts, self.lengths, self.kc = list(counts), list(lengths), kc
        kv_rows = [grid((n, n2, self.d + 3), dtype, gen) for n in self.lengths]  # 3 spare columns
        self.cache, table, lens = kv_layout(kv_rows, layout_key, gen)
        t = sum(self.counts)
        if layout_query == "BSND":  # the real queries in each batch's first rows, junk after
            self.query = grid((b, s1, n1, self.d + 2), dtype, gen)
            self.weights = refs.rand((b, s1, n1), w_dtype, gen=gen)
            seq_q = torch.tensor(self.counts, dtype=torch.int32)
        else:  # a spare row after the queries
            self.query = grid((t + 1, n1, self.d + 2), dtype, gen)
            self.weights = refs.rand((t + 1, n1), w_dtype, gen=gen)
            seq_q = torch.tensor(refs.cumulative(self.counts), dtype=torch.int32)
        self.grad = refs.rand(tuple(self.query.shape[:-2]) + (n2, kc), dtype, gen=gen)
        self.kwargs = dict(block_table=table, actual_seq_lengths_query=seq_q, actual_seq_lengths_key=lens,
                           layout_query=layout_query, layout_key=layout_key, sparse_count=kc,
                           sparse_mode=mode)
        self.leaves = leaves
        self.key_grad = layout_key != "PA_BSND"  # a paged key: the query's and weights' only

    def inputs(self, dtype, reference=False):
        """(leaves {name: tensor}, the call's query, key, weights): the
        native call's in dtype (weights in their own), or the reference's in
        float64."""
        d = self.d
        query, cache = self.query.to(dtype, copy=True), self.cache.to(dtype, copy=True)
        weights = self.weights.to(torch.float64 if reference else self.weights.dtype, copy=True)
        weights.requires_grad_()
        if self.leaves == "views":  # query and key views of larger leaves (strided)
            qleaf, kleaf = query.requires_grad_(), cache.requires_grad_(self.key_grad)
            return ({"query": qleaf, "key": kleaf, "weights": weights},
                    (qleaf[..., 1:d + 1], kleaf[..., 2:d + 2], weights))
        q = query[..., 1:d + 1].clone().requires_grad_()
        k = cache[..., 2:d + 2].clone().requires_grad_(self.key_grad)
        return {"query": q, "key": k, "weights": weights}, (q, k, weights)

    def run(self, dtype):
        leaves, (q, k, w) = self.inputs(dtype)
        idx, val = spattn.npu_lightning_indexer(q, k, w, return_value=True, **self.kwargs)
        grad = self.grad.to(dtype)
        grad[idx < 0] = NAN  # -1 slots and padding rows: never read
        val.backward(grad)
        return idx, val, leaves

    def reference(self, idx):
        leaves, (q, k, w) = self.inputs(torch.float64, reference=True)
        kw = self.kwargs
        out = reference(q, k, w, idx, kw["block_table"], self.counts, self.lengths, kw["layout_query"],
                        kw["layout_key"])
        out.backward(torch.where(idx < 0, torch.zeros(()), self.grad.double()))
        return out, leaves

    def named_grads(self, leaves):
        d = self.d
        named = {}
        for name, leaf in leaves.items():
            if not leaf.requires_grad:
                continue
            grad = leaf.grad
            if self.leaves == "views" and name == "query":
                self.outside = grad[..., :1], grad[..., d + 1:]
                grad = grad[..., 1:d + 1]
            elif self.leaves == "views" and name == "key":
                grad = grad[..., 2:d + 2]
            named["d" + name] = grad
        return named

    def query_rows(self):
        if self.kwargs["layout_query"] == "BSND":
            s1 = self.query.shape[1]
            return [b * s1 + i for b, n in enumerate(self.counts) for i in range(n)]
        return list(range(sum(self.counts)))


class LightningIndexerGrad(unittest.TestCase):
    def setUp(self):
        if not HAS_GRAD:
            self.skipTest("the loaded libspattn has no spa_dsa_lightning_indexer_grad")

    def check(self, case, dtype):
        idx, val, leaves = case.run(dtype)
        rows = case.query_rows()
        flat_idx = idx.reshape(-1, idx.shape[-2], idx.shape[-1])
        # the selection the gradient is taken at: each real query's keys it sees
        for r, n in zip(rows, seen(case.counts, case.lengths, case.kwargs["sparse_mode"])):
            x = flat_idx[r]
            self.assertTrue(((x == -1) | ((x >= 0) & (x < n))).all())
            self.assertEqual(int((x >= 0).sum(-1).min()), min(n, case.kc))
        ref_val, ref_leaves = case.reference(idx)
        valid = idx >= 0
        refs.assert_close(self, "sparse_values", val[valid], ref_val[valid], dtype)
        self.assertTrue(torch.isneginf(val[~valid]).all())
        got, want = case.named_grads(leaves), case.named_grads(ref_leaves)
        expected = {"dquery", "dweights"} | ({"dkey"} if case.key_grad else set())
        self.assertEqual(set(got), expected)
        self.assertEqual(set(want), expected)
        for name in sorted(got):
            leaf_dtype = leaves[name[1:]].dtype
            self.assertEqual(got[name].dtype, leaf_dtype, name)
            # float32 weights of a float64 query: dweights rounded to float32
            tol = torch.float32 if (dtype, leaf_dtype) == (torch.float64, torch.float32) else dtype
            refs.assert_close(self, name, got[name], want[name], tol)
        # BSND padding rows (and a TND query's spare row) get no gradient
        pad = [r for r in range(case.query.shape[:-2].numel()) if r not in rows]
        for name in ("dquery", "dweights"):
            flat = got[name].reshape((case.query.shape[:-2].numel(), -1))
            self.assertTrue((flat[pad] == 0).all(), "%s: padding rows 0" % name)
        if case.leaves == "views":  # the leaf's elements outside the view: 0
            self.assertTrue(all((x == 0).all() for x in case.outside))

    def test_layouts_modes_dtypes(self):
        _lib.poison_outputs = True  # new outputs NaN: every gradient element is written
        try:
            gen = torch.Generator().manual_seed(6101)
            i = 0
            for layout_query in ("BSND", "TND"):
                for layout_key in ("BSND", "TND"):
                    for dtype in FLOATS:
                        i += 1
                        mode = (0, 3)[i % 2]
                        n2 = (1, 2)[(i // 2) % 2]
                        w_dtype = (torch.float32, dtype)[(i // 4) % 2]
                        leaves = ("tensors", "views")[(i // 3) % 2]
                        with self.subTest(layout_query=layout_query, layout_key=layout_key, dtype=dtype,
                                          mode=mode, n2=n2, w_dtype=w_dtype, leaves=leaves):
                            self.check(Case(gen, dtype, layout_query, layout_key, mode, n2, w_dtype, leaves),
                                       dtype)
        finally:
            _lib.poison_outputs = False

    def test_queries_that_see_few_or_no_keys(self):
        """sparse_mode 3 with more queries than keys: the first sees none
        (every slot -1), the next one key; K above every count."""
        gen = torch.Generator().manual_seed(6102)
        for layout_query, layout_key, mode in (("TND", "TND", 3), ("BSND", "BSND", 3), ("TND", "BSND", 0)):
            with self.subTest(layout_query=layout_query, layout_key=layout_key, mode=mode):
                self.check(Case(gen, torch.float32, layout_query, layout_key, mode, 2, torch.float32,
                                "tensors", counts=(1, 3), lengths=(5, 2), kc=8), torch.float32)

    def test_paged_key_gives_the_query_and_weights_gradients(self):
        gen = torch.Generator().manual_seed(6103)
        for i, (layout_query, dtype) in enumerate((("BSND", torch.float32), ("TND", torch.bfloat16),
                                                    ("BSND", torch.float64), ("TND", torch.float16))):
            with self.subTest(layout_query=layout_query, dtype=dtype):
                self.check(Case(gen, dtype, layout_query, "PA_BSND", (0, 3)[i % 2], (1, 2)[i // 2],
                                (torch.float32, dtype)[i % 2], ("tensors", "views")[i // 2]), dtype)

    def test_paged_key_with_a_gradient_refused(self):
        gen = torch.Generator().manual_seed(6104)
        case = Case(gen, torch.float32, "BSND", "PA_BSND", 3, 2, torch.float32, "tensors")
        case.key_grad = True
        _, (q, k, w) = case.inputs(torch.float32)
        with self.assertRaisesRegex(ValueError, "key cannot have a gradient with layout_key=\"PA_BSND\""):
            spattn.npu_lightning_indexer(q, k, w, return_value=True, **case.kwargs)
        with torch.no_grad():  # no graph: no gradient asked for
            spattn.npu_lightning_indexer(q, k, w, return_value=True, **case.kwargs)
        # without values there is nothing to differentiate: no graph, no refusal
        idx, val = spattn.npu_lightning_indexer(q, k, w, **case.kwargs)
        self.assertEqual(tuple(val.shape), (0,))

    def test_outputs_as_without_gradient(self):
        """The forward under autograd returns what it returns without one, bit
        for bit; the indices have no gradient, the values one; without
        return_value nothing is recorded."""
        gen = torch.Generator().manual_seed(6105)
        case = Case(gen, torch.bfloat16, "BSND", "TND", 3, 2, torch.float32, "views")
        _, (q, k, w) = case.inputs(torch.bfloat16)
        with torch.no_grad():
            want = spattn.npu_lightning_indexer(q, k, w, return_value=True, **case.kwargs)
        idx, val = spattn.npu_lightning_indexer(q, k, w, return_value=True, **case.kwargs)
        self.assertTrue(val.requires_grad and not idx.requires_grad)
        self.assertTrue(torch.equal(idx, want[0]) and torch.equal(val, want[1]))
        idx, val = spattn.npu_lightning_indexer(q, k, w, **case.kwargs)
        self.assertTrue(torch.equal(idx, want[0]))
        self.assertFalse(val.requires_grad or idx.requires_grad)
        self.assertEqual(tuple(val.shape), (0,))

    def test_backward_operator(self):
        """Called on its own: a key given twice counts twice, int64 indices
        as int32, dy in float32 for a bfloat16 query; an index the query does
        not see is refused."""
        gen = torch.Generator().manual_seed(6106)
        bwd = torch.ops.spattn.npu_lightning_indexer_backward
        q, k = grid((1, 3, 4, 16), torch.float64, gen), grid((1, 6, 2, 16), torch.float64, gen)
        w = refs.rand((1, 3, 4), torch.float32, gen=gen).double()  # float32 weights for every dtype
        idx = torch.tensor([[[[3, 3, -1, 0], [1, -1, 1, 2]], [[4, 2, 4, 4], [0, 1, 2, 3]],
                             [[5, -1, -1, -1], [2, 2, 5, 0]]]], dtype=torch.int32)
        dy = refs.rand((1, 3, 2, 4), torch.float64, gen=gen)
        kw = dict(sparse_mode=3)
        lengths = [6]
        for dtype, idx_dtype, dy_dtype in ((torch.float64, torch.int32, torch.float64),
                                           (torch.float32, torch.int64, torch.float32),
                                           (torch.bfloat16, torch.int64, torch.float32)):
            with self.subTest(dtype=dtype, idx=idx_dtype, dy=dy_dtype):
                qq, kk = q.detach().requires_grad_(), k.detach().requires_grad_()
                ww = w.detach().requires_grad_()
                ref = reference(qq, kk, ww, idx, None, [3], lengths, "BSND", "BSND")
                ref.backward(torch.where(idx < 0, torch.zeros(()), dy))
                w_dtype = torch.float64 if dtype == torch.float64 else torch.float32
                got = bwd(dy.to(dy_dtype), q.to(dtype), k.to(dtype), w.to(w_dtype), idx.to(idx_dtype), **kw)
                self.assertEqual([t.dtype for t in got], [dtype, dtype, w_dtype])
                for name, g, r in zip(("dquery", "dkey", "dweights"), got, (qq.grad, kk.grad, ww.grad)):
                    refs.assert_close(self, name, g, r, dtype)
        # under sparse_mode 3 query 0 (position 3) sees keys 0..3: key 4 is refused
        with self.assertRaisesRegex(spattn.SpattnError, "sparse_indices"):
            bwd(dy, q, k, w, idx.masked_fill(idx == 3, 4), sparse_mode=3)
        with self.assertRaisesRegex(TypeError, "sparse_indices has dtype"):
            bwd(dy, q, k, w, idx.to(torch.int16))
        # shapes on meta tensors, a paged key's gradient empty
        meta = bwd(*(t.to("meta") for t in (dy, q, k, w, idx)))
        self.assertEqual([tuple(t.shape) for t in meta], [tuple(q.shape), tuple(k.shape), tuple(w.shape)])
        pool, table = k.reshape(3, 2, 2, 16), torch.tensor([[0, 1, 2]], dtype=torch.int32)
        lens = torch.tensor([6], dtype=torch.int32)
        got = bwd(dy, q, pool, w, idx, block_table=table, actual_seq_lengths_key=lens, layout_key="PA_BSND")
        meta = bwd(*(t.to("meta") for t in (dy, q, pool, w, idx)), block_table=table.to("meta"),
                   actual_seq_lengths_key=lens.to("meta"), layout_key="PA_BSND")
        self.assertEqual([tuple(t.shape) for t in got], [tuple(t.shape) for t in meta])
        self.assertEqual(tuple(got[1].shape), (0,))
        ref = bwd(dy, q, k, w, idx)
        self.assertTrue(torch.equal(got[0], ref[0]) and torch.equal(got[2], ref[2]))

    def test_gradcheck_float64(self):
        """Finite differences away from ReLU's kink: every score of a query
        against every key at least 0.05 from 0."""
        gen = torch.Generator().manual_seed(6107)

        def away_from_kink(q, k):  # q [T, N1, D], k [L, N2, D]: redraw queries too close to a kink
            g = q.shape[1] // k.shape[1]
            for _ in range(1000):
                s = torch.einsum("tnd,lnd->tnl", q, k.repeat_interleave(g, 1))
                bad = (s.abs() < 0.05).any(-1)
                if not bad.any():
                    return q
                q[bad] = refs.rand((int(bad.sum()), q.shape[-1]), torch.float64, gen=gen)
            raise AssertionError("no draw away from the kink")

        # BSND with a padding row, N2 2, causal, duplicates impossible (forward indices)
        k = refs.rand((2, 7, 2, 5), torch.float64, gen=gen)
        q = refs.rand((2, 3, 4, 5), torch.float64, gen=gen)
        q = away_from_kink(q.view(6, 4, 5), k.reshape(14, 2, 5)).view(2, 3, 4, 5)
        w = refs.rand((2, 3, 4), torch.float64, gen=gen)
        kw = dict(actual_seq_lengths_query=torch.tensor([3, 2], dtype=torch.int32),
                  actual_seq_lengths_key=torch.tensor([7, 5], dtype=torch.int32), sparse_count=4)
        ins = [t.requires_grad_() for t in (q, k, w)]

        def f(q, k, w):
            return spattn.npu_lightning_indexer(q, k, w, return_value=True, **kw)[1].masked_fill(idx < 0, 0)

        idx = spattn.npu_lightning_indexer(q, k, w, **kw)[0]
        self.assertTrue((idx < 0).any())
        self.assertTrue(torch.autograd.gradcheck(f, ins, eps=1e-6, atol=1e-6))
        # TND, N2 1, sparse_mode 0, weights of the query's dtype
        k = refs.rand((9, 1, 6), torch.float64, gen=gen)
        q = away_from_kink(refs.rand((4, 3, 6), torch.float64, gen=gen), k)
        w = refs.rand((4, 3), torch.float64, gen=gen)
        kw = dict(actual_seq_lengths_query=torch.tensor([1, 4], dtype=torch.int32),
                  actual_seq_lengths_key=torch.tensor([3, 9], dtype=torch.int32), layout_query="TND",
                  layout_key="TND", sparse_count=5, sparse_mode=0)
        ins = [t.requires_grad_() for t in (q, k, w)]
        idx = spattn.npu_lightning_indexer(q, k, w, **kw)[0]
        self.assertTrue(torch.autograd.gradcheck(f, ins, eps=1e-6, atol=1e-6))

    def test_second_derivative_refused(self):
        gen = torch.Generator().manual_seed(6108)
        q = refs.rand((1, 2, 4, 8), torch.float32, gen=gen).requires_grad_()
        k = refs.rand((1, 5, 1, 8), torch.float32, gen=gen).requires_grad_()
        w = refs.rand((1, 2, 4), torch.float32, gen=gen).requires_grad_()
        idx, val = spattn.npu_lightning_indexer(q, k, w, sparse_count=3, sparse_mode=0, return_value=True)
        with self.assertRaisesRegex(RuntimeError, "second derivatives are not implemented"):
            torch.autograd.grad(val.sum(), (q, k, w), create_graph=True, retain_graph=True)
        grads = torch.autograd.grad(val.sum(), (q, k, w))  # the first derivative still works
        self.assertTrue(all(torch.isfinite(g).all() for g in grads))
        # nor a forward-mode derivative
        with torch.autograd.forward_ad.dual_level():
            dual = torch.autograd.forward_ad.make_dual(q.detach(), torch.ones_like(q))
            with self.assertRaisesRegex(NotImplementedError, "jvp"):
                spattn.npu_lightning_indexer(dual, k.detach(), w.detach(), sparse_count=3, sparse_mode=0,
                                             return_value=True)
        # the backward operator itself takes no graph
        bwd = torch.ops.spattn.npu_lightning_indexer_backward
        with self.assertRaisesRegex(RuntimeError, "_backward is not differentiable"):
            bwd(torch.ones_like(val), q, k, w, idx, sparse_mode=0)

    def test_meta_graph_and_script(self):
        gen = torch.Generator().manual_seed(6109)
        q, k, w = (refs.rand(s, torch.float32, gen=gen) for s in ((2, 3, 4, 8), (2, 6, 2, 8), (2, 3, 4)))

        # the operator's whole graph on meta tensors (what FakeTensor tracing runs)
        def m(t):
            return t.detach().to("meta").requires_grad_()

        mq, mk, mw = m(q), m(k), m(w)
        val = spattn.npu_lightning_indexer(mq, mk, mw, sparse_count=3, return_value=True)[1]
        grads = torch.autograd.grad(val.sum(), (mq, mk, mw))
        self.assertEqual([(tuple(g.shape), g.is_meta) for g in grads],
                         [(tuple(t.shape), True) for t in (q, k, w)])

        @torch.jit.script
        def score(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return spattn.npu_lightning_indexer(q, k, w, sparse_count=3, sparse_mode=0, return_value=True)[1]

        ins = [t.clone().requires_grad_() for t in (q, k, w)]
        score(*ins).sum().backward()
        eager = [t.clone().requires_grad_() for t in (q, k, w)]
        val = spattn.npu_lightning_indexer(*eager, sparse_count=3, sparse_mode=0, return_value=True)[1]
        val.sum().backward()
        self.assertTrue(all(torch.equal(a.grad, b.grad) for a, b in zip(ins, eager)))

    @unittest.skipIf(onnx is None, "python3-onnx is not installed")
    def test_onnx_export_refused(self):
        class Backward(torch.nn.Module):
            def forward(self, dy, q, k, w, idx):
                return torch.ops.spattn.npu_lightning_indexer_backward(dy, q, k, w, idx)[0]

        args = (torch.randn(1, 2, 1, 3), torch.randn(1, 2, 4, 8), torch.randn(1, 5, 1, 8),
                torch.randn(1, 2, 4), torch.zeros(1, 2, 1, 3, dtype=torch.int32))
        with self.assertRaisesRegex(RuntimeError, "npu_lightning_indexer_backward has no ONNX operator"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(Backward(), args, io.BytesIO(), opset_version=13)


if __name__ == "__main__":
    unittest.main()
