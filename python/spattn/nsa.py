"""Native Sparse Attention: compression and selected attention, TND varlen.

Sequences are concatenated along the token dimension; cu_seqlens gives the
cumulative end of each sequence ([e0, e1, ...]; a leading 0 as in
flash-attn's [0, e0, e1, ...] is an empty first sequence, so both forms
work), as an int64 / int32 tensor (in eager code also a list of ints).

The functions here are TorchScript: a scripted model calls the operators
torch.ops.spattn.nsa_compress / nsa_selected_attention (python/spattn/_ops.py).
"""
from typing import List, Optional, Tuple

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
                         return_softmax: bool = False,
                         causal_alignment: str = "auto") -> Tuple[Tensor, Tensor, Tensor]:
    return torch.ops.spattn.nsa_selected_attention(q, k, v, topk_indices, _seqlens(cu_seqlens_q),
                                                   _seqlens(cu_seqlens_kv), scale, block_size,
                                                   causal, causal_alignment)


def _select(q: Tensor, k: Tensor, v: Tensor, topk_indices: Tensor,
            cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor,
            scale: float, block_size: int, causal: bool = False,
            return_softmax: bool = False, causal_alignment: str = "auto") -> Tensor:
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
    position s iff p <= s (both counted from their sequence's start: CANN's
    top-left rule). Where a sequence has fewer queries than keys that
    reading is ambiguous (flash-attn and fla align such queries bottom-right,
    as the newest tokens), so it is refused unless causal_alignment is
    "top_left"; the bottom-right reading is npu_nsa_select_attention_infer's
    and parallel_nsa's with q shorter than k. With
    return_softmax, also the softmax max and sum of the scaled scores,
    [T1, N1] float32 each (float64 for float64 inputs). In TorchScript,
    return_softmax must be a constant."""
    return torch.ops.spattn.nsa_selected_attention(q, k, v, topk_indices, _seqlens(cu_seqlens_q),
                                                   _seqlens(cu_seqlens_kv), scale, block_size,
                                                   causal, causal_alignment)[0]


# One name, two return types, as torch.nn.functional.max_pool2d's
# return_indices: TorchScript picks the function by the constant flag.
nsa_selected_attention = boolean_dispatch(
    arg_name="return_softmax", arg_index=9, default=False, if_true=_select_with_softmax,
    if_false=_select, module_name=__name__, func_name="nsa_selected_attention")


def npu_nsa_select_attention_infer(query: Tensor, key: Tensor, value: Tensor, topk_indices: Tensor,
                                   scale_value: float, head_num: int, key_value_head_num: int,
                                   select_block_size: int, select_block_count: int,
                                   page_block_size: int, layout: str = "BSND",
                                   atten_mask: Optional[Tensor] = None,
                                   block_table: Optional[Tensor] = None,
                                   actual_seq_qlen: Optional[List[int]] = None,
                                   actual_seq_kvlen: Optional[List[int]] = None) -> Tensor:
    """Selected attention of the newest queries of each sequence against its
    KV cache, torch_npu.npu_nsa_select_attention_infer's arguments: query
    BSND [B, S, N1, D] or BSH [B, S, N1 * D] (or TND [T, N1, D] with
    actual_seq_qlen the per-batch query counts), key / value paged
    [blocks, page_block_size, N2 * D] or [.., N2, D] through block_table
    [B, max_blocks] (int32), or contiguous [B, S_max, N2, D] without one;
    topk_indices [B, N2, K] (S = 1), [B, S, N2, K] or [T, N2, K]; -1 selects
    nothing, and so does a block that starts after its query. Query i of a
    batch with S queries stands at position actual_seq_kvlen[b] - S + i and
    attends its selected keys up to there. Any G, D, Dv 1..768, block sizes
    multiples of 16, any page size, float16 / bfloat16 / float32 / float64.
    Inference only (no gradient)."""
    return torch.ops.spattn.nsa_select_attention_infer(
        query, key, value, topk_indices, scale_value, head_num, key_value_head_num,
        select_block_size, select_block_count, page_block_size, layout, atten_mask, block_table,
        actual_seq_qlen, actual_seq_kvlen)


def npu_nsa_compress_attention_infer(query: Tensor, key: Tensor, value: Tensor, scale_value: float,
                                     head_num: int, key_value_head_num: int, select_block_size: int,
                                     select_block_count: int, page_block_size: int,
                                     compress_block_size: int, compress_stride: int,
                                     atten_mask: Optional[Tensor] = None,
                                     block_table: Optional[Tensor] = None,
                                     topk_mask: Optional[Tensor] = None,
                                     actual_seq_qlen: Optional[List[int]] = None,
                                     actual_cmp_seq_kvlen: Optional[List[int]] = None,
                                     actual_sel_seq_kvlen: Optional[List[int]] = None,
                                     layout: str = "TND") -> Tuple[Tensor, Tensor]:
    """Compressed attention of the newest queries of each sequence against
    its cache of compressed keys, and their top-K selection blocks,
    torch_npu.npu_nsa_compress_attention_infer's arguments: query TND
    [T, N1, D] (actual_seq_qlen the per-batch query counts, default one each)
    or BSND [B, S, N1, D]; key / value the compressed keys, paged
    [blocks, page_block_size, N2 * D] or [.., N2, D] through block_table
    [B, max_blocks] (int32), or contiguous [B, C_max, N2, D] without one;
    actual_cmp_seq_kvlen[b] compressed keys per batch. As CANN: with
    atten_mask (its contents unread) query i of S stands at position
    actual_sel_seq_kvlen[b] - S + i and sees compressed key c iff
    c * compress_stride + compress_block_size - 1 <= position; without it
    every key. Returns (attention_out [T, N1, Dv], topk int32 [T, N2, K]):
    the blocks of select_block_size tokens by importance (the softmax summed
    over the group's heads and each block's compressed keys), block 0 and
    the last two always first. Any G, D, Dv up to 768; float16 / bfloat16 /
    float32 / float64. Inference only (no gradient)."""
    return torch.ops.spattn.nsa_compress_attention_infer(
        query, key, value, scale_value, head_num, key_value_head_num, select_block_size,
        select_block_count, page_block_size, compress_block_size, compress_stride, atten_mask,
        block_table, topk_mask, actual_seq_qlen, actual_cmp_seq_kvlen, actual_sel_seq_kvlen, layout)


def npu_nsa_compress_infer(input: Tensor, weight: Tensor, slot_mapping: Tensor, compress_block_size: int,
                           compress_stride: int, page_block_size: int, block_table: Optional[Tensor] = None,
                           actual_seq_len: Optional[List[int]] = None, *, cache: Tensor) -> Tensor:
    """torch_npu.npu_nsa_compress_infer: for each sequence b whose length
    actual_seq_len[b] closes a window (>= compress_block_size, a whole number
    of strides past it), cache[slot_mapping[b]] = sum_j weight[j][n] *
    input row (length - compress_block_size + j), as nsa_compress computes a
    window; every other row of cache is left as it was. input: a paged
    pool [blocks, page_block_size, N, D] through block_table [B, max_blocks]
    (int32), or contiguous [B, S, N, D] without one; weight [block, N];
    slot_mapping int32 [B] (-1: none); cache [R, N, D], written in place and
    returned. float16 / bfloat16 / float32 / float64."""
    return torch.ops.spattn.nsa_compress_infer(input, weight, slot_mapping, compress_block_size,
                                               compress_stride, page_block_size, cache, block_table,
                                               actual_seq_len)
