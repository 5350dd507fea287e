"""The compressed and sliding-window attention as operators of the
dispatcher (torch.ops.spattn.nsa_compress_attention /
sliding_window_attention): the operators equal the functions, scripted
modules equal eager, saved modules load in a fresh interpreter (a traced
parallel_nsa too), second derivatives and ONNX export are refused with
errors that name why. Their values against the reference are
test_nsa_attention_ops.py's."""
import io
import os
import subprocess
import sys
import tempfile
import unittest
import warnings
from typing import List

import torch
from torch import Tensor

import spattn
from spattn import _lib

HAS_OPS = all(f is not None for f in (_lib.nsa_cattn_ws, _lib.nsa_cattn_grad_ws, _lib.swa_ws,
                                      _lib.swa_grad_ws))
CU_Q, CU_CMP = torch.tensor([5, 12]), torch.tensor([3, 6])
CU_SWA = torch.tensor([0, 7, 12], dtype=torch.int32)  # flash-attn's leading 0


def inputs(requires_grad=False):
    """q [12, 4, 16] over compressed k [6, 2, 16], v [6, 2, 8] (two
    sequences); the window's k, v [12, 2, *] over the same queries; masks."""
    g = torch.Generator().manual_seed(21)
    q = torch.randn(12, 4, 16, generator=g)
    k = torch.randn(6, 2, 16, generator=g)
    v = torch.randn(6, 2, 8, generator=g)
    ks = torch.randn(12, 2, 16, generator=g)
    vs = torch.randn(12, 2, 8, generator=g)
    am = torch.rand(7, 3, generator=g) < 0.3
    tm = (torch.rand(7, 3, generator=g) < 0.2).to(torch.uint8)
    return [t.requires_grad_(requires_grad) if t.is_floating_point() else t
            for t in (q, k, v, ks, vs, am, tm)]


class Attention(torch.nn.Module):
    """Both functions, called as models call them (index arguments as tensors)."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor, ks: Tensor, vs: Tensor, am: Tensor,
                tm: Tensor) -> List[Tensor]:
        o, topk, mx, sm = spattn.nsa_compress_attention(
            q, k, v, 0.25, 4, 16, 16, 16, 2, topk_mask=tm, atten_mask=am,
            actual_seq_qlen=torch.tensor([5, 12]), actual_cmp_seq_kvlen=torch.tensor([3, 6]),
            sparse_mode=1)
        o2, _, _, _ = spattn.nsa_compress_attention(
            q, k, v, 0.5, 4, 32, 16, 32, 1, actual_seq_qlen=torch.tensor([5, 12]),
            actual_cmp_seq_kvlen=torch.tensor([3, 6]), sparse_mode=2)
        w = spattn.sliding_window_attention(q, ks, vs, 3, torch.tensor([0, 7, 12]))
        w2, wmx, wsm = spattn.sliding_window_attention(q, ks, vs, 2, torch.tensor([7, 12]), 0.3,
                                                      "left", return_softmax=True)
        return [o, topk, mx, sm, o2, w, w2, wmx, wsm]


DIFFERENTIABLE = {0: [0, 1, 2], 4: [0, 1, 2], 5: [0, 3, 4], 6: [0, 3, 4]}  # output: inputs


def grads(outputs, leaves):
    g = torch.Generator().manual_seed(2)
    loss = sum((outputs[i] * torch.randn(outputs[i].shape, generator=g)).sum()
               for i in DIFFERENTIABLE)
    return torch.autograd.grad(loss, leaves)


LOADER = r"""
import sys, torch
import spattn
for path in sys.argv[1:]:
    module = torch.jit.load(path + ".pt")
    args, expected = torch.load(path + ".io")
    outputs = module(*args)
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    assert len(outputs) == len(expected), path
    for o, e in zip(outputs, expected):
        assert o.dtype == e.dtype and torch.equal(o, e), path
    print("loaded", path.rsplit("/", 1)[-1])
"""


class NsaLayer(torch.nn.Module):
    def forward(self, q, k, v, g_cmp, g_slc, g_swa):
        return spattn.parallel_nsa(q, k, v, g_cmp, g_slc, g_swa, block_counts=2, block_size=16,
                                   window_size=5)


def layer_inputs():
    g = torch.Generator().manual_seed(8)
    return (torch.randn(1, 40, 4, 16, generator=g), torch.randn(1, 40, 2, 16, generator=g),
            torch.randn(1, 40, 2, 8, generator=g)) + tuple(torch.rand(1, 40, 4, generator=g)
                                                           for _ in range(3))


def trace(module, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Python ints and lists become the trace's constants
        return torch.jit.trace(module, args)


@unittest.skipUnless(HAS_OPS, "libspattn.so without the NSA layer's attention ops")
class TestOperators(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def test_operators_equal_the_functions(self):
        q, k, v, ks, vs, am, tm = inputs(requires_grad=True)
        fn = spattn.nsa_compress_attention(q, k, v, 0.25, 4, 16, 16, 16, 2, topk_mask=tm,
                                           atten_mask=am, actual_seq_qlen=[5, 12],
                                           actual_cmp_seq_kvlen=[3, 6])
        op = torch.ops.spattn.nsa_compress_attention(q, k, v, 0.25, 4, 16, 16, 16, 2,
                                                     topk_mask=tm, atten_mask=am,
                                                     actual_seq_qlen=CU_Q,
                                                     actual_cmp_seq_kvlen=CU_CMP)
        for a, b in zip(fn, op):
            self.assertTrue(torch.equal(a, b))
        grad = torch.randn(fn[0].shape, generator=torch.Generator().manual_seed(4))
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(
            torch.autograd.grad(fn[0], [q, k, v], grad),
            torch.autograd.grad(op[0], [q, k, v], grad))))
        fn = spattn.sliding_window_attention(q, ks, vs, 3, [7, 12], 0.3, return_softmax=True)
        op = torch.ops.spattn.sliding_window_attention(q, ks, vs, 3, CU_SWA, 0.3, 0)
        for a, b in zip(fn, op):
            self.assertTrue(torch.equal(a, b))
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(
            torch.autograd.grad(fn[0], [q, ks, vs], grad),
            torch.autograd.grad(op[0], [q, ks, vs], grad))))

    def test_compress_attention_function_is_its_schema(self):
        """A script calls the operator in the function's place: the two must
        take the same arguments (names, keyword-only, defaults)."""
        import inspect
        params = inspect.signature(spattn.nsa_compress_attention).parameters.values()
        schema = torch.ops.spattn.nsa_compress_attention.default._schema.arguments
        self.assertEqual(
            [(p.name, p.kind == p.KEYWORD_ONLY,
              None if p.default is p.empty else p.default) for p in params],
            [(a.name, a.kwarg_only, a.default_value) for a in schema])

    def test_scripted_equals_eager_forward_and_gradients(self):
        scripted = torch.jit.script(Attention())
        graph = str(scripted.inlined_graph)
        self.assertIn("spattn::nsa_compress_attention", graph)
        self.assertIn("spattn::sliding_window_attention", graph)
        args = inputs(requires_grad=True)
        got, want = scripted(*args), Attention()(*args)
        self.assertEqual(len(got), len(want))
        for a, b in zip(got, want):
            self.assertTrue(a.dtype == b.dtype and torch.equal(a, b))
        leaves = args[:5]
        for a, b in zip(grads(got, leaves), grads(want, leaves)):
            self.assertTrue(torch.equal(a, b))

    def test_scripted_refusal_names_the_rule(self):
        scripted = torch.jit.script(Attention())
        args = inputs()
        args[0] = torch.randn(12, 2, 16)  # head_num 4 given, N1 2
        with self.assertRaisesRegex(RuntimeError, "spattn::nsa_compress_attention raised "
                                    "ValueError: spattn: head_num \\(4\\) must equal"):
            scripted(*args)
        with self.assertRaisesRegex(ValueError, "window_type must be 'keys' or 'left'"):
            spattn.sliding_window_attention(args[0], args[3], args[4], 3, [12], None, "right")

    def test_saved_modules_load_in_a_fresh_interpreter(self):
        """The scripted and traced functions, and a traced parallel_nsa (its
        Python composition recorded as the operators it calls, for the traced
        shapes)."""
        with tempfile.TemporaryDirectory() as tmp:
            paths = []

            def save(name, module, args):
                path = os.path.join(tmp, name)
                with torch.no_grad():
                    out = module(*args)
                out = list(out) if isinstance(out, (list, tuple)) else [out]
                torch.jit.save(module, path + ".pt")
                torch.save((args, out), path + ".io")
                paths.append(path)
                return out

            save("attention_scripted", torch.jit.script(Attention()), inputs())
            save("attention_traced", trace(Attention(), tuple(inputs())), inputs())
            traced = trace(NsaLayer(), layer_inputs())
            out = save("parallel_nsa_traced", traced, layer_inputs())
            self.assertTrue(torch.equal(out[0], NsaLayer()(*layer_inputs())))
            self.assertIn("spattn::nsa_compress_attention", str(traced.inlined_graph))
            env = dict(os.environ)
            env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(spattn.__file__)))
            run = subprocess.run([sys.executable, "-c", LOADER] + paths, cwd=tmp, env=env,
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(run.stdout.split(), ["loaded", "attention_scripted", "loaded",
                                                  "attention_traced", "loaded",
                                                  "parallel_nsa_traced"])

    def test_second_derivatives_refused(self):
        args = inputs(requires_grad=True)
        for out in (Attention()(*args), torch.jit.script(Attention())(*args)):
            for i, leaves in DIFFERENTIABLE.items():
                with self.assertRaisesRegex(RuntimeError,
                                            "second derivatives are not implemented"):
                    torch.autograd.grad(out[i].sum(), [args[j] for j in leaves],
                                        create_graph=True, retain_graph=True)
        q, k, v, ks, vs = args[:5]
        o, _, mx, sm = torch.ops.spattn.nsa_compress_attention(
            q, k, v, 0.25, 4, 16, 16, 16, 2, actual_seq_qlen=CU_Q, actual_cmp_seq_kvlen=CU_CMP)
        with self.assertRaisesRegex(RuntimeError,
                                    "nsa_compress_attention_backward is not differentiable"):
            torch.ops.spattn.nsa_compress_attention_backward(
                torch.ones_like(o), q, k, v, o, mx, sm, None, CU_Q, CU_CMP, 0.25, 4, 1, 16, 16)
        o, mx, sm = torch.ops.spattn.sliding_window_attention(q, ks, vs, 3, CU_SWA, 0.3, 0)
        with self.assertRaisesRegex(RuntimeError,
                                    "sliding_window_attention_backward is not differentiable"):
            torch.ops.spattn.sliding_window_attention_backward(
                torch.ones_like(o), q, ks, vs, o, mx, sm, CU_SWA, 3, 0.3, 0)

    def test_onnx_export_refused(self):
        def export(module, args):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, args, io.BytesIO(), opset_version=13)

        class Compress(torch.nn.Module):
            def forward(self, q, k, v):
                return spattn.nsa_compress_attention(q, k, v, 0.25, 4, 16, 16, 16, 2,
                                                     actual_seq_qlen=[5, 12],
                                                     actual_cmp_seq_kvlen=[3, 6])[0]

        class Window(torch.nn.Module):
            def forward(self, q, k, v):
                return spattn.sliding_window_attention(q, k, v, 3, [12])

        q, k, v, ks, vs = inputs()[:5]
        with self.assertRaisesRegex(RuntimeError, "nsa_compress_attention has no ONNX operator"):
            export(Compress(), (q, k, v))
        with self.assertRaisesRegex(RuntimeError,
                                    "sliding_window_attention has no ONNX operator"):
            export(Window(), (q, ks, vs))
        with self.assertRaisesRegex(RuntimeError, "has no ONNX operator"):
            export(NsaLayer(), layer_inputs())


if __name__ == "__main__":
    unittest.main()
