"""The PyTorch binding against the pure-PyTorch paths and against the library
called directly, at the shapes of the C benchmark (bench/op_*.c), in one
process: one line per op,

  pybench op=msda dtype=f32 shape=bench threads=2 fwd_ms=... fwdbwd_ms=... lib_fwd_ms=...
          lib_fwdbwd_ms=... torch_fwd_ms=... torch_fwdbwd_ms=... binding_vs_lib=...% ...

fwd_ms / fwdbwd_ms: the autograd op (forward; forward then backward), as a
model calls it: new outputs each call. lib_*: phase 2 of the op and of its
grad on outputs and workspace allocated once, as bench/ times them (the C
benchmark's figure, measured here in the same process). torch_*: the pure
PyTorch formulation (grid_sample for MSDA; unfold/einsum and a gather-based
softmax, in token chunks, for NSA). Medians of BENCH_RUNS (default 7) after a
warm-up, the four spattn timings taken in turn round after round (the host
is shared: its load drifts); the PyTorch paths, 20-100x slower, of
BENCH_TORCH_RUNS (default 3; 0 leaves them out).

With glibc's default malloc every output larger than 32 MB is fresh memory
from the kernel, whose first touch costs a page fault per page (the pure
PyTorch path pays the same): BENCH_MALLOC=reuse sets glibc to keep and reuse
freed memory instead (mallopt: no mmap, no trim; what jemalloc or tcmalloc,
which PyTorch's CPU tuning guide recommends, do by design), so that the
figures show the binding's own cost.

  python3 python/bench.py [op ...]   BENCH_DTYPE="f32 bf16" BENCH_THREADS=2 BENCH_MALLOC=reuse
  python3 python/bench.py call_overhead   the binding's cost per call, in microseconds
  python3 python/bench.py nsa_layer       spattn.parallel_nsa forward+backward and its parts:
          pybench op=nsa_layer ... fwdbwd_ms=... compress_ms=... cattn_select_ms=... slc_ms=...
          swa_ms=... rest_ms=... (missing=<symbols> where the library lacks an op)
"""
import ctypes
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spattn  # noqa: E402
from spattn import _lib  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
TORCH_RUNS = int(os.environ.get("BENCH_TORCH_RUNS", "3"))
MALLOC = [os.environ.get("BENCH_MALLOC", "default")]


def interleaved_ms(fns, runs=RUNS):
    """Median ms of each of fns, timed in turn round after round, so that a
    shared host's drifting load weighs on all of them alike."""
    for fn in fns:
        fn()  # warm-up
    times = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times):
            start = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - start) * 1e3)
    return [statistics.median(ts) for ts in times]


def median_ms(fn, runs=RUNS):
    fn()  # warm-up: pages, pool threads, caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class Direct:
    """Phase 1 once, then phase 2 timed alone on outputs and a workspace
    allocated once: what bench/ measures, through the same library."""

    def __init__(self, phase1, args, tensors):
        self.args, self.tensors = args, tensors  # what the executor points into stays alive
        self.ex = _lib.Executor()
        size = ctypes.c_uint64()
        st = phase1(*args, ctypes.byref(size), ctypes.byref(self.ex))
        assert st == 0, st
        self.ws = torch.empty(max(size.value, 1), dtype=torch.uint8)
        self.size = size.value
        self.runner = _lib.runner()

    def __call__(self):
        st = _lib._executor_run(self.ws.data_ptr(), self.size, ctypes.byref(self.ex), self.runner)
        assert st == 0, st


def fwd_bwd(fn, inputs, grad):
    ins = [t.detach().requires_grad_() for t in inputs]
    out = fn(*ins)
    (out[0] if isinstance(out, tuple) else out).backward(grad)


# ---- NsaCompress: T 65536 (4 sequences), N 4, D 128, block 32, stride 16 ----
def compress_torch(x, w, ends, block, stride):
    outs, start = [], 0
    for e in ends:
        outs.append(torch.einsum("wndj,jn->wnd", x[start:e].unfold(0, block, stride), w))
        start = e
    return torch.cat(outs)


def bench_nsa_compress(dt):
    t, n, d, block, stride = 65536, 4, 128, 32, 16
    ends = [t // 4, t // 2, 3 * t // 4, t]
    x = torch.rand(t, n, d).to(dt) * 2 - 1
    w = torch.rand(block, n).to(dt) * 2 - 1
    y = spattn.nsa_compress(x, w, ends, block, stride)
    grad = torch.rand(y.shape).to(dt) * 2 - 1
    seq, keep = _lib.int_array(ends)
    dsc = _lib.describe
    dx, dw = torch.empty_like(x), torch.empty_like(w)
    fwd = Direct(_lib.nsa_compress_ws, (dsc(x), dsc(w), seq, b"TND", block, stride, 0, dsc(y)),
                 (x, w, y, keep))
    bwd = Direct(_lib.nsa_compress_grad_ws, (dsc(grad), dsc(x), dsc(w), seq, block, stride, 0,
                                             b"TND", dsc(dx), dsc(dw)), (grad, x, w, dx, dw, keep))
    ours = lambda *a: spattn.nsa_compress(*a, ends, block, stride)  # noqa: E731
    theirs = lambda *a: compress_torch(*a, ends, block, stride)  # noqa: E731
    return "bench", ours, theirs, (x, w), grad, fwd, bwd


# ---- NsaSelectedAttention: bench_half, one sequence T 2048, N1 32, N2 2,
# D = Dv = 128, block 64, K 16 distinct random blocks ----
def select_torch(q, k, v, topk, block, scale, chunk=256):
    """Gather-based softmax over the selected keys, token chunk by chunk so
    that the gathered keys fit in memory; backward when q requires grad."""
    t1, n1, _ = q.shape
    n2 = k.shape[1]
    g = n1 // n2
    heads = torch.arange(n2)[None, :, None]
    outs = []
    for c0 in range(0, t1, chunk):
        c1 = min(c0 + chunk, t1)
        rows = (topk[c0:c1].long()[..., None] * block + torch.arange(block)).flatten(2)
        ksel, vsel = k[rows, heads], v[rows, heads]
        z = scale * torch.einsum("tngd,tnsd->tngs", q[c0:c1].reshape(c1 - c0, n2, g, -1), ksel)
        p = torch.softmax(z.float(), dim=-1).to(q.dtype)
        outs.append(torch.einsum("tngs,tnse->tnge", p, vsel).reshape(c1 - c0, n1, -1))
    return torch.cat(outs)


def select_torch_fwd_bwd(q, k, v, topk, block, scale, grad, chunk=256):
    """The same, with each chunk's backward run before the next chunk's
    forward (the graph of all chunks at once would not fit)."""
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    for c0 in range(0, q.shape[0], chunk):
        c1 = min(c0 + chunk, q.shape[0])
        select_torch(q[c0:c1], k, v, topk[c0:c1], block, scale, chunk).backward(grad[c0:c1])


def bench_nsa_select(dt):
    t, n1, n2, d, block, kc = 2048, 32, 2, 128, 64, 16
    gen = torch.Generator().manual_seed(4)
    q, k, v = ((torch.rand(t, n, d, generator=gen) * 2 - 1).to(dt) for n in (n1, n2, n2))
    topk = torch.rand(t, n2, t // block, generator=gen).argsort(-1)[..., :kc].to(torch.int32)
    scale = 1 / 11.3137
    out, mx, sm = spattn.nsa_selected_attention(q, k, v, topk, [t], [t], scale, block,
                                                return_softmax=True)
    mx8, sm8 = mx._base, sm._base  # the [T, N1, 8] buffers the library wrote
    grad = (torch.rand(out.shape, generator=gen) * 2 - 1).to(dt)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    seq, keep = _lib.int_array([t])
    dsc = _lib.describe
    fwd = Direct(_lib.nsa_select_ws, (dsc(q), dsc(k), dsc(v), dsc(topk), None, seq, seq, scale,
                                      n1, b"TND", 0, block, kc, dsc(mx8), dsc(sm8), dsc(out),
                                      _lib.workers()),
                 (q, k, v, topk, mx8, sm8, out, keep))
    bwd = Direct(_lib.nsa_select_grad_ws, (dsc(q), dsc(k), dsc(v), dsc(out), dsc(grad), dsc(mx8),
                                           dsc(sm8), dsc(topk), seq, seq, None, scale, block, kc,
                                           n1, b"TND", 0, dsc(dq), dsc(dk), dsc(dv)),
                 (q, k, v, out, grad, mx8, sm8, topk, dq, dk, dv, keep))
    ours = lambda a, b, c: spattn.nsa_selected_attention(a, b, c, topk, [t], [t], scale, block)  # noqa: E731
    theirs = lambda a, b, c: select_torch(a, b, c, topk, block, scale)  # noqa: E731
    theirs.fwd_bwd = lambda: select_torch_fwd_bwd(q, k, v, topk, block, scale, grad)
    return "bench_half", ours, theirs, (q, k, v), grad, fwd, bwd


# ---- MSDA: the Deformable-DETR encoder, bs 2, 8 heads of 32, 4 levels, 4
# points, every pixel a query, locations as the encoder samples them ----
LEVELS = [(100, 150), (50, 75), (25, 38), (13, 19)]


def encoder_locations(bs, nh, npts, gen):
    """Each query a pixel of its level, sampling (p+1) cells away in
    direction 2*pi*h/nh on every level, jittered by +-0.5 cell (bench/op_msda.c)."""
    refs = []
    for h, w in LEVELS:
        y, x = torch.meshgrid(torch.arange(h, dtype=torch.float64) + 0.5,
                              torch.arange(w, dtype=torch.float64) + 0.5, indexing="ij")
        refs.append(torch.stack([x.flatten() / w, y.flatten() / h], -1))
    ref = torch.cat(refs)  # [nq, 2]
    angle = 2 * math.pi * torch.arange(nh, dtype=torch.float64) / nh
    dirs = torch.stack([angle.cos(), angle.sin()], -1)
    dirs = dirs / dirs.abs().max(-1, keepdim=True).values  # [nh, 2]
    cells = dirs[:, None, :] * (torch.arange(npts, dtype=torch.float64) + 1)[None, :, None]
    wh = torch.tensor([[w, h] for h, w in LEVELS], dtype=torch.float64)  # [nl, 2]
    jitter = torch.rand(bs, ref.shape[0], nh, len(LEVELS), npts, 2, generator=gen,
                        dtype=torch.float64) - 0.5
    loc = (ref[None, :, None, None, None, :]
           + (cells[None, None, :, None, :, :] + jitter) / wh[None, None, None, :, None, :])
    return loc


def msda_torch(value, shapes, starts, loc, attn):
    try:
        return _msda_torch(value, shapes, starts, loc, attn)
    except RuntimeError:
        if value.dtype == torch.float32:
            raise
        # torch 1.13's CPU grid_sample has no bfloat16: a bf16 model runs it in f32
        out = _msda_torch(value.float(), shapes, starts, loc.float(), attn.float())
        return out.to(value.dtype)


def _msda_torch(value, shapes, starts, loc, attn):
    bs, _, nh, c = value.shape
    _, nq, _, nl, npts, _ = loc.shape
    grids, samples = 2 * loc - 1, []
    for lvl, ((h, w), s) in enumerate(zip(shapes.tolist(), starts.tolist())):
        v = value[:, s:s + h * w].permute(0, 2, 3, 1).reshape(bs * nh, c, h, w)
        g = grids[:, :, :, lvl].permute(0, 2, 1, 3, 4).reshape(bs * nh, nq, npts, 2)
        samples.append(F.grid_sample(v, g, mode="bilinear", padding_mode="zeros",
                                     align_corners=False))
    a = attn.permute(0, 2, 1, 3, 4).reshape(bs * nh, 1, nq, nl * npts)
    out = (torch.stack(samples, dim=-2).flatten(-2) * a).sum(-1)
    return out.view(bs, nh * c, nq).transpose(1, 2)


def bench_msda(dt):
    bs, nh, c, npts = 2, 8, 32, 4
    gen = torch.Generator().manual_seed(2)
    shapes = torch.tensor(LEVELS)
    areas = shapes[:, 0] * shapes[:, 1]
    starts = torch.cat([torch.zeros(1, dtype=torch.int64), areas.cumsum(0)[:-1]])
    nk = int(areas.sum())
    value = (torch.rand(bs, nk, nh, c, generator=gen) * 2 - 1).to(dt)
    loc = encoder_locations(bs, nh, npts, gen).to(dt)
    attn = (torch.rand(bs, nk, nh, len(LEVELS), npts, generator=gen) * 2 - 1).to(dt)
    out = spattn.ms_deform_attn(value, shapes, starts, loc, attn)
    grad = (torch.rand(out.shape, generator=gen) * 2 - 1).to(dt)
    gv, gl, ga = torch.empty_like(value), torch.empty_like(loc), torch.empty_like(attn)
    dsc = _lib.describe
    fwd = Direct(_lib.msda_ws, (dsc(value), dsc(shapes), dsc(starts), dsc(loc), dsc(attn),
                                dsc(out)), (value, shapes, starts, loc, attn, out))
    bwd = Direct(_lib.msda_grad_ws, (dsc(value), dsc(shapes), dsc(starts), dsc(loc), dsc(attn),
                                     dsc(grad), dsc(gv), dsc(gl), dsc(ga)),
                 (value, shapes, starts, loc, attn, grad, gv, gl, ga))
    ours = lambda v, lo, a: spattn.ms_deform_attn(v, shapes, starts, lo, a)  # noqa: E731
    theirs = lambda v, lo, a: msda_torch(v, shapes, starts, lo, a)  # noqa: E731
    return "bench", ours, theirs, (value, loc, attn), grad, fwd, bwd


OPS = {"nsa_compress": bench_nsa_compress, "nsa_select": bench_nsa_select, "msda": bench_msda}


def _msda_call(v: torch.Tensor, shapes: torch.Tensor, starts: torch.Tensor, loc: torch.Tensor,
               a: torch.Tensor) -> torch.Tensor:
    return spattn.ms_deform_attn(v, shapes, starts, loc, a)


# ---- the whole NSA layer (spattn.parallel_nsa, fla's signature): T 4096, HQ 16,
# H 1, D 128, block 64, S 16, window 512; forward+backward of the layer, then
# of its parts alone on the same tensors: compression of K and V; compressed
# attention with the selection (one op; cattn_ms is the branch less the
# compression); selected attention on the blocks the layer selects; sliding
# window. rest_ms: the layer less the parts (gates, reshapes, autograd) ----
def bench_nsa_layer(dt, t=4096, hq=16, h=1, d=128, block=64, count=16, window=512):
    from spattn import attention
    gen = torch.Generator().manual_seed(21)
    q, k, v = ((torch.rand(1, t, n, d, generator=gen) * 2 - 1).to(dt) for n in (hq, h, h))
    gates = [torch.rand(1, t, hq, generator=gen).to(dt) for _ in range(3)]
    grad = (torch.rand(1, t, hq, d, generator=gen) * 2 - 1).to(dt)
    scale, seqs, ends = d ** -0.5, [(0, t)], [t]
    qf, kf, vf = q[0], k[0], v[0]
    weight = torch.full((block, h), 1.0 / block, dtype=dt)
    cmp = attention.Compression(block, h, dt, weight=weight)
    kc_grad = (torch.rand(t // block, h, d, generator=gen) * 2 - 1).to(dt)

    def layer():
        ins = [x.detach().requires_grad_() for x in [q, k, v] + gates]
        spattn.parallel_nsa(*ins, block_counts=count, block_size=block,
                            window_size=window).backward(grad)

    def compress():
        kk, vv = kf.detach().requires_grad_(), vf.detach().requires_grad_()
        spattn.nsa_compress(kk, weight, ends, block, block).backward(kc_grad)
        spattn.nsa_compress(vv, weight, ends, block, block).backward(kc_grad)

    def branch():
        a, b, c = (x.detach().requires_grad_() for x in (qf, kf, vf))
        out = attention.compressed_branch(a, b, c, cmp, seqs, scale, count)[0]
        out.backward(grad[0])

    def selected():
        a, b, c = (x.detach().requires_grad_() for x in (qf, kf, vf))
        spattn.nsa_selected_attention(a, b, c, topk, ends, ends, scale, block,
                                      causal=True).backward(grad[0])

    def swa():
        a, b, c = (x.detach().requires_grad_() for x in (qf, kf, vf))
        spattn.sliding_window_attention(a, b, c, window, ends, scale).backward(grad[0])

    parts, missing = [("compress", compress)], []
    if _lib.nsa_cattn_ws is not None:
        with torch.no_grad():
            topk = attention.compressed_branch(qf, kf, vf, cmp, seqs, scale, count)[2]
        parts.append(("branch", branch))
    else:
        # the selected attention timed on the current and previous S-1 blocks
        # (what a causal selection attends, in size)
        missing.append("spa_nsa_compress_attention")
        cur = torch.arange(t) // block
        topk = (cur[:, None] - torch.arange(count)[None, :]).clamp_min(-1)
        topk = topk.to(torch.int32)[:, None, :].expand(t, h, count)
    parts.append(("slc", selected))
    if _lib.swa_ws is not None:
        parts.append(("swa", swa))
    else:
        missing.append("spa_swa")
    if not missing:
        parts.insert(0, ("layer", layer))
    times = dict(zip([n for n, _ in parts], interleaved_ms([f for _, f in parts], min(RUNS, 5))))
    if "branch" in times:
        times["cattn_select"] = times.pop("branch") - times["compress"]
    nan = float("nan")
    rest = times["layer"] - sum(x for n, x in times.items() if n != "layer") if not missing else nan
    print("pybench op=nsa_layer dtype=%s shape=T%d,HQ%d,H%d,D%d,block%d,S%d,window%d threads=%d "
          "malloc=%s fwdbwd_ms=%.1f %s rest_ms=%.1f%s"
          % ({v: k for k, v in DTYPES.items()}[dt], t, hq, h, d, block, count, window,
             torch.get_num_threads(), MALLOC[0], times.get("layer", nan),
             " ".join("%s_ms=%.1f" % (n, times.get(n, nan))
                      for n in ("compress", "cattn_select", "slc", "swa")), rest,
             " missing=" + ",".join(missing) if missing else ""), flush=True)


OPS["nsa_layer"] = bench_nsa_layer


def bench_nsa_decode(dt, hq=16, h=1, d=128, block=64, count=16, window=512, l=32, stride=16):
    """One generated token through the whole NSA layer (NSACache.step: the
    compressed keys (the paper's windows of l 32 every d 16), 16 selected
    blocks, the window) at contexts of 8k and 32k, against the forward of
    parallel_nsa over the whole prefix (what a decode loop without a cache
    recomputes per token)."""
    gen = torch.Generator().manual_seed(22)
    kw = dict(compress_block_size=l, compress_stride=stride)
    for t in (8192, 32768):
        q, k, v = ((torch.rand(1, t, n, d, generator=gen) * 2 - 1).to(dt) for n in (hq, h, h))
        gates = [torch.rand(1, t, hq, generator=gen).to(dt) for _ in range(3)]
        cache = spattn.NSACache(1, t, h, d, d, block_size=block, block_counts=count,
                                window_size=window, dtype=dt, **kw)
        cache.append(k, v)
        last = [x[:, -1:] for x in [q] + gates]

        def step():
            cache.step(*last)

        def prefix():
            with torch.no_grad():
                spattn.parallel_nsa(q, k, v, *gates, block_counts=count, block_size=block,
                                    window_size=window, **kw)

        step_ms = median_ms(step, 9)
        prefix_ms = median_ms(prefix, 1)
        print("pybench op=nsa_decode dtype=%s shape=ctx%d,HQ%d,H%d,D%d,block%d,l%d,d%d,S%d,window%d "
              "threads=%d step_ms=%.3f prefix_fwd_ms=%.1f prefix_over_step=%.0fx"
              % ({v2: k2 for k2, v2 in DTYPES.items()}[dt], t, hq, h, d, block, l, stride, count, window,
                 torch.get_num_threads(), step_ms, prefix_ms, prefix_ms / step_ms), flush=True)


OPS["nsa_decode"] = bench_nsa_decode


def call_overhead():
    """What the binding adds to a call whatever its size: ms_deform_attn on a
    4x4 map (a few microseconds of work) against phase 2 alone; also the same
    forward from a TorchScript function (the interpreter calling the
    operator)."""
    shapes, starts = torch.tensor([[4, 4]]), torch.tensor([0])
    v, loc, a = torch.rand(1, 16, 1, 8), torch.rand(1, 32, 1, 1, 1, 2), torch.rand(1, 32, 1, 1, 1)
    out = spattn.ms_deform_attn(v, shapes, starts, loc, a)
    dsc = _lib.describe
    direct = Direct(_lib.msda_ws, (dsc(v), dsc(shapes), dsc(starts), dsc(loc), dsc(a), dsc(out)),
                    (v, shapes, starts, loc, a, out))
    scripted_call = torch.jit.script(_msda_call)

    def forward():
        with torch.no_grad():
            spattn.ms_deform_attn(v, shapes, starts, loc, a)

    def scripted():
        with torch.no_grad():
            scripted_call(v, shapes, starts, loc, a)

    ins = [t.clone().requires_grad_() for t in (v, loc, a)]
    grad = torch.rand(out.shape)

    def both():
        o = spattn.ms_deform_attn(ins[0], shapes, starts, ins[1], ins[2])
        torch.autograd.grad(o, ins, grad)

    f, lib, fb, sf = interleaved_ms([forward, direct, both, scripted], 2001)
    print("pybench op=call_overhead threads=%d fwd_us=%.1f lib_phase2_us=%.1f fwdbwd_us=%.1f "
          "binding_us_per_fwd=%.1f scripted_fwd_us=%.1f"
          % (torch.get_num_threads(), 1e3 * f, 1e3 * lib, 1e3 * fb, 1e3 * (f - lib), 1e3 * sf),
          flush=True)


def run(op, dtname):
    dt = DTYPES[dtname]
    if op in ("nsa_layer", "nsa_decode"):  # print their own lines
        return OPS[op](dt)
    shape, ours, theirs, inputs, grad, fwd, bwd = OPS[op](dt)
    def forward():
        with torch.no_grad():
            ours(*inputs)

    f, fb, lf, lb = interleaved_ms([forward, lambda: fwd_bwd(ours, inputs, grad), fwd, bwd])
    tf = tfb = float("nan")  # BENCH_TORCH_RUNS=0: the binding and the library only
    if TORCH_RUNS > 0:
        with torch.no_grad():
            tf = median_ms(lambda: theirs(*inputs), TORCH_RUNS)
        tfb_fn = getattr(theirs, "fwd_bwd", None) or (lambda: fwd_bwd(theirs, inputs, grad))
        tfb = median_ms(tfb_fn, TORCH_RUNS)
    print("pybench op=%s dtype=%s shape=%s threads=%d malloc=%s fwd_ms=%.2f fwdbwd_ms=%.2f lib_fwd_ms=%.2f "
          "lib_fwdbwd_ms=%.2f torch_fwd_ms=%.1f torch_fwdbwd_ms=%.1f binding_vs_lib_fwd=%.0f%% "
          "binding_vs_lib_fwdbwd=%.0f%% speedup_fwd=%.1fx speedup_fwdbwd=%.1fx"
          % (op, dtname, shape, torch.get_num_threads(), MALLOC[0], f, fb, lf, lf + lb, tf, tfb,
             100 * lf / f, 100 * (lf + lb) / fb, tf / f, tfb / fb), flush=True)


def main(argv):
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    if MALLOC[0] == "reuse" and not spattn.reuse_freed_memory():
        print("python/bench.py: mallopt refused; BENCH_MALLOC ignored", file=sys.stderr)
    ops = argv or list(OPS)
    if ops == ["call_overhead"]:
        call_overhead()
        return 0
    for op in ops:
        if op not in OPS:
            print("python/bench.py: no op %s (%s)" % (op, ", ".join(OPS)), file=sys.stderr)
            return 1
    for dtname in os.environ.get("BENCH_DTYPE", "f32").split():
        for op in ops:
            run(op, dtname)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
