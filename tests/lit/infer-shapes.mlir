// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-infer-shapes="dims=N=2" | FileCheck %s
// RUN: not tandem-opt %s -split-input-file --tandem-infer-shapes="default-dim=1" 2>&1 | FileCheck %s --check-prefix=DEFAULT

// Dims not bound by name take default-dim, with a remark per use (diagnostics come first).
// DEFAULT: remark: symbolic dim 'N' of input 'x' bound to 1
// DEFAULT: error: Relu: result 0 is declared tensor<5x3xf32> but its operands and attributes give tensor<1x3xf32>
// DEFAULT: func.func @main(%arg0: tensor<1x3xf32> {{.*}} -> tensor<1x6xf32>

// A symbolic dim bound by name flows through every op and into the function type.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg0: tensor<2x3xf32>
// CHECK-SAME: -> tensor<2x6xf32>
// CHECK: tandem.add %arg0, %arg1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: tandem.relu %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: tandem.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
// CHECK: return %{{.*}} : tensor<2x6xf32>
func.func @main(%x: tensor<?x3xf32> {tandem.name = "x", tandem.dim_params = ["N", ""]},
                %b: tensor<3xf32>) -> tensor<?x6xf32> {
  %0 = tandem.add %x, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %1 = tandem.relu %0 : (tensor<?x3xf32>) -> tensor<?x3xf32>
  %2 = tandem.concat %0, %1 {axis = 1 : i64} : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x6xf32>
  return %2 : tensor<?x6xf32>
}

// -----

// A dynamic result is refined from a constant shape operand even with nothing to bind.
// CHECK-LABEL: func.func @main
// CHECK: tandem.reshape %arg0, %{{.*}} : (tensor<4x6xf32>, tensor<2xi64>) -> tensor<3x8xf32>
// CHECK: return %{{.*}} : tensor<3x8xf32>
func.func @main(%x: tensor<4x6xf32>) -> tensor<?x?xf32> {
  %s = tandem.constant dense<[3, -1]> : tensor<2xi64>
  %0 = tandem.reshape %x, %s : (tensor<4x6xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// Binding contradicts a static dim the IR already claimed.
func.func @main(%x: tensor<?x3xf32> {tandem.name = "x", tandem.dim_params = ["N", ""]}) -> tensor<5x3xf32> {
  // expected-error @below {{Relu: result 0 is declared tensor<5x3xf32> but its operands and attributes give tensor<2x3xf32>}}
  %0 = tandem.relu %x : (tensor<?x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}
