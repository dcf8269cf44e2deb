// RUN: tandem-opt %s -split-input-file --tandem-fuse | FileCheck %s

// CUDA fusion groups (passes/FuseCuda.cpp) on IR placed for target=cpu,cuda:0=h100: each group
// lies on one cuda device, is convex, and never contains a tandem.copy.

// Gemm + bias Add + Relu on cuda:0: one gemm-epilogue (cuBLASLt RELU_BIAS); the bias row is a
// group input.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "gemm-epilogue"(%arg0, %{{.*}}, %{{.*}}) {device = "cuda:0"}
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<8x16xf32>, %[[W:.*]]: tensor<16x32xf32>, %[[B:.*]]: tensor<32xf32>):
// CHECK-NEXT: %[[G:.*]] = tandem.gemm %[[A]], %[[W]] {device = "cuda:0"}
// CHECK-NEXT: %[[S:.*]] = tandem.add %[[G]], %[[B]] {device = "cuda:0"}
// CHECK-NEXT: %[[R:.*]] = tandem.relu %[[S]] {device = "cuda:0"}
// CHECK-NEXT: tandem.yield %[[R]]
// CHECK: return %[[F]]
func.func @main(%a: tensor<8x16xf32> {tandem.device = "cuda:0"}) -> tensor<8x32xf32> {
  %w = tandem.constant {device = "cuda:0"} dense<1.0> : tensor<16x32xf32>
  %b = tandem.constant {device = "cuda:0"} dense<0.5> : tensor<32xf32>
  %g = tandem.gemm %a, %w {device = "cuda:0"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %s = tandem.add %g, %b {device = "cuda:0"} : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %r = tandem.relu %s {device = "cuda:0"} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// A 3-D MatMul with one B matrix, a bias written first, and tanh-Gelu: gemm-epilogue
// (GELU_BIAS). The Add after the Gelu is no epilogue and stays outside.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "gemm-epilogue"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.mat_mul
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.gelu %{{.*}} {approximate = "tanh", device = "cuda:0"}
// CHECK-NEXT: tandem.yield
// CHECK: tandem.add %[[F]], %arg0 {device = "cuda:0"}
func.func @main(%x: tensor<2x4x16xf32> {tandem.device = "cuda:0"}) -> tensor<2x4x16xf32> {
  %w = tandem.constant {device = "cuda:0"} dense<1.0> : tensor<16x16xf32>
  %b = tandem.constant {device = "cuda:0"} dense<0.5> : tensor<16xf32>
  %m = tandem.mat_mul %x, %w {device = "cuda:0"} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %s = tandem.add %b, %m {device = "cuda:0"} : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %g = tandem.gelu %s {approximate = "tanh", device = "cuda:0"} : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %y = tandem.add %g, %x {device = "cuda:0"} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Refused: cuBLASLt's GELU epilogue is the tanh approximation, so an exact Gelu stays out of
// the epilogue (the Gemm with its C bias alone is no group), and joins the element-wise Mul
// after it instead.
// CHECK-LABEL: func.func @main
// CHECK: %[[G:.*]] = tandem.gemm
// CHECK-NOT: tandem.fused "gemm-epilogue"
// CHECK: tandem.fused "elementwise"(%[[G]], %{{.*}}) {device = "cuda:0"}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.gelu %{{.*}} {device = "cuda:0", fusion_refused = "exact Gelu (cuBLASLt's GELU epilogue is the tanh approximation)"}
// CHECK-NEXT: tandem.mul
func.func @main(%a: tensor<8x16xf32> {tandem.device = "cuda:0"}) -> tensor<8x32xf32> {
  %w = tandem.constant {device = "cuda:0"} dense<1.0> : tensor<16x32xf32>
  %c = tandem.constant {device = "cuda:0"} dense<0.5> : tensor<32xf32>
  %k = tandem.constant {device = "cuda:0"} dense<2.0> : tensor<f32>
  %g = tandem.gemm %a, %w, %c {device = "cuda:0"} : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %e = tandem.gelu %g {device = "cuda:0"} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = tandem.mul %e, %k {device = "cuda:0"} : (tensor<8x32xf32>, tensor<f32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// An element-wise chain on cuda:0 (a scalar operand included) is one generated kernel; the
// Sigmoid, also a graph output read after the root, becomes a second output.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]]:2 = tandem.fused "elementwise"(%arg0, %{{.*}}, %arg1) {device = "cuda:0"}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.mul
// CHECK-NEXT: tandem.sigmoid
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.tanh
// CHECK-NEXT: tandem.yield
// CHECK: return %[[F]]#1, %[[F]]#0
func.func @main(%x: tensor<4x64xf32> {tandem.device = "cuda:0"}, %y: tensor<4x64xf32> {tandem.device = "cuda:0"}) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %k = tandem.constant {device = "cuda:0"} dense<3.0> : tensor<f32>
  %0 = tandem.mul %x, %k {device = "cuda:0"} : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %1 = tandem.sigmoid %0 {device = "cuda:0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %2 = tandem.add %1, %y {device = "cuda:0"} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %3 = tandem.tanh %2 {device = "cuda:0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return %3, %1 : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// Residual Add + LayerNormalization: one add-layernorm group (one block per row). The sum, read
// again by the next residual Add after the group, is a second output.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]]:2 = tandem.fused "add-layernorm"(%arg0, %arg1, %{{.*}}, %{{.*}}) {device = "cuda:0"}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[S:.*]] = tandem.add
// CHECK-NEXT: %[[N:.*]] = tandem.layer_normalization %[[S]]
// CHECK-NEXT: tandem.yield %[[S]], %[[N]]
// CHECK: tandem.add %[[F]]#0, %[[F]]#1
func.func @main(%x: tensor<4x64xf32> {tandem.device = "cuda:0"}, %h: tensor<4x64xf32> {tandem.device = "cuda:0"}) -> tensor<4x64xf32> {
  %g = tandem.constant {device = "cuda:0"} dense<1.0> : tensor<64xf32>
  %b = tandem.constant {device = "cuda:0"} dense<0.0> : tensor<64xf32>
  %s = tandem.add %x, %h {device = "cuda:0"} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %n = tandem.layer_normalization %s, %g, %b {axis = -1 : i64, device = "cuda:0", epsilon = 1.0E-5 : f32} : (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %y = tandem.add %s, %n {device = "cuda:0"} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Refused: the sum is read (by a Softmax, which is no element-wise op) before the
// LayerNormalization, where the group would sit; and an Add on the CPU never joins a cuda group.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.fused
// CHECK: tandem.add %arg0, %arg1 {device = "cuda:0", fusion_refused = "read outside before the group's root"}
// CHECK: tandem.add %arg0, %arg1 {device = "cpu", fusion_refused = "on cpu, consumer on cuda:0"}
func.func @main(%x: tensor<4x64xf32> {tandem.device = "cuda:0"}, %h: tensor<4x64xf32> {tandem.device = "cuda:0"}) -> (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) {
  %g = tandem.constant {device = "cuda:0"} dense<1.0> : tensor<64xf32>
  %s = tandem.add %x, %h {device = "cuda:0"} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %m = tandem.softmax %s {axis = -1 : i64, device = "cuda:0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %n = tandem.layer_normalization %s, %g {axis = -1 : i64, device = "cuda:0", epsilon = 1.0E-5 : f32} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %c = tandem.add %x, %h {device = "cpu"} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %o = tandem.layer_normalization %c, %g {axis = -1 : i64, device = "cuda:0", epsilon = 1.0E-5 : f32} : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return %m, %n, %o : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// Refused, non-convex: the Exp is also read by a Softmax whose result the Add reads, so a group
// of Exp and Add would have a path leaving it and coming back.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.fused
// CHECK: tandem.exp %arg0 {device = "cuda:0", fusion_refused = "non-convex"}
func.func @main(%x: tensor<4x64xf32> {tandem.device = "cuda:0"}) -> tensor<4x64xf32> {
  %e = tandem.exp %x {device = "cuda:0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %m = tandem.softmax %e {axis = -1 : i64, device = "cuda:0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = tandem.add %e, %m {device = "cuda:0"} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Across devices: a Relu on the CPU reading a cuda:0 Gemm is refused from its epilogue; an Exp
// on cuda:1 does not take the element-wise Neg on cuda:0.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.fused
// CHECK: tandem.relu %{{.*}} {device = "cpu", fusion_refused = "on cpu, producer on cuda:0"}
// CHECK: tandem.neg %arg1 {device = "cuda:0", fusion_refused = "on cuda:0, consumer on cuda:1"}
func.func @main(%a: tensor<8x16xf32> {tandem.device = "cuda:0"}, %x: tensor<4xf32> {tandem.device = "cuda:0"}) -> (tensor<8x32xf32>, tensor<4xf32>) {
  %w = tandem.constant {device = "cuda:0"} dense<1.0> : tensor<16x32xf32>
  %g = tandem.gemm %a, %w {device = "cuda:0"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %r = tandem.relu %g {device = "cpu"} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %n = tandem.neg %x {device = "cuda:0"} : (tensor<4xf32>) -> tensor<4xf32>
  %e = tandem.exp %n {device = "cuda:1"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r, %e : tensor<8x32xf32>, tensor<4xf32>
}

// -----

// The op table's trigonometric and hyperbolic ops join a generated element-wise kernel like the
// older unary math ops (kCudaExpr rows).
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "elementwise"(%arg0, %arg1) {device = "cuda:0"}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.sin
// CHECK-NEXT: tandem.acosh
// CHECK-NEXT: tandem.mul
// CHECK-NEXT: tandem.atanh
// CHECK-NEXT: tandem.yield
// CHECK: return %[[F]]
func.func @main(%x: tensor<4x64xf32> {tandem.device = "cuda:0"}, %y: tensor<4x64xf32> {tandem.device = "cuda:0"}) -> tensor<4x64xf32> {
  %0 = tandem.sin %x {device = "cuda:0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %1 = tandem.acosh %0 {device = "cuda:0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %2 = tandem.mul %1, %y {device = "cuda:0"} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %3 = tandem.atanh %2 {device = "cuda:0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return %3 : tensor<4x64xf32>
}
