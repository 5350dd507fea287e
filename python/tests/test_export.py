"""What PyTorch does around an operator must never be silently wrong: ONNX
export writes the op's node with its inputs (or refuses), and a second
derivative raises instead of coming back as zero."""
import io
import unittest
import warnings

import torch

import spattn

try:
    import onnx
except ImportError:  # python3-onnx: only the node test needs it
    onnx = None

SHAPES = torch.tensor([[6, 4], [3, 2]])
STARTS = torch.tensor([0, 24])


def msda_inputs(requires_grad=False):
    g = torch.Generator().manual_seed(7)
    v = torch.randn(1, 30, 2, 8, generator=g)
    loc = torch.rand(1, 5, 2, 2, 2, 2, generator=g)
    attn = torch.rand(1, 5, 2, 2, 2, generator=g)
    return [t.requires_grad_(requires_grad) for t in (v, loc, attn)]


class MsdaModule(torch.nn.Module):
    def forward(self, value, shapes, starts, loc, attn):
        return spattn.MSDeformAttnFunction.apply(value, shapes, starts, loc, attn, 64)


class CompressModule(torch.nn.Module):
    def forward(self, x, w):
        return spattn.nsa_compress(x, w, [40], 16, 8)


class SelectModule(torch.nn.Module):
    def forward(self, q, k, v, topk):
        return spattn.nsa_selected_attention(q, k, v, topk, [8], [32], 0.25, 16)


def export(module, args):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, f, opset_version=13, custom_opsets={"mmdeploy": 1})
    return f.getvalue()


class TestOnnx(unittest.TestCase):
    @unittest.skipIf(onnx is None, "python3-onnx is not installed")
    def test_msda_is_mmdeploys_node_over_the_graph_inputs(self):
        v, loc, attn = msda_inputs()
        model = onnx.load_from_string(export(MsdaModule(), (v, SHAPES, STARTS, loc, attn)))
        nodes = [n for n in model.graph.node if n.op_type != "Constant"]
        self.assertEqual(len(nodes), 1)
        node = nodes[0]
        self.assertEqual((node.domain, node.op_type),
                         ("mmdeploy", "MMCVMultiScaleDeformableAttention"))
        graph_inputs = [i.name for i in model.graph.input]
        self.assertEqual(len(graph_inputs), 5)
        self.assertEqual(list(node.input), graph_inputs)  # mmdeploy's input order
        self.assertEqual([(a.name, a.i) for a in node.attribute], [("im2col_step", 64)])
        self.assertEqual(list(node.output), [o.name for o in model.graph.output])
        # nothing of the output's shape is baked into the file
        self.assertFalse(any(list(i.dims) == [1, 5, 16] for i in model.graph.initializer))

    @unittest.skipIf(onnx is None, "python3-onnx is not installed")
    def test_scripted_traced_and_layer_export_the_node(self):
        args = (msda_inputs()[0], SHAPES, STARTS) + tuple(msda_inputs()[1:])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(MsdaModule(), args)
        for module in (torch.jit.script(MsdaModule()), traced):
            model = onnx.load_from_string(export(module, args))
            nodes = [n for n in model.graph.node if n.op_type != "Constant"]
            self.assertEqual([(n.domain, n.op_type) for n in nodes],
                             [("mmdeploy", "MMCVMultiScaleDeformableAttention")])
            self.assertEqual(list(nodes[0].input), [i.name for i in model.graph.input])
        # the whole Deformable-DETR layer: projections around the node, which
        # reads the value projection and the computed locations and weights
        layer = spattn.MSDeformAttn(d_model=16, n_levels=2, n_heads=2, n_points=2).eval()
        query, ref, flat = torch.randn(1, 5, 16), torch.rand(1, 5, 2, 2), torch.randn(1, 30, 16)
        model = onnx.load_from_string(export(layer, (query, ref, flat, SHAPES, STARTS)))
        msda = [n for n in model.graph.node if n.op_type == "MMCVMultiScaleDeformableAttention"]
        self.assertEqual(len(msda), 1)
        producers = {o: n.op_type for n in model.graph.node for o in n.output}
        self.assertEqual(producers[msda[0].input[0]], "Reshape")  # value_proj's output, viewed
        self.assertIn(msda[0].input[1], [i.name for i in model.graph.input])
        self.assertEqual(producers[msda[0].input[3]], "Add")      # reference + offsets
        self.assertEqual(producers[msda[0].input[4]], "Reshape")  # softmax, viewed

    def test_nsa_ops_refuse_export(self):
        x, w = torch.randn(40, 2, 16), torch.randn(16, 2)
        with self.assertRaisesRegex(RuntimeError, "nsa_compress has no ONNX operator"):
            export(CompressModule(), (x, w))
        q, k = torch.randn(8, 2, 16), torch.randn(32, 1, 16)
        topk = torch.zeros(8, 1, 2, dtype=torch.int32)
        topk[:, :, 1] = 1
        with self.assertRaisesRegex(RuntimeError, "nsa_selected_attention has no ONNX operator"):
            export(SelectModule(), (q, k, k.clone(), topk))


class TestGridSampleLowering(unittest.TestCase):
    """spattn.onnx_export_mode("grid_sample"): standard operators only (run
    and compared in ONNX Runtime by make ort-check)."""

    @unittest.skipIf(onnx is None, "python3-onnx is not installed")
    def test_standard_operators_only(self):
        v, loc, attn = msda_inputs()
        f = io.BytesIO()
        with spattn.onnx_export_mode("grid_sample"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(MsdaModule(), (v, SHAPES, STARTS, loc, attn), f, opset_version=16)
        model = onnx.load_from_string(f.getvalue())
        ops = [n.op_type for n in model.graph.node]
        self.assertEqual(ops.count("GridSample"), 2)  # one per level
        self.assertTrue(all(n.domain in ("", "ai.onnx") for n in model.graph.node))
        out = model.graph.output[0].type.tensor_type
        self.assertEqual(out.elem_type, onnx.TensorProto.FLOAT)
        self.assertEqual([d.dim_value for d in out.shape.dim], [1, 5, 16])
        # and the default mode is back after the block
        model = onnx.load_from_string(export(MsdaModule(), (v, SHAPES, STARTS, loc, attn)))
        self.assertIn("MMCVMultiScaleDeformableAttention", [n.op_type for n in model.graph.node])

    def test_refusals(self):
        v, loc, attn = msda_inputs()
        with self.assertRaisesRegex(RuntimeError, "needs opset_version >= 16"):
            with spattn.onnx_export_mode("grid_sample"):
                export(MsdaModule(), (v, SHAPES, STARTS, loc, attn))  # opset 13
        with self.assertRaisesRegex(ValueError, "custom_op or grid_sample"):
            with spattn.onnx_export_mode("gridsample"):
                pass


class TestSecondDerivative(unittest.TestCase):
    def assert_refuses_graph(self, out, inputs):
        with self.assertRaisesRegex(RuntimeError, "second derivatives are not implemented"):
            torch.autograd.grad(out.sum(), inputs, create_graph=True, retain_graph=True)
        first = torch.autograd.grad(out.sum(), inputs)  # first derivatives still work
        self.assertTrue(all(g is not None and torch.isfinite(g).all() for g in first))

    def test_msda(self):
        v, loc, attn = msda_inputs(requires_grad=True)
        self.assert_refuses_graph(spattn.ms_deform_attn(v, SHAPES, STARTS, loc, attn),
                                  [v, loc, attn])

    def test_nsa_compress(self):
        x, w = torch.randn(40, 2, 16, requires_grad=True), torch.randn(16, 2, requires_grad=True)
        self.assert_refuses_graph(spattn.nsa_compress(x, w, [40], 16, 8), [x, w])

    def test_nsa_selected_attention(self):
        q = torch.randn(8, 2, 16, requires_grad=True)
        k = torch.randn(32, 1, 16, requires_grad=True)
        v = torch.randn(32, 1, 16, requires_grad=True)
        topk = torch.tensor([[[0, 1]]] * 8, dtype=torch.int32)
        out = spattn.nsa_selected_attention(q, k, v, topk, [8], [32], 0.25, 16)
        self.assert_refuses_graph(out, [q, k, v])


if __name__ == "__main__":
    unittest.main()
