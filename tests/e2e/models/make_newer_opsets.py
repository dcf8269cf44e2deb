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
  weight_only  (opset 21) MatMul / Gemm of DequantizeLinear'd 8-bit and 4-bit constant weights
               (weight_only's docstring)
  matmul_nbits (opset 17 + com.microsoft-1) ONNX Runtime's MatMulNBits, 4 and 8 bits
               (matmul_nbits's docstring); matmul_nbits_more: 2 bits, g_idx (act-order),
               f16 A and scales (its docstring)

Usage:  /usr/bin/python3 make_newer_opsets.py DIR           (the test models)
        /usr/bin/python3 make_newer_opsets.py --bench DIR   (larger ones for benchmarks:
                                                             bench_models)
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
import onnx


def save(out_dir, name, opset, nodes, inits, x, outputs):
    """One model of input x (f32) and f32 outputs."""
    save_io(out_dir, name, opset, nodes, inits, [("x", x)],
            [(k, np.asarray(v, np.float32)) for k, v in outputs])


def save_io(out_dir, name, opset, nodes, inits, inputs, outputs, microsoft=False):
    """One model; inputs and outputs are (name, array) pairs, typed by the arrays' dtypes.
    microsoft: the model imports com.microsoft-1 too (MatMulNBits)."""
    def info(k, v):
        return helper.make_tensor_value_info(k, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[v.dtype],
                                             list(v.shape))
    graph = helper.make_graph(nodes, name, [info(k, v) for k, v in inputs],
                              [info(k, v) for k, v in outputs], inits)
    opsets = [helper.make_opsetid("", opset)]
    if microsoft:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    path = os.path.join(out_dir, name)
    d = os.path.join(path, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(path, "model.onnx"))
    for k, (n, v) in enumerate(inputs):
        with open(os.path.join(d, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())
    for k, (n, v) in enumerate(outputs):
        with open(os.path.join(d, "output_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())


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



def resize_ref(x, scales, out_shape, mode, ctm="half_pixel", antialias=0, exclude=0, A=-0.75):
    """Resize as ONNX's reference computes it (onnx/reference/ops/op_resize.py: per axis, the
    coefficients of _linear_coeffs(_antialias) / _cubic_coeffs(_antialias) on the nearest
    neighbours of the edge-padded data), in f64, axis by axis."""
    def coeffs(ratio, s):
        if mode == "linear" and not antialias:
            return np.array([1 - ratio, ratio])
        if mode == "linear":
            s = min(s, 1.0)
            start = int(np.floor(-1 / s) + 1)
            c = np.clip(1 - np.abs((np.arange(start, 2 - start) - ratio) * s), 0, 1)
            return c / c.sum()
        s = min(s, 1.0) if antialias else 1.0
        start = int(np.floor(-2 / s) + 1)

        def k(d):
            d = abs(d)
            return ((A + 2) * d - (A + 3)) * d * d + 1 if d <= 1 else \
                ((A * d - 5 * A) * d + 8 * A) * d - 4 * A if d < 2 else 0.0
        c = np.array([k(s * (i - ratio)) for i in range(start, 2 - start)])
        return c / c.sum() if antialias else c
    y = np.asarray(x, np.float64)
    for ax in range(y.ndim):
        n, m, s = y.shape[ax], out_shape[ax], scales[ax]
        if n == m and s == 1:
            continue
        src = np.moveaxis(y, ax, -1)
        out = np.zeros(src.shape[:-1] + (m,))
        for j in range(m):
            mf = s * n
            if ctm == "half_pixel":
                xo = (j + 0.5) / s - 0.5
            elif ctm == "half_pixel_symmetric":
                xo = n / 2 * (1 - m / mf) + (j + 0.5) / s - 0.5
            else:
                raise ValueError(ctm)
            ratio = 1.0 if float(xo).is_integer() else xo - np.floor(xo)
            c = coeffs(ratio, s)
            pad = int(np.ceil(len(c) / 2))
            near = sorted(range(-pad, n + pad), key=lambda i: (abs(xo - i), i))[:len(c)]
            idx = np.array(sorted(near))
            if exclude:
                c = np.where((idx < 0) | (idx >= n), 0, c)
                c = c / c.sum()
            out[..., j] = (src[..., np.clip(idx, 0, n - 1)] * c).sum(axis=-1)
        y = np.moveaxis(out, -1, ax)
    return y


def opset19_resize(out_dir, rng):
    """(opset 19) x f32 [1,2,8,9] ->
      Resize linear, antialias, scales [1,1,0.5,0.6]                   -> lin_aa [1,2,4,5]
      Resize cubic, antialias, sizes [1,2,3,4]                        -> cub_aa [1,2,3,4]
      Resize linear, antialias, exclude_outside, scales [1,1,0.35,0.75] -> lin_ex [1,2,2,6]
      Resize linear, half_pixel_symmetric, scales [1,1,1.7,0.8]       -> sym [1,2,13,7]
      Resize linear, axes [3, 2], scales [0.5, 1.5]                    -> axes [1,2,12,4]
      Resize cubic, antialias (upsampling: no effect), axes [2, 3], sizes [16, 18]
                                                                       -> up [1,2,16,18]
      Resize linear, keep_aspect_ratio_policy not_larger, axes [2, 3], sizes [5, 7]: one
      scale min(5/8, 7/9) = 0.625, the output round(0.625 * [8, 9])   -> fit [1,2,5,6]
      Resize cubic, keep_aspect_ratio_policy not_smaller, axes [2, 3], sizes [12, 12]: one
      scale max(12/8, 12/9) = 1.5, the output round(1.5 * [8, 9])     -> fill [1,2,12,14]
    (floor(0.625 * 9) = 5 and floor(1.5 * 9) = 13: the rounded sizes are not the scales' form.)"""
    x = rng.standard_normal((1, 2, 8, 9)).astype(np.float32)
    f = np.float32
    arr = numpy_helper.from_array
    nodes = [
        helper.make_node("Resize", ["x", "", "s1"], ["lin_aa"], mode="linear", antialias=1),
        helper.make_node("Resize", ["x", "", "", "z2"], ["cub_aa"], mode="cubic", antialias=1),
        helper.make_node("Resize", ["x", "", "s3"], ["lin_ex"], mode="linear", antialias=1,
                         exclude_outside=1),
        helper.make_node("Resize", ["x", "", "s4"], ["sym"], mode="linear",
                         coordinate_transformation_mode="half_pixel_symmetric"),
        helper.make_node("Resize", ["x", "", "s5"], ["axes"], mode="linear", axes=[3, 2]),
        helper.make_node("Resize", ["x", "", "", "z6"], ["up"], mode="cubic", antialias=1,
                         axes=[2, 3]),
        helper.make_node("Resize", ["x", "", "", "z7"], ["fit"], mode="linear", axes=[2, 3],
                         keep_aspect_ratio_policy="not_larger"),
        helper.make_node("Resize", ["x", "", "", "z8"], ["fill"], mode="cubic", axes=[2, 3],
                         keep_aspect_ratio_policy="not_smaller"),
    ]
    inits = [arr(np.array([1, 1, 0.5, 0.6], f), "s1"), ints("z2", [1, 2, 3, 4]),
             arr(np.array([1, 1, 0.35, 0.75], f), "s3"), arr(np.array([1, 1, 1.7, 0.8], f), "s4"),
             arr(np.array([0.5, 1.5], f), "s5"), ints("z6", [16, 18]), ints("z7", [5, 7]),
             ints("z8", [12, 12])]
    sc = lambda v: [float(f(e)) for e in v]  # noqa: E731  (the f32 scales, as the model holds them)
    outputs = [
        ("lin_aa", resize_ref(x, sc([1, 1, 0.5, 0.6]), (1, 2, 4, 5), "linear", antialias=1)),
        ("cub_aa", resize_ref(x, [1, 1, 3 / 8, 4 / 9], (1, 2, 3, 4), "cubic", antialias=1)),
        ("lin_ex", resize_ref(x, sc([1, 1, 0.35, 0.75]), (1, 2, 2, 6), "linear", antialias=1,
                              exclude=1)),
        ("sym", resize_ref(x, sc([1, 1, 1.7, 0.8]), (1, 2, 13, 7), "linear",
                           ctm="half_pixel_symmetric")),
        ("axes", resize_ref(x, sc([1, 1, 1.5, 0.5]), (1, 2, 12, 4), "linear")),
        ("up", resize_ref(x, [1, 1, 2, 2], (1, 2, 16, 18), "cubic", antialias=1)),
        ("fit", resize_ref(x, [1, 1, 0.625, 0.625], (1, 2, 5, 6), "linear")),
        ("fill", resize_ref(x, [1, 1, 1.5, 1.5], (1, 2, 12, 14), "cubic")),
    ]
    save(out_dir, "opset19_resize", 19, nodes, inits, x, outputs)


def int4_tensor(name, values, signed):
    """A TensorProto of INT4 (22) or UINT4 (21): two values a byte, the first in the low nibble
    (Debian's onnx 1.12 predates the types, so the proto is written by hand)."""
    t = TensorProto()
    t.name = name
    t.data_type = 22 if signed else 21
    t.dims.extend(values.shape)
    flat = (values.reshape(-1).astype(np.int64) & 0x0F).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    t.raw_data = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()
    return t


def pack4(vals):
    """0-15 values in pairs -> bytes, the first of a pair in the low nibble (MatMulNBits)."""
    v = vals.reshape(-1, 2).astype(np.uint8)
    return (v[:, 0] | (v[:, 1] << 4)).astype(np.uint8)


def opset21_blocked(out_dir, rng):
    """(opset 21) x f32 [3,64] ->
      MatMul(x, DequantizeLinear(W int4 [64,24], scale [4,24], zero point int4 [4,24], axis 0,
      block_size 16))                                                        -> y [3,24]
      MatMul(y, DequantizeLinear(U uint4 [24,10], scale [24,3], axis 1, block_size 4: the last
      block 2 wide))                                                         -> y2 [3,10]
      DequantizeLinear(QuantizeLinear(x, scale [3,4], u8 zero point [3,4], axis 1, block_size
      16))                                                                   -> qdq [3,64]"""
    x = rng.standard_normal((3, 64)).astype(np.float32)
    w = rng.integers(-8, 8, (64, 24))
    wzp = rng.integers(-2, 3, (4, 24))
    wscale = rng.uniform(0.01, 0.05, (4, 24)).astype(np.float32)
    u = rng.integers(0, 16, (24, 10))
    uscale = rng.uniform(0.02, 0.08, (24, 3)).astype(np.float32)
    qscale = rng.uniform(0.01, 0.03, (3, 4)).astype(np.float32)
    qzp = rng.integers(100, 156, (3, 4)).astype(np.uint8)
    arr = numpy_helper.from_array
    nodes = [
        helper.make_node("DequantizeLinear", ["w4", "wscale", "wzp4"], ["wf"], axis=0, block_size=16),
        helper.make_node("MatMul", ["x", "wf"], ["y"]),
        helper.make_node("DequantizeLinear", ["u4", "uscale"], ["uf"], axis=1, block_size=4),
        helper.make_node("MatMul", ["y", "uf"], ["y2"]),
        helper.make_node("QuantizeLinear", ["x", "qscale", "qzp"], ["q"], axis=1, block_size=16),
        helper.make_node("DequantizeLinear", ["q", "qscale", "qzp"], ["qdq"], axis=1, block_size=16),
    ]
    inits = [int4_tensor("w4", w, True), arr(wscale, "wscale"), int4_tensor("wzp4", wzp, True),
             int4_tensor("u4", u, False), arr(uscale, "uscale"), arr(qscale, "qscale"),
             arr(qzp, "qzp")]
    wf = (w - np.repeat(wzp, 16, axis=0)) * np.repeat(wscale, 16, axis=0).astype(np.float64)
    uf = u * np.repeat(uscale, 4, axis=1)[:, :10].astype(np.float64)
    y = x.astype(np.float64) @ wf
    y2 = y.astype(np.float32).astype(np.float64) @ uf
    qs = np.repeat(qscale, 16, axis=1)
    qz = np.repeat(qzp, 16, axis=1).astype(np.float64)
    q = np.clip(np.rint((x / qs).astype(np.float32)) + qz, 0, 255)
    qdq = ((q - qz) * qs).astype(np.float32)
    save(out_dir, "opset21_blocked", 21, nodes, inits, x, [("y", y), ("y2", y2), ("qdq", qdq)])


def weight_only(out_dir, rng):
    """(opset 21) weight-only quantized products, which --tandem-fuse-qdq makes DequantizeMatMul
    (A f32 times 8-bit weights kept 8-bit) and --no-qdq-fusion folds to f32:
      x f32 [3,64]:
        MatMul(x, DequantizeLinear(W int8 [64,40], scale [40], axis 1)) + bias [40]   -> y1 [3,40]
        Gemm(x, DequantizeLinear(V uint8 [24,64], scale [24], zero point [24] (values far from
          it: q - zp does not fit int8), axis 0), C [24], transB 1)                      -> y2 [3,24]
      x2 f32 [2,20,64] (40 rows: past the register path, the variants are timed):
        MatMul(x2, DequantizeLinear(U uint4 [64,24], scale and zero point [4,24], axis 0,
          block_size 16))                                                               -> y3 [2,20,24]
        MatMul(x2, Transpose(DequantizeLinear(T int8 [24,64], one scale)))             -> y4 [2,20,24]
        MatMul(x2, DequantizeLinear(S int8 [64,24], scale [64,6], axis 1, block_size 4:
          blocks along N, no such kernel: folded to f32))                               -> y5 [2,20,24]"""
    f = np.float32
    d = lambda a: np.asarray(a, np.float64)  # noqa: E731
    x = rng.standard_normal((3, 64)).astype(f)
    x2 = rng.standard_normal((2, 20, 64)).astype(f)
    w = rng.integers(-127, 128, (64, 40)).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, 40).astype(f)
    bias = rng.standard_normal(40).astype(f)
    v = rng.integers(0, 256, (24, 64)).astype(np.uint8)
    vs = rng.uniform(0.001, 0.01, 24).astype(f)
    vz = rng.integers(0, 20, 24).astype(np.uint8)
    c = rng.standard_normal(24).astype(f)
    u = rng.integers(0, 16, (64, 24))
    us = rng.uniform(0.01, 0.05, (4, 24)).astype(f)
    uz = rng.integers(4, 12, (4, 24))
    t = rng.integers(-127, 128, (24, 64)).astype(np.int8)
    ts = np.array(0.004, f)
    sq = rng.integers(-127, 128, (64, 24)).astype(np.int8)
    ss = rng.uniform(0.001, 0.01, (64, 6)).astype(f)
    arr = numpy_helper.from_array
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "ws"], ["wf"], axis=1),
        helper.make_node("MatMul", ["x", "wf"], ["xw"]),
        helper.make_node("Add", ["xw", "bias"], ["y1"]),
        helper.make_node("DequantizeLinear", ["v", "vs", "vz"], ["vf"], axis=0),
        helper.make_node("Gemm", ["x", "vf", "c"], ["y2"], transB=1),
        helper.make_node("DequantizeLinear", ["u4", "us", "uz4"], ["uf"], axis=0, block_size=16),
        helper.make_node("MatMul", ["x2", "uf"], ["y3"]),
        helper.make_node("DequantizeLinear", ["t", "ts"], ["tf"]),
        helper.make_node("Transpose", ["tf"], ["tt"], perm=[1, 0]),
        helper.make_node("MatMul", ["x2", "tt"], ["y4"]),
        helper.make_node("DequantizeLinear", ["sq", "ss"], ["sf"], axis=1, block_size=4),
        helper.make_node("MatMul", ["x2", "sf"], ["y5"]),
    ]
    inits = [arr(w, "w"), arr(ws, "ws"), arr(bias, "bias"), arr(v, "v"), arr(vs, "vs"),
             arr(vz, "vz"), arr(c, "c"), int4_tensor("u4", u, False), arr(us, "us"),
             int4_tensor("uz4", uz, False), arr(t, "t"), arr(ts, "ts"), arr(sq, "sq"),
             arr(ss, "ss")]
    wf = d(w) * d(ws)
    vf = (d(v) - d(vz)[:, None]) * d(vs)[:, None]
    uf = (d(u) - np.repeat(d(uz), 16, axis=0)) * np.repeat(d(us), 16, axis=0)
    tf = d(t) * d(ts)
    sf = d(sq) * np.repeat(d(ss), 4, axis=1)
    y1 = d(x) @ wf + d(bias)
    y2 = d(x) @ vf.T + d(c)
    y3 = d(x2) @ uf
    y4 = d(x2) @ tf.T
    y5 = d(x2) @ sf
    save_io(out_dir, "weight_only", 21, nodes, inits, [("x", x), ("x2", x2)],
            [(k, np.asarray(val, f)) for k, val in
             [("y1", y1), ("y2", y2), ("y3", y3), ("y4", y4), ("y5", y5)]])


def nbits_pack(W_q, zp, bits, bs):
    """MatMulNBits' packing: W_q [N, K] -> B [N, blocks, bs * bits / 8] (element i of a block in
    byte i * bits // 8, from the low bits up) and the zero points packed the same way along the
    blocks of each column (None: absent)."""
    def pack(vals):
        per = 8 // bits
        out = np.zeros((len(vals) + per - 1) // per, np.uint8)
        for i, v in enumerate(vals):
            out[i // per] |= np.uint8(int(v) << (bits * (i % per)))
        return out
    N, K = W_q.shape
    blocks = (K + bs - 1) // bs
    Wp = np.zeros((N, blocks * bs), np.int64)
    Wp[:, :K] = W_q
    B = np.stack([np.stack([pack(Wp[n, b * bs:(b + 1) * bs]) for b in range(blocks)])
                  for n in range(N)])
    Z = None if zp is None else np.concatenate([pack(zp[n]) for n in range(N)])
    return B.astype(np.uint8), Z


def matmul_nbits(out_dir, rng):
    """(opset 17 + com.microsoft-1) ONNX Runtime's MatMulNBits, which Tandem imports as
    DequantizeMatMul: x f32 [3,64] x 4-bit W [24,64] in blocks of 32 with packed zero points
    -> y1 [3,24]; x2 f32 [2,5,40] x 4-bit W [10,40] in blocks of 16 (the last one 8 rows, padded),
    the default zero point 8, a bias -> y2 [2,5,10]; x x 8-bit W [16,64] in blocks of 16 with
    zero points -> y3 [3,16]. References in f64 over the dequantized weights (ONNX Runtime 1.30
    matches them to 1e-6)."""
    f = np.float32
    d = lambda a: np.asarray(a, np.float64)  # noqa: E731
    x = rng.standard_normal((3, 64)).astype(f)
    x2 = rng.standard_normal((2, 5, 40)).astype(f)
    # 4 bits, K 64, N 24, blocks of 32, zero points.
    q1 = rng.integers(0, 16, (24, 64))
    s1 = rng.uniform(0.01, 0.05, (24, 2)).astype(f)
    z1 = rng.integers(4, 12, (24, 2))
    B1, Z1 = nbits_pack(q1, z1, 4, 32)
    # 4 bits, K 40: 3 blocks of 16, the last 8 rows real; zero point 8 (absent); a bias.
    q2 = rng.integers(0, 16, (10, 40))
    s2 = rng.uniform(0.01, 0.05, (10, 3)).astype(f)
    B2, _ = nbits_pack(q2, None, 4, 16)
    bias2 = rng.standard_normal(10).astype(f)
    # 8 bits, K 64, N 16, blocks of 16, zero points.
    q3 = rng.integers(0, 256, (16, 64))
    s3 = rng.uniform(0.001, 0.005, (16, 4)).astype(f)
    z3 = rng.integers(100, 156, (16, 4))
    B3, Z3 = nbits_pack(q3, z3, 8, 16)
    arr = numpy_helper.from_array
    ms = "com.microsoft"
    nodes = [
        helper.make_node("MatMulNBits", ["x", "B1", "s1", "z1"], ["y1"], domain=ms, K=64, N=24,
                         bits=4, block_size=32, accuracy_level=0),
        helper.make_node("MatMulNBits", ["x2", "B2", "s2", "", "", "bias2"], ["y2"], domain=ms,
                         K=40, N=10, bits=4, block_size=16),
        helper.make_node("MatMulNBits", ["x", "B3", "s3", "z3"], ["y3"], domain=ms, K=64, N=16,
                         bits=8, block_size=16),
    ]
    inits = [arr(B1, "B1"), arr(s1.reshape(-1), "s1"), arr(Z1, "z1"), arr(B2, "B2"),
             arr(s2.reshape(-1), "s2"), arr(bias2, "bias2"), arr(B3, "B3"),
             arr(s3.reshape(-1), "s3"), arr(Z3, "z3")]

    def deq(q, s, z, bs, K):
        return (q - np.repeat(z, bs, axis=1)[:, :K]) * np.repeat(d(s), bs, axis=1)[:, :K]
    y1 = d(x) @ deq(q1, s1, z1, 32, 64).T
    y2 = d(x2) @ deq(q2, s2, np.full((10, 3), 8), 16, 40).T + bias2
    y3 = d(x) @ deq(q3, s3, z3, 16, 64).T
    model = helper.make_model(
        helper.make_graph(nodes, "matmul_nbits",
                          [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
                           for k, v in [("x", x), ("x2", x2)]],
                          [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
                           for k, v in [("y1", y1), ("y2", y2), ("y3", y3)]], inits),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    path = os.path.join(out_dir, "matmul_nbits")
    d = os.path.join(path, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(path, "model.onnx"))
    for k, (n, v) in enumerate([("x", x), ("x2", x2)]):
        with open(os.path.join(d, "input_%d.pb" % k), "wb") as fh:
            fh.write(arr(v, n).SerializeToString())
    for k, (n, v) in enumerate([("y1", y1), ("y2", y2), ("y3", y3)]):
        with open(os.path.join(d, "output_%d.pb" % k), "wb") as fh:
            fh.write(arr(v.astype(np.float32), n).SerializeToString())


def matmul_nbits_more(out_dir, rng):
    """(opset 17 + com.microsoft-1) MatMulNBits as more exporters write it:
      x f32 [3,64] x 2-bit W [12,64] in blocks of 32 with packed zero points        -> y1 [3,12]
      x x 4-bit W [16,64] in blocks of 16, zero points, g_idx of GPTQ's act-order (row k
        in group perm[k] // 16 of a random permutation: scales and zero points by group,
        the rows where they are)                                                    -> y2 [3,16]
      x x 4-bit W [8,64] in blocks of 32, g_idx k // 32 (the blocks as they are), a bias
                                                                                    -> y3 [3,8]
      xh f16 [2,5,40] x 4-bit W [10,40] in blocks of 16, f16 scales and bias (GPU-exported
        models)                                                                     -> yh f16 [2,5,10]
      x x y1's 2-bit W with accuracy_level 4 (int8 activations allowed)            -> y5 [3,12]
      x x y2's 4-bit W (no g_idx) with accuracy_level 4                            -> y6 [3,16]
      x x 8-bit W [8,64] in blocks of 32 with accuracy_level 4                     -> y7 [3,8]
    References in f64 over the dequantized weights (yh rounded to f16 once); y5, y6 and y7 over
    x quantized as ONNX Runtime's accuracy level 4 and Tandem's int8 path do (per row and block,
    s = max |x| / 127 and q = round-half-even(x * (1 / s)), in f32)."""
    f = np.float32
    d = lambda a: np.asarray(a, np.float64)  # noqa: E731
    x = rng.standard_normal((3, 64)).astype(f)
    xh = rng.standard_normal((2, 5, 40)).astype(np.float16)
    q1 = rng.integers(0, 4, (12, 64))
    s1 = rng.uniform(0.1, 0.3, (12, 2)).astype(f)
    z1 = rng.integers(0, 4, (12, 2))
    B1, Z1 = nbits_pack(q1, z1, 2, 32)
    q2 = rng.integers(0, 16, (16, 64))
    s2 = rng.uniform(0.01, 0.05, (16, 4)).astype(f)
    z2 = rng.integers(4, 12, (16, 4))
    B2, Z2 = nbits_pack(q2, z2, 4, 16)
    g2 = (rng.permutation(64) // 16).astype(np.int32)
    q3 = rng.integers(0, 16, (8, 64))
    s3 = rng.uniform(0.01, 0.05, (8, 2)).astype(f)
    B3, _ = nbits_pack(q3, None, 4, 32)
    g3 = (np.arange(64) // 32).astype(np.int32)
    bias3 = rng.standard_normal(8).astype(f)
    qh = rng.integers(0, 16, (10, 40))
    sh = rng.uniform(0.01, 0.05, (10, 3)).astype(np.float16)
    Bh, _ = nbits_pack(qh, None, 4, 16)
    biash = rng.standard_normal(10).astype(np.float16)
    q7 = rng.integers(0, 256, (8, 64))
    s7 = rng.uniform(0.001, 0.005, (8, 2)).astype(f)
    B7, _ = nbits_pack(q7, None, 8, 32)
    arr = numpy_helper.from_array
    ms = "com.microsoft"
    nodes = [
        helper.make_node("MatMulNBits", ["x", "B1", "s1", "z1"], ["y1"], domain=ms, K=64, N=12,
                         bits=2, block_size=32),
        helper.make_node("MatMulNBits", ["x", "B2", "s2", "z2", "g2"], ["y2"], domain=ms, K=64,
                         N=16, bits=4, block_size=16),
        helper.make_node("MatMulNBits", ["x", "B3", "s3", "", "g3", "bias3"], ["y3"], domain=ms,
                         K=64, N=8, bits=4, block_size=32),
        helper.make_node("MatMulNBits", ["xh", "Bh", "sh", "", "", "biash"], ["yh"], domain=ms,
                         K=40, N=10, bits=4, block_size=16),
        helper.make_node("MatMulNBits", ["x", "B1", "s1", "z1"], ["y5"], domain=ms, K=64, N=12,
                         bits=2, block_size=32, accuracy_level=4),
        helper.make_node("MatMulNBits", ["x", "B2", "s2", "z2"], ["y6"], domain=ms, K=64, N=16,
                         bits=4, block_size=16, accuracy_level=4),
        helper.make_node("MatMulNBits", ["x", "B7", "s7"], ["y7"], domain=ms, K=64, N=8,
                         bits=8, block_size=32, accuracy_level=4),
    ]
    inits = [arr(B1, "B1"), arr(s1.reshape(-1), "s1"), arr(Z1, "z1"), arr(B2, "B2"),
             arr(s2.reshape(-1), "s2"), arr(Z2, "z2"), arr(g2, "g2"), arr(B3, "B3"),
             arr(s3.reshape(-1), "s3"), arr(g3, "g3"), arr(bias3, "bias3"), arr(Bh, "Bh"),
             arr(sh.reshape(-1), "sh"), arr(biash, "biash"), arr(B7, "B7"),
             arr(s7.reshape(-1), "s7")]

    def deq(q, s, z, group):
        return (q - z[:, group]) * d(s)[:, group]
    k64 = np.arange(64) // 32
    y1 = d(x) @ deq(q1, s1, z1, k64).T
    y2 = d(x) @ deq(q2, s2, z2, g2).T
    y3 = d(x) @ deq(q3, s3, np.full((8, 2), 8), g3).T + bias3
    yh = d(xh) @ deq(qh, sh, np.full((10, 3), 8), np.arange(40) // 16).T + d(biash)

    def int8_rows(a, bs):
        """a f32 [M, K] quantized per row and block of bs, dequantized again (in f64)."""
        out = np.zeros(a.shape)
        for b in range(0, a.shape[1], bs):
            blk = a[:, b:b + bs]
            s = np.abs(blk).max(axis=1, keepdims=True) / f(127)
            inv = np.where(s != 0, f(1) / np.where(s != 0, s, f(1)), f(0)).astype(f)
            q = np.clip(np.rint(blk * inv), -127, 127)
            out[:, b:b + bs] = q * d(s)
        return out
    y5 = int8_rows(x, 32) @ deq(q1, s1, z1, k64).T
    y6 = int8_rows(x, 16) @ deq(q2, s2, z2, np.arange(64) // 16).T
    y7 = int8_rows(x, 32) @ deq(q7, s7, np.full((8, 2), 128), k64).T
    save_io(out_dir, "matmul_nbits_more", 17, nodes, inits, [("x", x), ("xh", xh)],
            [("y1", y1.astype(f)), ("y2", y2.astype(f)), ("y3", y3.astype(f)),
             ("yh", yh.astype(np.float16)), ("y5", y5.astype(f)), ("y6", y6.astype(f)),
             ("y7", y7.astype(f))], microsoft=True)


def local_functions(out_dir, rng):
    """(opset 18, IR 8) model-local functions of domain custom.fn, as exporters write modules:
      ScaledAct(X; alpha) = 2 * LeakyRelu(X, alpha = @alpha)  (a Constant inside the body)
      Block(X, W; slope) = (ScaledAct(X W; alpha = @slope), X W)  (a call inside a function)
    x f32 [2,4] -> Block(x, w1; slope 0.1)            -> y1, pre1
                   Block(y1, w2; slope 0.3), output pre2 unused -> y2
                   ScaledAct(x), alpha not given (LeakyRelu's 0.01) -> y3"""
    x = rng.standard_normal((2, 4)).astype(np.float32)
    w1 = rng.standard_normal((4, 4)).astype(np.float32)
    w2 = rng.standard_normal((4, 4)).astype(np.float32)

    lrelu = helper.make_node("LeakyRelu", ["X"], ["r"])
    alpha = onnx.AttributeProto()
    alpha.name, alpha.ref_attr_name, alpha.type = "alpha", "alpha", onnx.AttributeProto.FLOAT
    lrelu.attribute.append(alpha)
    scaled = helper.make_function(
        "custom.fn", "ScaledAct", ["X"], ["Y"],
        [lrelu,
         helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2.0, np.float32))),
         helper.make_node("Mul", ["r", "two"], ["Y"])],
        [helper.make_opsetid("", 18)], ["alpha"])
    call = helper.make_node("ScaledAct", ["t"], ["Y"], domain="custom.fn")
    slope = onnx.AttributeProto()
    slope.name, slope.ref_attr_name, slope.type = "alpha", "slope", onnx.AttributeProto.FLOAT
    call.attribute.append(slope)
    block = helper.make_function(
        "custom.fn", "Block", ["X", "W"], ["Y", "T"],
        [helper.make_node("MatMul", ["X", "W"], ["t"]), call,
         helper.make_node("Identity", ["t"], ["T"])],
        [helper.make_opsetid("", 18), helper.make_opsetid("custom.fn", 1)], ["slope"])
    nodes = [helper.make_node("Block", ["x", "w1"], ["y1", "pre1"], domain="custom.fn", slope=0.1),
             helper.make_node("Block", ["y1", "w2"], ["y2", "pre2"], domain="custom.fn", slope=0.3),
             helper.make_node("ScaledAct", ["x"], ["y3"], domain="custom.fn")]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]

    def act(v, a):
        return 2 * np.where(v >= 0, v, a * v)
    xd = x.astype(np.float64)
    pre1 = xd @ w1
    y1 = act(pre1, np.float32(0.1))
    y2 = act(y1.astype(np.float32).astype(np.float64) @ w2, np.float32(0.3))
    outputs = [("y1", y1), ("pre1", pre1), ("y2", y2), ("y3", act(xd, np.float32(0.01)))]
    graph = helper.make_graph(
        nodes, "local_functions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(np.shape(v))) for k, v in outputs],
        inits)
    model = helper.make_model(graph, functions=[scaled, block],
                              opset_imports=[helper.make_opsetid("", 18),
                                             helper.make_opsetid("custom.fn", 1)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = os.path.join(out_dir, "local_functions")
    d = os.path.join(path, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(path, "model.onnx"))
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    for k, (n, v) in enumerate(outputs):
        with open(os.path.join(d, "output_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(v, np.float32), n).SerializeToString())


def rotary(x, cos, sin, pos=None, interleaved=0, rot=0, heads=0):
    """RotaryEmbedding-23 as ONNX's operator doc writes it (X 4-D [B, H, S, hd] or 3-D)."""
    shape = x.shape
    if x.ndim == 4:
        x = np.transpose(x, (0, 2, 1, 3))
    else:
        x = x.reshape(shape[0], shape[1], heads, shape[2] // heads)
    hd = x.shape[3]
    rot = rot or hd
    xr, xn = x[..., :rot], x[..., rot:]
    if pos is not None:
        cos, sin = cos[pos], sin[pos]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
    else:
        x1, x2 = np.split(xr, 2, axis=-1)
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if interleaved:
        xr = np.stack([real, imag], axis=-1).reshape(xr.shape)
    else:
        xr = np.concatenate([real, imag], axis=-1)
    y = np.concatenate([xr, xn], axis=-1)
    return y.reshape(shape) if len(shape) == 3 else np.transpose(y, (0, 2, 1, 3))


def col2im(cols, image, block, strides, pads, dil):
    """Col2Im-18 for 2-D images: every column entry added at its image point."""
    n, rows, L = cols.shape
    c = rows // (block[0] * block[1])
    out = np.zeros((n, c) + tuple(image))
    ph = (image[0] + pads[0] + pads[2] - dil[0] * (block[0] - 1) - 1) // strides[0] + 1
    pw = (image[1] + pads[1] + pads[3] - dil[1] * (block[1] - 1) - 1) // strides[1] + 1
    assert ph * pw == L
    for ch in range(c):
        for ki in range(block[0]):
            for kj in range(block[1]):
                r = (ch * block[0] + ki) * block[1] + kj
                for l in range(L):
                    y = (l // pw) * strides[0] - pads[0] + ki * dil[0]
                    x = (l % pw) * strides[1] - pads[1] + kj * dil[1]
                    if 0 <= y < image[0] and 0 <= x < image[1]:
                        out[:, ch, y, x] += cols[:, r, l]
    return out


def deform_conv(x, w, off, b, mask, group, og, pads, strides, dil):
    """DeformConv-19 (2-D) as ONNX's reference computes it: each tap sampled bilinearly (zeros
    outside) at its position moved by (dy, dx), times the mask."""
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    oh, ow = off.shape[2:]
    off = off.reshape(n, og, kh, kw, 2, oh, ow)
    mask = mask.reshape(n, og, kh, kw, oh, ow)
    y = np.zeros((n, oc, oh, ow)) + b.reshape(1, -1, 1, 1)

    def sample(plane, py, px):
        y0, x0 = int(np.floor(py)), int(np.floor(px))
        v = 0.0
        for yy, wy in ((y0, y0 + 1 - py), (y0 + 1, py - y0)):
            for xx, wx in ((x0, x0 + 1 - px), (x0 + 1, px - x0)):
                if 0 <= yy < h and 0 <= xx < wd:
                    v += wy * wx * plane[yy, xx]
        return v
    for bi in range(n):
        for o in range(oc):
            g = o // (oc // group)
            for ci in range(cg):
                ch = g * cg + ci
                gi = ch // (c // og)
                for i in range(oh):
                    for j in range(ow):
                        for a in range(kh):
                            for bb in range(kw):
                                py = i * strides[0] - pads[0] + a * dil[0] + off[bi, gi, a, bb, 0, i, j]
                                px = j * strides[1] - pads[1] + bb * dil[1] + off[bi, gi, a, bb, 1, i, j]
                                y[bi, o, i, j] += (w[o, ci, a, bb] * mask[bi, gi, a, bb, i, j] *
                                                   sample(x[bi, ch], py, px))
    return y


def opset24_ops(out_dir, rng):
    """(opset 24) inputs x f32 [2,3,4,5], xi i32 [2,4], xu u8 [6], theta f32 [2,2,3], cols f32
    [2,8,15], dx f32 [1,4,5,5], off f32 [1,36,5,5], r4 f32 [1,2,3,8], r3 f32 [2,3,12], past f32
    [2,2,5,3], upd f32 [2,2,2,3] ->
      Swish-24 (alpha 1, and 0.5)                          -> swish, swish_a
      BitwiseAnd/Or/Xor-18 (xi with [4] i32, broadcast), BitwiseNot-18 (xi, and xu)
                                                           -> band, bor, bxor, bnot, bnot_u8
      CenterCropPad-18 (shape [3, 7], axes [2, -1]; shape [2, 3, 5, 2], no axes)
                                                           -> ccp, ccp_all
      AffineGrid-20 (size [2,3,4,5], align_corners 0 and 1) -> grid0, grid1
      Col2Im-18 (image [4,5], block [2,2], strides [1,2], pads [1,0,1,1]) -> im
      DeformConv-19 (W [2,2,3,3], group 2, offset_group 2, pads 1, mask, B) -> dc
      RotaryEmbedding-23 (4-D with position_ids; 3-D num_heads 2, rotary dim 4, interleaved)
                                                           -> rope4, rope3
      TensorScatter-24 (linear, write_indices [1, 3]; circular, [4, 0]) -> ts_lin, ts_circ"""
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    xi = rng.integers(-100, 100, (2, 4)).astype(np.int32)
    xu = rng.integers(0, 256, 6).astype(np.uint8)
    theta = rng.uniform(-1, 1, (2, 2, 3)).astype(np.float32)
    cols = rng.standard_normal((2, 8, 15)).astype(np.float32)
    dx = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    off = rng.uniform(-1.5, 1.5, (1, 36, 5, 5)).astype(np.float32)
    r4 = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    r3 = rng.standard_normal((2, 3, 12)).astype(np.float32)
    past = rng.standard_normal((2, 2, 5, 3)).astype(np.float32)
    upd = rng.standard_normal((2, 2, 2, 3)).astype(np.float32)
    bmask = np.array([0x0F, -16, 0x55, 7], np.int32)
    dw = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    dmask = rng.uniform(0, 1, (1, 18, 5, 5)).astype(np.float32)
    db = np.array([0.5, -0.25], np.float32)
    ang4 = np.outer(np.arange(6), 1.0 / 10000 ** (np.arange(4) / 4)).astype(np.float32)
    ang3 = rng.uniform(0, 3, (2, 3, 2)).astype(np.float32)
    pos = np.array([[2, 0, 5]], np.int64)
    nodes = [
        helper.make_node("Swish", ["x"], ["swish"]),
        helper.make_node("Swish", ["x"], ["swish_a"], alpha=0.5),
        helper.make_node("BitwiseAnd", ["xi", "bmask"], ["band"]),
        helper.make_node("BitwiseOr", ["xi", "bmask"], ["bor"]),
        helper.make_node("BitwiseXor", ["xi", "bmask"], ["bxor"]),
        helper.make_node("BitwiseNot", ["xi"], ["bnot"]),
        helper.make_node("BitwiseNot", ["xu"], ["bnot_u8"]),
        helper.make_node("CenterCropPad", ["x", "ccp_shape"], ["ccp"], axes=[2, -1]),
        helper.make_node("CenterCropPad", ["x", "ccp_all_shape"], ["ccp_all"]),
        helper.make_node("AffineGrid", ["theta", "size"], ["grid0"]),
        helper.make_node("AffineGrid", ["theta", "size"], ["grid1"], align_corners=1),
        helper.make_node("Col2Im", ["cols", "image", "block"], ["im"], strides=[1, 2],
                         pads=[1, 0, 1, 1]),
        helper.make_node("DeformConv", ["dx", "dw", "off", "db", "dmask"], ["dc"], group=2,
                         offset_group=2, pads=[1, 1, 1, 1]),
        helper.make_node("RotaryEmbedding", ["r4", "cos4", "sin4", "pos"], ["rope4"]),
        helper.make_node("RotaryEmbedding", ["r3", "cos3", "sin3"], ["rope3"], num_heads=2,
                         rotary_embedding_dim=4, interleaved=1),
        helper.make_node("TensorScatter", ["past", "upd", "widx"], ["ts_lin"]),
        helper.make_node("TensorScatter", ["past", "upd", "widx_c"], ["ts_circ"], mode="circular"),
    ]
    arr = numpy_helper.from_array
    inits = [arr(bmask, "bmask"), ints("ccp_shape", [3, 7]), ints("ccp_all_shape", [2, 3, 5, 2]),
             ints("size", [2, 3, 4, 5]), ints("image", [4, 5]), ints("block", [2, 2]),
             arr(dw, "dw"), arr(db, "db"), arr(dmask, "dmask"),
             arr(np.cos(ang4), "cos4"), arr(np.sin(ang4), "sin4"), arr(pos, "pos"),
             arr(np.cos(ang3), "cos3"), arr(np.sin(ang3), "sin3"),
             ints("widx", [1, 3]), ints("widx_c", [4, 0])]
    xd = x.astype(np.float64)
    ccp = np.pad(x[:, :, 0:3, :], ((0, 0), (0, 0), (0, 0), (1, 1)))
    ccp_all = np.pad(x[:, :, :, 1:3], ((0, 0), (0, 0), (0, 1), (0, 0)))

    def affine(align):
        def lin(n):
            i = np.arange(n)
            return -1 + 2 * i / (n - 1) if align else -1 + (2 * i + 1) / n
        ys, xs = np.meshgrid(lin(4), lin(5), indexing="ij")
        base = np.stack([xs, ys, np.ones_like(xs)], axis=-1).reshape(-1, 3)
        return np.einsum("pk,nck->npc", base, theta.astype(np.float64)).reshape(2, 4, 5, 2)
    ts_lin = past.copy()
    ts_circ = past.copy()
    for b, (lin, circ) in enumerate(((1, 4), (3, 0))):
        for s in range(2):
            ts_lin[b, :, lin + s] = upd[b, :, s]
            ts_circ[b, :, (circ + s) % 5] = upd[b, :, s]
    f32 = np.float32
    outputs = [
        ("swish", (xd / (1 + np.exp(-xd))).astype(f32)),
        ("swish_a", (xd / (1 + np.exp(-0.5 * xd))).astype(f32)),
        ("band", xi & bmask), ("bor", xi | bmask), ("bxor", xi ^ bmask), ("bnot", ~xi),
        ("bnot_u8", ~xu),
        ("ccp", ccp), ("ccp_all", ccp_all),
        ("grid0", affine(False).astype(f32)), ("grid1", affine(True).astype(f32)),
        ("im", col2im(cols.astype(np.float64), (4, 5), (2, 2), (1, 2), (1, 0, 1, 1),
                      (1, 1)).astype(f32)),
        ("dc", deform_conv(dx.astype(np.float64), dw.astype(np.float64), off.astype(np.float64),
                           db.astype(np.float64), dmask.astype(np.float64), 2, 2, (1, 1),
                           (1, 1), (1, 1)).astype(f32)),
        ("rope4", rotary(r4, np.cos(ang4), np.sin(ang4), pos).astype(f32)),
        ("rope3", rotary(r3, np.cos(ang3), np.sin(ang3), None, 1, 4, 2).astype(f32)),
        ("ts_lin", ts_lin), ("ts_circ", ts_circ),
    ]
    inputs = [("x", x), ("xi", xi), ("xu", xu), ("theta", theta), ("cols", cols), ("dx", dx),
              ("off", off), ("r4", r4), ("r3", r3), ("past", past), ("upd", upd)]
    save_io(out_dir, "opset24_ops", 24, nodes, inits, inputs, outputs)


def attention(q, k, v, mask=None, past_k=None, past_v=None, nonpad=None, scale=None, causal=0,
              qh=None, kvh=None, softcap=0.0, mode=0, left=-1, right=-1):
    """Attention-25 as ONNX's reference computes it (onnx/reference/ops/op_attention.py, ONNX
    1.23 errata: bottom-right causal alignment, fully masked rows 0), in f64. Returns Y,
    present_key, present_value, qk_matmul_output."""
    three = q.ndim == 3
    if three:
        def heads(t, h):
            return t.reshape(t.shape[0], t.shape[1], h, -1).transpose(0, 2, 1, 3)
        q, k, v = heads(q, qh), heads(k, kvh), heads(v, kvh)
    scale = 1 / np.sqrt(q.shape[3]) if scale is None else scale
    if past_k is not None:
        k = np.concatenate([past_k, k], axis=2)
        v = np.concatenate([past_v, v], axis=2)
    present_k, present_v = k, v
    sq, t = q.shape[2], k.shape[2]
    bias = np.zeros((q.shape[0], q.shape[1], sq, t))
    if mask is not None:
        if mask.shape[-1] < t:
            pad = [(0, 0)] * (mask.ndim - 1) + [(0, t - mask.shape[-1])]
            mask = np.pad(mask, pad, constant_values=False if mask.dtype == bool else -np.inf)
        bias = bias + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    offset = (past_k.shape[2] if past_k is not None else
              (nonpad - sq) if nonpad is not None else np.zeros(q.shape[0], np.int64))
    offset = np.broadcast_to(np.asarray(offset), (q.shape[0],))
    i = np.arange(sq)[:, None]
    j = np.arange(t)[None, :]
    for b in range(q.shape[0]):
        p = i + offset[b]
        allowed = np.ones((sq, t), bool)
        if causal:
            allowed &= j <= p
        if left >= 0:
            allowed &= p - j <= left
        if right >= 0:
            allowed &= j - p <= right
        if nonpad is not None:
            allowed &= j < nonpad[b]
        bias[b] = np.where(allowed, bias[b], -np.inf)
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    qk = scale * (q @ np.swapaxes(k, 2, 3))
    out_qk = qk
    if softcap > 0:
        qk = softcap * np.tanh(qk / softcap)
    if mode == 1:
        out_qk = qk
    logits = qk + bias
    if mode == 2:
        out_qk = logits
    masked = np.isneginf(bias.max(axis=-1, keepdims=True))
    m = np.where(masked, 0, logits.max(axis=-1, keepdims=True))
    e = np.exp(logits - m)
    probs = np.where(masked, 0, e / np.where(masked, 1, e.sum(axis=-1, keepdims=True)))
    if mode == 3:
        out_qk = probs
    y = probs @ v
    if three:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    return y, present_k, present_v, out_qk


def attention_models(out_dir, rng):
    """opset23_attention (opset 23): inputs q4 [2,4,3,8], k4 [2,2,5,8], v4 [2,2,5,6],
    q3/k3/v3 [2,3,16], pk/pv [2,2,4,8], qs [1,2,3,4], ks/vs [1,2,4,4] ->
      Attention (4-D GQA 4:2 heads, Dv 6, float mask [3,5])        -> a_y
      Attention (the same, mask [1,3] shorter than the 5 keys)       -> a_short
      Attention (3-D 2 heads, past 4, causal: offset 4; present key and value, qk mode 3)
                                                                     -> c_y, c_pk, c_pv, c_qk
      Attention (bool mask [1,1,3,4] with row 1 all false: a 0 row; scale 0.3, softcap 2,
      qk mode 1)                                                     -> m_y, m_qk
    opset25_attention (opset 25): inputs q [2,2,2,4], k/v [2,2,5,4], qw [1,1,4,4], kw/vw
    [1,1,6,4] ->
      Attention (causal, nonpad_kv_seqlen [3, 5]: offsets 1 and 3; qk mode 2) -> n_y, n_qk
      Attention (left_window_size 1, right_window_size 0... 1)       -> w_y, w2_y"""
    f = np.float32
    q4 = rng.standard_normal((2, 4, 3, 8)).astype(f)
    k4 = rng.standard_normal((2, 2, 5, 8)).astype(f)
    v4 = rng.standard_normal((2, 2, 5, 6)).astype(f)
    q3, k3, v3 = (rng.standard_normal((2, 3, 16)).astype(f) for _ in range(3))
    pk, pv = (rng.standard_normal((2, 2, 4, 8)).astype(f) for _ in range(2))
    qs = rng.standard_normal((1, 2, 3, 4)).astype(f)
    ks, vs = (rng.standard_normal((1, 2, 4, 4)).astype(f) for _ in range(2))
    fmask = rng.uniform(-1, 0, (3, 5)).astype(f)
    smask = rng.uniform(-1, 0, (1, 3)).astype(f)
    bmask = rng.uniform(0, 1, (1, 1, 3, 4)) > 0.3
    bmask[0, 0, 1, :] = False
    nodes = [
        helper.make_node("Attention", ["q4", "k4", "v4", "fmask"], ["a_y"]),
        helper.make_node("Attention", ["q4", "k4", "v4", "smask"], ["a_short"]),
        helper.make_node("Attention", ["q3", "k3", "v3", "", "pk", "pv"],
                         ["c_y", "c_pk", "c_pv", "c_qk"], is_causal=1, q_num_heads=2,
                         kv_num_heads=2, qk_matmul_output_mode=3),
        helper.make_node("Attention", ["qs", "ks", "vs", "bmask"], ["m_y", "", "", "m_qk"],
                         scale=0.3, softcap=2.0, qk_matmul_output_mode=1),
    ]
    arr = numpy_helper.from_array
    inits = [arr(fmask, "fmask"), arr(smask, "smask"), arr(bmask, "bmask")]
    d = lambda a: a.astype(np.float64)  # noqa: E731
    a_y = attention(d(q4), d(k4), d(v4), d(fmask))[0]
    a_short = attention(d(q4), d(k4), d(v4), d(smask))[0]
    c = attention(d(q3), d(k3), d(v3), None, d(pk), d(pv), causal=1, qh=2, kvh=2, mode=3)
    m = attention(d(qs), d(ks), d(vs), bmask, scale=0.3, softcap=2.0, mode=1)
    assert not m[0][0, :, 1].any()
    outputs = [("a_y", a_y), ("a_short", a_short), ("c_y", c[0]), ("c_pk", c[1]), ("c_pv", c[2]),
               ("c_qk", c[3]), ("m_y", m[0]), ("m_qk", m[3])]
    inputs = [("q4", q4), ("k4", k4), ("v4", v4), ("q3", q3), ("k3", k3), ("v3", v3),
              ("pk", pk), ("pv", pv), ("qs", qs), ("ks", ks), ("vs", vs)]
    save_io(out_dir, "opset23_attention", 23, nodes, inits, inputs,
            [(k, np.asarray(v, f)) for k, v in outputs])

    q = rng.standard_normal((2, 2, 2, 4)).astype(f)
    k, v = (rng.standard_normal((2, 2, 5, 4)).astype(f) for _ in range(2))
    qw = rng.standard_normal((1, 1, 4, 4)).astype(f)
    kw, vw = (rng.standard_normal((1, 1, 6, 4)).astype(f) for _ in range(2))
    nonpad = np.array([3, 5], np.int64)
    nodes = [
        helper.make_node("Attention", ["q", "k", "v", "", "", "", "nonpad"], ["n_y", "", "", "n_qk"],
                         is_causal=1, qk_matmul_output_mode=2),
        helper.make_node("Attention", ["qw", "kw", "vw"], ["w_y"], left_window_size=1,
                         right_window_size=0),
        helper.make_node("Attention", ["qw", "kw", "vw"], ["w2_y"], left_window_size=2,
                         right_window_size=1),
    ]
    n = attention(d(q), d(k), d(v), nonpad=nonpad, causal=1, mode=2)
    # Mode 2 keeps -inf where the bias masks; the comparison needs finite values there too, so
    # the masked entries are checked as they are (-inf on both sides).
    outputs = [("n_y", n[0]), ("n_qk", n[3]),
               ("w_y", attention(d(qw), d(kw), d(vw), left=1, right=0)[0]),
               ("w2_y", attention(d(qw), d(kw), d(vw), left=2, right=1)[0])]
    inputs = [("q", q), ("k", k), ("v", v), ("qw", qw), ("kw", kw), ("vw", vw)]
    save_io(out_dir, "opset25_attention", 25, nodes, [arr(nonpad, "nonpad")], inputs,
            [(k, np.asarray(v, f)) for k, v in outputs])


def llama_block(out_dir, rng, name="opset23_llama", S=5, P=3, hidden=64, heads=4, kvh=2, ffn=128,
                layers=2, quant=None):
    """opset23_llama (opset 23): two decoder layers as Llama-style models are written at opset
    23+: x f32 [1,5,64], position_ids i64 [1,5] (positions 3..7), past_k0/past_v0/past_k1/past_v1
    f32 [1,2,3,16] -> per layer: RMSNormalization -> MatMul q [64,64] / k, v [64,32] ->
    RotaryEmbedding (3-D, num_heads 4 / 2, position_ids) -> Attention (3-D, 4 query and 2 KV
    heads, past cache, causal: offset 3) -> MatMul o -> residual Add -> RMSNormalization ->
    SwiGLU (SiLU(x W_gate) * x W_up) W_down, SiLU as exporters write it (x * Sigmoid(x)) ->
    residual Add; outputs y [1,5,64] and the four
    present caches [1,2,8,16]. The weights are random, scaled by 1/sqrt(fan-in). The keywords
    make larger ones for benchmarks (scripts/bench-vs-ort.sh). quant="int8" stores each
    projection's weights as int8 with a symmetric scale per output column (DequantizeLinear
    axis 1); quant="uint4" as uint4 in blocks of 32 rows with a scale and zero point per block
    and column (DequantizeLinear-21 axis 0, block_size 32: the weight-only form of ONNX Runtime's
    4-bit quantizer); quant="nbits4" the same uint4 blocks as ONNX Runtime's MatMulNBits nodes
    (com.microsoft-1, W^T packed two values a byte). The references use the dequantized
    weights."""
    f = np.float32
    B, hd = 1, hidden // heads
    x = rng.standard_normal((B, S, hidden)).astype(f)
    pos = np.arange(P, P + S, dtype=np.int64)[None, :]
    inv = 1.0 / 10000 ** (np.arange(hd // 2) * 2.0 / hd)
    ang = np.outer(np.arange(P + S + 8), inv)
    cos, sin = np.cos(ang).astype(f), np.sin(ang).astype(f)
    arr = numpy_helper.from_array
    nodes, inits = [], [arr(cos, "cos"), arr(sin, "sin")]
    inputs = [("x", x), ("pos", pos)]
    outputs = []
    nbits = {}  # weight name -> (K, N) of the MatMuls that become MatMulNBits
    d = lambda a: np.asarray(a, np.float64)  # noqa: E731
    h, hd64 = "x", d(x)

    def rms(v, w):
        return v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + 1e-5) * w
    for layer in range(layers):
        def w(name, shape):
            a = (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(f)
            full = "%s%d" % (name, layer)
            if quant is None:
                inits.append(arr(a, full))
                return d(a)
            if quant == "int8":
                s = (np.abs(a).max(axis=0) / 127).astype(f)
                q = np.clip(np.rint(a / s), -127, 127).astype(np.int8)
                inits.extend([arr(q, full + "_q"), arr(s, full + "_s")])
                nodes.append(helper.make_node("DequantizeLinear", [full + "_q", full + "_s"],
                                              [full], axis=1))
                return d(q) * d(s)
            blocks = a.reshape(shape[0] // 32, 32, shape[1])
            lo, hi = np.minimum(blocks.min(axis=1), 0), np.maximum(blocks.max(axis=1), 0)
            s = ((hi - lo) / 15).astype(f)
            zp = np.clip(np.rint(-lo / s), 0, 15).astype(np.int64)
            q = np.clip(np.rint(blocks / s[:, None, :]) + zp[:, None, :], 0, 15).astype(np.int64)
            q = q.reshape(shape)
            if quant == "nbits4":
                # W^T [N, K] in blocks of 32 along K, 16 bytes a block; zero points packed per
                # column; the MatMul reading `full` becomes MatMulNBits below.
                n_, k_ = shape[1], shape[0]
                B = np.stack([pack4(q[:, c].reshape(k_ // 32, 32)).reshape(k_ // 32, 16)
                              for c in range(n_)])
                zz = np.zeros((n_, k_ // 32 + (k_ // 32) % 2), np.int64)
                zz[:, :k_ // 32] = zp.T
                Z = np.concatenate([pack4(zz[c]) for c in range(n_)])
                inits.extend([arr(B, full + "_B"), arr(s.T.reshape(-1).copy(), full + "_S"),
                              arr(Z, full + "_Z")])
                nbits[full] = (k_, n_)
            else:
                inits.extend([int4_tensor(full + "_q", q, False), arr(s, full + "_s"),
                              int4_tensor(full + "_z", zp, False)])
                nodes.append(helper.make_node("DequantizeLinear",
                                              [full + "_q", full + "_s", full + "_z"],
                                              [full], axis=0, block_size=32))
            return (d(q) - np.repeat(zp, 32, axis=0)) * np.repeat(d(s), 32, axis=0)
        n1 = rng.uniform(0.5, 1.5, hidden).astype(f)
        n2 = rng.uniform(0.5, 1.5, hidden).astype(f)
        inits += [arr(n1, "n1_%d" % layer), arr(n2, "n2_%d" % layer)]
        wq, wk, wv = w("wq", (hidden, heads * hd)), w("wk", (hidden, kvh * hd)), w("wv", (hidden, kvh * hd))
        wo = w("wo", (heads * hd, hidden))
        wg, wu, wd = w("wg", (hidden, ffn)), w("wu", (hidden, ffn)), w("wd", (ffn, hidden))
        pk = rng.standard_normal((B, kvh, P, hd)).astype(f)
        pv = rng.standard_normal((B, kvh, P, hd)).astype(f)
        inputs += [("past_k%d" % layer, pk), ("past_v%d" % layer, pv)]
        L = str(layer)
        nodes += [
            helper.make_node("RMSNormalization", [h, "n1_" + L], ["a" + L]),
            helper.make_node("MatMul", ["a" + L, "wq" + L], ["q" + L]),
            helper.make_node("MatMul", ["a" + L, "wk" + L], ["k" + L]),
            helper.make_node("MatMul", ["a" + L, "wv" + L], ["v" + L]),
            helper.make_node("RotaryEmbedding", ["q" + L, "cos", "sin", "pos"], ["qr" + L],
                             num_heads=heads),
            helper.make_node("RotaryEmbedding", ["k" + L, "cos", "sin", "pos"], ["kr" + L],
                             num_heads=kvh),
            helper.make_node("Attention", ["qr" + L, "kr" + L, "v" + L, "", "past_k" + L,
                                           "past_v" + L], ["att" + L, "present_k" + L,
                                                           "present_v" + L],
                             is_causal=1, q_num_heads=heads, kv_num_heads=kvh),
            helper.make_node("MatMul", ["att" + L, "wo" + L], ["o" + L]),
            helper.make_node("Add", [h, "o" + L], ["r" + L]),
            helper.make_node("RMSNormalization", ["r" + L, "n2_" + L], ["m" + L]),
            helper.make_node("MatMul", ["m" + L, "wg" + L], ["g" + L]),
            helper.make_node("Sigmoid", ["g" + L], ["gsig" + L]),
            helper.make_node("Mul", ["g" + L, "gsig" + L], ["gs" + L]),
            helper.make_node("MatMul", ["m" + L, "wu" + L], ["u" + L]),
            helper.make_node("Mul", ["gs" + L, "u" + L], ["gu" + L]),
            helper.make_node("MatMul", ["gu" + L, "wd" + L], ["dn" + L]),
            helper.make_node("Add", ["r" + L, "dn" + L], ["h" + L]),
        ]
        a = rms(hd64, d(n1))
        q = rotary(a @ wq, d(cos), d(sin), pos, heads=heads)
        k = rotary(a @ wk, d(cos), d(sin), pos, heads=kvh)
        att, pres_k, pres_v, _ = attention(q, k, a @ wv, None, d(pk), d(pv), causal=1, qh=heads,
                                           kvh=kvh)
        r = hd64 + att @ wo
        m = rms(r, d(n2))
        g = m @ wg
        hd64 = r + ((g / (1 + np.exp(-g))) * (m @ wu)) @ wd
        h = "h" + L
        outputs += [("present_k" + L, pres_k), ("present_v" + L, pres_v)]
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    for i, n in enumerate(nodes):
        if n.op_type == "MatMul" and n.input[1] in nbits:
            K, N = nbits[n.input[1]]
            w = n.input[1]
            nodes[i] = helper.make_node("MatMulNBits", [n.input[0], w + "_B", w + "_S", w + "_Z"],
                                        list(n.output), domain="com.microsoft", K=K, N=N, bits=4,
                                        block_size=32)
    save_io(out_dir, name, 23, nodes, inits, inputs,
            [(k, np.asarray(v, f)) for k, v in [("y", hd64)] + outputs], microsoft=bool(nbits))

def attention_bench(out_dir, rng, name, B, H, Hkv, S, T, D, causal):
    """One Attention-23 node on 4-D inputs Q [B,H,S,D], K and V [B,Hkv,T,D] (benchmarks)."""
    f = np.float32
    q = rng.standard_normal((B, H, S, D)).astype(f)
    k = rng.standard_normal((B, Hkv, T, D)).astype(f)
    v = rng.standard_normal((B, Hkv, T, D)).astype(f)
    y = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), causal=causal)[0]
    save_io(out_dir, name, 23, [helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=causal)],
            [], [("q", q), ("k", k), ("v", v)], [("y", y.astype(f))])


def bench_models(out_dir):
    """Larger models for scripts/bench-vs-ort.sh (not tests): BERT-size self-attention
    [1,12,128,64], causal [1,12,256,64], a GQA decoding step (32 query and 8 KV heads of 128,
    1,024 cached keys), and four Llama-style layers (hidden 512, 8 heads, 2 KV heads, FFN 1408)
    at prefill (128 tokens after 16 cached) and at a decoding step (1 token after 256), the
    Llama ones also with weight-only int8 and uint4 projections (llama_*_int8, llama_*_uint4) and
    with the uint4 ones as ONNX Runtime's MatMulNBits (llama_*_nbits4), and a decoding step of
    two layers of hidden 2048 with uint4 weights, both ways (llama2048_decode_*)."""
    rng = np.random.default_rng(9)
    attention_bench(out_dir, rng, "attention_bert", 1, 12, 12, 128, 128, 64, 0)
    attention_bench(out_dir, rng, "attention_causal", 1, 12, 12, 256, 256, 64, 1)
    attention_bench(out_dir, rng, "attention_gqa_decode", 1, 32, 8, 1, 1024, 128, 0)
    llama_block(out_dir, rng, name="llama_prefill", S=128, P=16, hidden=512, heads=8, kvh=2,
                ffn=1408, layers=4)
    llama_block(out_dir, rng, name="llama_decode", S=1, P=256, hidden=512, heads=8, kvh=2,
                ffn=1408, layers=4)
    for quant in ("int8", "uint4", "nbits4"):
        llama_block(out_dir, rng, name="llama_decode_" + quant, S=1, P=256, hidden=512, heads=8,
                    kvh=2, ffn=1408, layers=4, quant=quant)
        llama_block(out_dir, rng, name="llama_prefill_" + quant, S=128, P=16, hidden=512, heads=8,
                    kvh=2, ffn=1408, layers=4, quant=quant)
    # Past the last-level cache: 2 layers of hidden 2048 and FFN 5632, 45 MB of 4-bit weights.
    for quant in ("uint4", "nbits4"):
        llama_block(out_dir, rng, name="llama2048_decode_" + quant, S=1, P=16, hidden=2048,
                    heads=16, kvh=4, ffn=5632, layers=2, quant=quant)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--bench":
        bench_models(sys.argv[2])
        return
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(1818)
    opset18_ops(out_dir, rng)
    opset21_ops(out_dir, rng)
    opset23_ops(out_dir, rng)
    opset24_ops(out_dir, rng)
    attention_models(out_dir, rng)
    llama_block(out_dir, rng)
    opset19_resize(out_dir, rng)
    opset21_blocked(out_dir, rng)
    local_functions(out_dir, rng)
    weight_only(out_dir, rng)
    matmul_nbits(out_dir, rng)
    matmul_nbits_more(out_dir, np.random.default_rng(1207))


if __name__ == "__main__":
    main()
