// RUN: tandem-opt %s -split-input-file --tandem-fuse | FileCheck %s

// Residual Add + LayerNormalization (last axis): one add-layernorm kernel. The sum is the
// residual stream, read again after the norm, so it is the group's first output.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]]:2 = tandem.fused "add-layernorm"(%arg0, %arg1, %{{.*}}, %{{.*}}) {device = "cpu"}
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x8xf32>, %[[R:.*]]: tensor<2x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK-NEXT: %[[S:.*]] = tandem.add %[[X]], %[[R]] {device = "cpu"}
// CHECK-NEXT: %[[N:.*]] = tandem.layer_normalization %[[S]], %[[G]], %[[B]] {device = "cpu"}
// CHECK-NEXT: tandem.yield %[[S]], %[[N]]
// CHECK-NOT: tandem.add
// CHECK: return %[[F]]#1, %[[F]]#0
func.func @main(%x: tensor<2x8xf32> {tandem.device = "cpu"}, %r: tensor<2x8xf32> {tandem.device = "cpu"}) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %g = tandem.constant {device = "cpu"} dense<1.5> : tensor<8xf32>
  %b = tandem.constant {device = "cpu"} dense<0.25> : tensor<8xf32>
  %s = tandem.add %x, %r {device = "cpu"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n = tandem.layer_normalization %s, %g, %b {device = "cpu"} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %n, %s : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// A reduction over the last axes is a root: (x - y) * (x - y) is computed row by row while
// ReduceSum (axes input) folds it; nothing of the loop reaches memory.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "reduction"(%arg0, %arg1, %{{.*}}) {device = "cpu"}
// CHECK: tandem.sub
// CHECK-NEXT: tandem.mul
// CHECK-NEXT: tandem.reduce_sum
// CHECK-NEXT: tandem.yield
// CHECK: return %[[F]] : tensor<3xf32>
func.func @main(%x: tensor<3x5xf32> {tandem.device = "cpu"}, %y: tensor<3x5xf32> {tandem.device = "cpu"}) -> tensor<3xf32> {
  %ax = tandem.constant {device = "cpu"} dense<[-1]> : tensor<1xi64>
  %d = tandem.sub %x, %y {device = "cpu"} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %q = tandem.mul %d, %d {device = "cpu"} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %s = tandem.reduce_sum %q, %ax {device = "cpu", keepdims = 0 : i64} : (tensor<3x5xf32>, tensor<1xi64>) -> tensor<3xf32>
  return %s : tensor<3xf32>
}

// -----

// Softmax over the last axis with a scaled, masked input: kind softmax.
// CHECK-LABEL: func.func @main
// CHECK: tandem.fused "softmax"
// CHECK: tandem.mul
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.softmax
// CHECK-NEXT: tandem.yield
func.func @main(%x: tensor<2x4x4xf32> {tandem.device = "cpu"}, %m: tensor<2x4x4xf32> {tandem.device = "cpu"}) -> tensor<2x4x4xf32> {
  %c = tandem.constant {device = "cpu"} dense<0.125> : tensor<f32>
  %0 = tandem.mul %x, %c {device = "cpu"} : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %1 = tandem.add %0, %m {device = "cpu"} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %2 = tandem.softmax %1 {device = "cpu"} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %2 : tensor<2x4x4xf32>
}

// -----

// Refused, a reduction is never a producer: the ReduceMax (keepdims, [4,1]) stays its own
// kernel and says why; the Relu -> Neg loop after it is one group. A reduction over the first
// axis is not a row root: the Abs before it stays alone.
// CHECK-LABEL: func.func @main
// CHECK: tandem.reduce_max %arg0 {axes = [-1], device = "cpu", fusion_refused = "a reduction fuses only as a group root, not as a producer", keepdims = 1 : i64}
// CHECK: tandem.fused "elementwise"
// CHECK: tandem.relu
// CHECK-NEXT: tandem.neg
// CHECK-NEXT: tandem.yield
// CHECK: tandem.abs
// CHECK-NEXT: tandem.reduce_mean
func.func @main(%x: tensor<4x6xf32> {tandem.device = "cpu"}) -> (tensor<4x1xf32>, tensor<1x6xf32>) {
  %0 = tandem.reduce_max %x {axes = [-1], device = "cpu", keepdims = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %1 = tandem.relu %0 {device = "cpu"} : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %2 = tandem.neg %1 {device = "cpu"} : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %3 = tandem.abs %x {device = "cpu"} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %4 = tandem.reduce_mean %3 {axes = [0], device = "cpu", keepdims = 1 : i64} : (tensor<4x6xf32>) -> tensor<1x6xf32>
  return %2, %4 : tensor<4x1xf32>, tensor<1x6xf32>
}

// -----

// Refused, non-convex: the Add is read by the Transpose, whose result the Mul reads again, so
// {add, mul, reduce_mean} would leave the group and come back. The Mul joins the ReduceMean.
// CHECK-LABEL: func.func @main
// CHECK: tandem.add %arg0, %arg1 {device = "cpu", fusion_refused = "non-convex"}
// CHECK-NEXT: tandem.transpose
// CHECK-NEXT: tandem.fused "reduction"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.mul
// CHECK-NEXT: tandem.reduce_mean
func.func @main(%x: tensor<4x4xf32> {tandem.device = "cpu"}, %y: tensor<4x4xf32> {tandem.device = "cpu"}) -> tensor<4xf32> {
  %s = tandem.add %x, %y {device = "cpu"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = tandem.transpose %s {device = "cpu", perm = [1, 0]} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = tandem.mul %s, %t {device = "cpu"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = tandem.reduce_mean %m {axes = [1], device = "cpu", keepdims = 0 : i64} : (tensor<4x4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Refused, across devices: the LayerNormalization on cpu:1 does not take the Add on cpu, and
// the Neg on cpu (read by loops on cpu and cpu:1) is not duplicated across the boundary: it
// is computed once, as an output of the cpu group, and the Abs on cpu:1 reads it.
// CHECK-LABEL: func.func @main
// CHECK: tandem.add %arg0, %arg1 {device = "cpu", fusion_refused = "on cpu, consumer on cpu:1"}
// CHECK-NEXT: tandem.layer_normalization
// CHECK-NOT: fusion_duplicated
// CHECK: %[[F:.*]]:2 = tandem.fused "elementwise"(%arg0) {device = "cpu"}
// CHECK: tandem.neg
// CHECK-NEXT: tandem.relu
// CHECK-NOT: fusion_duplicated
// CHECK: tandem.abs %[[F]]#0 {device = "cpu:1"}
func.func @main(%x: tensor<2x8xf32> {tandem.device = "cpu"}, %r: tensor<2x8xf32> {tandem.device = "cpu"}) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %g = tandem.constant {device = "cpu:1"} dense<1.0> : tensor<8xf32>
  %s = tandem.add %x, %r {device = "cpu"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n = tandem.layer_normalization %s, %g {device = "cpu:1"} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %e = tandem.neg %x {device = "cpu"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = tandem.relu %e {device = "cpu"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %b = tandem.abs %e {device = "cpu:1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %n, %a, %b : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// ReduceL2 over the last axis with an Abs and a scale before it: one reduction kernel.
// CHECK-LABEL: func.func @main
// CHECK: tandem.fused "reduction"(%arg0, %{{.*}}) {device = "cpu"}
// CHECK: tandem.abs
// CHECK-NEXT: tandem.mul
// CHECK-NEXT: tandem.reduce_l2
// CHECK-NEXT: tandem.yield
func.func @main(%x: tensor<3x5xf32> {tandem.device = "cpu"}) -> tensor<3x1xf32> {
  %c = tandem.constant {device = "cpu"} dense<2.0> : tensor<f32>
  %0 = tandem.abs %x {device = "cpu"} : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %1 = tandem.mul %0, %c {device = "cpu"} : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
  %2 = tandem.reduce_l2 %1 {axes = [1], device = "cpu"} : (tensor<3x5xf32>) -> tensor<3x1xf32>
  return %2 : tensor<3x1xf32>
}
