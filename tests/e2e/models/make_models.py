#!/usr/bin/python3
"""Writes the small models of e2e.small_models (issue 16: f16, LSTM and int8 quantized models end
to end), in the ONNX backend-test layout; the files are committed, so the test needs no torch:

  DIR/NAME/model.onnx
  DIR/NAME/test_data_set_0/input_K.pb, output_0.pb

Models (random weights, fixed seed, static shapes, batch 2):
  f16_cnn    x f16 [2,3,16,16] -> Conv 3x3 (8) -> BatchNormalization -> Relu -> MaxPool 2
             -> Flatten -> Gemm (10) -> f16 [2,10]
  f16_mlp    x f16 [2,8,32] -> Linear (64) -> GELU (erf, written out at opset 17) -> Linear (32)
             -> residual Add -> LayerNormalization -> f16 [2,8,32]
  bf16_cnn, bf16_mlp  the same two networks (other weights and inputs) in bfloat16
  lstm       x f32 [2,7,8] -> nn.LSTM(8, 16, num_layers=2, bidirectional, batch_first)
             -> last step -> Linear (5) -> f32 [2,5]
  qdq_conv     x f32 [2,8,10,10] -> QuantizeLinear (u8) -> DequantizeLinear -> Conv 3x3 pad 1
             (W = DequantizeLinear(QuantizeLinear(f32 W)), per channel, f32 bias) -> Relu ->
             QuantizeLinear (zero point 0) -> DequantizeLinear -> Conv 3x3 stride 2 pad 1 (per
             tensor W) -> QuantizeLinear (zero point 128) -> DequantizeLinear -> f32 [2,6,5,5]:
             the QDQ form of PyTorch's quantization-aware training (built with onnx.helper)
  qdq_linear   x f32 [2,4,16] -> QuantizeLinear (u8) -> the three QDQ matrix-product forms:
             MatMul (i8 W, per tensor) -> QuantizeLinear (ONNX Runtime's quantizer);
             MatMul (Transpose of per-channel fake-quantized W) -> Add (f32 bias) -> Relu ->
             QuantizeLinear (PyTorch QAT's 3-D nn.Linear); Reshape -> Gemm (transB, per-channel
             W, i32 bias through DequantizeLinear) -> QuantizeLinear (i8) -> DequantizeLinear
             -> f32 [8,10]
  hswish_residual  x f32 [1,3,32,32] -> Conv 3x3 s2 (16) -> Hardswish -> depthwise Conv 3x3
             -> Relu -> Conv 1x1 -> residual Add (the Hardswish output) -> Conv 1x1 (64): the
             residual is written plain by an element-wise loop and the residual conv writes the
             host's blocked layout for the next conv (LR-ASPP's MobileNetV3 blocks, where that
             pair once shared a buffer and the residual was reordered onto itself)
  int8_qlinear  x f32 [2,3,8,8] -> QuantizeLinear (uint8) -> QLinearConv (int8 weights with
             per-channel scales, int32 bias) -> Reshape -> QLinearMatMul (int8 weights)
             -> DequantizeLinear -> f32 [2,10]  (built with onnx.helper)
  embedding_bag  four nn.EmbeddingBag as torch.onnx (opset 17) writes them, a Loop over the
             bags each: sum with per_sample_weights over 7 bags of 17 ids, one empty (zeros);
             mean over 5 bags; max with include_last_offset; mean of fixed-size bags from 2-D
             ids [4, 3] (constant offsets) -> f32 [7,6], [5,4], [5,5], [4,3]; the reference is
             PyTorch eager (mean and max bags are not empty: PyTorch gives 0 for an empty bag
             where the exported ReduceMean/ReduceMax of nothing give NaN/-inf)

f16: torch 1.13 has no f16 Conv on the CPU, so the f32 model is exported (opset 17) and its
float initializers, Constant nodes, inputs and outputs are then rewritten to f16. The reference
is PyTorch in f32 on the same f16-rounded weights and inputs, rounded to f16 at the end (the
model rounds to f16 after every op; the test's tolerance covers the difference).
bf16: as f16, with bfloat16 (ONNX elem type 16) for float16: weights and inputs rounded to bf16
(round to nearest-even, PyTorch's .bfloat16()), the reference PyTorch in f32 rounded to bf16 at
the end. numpy has no bfloat16, so the tensors are written from their bits: the initializers and
the expected output as raw_data, the input as int32_data (each bf16's bits in the low 16 bits of
an int32, as onnx.proto says), so both encodings are read end to end.
int8: the reference is numpy following the ONNX equations, with requantization done as ONNX
Runtime does (multiplier float32(float32(a_scale * b_scale) / y_scale), the int32 accumulator
times it in double, rounded half to even, plus the zero point, saturated).
qdq: the reference is the QDQ graph as ONNX defines it, the convolutions in f64 on the
dequantized values, rounded to f32 (an f32 sum in another order may round a value near a
quantization tie to the other side: one step of that QuantizeLinear's scale).

Usage (Debian's python3-torch and python3-onnx):  /usr/bin/python3 make_models.py DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import torch
import torch.nn as nn

SEED = 1234


def write_set(path, inputs, outputs, model):
    d = os.path.join(path, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    for k, (vi, a) in enumerate(zip(model.graph.input, inputs)):
        with open(os.path.join(d, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(a, vi.name).SerializeToString())
    for k, (vi, a) in enumerate(zip(model.graph.output, outputs)):
        with open(os.path.join(d, "output_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(a, vi.name).SerializeToString())


def export(module, example, path):
    os.makedirs(path, exist_ok=True)
    f = os.path.join(path, "model.onnx")
    # PRESERVE (the modules are in eval mode): BatchNormalization stays a node instead of being
    # folded into the Conv by the exporter, so the f16 path runs it.
    torch.onnx.export(module, example, f, opset_version=17, input_names=["x"],
                      output_names=["y"], do_constant_folding=True,
                      training=torch.onnx.TrainingMode.PRESERVE)
    return onnx.load(f)


def to_f16(model):
    """The f32 graph as f16: initializers, Constant nodes, graph inputs/outputs, Cast targets."""
    g = model.graph
    for init in g.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(init).astype(np.float16), init.name))
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16)))
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    onnx.checker.check_model(model)
    return model


def bf16_bits(a):
    """The bf16 bits (uint16) of float array `a`, rounded to nearest-even."""
    t = torch.as_tensor(np.ascontiguousarray(a, dtype=np.float32)).bfloat16()
    return t.view(torch.int16).numpy().view(np.uint16)


def bf16_tensor(a, name="", int32_data=False):
    p = TensorProto()
    p.name = name
    p.data_type = TensorProto.BFLOAT16
    p.dims.extend(np.shape(a))
    bits = bf16_bits(a)
    if int32_data:
        p.int32_data.extend(int(b) for b in bits.ravel())
    else:
        p.raw_data = bits.tobytes()
    return p


def to_bf16(model):
    """The f32 graph as bf16: initializers, Constant nodes, graph inputs/outputs, Cast targets."""
    g = model.graph
    for init in g.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(bf16_tensor(numpy_helper.to_array(init), init.name))
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(bf16_tensor(numpy_helper.to_array(a.t), a.t.name))
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.BFLOAT16
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.BFLOAT16
    onnx.checker.check_model(model)
    return model


def bf16_model(name, module, x, out_dir):
    module.eval()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(p.bfloat16().float())
        for b in module.buffers():
            if b.dtype == torch.float32:
                b.copy_(b.bfloat16().float())
    x = x.bfloat16().float()
    path = os.path.join(out_dir, name)
    model = to_bf16(export(module, x, path))
    onnx.save(model, os.path.join(path, "model.onnx"))
    with torch.no_grad():
        y = module(x).numpy()
    d = os.path.join(path, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(bf16_tensor(x.numpy(), model.graph.input[0].name, int32_data=True).SerializeToString())
    with open(os.path.join(d, "output_0.pb"), "wb") as f:
        f.write(bf16_tensor(y, model.graph.output[0].name).SerializeToString())


def f16_model(name, module, x, out_dir):
    module.eval()
    # Round the weights and the input to f16 first: the reference sees the model's numbers.
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(p.half().float())
        for b in module.buffers():
            if b.dtype == torch.float32:
                b.copy_(b.half().float())
    x = x.half().float()
    path = os.path.join(out_dir, name)
    model = to_f16(export(module, x, path))
    onnx.save(model, os.path.join(path, "model.onnx"))
    with torch.no_grad():
        y = module(x).half().numpy()
    write_set(path, [x.half().numpy()], [y], model)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = torch.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(torch.flatten(y, 1))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 32)
        self.ln = nn.LayerNorm(32)

    def forward(self, x):
        return self.ln(x + self.fc2(nn.functional.gelu(self.fc1(x))))


class LstmHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1, :])


def save_helper_model(out_dir, name, nodes, inits, x, y):
    """An onnx.helper graph x f32 -> y f32 (opset 13), checked, saved with its one data set."""
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    path = os.path.join(out_dir, name)
    os.makedirs(path, exist_ok=True)
    onnx.save(model, os.path.join(path, "model.onnx"))
    write_set(path, [x], [y], model)


def requantize(acc, multiplier, zp, dtype):
    info = np.iinfo(dtype)
    q = np.rint(acc.astype(np.float64) * multiplier.astype(np.float64)) + zp
    return np.clip(q, info.min, info.max).astype(dtype)


def int8_model(out_dir):
    rng = np.random.default_rng(SEED)
    N, C, H, W, M, K = 2, 3, 8, 8, 4, 3
    OH = H - K + 1
    x_scale, x_zp = np.float32(0.02), np.uint8(128)
    w = rng.integers(-127, 128, size=(M, C, K, K)).astype(np.int8)
    w_scale = rng.uniform(0.002, 0.006, size=M).astype(np.float32)  # per output channel
    w_zp = np.zeros(M, np.int8)
    bias = rng.integers(-2000, 2000, size=M).astype(np.int32)
    c_scale, c_zp = np.float32(0.05), np.uint8(100)
    F = M * OH * OH
    b = rng.integers(-127, 128, size=(F, 10)).astype(np.int8)
    b_scale, b_zp = np.float32(0.004), np.int8(0)
    y_scale, y_zp = np.float32(0.1), np.uint8(128)

    x = rng.uniform(-2.0, 2.0, size=(N, C, H, W)).astype(np.float32)
    # QuantizeLinear: x / scale in f32, rounded half to even, plus the zero point, saturated.
    xq = np.clip(np.rint((x / x_scale).astype(np.float64)) + x_zp, 0, 255).astype(np.uint8)
    # QLinearConv (no padding, stride 1): int32 accumulation of zero-point-shifted products.
    xs = xq.astype(np.int32) - np.int32(x_zp)
    ws = w.astype(np.int32) - w_zp.astype(np.int32).reshape(M, 1, 1, 1)
    acc = np.zeros((N, M, OH, OH), np.int64)
    for i in range(OH):
        for j in range(OH):
            patch = xs[:, :, i:i + K, j:j + K]
            acc[:, :, i, j] = np.einsum("nckl,mckl->nm", patch, ws)
    acc += bias.reshape(1, M, 1, 1)
    mult = (np.float32(x_scale * w_scale) / c_scale).astype(np.float32).reshape(1, M, 1, 1)
    cq = requantize(acc, mult, c_zp, np.uint8)
    # QLinearMatMul on the flattened map.
    a = cq.reshape(N, F).astype(np.int64) - np.int64(c_zp)
    acc2 = a @ (b.astype(np.int64) - np.int64(b_zp))
    yq = requantize(acc2, np.float32(np.float32(c_scale * b_scale) / y_scale), y_zp, np.uint8)
    y = ((yq.astype(np.int32) - np.int32(y_zp)).astype(np.float32) * y_scale).astype(np.float32)

    def const(name, a):
        return numpy_helper.from_array(np.asarray(a), name)

    inits = [const("x_scale", x_scale), const("x_zp", x_zp), const("w", w),
             const("w_scale", w_scale), const("w_zp", w_zp), const("bias", bias),
             const("c_scale", c_scale), const("c_zp", c_zp),
             const("shape", np.array([N, F], np.int64)), const("b", b),
             const("b_scale", b_scale), const("b_zp", b_zp), const("y_scale", y_scale),
             const("y_zp", y_zp)]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="quant"),
        helper.make_node("QLinearConv", ["xq", "x_scale", "x_zp", "w", "w_scale", "w_zp",
                                         "c_scale", "c_zp", "bias"], ["cq"], name="qconv"),
        helper.make_node("Reshape", ["cq", "shape"], ["fq"], name="flatten"),
        helper.make_node("QLinearMatMul", ["fq", "c_scale", "c_zp", "b", "b_scale", "b_zp",
                                           "y_scale", "y_zp"], ["yq"], name="qmatmul"),
        helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zp"], ["y"], name="dequant"),
    ]
    save_helper_model(out_dir, "int8_qlinear", nodes, inits, x, y)
    # Guard the generator itself: a reference that saturates everywhere checks nothing.
    assert 5 < len(np.unique(cq)) and 3 < len(np.unique(yq)), (np.unique(cq), np.unique(yq))


def quantize(v, scale, zp, dtype):
    """ONNX QuantizeLinear: round half to even, plus the zero point, saturated."""
    info = np.iinfo(dtype)
    q = np.rint((v / scale).astype(np.float64)) + zp
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(q, scale, zp):
    """ONNX DequantizeLinear, in f32."""
    return ((q.astype(np.int32) - np.int32(zp)).astype(np.float32) * scale).astype(np.float32)


def qdq_model(out_dir):
    rng = np.random.default_rng(SEED + 1)
    N, C, H, M1, M2 = 2, 8, 10, 12, 6

    def conv(x, w, b, stride, pad):
        n, c, h, _ = x.shape
        m, _, k, _ = w.shape
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        oh = (h + 2 * pad - k) // stride + 1
        y = np.zeros((n, m, oh, oh))
        for i in range(oh):
            for j in range(oh):
                patch = xp[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
                y[:, :, i, j] = np.einsum("nckl,mckl->nm", patch, w.astype(np.float64))
        if b is not None:
            y += b.astype(np.float64).reshape(1, m, 1, 1)
        return y.astype(np.float32)

    x = rng.uniform(0.0, 2.5, size=(N, C, H, H)).astype(np.float32)
    x_scale, x_zp = np.float32(0.01), np.uint8(0)
    # |W_q| <= 64, so the int8 kernel is exact on CPUs without VNNI too (DnnlQuantized.cpp).
    w1 = rng.uniform(-0.25, 0.25, size=(M1, C, 3, 3)).astype(np.float32)
    w1_scale = (np.abs(w1).reshape(M1, -1).max(axis=1) / 64).astype(np.float32)
    w1_zp = np.zeros(M1, np.int8)
    b1 = rng.uniform(-0.2, 0.2, size=M1).astype(np.float32)
    c_scale, c_zp = np.float32(0.02), np.uint8(0)
    w2 = rng.uniform(-0.12, 0.12, size=(M2, M1, 3, 3)).astype(np.float32)
    w2_scale, w2_zp = np.float32(0.12 / 64), np.int8(0)
    y_scale, y_zp = np.float32(0.03), np.uint8(128)

    w1q = quantize(w1, w1_scale.reshape(M1, 1, 1, 1), 0, np.int8)
    w2q = quantize(w2, w2_scale, 0, np.int8)
    xd = dequantize(quantize(x, x_scale, x_zp, np.uint8), x_scale, x_zp)
    c = np.maximum(conv(xd, dequantize(w1q, w1_scale.reshape(M1, 1, 1, 1), 0), b1, 1, 1), 0)
    cq = quantize(c, c_scale, c_zp, np.uint8)
    yq = quantize(conv(dequantize(cq, c_scale, c_zp), dequantize(w2q, w2_scale, 0), None, 2, 1),
                  y_scale, y_zp, np.uint8)
    y = dequantize(yq, y_scale, y_zp)

    def const(name, a):
        return numpy_helper.from_array(np.asarray(a), name)

    inits = [const("x_scale", x_scale), const("x_zp", x_zp), const("w1", w1),
             const("w1_scale", w1_scale), const("w1_zp", w1_zp), const("b1", b1),
             const("c_scale", c_scale), const("c_zp", c_zp), const("w2", w2),
             const("w2_scale", w2_scale), const("w2_zp", w2_zp), const("y_scale", y_scale),
             const("y_zp", y_zp)]
    node = helper.make_node
    nodes = [
        node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="x_q"),
        node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"], name="x_dq"),
        node("QuantizeLinear", ["w1", "w1_scale", "w1_zp"], ["w1q"], name="w1_q", axis=0),
        node("DequantizeLinear", ["w1q", "w1_scale", "w1_zp"], ["w1d"], name="w1_dq", axis=0),
        node("Conv", ["xd", "w1d", "b1"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        node("Relu", ["c"], ["r"], name="relu1"),
        node("QuantizeLinear", ["r", "c_scale", "c_zp"], ["cq"], name="c_q"),
        node("DequantizeLinear", ["cq", "c_scale", "c_zp"], ["cd"], name="c_dq"),
        node("QuantizeLinear", ["w2", "w2_scale", "w2_zp"], ["w2q"], name="w2_q"),
        node("DequantizeLinear", ["w2q", "w2_scale", "w2_zp"], ["w2d"], name="w2_dq"),
        node("Conv", ["cd", "w2d"], ["y2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
        node("QuantizeLinear", ["y2", "y_scale", "y_zp"], ["yq"], name="y_q"),
        node("DequantizeLinear", ["yq", "y_scale", "y_zp"], ["y"], name="y_dq"),
    ]
    save_helper_model(out_dir, "qdq_conv", nodes, inits, x, y)
    # Guard the generator itself: a reference that saturates everywhere checks nothing.
    assert 20 < len(np.unique(cq)) and 20 < len(np.unique(yq)), (np.unique(cq), np.unique(yq))
    assert np.abs(w1q).max() <= 64 and np.abs(w2q).max() <= 64


def qdq_linear_model(out_dir):
    """The matrix products of a quantized transformer layer in the three QDQ forms exporters
    write: ONNX Runtime's quantizer (MatMul -> QuantizeLinear, per-tensor weights), PyTorch's
    quantization-aware training of a 3-D nn.Linear (MatMul of the transposed per-channel weights,
    then Add of the f32 bias, Relu) and ONNX Runtime's Gemm (transB, per-channel weights, the
    bias an i32 DequantizeLinear at x_scale * w_scale)."""
    rng = np.random.default_rng(SEED + 2)
    B, T, K, N1, N2, N3 = 2, 4, 16, 24, 20, 10
    x = rng.uniform(0.0, 2.5, size=(B, T, K)).astype(np.float32)
    x_scale, x_zp = np.float32(0.01), np.uint8(0)
    # |W_q| <= 64: the int8 kernels are exact on CPUs without VNNI too (DnnlQuantized.cpp).
    w1 = rng.integers(-64, 65, size=(K, N1)).astype(np.int8)
    w1_scale, w1_zp = np.float32(0.004), np.int8(0)
    h1_scale, h1_zp = np.float32(0.01), np.uint8(100)
    w2 = rng.uniform(-0.3, 0.3, size=(N2, N1)).astype(np.float32)  # nn.Linear's [out, in]
    w2_scale = (np.abs(w2).max(axis=1) / 64).astype(np.float32)
    w2_zp = np.zeros(N2, np.int8)
    b2 = rng.uniform(-0.3, 0.3, size=N2).astype(np.float32)
    h2_scale, h2_zp = np.float32(0.01), np.uint8(0)
    w3 = rng.integers(-64, 65, size=(N3, N2)).astype(np.int8)
    w3_scale = rng.uniform(0.002, 0.006, size=N3).astype(np.float32)
    w3_zp = np.zeros(N3, np.int8)
    b3_scale = (h2_scale * w3_scale).astype(np.float32)  # as ONNX Runtime's quantizer: f32
    b3 = rng.integers(-3000, 3000, size=N3).astype(np.int32)
    y_scale, y_zp = np.float32(0.02), np.int8(-3)

    f64 = lambda a: a.astype(np.float64)
    xd = dequantize(quantize(x, x_scale, x_zp, np.uint8), x_scale, x_zp)
    h1q = quantize((f64(xd) @ f64(dequantize(w1, w1_scale, 0))).astype(np.float32), h1_scale,
                   h1_zp, np.uint8)
    w2q = quantize(w2, w2_scale.reshape(N2, 1), 0, np.int8)
    h2 = f64(dequantize(h1q, h1_scale, h1_zp)) @ f64(dequantize(w2q, w2_scale.reshape(N2, 1), 0)).T
    h2q = quantize(np.maximum((h2 + f64(b2)).astype(np.float32), 0), h2_scale, h2_zp, np.uint8)
    g = f64(dequantize(h2q, h2_scale, h2_zp)).reshape(B * T, N2)
    g = g @ f64(dequantize(w3, w3_scale.reshape(N3, 1), 0)).T + f64(dequantize(b3, b3_scale, 0))
    yq = quantize(g.astype(np.float32), y_scale, y_zp, np.int8)
    y = dequantize(yq, y_scale, y_zp)

    def const(name, a):
        return numpy_helper.from_array(np.asarray(a), name)

    inits = [const(n, v) for n, v in [
        ("x_scale", x_scale), ("x_zp", x_zp), ("w1", w1), ("w1_scale", w1_scale),
        ("w1_zp", w1_zp), ("h1_scale", h1_scale), ("h1_zp", h1_zp), ("w2", w2),
        ("w2_scale", w2_scale), ("w2_zp", w2_zp), ("b2", b2), ("h2_scale", h2_scale),
        ("h2_zp", h2_zp), ("shape2d", np.array([B * T, N2], np.int64)), ("w3", w3),
        ("w3_scale", w3_scale), ("w3_zp", w3_zp), ("b3", b3), ("b3_scale", b3_scale),
        ("y_scale", y_scale), ("y_zp", y_zp)]]
    node = helper.make_node
    nodes = [
        node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="x_q"),
        node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"], name="x_dq"),
        # ONNX Runtime's form: MatMul of an i8 constant, then QuantizeLinear.
        node("DequantizeLinear", ["w1", "w1_scale", "w1_zp"], ["w1d"], name="w1_dq"),
        node("MatMul", ["xd", "w1d"], ["h1"], name="matmul1"),
        node("QuantizeLinear", ["h1", "h1_scale", "h1_zp"], ["h1q"], name="h1_q"),
        node("DequantizeLinear", ["h1q", "h1_scale", "h1_zp"], ["h1d"], name="h1_dq"),
        # PyTorch's 3-D nn.Linear: W fake-quantized per output channel, transposed, bias Add.
        node("QuantizeLinear", ["w2", "w2_scale", "w2_zp"], ["w2q"], name="w2_q", axis=0),
        node("DequantizeLinear", ["w2q", "w2_scale", "w2_zp"], ["w2d"], name="w2_dq", axis=0),
        node("Transpose", ["w2d"], ["w2t"], name="w2_t", perm=[1, 0]),
        node("MatMul", ["h1d", "w2t"], ["h2m"], name="matmul2"),
        node("Add", ["b2", "h2m"], ["h2"], name="bias2"),
        node("Relu", ["h2"], ["h2r"], name="relu2"),
        node("QuantizeLinear", ["h2r", "h2_scale", "h2_zp"], ["h2q"], name="h2_q"),
        node("DequantizeLinear", ["h2q", "h2_scale", "h2_zp"], ["h2d"], name="h2_dq"),
        # ONNX Runtime's Reshape between quantized ops: QuantizeLinear/DequantizeLinear again.
        node("Reshape", ["h2d", "shape2d"], ["g2"], name="flatten"),
        node("QuantizeLinear", ["g2", "h2_scale", "h2_zp"], ["g2q"], name="g2_q"),
        node("DequantizeLinear", ["g2q", "h2_scale", "h2_zp"], ["g2d"], name="g2_dq"),
        # ONNX Runtime's Gemm: transB, per-channel W, the bias an i32 DequantizeLinear.
        node("DequantizeLinear", ["w3", "w3_scale", "w3_zp"], ["w3d"], name="w3_dq", axis=0),
        node("DequantizeLinear", ["b3", "b3_scale"], ["b3d"], name="b3_dq", axis=0),
        node("Gemm", ["g2d", "w3d", "b3d"], ["g"], name="gemm3", transB=1),
        node("QuantizeLinear", ["g", "y_scale", "y_zp"], ["yq"], name="y_q"),
        node("DequantizeLinear", ["yq", "y_scale", "y_zp"], ["y"], name="y_dq"),
    ]
    save_helper_model(out_dir, "qdq_linear", nodes, inits, x, y)
    # Guard the generator itself: a reference that saturates everywhere checks nothing.
    for q in (h1q, h2q, yq):
        assert 20 < len(np.unique(q)), np.unique(q)
    assert np.abs(w2q).max() <= 64


class HswishResidual(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.act = nn.Hardswish()
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 16, 1)
        self.expand = nn.Conv2d(16, 64, 1)

    def forward(self, x):
        s = self.act(self.stem(x))
        return self.expand(self.pw(torch.relu(self.dw(s))) + s)


class Bags(nn.Module):
    def __init__(self):
        super().__init__()
        self.sum = nn.EmbeddingBag(30, 6, mode="sum")
        self.mean = nn.EmbeddingBag(20, 4, mode="mean")
        self.max = nn.EmbeddingBag(20, 5, mode="max", include_last_offset=True)
        self.fixed = nn.EmbeddingBag(12, 3, mode="mean")

    def forward(self, ids, offsets, psw, ids2, offsets2, grid):
        last = torch.tensor([ids2.shape[0]])
        return (self.sum(ids, offsets, per_sample_weights=psw), self.mean(ids2, offsets2),
                self.max(ids2, torch.cat([offsets2, last])), self.fixed(grid))


def embedding_bag_model(out_dir):
    torch.manual_seed(SEED + 18)
    net = Bags().eval()
    args = (torch.randint(0, 30, (17,)), torch.tensor([0, 3, 3, 7, 8, 12, 16]), torch.randn(17),
            torch.randint(0, 20, (11,)), torch.tensor([0, 2, 5, 6, 9]), torch.randint(0, 12, (4, 3)))
    path = os.path.join(out_dir, "embedding_bag")
    os.makedirs(path, exist_ok=True)
    f = os.path.join(path, "model.onnx")
    torch.onnx.export(net, args, f, opset_version=17,
                      input_names=["ids", "offsets", "psw", "ids2", "offsets2", "grid"],
                      output_names=["sum", "mean", "max", "fixed"])
    model = onnx.load(f)
    with torch.no_grad():
        write_set(path, [a.numpy() for a in args], [y.numpy() for y in net(*args)], model)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(SEED)
    cnn = Cnn()
    with torch.no_grad():  # non-trivial running statistics, so BatchNormalization does work
        cnn.bn.running_mean.uniform_(-0.2, 0.2)
        cnn.bn.running_var.uniform_(0.5, 1.5)
        cnn.bn.weight.uniform_(0.8, 1.2)
        cnn.bn.bias.uniform_(-0.1, 0.1)
    f16_model("f16_cnn", cnn, torch.randn(2, 3, 16, 16), out_dir)
    mlp = Mlp()
    with torch.no_grad():
        mlp.ln.weight.uniform_(0.8, 1.2)
        mlp.ln.bias.uniform_(-0.1, 0.1)
    f16_model("f16_mlp", mlp, torch.randn(2, 8, 32), out_dir)

    lstm = LstmHead().eval()
    x = torch.randn(2, 7, 8)
    path = os.path.join(out_dir, "lstm")
    model = export(lstm, x, path)
    with torch.no_grad():
        write_set(path, [x.numpy()], [lstm(x).numpy()], model)

    int8_model(out_dir)
    qdq_model(out_dir)
    qdq_linear_model(out_dir)

    # bf16: the same networks with their own seed, so the f16 and LSTM files above do not change.
    torch.manual_seed(SEED + 16)
    cnn = Cnn()
    with torch.no_grad():
        cnn.bn.running_mean.uniform_(-0.2, 0.2)
        cnn.bn.running_var.uniform_(0.5, 1.5)
        cnn.bn.weight.uniform_(0.8, 1.2)
        cnn.bn.bias.uniform_(-0.1, 0.1)
    bf16_model("bf16_cnn", cnn, torch.randn(2, 3, 16, 16), out_dir)
    mlp = Mlp()
    with torch.no_grad():
        mlp.ln.weight.uniform_(0.8, 1.2)
        mlp.ln.bias.uniform_(-0.1, 0.1)
    bf16_model("bf16_mlp", mlp, torch.randn(2, 8, 32), out_dir)

    torch.manual_seed(SEED + 17)
    net = HswishResidual().eval()
    x = torch.randn(1, 3, 32, 32)
    path = os.path.join(out_dir, "hswish_residual")
    model = export(net, x, path)
    with torch.no_grad():
        write_set(path, [x.numpy()], [net(x).numpy()], model)

    embedding_bag_model(out_dir)


if __name__ == "__main__":
    main()
