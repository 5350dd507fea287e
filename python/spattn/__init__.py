"""spattn for PyTorch: differentiable CPU operators of the spattn library.

    from spattn import ms_deform_attn, MSDeformAttnFunction, MSDeformAttn
    from spattn import nsa_compress, nsa_selected_attention

Each is an operator of PyTorch's dispatcher (torch.ops.spattn.*, registered
by importing spattn), so models calling them script (torch.jit.script),
trace, save and load (torch.jit.save / load, in any process that imports
spattn) and export to ONNX. CPU tensors of dtype float32, float16, bfloat16
or float64 are passed as they are (views by their strides, no copies). Each
call runs on torch.get_num_threads() threads of a pthread pool kept per
thread count; its workspace comes from torch's allocator and is kept per
calling thread (release_workspace() frees it). reuse_freed_memory() is an
opt-in for training loops: glibc keeps freed memory instead of returning
large blocks to the kernel. A refusal of the library raises SpattnError,
which names the status code and the rule that failed.
"""
from ._lib import LIBRARY_PATH, SpattnError, release_workspace, reuse_freed_memory
from . import _ops, _meta_shapes, _register_onnx_ops  # noqa: F401 (they register)
from .msda import (MSDeformAttn, MSDeformAttnFunction, ms_deform_attn, MultiScaleDeformableAttention,
                   MultiScaleDeformableAttnFunction, multi_scale_deformable_attn_pytorch)
from .nsa import (nsa_compress, nsa_selected_attention, npu_nsa_select_attention_infer,
                  npu_nsa_compress_attention_infer, npu_nsa_compress_infer)

_register_onnx_ops.register(_ops.NAMESPACE)
onnx_export_mode = _register_onnx_ops.onnx_export_mode

__all__ = ["ms_deform_attn", "MSDeformAttnFunction", "MSDeformAttn", "MultiScaleDeformableAttention",
           "MultiScaleDeformableAttnFunction", "multi_scale_deformable_attn_pytorch", "nsa_compress",
           "nsa_selected_attention", "npu_nsa_select_attention_infer", "npu_nsa_compress_attention_infer", "npu_nsa_compress_infer", "SpattnError", "release_workspace", "reuse_freed_memory",
           "LIBRARY_PATH", "onnx_export_mode"]

# the NSA layer (fla's parallel_nsa) and its two attention ops
from .attention import nsa_compress_attention, sliding_window_attention  # noqa: E402
from .nsa_layer import parallel_nsa  # noqa: E402

from .nsa_decode import NSACache  # noqa: E402

__all__ += ["parallel_nsa", "nsa_compress_attention", "sliding_window_attention", "NSACache"]

# DeepSeek sparse attention
from .dsa import npu_lightning_indexer, npu_sparse_flash_attention  # noqa: E402
from .dsa_layer import dsa_attention  # noqa: E402

__all__ += ["npu_lightning_indexer", "npu_sparse_flash_attention", "dsa_attention"]
