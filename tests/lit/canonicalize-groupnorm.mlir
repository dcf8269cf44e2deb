// RUN: tandem-opt %s -split-input-file --tandem-canonicalize | FileCheck %s
// GroupNorm as PyTorch exports nn.GroupNorm up to opset 17: Reshape [N, G, -1] ->
// InstanceNormalization (ones, zeros) -> Reshape back -> Mul gamma [C,1,1] -> Add beta [C,1,1]
// becomes one GroupNormalization; near-misses stay as they were.

// 4 channels in 2 groups; the InstanceNormalization's own scale 2 and bias 1 fold into the
// per-channel ones: scale gamma * 2, bias gamma * 1 + beta.
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[S:.*]] = tandem.constant dense<[2.000000e+00, 4.000000e+00, 6.000000e+00, 8.000000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[B:.*]] = tandem.constant dense<[1.500000e+00, 2.500000e+00, 3.500000e+00, 4.500000e+00]> : tensor<4xf32>
// CHECK: %[[GN:.*]] = tandem.group_normalization %arg0, %[[S]], %[[B]] {epsilon = 9.99999974E-6 : f32, num_groups = 2 : i64} : (tensor<1x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x3x3xf32>
// CHECK-NOT: tandem.instance_normalization
// CHECK: return %[[GN]]
func.func @main(%x: tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %s1 = tandem.constant dense<[1, 2, -1]> : tensor<3xi64>
  %s2 = tandem.constant dense<[1, 4, 3, 3]> : tensor<4xi64>
  %one = tandem.constant dense<2.0> : tensor<2xf32>
  %zero = tandem.constant dense<1.0> : tensor<2xf32>
  %g = tandem.constant dense<[[[1.0]], [[2.0]], [[3.0]], [[4.0]]]> : tensor<4x1x1xf32>
  %b = tandem.constant dense<[[[0.5]], [[0.5]], [[0.5]], [[0.5]]]> : tensor<4x1x1xf32>
  %r = tandem.reshape %x, %s1 : (tensor<1x4x3x3xf32>, tensor<3xi64>) -> tensor<1x2x18xf32>
  %n = tandem.instance_normalization %r, %one, %zero {epsilon = 1.0e-5 : f32} : (tensor<1x2x18xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x18xf32>
  %q = tandem.reshape %n, %s2 : (tensor<1x2x18xf32>, tensor<4xi64>) -> tensor<1x4x3x3xf32>
  %m = tandem.mul %q, %g : (tensor<1x4x3x3xf32>, tensor<4x1x1xf32>) -> tensor<1x4x3x3xf32>
  %y = tandem.add %m, %b : (tensor<1x4x3x3xf32>, tensor<4x1x1xf32>) -> tensor<1x4x3x3xf32>
  return %y : tensor<1x4x3x3xf32>
}

// -----

// Without the bias Add (the Mul is the root), 1-D signal [N, C, L].
// CHECK-LABEL: func.func @main
// CHECK: tandem.group_normalization %arg0, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f32, num_groups = 1 : i64}
// CHECK-NOT: tandem.mul
func.func @main(%x: tensor<2x2x5xf32>) -> tensor<2x2x5xf32> {
  %s1 = tandem.constant dense<[2, 1, -1]> : tensor<3xi64>
  %s2 = tandem.constant dense<[2, 2, 5]> : tensor<3xi64>
  %one = tandem.constant dense<1.0> : tensor<1xf32>
  %zero = tandem.constant dense<0.0> : tensor<1xf32>
  %g = tandem.constant dense<[[1.0], [3.0]]> : tensor<2x1xf32>
  %r = tandem.reshape %x, %s1 : (tensor<2x2x5xf32>, tensor<3xi64>) -> tensor<2x1x10xf32>
  %n = tandem.instance_normalization %r, %one, %zero {epsilon = 1.0e-3 : f32} : (tensor<2x1x10xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x10xf32>
  %q = tandem.reshape %n, %s2 : (tensor<2x1x10xf32>, tensor<3xi64>) -> tensor<2x2x5xf32>
  %m = tandem.mul %g, %q : (tensor<2x1xf32>, tensor<2x2x5xf32>) -> tensor<2x2x5xf32>
  return %m : tensor<2x2x5xf32>
}

// -----

// Not GroupNorm: the gamma broadcasts along the last axis ([3]), not the channels, and the
// normalised value has a second reader. Nothing changes.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.group_normalization
// CHECK: tandem.instance_normalization
// CHECK: tandem.mul
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.group_normalization
// CHECK: tandem.instance_normalization
func.func @main(%x: tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %s1 = tandem.constant dense<[1, 2, -1]> : tensor<3xi64>
  %s2 = tandem.constant dense<[1, 4, 3, 3]> : tensor<4xi64>
  %one = tandem.constant dense<1.0> : tensor<2xf32>
  %zero = tandem.constant dense<0.0> : tensor<2xf32>
  %g = tandem.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %r = tandem.reshape %x, %s1 : (tensor<1x4x3x3xf32>, tensor<3xi64>) -> tensor<1x2x18xf32>
  %n = tandem.instance_normalization %r, %one, %zero {epsilon = 1.0e-5 : f32} : (tensor<1x2x18xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x18xf32>
  %q = tandem.reshape %n, %s2 : (tensor<1x2x18xf32>, tensor<4xi64>) -> tensor<1x4x3x3xf32>
  %m = tandem.mul %q, %g : (tensor<1x4x3x3xf32>, tensor<3xf32>) -> tensor<1x4x3x3xf32>
  return %m : tensor<1x4x3x3xf32>
}

// -----

func.func @main(%x: tensor<1x4x3x3xf32>) -> (tensor<1x4x3x3xf32>, tensor<1x2x18xf32>) {
  %s1 = tandem.constant dense<[1, 2, -1]> : tensor<3xi64>
  %s2 = tandem.constant dense<[1, 4, 3, 3]> : tensor<4xi64>
  %one = tandem.constant dense<1.0> : tensor<2xf32>
  %zero = tandem.constant dense<0.0> : tensor<2xf32>
  %g = tandem.constant dense<[[[1.0]], [[2.0]], [[3.0]], [[4.0]]]> : tensor<4x1x1xf32>
  %r = tandem.reshape %x, %s1 : (tensor<1x4x3x3xf32>, tensor<3xi64>) -> tensor<1x2x18xf32>
  %n = tandem.instance_normalization %r, %one, %zero {epsilon = 1.0e-5 : f32} : (tensor<1x2x18xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x18xf32>
  %q = tandem.reshape %n, %s2 : (tensor<1x2x18xf32>, tensor<4xi64>) -> tensor<1x4x3x3xf32>
  %m = tandem.mul %q, %g : (tensor<1x4x3x3xf32>, tensor<4x1x1xf32>) -> tensor<1x4x3x3xf32>
  return %m, %n : tensor<1x4x3x3xf32>, tensor<1x2x18xf32>
}
