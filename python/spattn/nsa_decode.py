"""The NSA layer where the queries are the newest tokens of their sequences:
parallel_nsa with q shorter than k (chunked prefill, decode), and NSACache,
which keeps a sequence batch's keys, values and compressed blocks and runs
one decode step per generated token.

Query i of a sequence with Tq queries and Tk keys stands at position
Tk - Tq + i (fla's convention for q shorter than k). Each branch reads what
the token needs, through the library's operators:
- compressed: NsaCompressAttention over the complete blocks before it (the
  compressed keys, O(Tk / block) per token, inherent to the branch), with
  fla's importance and forced current block (attention.compressed_branch's
  construction, one call per sequence);
- selected: spa_nsa_select_infer on the cache in place (O(selected blocks));
- window: spa_nsa_select_infer over the window's rows (O(window)).
Inference only: the branches carry no gradient."""
import torch

from . import _lib
from .attention import Compression
from .nsa import nsa_compress, npu_nsa_select_attention_infer

_WINDOW_BLOCK = 64  # the window's rows in blocks of this many (any multiple of 16)


def _compressed(q, k_cmp, v_cmp, pos0, length, cmp, scale, count):
    """One sequence of `length` tokens: q [n, HQ, K] at positions pos0 ..
    pos0 + n - 1 over its complete windows' compressed keys k_cmp / v_cmp
    [C, H, *] (cmp: the layer's Compression). Returns (o [n, HQ, V], seen
    [n, 1, 1], slots int32 [n, H, count])."""
    n = q.shape[0]
    p = pos0 + torch.arange(n)[:, None]
    return cmp.select(q, k_cmp, v_cmp, [k_cmp.shape[0]], p, p, [n], [length], scale, count)


def _window_rows(pos, starts, window):
    """Per query: its window's first row in the pool and its length."""
    first = torch.clamp(pos - window + 1, min=0)
    return starts + first, pos - first + 1


def _window(q, pool_k, pool_v, rows0, lengths, window, scale):
    """Each query [T, HQ, K] over `lengths[t]` pool rows from rows0[t] (a
    page of one row each): the selected attention on a KV cache, one
    sequence per query."""
    t_all, hq = q.shape[0], q.shape[1]
    hk = pool_k.shape[2]
    table = (rows0[:, None] + torch.arange(window)[None, :]).to(torch.int32)
    nblk = (window + _WINDOW_BLOCK - 1) // _WINDOW_BLOCK
    blocks = torch.arange(nblk)[None, None, :].expand(t_all, hk, nblk)
    used = (lengths + _WINDOW_BLOCK - 1) // _WINDOW_BLOCK
    topk = blocks.masked_fill(blocks >= used[:, None, None], -1).to(torch.int32).contiguous()
    return npu_nsa_select_attention_infer(q, pool_k, pool_v, topk, scale, hq, hk, _WINDOW_BLOCK, nblk, 1,
                                          "TND", block_table=table, actual_seq_qlen=[1] * t_all,
                                          actual_seq_kvlen=[int(x) for x in lengths])


def suffix_layer(q, q_counts, pool_k, pool_v, table, lengths, flat_k, flat_v, seq_start, g_cmp, g_slc,
                 g_swa, compression, count, window_size, scale, cmp=None):
    """The layer's output for TND queries q [Tq, HQ, K] (q_counts per
    sequence) that are the newest tokens of their sequences. The keys:
    pool_k / pool_v, read by the selected attention in place (4-D pools,
    paged through table, or [B, S, H, *] per sequence with table None), and
    the same rows as flat_k / flat_v [R, H, *] (sequence b's row p at
    seq_start[b] + p) for the window and the compression (compression:
    attention.Compression). cmp: each sequence's compressed keys (k, v)
    already made, or None to make them here. Gates [Tq, HQ]. Returns
    o [Tq, HQ, V]."""
    rows, hq, dk = q.shape
    hk = flat_k.shape[1]
    block_size = compression.block
    outs_cmp, seens, slots = [], [], []
    qs = 0
    for b, (n, length) in enumerate(zip(q_counts, lengths)):
        if n == 0:
            continue
        rows_b = slice(seq_start[b], seq_start[b] + length)
        if cmp is not None:
            kc, vc = cmp[b]
        elif compression.windows(length):
            w, l, d = compression.weight, compression.l, compression.d
            kc = nsa_compress(flat_k[rows_b], w, [length], l, d)
            vc = nsa_compress(flat_v[rows_b], w, [length], l, d)
        else:
            kc = flat_k.new_zeros((0, hk, dk))
            vc = flat_v.new_zeros((0,) + tuple(flat_v.shape[1:]))
        o, seen, s = _compressed(q[qs:qs + n], kc, vc, length - n, length, compression, scale, count)
        outs_cmp.append(o)
        seens.append(seen)
        slots.append(s)
        qs += n
    o_cmp, seen = torch.cat(outs_cmp), torch.cat(seens)
    slot = torch.cat(slots)
    if slot.shape[2] == 0:  # nothing to select
        slot = torch.full((rows, hk, 1), -1, dtype=torch.int32)
    o = npu_nsa_select_attention_infer(q, pool_k, pool_v, slot.contiguous(), scale, hq, hk, block_size,
                                       slot.shape[2], pool_k.shape[1], "TND", block_table=table,
                                       actual_seq_qlen=list(q_counts),
                                       actual_seq_kvlen=list(lengths)) * g_slc[..., None]
    if g_cmp is not None:
        o = o + o_cmp * (g_cmp * seen.reshape(rows, 1))[..., None]
    if window_size > 0:
        pos = torch.empty(rows, dtype=torch.int64)
        starts = torch.empty(rows, dtype=torch.int64)
        qs = 0
        for b, (n, length) in enumerate(zip(q_counts, lengths)):
            pos[qs:qs + n] = torch.arange(length - n, length)
            starts[qs:qs + n] = seq_start[b]
            qs += n
        rows0, wlen = _window_rows(pos, starts, window_size)
        o = o + _window(q, flat_k.unsqueeze(1), flat_v.unsqueeze(1), rows0, wlen, window_size,
                        scale) * g_swa[..., None]
    return o


class NSACache:
    """Keys, values and compressed blocks of a batch of sequences for token
    by token generation with the NSA layer (fla's parallel_nsa with g_cmp:
    mean-pooled blocks of block_size, block_counts selected blocks, a window
    of window_size). Buffers for max_len tokens per sequence are made once;
    append() writes each new token's k / v and, when a block completes, its
    compressed key and value (nsa_compress on that block); step() is the
    layer's output for the newest token of each sequence, reading the
    compressed blocks, its selected blocks and its window, never the whole
    cache. k, v rows: [B, n, H, K] / [B, n, H, V]; q and the gates of a step:
    [B, 1, HQ, K] and [B, 1, HQ]. float32 / float16 / bfloat16 / float64."""

    def __init__(self, batch, max_len, kv_heads, head_dim, value_dim, block_size=64, block_counts=16,
                 window_size=0, scale=None, dtype=torch.float32, *, compress_block_size=None,
                 compress_stride=None, compress_weight=None):
        if not isinstance(block_size, int) or block_size < 16 or block_size % 16:
            raise ValueError("spattn: block_size must be a multiple of 16, got %r" % (block_size,))
        self.block_size, self.count, self.window = block_size, block_counts, window_size
        self.scale = head_dim ** -0.5 if scale is None else scale
        self.cmp = Compression(block_size, kv_heads, dtype, compress_block_size, compress_stride,
                               None if compress_weight is None else compress_weight.detach())
        self.k = torch.zeros(batch, max_len, kv_heads, head_dim, dtype=dtype)
        self.v = torch.zeros(batch, max_len, kv_heads, value_dim, dtype=dtype)
        windows = self.cmp.windows(max_len)
        self.k_cmp = torch.zeros(batch, max(windows, 1), kv_heads, head_dim, dtype=dtype)
        self.v_cmp = torch.zeros(batch, max(windows, 1), kv_heads, value_dim, dtype=dtype)
        self.lengths = [0] * batch

    def append(self, k, v):
        """k [B, n, H, K], v [B, n, H, V]: the next n tokens of every sequence."""
        _lib.check_tensor("k", k, 4)
        _lib.check_tensor("v", v, 4)
        batch, n = k.shape[0], k.shape[1]
        if batch != len(self.lengths) or tuple(k.shape[2:]) != tuple(self.k.shape[2:]) \
                or tuple(v.shape[:2]) != (batch, n) or tuple(v.shape[2:]) != tuple(self.v.shape[2:]):
            raise ValueError("spattn: NSACache.append takes k %s and v %s rows [B, n, H, *]; got %s, %s"
                             % (tuple(self.k.shape), tuple(self.v.shape), tuple(k.shape), tuple(v.shape)))
        l, d, w = self.cmp.l, self.cmp.d, self.cmp.weight
        for b in range(batch):
            start = self.lengths[b]
            if start + n > self.k.shape[1]:
                raise ValueError("spattn: NSACache is full (%d tokens)" % self.k.shape[1])
            self.k[b, start:start + n] = k[b]
            self.v[b, start:start + n] = v[b]
            self.lengths[b] = start + n
            for c in range(self.cmp.windows(start), self.cmp.windows(start + n)):  # completed now
                rows = slice(c * d, c * d + l)
                self.k_cmp[b, c] = nsa_compress(self.k[b, rows], w, [l], l, d)[0]
                self.v_cmp[b, c] = nsa_compress(self.v[b, rows], w, [l], l, d)[0]

    def step(self, q, g_cmp, g_slc, g_swa=None):
        """The layer's output for the newest token of each sequence: q
        [B, 1, HQ, K], gates [B, 1, HQ] -> o [B, 1, HQ, V]. append() that
        token's k and v first."""
        _lib.check_tensor("q", q, 4)
        batch, hq = q.shape[0], q.shape[2]
        if batch != len(self.lengths) or q.shape[1] != 1:
            raise ValueError("spattn: NSACache.step takes q [B, 1, HQ, K] for its %d sequences, got %s"
                             % (len(self.lengths), tuple(q.shape)))
        if min(self.lengths) < 1:
            raise ValueError("spattn: NSACache.step: append the token's k and v first")
        if self.window > 0 and g_swa is None:
            raise ValueError("spattn: NSACache.step needs g_swa with a window")
        lmax = self.k.shape[1]
        flat_k = self.k.reshape(batch * lmax, *self.k.shape[2:])
        flat_v = self.v.reshape(batch * lmax, *self.v.shape[2:])
        cmp = [(self.k_cmp[b, :self.cmp.windows(n)], self.v_cmp[b, :self.cmp.windows(n)])
               for b, n in enumerate(self.lengths)]
        with torch.no_grad():
            o = suffix_layer(q.reshape(batch, hq, -1), [1] * batch, self.k, self.v, None, self.lengths,
                             flat_k, flat_v, [b * lmax for b in range(batch)],
                             g_cmp.reshape(batch, hq) if g_cmp is not None else None,
                             g_slc.reshape(batch, hq), g_swa.reshape(batch, hq) if g_swa is not None else None,
                             self.cmp, self.count, self.window, self.scale, cmp=cmp)
        return o.reshape(batch, 1, hq, -1)
