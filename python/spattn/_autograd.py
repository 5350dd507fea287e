"""First derivatives only, said at the moment a second one is asked for.

The backward of every spattn function calls the library's grad kernel, which
builds no graph. Under create_graph=True (gradient penalties,
meta-learning) a gradient returned without a graph would make every
second-order term silently zero, so the backward refuses as soon as a graph
is requested through it: autograd runs a backward with grad mode on exactly
when create_graph is set.
"""
import functools

import torch


def first_order_only(backward):
    @functools.wraps(backward)
    def checked(ctx, *grads):
        if torch.is_grad_enabled():
            raise RuntimeError(
                "spattn: second derivatives are not implemented: the backward was run with "
                "create_graph=True, and its gradient would carry no graph (every second-order "
                "term zero)")
        return backward(ctx, *grads)
    return checked
