"""The ops as operators of the dispatcher (torch.ops.spattn.*): scripted
modules equal eager, traced and scripted modules saved and loaded in a fresh
interpreter, autocast, second derivatives refused on the operator path."""
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

SHAPES = torch.tensor([[6, 4], [3, 2]])
STARTS = torch.tensor([0, 24])


def msda_inputs(dtype=torch.float32, seed=3):
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(2, 30, 2, 8, generator=g, dtype=dtype)
    loc = torch.rand(2, 5, 2, 2, 3, 2, generator=g, dtype=dtype)
    attn = torch.rand(2, 5, 2, 2, 3, generator=g, dtype=dtype)
    return v, loc, attn


def layer_inputs(seed=5):
    """Inputs of the Deformable-DETR layer: 2 levels (6x4, 3x2), d_model 16."""
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(2, 7, 16, generator=g)
    ref = torch.rand(2, 7, 2, 2, generator=g)
    flat = torch.randn(2, 30, 16, generator=g)
    mask = torch.zeros(2, 30, dtype=torch.bool)
    mask[1, 20:24] = True
    return query, ref, flat, SHAPES, STARTS, mask


def select_inputs():
    g = torch.Generator().manual_seed(11)
    q = torch.randn(12, 4, 16, generator=g)
    k = torch.randn(40, 2, 16, generator=g)
    v = torch.randn(40, 2, 8, generator=g)
    topk = torch.randint(0, 2, (12, 2, 2), generator=g)
    topk[:, :, 1] = -1  # padding slots
    return q, k, v, topk


class Functions(torch.nn.Module):
    """Every user-facing function, called as models call them."""

    def forward(self, value: Tensor, loc: Tensor, attn: Tensor, x: Tensor, w: Tensor, q: Tensor,
                k: Tensor, v: Tensor, topk: Tensor) -> List[Tensor]:
        a = spattn.ms_deform_attn(value, torch.tensor([[6, 4], [3, 2]]), torch.tensor([0, 24]),
                                  loc, attn)
        b = spattn.MSDeformAttnFunction.apply(value, torch.tensor([[6, 4], [3, 2]]),
                                              torch.tensor([0, 24]), loc, attn, 64)
        c = spattn.nsa_compress(x, w, torch.tensor([17, 40]), 8, 4)
        d = spattn.nsa_selected_attention(q, k, v, topk, torch.tensor([5, 12]),
                                          torch.tensor([20, 40], dtype=torch.int32), 0.25, 16,
                                          True, causal_alignment="top_left")
        e, mx, sm = spattn.nsa_selected_attention(q, k, v, topk, torch.tensor([5, 12]),
                                                  torch.tensor([20, 40]), 0.25, 16, False,
                                                  return_softmax=True)
        return [a, b, c, d, e, mx, sm]


def functions_inputs():
    value, loc, attn = msda_inputs()
    g = torch.Generator().manual_seed(9)
    x, w = torch.randn(40, 2, 8, generator=g), torch.randn(8, 2, generator=g)
    return (value, loc, attn, x, w) + select_inputs()


def layer():
    torch.manual_seed(0)
    m = spattn.MSDeformAttn(d_model=16, n_levels=2, n_heads=2, n_points=3)
    with torch.no_grad():  # away from the initial fan, so that every term counts
        for p in m.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    return m


def grads(outputs, inputs):
    g = torch.Generator().manual_seed(1)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=o.dtype)).sum() for o in outputs)
    return torch.autograd.grad(loss, inputs)


# Run in a fresh interpreter: loads each saved module after `import spattn`
# and compares its output with the one saved beside it.
LOADER = r"""
import sys, torch
import spattn
for path in sys.argv[1:]:
    module = torch.jit.load(path + ".pt")
    inputs, expected = torch.load(path + ".io")
    outputs = module(*inputs)
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    assert len(outputs) == len(expected), path
    for o, e in zip(outputs, expected):
        assert o.dtype == e.dtype and torch.equal(o, e), path
    print("loaded", path.rsplit("/", 1)[-1])
"""


class TestScript(unittest.TestCase):
    def test_functions_scripted_equal_eager(self):
        inputs = functions_inputs()
        got, want = torch.jit.script(Functions())(*inputs), Functions()(*inputs)
        self.assertEqual(len(got), len(want))
        for a, b in zip(got, want):
            self.assertTrue(torch.equal(a, b))

    def test_layer_scripted_equals_eager_forward_and_gradients(self):
        m = layer()
        scripted = torch.jit.script(m)
        inputs = layer_inputs()
        leaves = [inputs[0].requires_grad_(), inputs[2].requires_grad_()]
        want = m(*inputs)
        got = scripted(*inputs)
        self.assertEqual(want.shape, (2, 7, 16))
        self.assertTrue(torch.equal(got, want))
        params = list(m.parameters())
        for a, b in zip(grads([got], leaves + params), grads([want], leaves + params)):
            self.assertTrue(torch.equal(a, b))
        # boxes as reference points take the other branch
        boxes = torch.cat([inputs[1], 0.2 + 0.1 * inputs[1]], -1)
        self.assertTrue(torch.equal(scripted(inputs[0], boxes, *inputs[2:]),
                                    m(inputs[0], boxes, *inputs[2:])))

    def test_operators_are_in_the_scripted_graph(self):
        graph = str(torch.jit.script(Functions()).inlined_graph)
        for op in ("spattn::ms_deform_attn", "spattn::nsa_compress",
                   "spattn::nsa_selected_attention"):
            self.assertIn(op, graph)

    def test_scripted_refusals_name_the_rule(self):
        scripted = torch.jit.script(Functions())
        inputs = list(functions_inputs())
        inputs[4] = torch.randn(8, 3)  # compression weight for 3 heads, input of 2
        with self.assertRaisesRegex(RuntimeError, "spattn::nsa_compress raised SpattnError: "
                                    "spa_nsa_compress \\(phase 1\\) refused with 161002"):
            scripted(*inputs)
        inputs = list(functions_inputs())
        inputs[0] = inputs[0].to(torch.int16)
        with self.assertRaisesRegex(RuntimeError, "spattn::ms_deform_attn raised TypeError: "
                                    "spattn: value has dtype torch.int16"):
            scripted(*inputs)
        # called from Python, the same refusals keep their type
        with self.assertRaisesRegex(TypeError, "value has dtype torch.int16"):
            Functions()(*inputs)

    def test_saved_modules_load_in_a_fresh_interpreter(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []

            def save(name, module, inputs):
                path = os.path.join(tmp, name)
                with torch.no_grad():
                    out = module(*inputs)
                out = list(out) if isinstance(out, (list, tuple)) else [out]
                torch.jit.save(module, path + ".pt")
                torch.save((inputs, out), path + ".io")
                paths.append(path)

            save("functions_scripted", torch.jit.script(Functions()), functions_inputs())
            save("layer_scripted", torch.jit.script(layer()), layer_inputs())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # lists turned into constants by the trace
                save("functions_traced", torch.jit.trace(Functions(), functions_inputs()),
                     functions_inputs())
                save("layer_traced", torch.jit.trace(layer(), layer_inputs()), layer_inputs())
            env = dict(os.environ)
            env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(spattn.__file__)))
            run = subprocess.run([sys.executable, "-c", LOADER] + paths, cwd=tmp, env=env,
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(run.stdout.split(), ["loaded", "functions_scripted", "loaded",
                                                  "layer_scripted", "loaded", "functions_traced",
                                                  "loaded", "layer_traced"])


class TestAutocast(unittest.TestCase):
    """Under torch.autocast the projections hand over value in the autocast
    dtype and locations / weights in float32: the op takes them as they are
    and answers in value's dtype."""

    def mixed(self, dtype):
        value, loc, attn = msda_inputs()
        proj = torch.nn.Linear(8, 8)
        try:
            with torch.autocast("cpu", dtype=dtype):
                v = proj(value)
                self.assertEqual(v.dtype, dtype)
                eager = spattn.ms_deform_attn(v, SHAPES, STARTS, loc, attn)
                op = torch.ops.spattn.ms_deform_attn(v, SHAPES, STARTS, loc, attn)
                scripted = torch.jit.script(Functions())(v, loc, attn, *functions_inputs()[3:])[0]
        except RuntimeError as e:
            # torch 1.13's CPU autocast takes bfloat16 only: float16 is
            # checked with what autocast would hand over
            if "only support" not in str(e) or dtype == torch.bfloat16:
                raise
            v = proj(value).to(dtype)
            eager = spattn.ms_deform_attn(v, SHAPES, STARTS, loc, attn)
            op = torch.ops.spattn.ms_deform_attn(v, SHAPES, STARTS, loc, attn)
            scripted = torch.jit.script(Functions())(v, loc, attn, *functions_inputs()[3:])[0]
        want = spattn.ms_deform_attn(v.double(), SHAPES, STARTS, loc.double(), attn.double())
        for out in (eager, op, scripted):
            self.assertEqual(out.dtype, dtype)
            self.assertLess(float((out.double() - want).abs().max()),
                            2e-2 * float(want.abs().max()))

    def test_bfloat16(self):
        self.mixed(torch.bfloat16)

    def test_float16(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.mixed(torch.float16)

    def test_layer_trains_under_autocast(self):
        m = layer()
        query, ref, flat, shapes, starts, mask = layer_inputs()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = torch.jit.script(m)(query, ref, flat, shapes, starts, mask)
        self.assertEqual(out.dtype, torch.bfloat16)
        out.float().sum().backward()
        for p in m.parameters():
            self.assertTrue(p.grad is not None and torch.isfinite(p.grad).all())
        self.assertGreater(float(m.sampling_offsets.weight.grad.abs().sum()), 0)


class TestSecondDerivativeOnOperators(unittest.TestCase):
    def assert_refused(self, out, inputs):
        with self.assertRaisesRegex(RuntimeError, "second derivatives are not implemented"):
            torch.autograd.grad(out.sum(), inputs, create_graph=True)

    def test_operator_and_scripted_paths(self):
        v, loc, attn = [t.requires_grad_() for t in msda_inputs()]
        self.assert_refused(torch.ops.spattn.ms_deform_attn(v, SHAPES, STARTS, loc, attn),
                            [v, loc, attn])
        scripted = torch.jit.script(Functions())
        inputs = [t.requires_grad_() if t.is_floating_point() else t for t in functions_inputs()]
        outs = scripted(*inputs)
        for out, leaves in zip(outs[:5], ([0, 1, 2], [0, 1, 2], [3, 4], [5, 6, 7], [5, 6, 7])):
            self.assert_refused(out, [inputs[i] for i in leaves])

    def test_backward_operators_refuse_a_graph(self):
        v, loc, attn = [t.requires_grad_() for t in msda_inputs()]
        grad = torch.rand(2, 5, 16, requires_grad=True)
        with self.assertRaisesRegex(RuntimeError, "ms_deform_attn_backward is not differentiable"):
            torch.ops.spattn.ms_deform_attn_backward(v, SHAPES, STARTS, loc, attn, grad)
        with torch.no_grad():  # called for its values, it runs
            gv, gl, ga = torch.ops.spattn.ms_deform_attn_backward(v, SHAPES, STARTS, loc, attn,
                                                                  grad)
        want = torch.autograd.grad(spattn.ms_deform_attn(v, SHAPES, STARTS, loc, attn),
                                   [v, loc, attn], grad)
        for a, b in zip((gv, gl, ga), want):
            self.assertTrue(torch.equal(a, b))

    def test_forward_mode_refused(self):
        import torch.autograd.forward_ad as fwAD
        v, loc, attn = msda_inputs()
        with fwAD.dual_level():
            dual = fwAD.make_dual(v, torch.ones_like(v))
            with self.assertRaisesRegex(NotImplementedError, "jvp"):
                spattn.ms_deform_attn(dual, SHAPES, STARTS, loc, attn)
            grad = torch.rand(2, 5, 16)
            with self.assertRaisesRegex(RuntimeError, "_backward is not differentiable"):
                torch.ops.spattn.ms_deform_attn_backward(dual, SHAPES, STARTS, loc, attn, grad)


if __name__ == "__main__":
    unittest.main()
