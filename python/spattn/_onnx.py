"""ONNX export of the spattn operators.

An autograd.Function without a symbolic is inlined by torch.onnx.export:
what it traces is the output allocation, so the exported graph would hold
the example run's result as a constant and ignore its inputs. Every spattn
function therefore has a symbolic: a node of the runtime's custom op where
one exists (multi-scale deformable attention: mmdeploy's
MMCVMultiScaleDeformableAttention), otherwise a refusal that says why.
"""
import torch


def as_value(g, x):
    """An input of the node: graph values as they are; Python sequences
    (spatial shapes given as lists) as int64 constants."""
    if isinstance(x, torch._C.Value):
        return x
    return g.op("Constant", value_t=torch.as_tensor(x, dtype=torch.int64))


def refuse(op):
    raise RuntimeError(
        "spattn: %s has no ONNX operator (no runtime implements it as a custom op), so "
        "torch.onnx.export refuses it rather than writing the example's result as a "
        "constant" % op)
