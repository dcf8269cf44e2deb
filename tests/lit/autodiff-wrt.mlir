// RUN: tandem-opt %s --tandem-autodiff="wrt=w0" | FileCheck %s

// `wrt` names a constant (an initializer, by node name); Gemm's gradient for B is one Gemm of
// A and dY with transA set (A'^T . dY), the bias C's a ReduceSum over the batch.
// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<3x2xf32> {tandem.gradient_of = "w0", tandem.name = "w0_grad"}
// CHECK: tandem.gemm %arg0, %{{.*}} {alpha = 1.000000e+00 : f32, transA = 1 : i64, transB = 0 : i64}
// CHECK-SAME: -> tensor<3x2xf32>
// CHECK-NOT: tandem.reduce_sum %{{.*}} : {{.*}} -> tensor<2xf32>
func.func @main(%x: tensor<4x3xf32>) -> tensor<f32> {
  %w = tandem.constant dense<0.5> : tensor<3x2xf32> loc("w0")
  %b = tandem.constant dense<0.1> : tensor<2xf32> loc("b0")
  %y = tandem.gemm %x, %w, %b : (tensor<4x3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %l = tandem.reduce_mean %y {keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

