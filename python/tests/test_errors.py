"""Bad inputs raise, never crash: what ctypes cannot pass is refused in
Python (device, dtype, rank), everything else by the library, whose refusal
names the status code and the rule that failed; the process survives all."""
import threading
import unittest

import torch

import spattn
from spattn import SpattnError


def msda_args(nq=32, c=8, shapes=((4, 4), (2, 2)), dtype=torch.float32):
    shapes_t = torch.tensor(shapes)
    areas = shapes_t[:, 0] * shapes_t[:, 1]
    starts = torch.cat([torch.zeros(1, dtype=torch.int64), areas.cumsum(0)[:-1]])
    nk, nl = int(areas.sum()), len(shapes)
    return [torch.rand(2, nk, 2, c, dtype=dtype), shapes_t, starts,
            torch.rand(2, nq, 2, nl, 2, 2, dtype=dtype), torch.rand(2, nq, 2, nl, 2, dtype=dtype)]


def select_args(topk_value=0, block=16):
    q = torch.rand(8, 2, 16)
    kv = torch.rand(32, 1, 16)
    topk = torch.full((8, 1, 2), topk_value, dtype=torch.int32)
    return [q, kv, kv.clone(), topk, [8], [32], 0.25, block]


class TestErrors(unittest.TestCase):
    def assert_refused(self, fn, rule_fragment, status=161002):
        with self.assertRaises(SpattnError) as cm:
            fn()
        e = cm.exception
        self.assertEqual(e.status, status)
        self.assertIn(str(status), str(e))
        self.assertIn(rule_fragment, str(e))
        return e

    def test_library_refusals_name_rule(self):
        a = msda_args()
        a[4] = a[4][:, :16]  # queries of attention_weights disagree with location's
        e = self.assert_refused(lambda: spattn.ms_deform_attn(*a), "spa_tensor_dims_are(attn_weight")
        self.assertEqual((e.op, e.phase), ("spa_msda", 1))
        a = msda_args()
        a[2] = a[2][:1]  # one level start for two levels
        self.assert_refused(lambda: spattn.ms_deform_attn(*a), "level_start->dims[0] == d->nl")
        a = msda_args()
        a[1] = torch.tensor([[6, 4], [2, 2]])  # level 0 runs into the keys' end
        self.assert_refused(lambda: spattn.ms_deform_attn(*a), "end <= nk")
        a = msda_args()
        a[3] = a[3][:, :, :1]  # heads of location disagree with value's
        self.assert_refused(lambda: spattn.ms_deform_attn(*a), "src/")

    def test_msda_refusals_name_the_argument(self):
        """The binding's reading appended: the argument, its shape, the one expected."""
        a = msda_args()
        a[4] = a[4][:, :16]
        e = self.assert_refused(lambda: spattn.ms_deform_attn(*a),
                                "attention_weights has shape (2, 16, 2, 2, 2), expected (2, 32, 2, 2, 2)")
        self.assertIn("spa_tensor_dims_are(attn_weight", str(e))  # the rule stays
        a = msda_args()
        a[3] = a[3][:, :, :1]
        self.assert_refused(lambda: spattn.ms_deform_attn(*a),
                            "sampling_locations has shape (2, 32, 1, 2, 2, 2), expected "
                            "(2, num_queries, 2, 2, num_points, 2) from value (2, 20, 2, 8)")
        a = msda_args()
        a[2] = a[2][:1]
        self.assert_refused(lambda: spattn.ms_deform_attn(*a),
                            "value_level_start_index has shape (1,), expected (2,)")
        a = msda_args()
        a[1] = torch.tensor([[6, 4], [2, 2]])
        self.assert_refused(lambda: spattn.ms_deform_attn(*a),
                            "level 0 starts at row 0 of value (value_level_start_index) and holds 24 rows")
        a = msda_args()
        for t in (a[0], a[3], a[4]):
            t.requires_grad_()
        out = spattn.ms_deform_attn(*a)
        with self.assertRaisesRegex(SpattnError, r"grad_output has shape \(2, 32, 15\), expected \(2, 32, 16\)"):
            torch.ops.spattn.ms_deform_attn_backward(*[t.detach() for t in a], out.detach()[..., :15])

    def test_nsa_refusals_name_rule(self):
        x, w = torch.rand(64, 2, 16), torch.rand(32, 2)
        self.assert_refused(lambda: spattn.nsa_compress(x, w, [64], 32, 48), "bs >= st")
        self.assert_refused(lambda: spattn.nsa_compress(x, w, [60], 32, 16), "total == input->dims[0]")
        self.assert_refused(lambda: spattn.nsa_compress(x, w, [64, 30], 32, 16), "spa_seq_check")
        self.assert_refused(lambda: spattn.nsa_compress(x, torch.rand(16, 2), [64], 32, 16),
                            "weight->dims[0] == bs")
        a = select_args(topk_value=2)  # 32 keys: blocks 0 and 1 only
        self.assert_refused(lambda: spattn.nsa_selected_attention(*a), "indices")
        a = select_args(block=24)
        self.assert_refused(lambda: spattn.nsa_selected_attention(*a), "bs % 16 == 0")
        a = select_args()
        a[0] = torch.rand(8, 3, 16)  # 3 query heads over 1 kv head is fine; 3 over 2 is not
        a[1] = a[2] = torch.rand(32, 2, 16)
        a[3] = torch.zeros(8, 2, 2, dtype=torch.int32)
        self.assert_refused(lambda: spattn.nsa_selected_attention(*a), "n1 % n2 == 0")

    def test_refused_in_python(self):
        a = msda_args()
        a[0] = a[0].to(torch.int16)  # float64 passes through (the library decides)
        with self.assertRaisesRegex(TypeError, "value has dtype torch.int16"):
            spattn.ms_deform_attn(*a)
        a = msda_args()
        a[0] = torch.empty(a[0].shape, device="meta")  # with CPU tensors (all meta: test_meta.py)
        with self.assertRaisesRegex(ValueError, "CPU tensors only"):
            spattn.ms_deform_attn(*a)
        a = msda_args()
        a[3] = a[3][..., 0]
        with self.assertRaisesRegex(ValueError, "sampling_locations must have 6 dimensions"):
            spattn.ms_deform_attn(*a)
        a = msda_args()
        a[1] = a[1].float()
        with self.assertRaisesRegex(TypeError, "value_spatial_shapes"):
            spattn.ms_deform_attn(*a)
        a = select_args()
        a[3] = torch.full((8, 1, 2), 2**33, dtype=torch.int64)  # would wrap to 0 in int32
        with self.assertRaisesRegex(ValueError, "outside int32"):
            spattn.nsa_selected_attention(*a)
        with self.assertRaisesRegex(ValueError, "cu_seqlens is empty"):
            spattn.nsa_compress(torch.rand(64, 2, 16), torch.rand(32, 2), [], 32, 16)
        # the operator's schema: the dispatcher names the argument
        with self.assertRaisesRegex(RuntimeError,
                                    "Expected a value of type 'Tensor' for argument 'input'"):
            spattn.nsa_compress([[1.0]], torch.rand(32, 2), [64], 32, 16)

    def test_backward_refusal_and_survival(self):
        """A refusal in backward raises too, and the op still works afterwards."""
        a = msda_args(nq=32)
        a[0].requires_grad_()
        out = spattn.ms_deform_attn(*a)
        a[1].numpy()[0, 0] = 50  # the saved shapes change under the graph, unseen by autograd
        with self.assertRaises(SpattnError) as cm:
            out.sum().backward()
        self.assertEqual(cm.exception.op, "spa_msda_grad")
        self.assertIn("end <= nk", str(cm.exception))
        a = msda_args()
        self.assertEqual(spattn.ms_deform_attn(*a).shape, (2, 32, 16))

    def test_threads_share_pools(self):
        """Host threads calling at once: each result equals a lone call's."""
        torch.set_num_threads(2)
        a = msda_args(nq=64, c=16, shapes=((8, 8), (4, 4)))
        want = spattn.ms_deform_attn(*a)
        bad = []

        def work():
            for _ in range(30):
                if not torch.equal(spattn.ms_deform_attn(*a), want):
                    bad.append(1)

        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(bad, [])


if __name__ == "__main__":
    unittest.main()


class TestLayerEdges(unittest.TestCase):
    """The whole NSA layer at its edges: a second derivative asked through it
    is refused by spattn's own message, a head dim of 0 is refused naming it,
    and cu_seqlens [0] (no sequence, T = 0) gives the empty output."""

    def layer_inputs(self, t=48, dk=16, grad=True):
        g = torch.Generator().manual_seed(7)
        q = torch.randn(1, t, 4, dk, generator=g).requires_grad_(grad)
        k = torch.randn(1, t, 1, dk, generator=g).requires_grad_(grad)
        v = torch.randn(1, t, 1, 16, generator=g).requires_grad_(grad)
        gates = [torch.rand(1, t, 4, generator=g).requires_grad_(grad) for _ in range(3)]
        return [q, k, v] + gates

    def test_second_derivative_refused(self):
        ins = self.layer_inputs()
        o = spattn.parallel_nsa(*ins, block_counts=2, block_size=16, window_size=8)
        with self.assertRaisesRegex(RuntimeError, "spattn: second derivatives are not"):
            torch.autograd.grad(o.sum(), ins, create_graph=True)
        o = spattn.parallel_nsa(*ins, block_counts=2, block_size=16, window_size=8)
        grads = torch.autograd.grad(o.sum(), ins)  # the first derivative still works
        self.assertTrue(all(torch.isfinite(x).all() for x in grads))

    def test_head_dim_zero_refused(self):
        ins = self.layer_inputs(dk=0, grad=False)
        with self.assertRaisesRegex(ValueError, "head dim K of q and k must be >= 1"):
            spattn.parallel_nsa(*ins, block_counts=2, block_size=16)
        q, k, v = torch.randn(8, 2, 0), torch.randn(8, 1, 0), torch.randn(8, 1, 4)
        with self.assertRaisesRegex(ValueError, "head dim D of q must be >= 1"):
            spattn.sliding_window_attention(q, k, v, 4, [8])

    def test_no_sequence(self):
        ins = self.layer_inputs(t=0, grad=False)
        o = spattn.parallel_nsa(*ins, block_counts=2, block_size=16, window_size=8,
                                cu_seqlens=torch.tensor([0]))
        self.assertEqual(tuple(o.shape), (1, 0, 4, 16))
