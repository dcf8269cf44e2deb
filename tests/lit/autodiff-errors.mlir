// RUN: not tandem-opt %s -split-input-file --tandem-autodiff 2>&1 | FileCheck %s
// RUN: not tandem-opt %s -split-input-file --tandem-autodiff="wrt=nope" 2>&1 | FileCheck %s --check-prefix=WRT
// RUN: not tandem-opt %s -split-input-file --tandem-autodiff="loss=3" 2>&1 | FileCheck %s --check-prefix=LOSS

// The diagnostics of --tandem-autodiff (checked on stderr: the node names are locations
// without a file line, which -verify-diagnostics cannot place).
// WRT: error: tandem-autodiff: wrt names 'nope', which is neither an input nor a constant of @main
// LOSS: error: tandem-autodiff: loss result 3 but @main has 1 results

// An op on the path from a trainable value to the loss without a gradient rule is an error
// naming the op type and the node.
// CHECK: error: loc("top1"): no gradient for op 'TopK' (node 'top1')
func.func @main(%x: tensor<1x1x4x4xf32> {tandem.trainable}) -> tensor<f32> {
  %k = tandem.constant dense<2> : tensor<1xi64>
  %v, %i = tandem.top_k %x, %k {axis = -1 : i64} : (tensor<1x1x4x4xf32>, tensor<1xi64>) -> (tensor<1x1x4x2xf32>, tensor<1x1x4x2xi64>) loc("top1")
  %l = tandem.reduce_sum %v {keepdims = 0 : i64} : (tensor<1x1x4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: tandem-autodiff: nothing to differentiate: no @main argument has tandem.trainable and `wrt` names nothing
func.func @main(%x: tensor<3xf32>) -> tensor<f32> {
  %l = tandem.reduce_sum %x {keepdims = 0 : i64} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: tandem-autodiff: the loss (result 0, 'tensor<2xf32>') must be an f32 or f64 tensor of one element
func.func @main(%x: tensor<2xf32> {tandem.trainable}) -> tensor<2xf32> {
  %y = tandem.relu %x : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
