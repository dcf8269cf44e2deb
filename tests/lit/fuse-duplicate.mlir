// RUN: tandem-opt %s -split-input-file --tandem-fuse | FileCheck %s

// Duplication (XLA): the cheap Neg is read by two groups, an element-wise loop and a
// reduction root; each group computes its own copy and the Neg is never materialised.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.neg %arg0
// CHECK: tandem.fused "elementwise"(%arg0, %arg1)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.neg %{{.*}} {device = "cpu", fusion_duplicated = "a copy in each of 2 readers"}
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.yield
// CHECK: tandem.fused "reduction"(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.neg %{{.*}} {device = "cpu", fusion_duplicated = "a copy in each of 2 readers"}
// CHECK-NEXT: tandem.reduce_max
// CHECK-NEXT: tandem.yield
func.func @main(%x: tensor<4x8xf32> {tandem.device = "cpu"}, %y: tensor<4x8xf32> {tandem.device = "cpu"}) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %n = tandem.neg %x {device = "cpu"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = tandem.add %n, %y {device = "cpu"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = tandem.reduce_max %n {axes = [-1], device = "cpu", keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %a, %m : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// A chain of cheap ops (Sub then Relu) read by two loops is copied whole into each.
// CHECK-LABEL: func.func @main
// CHECK: tandem.fused "elementwise"(%arg0, %arg1)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.sub {{.*}}fusion_duplicated
// CHECK-NEXT: tandem.relu {{.*}}fusion_duplicated
// CHECK-NEXT: tandem.abs
// CHECK: tandem.fused "elementwise"(%arg0, %arg1)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.sub {{.*}}fusion_duplicated
// CHECK-NEXT: tandem.relu {{.*}}fusion_duplicated
// CHECK-NEXT: tandem.neg
func.func @main(%x: tensor<16xf32> {tandem.device = "cpu"}, %y: tensor<16xf32> {tandem.device = "cpu"}) -> (tensor<16xf32>, tensor<16xf32>) {
  %d = tandem.sub %x, %y {device = "cpu"} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %r = tandem.relu %d {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
  %a = tandem.abs %r {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
  %n = tandem.neg %r {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
  return %a, %n : tensor<16xf32>, tensor<16xf32>
}

// -----

// Refused, expensive: an Exp read by two loops is computed once and materialised (here as the
// first group's second output, read by the second group), and says why it was not copied.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]]:2 = tandem.fused "elementwise"(%arg0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.exp {{.*}}fusion_not_duplicated = "Exp is expensive (2 readers)"
// CHECK-NEXT: tandem.abs
// CHECK: tandem.fused "elementwise"(%[[F]]#0)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.neg
func.func @main(%x: tensor<16xf32> {tandem.device = "cpu"}) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tandem.exp %x {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
  %a = tandem.abs %e {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
  %n = tandem.neg %e {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
  %r = tandem.relu %n {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
  return %a, %r : tensor<16xf32>, tensor<16xf32>
}

// -----

// Not duplicated: one reader (the graph's return) cannot absorb the Neg, so it is materialised
// anyway and copying it would only add work.
// CHECK-LABEL: func.func @main
// CHECK-NOT: fusion_duplicated
// CHECK: tandem.fused "elementwise"
// CHECK: return
func.func @main(%x: tensor<16xf32> {tandem.device = "cpu"}) -> (tensor<16xf32>, tensor<16xf32>) {
  %n = tandem.neg %x {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
  %a = tandem.abs %n {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32>
  return %n, %a : tensor<16xf32>, tensor<16xf32>
}
