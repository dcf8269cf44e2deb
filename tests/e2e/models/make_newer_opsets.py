#!/usr/bin/python3
"""Writes the models of e2e.small_models that use ops as opsets 18-25 define them (ONNX 1.13 to
1.20; frontend/NewerOpsets.h), in the ONNX backend-test layout, with numpy references. Debian's
python3-onnx (1.12) knows only opset 17, so the graphs are built with onnx.helper and not run
through onnx.checker; every node is written as the newer opset spells it:

  opset18_ops  (opset 18) x f32 [2,7,4] ->
               ReduceMean-18 (axes input [2], keepdims)          -> r_mean [2,7,1]
               ReduceMax-18 (no axes, keepdims 0: every dim)      -> r_max []
               ReduceL2-18 (no axes, noop_with_empty_axes 1)     -> r_noop [2,7,4] (identity)
               ReduceSumSquare-18 (axes input [0, -1], keepdims 0) -> r_sq [7]
               Split-18 (axis 1, num_outputs 3: 3, 3, 1)          -> s0, s1, s2
               Pad-18 (axes input [-1], pads [1, 2], reflect)     -> p [2,7,7]
               Reshape [2,14,2] -> GroupNormalization-18 (7 groups, scale and bias per
               group)                                             -> gn [2,14,2]
               Mish-18                                            -> mish [2,7,4]
               GroupNorm as PyTorch writes it up to opset 17 (Reshape [2,1,-1] ->
               InstanceNormalization -> Reshape -> Mul gamma [7,1] -> Add beta [7,1]),
               which --tandem-canonicalize makes one GroupNormalization -> gn_pattern [2,7,4]
  opset21_ops  (opset 21) x f32 [1,2,4,4] ->
               AveragePool-19 (dilations [1,1] written out, 2x2, stride 2) -> pool [1,2,2,2]
               Resize-18 (nearest, scales 2, antialias 0 and keep_aspect_ratio_policy
               stretch written out)                              -> up [1,2,8,8]
               QuantizeLinear-21 (block_size 0, u8 zero point 10) -> DequantizeLinear-21
               -> Cast-19 (saturate 1, to f32)                   -> qdq [1,2,4,4]
               Gelu-20 (approximate tanh)                         -> gelu [1,2,4,4]
               Unsqueeze -> DFT-20 (axis input absent: -2)        -> dft [1,2,4,4,2]
               GridSample-20 (mode linear, 3x3 grid)              -> grid [1,2,3,3]
               Reshape [1,8,2,2] -> GroupNormalization-21 (4 groups, scale and bias per
               channel)                                           -> gn [1,8,2,2]
               Pad-19 (mode wrap, pads [0,0,1,2, 0,0,2,1])        -> wrap [1,2,7,7]
  opset23_ops  (opset 23) x f32 [2,3,8] -> RMSNormalization-23 over the last dim (scale [8])
               and over the last two (axis 1, scale [1, 8], epsilon 1e-3)

Usage:  /usr/bin/python3 make_newer_opsets.py DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
import onnx


def save(out_dir, name, opset, nodes, inits, x, outputs):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in outputs],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = os.path.join(out_dir, name)
    d = os.path.join(path, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(path, "model.onnx"))
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    for k, (n, v) in enumerate(outputs):
        with open(os.path.join(d, "output_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(v, np.float32), n).SerializeToString())


def ints(name, v):
    return numpy_helper.from_array(np.array(v, np.int64), name)


def opset18_ops(out_dir, rng):
    x = rng.standard_normal((2, 7, 4)).astype(np.float32)
    nodes = [
        helper.make_node("ReduceMean", ["x", "ax2"], ["r_mean"], keepdims=1),
        helper.make_node("ReduceMax", ["x"], ["r_max"], keepdims=0),
        helper.make_node("ReduceL2", ["x"], ["r_noop"], noop_with_empty_axes=1),
        helper.make_node("ReduceSumSquare", ["x", "ax0m1"], ["r_sq"], keepdims=0),
        helper.make_node("Split", ["x"], ["s0", "s1", "s2"], axis=1, num_outputs=3),
        helper.make_node("Pad", ["x", "pads", "", "axm1"], ["p"], mode="reflect"),
        helper.make_node("Reshape", ["x", "shape14"], ["x14"]),
        helper.make_node("GroupNormalization", ["x14", "gscale", "gbias"], ["gn"], num_groups=7,
                         epsilon=1e-3),
        helper.make_node("Mish", ["x"], ["mish"]),
        helper.make_node("Reshape", ["x", "shape_g1"], ["xg"]),
        helper.make_node("InstanceNormalization", ["xg", "ones1", "zeros1"], ["ng"]),
        helper.make_node("Reshape", ["ng", "shape_x"], ["nb"]),
        helper.make_node("Mul", ["nb", "pgamma"], ["nm"]),
        helper.make_node("Add", ["nm", "pbeta"], ["gn_pattern"]),
    ]
    pgamma = rng.uniform(0.5, 1.5, (7, 1)).astype(np.float32)
    pbeta = rng.uniform(-0.5, 0.5, (7, 1)).astype(np.float32)
    gscale = rng.uniform(0.5, 1.5, 7).astype(np.float32)
    gbias = rng.uniform(-0.5, 0.5, 7).astype(np.float32)
    inits = [ints("ax2", [2]), ints("ax0m1", [0, -1]), ints("pads", [1, 2]), ints("axm1", [-1]),
             ints("shape14", [2, 14, 2]), numpy_helper.from_array(gscale, "gscale"),
             numpy_helper.from_array(gbias, "gbias"), ints("shape_g1", [2, 1, -1]),
             ints("shape_x", [2, 7, 4]), numpy_helper.from_array(np.ones(1, np.float32), "ones1"),
             numpy_helper.from_array(np.zeros(1, np.float32), "zeros1"),
             numpy_helper.from_array(pgamma, "pgamma"), numpy_helper.from_array(pbeta, "pbeta")]
    xd = x.astype(np.float64)
    outputs = [
        ("r_mean", xd.mean(axis=2, keepdims=True)),
        ("r_max", x.max()),
        ("r_noop", x),
        ("r_sq", (xd * xd).sum(axis=(0, 2))),
        ("s0", x[:, 0:3]), ("s1", x[:, 3:6]), ("s2", x[:, 6:7]),
        ("p", np.pad(x, ((0, 0), (0, 0), (1, 2)), mode="reflect")),
        ("gn", group_norm(xd.reshape(2, 14, 2), 7, np.repeat(gscale, 2), np.repeat(gbias, 2),
                          1e-3)),
        ("mish", xd * np.tanh(np.log1p(np.exp(xd)))),
        ("gn_pattern", group_norm(xd, 1, pgamma[:, 0], pbeta[:, 0], 1e-5)),
    ]
    save(out_dir, "opset18_ops", 18, nodes, inits, x, outputs)


def group_norm(x, groups, scale, bias, eps):
    """GroupNormalization-21 in f64: statistics per (n, group), scale and bias per channel."""
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    y = (g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y.reshape(x.shape) * scale.reshape(shape) + bias.reshape(shape)


def grid_sample_linear(x, g):
    """GridSample, mode linear, padding zeros, align_corners 0, for [N, C, H, W]."""
    n, c, h, w = x.shape
    out = np.zeros((n, c) + g.shape[1:3])
    for b in range(n):
        for i in range(g.shape[1]):
            for j in range(g.shape[2]):
                ix = ((g[b, i, j, 0] + 1) * w - 1) / 2
                iy = ((g[b, i, j, 1] + 1) * h - 1) / 2
                x0, y0 = int(np.floor(ix)), int(np.floor(iy))
                for yy, wy in ((y0, y0 + 1 - iy), (y0 + 1, iy - y0)):
                    for xx, wx in ((x0, x0 + 1 - ix), (x0 + 1, ix - x0)):
                        if 0 <= yy < h and 0 <= xx < w:
                            out[b, :, i, j] += wy * wx * x[b, :, yy, xx]
    return out


def opset21_ops(out_dir, rng):
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    nodes = [
        helper.make_node("AveragePool", ["x"], ["pool"], kernel_shape=[2, 2], strides=[2, 2],
                         dilations=[1, 1]),
        helper.make_node("Resize", ["x", "", "scales"], ["up"], mode="nearest", antialias=0,
                         keep_aspect_ratio_policy="stretch"),
        helper.make_node("QuantizeLinear", ["x", "qs", "qz"], ["q"], block_size=0),
        helper.make_node("DequantizeLinear", ["q", "qs", "qz"], ["dq"], block_size=0),
        helper.make_node("Cast", ["dq"], ["qdq"], to=TensorProto.FLOAT, saturate=1),
        helper.make_node("Gelu", ["x"], ["gelu"], approximate="tanh"),
        helper.make_node("Unsqueeze", ["x", "ax4"], ["x5"]),
        helper.make_node("DFT", ["x5"], ["dft"]),
        helper.make_node("GridSample", ["x", "g"], ["grid"], mode="linear"),
        helper.make_node("Reshape", ["x", "shape8"], ["x8"]),
        helper.make_node("GroupNormalization", ["x8", "cscale", "cbias"], ["gn"], num_groups=4),
        helper.make_node("Pad", ["x", "wpads"], ["wrap"], mode="wrap"),
    ]
    scale = np.float32(0.05)
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(np.array(scale), "qs"),
             numpy_helper.from_array(np.array(10, np.uint8), "qz"), ints("ax4", [4])]
    g = rng.uniform(-1.1, 1.1, (1, 3, 3, 2)).astype(np.float32)
    inits.append(numpy_helper.from_array(g, "g"))
    cscale = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    cbias = rng.uniform(-0.5, 0.5, 8).astype(np.float32)
    inits += [ints("shape8", [1, 8, 2, 2]), numpy_helper.from_array(cscale, "cscale"),
              numpy_helper.from_array(cbias, "cbias"), ints("wpads", [0, 0, 1, 2, 0, 0, 2, 1])]
    xd = x.astype(np.float64)
    pool = xd.reshape(1, 2, 2, 2, 2, 2).mean(axis=(3, 5))
    up = x.repeat(2, axis=2).repeat(2, axis=3)
    q = np.clip(np.rint(x / scale) + 10, 0, 255)
    qdq = ((q - 10) * scale).astype(np.float32)
    gelu = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))
    f = np.fft.fft(xd, axis=3)
    dft = np.stack([f.real, f.imag], axis=-1)
    outputs = [("pool", pool), ("up", up), ("qdq", qdq), ("gelu", gelu), ("dft", dft),
               ("grid", grid_sample_linear(xd, g.astype(np.float64))),
               ("gn", group_norm(xd.reshape(1, 8, 2, 2), 4, cscale, cbias, 1e-5)),
               ("wrap", np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), mode="wrap"))]
    save(out_dir, "opset21_ops", 21, nodes, inits, x, outputs)


def opset23_ops(out_dir, rng):
    """(opset 23) x f32 [2,3,8] -> RMSNormalization-23 (axis -1, scale [8])  -> rms [2,3,8]
                                 -> RMSNormalization-23 (axis 1, scale [1, 8]) -> rms2 [2,3,8]"""
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    s1 = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    s2 = rng.uniform(0.5, 1.5, (1, 8)).astype(np.float32)
    nodes = [helper.make_node("RMSNormalization", ["x", "s1"], ["rms"]),
             helper.make_node("RMSNormalization", ["x", "s2"], ["rms2"], axis=1, epsilon=1e-3)]
    inits = [numpy_helper.from_array(s1, "s1"), numpy_helper.from_array(s2, "s2")]
    xd = x.astype(np.float64)
    rms = xd / np.sqrt((xd * xd).mean(axis=-1, keepdims=True) + 1e-5) * s1
    rms2 = xd / np.sqrt((xd * xd).mean(axis=(1, 2), keepdims=True) + 1e-3) * s2
    save(out_dir, "opset23_ops", 23, nodes, inits, x, [("rms", rms), ("rms2", rms2)])


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(1818)
    opset18_ops(out_dir, rng)
    opset21_ops(out_dir, rng)
    opset23_ops(out_dir, rng)


if __name__ == "__main__":
    main()
