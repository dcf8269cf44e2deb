// RUN: tandem-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect --tandem-verify | FileCheck %s

// A well-formed graph passes unchanged.
// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<2x3xf32>
// CHECK: tandem.add
// CHECK: tandem.clip
func.func @main(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = tandem.add %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %n = tandem.none
  %m = tandem.constant dense<6.0> : tensor<f32>
  %1 = tandem.clip %0, %n, %m : (tensor<2x3xf32>, none, tensor<f32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// expected-error @below {{tandem-verify: module has no func.func @main}}
module {
  func.func @other(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// -----

// expected-error @below {{tandem-verify: input 'x' has unknown rank; Tandem needs ranked tensors}}
func.func @main(%x: tensor<*xf32> {tandem.name = "x"}) -> tensor<*xf32> {
  return %x : tensor<*xf32>
}

// -----

// f8E4M3FN has no runtime dtype (f16 and bf16 have: Cast converts them).
// expected-error @below {{tandem-verify: input 'arg0' has unsupported element type f8E4M3FN}}
func.func @main(%x: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {
  return %x : tensor<4xf8E4M3FN>
}

// -----

func.func @main() -> tensor<4xf8E4M3FN> {
  // expected-error @below {{tandem-verify: result 0 has unsupported element type f8E4M3FN}}
  %c = tandem.constant dense<1.0> : tensor<4xf8E4M3FN>
  return %c : tensor<4xf8E4M3FN>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{tandem-verify: op 'test.foo' is not a tandem op}}
  %0 = "test.foo"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Ops verify their result types by inference (here already when the IR is parsed).
func.func @main(%x: tensor<2x3xf32>, %y: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @below {{Add: input 0 (A) shape [2,3] and input 1 (B) shape [4] are not broadcastable}}
  // expected-error @below {{'tandem.add' op failed to infer returned types}}
  %0 = tandem.add %x, %y : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @main(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  // expected-error @below {{Relu: result 0 is declared tensor<2x4xf32> but its operands and attributes give tensor<2x3xf32>}}
  // expected-error @below {{'tandem.relu' op failed to infer returned types}}
  %0 = tandem.relu %x : (tensor<2x3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
