"""spattn.nsa_compress_attention and spattn.sliding_window_attention alone,
against float64 formulations of their specs (docs/nsa_compress_attention.md,
docs/sliding_window_attention.md) written here: output, softmax statistics,
top-K indices and every gradient, every dtype, varlen, GQA, masks."""
import unittest

import torch

import refs
import spattn
from refs import cumulative
from spattn import _lib

FLT_MAX = refs.FLT_MAX
DTYPES = refs.DTYPES + (torch.float64,)
HAS_CATTN = _lib.nsa_cattn_ws is not None and _lib.nsa_cattn_grad_ws is not None
HAS_SWA = _lib.swa_ws is not None and _lib.swa_grad_ws is not None


def close(case, what, got, ref, dtype, floor=0.0):
    """refs.assert_close (float64: 1e-12), the absolute part scaled by
    max|ref| or floor, the size of the terms the result sums (a window of 1
    has dq = 0 exactly, left by f32 rounding of the dP - D it cancels)."""
    if dtype != torch.float64 and floor == 0.0:
        refs.assert_close(case, what, got, ref, dtype)
        return
    case.assertEqual(tuple(got.shape), tuple(ref.shape), what)
    case.assertFalse(torch.isnan(got).any().item(), "%s: NaN" % what)
    if ref.numel():
        atol, rtol = refs.TOL.get(dtype, (1e-12, 1e-12))
        ref, got = ref.detach().double(), got.detach().double()
        bound = atol * max(ref.abs().max().item(), floor) + rtol * ref.abs()
        case.assertTrue(bool(((got - ref).abs() <= bound).all()), "%s (%s)" % (what, dtype))


def cattn_ref(q, k, v, atten_mask, topk_mask, ends_q, ends_cmp, scale, sparse_mode, block,
              stride, sel_block, count):
    """NsaCompressAttention in float64: scaled scores, masked to -FLT_MAX
    (mask nonzero, or with sparse_mode 2 the causal rule c*d + l - 1 > s), the
    softmax, out = P v; importance P_slc(j) = sum over m < l'/d, n < l/d of
    the group-summed P(M (j+1) - m - n) (indices in [0, C)), forced blocks
    +FLT_MAX, the top K descending, ties to the lower block, -1 past the
    blocks. Returns out, max, sum, topk."""
    t1, n1, _ = q.shape
    n2, dv = k.shape[1], v.shape[2]
    g = n1 // n2
    big_m, big_n = sel_block // stride, block // stride
    outs = []
    mx = torch.full((t1, n1), -FLT_MAX, dtype=torch.float64)
    sm = torch.zeros((t1, n1), dtype=torch.float64)
    topk = torch.full((t1, n2, count), -1, dtype=torch.int64)
    qs = cs = 0
    for qe, ce in zip(ends_q, ends_cmp):
        sq, c = qe - qs, ce - cs
        if c == 0:
            outs.append(q.new_zeros((sq, n1, dv)) * q[qs:qe, :, :1].sum())  # keeps the graph
            qs, cs = qe, ce
            continue
        kx = k[cs:ce].repeat_interleave(g, 1)
        vx = v[cs:ce].repeat_interleave(g, 1)
        z = scale * torch.einsum("thd,chd->thc", q[qs:qe], kx)
        masked = torch.zeros((sq, c), dtype=torch.bool)
        if atten_mask is not None:
            masked |= atten_mask[:sq, :c].bool()
        if sparse_mode == 2:
            masked |= (torch.arange(c)[None, :] * stride + block - 1) > torch.arange(sq)[:, None]
        z = torch.where(masked[:, None, :], torch.full_like(z, -FLT_MAX), z)
        m = z.amax(-1, keepdim=True).detach()
        e = torch.exp(z - m)
        lsum = e.sum(-1, keepdim=True)
        p = e / lsum
        outs.append(torch.einsum("thc,chv->thv", p, vx))
        mx[qs:qe], sm[qs:qe] = m[..., 0].detach(), lsum[..., 0].detach()
        pc = p.detach().reshape(sq, n2, g, c).sum(2)  # [sq, n2, c]
        nsel = -(-c // big_m)
        imp = torch.zeros((sq, n2, nsel), dtype=torch.float64)
        for j in range(nsel):
            for mm in range(big_m):
                for nn in range(big_n):
                    i = big_m * (j + 1) - mm - nn
                    if 0 <= i < c:
                        imp[:, :, j] += pc[:, :, i]
        if topk_mask is not None:
            forced = topk_mask[:sq, :nsel].bool()[:, None, :].expand_as(imp)
            imp = imp.masked_fill(forced, FLT_MAX)
        for s in range(sq):
            for h in range(n2):
                ranked = sorted(range(nsel), key=lambda j: (-imp[s, h, j].item(), j))
                picks = ranked[:count]
                topk[qs + s, h, :len(picks)] = torch.tensor(picks)
        qs, cs = qe, ce
    return torch.cat(outs), mx, sm, topk


def swa_ref(q, k, v, ends, window, scale, window_type="keys"):
    """Query position t over keys lo .. t of its sequence (keys: lo = t-W+1;
    left: lo = t-left, -1 unbounded) -> out, max, sum."""
    n1 = q.shape[1]
    g = n1 // k.shape[1]
    left = window - 1 if window_type == "keys" else window
    outs, mxs, sms, start = [], [], [], 0
    for end in ends:
        n = end - start
        if n == 0:
            continue
        t = torch.arange(n)[:, None]
        key = torch.arange(n)[None, :]
        band = key <= t
        if left >= 0:
            band &= key >= t - left
        z = scale * torch.einsum("thd,shd->ths", q[start:end],
                                 k[start:end].repeat_interleave(g, 1))
        z = z.masked_fill(~band[:, None, :], float("-inf"))
        m = z.amax(-1, keepdim=True).detach()
        e = torch.exp(z - m)
        lsum = e.sum(-1, keepdim=True)
        outs.append(torch.einsum("ths,shv->thv", e / lsum, v[start:end].repeat_interleave(g, 1)))
        mxs.append(m[..., 0])
        sms.append(lsum[..., 0].detach())
        start = end
    return torch.cat(outs), torch.cat(mxs), torch.cat(sms)


@unittest.skipUnless(HAS_CATTN, "libspattn.so without spa_nsa_compress_attention")
class TestCompressAttention(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def check(self, dtype, n1, n2, d1, d2, block, stride, sel_block, count, qlens, clens,
              sparse_mode, masks, seed):
        gen = torch.Generator().manual_seed(seed)
        ends_q, ends_c = cumulative(qlens), cumulative(clens)
        q = refs.rand((ends_q[-1], n1, d1), dtype, -2, 2, gen=gen)
        k = refs.rand((ends_c[-1], n2, d1), dtype, -2, 2, gen=gen)
        v = refs.rand((ends_c[-1], n2, d2), dtype, gen=gen)
        am = tm = None
        if masks:
            am = torch.rand((max(qlens), max(clens)), generator=gen) < 0.3
            nsel = max(-(-c // (sel_block // stride)) for c in clens)
            tm = (torch.rand((max(qlens), nsel), generator=gen) < 0.1).to(torch.uint8)
        scale = d1 ** -0.5
        ours = [t.detach().requires_grad_() for t in (q, k, v)]
        r64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
        out, topk, mx, sm = spattn.nsa_compress_attention(
            *ours, scale, n1, block, stride, sel_block, count, topk_mask=tm, atten_mask=am,
            actual_seq_qlen=ends_q, actual_cmp_seq_kvlen=torch.tensor(ends_c),
            sparse_mode=sparse_mode)
        ref, rmx, rsm, rtopk = cattn_ref(*r64, am, tm, ends_q, ends_c, scale, sparse_mode, block,
                                         stride, sel_block, count)
        close(self, "attention_out", out, ref, dtype)
        stat = torch.float64 if dtype == torch.float64 else torch.float32
        self.assertEqual((mx.dtype, tuple(mx.shape)), (stat, (ends_q[-1], n1, 8)))
        self.assertTrue(bool((mx == mx[..., :1]).all()) and bool((sm == sm[..., :1]).all()))
        close(self, "softmax_max", mx[..., 0], rmx, stat)
        close(self, "softmax_sum", sm[..., 0], rsm, stat)
        self.assertTrue(torch.equal(topk.long(), rtopk), "topk_indices")
        grad = refs.rand(tuple(out.shape), dtype, gen=gen)
        out.backward(grad)
        ref.backward(grad.double())
        for name, a, r in zip(("dq", "dk", "dv"), ours, r64):
            close(self, name, a.grad, r.grad, dtype)

    def test_dtypes(self):
        for i, dtype in enumerate(DTYPES):
            with self.subTest(dtype=dtype):
                self.check(dtype, 4, 2, 32, 16, 32, 16, 64, 2, [20, 9], [12, 7], 1, True, 400 + i)

    def test_shapes_and_modes(self):
        """G 1 to 16, D2 > D1, causal rule (sparse_mode 2) with fla's block =
        stride = selection block, a batch without compressed keys, K past the
        blocks (-1 slots)."""
        cases = [(2, 2, 16, 16, 16, 16, 16, 3, [40, 33], [2, 2], 2, False),
                 (16, 1, 24, 40, 32, 16, 32, 4, [50], [5], 2, False),
                 (8, 2, 16, 16, 16, 16, 64, 2, [7, 30, 5], [9, 0, 16], 0, True),
                 (3, 1, 48, 16, 64, 32, 64, 5, [33], [6], 1, True)]
        for i, (n1, n2, d1, d2, l, d, ls, kc, ql, cl, mode, masks) in enumerate(cases):
            with self.subTest(n1=n1, n2=n2, l=l, d=d, sel=ls, mode=mode):
                self.check(torch.float32, n1, n2, d1, d2, l, d, ls, kc, ql, cl, mode, masks,
                           410 + i)


@unittest.skipUnless(HAS_SWA, "libspattn.so without spa_swa")
class TestSlidingWindow(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def check(self, dtype, n1, n2, d, dv, lengths, window, window_type, seed, cu_form=list):
        gen = torch.Generator().manual_seed(seed)
        ends = cumulative(lengths)
        q = refs.rand((ends[-1], n1, d), dtype, -2, 2, gen=gen)
        k = refs.rand((ends[-1], n2, d), dtype, -2, 2, gen=gen)
        v = refs.rand((ends[-1], n2, dv), dtype, gen=gen)
        ours = [t.detach().requires_grad_() for t in (q, k, v)]
        r64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
        scale = 0.2 if window_type == "left" else None
        out, mx, sm = spattn.sliding_window_attention(*ours, window, cu_form(ends), scale,
                                                      window_type, return_softmax=True)
        ref, rmx, rsm = swa_ref(*r64, ends, window, d ** -0.5 if scale is None else scale,
                                window_type)
        close(self, "out", out, ref, dtype)
        stat = torch.float64 if dtype == torch.float64 else torch.float32
        close(self, "softmax_max", mx, rmx, stat)
        close(self, "softmax_sum", sm, rsm, stat)
        grad = refs.rand(tuple(out.shape), dtype, gen=gen)
        out.backward(grad)
        ref.backward(grad.double())
        for name, a, r in zip(("dq", "dk", "dv"), ours, r64):
            close(self, name, a.grad, r.grad, dtype, floor=1.0)

    def test_dtypes(self):
        for i, dtype in enumerate(DTYPES):
            with self.subTest(dtype=dtype):
                self.check(dtype, 4, 2, 32, 16, [40, 0, 27], 9, "keys", 500 + i)

    def test_windows_and_shapes(self):
        """W 1, W past the sequence (plain causal), FlashAttention's left
        (unbounded -1 too), G 1 to 16, Dv > D, flash-attn's leading 0."""
        cases = [(2, 2, 16, 16, [30], 1, "keys", list),
                 (16, 1, 24, 40, [20, 45], 100, "keys", lambda e: torch.tensor([0] + e)),
                 (4, 1, 16, 16, [50, 3], 7, "left", list),
                 (3, 3, 48, 16, [33], -1, "left", list)]
        for i, (n1, n2, d, dv, lengths, w, wt, form) in enumerate(cases):
            with self.subTest(n1=n1, n2=n2, window=w, window_type=wt):
                self.check(torch.float32, n1, n2, d, dv, lengths, w, wt, 510 + i, form)


class TestMissingOps(unittest.TestCase):
    """A library built before the ops: the functions say which symbol is missing."""

    def test_refusal_names_the_op(self):
        q = torch.rand(4, 2, 8)
        if not HAS_SWA:
            with self.assertRaisesRegex(NotImplementedError, "spa_swa"):
                spattn.sliding_window_attention(q, q, q, 2, [4])
        if not HAS_CATTN:
            with self.assertRaisesRegex(NotImplementedError, "spa_nsa_compress_attention"):
                spattn.nsa_compress_attention(q, q, q, 0.5, 2, 16, 16, 16, 1,
                                              actual_seq_qlen=[4], actual_cmp_seq_kvlen=[4])
        if HAS_SWA and HAS_CATTN:
            self.skipTest("the library has both ops")


if __name__ == "__main__":
    unittest.main()
