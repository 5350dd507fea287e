"""Graphs for `make ort-check`: exported by the binding's torch.onnx.export,
with their inputs and two expected outputs, for tests/ort/test_ort.c to run
in ONNX Runtime with libspattn_ort.so.

  python3 tests/ort/export_cases.py OUTDIR
  python3 tests/ort/export_cases.py --bench OUTDIR    (make ort-bench's cases)

Each case is OUTDIR/<case>/: model.onnx, one raw little-endian file per graph
input (in the graph's input order), torch.bin (the PyTorch module's output,
float32) and ref.bin (an independent float64 formulation: the module's own
parameters in double, the deformable sampling by grid_sample, written as
float64), and case.txt listing them:
  input <name> <f32|f16|i64> <rank> <dims...>
  output <f32|f16> <rank> <dims...>

Cases: a Deformable-DETR encoder layer (spattn.MSDeformAttn, LayerNorm, FFN)
at three levels with padding-free random inputs and random projections, as
mmdeploy's node and lowered to GridSample (spattn.onnx_export_mode);
mmcv's MultiScaleDeformableAttention module (batch_first); and the operator
alone in float16.
"""
import os
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "tests"))
import spattn  # noqa: E402
from refs import msda_ref  # noqa: E402

SHAPES = torch.tensor([[12, 16], [6, 8], [3, 4]])
STARTS = torch.tensor([0, 192, 240])
KEYS = 252


class EncoderLayer(torch.nn.Module):
    """Deformable-DETR's DeformableTransformerEncoderLayer (post-norm, ReLU
    FFN, no dropout at inference)."""

    def __init__(self, d_model=64, d_ffn=128, n_levels=3, n_heads=4, n_points=4):
        super().__init__()
        self.self_attn = spattn.MSDeformAttn(d_model, n_levels, n_heads, n_points)
        self.norm1 = torch.nn.LayerNorm(d_model)
        self.linear1 = torch.nn.Linear(d_model, d_ffn)
        self.linear2 = torch.nn.Linear(d_ffn, d_model)
        self.norm2 = torch.nn.LayerNorm(d_model)

    def forward(self, src, pos, reference_points, spatial_shapes, level_start_index):
        src2 = self.self_attn(src + pos, reference_points, src, spatial_shapes, level_start_index)
        src = self.norm1(src + src2)
        return self.norm2(src + self.linear2(F.relu(self.linear1(src))))


def sampling_ref(m, query, ref_points, value, heads, levels, points, shapes, starts):
    """The attention of Deformable-DETR's and mmcv's modules in float64 after
    the value projection (value [N, keys, heads, C]): offsets and weights
    from the query, locations from the reference points, sampling by
    grid_sample, the output projection."""
    n, lq, _ = query.shape
    off = F.linear(query, m.sampling_offsets.weight.double(), m.sampling_offsets.bias.double())
    off = off.view(n, lq, heads, levels, points, 2)
    w = F.linear(query, m.attention_weights.weight.double(), m.attention_weights.bias.double())
    w = w.view(n, lq, heads, levels * points).softmax(-1).view(n, lq, heads, levels, points)
    size = torch.stack([shapes[:, 1], shapes[:, 0]], -1).double()
    loc = ref_points[:, :, None, :, None, :] + off / size[None, None, None, :, None, :]
    out = msda_ref(value, shapes, starts, loc, w)
    return F.linear(out, m.output_proj.weight.double(), m.output_proj.bias.double())


def msda_layer_ref(m, query, ref_points, flat, shapes, starts):
    """MSDeformAttn.forward in float64."""
    value = F.linear(flat, m.value_proj.weight.double(), m.value_proj.bias.double())
    value = value.view(flat.shape[0], flat.shape[1], m.n_heads, m.d_model // m.n_heads)
    return sampling_ref(m, query, ref_points, value, m.n_heads, m.n_levels, m.n_points, shapes, starts)


def encoder_ref(layer, src, pos, ref_points, shapes, starts):
    def ln(x, norm):
        return F.layer_norm(x, x.shape[-1:], norm.weight.double(), norm.bias.double(), norm.eps)

    src2 = msda_layer_ref(layer.self_attn, src + pos, ref_points, src, shapes, starts)
    src = ln(src + src2, layer.norm1)
    hidden = F.relu(F.linear(src, layer.linear1.weight.double(), layer.linear1.bias.double()))
    return ln(src + F.linear(hidden, layer.linear2.weight.double(), layer.linear2.bias.double()),
              layer.norm2)


class MmcvCase(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = spattn.MultiScaleDeformableAttention(embed_dims=64, num_heads=4, num_levels=3,
                                                         num_points=4, batch_first=True)

    def forward(self, query, reference_points, spatial_shapes, level_start_index):
        return self.attn(query, reference_points=reference_points, spatial_shapes=spatial_shapes,
                         level_start_index=level_start_index)


class OpCase(torch.nn.Module):
    def forward(self, value, spatial_shapes, level_start_index, loc, attn):
        return spattn.MSDeformAttnFunction.apply(value, spatial_shapes, level_start_index, loc,
                                                 attn, 64)


def randomise(module, g):
    """Random projections (the initialisation's zero offset weights would
    sample every query at its fan only)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.5 / p.shape[-1] ** 0.5))


CODES = {torch.float32: "f32", torch.float16: "f16", torch.int64: "i64"}


def write_case(out, name, module, names, args, expected, reference, mode="custom_op"):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with warnings.catch_warnings(), spattn.onnx_export_mode(mode):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(args), os.path.join(d, "model.onnx"),
                          opset_version=13 if mode == "custom_op" else 16,
                          input_names=names, output_names=["out"],
                          custom_opsets={"mmdeploy": 1} if mode == "custom_op" else None)
    lines = []
    for n, a in zip(names, args):
        a.detach().contiguous().numpy().tofile(os.path.join(d, n + ".bin"))
        lines.append("input %s %s %d %s" % (n, CODES[a.dtype], a.dim(), " ".join(map(str, a.shape))))
    expected.detach().contiguous().numpy().tofile(os.path.join(d, "torch.bin"))
    reference.detach().double().contiguous().numpy().tofile(os.path.join(d, "ref.bin"))
    lines.append("output %s %d %s" % (CODES[expected.dtype], expected.dim(),
                                      " ".join(map(str, expected.shape))))
    with open(os.path.join(d, "case.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main(out):
    g = torch.Generator().manual_seed(3030)
    torch.set_num_threads(1)
    # Deformable-DETR's encoder layer
    layer = EncoderLayer().eval()
    randomise(layer, g)
    src = torch.randn(2, KEYS, 64, generator=g)
    pos = torch.randn(2, KEYS, 64, generator=g) * 0.1
    ref = torch.rand(2, KEYS, 3, 2, generator=g)
    with torch.no_grad():
        got = layer(src, pos, ref, SHAPES, STARTS)
        want = encoder_ref(layer, src.double(), pos.double(), ref.double(), SHAPES, STARTS)
    names = ["src", "pos", "reference_points", "spatial_shapes", "level_start_index"]
    write_case(out, "encoder", layer, names, [src, pos, ref, SHAPES, STARTS], got, want)
    # the same layer lowered to GridSample (no custom op)
    write_case(out, "encoder_grid_sample", layer, names, [src, pos, ref, SHAPES, STARTS], got, want,
               mode="grid_sample")
    # mmcv's module (dropout off at inference; identity = query)
    mm = MmcvCase().eval()
    randomise(mm, g)
    query = torch.randn(2, KEYS, 64, generator=g)  # self-attention over the levels' pixels
    ref = torch.rand(2, KEYS, 3, 2, generator=g)
    with torch.no_grad():
        got = mm(query, ref, SHAPES, STARTS)
        a = mm.attn
        value = F.linear(query.double(), a.value_proj.weight.double(), a.value_proj.bias.double())
        layer_ref = msda_layer_ref_mmcv(a, query.double(), ref.double(), value)
        want = layer_ref + query.double()
    write_case(out, "mmcv", mm, ["query", "reference_points", "spatial_shapes", "level_start_index"],
               [query, ref, SHAPES, STARTS], got, want)
    # the operator alone, float16
    v = torch.randn(1, KEYS, 2, 8, generator=g).half()
    loc = torch.rand(1, 30, 2, 3, 2, 2, generator=g).half()
    attn = torch.rand(1, 30, 2, 3, 2, generator=g).half()
    with torch.no_grad():
        got = OpCase()(v, SHAPES, STARTS, loc, attn)
        want = msda_ref(v.double(), SHAPES, STARTS, loc.double(), attn.double())
    write_case(out, "op_f16", OpCase(), ["value", "spatial_shapes", "level_start_index",
                                         "sampling_locations", "attention_weights"],
               [v, SHAPES, STARTS, loc, attn], got, want)


def msda_layer_ref_mmcv(a, query, ref_points, value):
    """mmcv's MultiScaleDeformableAttention.forward in float64, before the
    identity is added (value: the projected query)."""
    value = value.view(value.shape[0], value.shape[1], a.num_heads, -1)
    return sampling_ref(a, query, ref_points, value, a.num_heads, a.num_levels, a.num_points, SHAPES,
                        STARTS)


def bench(out):
    """make ort-bench: the DETR encoder shape of bench/op_msda.c (batch 1, 8
    heads of 32 channels, levels 100x150, 50x75, 25x38, 13x19, 4 points,
    19947 queries and keys), the operator alone and a whole encoder layer
    (d_model 256, FFN 1024), each as mmdeploy's node and lowered to
    GridSample. Inputs and the PyTorch output only (no float64 formulation:
    ref.bin holds the PyTorch output, widened)."""
    g = torch.Generator().manual_seed(3031)
    torch.set_num_threads(1)
    shapes = torch.tensor([[100, 150], [50, 75], [25, 38], [13, 19]])
    sizes = shapes[:, 0] * shapes[:, 1]
    starts = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    keys = int(sizes.sum())
    v = torch.rand(1, keys, 8, 32, generator=g) * 2 - 1
    loc = torch.rand(1, keys, 8, 4, 4, 2, generator=g)
    attn = torch.rand(1, keys, 8, 4, 4, generator=g)
    names = ["value", "spatial_shapes", "level_start_index", "sampling_locations", "attention_weights"]
    with torch.no_grad():
        got = OpCase()(v, shapes, starts, loc, attn)
    for mode, name in (("custom_op", "bench_op"), ("grid_sample", "bench_op_grid_sample")):
        write_case(out, name, OpCase(), names, [v, shapes, starts, loc, attn], got, got, mode=mode)
    layer = EncoderLayer(d_model=256, d_ffn=1024, n_levels=4, n_heads=8, n_points=4).eval()
    randomise(layer, g)
    src = torch.randn(1, keys, 256, generator=g)
    pos = torch.randn(1, keys, 256, generator=g) * 0.1
    ref = torch.rand(1, keys, 4, 2, generator=g)
    names = ["src", "pos", "reference_points", "spatial_shapes", "level_start_index"]
    with torch.no_grad():
        got = layer(src, pos, ref, shapes, starts)
    for mode, name in (("custom_op", "bench_encoder"), ("grid_sample", "bench_encoder_grid_sample")):
        write_case(out, name, layer, names, [src, pos, ref, shapes, starts], got, got, mode=mode)


if __name__ == "__main__":
    if sys.argv[1] == "--bench":
        bench(sys.argv[2])
    else:
        main(sys.argv[1])
