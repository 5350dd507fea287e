"""make demo's PyTorch line: ms_deform_attn forward + backward through the
binding on a small Deformable-DETR encoder shape, checked against the
grid_sample path in float64 and timed against it in float32."""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spattn  # noqa: E402


def grid_sample_path(value, shapes, starts, loc, attn):
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


def fwd_bwd(fn, inputs, grad, shapes, starts):
    ins = [t.detach().requires_grad_() for t in inputs]
    start = time.perf_counter()
    out = fn(ins[0], shapes, starts, ins[1], ins[2])
    out.backward(grad)
    return time.perf_counter() - start, [out.detach()] + [t.grad for t in ins]


def main():
    torch.manual_seed(0)
    shapes = torch.tensor([[32, 32], [16, 16]])
    starts = torch.tensor([0, 1024])
    bs, nh, c, nq, nl, npts = 1, 8, 32, 1280, 2, 4
    value = torch.rand(bs, 1280, nh, c) * 2 - 1
    loc = torch.rand(bs, nq, nh, nl, npts, 2)
    attn = torch.rand(bs, nq, nh, nl, npts)
    grad = torch.rand(bs, nq, nh * c) * 2 - 1
    inputs = (value, loc, attn)
    ours = min(fwd_bwd(spattn.ms_deform_attn, inputs, grad, shapes, starts)[0] for _ in range(3))
    theirs = min(fwd_bwd(grid_sample_path, inputs, grad, shapes, starts)[0] for _ in range(3))
    _, got = fwd_bwd(spattn.ms_deform_attn, inputs, grad, shapes, starts)
    _, ref = fwd_bwd(grid_sample_path, [t.double() for t in inputs], grad.double(), shapes, starts)
    err = max(float(((g.double() - r).abs().max() / r.abs().max())) for g, r in zip(got, ref))
    ok = "ok" if err < 1e-4 else "FAIL"
    print("%-20s %-5s %-28s %-4s max rel %.1e   %8.3f ms  %6.1fx grid_sample"
          % ("torch ms_deform_attn", "f32", "fwd+bwd bs=1 32x32 16x16 8x32", ok, err,
             ours * 1e3, theirs / ours))
    return 0 if ok == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
