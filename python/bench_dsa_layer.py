"""spattn.dsa_attention against the dense-masked PyTorch formulation of
DeepSeek-V3.2-Exp's sparse attention step (inference/model.py: the indexer's
scores of every key, the causal mask, topk, an index mask of -inf outside
the selection, the MLA-absorb scores over every key plus that mask,
softmax, P times the latent kv), forward then backward (the gradients of
q, q_rope, kv and k_rope), at DeepSeek-V3.2's shapes: one batch of T tokens
attending causally to themselves (prefill), N1 16 query heads (a
tensor-parallel slice of the model's 128), one latent head of D 512 + rope
64, K 2048, the indexer 64 heads x 128, float32. One line per (T, threads):

  bench_dsa_layer T=4096 ... threads=2 spattn_fwd_ms=... spattn_fwdbwd_ms=... dense_fwd_ms=...
                  dense_fwdbwd_ms=... speedup_fwd=...x speedup_fwdbwd=...x

fwd_ms: the forward of a forward+backward run (the graph recorded);
fwdbwd_ms: the whole run. spattn: median of --runs after a warm-up; dense:
median of --dense-runs after a warm-up. Threads: torch.set_num_threads,
which spattn's calls follow too (each runs on torch.get_num_threads()
threads, python/spattn/_lib.py runner()). The dense formulation is left out
(said on the line) where its [T, N1, T] float32 scores, of which autograd
keeps several, would not fit in --dense-max-gb (default: 60% of the
available memory); its indexer scores are computed in blocks of queries
(the reference's fp8_index kernel does not hold [T, heads, T] either).

The dense formulation's time is its matrix products': Debian's python3-torch
is built on the generic libblas.so.3 (BLAS_INFO=generic; the reference
BLAS there, a few GFLOP/s). With OpenBLAS's libblas.so.3 first on
LD_LIBRARY_PATH (e.g. extracted from the libopenblas0-pthread package) the
line says blas=openblas and the script sets OpenBLAS's threads with
torch's; spattn's own kernels use no BLAS.

  python3 python/bench_dsa_layer.py [--T 4096 16384] [--threads 1 2] [--runs 3] [--dense-runs 1]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spattn  # noqa: E402

N1, D, DR, HI, DI, TOPK = 16, 512, 64, 64, 128, 2048
SCALE = (128 + 64) ** -0.5  # the model's qk_head_dim^-0.5


def inputs(t, gen):
    def r(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen) * scale).requires_grad_()

    q, q_rope = r(1, t, N1, D, scale=D ** -0.5), r(1, t, N1, DR, scale=DR ** -0.5)
    kv, k_rope = r(1, t, 1, D), r(1, t, 1, DR)
    index_q, index_k = torch.randn(1, t, HI, DI, generator=gen), torch.randn(1, t, 1, DI, generator=gen)
    weights = torch.randn(1, t, HI, generator=gen) * HI ** -0.5 * DI ** -0.5
    grad = torch.randn(1, t, N1, D, generator=gen)
    return (q, q_rope, kv, k_rope), (index_q, index_k, weights), grad


def spattn_step(leaves, index):
    q, q_rope, kv, k_rope = leaves
    return spattn.dsa_attention(q, kv, q_rope, k_rope, *index, SCALE, sparse_count=TOPK)


def dense_step(leaves, index, block=128):
    """model.py's formulation, dense over every key."""
    q, q_rope, kv, k_rope = leaves
    index_q, index_k, weights = index
    t = q.shape[1]
    mask = torch.full((t, t), float("-inf")).triu_(1)
    with torch.no_grad():  # Indexer: its scores of every key, in blocks of queries
        score = torch.empty(1, t, t)
        for c in range(0, t, block):
            s = torch.einsum("bshd,btd->bsht", index_q[:, c:c + block], index_k[:, :, 0]).relu_()
            score[:, c:c + block] = (s * weights[:, c:c + block, :, None]).sum(2)
        score += mask
        topk_indices = score.topk(min(TOPK, t), dim=-1)[1]
        index_mask = torch.full((1, t, t), float("-inf")).scatter_(-1, topk_indices, 0)
        index_mask += mask
        del score
    scores = (torch.einsum("bshc,btc->bsht", q, kv[:, :, 0])
              + torch.einsum("bshr,btr->bsht", q_rope, k_rope[:, :, 0])) * SCALE
    scores = scores + index_mask.unsqueeze(2)
    scores = scores.softmax(dim=-1, dtype=torch.float32)
    return torch.einsum("bsht,btc->bshc", scores, kv[:, :, 0])


def timed(step, leaves, index, grad):
    for x in leaves:
        x.grad = None
    start = time.perf_counter()
    out = step(leaves, index)
    mid = time.perf_counter()
    out.backward(grad)
    end = time.perf_counter()
    del out
    return (mid - start) * 1e3, (end - start) * 1e3


def medians(step, leaves, index, grad, runs):
    timed(step, leaves, index, grad)  # warm-up: pages, pool threads
    fwd, total = zip(*(timed(step, leaves, index, grad) for _ in range(runs)))
    return statistics.median(fwd), statistics.median(total)


def blas():
    """The loaded libblas.so.3 ("openblas" or "generic") and a function
    setting its threads (None where it has no such call)."""
    try:
        lib = ctypes.CDLL("libblas.so.3")
    except OSError:
        return "unknown", None
    if hasattr(lib, "openblas_set_num_threads"):
        return "openblas", lib.openblas_set_num_threads
    return "generic", None


def available_gb():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("inf")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--T", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dense-runs", type=int, default=1)
    ap.add_argument("--dense-max-gb", type=float, default=0.6 * available_gb())
    args = ap.parse_args()
    blas_name, blas_threads = blas()
    for t in args.T:
        leaves, index, grad = inputs(t, torch.Generator().manual_seed(t))
        # autograd keeps the [T, N1, T] softmax and the backward makes about four more at once
        dense_gb = 5 * N1 * t * t * 4 / 2**30
        for threads in args.threads:
            torch.set_num_threads(threads)  # spattn's calls run on torch.get_num_threads() threads
            if blas_threads is not None:
                blas_threads(threads)
            sf, sfb = medians(spattn_step, leaves, index, grad, args.runs)
            line = ("bench_dsa_layer T=%d N1=%d D=%d+%d K=%d index=%dx%d dtype=f32 threads=%d blas=%s "
                    "spattn_fwd_ms=%.1f spattn_fwdbwd_ms=%.1f"
                    % (t, N1, D, DR, TOPK, HI, DI, threads, blas_name, sf, sfb))
            if dense_gb > args.dense_max_gb:
                line += (" dense=skipped (its [T, N1, T] float32 scores: about %.1f GB at once, over "
                         "--dense-max-gb %.1f)" % (dense_gb, args.dense_max_gb))
            else:
                df, dfb = medians(dense_step, leaves, index, grad, args.dense_runs)
                line += (" dense_fwd_ms=%.1f dense_fwdbwd_ms=%.1f speedup_fwd=%.2fx speedup_fwdbwd=%.2fx"
                         % (df, dfb, df / sf, dfb / sfb))
            print(line, flush=True)


if __name__ == "__main__":
    main()
