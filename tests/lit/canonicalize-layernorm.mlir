// RUN: tandem-opt %s -split-input-file --tandem-canonicalize | FileCheck %s
// LayerNorm written out (as PyTorch exports nn.LayerNorm at opset 13): matches rewrite the
// whole pattern, near-misses stay exactly as they were.

// BERT's eps 1e-12 becomes the epsilon attribute; scale [1,1,4] and a one-element bias
// broadcast along the last axis only, so they become [4] constants.
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[G:.*]] = tandem.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[B:.*]] = tandem.constant dense<2.500000e-01> : tensor<4xf32>
// CHECK: %[[LN:.*]] = tandem.layer_normalization %arg0, %[[G]], %[[B]] {axis = -1 : i64, epsilon = 9.99999996E-13 : f32} : (tensor<3x2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<3x2x4xf32>
// CHECK-NOT: tandem.reduce_mean
// CHECK: return %[[LN]]
func.func @main(%x: tensor<3x2x4xf32>) -> tensor<3x2x4xf32> {
  %two = tandem.constant dense<2.0> : tensor<f32>
  %eps = tandem.constant dense<1.0e-12> : tensor<f32>
  %g = tandem.constant dense<[[[1.0, 2.0, 3.0, 4.0]]]> : tensor<1x1x4xf32>
  %b = tandem.constant dense<[0.25]> : tensor<1xf32>
  %m = tandem.reduce_mean %x {axes = [2]} : (tensor<3x2x4xf32>) -> tensor<3x2x1xf32>
  %d = tandem.sub %x, %m : (tensor<3x2x4xf32>, tensor<3x2x1xf32>) -> tensor<3x2x4xf32>
  %p = tandem.pow %d, %two : (tensor<3x2x4xf32>, tensor<f32>) -> tensor<3x2x4xf32>
  %v = tandem.reduce_mean %p {axes = [-1]} : (tensor<3x2x4xf32>) -> tensor<3x2x1xf32>
  %e = tandem.add %eps, %v : (tensor<f32>, tensor<3x2x1xf32>) -> tensor<3x2x1xf32>
  %s = tandem.sqrt %e : (tensor<3x2x1xf32>) -> tensor<3x2x1xf32>
  %n = tandem.div %d, %s : (tensor<3x2x4xf32>, tensor<3x2x1xf32>) -> tensor<3x2x4xf32>
  %y = tandem.mul %g, %n : (tensor<1x1x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  %z = tandem.add %b, %y : (tensor<1xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  return %z : tensor<3x2x4xf32>
}

// -----

// Post-norm (x is a residual sum read by more than the LayerNorm), the square as Mul(D, D),
// no scale (ones) but a bias, another eps: one LayerNormalization.
// CHECK-LABEL: func.func @main
// CHECK: %[[X:.*]] = tandem.add %arg0, %arg1
// CHECK-DAG: %[[G:.*]] = tandem.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-DAG: %[[B:.*]] = tandem.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK: %[[LN:.*]] = tandem.layer_normalization %[[X]], %[[G]], %[[B]] {axis = -1 : i64, epsilon = 1.000000e-03 : f32}
// CHECK-NOT: tandem.sqrt
// CHECK: return %[[LN]], %[[X]]
func.func @main(%a: tensor<2x4xf32>, %r: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %eps = tandem.constant dense<1.0e-3> : tensor<1xf32>
  %b = tandem.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %x = tandem.add %a, %r : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = tandem.reduce_mean %x {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %d = tandem.sub %x, %m : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p = tandem.mul %d, %d : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %v = tandem.reduce_mean %p {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %e = tandem.add %v, %eps : (tensor<2x1xf32>, tensor<1xf32>) -> tensor<2x1xf32>
  %s = tandem.sqrt %e : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = tandem.div %d, %s : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %z = tandem.add %n, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %z, %x : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Not LayerNorm: both means are over axis 0 (not the last axis). Nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.layer_normalization
// CHECK: tandem.reduce_mean %arg0 {axes = [0]}
// CHECK: tandem.pow
// CHECK: tandem.reduce_mean %{{.*}} {axes = [0]}
// CHECK: tandem.div
// CHECK: tandem.mul
// CHECK: tandem.add
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = tandem.constant dense<2.0> : tensor<f32>
  %eps = tandem.constant dense<1.0e-5> : tensor<f32>
  %g = tandem.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = tandem.constant dense<[0.5, 0.5, 0.5, 0.5]> : tensor<4xf32>
  %m = tandem.reduce_mean %x {axes = [0]} : (tensor<2x4xf32>) -> tensor<1x4xf32>
  %d = tandem.sub %x, %m : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %p = tandem.pow %d, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tandem.reduce_mean %p {axes = [0]} : (tensor<2x4xf32>) -> tensor<1x4xf32>
  %e = tandem.add %v, %eps : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %s = tandem.sqrt %e : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %n = tandem.div %d, %s : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %y = tandem.mul %n, %g : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %z = tandem.add %y, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %z : tensor<2x4xf32>
}

// -----

// Scale [2,1] broadcasts along the rows, not the channels: the core becomes a LayerNorm
// without scale, the Mul stays (and the bias Add after it).
// CHECK-LABEL: func.func @main
// CHECK: %[[LN:.*]] = tandem.layer_normalization %arg0, %{{.*}} {axis = -1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK: %[[Y:.*]] = tandem.mul %[[LN]], %{{.*}} : (tensor<2x4xf32>, tensor<2x1xf32>)
// CHECK: %[[Z:.*]] = tandem.add %[[Y]]
// CHECK: return %[[Z]]
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = tandem.constant dense<2.0> : tensor<f32>
  %eps = tandem.constant dense<1.0e-5> : tensor<f32>
  %g = tandem.constant dense<[[2.0], [3.0]]> : tensor<2x1xf32>
  %b = tandem.constant dense<[0.5, 0.5, 0.5, 0.5]> : tensor<4xf32>
  %m = tandem.reduce_mean %x {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %d = tandem.sub %x, %m : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p = tandem.pow %d, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tandem.reduce_mean %p {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %e = tandem.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = tandem.sqrt %e : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = tandem.div %d, %s : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %y = tandem.mul %n, %g : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %z = tandem.add %y, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %z : tensor<2x4xf32>
}

// -----

// A bias [3,2,4] has the full shape (it varies per row): the LayerNorm takes the scale, the
// bias Add stays.
// CHECK-LABEL: func.func @main
// CHECK: %[[LN:.*]] = tandem.layer_normalization %arg0, %{{.*}} {axis = -1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<3x2x4xf32>, tensor<4xf32>) -> tensor<3x2x4xf32>
// CHECK: %[[Z:.*]] = tandem.add %[[LN]], %{{.*}} : (tensor<3x2x4xf32>, tensor<3x2x4xf32>)
// CHECK: return %[[Z]]
func.func @main(%x: tensor<3x2x4xf32>) -> tensor<3x2x4xf32> {
  %two = tandem.constant dense<2.0> : tensor<f32>
  %eps = tandem.constant dense<1.0e-5> : tensor<f32>
  %g = tandem.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = tandem.constant dense<0.5> : tensor<3x2x4xf32>
  %m = tandem.reduce_mean %x {axes = [-1]} : (tensor<3x2x4xf32>) -> tensor<3x2x1xf32>
  %d = tandem.sub %x, %m : (tensor<3x2x4xf32>, tensor<3x2x1xf32>) -> tensor<3x2x4xf32>
  %p = tandem.pow %d, %two : (tensor<3x2x4xf32>, tensor<f32>) -> tensor<3x2x4xf32>
  %v = tandem.reduce_mean %p {axes = [-1]} : (tensor<3x2x4xf32>) -> tensor<3x2x1xf32>
  %e = tandem.add %v, %eps : (tensor<3x2x1xf32>, tensor<f32>) -> tensor<3x2x1xf32>
  %s = tandem.sqrt %e : (tensor<3x2x1xf32>) -> tensor<3x2x1xf32>
  %n = tandem.div %d, %s : (tensor<3x2x4xf32>, tensor<3x2x1xf32>) -> tensor<3x2x4xf32>
  %y = tandem.mul %n, %g : (tensor<3x2x4xf32>, tensor<4xf32>) -> tensor<3x2x4xf32>
  %z = tandem.add %y, %b : (tensor<3x2x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  return %z : tensor<3x2x4xf32>
}

// -----

// Not LayerNorm: Pow exponent 3, and in a second copy eps is a run-time value. Both stay.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.layer_normalization
// CHECK: tandem.pow
// CHECK: tandem.pow
// CHECK-NOT: tandem.layer_normalization
func.func @main(%x: tensor<2x4xf32>, %eps2: tensor<f32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %two = tandem.constant dense<2.0> : tensor<f32>
  %three = tandem.constant dense<3.0> : tensor<f32>
  %eps = tandem.constant dense<1.0e-5> : tensor<f32>
  %m = tandem.reduce_mean %x {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %d = tandem.sub %x, %m : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p = tandem.pow %d, %three : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tandem.reduce_mean %p {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %e = tandem.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = tandem.sqrt %e : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = tandem.div %d, %s : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %m2 = tandem.reduce_mean %x {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %d2 = tandem.sub %x, %m2 : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p2 = tandem.pow %d2, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v2 = tandem.reduce_mean %p2 {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %e2 = tandem.add %v2, %eps2 : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s2 = tandem.sqrt %e2 : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n2 = tandem.div %d2, %s2 : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  return %n, %n2 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Not LayerNorm: the mean is also returned, then (second copy) the centred x is. The ops a
// rewrite would make dead have other readers, so both patterns stay whole.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.layer_normalization
// CHECK: %[[M:.*]] = tandem.reduce_mean %arg0
// CHECK: %[[D:.*]] = tandem.sub %arg0, %[[M]]
// CHECK: tandem.sqrt
// CHECK: tandem.div %[[D]]
// CHECK: %[[D2:.*]] = tandem.sub
// CHECK: tandem.sqrt
// CHECK: tandem.div %[[D2]]
// CHECK-NOT: tandem.layer_normalization
// CHECK: return %{{.*}}, %[[M]], %{{.*}}, %[[D2]]
func.func @main(%x: tensor<2x4xf32>, %x2: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %two = tandem.constant dense<2.0> : tensor<f32>
  %eps = tandem.constant dense<1.0e-5> : tensor<f32>
  %m = tandem.reduce_mean %x {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %d = tandem.sub %x, %m : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p = tandem.pow %d, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tandem.reduce_mean %p {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %e = tandem.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = tandem.sqrt %e : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = tandem.div %d, %s : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %m2 = tandem.reduce_mean %x2 {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %d2 = tandem.sub %x2, %m2 : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p2 = tandem.pow %d2, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v2 = tandem.reduce_mean %p2 {axes = [-1]} : (tensor<2x4xf32>) -> tensor<2x1xf32>
  %e2 = tandem.add %v2, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s2 = tandem.sqrt %e2 : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n2 = tandem.div %d2, %s2 : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  return %n, %m, %n2, %d2 : tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// The normalised value is also returned: the LayerNorm stops at it (no scale or bias taken),
// and the Mul and Add stay on it.
// CHECK-LABEL: func.func @main
// CHECK: %[[LN:.*]] = tandem.layer_normalization %arg0, %{{.*}} {axis = -1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK: %[[Y:.*]] = tandem.mul %[[LN]]
// CHECK: %[[Z:.*]] = tandem.add %[[Y]]
// CHECK: return %[[Z]], %[[LN]]
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
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
  return %z, %n : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Scalar shape arithmetic (what PyTorch's attention exports for bsz * num_heads, head_dim):
// rank-0 Mul, Div and Add are no LayerNorm, GELU or Gemm candidates. They fold or stay; the
// pass must not crash on them.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.layer_normalization
// CHECK: %[[A:.*]] = tandem.mul %arg0, %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[B:.*]] = tandem.div %[[A]], %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[C:.*]] = tandem.add %[[B]], %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[F:.*]] = tandem.mul %arg1, %arg1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: return %[[C]], %[[F]]
func.func @main(%n: tensor<i64>, %f: tensor<f32>) -> (tensor<i64>, tensor<f32>) {
  %h = tandem.constant dense<2> : tensor<i64>
  %a = tandem.mul %n, %h : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %b = tandem.div %a, %h : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %c = tandem.add %b, %h : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %g = tandem.mul %f, %f : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %c, %g : tensor<i64>, tensor<f32>
}
