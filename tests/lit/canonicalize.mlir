// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-canonicalize="fold-limit=16" | FileCheck %s

// Shape of a static value folds, then Gather and Concat fold by running their CPU kernels,
// and Reshape's result type is refined from the now-constant shape.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> tensor<2x12xf32>
// CHECK-NEXT: %[[SHAPE:.*]] = tandem.constant dense<[2, -1]> : tensor<2xi64>
// CHECK-NEXT: %[[R:.*]] = tandem.reshape %arg0, %[[SHAPE]] : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x12xf32>
func.func @main(%x: tensor<2x3x4xf32>) -> tensor<?x?xf32> {
  %s = tandem.shape %x : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %i = tandem.constant dense<0> : tensor<1xi64>
  %d0 = tandem.gather %s, %i {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %m = tandem.constant dense<-1> : tensor<1xi64>
  %shape = tandem.concat %d0, %m {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %r = tandem.reshape %x, %shape : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// Shape honours start/end (Shape-15) with negative values.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[C:.*]] = tandem.constant dense<[3, 4]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @main(%x: tensor<2x3x4xf32>) -> tensor<2xi64> {
  %s = tandem.shape %x {start = -2 : i64} : (tensor<2x3x4xf32>) -> tensor<2xi64>
  return %s : tensor<2xi64>
}

// -----

// Arithmetic on constants is evaluated: [1, 2] + [10, 20] * 2.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[C:.*]] = tandem.constant dense<[2.100000e+01, 4.200000e+01]> : tensor<2xf32>
// CHECK-NEXT: %[[A:.*]] = tandem.add %arg0, %[[C]]
// CHECK-NEXT: return %[[A]]
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %a = tandem.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = tandem.constant dense<[10.0, 20.0]> : tensor<2xf32>
  %two = tandem.constant dense<2.0> : tensor<f32>
  %m = tandem.mul %b, %two : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %s = tandem.add %a, %m : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %r = tandem.add %x, %s : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

// Duplicate constants and the identical ops reading them are merged (CSE); unused ops go (DCE).
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[C:.*]] = tandem.constant dense<5.000000e-01> : tensor<4xf32>
// CHECK-NEXT: %[[M:.*]] = tandem.mul %arg0, %[[C]]
// CHECK-NEXT: %[[S:.*]] = tandem.add %[[M]], %[[M]]
// CHECK-NEXT: return %[[S]]
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c1 = tandem.constant dense<0.5> : tensor<4xf32>
  %c2 = tandem.constant dense<0.5> : tensor<4xf32>
  %m1 = tandem.mul %x, %c1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m2 = tandem.mul %x, %c2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %dead = tandem.relu %m1 : (tensor<4xf32>) -> tensor<4xf32>
  %dead2 = tandem.exp %dead : (tensor<4xf32>) -> tensor<4xf32>
  %s = tandem.add %m1, %m2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Identity and inference Dropout are their input; a used mask becomes an all-true constant.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[MASK:.*]] = tandem.constant dense<true> : tensor<3xi1>
// CHECK-NEXT: %[[N:.*]] = tandem.neg %arg0
// CHECK-NEXT: return %[[N]], %[[MASK]]
func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xi1>) {
  %0 = tandem.identity %x : (tensor<3xf32>) -> tensor<3xf32>
  %1:2 = tandem.dropout %0 : (tensor<3xf32>) -> (tensor<3xf32>, tensor<3xi1>)
  %2 = tandem.neg %1#0 : (tensor<3xf32>) -> tensor<3xf32>
  return %2, %1#1 : tensor<3xf32>, tensor<3xi1>
}

// -----

// A Dropout that may train is random: not folded even on constant operands (its mask is drawn at
// run time from the op's seed or the one the plan is loaded with).
// CHECK-LABEL: func.func @main
// CHECK: %[[Y:.*]] = tandem.dropout
// CHECK-NEXT: return %[[Y]]
func.func @main() -> tensor<2xf32> {
  %x = tandem.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %r = tandem.constant dense<0.5> : tensor<f32>
  %t = tandem.constant dense<true> : tensor<i1>
  %y = tandem.dropout %x, %r, %t : (tensor<2xf32>, tensor<f32>, tensor<i1>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// A Pad of constant zero pads is its input; one that shifts (pads 1 and -1: same shape) stays.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[P:.*]] = tandem.constant dense<[0, 0, 0, 1, 0, 0, 0, -1]>
// CHECK-NEXT: %[[R:.*]] = tandem.pad %arg0, %[[P]]
// CHECK-NEXT: return %arg0, %[[R]]
func.func @main(%x: tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) {
  %z = tandem.constant dense<0> : tensor<8xi64>
  %p0 = tandem.pad %x, %z {mode = "constant"} : (tensor<1x2x3x4xf32>, tensor<8xi64>) -> tensor<1x2x3x4xf32>
  %nz = tandem.constant dense<[0, 0, 0, 1, 0, 0, 0, -1]> : tensor<8xi64>
  %p1 = tandem.pad %x, %nz {mode = "constant"} : (tensor<1x2x3x4xf32>, tensor<8xi64>) -> tensor<1x2x3x4xf32>
  return %p0, %p1 : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>
}

// -----

// Folding stops where the result would be large (fold-limit=16 here) and bigger than its inputs.
// CHECK-LABEL: func.func @main
// CHECK: tandem.expand
// CHECK-SAME: -> tensor<4x8xf32>
func.func @main() -> tensor<4x8xf32> {
  %v = tandem.constant dense<1.0> : tensor<f32>
  %s = tandem.constant dense<[4, 8]> : tensor<2xi64>
  %e = tandem.expand %v, %s : (tensor<f32>, tensor<2xi64>) -> tensor<4x8xf32>
  return %e : tensor<4x8xf32>
}

// -----

// Re-inference after folding catches a declared type the folded shape contradicts.
func.func @main(%x: tensor<2x3x4xf32>, %y: tensor<24xf32>) -> tensor<?x?x5xf32> {
  %s = tandem.shape %x : (tensor<2x3x4xf32>) -> tensor<3xi64>
  // expected-error @below {{Reshape: result 0 is declared tensor<?x?x5xf32> but its operands and attributes give tensor<2x3x4xf32>}}
  %r = tandem.reshape %y, %s : (tensor<24xf32>, tensor<3xi64>) -> tensor<?x?x5xf32>
  return %r : tensor<?x?x5xf32>
}

// -----

// Inference BatchNormalization folds into the Conv before it: s = scale / sqrt(var + eps)
// = [2/1, 3/3]; W' = W * s = [2, 2]; B' = (B - mean) * s + bias = [(0.5-0.5)*2+1, (1-1)*1-1].
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[W:.*]] = tandem.constant dense<2.000000e+00> : tensor<2x1x1x1xf32>
// CHECK-DAG: %[[B:.*]] = tandem.constant dense<[1.000000e+00, -1.000000e+00]> : tensor<2xf32>
// CHECK: %[[C:.*]] = tandem.conv %arg0, %[[W]], %[[B]] {group = 1 : i64}
// CHECK-NOT: tandem.batch_normalization
// CHECK: return %[[C]]
func.func @main(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = tandem.constant dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>
  %b = tandem.constant dense<[0.5, 1.0]> : tensor<2xf32>
  %c = tandem.conv %x, %w, %b {group = 1 : i64} : (tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  %scale = tandem.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %bias = tandem.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %mean = tandem.constant dense<[0.5, 1.0]> : tensor<2xf32>
  %var = tandem.constant dense<[0.0, 8.0]> : tensor<2xf32>
  %y = tandem.batch_normalization %c, %scale, %bias, %mean, %var {epsilon = 1.0 : f32} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  return %y : tensor<1x2x2x2xf32>
}

// -----

// Not folded when the Conv's result has another reader.
// CHECK-LABEL: func.func @main
// CHECK: tandem.conv
// CHECK: tandem.batch_normalization
func.func @main(%x: tensor<1x1x2x2xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
  %w = tandem.constant dense<1.0> : tensor<1x1x1x1xf32>
  %c = tandem.conv %x, %w : (tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x2x2xf32>
  %p = tandem.constant dense<1.0> : tensor<1xf32>
  %y = tandem.batch_normalization %c, %p, %p, %p, %p : (tensor<1x1x2x2xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x2x2xf32>
  return %c, %y : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
}

// -----

// A value returned twice (CSE merged the two Negs) gets an Identity for the second output, so
// each output keeps its own plan value and name.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[N:.*]] = tandem.neg %arg0
// CHECK-NEXT: %[[I:.*]] = tandem.identity %[[N]]
// CHECK-NEXT: return %[[N]], %[[I]]
func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32> {tandem.name = "a"}, tensor<3xf32> {tandem.name = "b"}) {
  %a = tandem.neg %x : (tensor<3xf32>) -> tensor<3xf32>
  %b = tandem.neg %x : (tensor<3xf32>) -> tensor<3xf32>
  return %a, %b : tensor<3xf32>, tensor<3xf32>
}

// -----

// A graph input returned as an output of its own name (the Identity folded away) gets an
// Identity, so the output keeps its name; returned under the input's own name it stays.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[I:.*]] = tandem.identity %arg0
// CHECK-NEXT: return %[[I]], %arg1
func.func @main(%x: tensor<3xf32> {tandem.name = "x"}, %z: tensor<3xf32> {tandem.name = "z"}) -> (tensor<3xf32> {tandem.name = "y"}, tensor<3xf32> {tandem.name = "z"}) {
  %y = tandem.identity %x : (tensor<3xf32>) -> tensor<3xf32>
  return %y, %z : tensor<3xf32>, tensor<3xf32>
}
