"""The gradients of npu_sparse_flash_attention (the native
SparseFlashAttentionGrad) against torch.autograd on a float64 formulation
written here from the definition, in the caller's layouts: per query token
and key head the rows its slots select (slot x: tokens x S .. x S + S - 1 of
its batch, slot order, a slot given twice gathered twice, -1 nothing), those
it sees (sparse_mode 3: up to L - S_b + i; 0: all), z = scale * [q | q_rope]
. [k | k_rope], softmax, P V; BSND padding rows and rows no query sees get
no gradient. Every dtype, BSND / TND queries and keys, with and without
rope, value separate, the key itself or a view of its first Dv elements
(MLA-absorb: the key gets both gradients), leaves that are separate tensors
or views of one cache; a paged key with the queries' gradients only, and its
refusal when the key asks for one; gradcheck in float64; second derivatives
refused."""
import unittest

import torch

import refs
import spattn
from spattn import _lib
from test_dsa_sfa import kv_layout, random_indices

FLOATS = refs.DTYPES + (torch.float64,)
HAS_GRAD = _lib.dsa_sfa_grad_ws is not None


def reference(query, key, value, sparse_indices, scale, query_rope, key_rope, block_table, counts,
              lengths, layout_query, layout_kv, sbs, mode):
    """attention_out in the query's layout (padding rows 0), a function of
    query, key, value, query_rope and key_rope for torch.autograd: each
    query's selected rows gathered (repeats included), then the softmax."""
    lead, n1, d = tuple(query.shape[:-2]), query.shape[-2], query.shape[-1]
    n2, dv = key.shape[-2], value.shape[-1]
    g = n1 // n2
    q = query.reshape(-1, n1, d)
    qr = query_rope.reshape(-1, n1, query_rope.shape[-1]) if query_rope is not None else None
    idx = sparse_indices.reshape(-1, n2, sparse_indices.shape[-1])
    k_starts = refs.cumulative([0] + list(lengths))[:-1]

    def rows(x, b, pos):  # batch b's key rows pos: [len(pos), N2, F]
        if layout_kv == "BSND":
            return x[b, pos]
        if layout_kv == "TND":
            return x[k_starts[b] + pos]
        page = x.shape[1]
        return x[block_table[b, pos // page].long(), pos % page]

    out = [query.new_zeros((n1, dv)).to(value.dtype)] * q.shape[0]
    start = 0
    for b, (s_b, l_b) in enumerate(zip(counts, lengths)):
        for i in range(s_b):
            t = b * lead[1] + i if layout_query == "BSND" else start + i
            seen = l_b if mode == 0 else max(0, min(l_b, l_b - s_b + i + 1))
            heads = []
            for n in range(n2):
                hs = slice(n * g, (n + 1) * g)
                tokens = [p for x in idx[t, n].tolist() if x >= 0
                          for p in range(x * sbs, (x + 1) * sbs) if p < seen]
                if not tokens:
                    heads.append(value.new_zeros((g, dv)))
                    continue
                pos = torch.tensor(tokens, dtype=torch.long)
                z = q[t, hs] @ rows(key, b, pos)[:, n].T
                if qr is not None:
                    z = z + qr[t, hs] @ rows(key_rope, b, pos)[:, n].T
                z = scale * z
                e = torch.exp(z - z.max(-1, keepdim=True).values)
                heads.append((e / e.sum(-1, keepdim=True)) @ rows(value, b, pos)[:, n])
            out[t] = torch.cat(heads)
        start += s_b
    return torch.stack(out).reshape(lead + (n1, dv))


class Case:
    """One call's raw values; inputs() makes its leaves and arguments in a
    dtype (the native call's, or float64 for the reference)."""

    def __init__(self, gen, dtype, layout_query, layout_kv, rope, value_kind, sbs, mode, n2,
                 leaves):
        b, s1, n1, self.d, self.dr = 2, 3, 4, 16, (8 if rope else 0)
        self.dv = {"separate": 8, "key": self.d, "key_view": 12, "key_detached": 12}[value_kind]
        self.lengths, self.counts = [37, 20], [3, 2]
        extra = self.dv if value_kind == "separate" else 0
        kv_rows = [refs.rand((n, n2, self.d + self.dr + extra), dtype, gen=gen) for n in self.lengths]
        self.cache, table, lens = kv_layout(kv_rows, layout_kv, gen)
        t = sum(self.counts)
        blocks = [(n + sbs - 1) // sbs for n, c in zip(self.lengths, self.counts) for _ in range(c)]
        qall = refs.rand((t, n1, self.d + self.dr), dtype, gen=gen)
        idx = random_indices(t, n2, 6, blocks, gen)
        idx[0, 0, 1] = idx[0, 0, 0] = max(int(idx[0, 0, 0]), 0)  # a slot given twice
        if layout_query == "BSND":  # the real queries in each batch's first rows, junk after
            self.query = refs.rand((b, s1, n1, self.d + self.dr), dtype, gen=gen)
            self.idx = torch.full((b, s1, n2, 6), 10**6, dtype=torch.int32)  # never read
            real = [bi * s1 + i for bi in range(b) for i in range(self.counts[bi])]
            self.query.view(b * s1, n1, -1)[real] = qall
            self.idx.view(b * s1, n2, 6)[real] = idx
            seq_q = torch.tensor(self.counts, dtype=torch.int32)
        else:  # a spare row after the queries
            self.query = torch.cat([qall, refs.rand((1, n1, self.d + self.dr), dtype, gen=gen)])
            self.idx = torch.cat([idx, torch.full((1, n2, 6), 10**6, dtype=torch.int32)])
            seq_q = torch.tensor(refs.cumulative(self.counts), dtype=torch.int32)
        self.grad = refs.rand(tuple(self.query.shape[:-1]) + (self.dv,), dtype, gen=gen)
        self.scale = 1.0 / (self.d + self.dr) ** 0.5
        self.kwargs = dict(block_table=table, actual_seq_lengths_query=seq_q, actual_seq_lengths_kv=lens,
                           sparse_block_size=sbs, layout_query=layout_query, layout_kv=layout_kv,
                           sparse_mode=mode, attention_mode=0 if value_kind == "separate" else 2)
        self.rope, self.value_kind, self.leaves = rope, value_kind, leaves
        self.key_grad = layout_kv != "PA_BSND"  # a paged key: the queries' gradients only

    def inputs(self, dtype):
        """(leaves {name: tensor}, the call's tensors query, key, value,
        query_rope, key_rope)."""
        d, dr = self.d, self.dr
        query, cache = self.query.to(dtype, copy=True), self.cache.to(dtype, copy=True)
        if self.leaves == "cache":  # every input a view of one leaf (strided)
            qleaf = query.requires_grad_()
            kleaf = cache.requires_grad_(self.key_grad)
            leaves = {"query": qleaf, "cache": kleaf}
            q, qr = qleaf[..., :d], (qleaf[..., d:] if self.rope else None)
            k, kr = kleaf[..., :d], (kleaf[..., d:d + dr] if self.rope else None)
            v = kleaf[..., d + dr:] if self.value_kind == "separate" else None
        else:  # each input its own leaf
            q = query[..., :d].clone().requires_grad_()
            k = cache[..., :d].clone().requires_grad_(self.key_grad)
            leaves = {"query": q, "key": k}
            qr = kr = v = None
            if self.rope:
                qr = query[..., d:].clone().requires_grad_()
                kr = cache[..., d:d + dr].clone().requires_grad_(self.key_grad)
                leaves.update(query_rope=qr, key_rope=kr)
            if self.value_kind == "separate":
                v = cache[..., d + dr:].clone().requires_grad_(self.key_grad)
                leaves["value"] = v
        if self.value_kind == "key":
            v = k
        elif self.value_kind == "key_view":
            v = k[..., :self.dv]
        elif self.value_kind == "key_detached":  # the key's memory, outside the graph: no dv
            v = k.detach()[..., :self.dv]
        return leaves, (q, k, v, qr, kr)

    def run(self, dtype, return_softmax_lse=False):
        leaves, (q, k, v, qr, kr) = self.inputs(dtype)
        out, _, _ = spattn.npu_sparse_flash_attention(q, k, v, self.idx, self.scale, query_rope=qr,
                                                      key_rope=kr, return_softmax_lse=return_softmax_lse,
                                                      **self.kwargs)
        out.backward(self.grad.to(dtype))
        return out, leaves

    def reference(self):
        leaves, (q, k, v, qr, kr) = self.inputs(torch.float64)
        kw = self.kwargs
        out = reference(q, k, v, self.idx, self.scale, qr, kr, kw["block_table"], self.counts,
                        self.lengths, kw["layout_query"], kw["layout_kv"], kw["sparse_block_size"],
                        kw["sparse_mode"])
        out.backward(self.grad.double())
        return out, leaves

    def named_grads(self, leaves):
        """Each gradient by the input it belongs to (slices of a cache leaf)."""
        d, dr = self.d, self.dr
        named = {}
        for name, leaf in leaves.items():
            if not leaf.requires_grad:
                continue
            grad = leaf.grad
            if name == "query" and self.leaves == "cache":
                named["dq"] = grad[..., :d]
                if self.rope:
                    named["dq_rope"] = grad[..., d:]
            elif name == "cache":
                named["dk"] = grad[..., :d]  # with dv for MLA-absorb (value in the graph)
                if self.rope:
                    named["dk_rope"] = grad[..., d:d + dr]
                if self.value_kind == "separate":
                    named["dv"] = grad[..., d + dr:]
            else:
                named[{"query": "dq", "key": "dk", "value": "dv", "query_rope": "dq_rope",
                       "key_rope": "dk_rope"}[name]] = grad
        return named


class SparseFlashAttentionGrad(unittest.TestCase):
    def setUp(self):
        if not HAS_GRAD:
            self.skipTest("the loaded libspattn has no spa_dsa_sparse_attention_grad")

    def check(self, case, dtype):
        out, leaves = case.run(dtype)
        ref_out, ref_leaves = case.reference()
        refs.assert_close(self, "attention_out", out, ref_out, dtype)
        got, want = case.named_grads(leaves), case.named_grads(ref_leaves)
        self.assertEqual(sorted(got), sorted(want))
        expected = {"dq"} | ({"dq_rope"} if case.rope else set())
        if case.key_grad:
            expected |= {"dk"} | ({"dk_rope"} if case.rope else set())
            expected |= {"dv"} if case.value_kind == "separate" else set()
        self.assertEqual(set(got), expected)
        for name in sorted(got):
            self.assertEqual(got[name].dtype, dtype, name)
            refs.assert_close(self, name, got[name], want[name], dtype)
        # BSND padding rows (and a TND query's spare row) get no gradient
        pad = [r for r in range(case.query.shape[:-2].numel())
               if r not in self.query_rows(case)]
        for name in ("dq", "dq_rope"):
            if name in got:
                flat = got[name].reshape((-1,) + tuple(got[name].shape[-2:]))
                self.assertTrue((flat[pad] == 0).all(), "%s: padding rows 0" % name)

    @staticmethod
    def query_rows(case):
        if case.kwargs["layout_query"] == "BSND":
            s1 = case.query.shape[1]
            return [b * s1 + i for b, n in enumerate(case.counts) for i in range(n)]
        return list(range(sum(case.counts)))

    def test_layouts_rope_value_block_dtypes(self):
        _lib.poison_outputs = True  # new outputs NaN: every gradient element is written
        try:
            gen = torch.Generator().manual_seed(5201)
            i = 0
            for layout_query in ("BSND", "TND"):
                for layout_kv in ("BSND", "TND"):
                    for dtype in FLOATS:
                        for value_kind in ("separate", "key", "key_view"):
                            i += 1
                            rope = i % 2 == 0
                            sbs = (1, 4)[(i // 2) % 2]
                            mode = 0 if i % 3 == 0 else 3
                            n2 = 1 if i % 4 == 1 else 2
                            leaves = ("tensors", "cache")[(i // 3) % 2]
                            with self.subTest(layout_query=layout_query, layout_kv=layout_kv, dtype=dtype,
                                              value=value_kind, rope=rope, sbs=sbs, mode=mode, n2=n2,
                                              leaves=leaves):
                                self.check(Case(gen, dtype, layout_query, layout_kv, rope, value_kind, sbs,
                                                mode, n2, leaves), dtype)
        finally:
            _lib.poison_outputs = False

    def test_every_combination_in_float32(self):
        """rope x value x sbs x mode, each in one layout pair."""
        gen = torch.Generator().manual_seed(5202)
        layouts = (("BSND", "BSND"), ("TND", "TND"), ("BSND", "TND"), ("TND", "BSND"))
        i = 0
        for rope in (False, True):
            for value_kind in ("separate", "key", "key_view", "key_detached"):
                for sbs in (1, 3):
                    for mode in (0, 3):
                        i += 1
                        layout_query, layout_kv = layouts[i % 4]
                        leaves = ("tensors", "cache")[i % 2]
                        with self.subTest(rope=rope, value=value_kind, sbs=sbs, mode=mode,
                                          layout_query=layout_query, layout_kv=layout_kv):
                            self.check(Case(gen, torch.float32, layout_query, layout_kv, rope, value_kind,
                                            sbs, mode, 2, leaves), torch.float32)

    def test_paged_key_gives_the_queries_gradients(self):
        gen = torch.Generator().manual_seed(5203)
        for i, (layout_query, dtype, value_kind) in enumerate(
                (("BSND", torch.float32, "separate"), ("TND", torch.bfloat16, "key"),
                 ("BSND", torch.float64, "key_view"), ("TND", torch.float16, "separate"))):
            with self.subTest(layout_query=layout_query, dtype=dtype, value=value_kind):
                self.check(Case(gen, dtype, layout_query, "PA_BSND", i % 2 == 0, value_kind, (1, 4)[i % 2],
                                (0, 3)[i // 2], 2, ("tensors", "cache")[i % 2]), dtype)

    def test_paged_key_with_a_gradient_refused(self):
        gen = torch.Generator().manual_seed(5204)
        case = Case(gen, torch.float32, "BSND", "PA_BSND", True, "separate", 1, 3, 2, "tensors")
        case.key_grad = True
        _, (q, k, v, qr, kr) = case.inputs(torch.float32)
        for args, said in (((q, k, v.detach(), qr, kr.detach()), "key cannot"),
                           ((q, k.detach(), v, qr, kr.detach()), "value cannot"),
                           ((q, k, v, qr, kr), "key and value and key_rope cannot")):
            with self.assertRaisesRegex(ValueError, "%s have a gradient with layout_kv=\"PA_BSND\"" % said):
                spattn.npu_sparse_flash_attention(*args[:3], case.idx, case.scale, query_rope=args[3],
                                                  key_rope=args[4], **case.kwargs)
        with torch.no_grad():  # no graph: no gradient asked for
            spattn.npu_sparse_flash_attention(q, k, v, case.idx, case.scale, query_rope=qr, key_rope=kr,
                                              **case.kwargs)

    def test_outputs_and_statistics_as_without_gradient(self):
        """The statistics the forward computes for the grad are the ones
        return_softmax_lse returns; attention_out is bit for bit the same."""
        gen = torch.Generator().manual_seed(5205)
        case = Case(gen, torch.bfloat16, "BSND", "BSND", True, "key_view", 4, 3, 2, "cache")
        _, (q, k, v, qr, kr) = case.inputs(torch.bfloat16)
        with torch.no_grad():
            want = spattn.npu_sparse_flash_attention(q, k, v, case.idx, case.scale, query_rope=qr,
                                                     key_rope=kr, return_softmax_lse=True, **case.kwargs)
        for lse in (False, True):
            got = spattn.npu_sparse_flash_attention(q, k, v, case.idx, case.scale, query_rope=qr, key_rope=kr,
                                                    return_softmax_lse=lse, **case.kwargs)
            self.assertTrue(got[0].requires_grad and not got[1].requires_grad and not got[2].requires_grad)
            self.assertTrue(torch.equal(got[0], want[0]))
            if lse:
                self.assertTrue(torch.equal(got[1], want[1]) and torch.equal(got[2], want[2]))
            else:
                self.assertEqual((tuple(got[1].shape), tuple(got[2].shape)), ((0,), (0,)))

    def test_gradcheck_float64(self):
        gen = torch.Generator().manual_seed(5206)

        def ins(*shapes):
            return [refs.rand(s, torch.float64, gen=gen).requires_grad_() for s in shapes]

        # BSND with a padding row, rope, a separate value, blocks of 2, causal; int64 indices
        q, k, v, qr, kr = ins((2, 2, 4, 6), (2, 7, 2, 6), (2, 7, 2, 5), (2, 2, 4, 3), (2, 7, 2, 3))
        idx = torch.tensor([[[[0, 2, -1], [1, 1, 3]], [[2, 0, 1], [-1, 3, 0]]],
                            [[[0, 1, -1], [1, 0, -1]], [[9, 9, 9], [9, 9, 9]]]])
        kw = dict(actual_seq_lengths_query=torch.tensor([2, 1], dtype=torch.int32),
                  actual_seq_lengths_kv=torch.tensor([7, 4], dtype=torch.int32), sparse_block_size=2)

        def f(q, k, v, qr, kr):
            return spattn.npu_sparse_flash_attention(q, k, v, idx, 0.4, query_rope=qr, key_rope=kr, **kw)[0]

        self.assertTrue(torch.autograd.gradcheck(f, (q, k, v, qr, kr), eps=1e-6, atol=1e-5))
        # TND, MLA-absorb: the key is the value (the same tensor, and its first Dv elements)
        q, k = ins((3, 2, 6), (9, 1, 6))
        idx = torch.tensor([[[1, 0, 4]], [[2, 2, -1]], [[0, 3, 1]]], dtype=torch.int32)
        kw = dict(actual_seq_lengths_query=torch.tensor([2, 3], dtype=torch.int32),
                  actual_seq_lengths_kv=torch.tensor([5, 9], dtype=torch.int32), layout_query="TND",
                  layout_kv="TND", sparse_mode=0, attention_mode=2)
        for dv in (6, 4):
            self.assertTrue(torch.autograd.gradcheck(
                lambda q, k: spattn.npu_sparse_flash_attention(q, k, k[..., :dv], idx, 0.4, **kw)[0], (q, k),
                eps=1e-6, atol=1e-5))
        self.assertTrue(torch.autograd.gradcheck(
            lambda q, k: spattn.npu_sparse_flash_attention(q, k, k, idx, 0.4, **kw)[0], (q, k),
            eps=1e-6, atol=1e-5))

    def test_second_derivative_refused(self):
        q = torch.randn(1, 2, 4, 8, requires_grad=True)
        k = torch.randn(1, 5, 1, 8, requires_grad=True)
        idx = torch.tensor([[[[0, 3, -1]], [[4, 1, 2]]]], dtype=torch.int32)
        out = spattn.npu_sparse_flash_attention(q, k, k, idx, 0.3, sparse_mode=0)[0]
        with self.assertRaisesRegex(RuntimeError, "second derivatives are not implemented"):
            torch.autograd.grad(out.sum(), (q, k), create_graph=True, retain_graph=True)
        dq, dk = torch.autograd.grad(out.sum(), (q, k))  # the first derivative still works
        self.assertTrue(torch.isfinite(dq).all() and torch.isfinite(dk).all())
        # nor a forward-mode derivative
        with torch.autograd.forward_ad.dual_level():
            dual = torch.autograd.forward_ad.make_dual(q.detach(), torch.ones_like(q))
            with self.assertRaisesRegex(NotImplementedError, "jvp"):
                spattn.npu_sparse_flash_attention(dual, k.detach(), k.detach(), idx, 0.3, sparse_mode=0)
        # the backward operator itself takes no graph
        with torch.no_grad():
            o, mx, sm = spattn.npu_sparse_flash_attention(q, k, k, idx, 0.3, sparse_mode=0,
                                                          return_softmax_lse=True)
        bwd = torch.ops.spattn.npu_sparse_flash_attention_backward
        with self.assertRaisesRegex(RuntimeError, "_backward is not differentiable"):
            bwd(torch.ones_like(o), q, k, k, idx, 0.3, o, mx, sm, sparse_mode=0)

    def test_backward_operator_on_meta_and_script(self):
        gen = torch.Generator().manual_seed(5207)
        q, k, v = (refs.rand(s, torch.float32, gen=gen) for s in ((2, 3, 4, 8), (2, 6, 2, 8), (2, 6, 2, 5)))
        qr, kr = (refs.rand(s, torch.float32, gen=gen) for s in ((2, 3, 4, 2), (2, 6, 2, 2)))
        idx = torch.randint(0, 6, (2, 3, 2, 3), generator=gen, dtype=torch.int32)
        bwd = torch.ops.spattn.npu_sparse_flash_attention_backward
        for value, rope, merge in ((v, True, False), (k, False, True), (k[..., :5], False, True)):
            kw = dict(query_rope=qr, key_rope=kr) if rope else {}
            o, mx, sm = spattn.npu_sparse_flash_attention(q, k, value, idx, 0.3, return_softmax_lse=True,
                                                          **kw)
            args = (torch.ones_like(o), q, k, value, idx, 0.3, o, mx, sm)
            got = bwd(*args, merge_value=merge, **kw)
            meta = bwd(*[a.to("meta") if isinstance(a, torch.Tensor) else a for a in args], merge_value=merge,
                       **{n: t.to("meta") for n, t in kw.items()})
            self.assertEqual([(tuple(t.shape), t.dtype) for t in got],
                             [(tuple(t.shape), t.dtype) for t in meta])
            self.assertEqual(tuple(got[2].shape), (0,) if merge else tuple(value.shape))
            self.assertEqual(tuple(got[4].shape), tuple(kr.shape) if rope else (0,))

        # the operator's whole graph on meta tensors (what FakeTensor tracing runs)
        def m(t):
            return t.detach().to("meta").requires_grad_(t.is_floating_point())

        mq, mk, mv, midx = m(q), m(k), m(v), idx.to("meta")
        for value in (mv, mk, mk[..., :5]):
            out = spattn.npu_sparse_flash_attention(mq, mk, value, midx, 0.3)[0]
            grads = torch.autograd.grad(out.sum(), (mq, mk) + ((mv,) if value is mv else ()))
            self.assertEqual([(tuple(g.shape), g.is_meta) for g in grads],
                             [(tuple(t.shape), True) for t in (q, k, v)][:len(grads)])

        @torch.jit.script
        def attend(q: torch.Tensor, k: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
            return spattn.npu_sparse_flash_attention(q, k, k, idx, 0.25, sparse_mode=0, attention_mode=2)[0]

        qq, kk = q.clone().requires_grad_(), k.clone().requires_grad_()
        attend(qq, kk, idx).sum().backward()
        q2, k2 = q.clone().requires_grad_(), k.clone().requires_grad_()
        spattn.npu_sparse_flash_attention(q2, k2, k2, idx, 0.25, sparse_mode=0)[0].sum().backward()
        self.assertTrue(torch.equal(qq.grad, q2.grad) and torch.equal(kk.grad, k2.grad))


if __name__ == "__main__":
    unittest.main()
