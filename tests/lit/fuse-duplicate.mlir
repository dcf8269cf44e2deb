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

// -----

// Not duplicated, traffic: a pre-LN residual stream (s_k = s_(k-1) + b_k, each sum read by
// the next sum and a LayerNormalization). Copying every sum would put the whole chain in each
// later group, reading every earlier summand again (quadratic). A sum with two full-size
// operands copied into k readers reads 2k tensors, materialised 2 + 1 + k: it is copied for
// two readers only, so a sum read by the next sum's two copies is materialised, as its
// LayerNormalization group's second output, and no group reads more than three tensors.
// CHECK-LABEL: func.func @main
// CHECK: %[[G1:[0-9]+]]:2 = tandem.fused "add-layernorm"(%arg0, %arg1, %[[C:[0-9]+]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.add {{.*}}fusion_not_duplicated = "copies would read 2 operands in each of 3 readers"
// CHECK: tandem.fused "add-layernorm"(%[[G1]]#0, %arg2, %[[C]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.add {{.*}}fusion_duplicated = "a copy in each of 2 readers"
// CHECK: %[[G3:[0-9]+]]:2 = tandem.fused "add-layernorm"(%[[G1]]#0, %arg2, %arg3, %[[C]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.add {{.*}}fusion_duplicated = "a copy in each of 2 readers"
// CHECK-NEXT: tandem.add {{.*}}fusion_not_duplicated = "copies would read 2 operands in each of 3 readers"
// CHECK: tandem.fused "add-layernorm"(%[[G3]]#0, %arg4, %[[C]])
// CHECK: tandem.fused "add-layernorm"(%[[G3]]#0, %arg4, %arg5, %[[C]])
// CHECK: return %[[G1]]#1, %{{.*}}, %[[G3]]#1, %{{.*}}, %{{.*}} :
func.func @main(%s0: tensor<4x8xf32> {tandem.device = "cpu"}, %b1: tensor<4x8xf32> {tandem.device = "cpu"}, %b2: tensor<4x8xf32> {tandem.device = "cpu"}, %b3: tensor<4x8xf32> {tandem.device = "cpu"}, %b4: tensor<4x8xf32> {tandem.device = "cpu"}, %b5: tensor<4x8xf32> {tandem.device = "cpu"}) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %g = tandem.constant {device = "cpu"} dense<1.0> : tensor<8xf32>
  %s1 = tandem.add %s0, %b1 {device = "cpu"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n1 = tandem.layer_normalization %s1, %g {device = "cpu"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s2 = tandem.add %s1, %b2 {device = "cpu"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n2 = tandem.layer_normalization %s2, %g {device = "cpu"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s3 = tandem.add %s2, %b3 {device = "cpu"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n3 = tandem.layer_normalization %s3, %g {device = "cpu"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s4 = tandem.add %s3, %b4 {device = "cpu"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n4 = tandem.layer_normalization %s4, %g {device = "cpu"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s5 = tandem.add %s4, %b5 {device = "cpu"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n5 = tandem.layer_normalization %s5, %g {device = "cpu"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %n1, %n2, %n3, %n4, %n5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
