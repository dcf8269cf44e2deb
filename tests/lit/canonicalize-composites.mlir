// RUN: tandem-opt %s -split-input-file --tandem-canonicalize | FileCheck %s

// GELU, erf form as PyTorch exports it: x * (erf(x / 1.4142135) + 1) * 0.5.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[G:.*]] = tandem.gelu %arg0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s2 = tandem.constant dense<1.41421354> : tensor<f32>
  %one = tandem.constant dense<1.0> : tensor<f32>
  %half = tandem.constant dense<0.5> : tensor<f32>
  %0 = tandem.div %x, %s2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %1 = tandem.erf %0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = tandem.add %1, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %3 = tandem.mul %x, %2 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %4 = tandem.mul %3, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %4 : tensor<2x8xf32>
}

// -----

// GELU, tanh form: 0.5 * x * (1 + tanh(0.7978846 * (x + 0.044715 * x^3))).
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[G:.*]] = tandem.gelu %arg0 {approximate = "tanh"}
// CHECK-NEXT: return %[[G]]
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %three = tandem.constant dense<3.0> : tensor<f32>
  %k = tandem.constant dense<0.044715> : tensor<f32>
  %c = tandem.constant dense<0.797884583> : tensor<f32>
  %one = tandem.constant dense<1.0> : tensor<f32>
  %half = tandem.constant dense<0.5> : tensor<f32>
  %0 = tandem.pow %x, %three : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = tandem.mul %k, %0 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = tandem.add %x, %1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = tandem.mul %2, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %4 = tandem.tanh %3 : (tensor<8xf32>) -> tensor<8xf32>
  %5 = tandem.add %one, %4 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %6 = tandem.mul %half, %x : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %7 = tandem.mul %6, %5 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %7 : tensor<8xf32>
}

// -----

// Not GELU: the scale is 0.25, and the erf argument is x / 2 (not / sqrt 2); both stay.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.gelu
// CHECK: tandem.erf
// CHECK-NOT: tandem.gelu
func.func @main(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s2 = tandem.constant dense<1.41421354> : tensor<f32>
  %two = tandem.constant dense<2.0> : tensor<f32>
  %one = tandem.constant dense<1.0> : tensor<f32>
  %half = tandem.constant dense<0.5> : tensor<f32>
  %quarter = tandem.constant dense<0.25> : tensor<f32>
  %0 = tandem.div %x, %s2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = tandem.erf %0 : (tensor<8xf32>) -> tensor<8xf32>
  %2 = tandem.add %1, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %3 = tandem.mul %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = tandem.mul %3, %quarter : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = tandem.div %x, %two : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %6 = tandem.erf %5 : (tensor<8xf32>) -> tensor<8xf32>
  %7 = tandem.add %6, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %8 = tandem.mul %x, %7 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %9 = tandem.mul %8, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %4, %9 : tensor<8xf32>, tensor<8xf32>
}

// -----

// GELU as x * 0.5 * (1 + erf(x * (1/sqrt 2))) (the scale first, the erf argument a product).
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[G:.*]] = tandem.gelu %arg0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %r2 = tandem.constant dense<0.707106769> : tensor<f32>
  %one = tandem.constant dense<1.0> : tensor<f32>
  %half = tandem.constant dense<0.5> : tensor<f32>
  %0 = tandem.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %1 = tandem.mul %x, %r2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %2 = tandem.erf %1 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %3 = tandem.add %one, %2 : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %4 = tandem.mul %0, %3 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %4 : tensor<2x8xf32>
}

// -----

// Not GELU: 1.0009 is not 1 and 0.5003 is not 0.5 (only the irrational constants, sqrt 2 and
// sqrt(2/pi), may be rounded by the exporter); nothing changes but CSE of the shared erf.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.gelu
// CHECK: tandem.erf
// CHECK-COUNT-4: tandem.mul
// CHECK-NOT: tandem.gelu
func.func @main(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s2 = tandem.constant dense<1.41421354> : tensor<f32>
  %one = tandem.constant dense<1.0> : tensor<f32>
  %onish = tandem.constant dense<1.0009> : tensor<f32>
  %half = tandem.constant dense<0.5> : tensor<f32>
  %halfish = tandem.constant dense<0.5003> : tensor<f32>
  %0 = tandem.div %x, %s2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = tandem.erf %0 : (tensor<8xf32>) -> tensor<8xf32>
  %2 = tandem.add %1, %onish : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %3 = tandem.mul %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = tandem.mul %3, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = tandem.div %x, %s2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %6 = tandem.erf %5 : (tensor<8xf32>) -> tensor<8xf32>
  %7 = tandem.add %6, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %8 = tandem.mul %x, %7 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %9 = tandem.mul %8, %halfish : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %4, %9 : tensor<8xf32>, tensor<8xf32>
}

// -----

// LayerNorm written out over the last axis, with scale and bias.
// CHECK-LABEL: func.func @main
// CHECK: %[[LN:.*]] = tandem.layer_normalization %arg0, %{{.*}}, %{{.*}} {axis = -1 : i64, epsilon = 9.99999974E-6 : f32}
// CHECK-NOT: tandem.reduce_mean
// CHECK: return %[[LN]]
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = tandem.constant dense<2.0> : tensor<f32>
  %eps = tandem.constant dense<1.0e-5> : tensor<f32>
  %g = tandem.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = tandem.constant dense<[0.5, 0.5, 0.5, 0.5]> : tensor<4xf32>
  %m = tandem.reduce_mean %x {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %d = tandem.sub %x, %m : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p = tandem.pow %d, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tandem.reduce_mean %p {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %e = tandem.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = tandem.sqrt %e : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = tandem.div %d, %s : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %y = tandem.mul %n, %g : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %z = tandem.add %y, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %z : tensor<2x4xf32>
}

// -----

// Not LayerNorm: the variance is taken over axis 0, the mean over axis 1.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.layer_normalization
// CHECK: tandem.reduce_mean
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = tandem.constant dense<2.0> : tensor<f32>
  %eps = tandem.constant dense<1.0e-5> : tensor<f32>
  %m = tandem.reduce_mean %x {axes = [1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %d = tandem.sub %x, %m : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p = tandem.pow %d, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tandem.reduce_mean %p {axes = [0]} : (tensor<2x4xf32>) -> tensor<1x4xf32>
  %e = tandem.add %v, %eps : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %s = tandem.sqrt %e : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %n = tandem.div %d, %s : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  return %n : tensor<2x4xf32>
}

// -----

// Softmax written out with the max subtraction, along axis 1.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[S:.*]] = tandem.softmax %arg0 {axis = 1 : i64}
// CHECK-NEXT: return %[[S]]
func.func @main(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %axes = tandem.constant dense<[1]> : tensor<1xi64>
  %m = tandem.reduce_max %x {axes = [1]} : (tensor<3x5xf32>) -> tensor<3x1xf32>
  %d = tandem.sub %x, %m : (tensor<3x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
  %e = tandem.exp %d : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %s = tandem.reduce_sum %e, %axes : (tensor<3x5xf32>, tensor<1xi64>) -> tensor<3x1xf32>
  %y = tandem.div %e, %s : (tensor<3x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

// Not Softmax: the max is taken along axis 0 but the sum along axis 1.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.softmax
// CHECK: tandem.reduce_sum
func.func @main(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %axes = tandem.constant dense<[1]> : tensor<1xi64>
  %m = tandem.reduce_max %x {axes = [0]} : (tensor<3x5xf32>) -> tensor<1x5xf32>
  %d = tandem.sub %x, %m : (tensor<3x5xf32>, tensor<1x5xf32>) -> tensor<3x5xf32>
  %e = tandem.exp %d : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %s = tandem.reduce_sum %e, %axes : (tensor<3x5xf32>, tensor<1xi64>) -> tensor<3x1xf32>
  %y = tandem.div %e, %s : (tensor<3x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

// MatMul + bias Add becomes Gemm (either operand order of the Add).
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[W:.*]] = tandem.constant
// CHECK-NEXT: %[[B:.*]] = tandem.constant
// CHECK-NEXT: %[[G:.*]] = tandem.gemm %arg0, %[[W]], %[[B]] : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[G]]
func.func @main(%a: tensor<2x3xf32>) -> tensor<2x4xf32> {
  %w = tandem.constant dense<1.0> : tensor<3x4xf32>
  %b = tandem.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = tandem.mat_mul %a, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = tandem.add %b, %0 : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}

// -----

// Not Gemm: a batched (3-D) MatMul, and a MatMul whose result is also returned.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.gemm
// CHECK: tandem.mat_mul
// CHECK: tandem.add
// CHECK: tandem.mat_mul
// CHECK: tandem.add
func.func @main(%a: tensor<5x2x3xf32>, %c: tensor<2x3xf32>) -> (tensor<5x2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %w = tandem.constant dense<1.0> : tensor<3x4xf32>
  %b = tandem.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = tandem.mat_mul %a, %w : (tensor<5x2x3xf32>, tensor<3x4xf32>) -> tensor<5x2x4xf32>
  %1 = tandem.add %0, %b : (tensor<5x2x4xf32>, tensor<4xf32>) -> tensor<5x2x4xf32>
  %2 = tandem.mat_mul %c, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %3 = tandem.add %2, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %1, %2, %3 : tensor<5x2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// ReduceMean over every spatial axis (x.mean([2, 3]) from PyTorch) is GlobalAveragePool, then
// Flatten when the axes are dropped; kept dims need no Flatten. A mean over the channels, over
// one spatial axis only, or over the last axis of a rank-3 value (a sequence), stays a ReduceMean.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[P:.*]] = tandem.global_average_pool %arg0 : (tensor<2x8x5x5xf32>) -> tensor<2x8x1x1xf32>
// CHECK-NEXT: %[[F:.*]] = tandem.flatten %[[P]] {axis = 1 : i64} : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[K:.*]] = tandem.global_average_pool %arg1 : (tensor<2x8x5x5xf32>) -> tensor<2x8x1x1xf32>
// CHECK-NEXT: tandem.reduce_mean %arg0 {axes = [1], keepdims = 0 : i64}
// CHECK-NEXT: tandem.reduce_mean %arg0 {axes = [3]}
// CHECK-NEXT: tandem.reduce_mean %arg2 {axes = [2]}
func.func @main(%x: tensor<2x8x5x5xf32>, %y: tensor<2x8x5x5xf32>, %s: tensor<2x5x8xf32>) -> (tensor<2x8xf32>, tensor<2x8x1x1xf32>, tensor<2x5x5xf32>, tensor<2x8x5x1xf32>, tensor<2x5x1xf32>) {
  %a = tandem.reduce_mean %x {axes = [2, 3], keepdims = 0 : i64} : (tensor<2x8x5x5xf32>) -> tensor<2x8xf32>
  %b = tandem.reduce_mean %y {axes = [-1, -2]} : (tensor<2x8x5x5xf32>) -> tensor<2x8x1x1xf32>
  %c = tandem.reduce_mean %x {axes = [1], keepdims = 0 : i64} : (tensor<2x8x5x5xf32>) -> tensor<2x5x5xf32>
  %d = tandem.reduce_mean %x {axes = [3]} : (tensor<2x8x5x5xf32>) -> tensor<2x8x5x1xf32>
  %e = tandem.reduce_mean %s {axes = [2]} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  return %a, %b, %c, %d, %e : tensor<2x8xf32>, tensor<2x8x1x1xf32>, tensor<2x5x5xf32>, tensor<2x8x5x1xf32>, tensor<2x5x1xf32>
}

// -----

// Einsum of batch, row, column and contracted labels (MaxViT's attention scores): a batched
// MatMul, B's contracted label moved before its column label; no Einsum is left.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.einsum
// CHECK: %[[T:.*]] = tandem.transpose %arg1 {perm = [0, 1, 2, 4, 3]}
// CHECK-NEXT: %[[M:.*]] = tandem.mat_mul %arg0, %[[T]] : (tensor<1x2x3x4x8xf32>, tensor<1x2x3x8x5xf32>) -> tensor<1x2x3x4x5xf32>
// CHECK-NEXT: return %[[M]]
func.func @main(%a: tensor<1x2x3x4x8xf32>, %b: tensor<1x2x3x5x8xf32>) -> tensor<1x2x3x4x5xf32> {
  %0 = tandem.einsum %a, %b {equation = "B G H I D, B G H J D -> B G H I J"} : (tensor<1x2x3x4x8xf32>, tensor<1x2x3x5x8xf32>) -> tensor<1x2x3x4x5xf32>
  return %0 : tensor<1x2x3x4x5xf32>
}

// -----

// A diagonal ("ii") keeps the Einsum.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: tandem.einsum
func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x5xf32>) -> tensor<5xf32> {
  %0 = tandem.einsum %a, %b {equation = "ii,ij->j"} : (tensor<4x4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// A causal Conv1d's left Pad by zero goes into the Conv's pads; the Pad is gone.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.pad
// CHECK: tandem.conv %arg0, %{{.*}} {{{.*}}pads = [2, 0]{{.*}}} : (tensor<1x4x10xf32>, tensor<6x4x3xf32>) -> tensor<1x6x10xf32>
// CHECK-NOT: tandem.pad
func.func @main(%x: tensor<1x4x10xf32>, %w: tensor<6x4x3xf32>) -> tensor<1x6x10xf32> {
  %p = tandem.constant dense<[0, 0, 2, 0, 0, 0]> : tensor<6xi64>
  %0 = tandem.pad %x, %p {mode = "constant"} : (tensor<1x4x10xf32>, tensor<6xi64>) -> tensor<1x4x12xf32>
  %1 = tandem.conv %0, %w {kernel_shape = [3]} : (tensor<1x4x12xf32>, tensor<6x4x3xf32>) -> tensor<1x6x10xf32>
  return %1 : tensor<1x6x10xf32>
}

// -----

// A 2-D Conv with pads of its own and a strided one: the sums [1+1, 1+0, 1+0, 1+1] at
// stride 2; an explicit zero constant_value folds too.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.pad
// CHECK: tandem.conv %arg0, %{{.*}} {{{.*}}pads = [2, 1, 1, 2]{{.*}}} : (tensor<1x2x7x7xf32>
func.func @main(%x: tensor<1x2x7x7xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32> {
  %p = tandem.constant dense<[0, 0, 1, 0, 0, 0, 0, 1]> : tensor<8xi64>
  %z = tandem.constant dense<0.0> : tensor<f32>
  %0 = tandem.pad %x, %p, %z {mode = "constant"} : (tensor<1x2x7x7xf32>, tensor<8xi64>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %1 = tandem.conv %0, %w {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<1x2x8x8xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  return %1 : tensor<1x3x4x4xf32>
}

// -----

// Left as they are: a Pad by one, a Pad of the channels, a reflect Pad, and a Pad that is also
// returned (it must be computed anyway).
// CHECK-LABEL: func.func @main
// CHECK-COUNT-4: tandem.pad
func.func @main(%x: tensor<1x4x10xf32>, %w: tensor<6x4x3xf32>, %w6: tensor<6x6x3xf32>) -> (tensor<1x6x10xf32>, tensor<1x6x10xf32>, tensor<1x6x10xf32>, tensor<1x6x10xf32>, tensor<1x4x12xf32>) {
  %p = tandem.constant dense<[0, 0, 2, 0, 0, 0]> : tensor<6xi64>
  %one = tandem.constant dense<1.0> : tensor<f32>
  %0 = tandem.pad %x, %p, %one {mode = "constant"} : (tensor<1x4x10xf32>, tensor<6xi64>, tensor<f32>) -> tensor<1x4x12xf32>
  %1 = tandem.conv %0, %w {kernel_shape = [3]} : (tensor<1x4x12xf32>, tensor<6x4x3xf32>) -> tensor<1x6x10xf32>
  %pc = tandem.constant dense<[0, 1, 2, 0, 1, 0]> : tensor<6xi64>
  %2 = tandem.pad %x, %pc {mode = "constant"} : (tensor<1x4x10xf32>, tensor<6xi64>) -> tensor<1x6x12xf32>
  %3 = tandem.conv %2, %w6 {kernel_shape = [3]} : (tensor<1x6x12xf32>, tensor<6x6x3xf32>) -> tensor<1x6x10xf32>
  %4 = tandem.pad %x, %p {mode = "reflect"} : (tensor<1x4x10xf32>, tensor<6xi64>) -> tensor<1x4x12xf32>
  %5 = tandem.conv %4, %w {kernel_shape = [3]} : (tensor<1x4x12xf32>, tensor<6x4x3xf32>) -> tensor<1x6x10xf32>
  %6 = tandem.pad %x, %p {mode = "constant"} : (tensor<1x4x10xf32>, tensor<6xi64>) -> tensor<1x4x12xf32>
  %7 = tandem.conv %6, %w {kernel_shape = [3]} : (tensor<1x4x12xf32>, tensor<6x4x3xf32>) -> tensor<1x6x10xf32>
  return %1, %3, %5, %7, %6 : tensor<1x6x10xf32>, tensor<1x6x10xf32>, tensor<1x6x10xf32>, tensor<1x6x10xf32>, tensor<1x4x12xf32>
}

// -----

// torch.onnx's avg_pool2d(3, 1, padding=1) (count_include_pad=True): the Pad goes into the
// pool's pads, and the pool counts them, as it counted the Pad's zeros.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.pad
// CHECK: tandem.average_pool %arg0 {{{.*}}count_include_pad = 1{{.*}}pads = [1, 1, 1, 1]{{.*}}} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NOT: tandem.pad
func.func @main(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %p = tandem.constant dense<[0, 0, 1, 1, 0, 0, 1, 1]> : tensor<8xi64>
  %0 = tandem.pad %x, %p {mode = "constant"} : (tensor<1x4x8x8xf32>, tensor<8xi64>) -> tensor<1x4x10x10xf32>
  %1 = tandem.average_pool %0 {kernel_shape = [3, 3], pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x4x10x10xf32>) -> tensor<1x4x8x8xf32>
  return %1 : tensor<1x4x8x8xf32>
}

// -----

// Left as they are: a pool with pads it does not count (its own pads would start counting),
// one with ceil_mode, and a MaxPool.
// CHECK-LABEL: func.func @main
// CHECK-COUNT-3: tandem.pad
func.func @main(%x: tensor<1x4x8x8xf32>, %y: tensor<1x4x8x8xf32>, %z: tensor<1x4x8x8xf32>) -> (tensor<1x4x10x10xf32>, tensor<1x4x5x5xf32>, tensor<1x4x8x8xf32>) {
  %p = tandem.constant dense<[0, 0, 1, 1, 0, 0, 1, 1]> : tensor<8xi64>
  %0 = tandem.pad %x, %p {mode = "constant"} : (tensor<1x4x8x8xf32>, tensor<8xi64>) -> tensor<1x4x10x10xf32>
  %1 = tandem.average_pool %0 {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x4x10x10xf32>) -> tensor<1x4x10x10xf32>
  %2 = tandem.pad %y, %p {mode = "constant"} : (tensor<1x4x8x8xf32>, tensor<8xi64>) -> tensor<1x4x10x10xf32>
  %3 = tandem.average_pool %2 {ceil_mode = 1, kernel_shape = [3, 3], strides = [2, 2]} : (tensor<1x4x10x10xf32>) -> tensor<1x4x5x5xf32>
  %4 = tandem.pad %z, %p {mode = "constant"} : (tensor<1x4x8x8xf32>, tensor<8xi64>) -> tensor<1x4x10x10xf32>
  %5 = tandem.max_pool %4 {kernel_shape = [3, 3], strides = [1, 1]} : (tensor<1x4x10x10xf32>) -> tensor<1x4x8x8xf32>
  return %1, %3, %5 : tensor<1x4x10x10xf32>, tensor<1x4x5x5xf32>, tensor<1x4x8x8xf32>
}
