"""The machinery of the spattn operators: one torch.library.Library for the
namespace, kernel registration, the autograd plumbing, errors. The operators
themselves are in _ops.py (which says how to add one).
"""
import sys

import torch
from torch.autograd import forward_ad

NAMESPACE = "spattn"
LIBRARY = torch.library.Library(NAMESPACE, "DEF")  # kept alive: its registrations live with it


def define(schema):
    LIBRARY.define(schema)


def op(name):
    return getattr(getattr(torch.ops, NAMESPACE), name)


def register(name, kernel, key):
    LIBRARY.impl(name, surfacing(name, positional(name, kernel)), key)


def positional(name, kernel):
    """torch 1.13 hands a Python kernel the keyword-only arguments of its
    schema (those after "*") as keywords, and leaves out those equal to their
    default; kernels (and autograd.Function.apply, which takes no keywords)
    get every argument in the schema's order instead."""
    arguments = op(name).default._schema.arguments
    if not any(a.kwarg_only for a in arguments):
        return kernel
    names = [a.name for a in arguments]
    defaults = [a.default_value for a in arguments]

    def ordered(*args, **kwargs):
        rest = [kwargs.get(n, d) for n, d in zip(names[len(args):], defaults[len(args):])]
        return kernel(*args, *rest)
    return ordered


# ---- errors raised by a kernel reach the user with their message ----
# Called from Python (eager, tracing, export), a kernel's exception comes
# back as it is (SpattnError, TypeError, ...). torch 1.13's TorchScript
# interpreter drops the message of an exception raised by a Python kernel
# (its RuntimeError reads "RuntimeError: " and nothing else), but it keeps
# the text of a failed conversion of the kernel's result: so a kernel called
# from the interpreter returns the error as that result, and the user reads
# "Unable to cast [spattn::op raised ...: <the reason>] to Tensor".
_PYTHON_CALLERS = {torch._ops.OpOverloadPacket.__call__.__code__,
                   torch._ops.OpOverload.__call__.__code__}


class _Raised:
    def __init__(self, name, error):
        self.text = "[%s::%s raised %s: %s]" % (NAMESPACE, name, type(error).__name__, error)

    def __str__(self):
        return self.text

    __repr__ = __str__


def surfacing(name, kernel):
    returns = len(op(name).default._schema.returns)

    def surfaced(*args, **kwargs):
        try:
            return kernel(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 (re-raised or returned as the result)
            if sys._getframe(1).f_code in _PYTHON_CALLERS:
                raise
            raised = _Raised(name, e)
            return raised if returns == 1 else (raised,) * returns
    return surfaced


# Tensors of devices PyTorch users commonly hold reach this instead of the
# dispatcher's "could not run with arguments from the backend".
_OTHER_DEVICES = ("CUDA",)

# The shape functions (Meta kernels: outputs of the right shape and dtype,
# no data) that FakeTensor tracing (torch.compile, torch.export) and meta
# tensors call; looked up at call time, so that _meta_shapes.py may define
# them after the CPU kernels.
_META = {}


def cpu(name):
    """Decorator: the function is the operator's CPU kernel."""
    def decorate(kernel):
        register(name, kernel, "CPU")
        for key in _OTHER_DEVICES:
            register(name, cpu_only(name), key)
        register(name, _meta_of(name), "Meta")
        return kernel
    return decorate


def meta(name):
    """Decorator: the function is the operator's shape function."""
    def decorate(kernel):
        _META[name] = kernel
        return kernel
    return decorate


def _meta_of(name):
    def shapes(*args):
        devices = sorted({str(a.device) for a in args if isinstance(a, torch.Tensor)})
        if devices != ["meta"]:
            raise ValueError("spattn: %s::%s got tensors on %s: meta tensors (shapes only) go with "
                             "meta tensors, and spattn runs on CPU tensors only"
                             % (NAMESPACE, name, ", ".join(devices)))
        kernel = _META.get(name)
        if kernel is None:
            raise ValueError("spattn: %s::%s has no shape function: its output's shape depends on "
                             "the values of its arguments, which meta tensors do not hold"
                             % (NAMESPACE, name))
        return kernel(*args)
    return shapes


def cpu_only(name):
    def refuse(*args):
        devices = sorted({str(a.device) for a in args
                          if isinstance(a, torch.Tensor) and a.device.type != "cpu"})
        raise ValueError("spattn: %s::%s got tensors on %s; spattn runs on CPU tensors only"
                         % (NAMESPACE, name, ", ".join(devices)))
    return refuse


def below_autograd(operator, *args, **kwargs):
    """Calls the operator past its autograd kernel (from a Function's forward:
    without this the dispatcher would run the autograd kernel again)."""
    guard = torch._C._AutoDispatchBelowAutograd()
    try:
        return operator(*args, **kwargs)
    finally:
        del guard


def differentiable(name, function):
    """function.apply is the op's autograd kernel: every call records its
    backward (or, with no input requiring a gradient, none)."""
    register(name, function.apply, "Autograd")


def not_differentiable(name, why="second derivatives are not implemented"):
    """Backward operators (and inference-only ones): called with inputs that
    require a gradient under grad mode, or with forward-mode dual tensors (a
    second derivative asked for through the operator itself), they refuse,
    saying why, instead of returning results without a graph or a tangent."""
    operator = op(name)
    arguments = operator.default._schema.arguments
    npos = sum(1 for a in arguments if not a.kwarg_only)

    def kernel(*args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)) or (
                forward_ad._current_level >= 0
                and any(forward_ad.unpack_dual(t).tangent is not None for t in tensors)):
            raise RuntimeError("spattn: %s::%s is not differentiable (%s)" % (NAMESPACE, name, why))
        # the schema's keyword-only arguments (after "*") go by name
        keywords = {a.name: v for a, v in zip(arguments[npos:], args[npos:])}
        return below_autograd(operator, *args[:npos], **keywords)
    register(name, kernel, "Autograd")


def needed(grads, needs):
    """A backward's result: the gradients of the inputs that need one."""
    return tuple(g if need else None for g, need in zip(grads, needs))
