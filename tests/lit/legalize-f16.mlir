// RUN: tandem-opt %s --tandem-legalize-f16 | FileCheck %s

// Relu and MatMul have no f16 CPU kernel: their f16 operands are widened, they compute in f32,
// and their results are narrowed back, so @main still takes and returns f16. Max has an f16
// kernel and is left alone; the Cast already in the graph is not touched.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf16>, %[[Y:.*]]: tensor<3xf32>) -> (tensor<2x4xf16>, tensor<2x3xf16>)
// CHECK-NEXT: %[[W:.*]] = tandem.constant dense<5.000000e-01> : tensor<3x4xf16>
// CHECK-NEXT: %[[XW:.*]] = tandem.cast %[[X]] {to = 1 : i64} : (tensor<2x3xf16>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = tandem.relu %[[XW]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[RN:.*]] = tandem.cast %[[R]] {to = 10 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf16>
// CHECK-NEXT: %[[YN:.*]] = tandem.cast %[[Y]] {to = 10 : i64} : (tensor<3xf32>) -> tensor<3xf16>
// CHECK-NEXT: %[[M:.*]] = tandem.max %[[RN]], %[[YN]] : (tensor<2x3xf16>, tensor<3xf16>) -> tensor<2x3xf16>
// CHECK-NEXT: %[[MW:.*]] = tandem.cast %[[M]] {to = 1 : i64} : (tensor<2x3xf16>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[WW:.*]] = tandem.cast %[[W]] {to = 1 : i64} : (tensor<3x4xf16>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[P:.*]] = tandem.mat_mul %[[MW]], %[[WW]] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[PN:.*]] = tandem.cast %[[P]] {to = 10 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf16>
// CHECK-NEXT: return %[[PN]], %[[RN]] : tensor<2x4xf16>, tensor<2x3xf16>
func.func @main(%x: tensor<2x3xf16>, %y: tensor<3xf32>) -> (tensor<2x4xf16>, tensor<2x3xf16>) {
  %w = tandem.constant dense<0.5> : tensor<3x4xf16>
  %r = tandem.relu %x : (tensor<2x3xf16>) -> tensor<2x3xf16>
  %yh = tandem.cast %y {to = 10 : i64} : (tensor<3xf32>) -> tensor<3xf16>
  %m = tandem.max %r, %yh : (tensor<2x3xf16>, tensor<3xf16>) -> tensor<2x3xf16>
  %p = tandem.mat_mul %m, %w : (tensor<2x3xf16>, tensor<3x4xf16>) -> tensor<2x4xf16>
  return %p, %r : tensor<2x4xf16>, tensor<2x3xf16>
}
