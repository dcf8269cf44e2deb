// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-autodiff | FileCheck %s

// A value read by two ops gets the sum of both contributions: x feeds Relu and Add, so dx is one
// Add of the Relu path's dy * Sign(relu) and the direct path's gradient. The gradient is
// returned as a named result.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32>, tensor<2x4xf32> {tandem.gradient_of = "x", tandem.name = "x_grad"})
// CHECK: %[[RELU:.*]] = tandem.relu %arg0
// CHECK: %[[R:.*]] = tandem.reduce_sum
// CHECK: %[[ONES:.*]] = tandem.expand
// CHECK: %[[MASK:.*]] = tandem.sign %[[RELU]]
// CHECK: %[[W:.*]] = tandem.mul %[[ONES]], %[[MASK]]
// CHECK: %[[DX:.*]] = tandem.add %[[ONES]], %[[W]]
// CHECK-NEXT: return %[[R]], %[[DX]]
func.func @main(%x: tensor<2x4xf32> {tandem.name = "x", tandem.trainable}) -> tensor<f32> {
  %r = tandem.relu %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = tandem.add %r, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = tandem.reduce_sum %s {keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Ops that do not reach the loss get no gradient: the Exp branch only feeds result 1, and the
// Sigmoid of a non-trainable input has no active operand. A trainable input the loss does not
// read gets a zero gradient.
// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<3xf32> {tandem.gradient_of = "w", tandem.name = "w_grad"}
// CHECK-SAME: tensor<3xf32> {tandem.gradient_of = "unused", tandem.name = "unused_grad"}
// CHECK: %[[L:.*]] = tandem.reduce_sum
// CHECK-NOT: tandem.exp %
// CHECK-NOT: tandem.sigmoid
// CHECK: %[[Z:.*]] = tandem.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK-NEXT: return %[[L]], %{{.*}}, %{{.*}}, %[[Z]]
func.func @main(%w: tensor<3xf32> {tandem.name = "w", tandem.trainable},
                %c: tensor<3xf32> {tandem.name = "c"},
                %u: tensor<3xf32> {tandem.name = "unused", tandem.trainable})
    -> (tensor<f32>, tensor<3xf32>) {
  %e = tandem.exp %w : (tensor<3xf32>) -> tensor<3xf32>
  %s = tandem.sigmoid %c : (tensor<3xf32>) -> tensor<3xf32>
  %m = tandem.mul %w, %s : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = tandem.reduce_sum %m {keepdims = 0 : i64} : (tensor<3xf32>) -> tensor<f32>
  return %l, %e : tensor<f32>, tensor<3xf32>
}

// -----

// An op without a gradient rule is no error when it does not reach the loss (TopK feeds only
// result 1), nor when none of its operands depends on a trainable value (the TopK of %c).
// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<4xf32> {tandem.gradient_of = "w", tandem.name = "w_grad"}
// CHECK-COUNT-2: tandem.top_k
// CHECK-NOT: tandem.top_k
// CHECK: return
func.func @main(%w: tensor<4xf32> {tandem.name = "w", tandem.trainable}, %c: tensor<4xf32>)
    -> (tensor<f32>, tensor<2xf32>) {
  %k = tandem.constant dense<2> : tensor<1xi64>
  %v, %i = tandem.top_k %w, %k : (tensor<4xf32>, tensor<1xi64>) -> (tensor<2xf32>, tensor<2xi64>)
  %cv, %ci = tandem.top_k %c, %k : (tensor<4xf32>, tensor<1xi64>) -> (tensor<2xf32>, tensor<2xi64>)
  %s = tandem.reduce_sum %cv {keepdims = 1 : i64} : (tensor<2xf32>) -> tensor<1xf32>
  %m = tandem.mul %w, %s : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
  %l = tandem.reduce_sum %m {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
  return %l, %v : tensor<f32>, tensor<2xf32>
}
