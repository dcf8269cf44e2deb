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
