// RUN: tandem-opt %s -split-input-file --tandem-legalize-f16 | FileCheck %s --check-prefixes=CHECK,ISLANDS
// RUN: tandem-opt %s -split-input-file --tandem-legalize-f16=per-op-rounding=true | FileCheck %s --check-prefixes=CHECK,PEROP

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

// -----

// Relu and Transpose only move or pick f16 values: their f32 results are exact, so the next op
// reads them without a Cast pair in either mode (the narrowing Casts left unused are DCE'd by
// canonicalize). Sigmoid rounds: by default (f32 islands) Neg still reads its f32 result; with
// per-op rounding its result is narrowed and widened again before Neg.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[XW:.*]] = tandem.cast %arg0 {to = 1 : i64}
// CHECK-NEXT: %[[R:.*]] = tandem.relu %[[XW]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: tandem.cast %[[R]] {to = 10 : i64}
// CHECK-NEXT: %[[T:.*]] = tandem.transpose %[[R]] {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: tandem.cast %[[T]] {to = 10 : i64}
// CHECK-NEXT: %[[S:.*]] = tandem.sigmoid %[[T]] : (tensor<3x2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[SN:.*]] = tandem.cast %[[S]] {to = 10 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf16>
// PEROP-NEXT: %[[SW:.*]] = tandem.cast %[[SN]] {to = 1 : i64} : (tensor<3x2xf16>) -> tensor<3x2xf32>
// PEROP-NEXT: %[[N:.*]] = tandem.neg %[[SW]] : (tensor<3x2xf32>) -> tensor<3x2xf32>
// ISLANDS-NEXT: %[[N:.*]] = tandem.neg %[[S]] : (tensor<3x2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[NN:.*]] = tandem.cast %[[N]] {to = 10 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf16>
// CHECK-NEXT: return %[[NN]] : tensor<3x2xf16>
func.func @main(%x: tensor<2x3xf16>) -> tensor<3x2xf16> {
  %r = tandem.relu %x : (tensor<2x3xf16>) -> tensor<2x3xf16>
  %t = tandem.transpose %r {perm = [1, 0]} : (tensor<2x3xf16>) -> tensor<3x2xf16>
  %s = tandem.sigmoid %t : (tensor<3x2xf16>) -> tensor<3x2xf16>
  %n = tandem.neg %s : (tensor<3x2xf16>) -> tensor<3x2xf16>
  return %n : tensor<3x2xf16>
}

// -----

// bf16 goes the same way: Sigmoid has no bf16 CPU kernel, so it runs in f32 and its result is
// narrowed back with to = 16 (BFLOAT16); Max has a bf16 kernel and is left alone.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<4xbf16>) -> tensor<4xbf16>
// CHECK-NEXT: %[[XW:.*]] = tandem.cast %[[X]] {to = 1 : i64} : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = tandem.sigmoid %[[XW]] : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[SN:.*]] = tandem.cast %[[S]] {to = 16 : i64} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: %[[M:.*]] = tandem.max %[[SN]], %[[X]] : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
// CHECK-NEXT: return %[[M]] : tensor<4xbf16>
func.func @main(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %s = tandem.sigmoid %x : (tensor<4xbf16>) -> tensor<4xbf16>
  %m = tandem.max %s, %x : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  return %m : tensor<4xbf16>
}
