"""spattn.parallel_nsa (fla's NSA layer) against the float64 formulation of
fla's semantics (nsa_layer_ref.py): output and the gradients of q, k, v and
the three gates, varlen and batched, head-first, G 1 to 16, windows, per-token
block counts, sequences that are not whole blocks; its block selection on
hand-worked cases; its refusals."""
import unittest
import warnings

import torch

import refs
import spattn
from nsa_layer_ref import nsa_layer_ref, select_blocks as ref_select_blocks
from nsa_layer_ref import compressed_attention as ref_compressed_attention
from spattn import _lib
from spattn.attention import Compression, compressed_branch

HAS_CATTN = _lib.nsa_cattn_ws is not None and _lib.nsa_cattn_grad_ws is not None
HAS_SWA = _lib.swa_ws is not None and _lib.swa_grad_ws is not None


def close(case, what, got, ref, dtype):
    """refs.assert_close, and 1e-12 of max|ref| for float64 (sums in another order)."""
    if dtype != torch.float64:
        refs.assert_close(case, what, got, ref, dtype)
        return
    case.assertEqual(tuple(got.shape), tuple(ref.shape), what)
    err = (got.detach() - ref.detach()).abs().max().item() if ref.numel() else 0.0
    bound = 1e-12 * max(ref.detach().abs().max().item() if ref.numel() else 0.0, 1.0)
    case.assertLessEqual(err, bound, "%s (float64)" % what)


def layer_inputs(gen, dtype, b, t, hq, h, dk, dv, head_first=False):
    q = refs.rand((b, t, hq, dk), dtype, gen=gen)
    k = refs.rand((b, t, h, dk), dtype, gen=gen)
    v = refs.rand((b, t, h, dv), dtype, gen=gen)
    gates = [refs.rand((b, t, hq), dtype, 0.0, 1.0, gen=gen) for _ in range(3)]
    if head_first:
        q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        gates = [g.transpose(1, 2).contiguous() for g in gates]
    return [q, k, v] + gates


def run_both(case, dtype, inputs, kwargs, uses=(True, True, True)):
    """parallel_nsa on inputs (dtype) and the reference on their float64
    values; compares the output and every gradient. uses: which gates
    (cmp, slc, swa) the call passes (None for the others)."""
    ours = [x.detach().requires_grad_() for x in inputs]
    ref = [x.detach().double().requires_grad_() for x in inputs]

    def gates(xs):
        return [g if used else None for g, used in zip(xs[3:], uses)]

    out = spattn.parallel_nsa(*ours[:3], *gates(ours), **kwargs)
    exp, _ = nsa_layer_ref(*ref[:3], *gates(ref), **kwargs)
    close(case, "output", out, exp, dtype)
    grad = refs.rand(tuple(out.shape), dtype, gen=torch.Generator().manual_seed(5))
    out.backward(grad)
    exp.backward(grad.double())
    for name, a, r in zip(("dq", "dk", "dv", "dg_cmp", "dg_slc", "dg_swa"), ours, ref):
        if r.grad is None:
            case.assertIsNone(a.grad, name)
        else:
            close(case, name, a.grad, r.grad, dtype)


def random_indices(gen, b, t, h, s, block):
    """Random blocks with -1 slots, duplicates, later and past-the-end blocks."""
    nb = -(-t // block)
    idx = torch.randint(-1, nb + 2, (b, t, h, s), generator=gen)
    idx[0, -1, 0, 0] = 2**32 + 1  # past everything, yet 1 in int32: selects nothing
    return idx


@unittest.skipUnless(HAS_CATTN, "libspattn.so without spa_nsa_compress_attention")
class TestSelection(unittest.TestCase):
    """The block selection from the compressed attention: fla's importance
    (the current block first, later blocks never), descending, ties to the
    lower block, -1 padded."""

    def setUp(self):
        torch.set_num_threads(2)

    def hand_case(self, scores, count, token):
        """One kv head, G = 2, block 16: every key of block c is scores[c] e0,
        so compressed key c scores scores[c] for every query (q = e0, scale 1)."""
        block, g, dk = 16, 2, 4
        n = block * len(scores) + 5
        q = torch.zeros((n, g, dk))
        q[:, :, 0] = 1
        k = torch.zeros((n, 1, dk))
        k[:block * len(scores), 0, 0] = torch.tensor(scores).repeat_interleave(block)
        v = torch.rand((n, 1, dk), generator=torch.Generator().manual_seed(3))
        _, _, slots = compressed_branch(q, k, v, Compression(block, 1, q.dtype), [(0, n)], 1.0, count)
        return slots[token, 0].tolist()

    def test_hand_worked(self):
        # increasing scores: the current block, then the newest past blocks
        self.assertEqual(self.hand_case([0.0, 1.0, 2.0, 3.0, 4.0], 3, 4 * 16 + 3), [4, 3, 2])
        # equal scores: past blocks tie, the lower ones first
        self.assertEqual(self.hand_case([0.5] * 5, 3, 4 * 16 + 3), [4, 0, 1])
        # the first block: only the current one, -1 padded
        self.assertEqual(self.hand_case([0.5] * 5, 3, 5), [0, -1, -1])
        # the last token of block 2 sees block 2 compressed, yet it is the
        # current block (first); block 3, complete, is later: never selected
        self.assertEqual(self.hand_case([3.0, 2.0, 1.0, 9.0], 4, 2 * 16 + 15), [2, 0, 1, -1])
        # a past block of probability 1 in both heads reaches G, as the
        # current block: the current one still ranks first
        self.assertEqual(self.hand_case([0.0, 1000.0, 0.0], 2, 2 * 16 + 1), [2, 1])

    def test_against_reference(self):
        gen = torch.Generator().manual_seed(211)
        block, hq, h, dk, count = 16, 4, 2, 8, 3
        ends = refs.cumulative([70, 5, 48, 33])
        seqs = list(zip([0] + ends[:-1], ends))
        q = refs.rand((ends[-1], hq, dk), torch.float64, -2, 2, gen=gen)
        k = refs.rand((ends[-1], h, dk), torch.float64, -2, 2, gen=gen)
        _, _, got = compressed_branch(q, k, k, Compression(block, h, q.dtype), seqs, 0.7, count)
        expected = []
        for s, e in seqs:
            _, p = ref_compressed_attention(q[s:e], k[s:e], k[s:e], block, 0.7)
            expected.append(ref_select_blocks(p, e - s, block, h, count))
        self.assertTrue(torch.equal(got.long(), torch.cat(expected)))


class TestGivenIndices(unittest.TestCase):
    """g_cmp None: the caller's block_indices, through nsa_selected_attention."""

    def setUp(self):
        torch.set_num_threads(2)

    def test_shapes(self):
        gen = torch.Generator().manual_seed(212)
        cases = [  # b, t, hq, h, dk, dv, block, s, counts, head_first, cu
            (2, 70, 4, 2, 16, 8, 16, 3, "int", False, None),
            (1, 64, 16, 1, 32, 32, 16, 4, "tensor", False, None),
            (1, 90, 2, 2, 24, 40, 16, 2, "int", True, None),
            (1, 100, 4, 1, 16, 16, 32, 3, "tensor", False, [0, 40, 41, 100]),
        ]
        for dtype in (torch.float32, torch.float64):
            for b, t, hq, h, dk, dv, block, s, counts, head_first, cu in cases:
                with self.subTest(dtype=dtype, t=t, hq=hq, h=h, counts=counts,
                                  head_first=head_first, cu=cu):
                    inputs = layer_inputs(gen, dtype, b, t, hq, h, dk, dv, head_first)
                    idx = random_indices(gen, b, t, h, s + 1, block)
                    if counts == "tensor":
                        bc = torch.randint(0, s + 2, (b, t, h), generator=gen)
                    else:
                        bc = s  # one slot fewer than given: the last one unused
                    if head_first:
                        idx = idx.transpose(1, 2).contiguous()
                        if counts == "tensor":
                            bc = bc.transpose(1, 2).contiguous()
                    kwargs = dict(block_indices=idx, block_counts=bc, block_size=block,
                                  cu_seqlens=None if cu is None else torch.tensor(cu),
                                  head_first=head_first, scale=0.3 if b == 2 else None)
                    run_both(self, dtype, inputs, kwargs, uses=(False, True, False))


@unittest.skipUnless(HAS_CATTN, "libspattn.so without spa_nsa_compress_attention")
class TestLayer(unittest.TestCase):
    """The whole layer: compressed attention, selection, selected attention
    and the sliding window, against the float64 formulation."""

    def setUp(self):
        torch.set_num_threads(2)

    def check(self, dtype, b, t, hq, h, dk, dv, block, counts, window, head_first=False,
              cu=None, seed=0, gate_dtype=None):
        gen = torch.Generator().manual_seed(seed)
        inputs = layer_inputs(gen, dtype, b, t, hq, h, dk, dv, head_first)
        if gate_dtype is not None:
            inputs[3:] = [g.to(gate_dtype) for g in inputs[3:]]
        if counts == "tensor":
            bc = torch.randint(0, 5, (b, t, h), generator=gen)
            if head_first:
                bc = bc.transpose(1, 2).contiguous()
        else:
            bc = counts
        kwargs = dict(block_counts=bc, block_size=block, window_size=window,
                      cu_seqlens=None if cu is None else torch.tensor(cu), head_first=head_first)
        if window and not HAS_SWA:
            with self.assertRaisesRegex(NotImplementedError, "spa_swa"):
                spattn.parallel_nsa(*inputs, **kwargs)
            return
        run_both(self, dtype, inputs, kwargs)

    def test_shapes(self):
        cases = [  # b, t, hq, h, dk, dv, block, counts, window, head_first, cu
            (2, 80, 16, 1, 32, 32, 16, 3, 0, False, None),
            (1, 100, 2, 1, 16, 24, 16, 2, 24, False, [0, 37, 37, 100]),
            (1, 70, 4, 2, 24, 16, 16, "tensor", 0, True, None),
            (2, 50, 4, 4, 16, 16, 16, 16, 7, False, None),
            (1, 96, 8, 2, 16, 16, 32, 2, 40, True, [0, 60, 96]),
        ]
        for dtype in (torch.float32, torch.float64):
            for i, (b, t, hq, h, dk, dv, block, counts, window, hf, cu) in enumerate(cases):
                with self.subTest(dtype=dtype, t=t, hq=hq, h=h, counts=counts, window=window,
                                  head_first=hf, cu=cu):
                    self.check(dtype, b, t, hq, h, dk, dv, block, counts, window, hf, cu, 300 + i)

    def test_large_blocks_and_counts(self):
        """block_size above the selected attention's 128 (run as sub-blocks,
        a partial last block included), block_counts above CANN's 32 (more
        slots than blocks: the rest -1) and more than 32 query heads per kv
        head (sub-groups), against the float64 reference;
        sizes that are not multiples of 16 are refused naming block_size."""
        cases = [  # b, t, hq, h, dk, dv, block, counts, window, head_first, cu
            (1, 600, 4, 1, 16, 16, 256, 2, 0, False, None),
            (1, 700, 2, 1, 16, 16, 384, 1, 16, False, [0, 300, 700]),
            (1, 90, 2, 1, 16, 16, 16, 40, 0, False, None),
            (1, 80, 80, 2, 16, 16, 16, 2, 8, False, None),  # G 40: sub-groups of 32 and 8
        ]
        for i, (b, t, hq, h, dk, dv, block, counts, window, hf, cu) in enumerate(cases):
            with self.subTest(block=block, counts=counts):
                self.check(torch.float64, b, t, hq, h, dk, dv, block, counts, window, hf, cu,
                           340 + i)
        gen = torch.Generator().manual_seed(349)
        inputs = layer_inputs(gen, torch.float32, 1, 64, 2, 1, 16, 16, False)
        for block in (24, 200, 8):
            with self.subTest(block=block):
                with self.assertRaisesRegex(ValueError, "block_size must be a multiple of 16"):
                    spattn.parallel_nsa(*inputs, block_counts=2, block_size=block)

    def test_half_precision(self):
        """16-bit inputs: the ops' f32 sums, one rounding of each part and of
        the gated sum; f32 gates with bf16 tensors: torch's promotion."""
        for i, dtype in enumerate((torch.float16, torch.bfloat16)):
            with self.subTest(dtype=dtype):
                self.check(dtype, 1, 80, 4, 1, 32, 32, 16, 3, 20, cu=[0, 50, 80], seed=320 + i)
        with self.subTest(dtype=torch.bfloat16, gates=torch.float32):
            self.check(torch.bfloat16, 2, 40, 2, 1, 16, 16, 16, 2, 8, seed=322,
                       gate_dtype=torch.float32)

    def test_short_sequences(self):
        """Sequences shorter than a block: nothing compressed, only the
        current block selected."""
        self.check(torch.float32, 1, 20, 2, 1, 16, 16, 16, 2, 0, cu=[0, 10, 20], seed=310)

    def test_empty(self):
        """No batch, no token: empty outputs and gradients."""
        for b, t in ((0, 32), (1, 0)):
            with self.subTest(b=b, t=t):
                ins = [x.requires_grad_() for x in
                       layer_inputs(torch.Generator().manual_seed(313), torch.float32, b, t, 2, 1,
                                    16, 8)]
                out = spattn.parallel_nsa(*ins, block_counts=2, block_size=16,
                                          window_size=4 if HAS_SWA else 0)
                self.assertEqual(tuple(out.shape), (b, t, 2, 8))
                out.sum().backward()
                self.assertEqual(tuple(ins[0].grad.shape), (b, t, 2, 16))

    def test_threads_bit_identical(self):
        gen = torch.Generator().manual_seed(312)
        inputs = layer_inputs(gen, torch.float32, 1, 96, 4, 2, 16, 16)
        grad = refs.rand((1, 96, 4, 16), torch.float32, gen=gen)
        results = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            ins = [x.detach().requires_grad_() for x in inputs]
            out = spattn.parallel_nsa(*ins, block_counts=3, block_size=16,
                                      window_size=20 if HAS_SWA else 0)
            out.backward(grad)
            results.append([out.detach()] + [x.grad for x in ins if x.grad is not None])
        for other in results[1:]:
            self.assertEqual(len(other), len(results[0]))
            for a, b in zip(results[0], other):
                self.assertTrue(torch.equal(a, b))

    def test_block_indices_ignored(self):
        gen = torch.Generator().manual_seed(311)
        inputs = layer_inputs(gen, torch.float32, 1, 40, 2, 1, 16, 16)
        idx = torch.zeros((1, 40, 1, 2), dtype=torch.int64)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            a = spattn.parallel_nsa(*inputs, block_indices=idx, block_counts=2, block_size=16)
        self.assertTrue(any("block_indices is ignored" in str(w.message) for w in seen))
        b = spattn.parallel_nsa(*inputs, block_counts=2, block_size=16)
        self.assertTrue(torch.equal(a, b))


class TestRefusals(unittest.TestCase):
    def test_bad_arguments(self):
        gen = torch.Generator().manual_seed(213)
        q, k, v, gc, gs, gw = layer_inputs(gen, torch.float32, 2, 32, 4, 2, 16, 16)
        idx = torch.zeros((2, 32, 2, 2), dtype=torch.int64)
        call = spattn.parallel_nsa
        with self.assertRaisesRegex(ValueError, "batch size 1"):
            call(q, k, v, None, gs, None, idx, 2, 16, cu_seqlens=torch.tensor([0, 32, 64]))
        with self.assertRaisesRegex(ValueError, "multiple of the kv heads"):
            call(q[:, :, :3], k, v, None, gs[:, :, :3], None, idx, 2, 16)
        with self.assertRaisesRegex(ValueError, "g_cmp .*or block_indices"):
            call(q, k, v, None, gs, None, None, 2, 16)
        with self.assertRaisesRegex(ValueError, "g_slc must have shape"):
            call(q, k, v, None, gs[:, :, :2], None, idx, 2, 16)
        with self.assertRaisesRegex(ValueError, "g_swa must be"):
            call(q, k, v, None, gs, None, idx, 2, 16, window_size=4)
        with self.assertRaisesRegex(ValueError, "end at T"):
            call(q[:1], k[:1], v[:1], None, gs[:1], None, idx[:1], 2, 16,
                 cu_seqlens=torch.tensor([0, 10, 20]))
        with self.assertRaisesRegex(ValueError, "block_counts must have shape"):
            call(q, k, v, None, gs, None, idx, torch.ones((2, 32, 1), dtype=torch.int64), 16)
        with self.assertRaisesRegex(ValueError, "block_indices must have shape"):
            call(q, k, v, None, gs, None, idx[:, :, :1], 2, 16)
        with self.assertRaisesRegex(ValueError, "v must be"):
            call(q, k, v[:, :, :1], None, gs, None, idx, 2, 16)


@unittest.skipUnless(HAS_CATTN, "libspattn.so without spa_nsa_compress_attention")
class TestConfiguredCompression(unittest.TestCase):
    """The paper's compression: windows of l tokens every d (l != d) under
    selection blocks of l', and a learnable weight, against the float64
    formulation (output, the selected blocks, every gradient, the weight's
    included)."""

    def setUp(self):
        torch.set_num_threads(2)

    def test_against_reference(self):
        cases = [  # b, t, hq, h, dk, dv, block, l, d, count, window, cu
            (1, 150, 16, 1, 32, 32, 64, 32, 16, 3, 0, None),
            (2, 90, 4, 2, 16, 24, 32, 16, 8, 2, 12, None),
            (1, 130, 8, 2, 24, 16, 32, 32, 8, 3, 0, [0, 61, 61, 130]),
            (1, 40, 4, 1, 16, 16, 64, 64, 16, 2, 0, None),
        ]
        for dtype in (torch.float64, torch.float32):
            for i, (b, t, hq, h, dk, dv, block, l, d, count, window, cu) in enumerate(cases):
                with self.subTest(dtype=dtype, block=block, l=l, d=d, cu=cu):
                    gen = torch.Generator().manual_seed(400 + i)
                    inputs = layer_inputs(gen, dtype, b, t, hq, h, dk, dv)
                    weight = refs.rand((l, h), dtype, 0.0, 2.0 / l, gen=gen)
                    ours = [x.detach().requires_grad_() for x in inputs + [weight]]
                    ref = [x.detach().double().requires_grad_() for x in inputs + [weight]]
                    kw = dict(block_counts=count, block_size=block, window_size=window,
                              cu_seqlens=None if cu is None else torch.tensor(cu),
                              compress_block_size=l, compress_stride=d)
                    out = spattn.parallel_nsa(*ours[:6], compress_weight=ours[6], **kw)
                    exp, _ = nsa_layer_ref(*ref[:6], compress_weight=ref[6], **kw)
                    close(self, "output", out, exp, dtype)
                    grad = refs.rand(tuple(out.shape), dtype, gen=torch.Generator().manual_seed(6))
                    out.backward(grad)
                    exp.backward(grad.double())
                    names = ("dq", "dk", "dv", "dg_cmp", "dg_slc", "dg_swa", "dweight")
                    for name, a, r in zip(names, ours, ref):
                        if r.grad is None:
                            self.assertIsNone(a.grad, name)
                        elif a.grad is None:  # unused here (no window complete): zero there
                            self.assertEqual(r.grad.abs().max().item(), 0.0, name)
                        else:
                            close(self, name, a.grad, r.grad, dtype)

    def test_selection_follows_overlap(self):
        """The selected blocks: the reference's (float64, distinct scores)."""
        gen = torch.Generator().manual_seed(411)
        block, l, d, count = 32, 16, 8, 3
        ends = refs.cumulative([100, 45])
        seqs = list(zip([0] + ends[:-1], ends))
        q = refs.rand((ends[-1], 4, 8), torch.float64, -2, 2, gen=gen)
        k = refs.rand((ends[-1], 2, 8), torch.float64, -2, 2, gen=gen)
        w = refs.rand((l, 2), torch.float64, 0.0, 0.2, gen=gen)
        _, _, got = compressed_branch(q, k, k, Compression(block, 2, q.dtype, l, d, w), seqs, 0.7, count)
        expected = []
        for s, e in seqs:
            _, p = ref_compressed_attention(q[s:e], k[s:e], k[s:e], block, 0.7, l, d, w)
            expected.append(ref_select_blocks(p, e - s, block, 2, count, l, d))
        self.assertTrue(torch.equal(got.long(), torch.cat(expected)))

    def test_bad_configuration(self):
        gen = torch.Generator().manual_seed(412)
        inputs = layer_inputs(gen, torch.float32, 1, 64, 4, 1, 16, 16)
        for kw, what in ((dict(compress_block_size=24, compress_stride=16), "multiple of compress_stride"),
                         (dict(compress_block_size=128), "at most block_size"),
                         (dict(compress_block_size=32, compress_stride=0), "compress_stride"),
                         (dict(compress_weight=torch.ones(32, 1)), "compress_weight")):
            with self.subTest(**{k: str(v) for k, v in kw.items()}):
                with self.assertRaisesRegex(ValueError, what):
                    spattn.parallel_nsa(*inputs, block_counts=2, block_size=64, **kw)


if __name__ == "__main__":
    unittest.main()
