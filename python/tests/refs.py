"""Independent float64 formulations the binding is checked against, and the
helpers the test files share. Written from the formulas (spec/nsa.md 1.2 and
3.2; mmcv's multi_scale_deformable_attn_pytorch for MSDA), in plain PyTorch.
"""
import torch
import torch.nn.functional as F

FLT_MAX = torch.finfo(torch.float32).max
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# |got - ref| <= ATOL * max|ref| + RTOL * |ref|: the f32 sums of the library
# (ATOL) and the one rounding of each output to its dtype (RTOL).
TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2),
       torch.float64: (1e-12, 1e-12)}


def cumulative(lengths):
    """Sequence lengths as the cumulative ends the NSA ops take."""
    out, end = [], 0
    for n in lengths:
        end += n
        out.append(end)
    return out


def msda_ref(value, shapes, starts, loc, attn):
    """grid_sample path: bilinear, zero padding, align_corners=False, so a
    location x in [0, 1] samples x*W - 0.5 in pixels."""
    shapes, starts = torch.as_tensor(shapes), torch.as_tensor(starts)
    bs, _, nh, c = value.shape
    _, nq, _, nl, npts, _ = loc.shape
    grids = 2 * loc - 1
    samples = []
    for lvl in range(nl):
        h, w, s = int(shapes[lvl, 0]), int(shapes[lvl, 1]), int(starts[lvl])
        v = value[:, s:s + h * w].permute(0, 2, 3, 1).reshape(bs * nh, c, h, w)
        g = grids[:, :, :, lvl].permute(0, 2, 1, 3, 4).reshape(bs * nh, nq, npts, 2)
        samples.append(F.grid_sample(v, g, mode="bilinear", padding_mode="zeros",
                                     align_corners=False))  # [bs*nh, c, nq, npts]
    a = attn.permute(0, 2, 1, 3, 4).reshape(bs * nh, 1, nq, nl * npts)
    out = (torch.stack(samples, dim=-2).flatten(-2) * a).sum(-1)  # [bs*nh, c, nq]
    return out.view(bs, nh * c, nq).transpose(1, 2)


def compress_ref(x, w, ends, block, stride):
    """out[O_b + i, n, :] = sum_j w[j, n] * x[start_b + i*stride + j, n, :]."""
    outs, start = [], 0
    for e in ends:
        xb = x[start:e]
        if xb.shape[0] >= block:
            win = xb.unfold(0, block, stride)  # [windows, N, D, block]
            outs.append(torch.einsum("wndj,jn->wnd", win, w))
        start = e
    return torch.cat(outs) if outs else x.new_zeros((0,) + tuple(x.shape[1:]))


def select_ref(q, k, v, topk, ends_q, ends_kv, scale, block, causal):
    """Softmax over the K*block selected keys of each (token, kv head), the G
    query heads of a group sharing them; masked scores -FLT_MAX (a fully
    masked row averages its values). A -1 slot selects nothing and the keys
    of a partial last block past the sequence's end are not attended (not
    even by a fully masked row); a row attending nothing gives out 0, max
    -FLT_MAX, sum 0. Returns out, max, sum."""
    t1, n1, _ = q.shape
    t2, n2, dv = k.shape[0], k.shape[1], v.shape[2]
    g, kc = n1 // n2, topk.shape[2]
    rows = torch.empty(t1, n2, kc * block, dtype=torch.int64)
    pos = torch.empty(t1, dtype=torch.int64)  # query position inside its sequence
    kv_start = torch.empty(t1, dtype=torch.int64)
    kv_len = torch.empty(t1, dtype=torch.int64)
    qs = ks = 0
    for qe, ke in zip(ends_q, ends_kv):
        pos[qs:qe] = torch.arange(qe - qs)
        kv_start[qs:qe] = ks
        kv_len[qs:qe] = ke - ks
        qs, ks = qe, ke
    slots = topk.long()
    rows[:] = (slots[..., None] * block + torch.arange(block)).flatten(2)
    key_pos = rows.clone()
    attended = (slots[..., None] >= 0).expand(-1, -1, -1, block).flatten(2)
    attended = attended & (key_pos < kv_len[:, None, None])
    rows = (rows + kv_start[:, None, None]).clamp(0, t2 - 1)  # unattended rows: any row
    heads = torch.arange(n2)[None, :, None]
    ksel, vsel = k[rows, heads], v[rows, heads]  # [T1, N2, K*bs, D|Dv]
    z = scale * torch.einsum("tngd,tnsd->tngs", q.reshape(t1, n2, g, -1), ksel)
    if causal:
        masked = key_pos > pos[:, None, None]
        z = z.masked_fill(masked[:, :, None, :], -FLT_MAX)
    z = z.masked_fill(~attended[:, :, None, :], -float("inf"))
    m = z.max(dim=-1).values
    empty = m == -float("inf")
    e = torch.exp(z - torch.where(empty, torch.zeros_like(m), m)[..., None])
    lsum = e.sum(-1)
    p = e / torch.where(empty, torch.ones_like(lsum), lsum)[..., None]
    out = torch.einsum("tngs,tnse->tnge", p, vsel).reshape(t1, n1, dv)
    m = torch.where(empty, torch.full_like(m, -FLT_MAX), m)
    return out, m.reshape(t1, n1), lsum.reshape(t1, n1)


def assert_close(case, what, got, ref, dtype):
    """got (any dtype) against the float64 ref within the dtype's tolerance."""
    atol, rtol = TOL[dtype]
    got = got.detach().double()
    ref = ref.detach().double()
    case.assertEqual(tuple(got.shape), tuple(ref.shape), what)
    case.assertFalse(torch.isnan(got).any().item(), "%s: NaN" % what)
    if ref.numel() == 0:
        return
    bound = atol * ref.abs().max().clamp_min(1e-30) + rtol * ref.abs()
    err = (got - ref).abs()
    bad = err > bound
    if bad.any():
        i = int(torch.argmax((err - bound).flatten()))
        case.fail("%s (%s): %d of %d out of tolerance, worst at %d: got %.8g ref %.8g"
                  % (what, dtype, int(bad.sum()), bad.numel(), i, got.flatten()[i].item(),
                     ref.flatten()[i].item()))


def rand(shape, dtype, lo=-1.0, hi=1.0, gen=None):
    """Uniform values, rounded to dtype (the reference reads the same values)."""
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def strided(t, kind):
    """The same values as a non-contiguous view: 'pad' (a gap after every
    row of the last dim), 'perm' (stored with its first two dims swapped)."""
    if kind == "pad":
        base = torch.zeros(t.shape[:-1] + (t.shape[-1] + 3,), dtype=t.dtype)
        base[..., :t.shape[-1]] = t
        view = base[..., :t.shape[-1]]
    else:
        base = t.transpose(0, 1).contiguous()
        view = base.transpose(0, 1)
    assert not view.is_contiguous() or t.numel() <= 1
    return view
