"""ONNX export of the spattn operators: every symbolic, in one place.

torch.onnx.export traces a model into torch.ops.spattn.* nodes and maps each
through the symbolic registered here for it. An operator with a runtime's
custom op becomes that node with all of the operator's inputs (multi-scale
deformable attention: mmdeploy's ONNX Runtime op
mmdeploy::MMCVMultiScaleDeformableAttention); one without refuses with an
error that says why. Never the example run's result written as a constant.
A new operator gets its symbolic (or a refusal) in _SYMBOLICS.
"""
import torch
from torch.onnx import symbolic_helper

# The lowest opset torch.onnx writes: a symbolic registered for opset N
# serves every opset from N up.
_FROM_OPSET = 7


def refuse(op):
    raise RuntimeError(
        "spattn: %s has no ONNX operator (no runtime implements it as a custom op), so "
        "torch.onnx.export refuses it rather than writing the example's result as a "
        "constant" % op)


@symbolic_helper.parse_args("v", "v", "v", "v", "v", "i")
def ms_deform_attn(g, value, spatial_shapes, level_start_index, sampling_locations,
                   attention_weights, im2col_step):
    # mmdeploy's inputs in its order, im2col_step as its attribute
    return g.op("mmdeploy::MMCVMultiScaleDeformableAttention", value, spatial_shapes,
                level_start_index, sampling_locations, attention_weights,
                im2col_step_i=im2col_step)


def _refusal(op):
    def symbolic(g, *args):
        return refuse(op)
    return symbolic


_SYMBOLICS = {
    "ms_deform_attn": ms_deform_attn,
    "nsa_compress": _refusal("nsa_compress"),
    "nsa_selected_attention": _refusal("nsa_selected_attention"),
    "nsa_compress_attention": _refusal("nsa_compress_attention"),
    "sliding_window_attention": _refusal("sliding_window_attention"),
    # the backward operators appear in no forward graph; said plainly if they do
    "ms_deform_attn_backward": _refusal("ms_deform_attn_backward"),
    "nsa_compress_backward": _refusal("nsa_compress_backward"),
    "nsa_selected_attention_backward": _refusal("nsa_selected_attention_backward"),
    "nsa_compress_attention_backward": _refusal("nsa_compress_attention_backward"),
    "sliding_window_attention_backward": _refusal("sliding_window_attention_backward"),
}


def register(namespace):
    for name, symbolic in _SYMBOLICS.items():
        torch.onnx.register_custom_op_symbolic("%s::%s" % (namespace, name), symbolic,
                                               _FROM_OPSET)
