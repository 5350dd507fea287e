"""Shape functions of the spattn operators (their Meta kernels): outputs of
the shapes and dtypes the CPU kernels return, without data, for meta tensors
and FakeTensor tracing (torch.compile, torch.export). nsa_compress has none:
its output rows depend on the values of cu_seqlens."""
import torch

from . import _library as L


def _empty(shape, dtype):
    return torch.empty(tuple(int(x) for x in shape), dtype=dtype, device="meta")


def _stat_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _likes(*tensors):
    return tuple(torch.empty_like(t, device="meta") for t in tensors)


@L.meta("ms_deform_attn")
def _msda(value, shapes, starts, loc, attn, im2col_step=64):
    return _empty((value.shape[0], loc.shape[1], value.shape[2] * value.shape[3]), value.dtype)


@L.meta("ms_deform_attn_backward")
def _msda_backward(value, shapes, starts, loc, attn, grad):
    return _likes(value, loc, attn)


@L.meta("nsa_compress_backward")
def _compress_backward(grad, x, weight, cu_seqlens, block_size, stride):
    return _likes(x, weight)


def _attention(q, v, lanes=(8,)):
    """out [T, N1, Dv] and the statistics [T, N1, *lanes] (CANN's 8 copies
    for compressed attention; one for the others)."""
    t, n1 = q.shape[0], q.shape[1]
    stat = (t, n1) + tuple(lanes)
    return (_empty((t, n1, v.shape[-1]), q.dtype), _empty(stat, _stat_dtype(q.dtype)),
            _empty(stat, _stat_dtype(q.dtype)))


@L.meta("nsa_selected_attention")
def _select(q, k, v, topk, cu_q, cu_kv, scale, block_size, causal=False, alignment="auto"):
    return _attention(q, v, ())


@L.meta("sliding_window_attention")
def _swa(q, k, v, window, cu, scale, window_type):
    return _attention(q, v, ())


@L.meta("nsa_selected_attention_backward")
def _select_backward(grad, q, k, v, *rest):
    return _likes(q, k, v)


@L.meta("sliding_window_attention_backward")
def _swa_backward(grad, q, k, v, *rest):
    return _likes(q, k, v)


@L.meta("nsa_compress_attention_backward")
def _cattn_backward(grad, q, k, v, *rest):
    return _likes(q, k, v)


@L.meta("nsa_compress_attention")
def _cattn(q, k, v, scale, head_num, l, d, ls, kc, *rest):
    out, mx, sm = _attention(q, v)
    return out, _empty((q.shape[0], k.shape[1], kc), torch.int32), mx, sm


def _value_dim(value, kv_heads):
    return value.shape[-1] // kv_heads if value.dim() == 3 else value.shape[3]


@L.meta("nsa_select_attention_infer")
def _select_infer(query, key, value, topk, scale, head_num, kv_heads, block, count, page,
                  layout="BSND", *rest):
    dv = _value_dim(value, kv_heads)
    if layout == "BSH":
        return _empty((query.shape[0], query.shape[1], head_num * dv), query.dtype)
    if layout == "BSND":
        return _empty((query.shape[0], query.shape[1], head_num, dv), query.dtype)
    return _empty((query.shape[0], head_num, dv), query.dtype)


@L.meta("nsa_compress_attention_infer")
def _cattn_infer(query, key, value, scale, head_num, kv_heads, block, count, page, l, d, mask=None,
                 table=None, topk_mask=None, sq=None, scmp=None, ssel=None, layout="TND"):
    dv = _value_dim(value, kv_heads)
    lead = tuple(query.shape[:-2])
    return _empty(lead + (head_num, dv), query.dtype), _empty(lead + (kv_heads, count), torch.int32)


@L.meta("nsa_compress_infer")
def _compress_infer(x, weight, slots, l, d, page, cache, *rest):
    return cache


@L.meta("npu_lightning_indexer")
def _lightning_indexer(query, key, weights, sq=None, skv=None, table=None, layout_query="BSND",
                       layout_key="BSND", sparse_count=2048, sparse_mode=3, pre=2**63 - 1,
                       nxt=2**63 - 1, return_value=False):
    lead = tuple(query.shape[:-2])
    shape = lead + (key.shape[-2], sparse_count)
    return (_empty(shape, torch.int32),
            _empty(shape if return_value else (0,), query.dtype))


@L.meta("npu_lightning_indexer_backward")
def _lightning_indexer_backward(grad_values, query, key, weights, sparse_indices, sq=None, skv=None,
                                table=None, layout_query="BSND", layout_key="BSND", sparse_mode=3):
    dk = _empty((0,), query.dtype) if layout_key == "PA_BSND" else _likes(key)[0]  # pages: none
    return _likes(query)[0], dk, _likes(weights)[0]


@L.meta("npu_sparse_flash_attention")
def _sparse_flash_attention(query, key, value, sparse_indices, scale_value, table=None, sq=None,
                            skv=None, query_rope=None, key_rope=None, sparse_block_size=1,
                            layout_query="BSND", layout_kv="BSND", sparse_mode=3, pre=2**63 - 1,
                            nxt=2**63 - 1, attention_mode=0, return_softmax_lse=False):
    lead = tuple(query.shape[:-2])
    n1, n2 = query.shape[-2], key.shape[-2]
    out = _empty(lead + (n1, value.shape[-1]), query.dtype)
    if not return_softmax_lse:
        stat = (0,)
    elif len(lead) == 2:  # BSND: [B, N2, S1, G]
        stat = (lead[0], n2, lead[1], n1 // max(n2, 1))
    else:  # TND: [N2, T1, G]
        stat = (n2, lead[0], n1 // max(n2, 1))
    return out, _empty(stat, _stat_dtype(query.dtype)), _empty(stat, _stat_dtype(query.dtype))


@L.meta("npu_sparse_flash_attention_backward")
def _sparse_flash_attention_backward(grad_out, query, key, value, sparse_indices, scale_value,
                                     attention_out, softmax_max, softmax_sum, table=None, sq=None,
                                     skv=None, query_rope=None, key_rope=None, sparse_block_size=1,
                                     layout_query="BSND", layout_kv="BSND", sparse_mode=3,
                                     merge_value=False):
    def empty():
        return _empty((0,), query.dtype)

    rope = query_rope is not None
    dq, dqr = _likes(query), (_likes(query_rope) if rope else (empty(),))
    if layout_kv == "PA_BSND":  # the pages get no gradient
        return dq + (empty(), empty()) + dqr + (empty(),)
    return (dq + _likes(key) + ((empty(),) if merge_value else _likes(value)) + dqr
            + (_likes(key_rope) if rope else (empty(),)))
