"""float64 formulations of the NSA layer (fla's parallel_nsa semantics) and of
its attention parts, written from the semantics alone, in dense masked
PyTorch math per sequence, differentiable by torch autograd in every input.

The layer, for each sequence of n tokens, query token t (0-based inside its
sequence), query head hq, kv head h = hq // G:
- compressed keys and values: the mean of each complete block of BS tokens
  (or, configured, sum_j w[j, h] x[c d + j] over windows of l tokens every
  d); query t sees compressed key c iff c d + l - 1 <= t (c < (t+1)//BS for
  fla's l = d = BS); a query that sees none gets o_cmp = 0;
- importance of block c for (t, h): the sum over the G query heads of h of
  the compressed softmax probability of c (configured: of the windows, each
  times its overlap with block c in strides, the paper's double sum), for
  c < t//BS; the current block
  t//BS counts 1 per head (G in all: no other block can exceed it, and it
  ranks first); later blocks are never selected; the top S blocks by
  descending importance, ties to the lower block, -1 padded;
  with a tensor of counts, slots at or past a token's count are unused;
- selected attention: softmax over the keys of the selected blocks (a block
  listed twice counts twice) that are at or before t;
- sliding window: softmax over the keys max(0, t-W+1) .. t;
- o = o_slc * g_slc + o_cmp * g_cmp + o_swa * g_swa.
"""
import torch


def masked_softmax(s, allowed, weight=None):
    """Softmax of s over the last dim restricted to allowed (weight: a
    multiplicity per key); a row with nothing allowed gives 0."""
    if s.shape[-1] == 0:
        return s.new_zeros(s.shape)
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    if weight is not None:
        e = e * weight
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


def sequences(total, cu_seqlens, batch, length):
    """(start, end) rows of each sequence in the [B*T] token order."""
    if cu_seqlens is None:
        return [(b * length, (b + 1) * length) for b in range(batch)]
    cu = [int(x) for x in cu_seqlens]
    if cu[0] != 0:
        cu = [0] + cu
    assert cu[-1] == total
    return list(zip(cu[:-1], cu[1:]))


def compressed_attention(q, k, v, block, scale, l=None, d=None, weight=None):
    """One sequence: q [n, HQ, K], k/v [n, H, *] -> (o_cmp [n, HQ, V], p
    [n, HQ, C]). Window c (of l tokens every d; fla's l = d = block) is
    sum_j weight[j, h] k[c d + j] (weight [l, H], default 1/l: the mean);
    position t sees it iff c d + l - 1 <= t."""
    n, hq, _ = q.shape
    l = block if l is None else l
    d = l if d is None else d
    if weight is None:
        weight = torch.full((l, k.shape[1]), 1.0 / l, dtype=k.dtype)
    g = hq // k.shape[1]
    c = (n - l) // d + 1 if n >= l else 0
    win = torch.arange(c)[:, None] * d + torch.arange(l)[None, :]  # [C, l] token rows
    kc = (k[win] * weight[None, :, :, None]).sum(1).repeat_interleave(g, 1)
    vc = (v[win] * weight[None, :, :, None]).sum(1).repeat_interleave(g, 1)
    pos = torch.arange(n)
    seen = (torch.arange(c)[None, :] * d + l - 1) <= pos[:, None]  # [n, C]
    s = scale * torch.einsum("thd,chd->thc", q, kc)
    p = masked_softmax(s, seen[:, None, :].expand_as(s))
    return torch.einsum("thc,chv->thv", p, vc), p


def select_blocks(p, n, block, heads_kv, count, l=None, d=None):
    """Top `count` blocks per (token, kv head) from the compressed
    probabilities p [n, HQ, C] (detached), -1 padded: [n, H, count]. A
    block's importance: the windows' probabilities, each times its overlap
    with the block in strides (the paper's double sum over l'/d and l/d;
    fla's l = d = block: window j alone)."""
    hq, c = p.shape[1], p.shape[2]
    l = block if l is None else l
    d = l if d is None else d
    g = hq // heads_kv
    nb = -(-n // block)
    pos = torch.arange(n)
    cur = pos // block
    score = torch.full((n, heads_kv, nb), float("-inf"), dtype=torch.float64)
    summed = p.detach().double().reshape(n, heads_kv, g, c).sum(2)  # [n, H, C]
    cs, js = torch.arange(c)[:, None], torch.arange(nb)[None, :]
    lo = torch.maximum(cs * d, js * block)
    hi = torch.minimum(cs * d + l, (js + 1) * block)
    overlap = torch.clamp(hi - lo, min=0).double() / d  # [C, nb], in strides
    per_block = summed @ overlap  # [n, H, nb]
    past = js < cur[:, None]
    score = torch.where(past[:, None, :], per_block, score)
    score[pos, :, cur] = float("inf")  # counts G: first whatever the others
    out = torch.full((n, heads_kv, count), -1, dtype=torch.int64)
    for t in range(n):
        for h in range(heads_kv):
            # descending score, then ascending block: ties to the lower block
            ranked = sorted(range(nb), key=lambda j: (-score[t, h, j].item(), j))
            picks = [j for j in ranked if score[t, h, j] > float("-inf")][:count]
            out[t, h, :len(picks)] = torch.tensor(picks, dtype=torch.int64)
    return out


def selected_attention(q, k, v, slots, block, scale):
    """One sequence: slots [n, H, S] (a negative block or one past the
    sequence: nothing), causal, a block listed twice weighs twice -> [n, HQ, V]."""
    n, hq, _ = q.shape
    hk = k.shape[1]
    g = hq // hk
    nb = -(-n // block)
    valid = (slots >= 0) & (slots < nb)
    onehot = torch.zeros((n, hk, nb + 1), dtype=torch.float64)
    onehot.scatter_add_(2, torch.where(valid, slots, torch.full_like(slots, nb)),
                        valid.double())
    weight = onehot[:, :, :nb].repeat_interleave(block, 2)[:, :, :n]  # [n, H, n keys]
    weight = weight.repeat_interleave(g, 1)
    causal = torch.arange(n)[None, :] <= torch.arange(n)[:, None]  # [t, key]
    allowed = (weight > 0) & causal[:, None, :]
    s = scale * torch.einsum("thd,shd->ths", q, k.repeat_interleave(g, 1))
    p = masked_softmax(s, allowed, weight)
    return torch.einsum("ths,shv->thv", p, v.repeat_interleave(g, 1))


def window_attention(q, k, v, window, scale):
    """One sequence, query t over keys max(0, t-window+1) .. t -> [n, HQ, V]."""
    n, hq, _ = q.shape
    g = hq // k.shape[1]
    t = torch.arange(n)[:, None]
    key = torch.arange(n)[None, :]
    band = (key <= t) & (key > t - window)
    s = scale * torch.einsum("thd,shd->ths", q, k.repeat_interleave(g, 1))
    p = masked_softmax(s, band[:, None, :].expand_as(s))
    return torch.einsum("ths,shv->thv", p, v.repeat_interleave(g, 1))


def nsa_layer_ref(q, k, v, g_cmp, g_slc, g_swa, block_indices=None, block_counts=16,
                  block_size=64, window_size=0, scale=None, cu_seqlens=None, head_first=False,
                  compress_block_size=None, compress_stride=None, compress_weight=None):
    """fla's parallel_nsa semantics in float64. Returns (o, indices): o in
    the inputs' layout, indices [B, T, H, S] (or [B, H, T, S]) the blocks
    selected (from the compressed attention when g_cmp is given, else
    block_indices), before the per-token counts are applied."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    if head_first:
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
        g_cmp, g_slc, g_swa = (None if g is None else g.transpose(1, 2)
                               for g in (g_cmp, g_slc, g_swa))
        if block_indices is not None:
            block_indices = block_indices.transpose(1, 2)
        if isinstance(block_counts, torch.Tensor):
            block_counts = block_counts.transpose(1, 2)
    b, t_len, hq, _ = q.shape
    hk = k.shape[2]
    flat = lambda x: None if x is None else x.reshape((b * t_len,) + tuple(x.shape[2:]))  # noqa: E731
    q, k, v, g_cmp, g_slc, g_swa = (flat(x) for x in (q, k, v, g_cmp, g_slc, g_swa))
    if isinstance(block_counts, torch.Tensor):
        counts = flat(block_counts).long()
        s_max = int(counts.max())
    else:
        counts, s_max = None, int(block_counts)
    if g_cmp is None:
        s_max = block_indices.shape[-1]
    outs, picks = [], []
    for start, end in sequences(b * t_len, cu_seqlens, b, t_len):
        n = end - start
        if n == 0:
            continue
        qs, ks, vs = q[start:end], k[start:end], v[start:end]
        o = 0
        if g_cmp is not None:
            o_cmp, p = compressed_attention(qs, ks, vs, block_size, scale, compress_block_size,
                                            compress_stride, compress_weight)
            o = o + o_cmp * g_cmp[start:end, :, None]
            slots = select_blocks(p, n, block_size, hk, s_max, compress_block_size, compress_stride)
        else:
            slots = flat(block_indices)[start:end].long()
        picks.append(slots)
        limit = counts[start:end, :, None] if counts is not None else int(block_counts)
        unused = torch.arange(slots.shape[-1])[None, None, :] >= limit
        slots = slots.masked_fill(unused, -1)
        o = o + selected_attention(qs, ks, vs, slots, block_size, scale) * g_slc[start:end, :, None]
        if window_size > 0:
            o = o + window_attention(qs, ks, vs, window_size, scale) * g_swa[start:end, :, None]
        outs.append(o)
    o = torch.cat(outs).reshape(b, t_len, hq, -1)
    idx = torch.cat(picks).reshape(b, t_len, hk, -1)
    if head_first:
        o, idx = o.transpose(1, 2), idx.transpose(1, 2)
    return o, idx
