// RUN: tandem-opt %s -split-input-file --tandem-fuse-qdq=require-fast-kernel=false | FileCheck %s

// DequantizeLinear -> Conv -> Relu -> QuantizeLinear, W per output channel (axis 0) behind a
// QuantizeLinear of f32 constants, scales and zero points through Identity (as PyTorch exports
// them): one QLinearConv. W is quantized here (0.5 / 0.25 = 2, -1 / 0.5 = -2), the bias at
// x_scale * w_scale: 1 / (0.5 * 0.25) = 8, -3 / (0.5 * 0.5) = -12. The Relu goes: y's zero
// point is u8's least value. The x DequantizeLinear stays for its other reader.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[XQ:.*]]: tensor<1x2x5x5xui8>)
// CHECK-DAG: %[[W:.*]] = tandem.constant dense<{{\[\[\[\[}}2, 2], [2, 2]], {{\[\[}}2, 2], [2, 2]]], {{\[\[\[}}-2, -2], [-2, -2]], {{\[\[}}-2, -2], [-2, -2]]]]> : tensor<2x2x2x2xi8>
// CHECK-DAG: %[[B:.*]] = tandem.constant dense<[8, -12]> : tensor<2xi32>
// CHECK: %[[Y:.*]] = tandem.qlinear_conv %[[XQ]], %{{.*}}, %{{.*}}, %[[W]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[B]] {group = 1 : i64, kernel_shape = [2, 2], pads = [0, 0, 0, 0], strides = [1, 1]} : ({{.*}}) -> tensor<1x2x4x4xui8>
// CHECK-NOT: tandem.conv
// CHECK-NOT: tandem.relu
// CHECK: return %[[Y]], %{{.*}} : tensor<1x2x4x4xui8>, tensor<1x2x5x5xf32>
func.func @main(%xq: tensor<1x2x5x5xui8>) -> (tensor<1x2x4x4xui8>, tensor<1x2x5x5xf32>) {
  %xs = tandem.constant dense<0.5> : tensor<f32>
  %xz0 = tandem.constant dense<3> : tensor<ui8>
  %xz = tandem.identity %xz0 : (tensor<ui8>) -> tensor<ui8>
  %x = tandem.dequantize_linear %xq, %xs, %xz : (tensor<1x2x5x5xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x2x5x5xf32>
  %wf = tandem.constant dense<[[[[0.5, 0.5], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]]], [[[-1.0, -1.0], [-1.0, -1.0]], [[-1.0, -1.0], [-1.0, -1.0]]]]> : tensor<2x2x2x2xf32>
  %ws = tandem.constant dense<[0.25, 0.5]> : tensor<2xf32>
  %wz = tandem.constant dense<0> : tensor<2xi8>
  %wq = tandem.quantize_linear %wf, %ws, %wz {axis = 0 : i64} : (tensor<2x2x2x2xf32>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x2x2x2xi8>
  %w = tandem.dequantize_linear %wq, %ws, %wz {axis = 0 : i64} : (tensor<2x2x2x2xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x2x2x2xf32>
  %b = tandem.constant dense<[1.0, -3.0]> : tensor<2xf32>
  %c = tandem.conv %x, %w, %b {group = 1 : i64, kernel_shape = [2, 2], pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x2x5x5xf32>, tensor<2x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  %r = tandem.relu %c : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ys = tandem.constant dense<0.125> : tensor<f32>
  %yz = tandem.constant dense<0> : tensor<ui8>
  %y = tandem.quantize_linear %r, %ys, %yz : (tensor<1x2x4x4xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x2x4x4xui8>
  return %y, %x : tensor<1x2x4x4xui8>, tensor<1x2x5x5xf32>
}

// -----

// Left as written: a Relu before a QuantizeLinear whose zero point (5) is not u8's least value
// (Q(Relu(v)) is then max(Q(v), 5), which QLinearConv does not compute).
// CHECK-LABEL: func.func @main
// CHECK: tandem.conv
// CHECK: tandem.relu
// CHECK: tandem.quantize_linear
// CHECK-NOT: tandem.qlinear_conv
func.func @main(%xq: tensor<1x1x3x3xui8>) -> tensor<1x1x2x2xui8> {
  %s = tandem.constant dense<0.5> : tensor<f32>
  %z = tandem.constant dense<0> : tensor<ui8>
  %x = tandem.dequantize_linear %xq, %s, %z : (tensor<1x1x3x3xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x1x3x3xf32>
  %wq = tandem.constant dense<1> : tensor<1x1x2x2xi8>
  %wz = tandem.constant dense<0> : tensor<i8>
  %w = tandem.dequantize_linear %wq, %s, %wz : (tensor<1x1x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x1x2x2xf32>
  %c = tandem.conv %x, %w {kernel_shape = [2, 2]} : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %r = tandem.relu %c : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %yz = tandem.constant dense<5> : tensor<ui8>
  %y = tandem.quantize_linear %r, %s, %yz : (tensor<1x1x2x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x1x2x2xui8>
  return %y : tensor<1x1x2x2xui8>
}

// -----

// Left as written: the Conv's f32 result has a second reader, and W is not constant.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-2: tandem.conv
// CHECK-NOT: tandem.qlinear_conv
func.func @main(%xq: tensor<1x1x3x3xui8>, %wq: tensor<1x1x2x2xi8>) -> (tensor<1x1x2x2xui8>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xui8>) {
  %s = tandem.constant dense<0.5> : tensor<f32>
  %z = tandem.constant dense<0> : tensor<ui8>
  %wz = tandem.constant dense<0> : tensor<i8>
  %x = tandem.dequantize_linear %xq, %s, %z : (tensor<1x1x3x3xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x1x3x3xf32>
  %wk = tandem.constant dense<1> : tensor<1x1x2x2xi8>
  %w = tandem.dequantize_linear %wk, %s, %wz : (tensor<1x1x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x1x2x2xf32>
  %c = tandem.conv %x, %w {kernel_shape = [2, 2]} : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %y = tandem.quantize_linear %c, %s, %z : (tensor<1x1x2x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x1x2x2xui8>
  %wv = tandem.dequantize_linear %wq, %s, %wz : (tensor<1x1x2x2xi8>, tensor<f32>, tensor<i8>) -> tensor<1x1x2x2xf32>
  %c2 = tandem.conv %x, %wv {kernel_shape = [2, 2]} : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %y2 = tandem.quantize_linear %c2, %s, %z : (tensor<1x1x2x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x1x2x2xui8>
  return %y, %c, %y2 : tensor<1x1x2x2xui8>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xui8>
}

// -----

// ONNX Runtime's quantizer writes a Conv's bias as DequantizeLinear of i32 at x_scale * w_scale
// (here 0.5 * [0.25, 0.5] = [0.125, 0.25], zero point 0): B_q is that i32 constant as it is. A
// bias at another scale (0.25 for both channels) is dequantized and quantized again at
// x_scale * w_scale: [8 * 0.25 / 0.125, -12 * 0.25 / 0.25] = [16, -12].
// CHECK-LABEL: func.func @main
// CHECK: %[[BQ:.*]] = tandem.constant dense<[8, -12]> : tensor<2xi32>
// CHECK: tandem.qlinear_conv {{.*}}, %[[BQ]] {
// CHECK: %[[B2:.*]] = tandem.constant dense<[16, -12]> : tensor<2xi32>
// CHECK: tandem.qlinear_conv {{.*}}, %[[B2]] {
// CHECK-NOT: tandem.conv
func.func @main(%xq: tensor<1x2x3x3xui8>) -> (tensor<1x2x2x2xui8>, tensor<1x2x2x2xui8>) {
  %xs = tandem.constant dense<0.5> : tensor<f32>
  %z = tandem.constant dense<0> : tensor<ui8>
  %x = tandem.dequantize_linear %xq, %xs, %z : (tensor<1x2x3x3xui8>, tensor<f32>, tensor<ui8>) -> tensor<1x2x3x3xf32>
  %wq = tandem.constant dense<1> : tensor<2x2x2x2xi8>
  %ws = tandem.constant dense<[0.25, 0.5]> : tensor<2xf32>
  %wz = tandem.constant dense<0> : tensor<2xi8>
  %w = tandem.dequantize_linear %wq, %ws, %wz {axis = 0 : i64} : (tensor<2x2x2x2xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x2x2x2xf32>
  %bq = tandem.constant dense<[8, -12]> : tensor<2xi32>
  %bs = tandem.constant dense<[0.125, 0.25]> : tensor<2xf32>
  %b = tandem.dequantize_linear %bq, %bs {axis = 0 : i64} : (tensor<2xi32>, tensor<2xf32>) -> tensor<2xf32>
  %c = tandem.conv %x, %w, %b {kernel_shape = [2, 2]} : (tensor<1x2x3x3xf32>, tensor<2x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  %y = tandem.quantize_linear %c, %xs, %z : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x2x2x2xui8>
  %bs2 = tandem.constant dense<0.25> : tensor<f32>
  %b2 = tandem.dequantize_linear %bq, %bs2 : (tensor<2xi32>, tensor<f32>) -> tensor<2xf32>
  %c2 = tandem.conv %x, %w, %b2 {kernel_shape = [2, 2]} : (tensor<1x2x3x3xf32>, tensor<2x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  %y2 = tandem.quantize_linear %c2, %xs, %z : (tensor<1x2x2x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<1x2x2x2xui8>
  return %y, %y2 : tensor<1x2x2x2xui8>, tensor<1x2x2x2xui8>
}

// -----

// PyTorch's 3-D nn.Linear in QDQ form: MatMul of the transposed per-channel weights [N, K]
// (axis 0), then Add of the f32 bias, Relu, QuantizeLinear: one QLinearMatMulBias whose b is W_q
// transposed to [K, N] (columns the channels) and whose B is the bias at x_scale * w_scale:
// 1 / (0.5 * 0.25) = 8, -1 / (0.5 * 0.5) = -4. The Transpose goes with the MatMul and the Add.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[XQ:.*]]: tensor<2x3x4xui8>)
// CHECK-DAG: %[[W:.*]] = tandem.constant dense<{{\[\[}}1, 5], [2, 6], [3, 7], [4, 8]]> : tensor<4x2xi8>
// CHECK-DAG: %[[B:.*]] = tandem.constant dense<[8, -4]> : tensor<2xi32>
// CHECK: %[[Y:.*]] = tandem.qlinear_matmul_bias %[[XQ]], %{{.*}}, %{{.*}}, %[[W]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[B]] : ({{.*}}) -> tensor<2x3x2xui8>
// CHECK-NOT: tandem.transpose
// CHECK-NOT: tandem.mat_mul
// CHECK-NOT: tandem.add
// CHECK: return %[[Y]]
func.func @main(%xq: tensor<2x3x4xui8>) -> tensor<2x3x2xui8> {
  %xs = tandem.constant dense<0.5> : tensor<f32>
  %z = tandem.constant dense<0> : tensor<ui8>
  %x = tandem.dequantize_linear %xq, %xs, %z : (tensor<2x3x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<2x3x4xf32>
  %wq = tandem.constant dense<[[1, 2, 3, 4], [5, 6, 7, 8]]> : tensor<2x4xi8>
  %ws = tandem.constant dense<[0.25, 0.5]> : tensor<2xf32>
  %wz = tandem.constant dense<0> : tensor<2xi8>
  %w = tandem.dequantize_linear %wq, %ws, %wz {axis = 0 : i64} : (tensor<2x4xi8>, tensor<2xf32>, tensor<2xi8>) -> tensor<2x4xf32>
  %wt = tandem.transpose %w {perm = [1, 0]} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %m = tandem.mat_mul %x, %wt : (tensor<2x3x4xf32>, tensor<4x2xf32>) -> tensor<2x3x2xf32>
  %b = tandem.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %a = tandem.add %b, %m : (tensor<2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
  %r = tandem.relu %a : (tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
  %y = tandem.quantize_linear %r, %xs, %z : (tensor<2x3x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<2x3x2xui8>
  return %y : tensor<2x3x2xui8>
}

// -----

// ONNX Runtime's forms: MatMul -> QuantizeLinear with per-tensor W [K, N] (QLinearMatMul, W the
// graph's own constant) and Gemm transB with an i32 bias (QLinearMatMulBias, W transposed).
// CHECK-LABEL: func.func @main
// CHECK: %[[W1:.*]] = tandem.constant dense<{{\[\[}}1, 2], [3, 4]]> : tensor<2x2xi8>
// CHECK: tandem.qlinear_matmul %{{.*}}, %{{.*}}, %{{.*}}, %[[W1]], {{.*}} -> tensor<3x2xui8>
// CHECK-DAG: %[[W2:.*]] = tandem.constant dense<{{\[\[}}1, 3], [2, 4]]> : tensor<2x2xi8>
// CHECK-DAG: %[[B:.*]] = tandem.constant dense<[5, 6]> : tensor<2xi32>
// CHECK: tandem.qlinear_matmul_bias %{{.*}}, %{{.*}}, %{{.*}}, %[[W2]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[B]] : ({{.*}}) -> tensor<3x2xi8>
// CHECK-NOT: tandem.gemm
func.func @main(%xq: tensor<3x2xui8>) -> (tensor<3x2xui8>, tensor<3x2xi8>) {
  %s = tandem.constant dense<0.5> : tensor<f32>
  %z = tandem.constant dense<0> : tensor<ui8>
  %x = tandem.dequantize_linear %xq, %s, %z : (tensor<3x2xui8>, tensor<f32>, tensor<ui8>) -> tensor<3x2xf32>
  %wq = tandem.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi8>
  %w = tandem.dequantize_linear %wq, %s : (tensor<2x2xi8>, tensor<f32>) -> tensor<2x2xf32>
  %m = tandem.mat_mul %x, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %y = tandem.quantize_linear %m, %s, %z : (tensor<3x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<3x2xui8>
  %bq = tandem.constant dense<[5, 6]> : tensor<2xi32>
  %bs = tandem.constant dense<0.25> : tensor<f32>
  %b = tandem.dequantize_linear %bq, %bs : (tensor<2xi32>, tensor<f32>) -> tensor<2xf32>
  %g = tandem.gemm %x, %w, %b {transB = 1 : i64} : (tensor<3x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %iz = tandem.constant dense<-3> : tensor<i8>
  %y2 = tandem.quantize_linear %g, %s, %iz : (tensor<3x2xf32>, tensor<f32>, tensor<i8>) -> tensor<3x2xi8>
  return %y, %y2 : tensor<3x2xui8>, tensor<3x2xi8>
}

// -----

// Left as written: a MatMul of two activations (b not a constant: attention's Q K^T), a MatMul
// whose Add is a residual (not a bias of one value per column), and a Gemm with alpha 2.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-2: tandem.mat_mul
// CHECK: tandem.gemm
// CHECK-NOT: tandem.qlinear
func.func @main(%aq: tensor<3x2xui8>, %bq: tensor<2x2xi8>, %res: tensor<3x2xf32>) -> (tensor<3x2xui8>, tensor<3x2xui8>, tensor<3x2xui8>) {
  %s = tandem.constant dense<0.5> : tensor<f32>
  %z = tandem.constant dense<0> : tensor<ui8>
  %a = tandem.dequantize_linear %aq, %s, %z : (tensor<3x2xui8>, tensor<f32>, tensor<ui8>) -> tensor<3x2xf32>
  %b = tandem.dequantize_linear %bq, %s : (tensor<2x2xi8>, tensor<f32>) -> tensor<2x2xf32>
  %m = tandem.mat_mul %a, %b : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %y = tandem.quantize_linear %m, %s, %z : (tensor<3x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<3x2xui8>
  %wq = tandem.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi8>
  %w = tandem.dequantize_linear %wq, %s : (tensor<2x2xi8>, tensor<f32>) -> tensor<2x2xf32>
  %m2 = tandem.mat_mul %a, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %r = tandem.add %m2, %res : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %y2 = tandem.quantize_linear %r, %s, %z : (tensor<3x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<3x2xui8>
  %g = tandem.gemm %a, %w {alpha = 2.0 : f32} : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %y3 = tandem.quantize_linear %g, %s, %z : (tensor<3x2xf32>, tensor<f32>, tensor<ui8>) -> tensor<3x2xui8>
  return %y, %y2, %y3 : tensor<3x2xui8>, tensor<3x2xui8>, tensor<3x2xui8>
}

// -----

// ONNX Runtime's quantize_dynamic: DynamicQuantizeLinear -> MatMulInteger of a constant W ->
// Cast to f32 -> Mul by Mul(x_scale, w_scale): one DynamicQuantizeMatMul of x, W, w_scale and
// w_zero_point; the chain, the scale Mul and the DynamicQuantizeLinear go.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xf32>)
// CHECK-DAG: %[[W:.*]] = tandem.constant dense<1> : tensor<4x2xi8>
// CHECK-DAG: %[[WS:.*]] = tandem.constant dense<5.000000e-01> : tensor<f32>
// CHECK-DAG: %[[WZ:.*]] = tandem.constant dense<0> : tensor<i8>
// CHECK: %[[Y:.*]] = tandem.dynamic_quantize_matmul %[[X]], %[[W]], %[[WS]], %[[WZ]] : ({{.*}}) -> tensor<3x2xf32>
// CHECK-NOT: tandem.dynamic_quantize_linear
// CHECK-NOT: tandem.matmul_integer
// CHECK-NOT: tandem.cast
// CHECK-NOT: tandem.mul
// CHECK: return %[[Y]]
func.func @main(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %q, %s, %z = tandem.dynamic_quantize_linear %x : (tensor<3x4xf32>) -> (tensor<3x4xui8>, tensor<f32>, tensor<ui8>)
  %w = tandem.constant dense<1> : tensor<4x2xi8>
  %wz = tandem.constant dense<0> : tensor<i8>
  %acc = tandem.matmul_integer %q, %w, %z, %wz : (tensor<3x4xui8>, tensor<4x2xi8>, tensor<ui8>, tensor<i8>) -> tensor<3x2xi32>
  %f = tandem.cast %acc {to = 1 : i64} : (tensor<3x2xi32>) -> tensor<3x2xf32>
  %ws = tandem.constant dense<0.5> : tensor<f32>
  %sc = tandem.mul %s, %ws : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %y = tandem.mul %f, %sc : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// Left as written: the MatMulInteger reads no zero point of the DynamicQuantizeLinear (its
// x_zero_point is absent, so zero), and another reads a W that is not constant.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-2: tandem.matmul_integer
// CHECK-NOT: tandem.dynamic_quantize_matmul
func.func @main(%x: tensor<3x4xf32>, %wv: tensor<4x2xi8>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %q, %s, %z = tandem.dynamic_quantize_linear %x : (tensor<3x4xf32>) -> (tensor<3x4xui8>, tensor<f32>, tensor<ui8>)
  %w = tandem.constant dense<1> : tensor<4x2xi8>
  %ws = tandem.constant dense<0.5> : tensor<f32>
  %sc = tandem.mul %s, %ws : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %acc = tandem.matmul_integer %q, %w : (tensor<3x4xui8>, tensor<4x2xi8>) -> tensor<3x2xi32>
  %f = tandem.cast %acc {to = 1 : i64} : (tensor<3x2xi32>) -> tensor<3x2xf32>
  %y = tandem.mul %f, %sc : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %acc2 = tandem.matmul_integer %q, %wv, %z : (tensor<3x4xui8>, tensor<4x2xi8>, tensor<ui8>) -> tensor<3x2xi32>
  %f2 = tandem.cast %acc2 {to = 1 : i64} : (tensor<3x2xi32>) -> tensor<3x2xf32>
  %sc2 = tandem.mul %s, %ws : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %y2 = tandem.mul %f2, %sc2 : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  return %y, %y2 : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Weight-only quantization: f32 activations times DequantizeLinear of 8-bit constants, no
// QuantizeLinear after. A MatMul of per-column scales with its bias Add, and a Gemm of W [N, K]
// (transB) with scales in blocks of 2 along K, become DequantizeMatMul; the Gemm's W, scales and
// zero points are transposed to [K, N] and [blocks, N], its C is the bias.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xf32>)
// CHECK-DAG: %[[WQ:.*]] = tandem.constant dense<{{\[\[}}1, 2], [3, 4], [5, 6], [7, 8]]> : tensor<4x2xi8>
// CHECK-DAG: %[[WS:.*]] = tandem.constant dense<[5.000000e-01, 2.500000e-01]> : tensor<2xf32>
// CHECK-DAG: %[[B:.*]] = tandem.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: %[[Y:.*]] = tandem.dequantize_matmul %[[X]], %[[WQ]], %[[WS]], %{{.*}}, %[[B]] : ({{.*}}) -> tensor<3x2xf32>
// CHECK-DAG: %[[VT:.*]] = tandem.constant dense<{{\[\[}}1, 5], [2, 6], [3, 7], [4, 8]]> : tensor<4x2xui8>
// CHECK-DAG: %[[VS:.*]] = tandem.constant dense<{{\[\[}}1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: %[[VZ:.*]] = tandem.constant dense<{{\[\[}}9, 11], [10, 12]]> : tensor<2x2xui8>
// CHECK: %[[G:.*]] = tandem.dequantize_matmul %[[X]], %[[VT]], %[[VS]], %[[VZ]], %{{.*}} {block_size = 2 : i64} : ({{.*}}) -> tensor<3x2xf32>
// CHECK-NOT: tandem.dequantize_linear
// CHECK-NOT: tandem.mat_mul
// CHECK-NOT: tandem.gemm
// CHECK: return %[[Y]], %[[G]]
func.func @main(%x: tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %wq = tandem.constant dense<[[1, 2], [3, 4], [5, 6], [7, 8]]> : tensor<4x2xi8>
  %ws = tandem.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %w = tandem.dequantize_linear %wq, %ws {axis = 1 : i64} : (tensor<4x2xi8>, tensor<2xf32>) -> tensor<4x2xf32>
  %m = tandem.mat_mul %x, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %b = tandem.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %y = tandem.add %m, %b : (tensor<3x2xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
  %vq = tandem.constant dense<[[1, 2, 3, 4], [5, 6, 7, 8]]> : tensor<2x4xui8>
  %vs = tandem.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %vz = tandem.constant dense<[[9, 10], [11, 12]]> : tensor<2x2xui8>
  %v = tandem.dequantize_linear %vq, %vs, %vz {axis = 1 : i64, block_size = 2 : i64} : (tensor<2x4xui8>, tensor<2x2xf32>, tensor<2x2xui8>) -> tensor<2x4xf32>
  %c = tandem.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %g = tandem.gemm %x, %v, %c {transB = 1 : i64} : (tensor<3x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  return %y, %g : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Not weight-only products, left as written: scales per row of K (axis 0 of W [K, N]), blocks
// along N, A itself dequantized (a QDQ product without its QuantizeLinear), weights not constant.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-4: tandem.mat_mul
// CHECK-NOT: tandem.dequantize_matmul
func.func @main(%x: tensor<3x4xf32>, %aq: tensor<3x4xui8>, %wv: tensor<4x2xi8>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %wq = tandem.constant dense<[[1, 2], [3, 4], [5, 6], [7, 8]]> : tensor<4x2xi8>
  %rs = tandem.constant dense<[0.5, 0.25, 1.0, 2.0]> : tensor<4xf32>
  %w0 = tandem.dequantize_linear %wq, %rs {axis = 0 : i64} : (tensor<4x2xi8>, tensor<4xf32>) -> tensor<4x2xf32>
  %m0 = tandem.mat_mul %x, %w0 : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %ns = tandem.constant dense<[[0.5], [0.25], [1.0], [2.0]]> : tensor<4x1xf32>
  %w1 = tandem.dequantize_linear %wq, %ns {axis = 1 : i64, block_size = 2 : i64} : (tensor<4x2xi8>, tensor<4x1xf32>) -> tensor<4x2xf32>
  %m1 = tandem.mat_mul %x, %w1 : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %s = tandem.constant dense<0.5> : tensor<f32>
  %z = tandem.constant dense<0> : tensor<ui8>
  %a = tandem.dequantize_linear %aq, %s, %z : (tensor<3x4xui8>, tensor<f32>, tensor<ui8>) -> tensor<3x4xf32>
  %w2 = tandem.dequantize_linear %wq, %s : (tensor<4x2xi8>, tensor<f32>) -> tensor<4x2xf32>
  %m2 = tandem.mat_mul %a, %w2 : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %w3 = tandem.dequantize_linear %wv, %s : (tensor<4x2xi8>, tensor<f32>) -> tensor<4x2xf32>
  %m3 = tandem.mat_mul %x, %w3 : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return %m0, %m1, %m2, %m3 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}
