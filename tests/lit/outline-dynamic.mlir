// RUN: tandem-opt %s -split-input-file --tandem-outline-dynamic | FileCheck %s

// NonZero's count is known only at run time: it and its reader move into one dynamic_region,
// which reads the static mask and the constant perm-free operands; the static Relu stays.
// CHECK-LABEL: func.func @main
// CHECK: %[[M:.*]] = tandem.greater %arg0
// CHECK-NEXT: %[[R:.*]] = tandem.relu %arg0
// CHECK-NOT: tandem.non_zero
// CHECK-NOT: tandem.transpose
// CHECK: %[[D:.*]] = tandem.dynamic_region %[[M]] {body = "{{.*}}"} : (tensor<4x5xi1>) -> tensor<?x2xi64>
// CHECK-NEXT: return %[[D]], %[[R]] : tensor<?x2xi64>, tensor<4x5xf32>
func.func @main(%x: tensor<4x5xf32>) -> (tensor<?x2xi64>, tensor<4x5xf32>) {
  %zero = tandem.constant dense<0.0> : tensor<f32>
  %m = tandem.greater %x, %zero : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xi1>
  %nz = tandem.non_zero %m : (tensor<4x5xi1>) -> tensor<2x?xi64>
  %t = tandem.transpose %nz {perm = [1, 0]} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %r = tandem.relu %x : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %t, %r : tensor<?x2xi64>, tensor<4x5xf32>
}

// -----

// Nothing of run-time size: the module is left as it is.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.dynamic_region
// CHECK: tandem.relu
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = tandem.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
