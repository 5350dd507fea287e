"""Native Sparse Attention: compression and selected attention, TND varlen.

Sequences are concatenated along the token dimension; cu_seqlens gives the
cumulative end of each sequence ([e0, e1, ...]; a leading 0 as in
flash-attn's [0, e0, e1, ...] is an empty first sequence, so both forms
work), as an int64 / int32 tensor (in eager code also a list of ints).

The functions here are TorchScript: a scripted model calls the operators
torch.ops.spattn.nsa_compress / nsa_selected_attention (python/spattn/_ops.py).
"""
from typing import Tuple

import torch
from torch import Tensor
from torch._jit_internal import boolean_dispatch


def _seqlens(cu_seqlens: Tensor) -> Tensor:
    """cu_seqlens: a tensor; in eager code also a list or tuple, made an
    int64 tensor here. TorchScript takes tensors (the conversion folds away
    there, which keeps scripted graphs exportable)."""
    if not isinstance(cu_seqlens, Tensor):
        cu_seqlens = torch.tensor(cu_seqlens, dtype=torch.int64)
    return cu_seqlens


def nsa_compress(input: Tensor, weight: Tensor, cu_seqlens: Tensor,
                 block_size: int, stride: int) -> Tensor:
    """NSA compression: every window of block_size tokens (step stride) of each
    sequence becomes one token, out[w, n, :] = sum_j weight[j, n] * input[s_w + j, n, :].
    input [T, N, D], weight [block_size, N] -> [sum of windows, N, D]. Any D >= 1
    and any block_size >= stride >= 1 (the NPU's multiples of 16 are not needed)."""
    return torch.ops.spattn.nsa_compress(input, weight, _seqlens(cu_seqlens), block_size, stride)


def _select_with_softmax(q: Tensor, k: Tensor, v: Tensor, topk_indices: Tensor,
                         cu_seqlens_q: Tensor,
                         cu_seqlens_kv: Tensor, scale: float, block_size: int,
                         causal: bool = False,
                         return_softmax: bool = False) -> Tuple[Tensor, Tensor, Tensor]:
    return torch.ops.spattn.nsa_selected_attention(q, k, v, topk_indices, _seqlens(cu_seqlens_q),
                                                   _seqlens(cu_seqlens_kv), scale, block_size,
                                                   causal)


def _select(q: Tensor, k: Tensor, v: Tensor, topk_indices: Tensor,
            cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor,
            scale: float, block_size: int, causal: bool = False,
            return_softmax: bool = False) -> Tensor:
    """NSA selected attention: each query token attends to the K blocks of
    block_size keys that topk_indices [T1, N2, K] (int32 or int64) names
    (block numbers inside its sequence's keys; query head h uses kv head
    h // (N1 // N2)). A slot of -1 is padding and selects nothing; a row with
    every slot -1 gives out 0 (max -FLT_MAX, sum 0) and no gradient. A
    sequence's key count need not be a multiple of block_size: its last
    block is clipped to the sequence. Any other negative index, or a block
    starting at or after its sequence's end, is refused.
    q [T1, N1, D], k [T2, N2, D], v [T2, N2, Dv] -> out [T1, N1, Dv], any D
    and Dv from 1 to 768. causal: key position p is visible to query
    position s iff p <= s (both counted from their sequence's start). With
    return_softmax, also the softmax max and sum of the scaled scores,
    [T1, N1] float32 each (float64 for float64 inputs). In TorchScript,
    return_softmax must be a constant."""
    return torch.ops.spattn.nsa_selected_attention(q, k, v, topk_indices, _seqlens(cu_seqlens_q),
                                                   _seqlens(cu_seqlens_kv), scale, block_size,
                                                   causal)[0]


# One name, two return types, as torch.nn.functional.max_pool2d's
# return_indices: TorchScript picks the function by the constant flag.
nsa_selected_attention = boolean_dispatch(
    arg_name="return_softmax", arg_index=9, default=False, if_true=_select_with_softmax,
    if_false=_select, module_name=__name__, func_name="nsa_selected_attention")
