// RUN: tandem-opt %s -split-input-file --tandem-fuse | FileCheck %s

// Conv + residual Add + Relu: one conv-epilogue group whose inputs are X, W, B and the residual
// (oneDNN sum); the Add and Relu are gone from the top level.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "conv-epilogue"(%arg0, %{{.*}}, %{{.*}}, %arg1) {device = "cpu"}
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<1x2x3x3xf32>, %[[W:.*]]: tensor<2x2x1x1xf32>, %[[B:.*]]: tensor<2xf32>, %[[R:.*]]: tensor<1x2x3x3xf32>):
// CHECK-NEXT: %[[C:.*]] = tandem.conv %[[X]], %[[W]], %[[B]] {device = "cpu"}
// CHECK-NEXT: %[[S:.*]] = tandem.add %[[C]], %[[R]] {device = "cpu"}
// CHECK-NEXT: %[[Y:.*]] = tandem.relu %[[S]] {device = "cpu"}
// CHECK-NEXT: tandem.yield %[[Y]] : tensor<1x2x3x3xf32>
// CHECK: return %[[F]]
func.func @main(%x: tensor<1x2x3x3xf32> {tandem.device = "cpu"}, %r: tensor<1x2x3x3xf32> {tandem.device = "cpu"}) -> tensor<1x2x3x3xf32> {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<2x2x1x1xf32>
  %b = tandem.constant {device = "cpu"} dense<0.5> : tensor<2xf32>
  %c = tandem.conv %x, %w, %b {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
  %s = tandem.add %c, %r {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %y = tandem.relu %s {device = "cpu"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  return %y : tensor<1x2x3x3xf32>
}

// -----

// Gemm + Relu: a gemm-epilogue. The Add of a constant after the Relu is not a residual (no
// sum of a constant), so the chain stops there and the Add stays outside.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "gemm-epilogue"(%arg0, %{{.*}}, %{{.*}})
// CHECK: tandem.gemm
// CHECK-NEXT: tandem.relu
// CHECK-NEXT: tandem.yield
// CHECK: tandem.add %[[F]], %{{.*}} {device = "cpu"}
func.func @main(%a: tensor<2x3xf32> {tandem.device = "cpu"}) -> tensor<2x4xf32> {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<3x4xf32>
  %c = tandem.constant {device = "cpu"} dense<1.0> : tensor<4xf32>
  %k = tandem.constant {device = "cpu"} dense<2.0> : tensor<2x4xf32>
  %g = tandem.gemm %a, %w, %c {device = "cpu"} : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %r = tandem.relu %g {device = "cpu"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = tandem.add %r, %k {device = "cpu"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

// SiLU after a Conv, as PyTorch exports nn.SiLU: Mul(c, Sigmoid(c)), c read by both. The gate
// and the Mul join the conv-epilogue (one eltwise_swish post-op), then the residual-free
// chain goes on: the HardSwish Mul(HardSigmoid(y; 1/6, 1/2), y) after a second Conv too.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "conv-epilogue"(%arg0, %{{.*}}, %{{.*}}) {device = "cpu", result_layouts = ["blocked"]}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[C:.*]] = tandem.conv
// CHECK-NEXT: %[[G:.*]] = tandem.sigmoid %[[C]]
// CHECK-NEXT: %[[M:.*]] = tandem.mul %[[C]], %[[G]]
// CHECK-NEXT: tandem.yield %[[M]]
// CHECK: %[[F2:.*]] = tandem.fused "conv-epilogue"(%[[F]], %{{.*}}) {device = "cpu"}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[C2:.*]] = tandem.conv
// CHECK-NEXT: %[[H:.*]] = tandem.hard_sigmoid %[[C2]]
// CHECK-NEXT: %[[M2:.*]] = tandem.mul %[[H]], %[[C2]]
// CHECK-NEXT: tandem.yield %[[M2]]
// CHECK: return %[[F2]]
func.func @main(%x: tensor<1x2x3x3xf32> {tandem.device = "cpu"}) -> tensor<1x2x3x3xf32> {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<2x2x1x1xf32>
  %b = tandem.constant {device = "cpu"} dense<0.5> : tensor<2xf32>
  %c = tandem.conv %x, %w, %b {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
  %g = tandem.sigmoid %c {device = "cpu"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %y = tandem.mul %c, %g {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %c2 = tandem.conv %y, %w {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %h = tandem.hard_sigmoid %c2 {alpha = 0.166666672 : f32, beta = 5.000000e-01 : f32, device = "cpu"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %z = tandem.mul %h, %c2 {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  return %z : tensor<1x2x3x3xf32>
}

// -----

// Not gated activations, so no epilogue: a HardSigmoid with ONNX's default constants (0.2,
// 0.5) is no HardSwish, and a Sigmoid gate whose input is read a third time (here returned)
// leaves that result visible. Each Conv's result has two readers, so it anchors nothing; the
// gate and the Mul become an element-wise loop.
// CHECK-LABEL: func.func @main
// CHECK-NOT: conv-epilogue
// CHECK: tandem.conv
// CHECK-NEXT: tandem.fused "elementwise"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.hard_sigmoid
// CHECK-NEXT: tandem.mul
// CHECK: tandem.conv
// CHECK-NEXT: tandem.fused "elementwise"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.sigmoid
// CHECK-NEXT: tandem.mul
// CHECK-NOT: conv-epilogue
// CHECK: return
func.func @main(%x: tensor<1x2x3x3xf32> {tandem.device = "cpu"}) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<2x2x1x1xf32>
  %c = tandem.conv %x, %w {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %h = tandem.hard_sigmoid %c {device = "cpu"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %y = tandem.mul %c, %h {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %c2 = tandem.conv %x, %w {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %g = tandem.sigmoid %c2 {device = "cpu"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %z = tandem.mul %c2, %g {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  return %y, %z, %c2 : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>
}

// -----

// A Conv read twice is not an epilogue anchor: its result must be visible outside.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.fused
// CHECK: tandem.conv
// CHECK-NEXT: tandem.relu
func.func @main(%x: tensor<1x1x2x2xf32> {tandem.device = "cpu"}) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<1x1x1x1xf32>
  %c = tandem.conv %x, %w {device = "cpu"} : (tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x2x2xf32>
  %y = tandem.relu %c {device = "cpu"} : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  return %c, %y : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
}

// -----

// An element-wise chain with a scalar constant becomes one loop: (x + y) * 0.5, then tanh.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "elementwise"(%arg0, %arg1, %{{.*}}) {device = "cpu"}
// CHECK: tandem.add
// CHECK-NEXT: tandem.mul
// CHECK-NEXT: tandem.tanh
// CHECK-NEXT: tandem.yield
// CHECK-NOT: tandem.add
// CHECK: return %[[F]]
func.func @main(%x: tensor<8xf32> {tandem.device = "cpu"}, %y: tensor<8xf32> {tandem.device = "cpu"}) -> tensor<8xf32> {
  %h = tandem.constant {device = "cpu"} dense<0.5> : tensor<f32>
  %0 = tandem.add %x, %y {device = "cpu"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = tandem.mul %0, %h {device = "cpu"} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %2 = tandem.tanh %1 {device = "cpu"} : (tensor<8xf32>) -> tensor<8xf32>
  return %2 : tensor<8xf32>
}

// -----

// A producer also read outside joins as a second output when the group stays convex (its
// outside reader, the return, comes after the root).
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]]:2 = tandem.fused "elementwise"(%arg0) {device = "cpu"}
// CHECK: %[[E:.*]] = tandem.exp
// CHECK-NEXT: %[[N:.*]] = tandem.neg %[[E]]
// CHECK-NEXT: tandem.yield %[[E]], %[[N]]
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @main(%x: tensor<8xf32> {tandem.device = "cpu"}) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = tandem.exp %x {device = "cpu"} : (tensor<8xf32>) -> tensor<8xf32>
  %1 = tandem.neg %0 {device = "cpu"} : (tensor<8xf32>) -> tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Refused, non-convex: exp -> transpose -> add would leave the group {exp, add} and come back.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.fused
// CHECK: tandem.exp %arg0 {device = "cpu", fusion_refused = "non-convex"}
// CHECK-NEXT: tandem.transpose
// CHECK-NEXT: tandem.add
func.func @main(%x: tensor<4x4xf32> {tandem.device = "cpu"}) -> tensor<4x4xf32> {
  %0 = tandem.exp %x {device = "cpu"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = tandem.transpose %0 {device = "cpu", perm = [1, 0]} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = tandem.add %0, %1 {device = "cpu"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %2 : tensor<4x4xf32>
}

// -----

// Refused, across devices: the Relu on cpu:1 reads the Conv on cpu directly (no copy yet) and
// is not absorbed; the element-wise neg -> exp pair on cpu:1 does not take the cpu producer
// either.
// CHECK-LABEL: func.func @main
// CHECK: tandem.conv
// CHECK-NEXT: tandem.relu %{{.*}} {device = "cpu:1", fusion_refused = "on cpu:1, producer on cpu"}
// CHECK: tandem.neg %arg1 {device = "cpu", fusion_refused = "on cpu, consumer on cpu:1"}
// CHECK-NEXT: tandem.exp
// CHECK-NOT: tandem.fused
func.func @main(%x: tensor<1x1x2x2xf32> {tandem.device = "cpu"}, %v: tensor<4xf32> {tandem.device = "cpu"}) -> (tensor<1x1x2x2xf32>, tensor<4xf32>) {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<1x1x1x1xf32>
  %c = tandem.conv %x, %w {device = "cpu"} : (tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x2x2xf32>
  %y = tandem.relu %c {device = "cpu:1"} : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %n = tandem.neg %v {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %e = tandem.exp %n {device = "cpu:1"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y, %e : tensor<1x1x2x2xf32>, tensor<4xf32>
}

// -----

// Layout: activations between oneDNN convs and pools stay in the host's layout, whatever
// their channel count (the runtime keeps a value plain where its layout would pad)
// (`result_layouts`); a value also read by a non-oneDNN op (the Flatten), or returned, stays
// plain, and so does the 3-channel graph input.
// CHECK-LABEL: func.func @main
// CHECK: %[[C1:.*]] = tandem.fused "conv-epilogue"(%arg0, %{{.*}}) {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[P:.*]] = tandem.max_pool %[[C1]] {device = "cpu", kernel_shape = [2, 2], result_layouts = ["blocked"], strides = [2, 2]}
// CHECK: %[[C2:.*]] = tandem.conv %[[P]], %{{.*}} {device = "cpu"}
// CHECK-NOT: result_layouts
// CHECK: tandem.flatten %[[C2]]
func.func @main(%x: tensor<1x3x8x8xf32> {tandem.device = "cpu"}) -> (tensor<1x256xf32>, tensor<1x16x4x4xf32>) {
  %w1 = tandem.constant {device = "cpu"} dense<0.1> : tensor<16x3x1x1xf32>
  %w2 = tandem.constant {device = "cpu"} dense<0.1> : tensor<16x16x1x1xf32>
  %c1 = tandem.conv %x, %w1 {device = "cpu"} : (tensor<1x3x8x8xf32>, tensor<16x3x1x1xf32>) -> tensor<1x16x8x8xf32>
  %r1 = tandem.relu %c1 {device = "cpu"} : (tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %p = tandem.max_pool %r1 {device = "cpu", kernel_shape = [2, 2], strides = [2, 2]} : (tensor<1x16x8x8xf32>) -> tensor<1x16x4x4xf32>
  %c2 = tandem.conv %p, %w2 {device = "cpu"} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %f = tandem.flatten %c2 {device = "cpu"} : (tensor<1x16x4x4xf32>) -> tensor<1x256xf32>
  return %f, %c2 : tensor<1x256xf32>, tensor<1x16x4x4xf32>
}

// -----

// Refused, would regress oneDNN's implementation: a residual sum after an activation has only
// a reference kernel in oneDNN 2.6 (conv jit:avx2 falls to ref:any), so the Conv keeps its Relu
// and the Add runs on its own.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "conv-epilogue"
// CHECK: tandem.conv
// CHECK-NEXT: tandem.relu
// CHECK-NEXT: tandem.yield
// CHECK: tandem.add %[[F]], %arg1 {device = "cpu", fusion_refused = "sum after an activation (oneDNN has no fast kernel for it)"}
func.func @main(%x: tensor<1x2x3x3xf32> {tandem.device = "cpu"}, %r: tensor<1x2x3x3xf32> {tandem.device = "cpu"}) -> tensor<1x2x3x3xf32> {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<2x2x1x1xf32>
  %c = tandem.conv %x, %w {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %y = tandem.relu %c {device = "cpu"} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %s = tandem.add %y, %r {device = "cpu"} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  return %s : tensor<1x2x3x3xf32>
}

// -----

// Layout: any channel count is marked (24 here): whether the host layout fits is the runtime's
// question (nhwc always does; nChw16c does not, and that value then stays plain).
// CHECK-LABEL: func.func @main
// CHECK: tandem.conv %arg0, %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: tandem.conv
func.func @main(%x: tensor<1x8x6x6xf32> {tandem.device = "cpu"}) -> tensor<1x24x6x6xf32> {
  %w1 = tandem.constant {device = "cpu"} dense<0.1> : tensor<24x8x1x1xf32>
  %w2 = tandem.constant {device = "cpu"} dense<0.1> : tensor<24x24x1x1xf32>
  %c1 = tandem.conv %x, %w1 {device = "cpu"} : (tensor<1x8x6x6xf32>, tensor<24x8x1x1xf32>) -> tensor<1x24x6x6xf32>
  %c2 = tandem.conv %c1, %w2 {device = "cpu"} : (tensor<1x24x6x6xf32>, tensor<24x24x1x1xf32>) -> tensor<1x24x6x6xf32>
  return %c2 : tensor<1x24x6x6xf32>
}

// -----

// Layout: a ceil_mode max pool whose last window overhangs by less than a window (GoogLeNet's
// 3x3/2 pools) runs on oneDNN and stays in the host layout; an include-padding average pool
// with ceil_mode does not (oneDNN would count the overhang in its divisor), so its input stays
// plain.
// CHECK-LABEL: func.func @main
// CHECK: %[[C:.*]] = tandem.conv %arg0, %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: tandem.max_pool %[[C]] {ceil_mode = 1 : i64, device = "cpu", kernel_shape = [3, 3], result_layouts = ["blocked"], strides = [2, 2]}
// CHECK: %[[C2:.*]] = tandem.conv %{{.*}}, %{{.*}} {device = "cpu"}
// CHECK-NEXT: tandem.average_pool %[[C2]] {ceil_mode = 1 : i64, count_include_pad = 1 : i64, device = "cpu", kernel_shape = [3, 3], strides = [2, 2]}
func.func @main(%x: tensor<1x8x8x8xf32> {tandem.device = "cpu"}) -> tensor<1x16x2x2xf32> {
  %w1 = tandem.constant {device = "cpu"} dense<0.1> : tensor<16x8x1x1xf32>
  %w2 = tandem.constant {device = "cpu"} dense<0.1> : tensor<16x16x1x1xf32>
  %c1 = tandem.conv %x, %w1 {device = "cpu"} : (tensor<1x8x8x8xf32>, tensor<16x8x1x1xf32>) -> tensor<1x16x8x8xf32>
  %p = tandem.max_pool %c1 {ceil_mode = 1 : i64, device = "cpu", kernel_shape = [3, 3], strides = [2, 2]} : (tensor<1x16x8x8xf32>) -> tensor<1x16x4x4xf32>
  %c2 = tandem.conv %p, %w2 {device = "cpu"} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %a = tandem.average_pool %c2 {ceil_mode = 1 : i64, count_include_pad = 1 : i64, device = "cpu", kernel_shape = [3, 3], strides = [2, 2]} : (tensor<1x16x4x4xf32>) -> tensor<1x16x2x2xf32>
  return %a : tensor<1x16x2x2xf32>
}

// -----

// A pre-activation block (DenseNet): an inference BatchNormalization read only by a Relu forms
// a `batchnorm-relu` group, which reads and writes the host layout like a conv, so the pool
// feeding it and the Conv after it skip their reorders. A BatchNormalization with a second
// reader (the returned value) stays on its own; it reads the Conv's host layout and writes
// plain (returned).
// CHECK-LABEL: func.func @main
// CHECK: %[[P:.*]] = tandem.max_pool %arg0 {device = "cpu", kernel_shape = [1, 1], result_layouts = ["blocked"]}
// CHECK: %[[F:.*]] = tandem.fused "batchnorm-relu"(%[[P]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {device = "cpu", result_layouts = ["blocked"]}
// CHECK: tandem.batch_normalization %arg1
// CHECK-NEXT: tandem.relu
// CHECK-NEXT: tandem.yield
// CHECK: %[[C:.*]] = tandem.conv %[[F]], %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[B:.*]] = tandem.batch_normalization %[[C]], %{{.*}} {device = "cpu"} :
// CHECK-NEXT: tandem.relu %[[B]] {device = "cpu"}
func.func @main(%x: tensor<1x8x4x4xf32> {tandem.device = "cpu"}) -> (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) {
  %p = tandem.max_pool %x {device = "cpu", kernel_shape = [1, 1]} : (tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %s = tandem.constant {device = "cpu"} dense<2.0> : tensor<8xf32>
  %b = tandem.constant {device = "cpu"} dense<-1.0> : tensor<8xf32>
  %m = tandem.constant {device = "cpu"} dense<0.5> : tensor<8xf32>
  %v = tandem.constant {device = "cpu"} dense<4.0> : tensor<8xf32>
  %n = tandem.batch_normalization %p, %s, %b, %m, %v {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x4x4xf32>
  %r = tandem.relu %n {device = "cpu"} : (tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %w = tandem.constant {device = "cpu"} dense<0.1> : tensor<8x8x1x1xf32>
  %c = tandem.conv %r, %w {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %n2 = tandem.batch_normalization %c, %s, %b, %m, %v {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x4x4xf32>
  %r2 = tandem.relu %n2 {device = "cpu"} : (tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  return %n2, %r2 : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>
}

// -----

// A diffusion U-Net's block: Conv -> per-channel Add (the timestep embedding) -> GroupNorm ->
// SiLU (Mul(x, Sigmoid(x))) -> Conv, then a nearest Resize x2 -> Conv. The GroupNorm and its
// SiLU form a `groupnorm-silu` group, and every value between the convolutions stays in the host
// layout, the Resize's too. A group norm keeps its input's layout: one whose result has a
// reader of the plain layout (the returned value; an InstanceNormalization's Relu) reads plain,
// so the Conv before it writes plain.
// CHECK-LABEL: func.func @main
// CHECK: %[[C:.*]] = tandem.conv %arg0, %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[A:.*]] = tandem.add %[[C]], %arg1 {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[F:.*]] = tandem.fused "groupnorm-silu"(%[[A]], %{{.*}}, %{{.*}}) {device = "cpu", result_layouts = ["blocked"]}
// CHECK: tandem.group_normalization
// CHECK-NEXT: tandem.sigmoid
// CHECK-NEXT: tandem.mul
// CHECK-NEXT: tandem.yield
// CHECK: %[[C2:.*]] = tandem.conv %[[F]], %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[U:.*]] = tandem.resize %[[C2]], %{{.*}}, %{{.*}} {{{.*}}device = "cpu"{{.*}}result_layouts = ["blocked"]}
// CHECK: %[[C3:.*]] = tandem.conv %[[U]], %{{.*}} {device = "cpu"} :
// CHECK: %[[G:.*]] = tandem.group_normalization %[[C3]], %{{.*}}, %{{.*}} {device = "cpu", num_groups = 4 : i64} :
// CHECK: %[[C4:.*]] = tandem.conv %[[G]], %{{.*}} {device = "cpu"} :
// CHECK: %[[I:.*]] = tandem.instance_normalization %[[C4]], %{{.*}}, %{{.*}} {device = "cpu", fusion_refused = "{{.*}}"} :
// CHECK: tandem.relu %[[I]]
func.func @main(%x: tensor<1x8x4x4xf32> {tandem.device = "cpu"}, %t: tensor<1x8x1x1xf32> {tandem.device = "cpu"}) -> (tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>) {
  %w = tandem.constant {device = "cpu"} dense<0.1> : tensor<8x8x1x1xf32>
  %s = tandem.constant {device = "cpu"} dense<2.0> : tensor<8xf32>
  %b = tandem.constant {device = "cpu"} dense<-1.0> : tensor<8xf32>
  %c = tandem.conv %x, %w {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %a = tandem.add %c, %t {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %n = tandem.group_normalization %a, %s, %b {device = "cpu", num_groups = 4 : i64} : (tensor<1x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x4x4xf32>
  %g = tandem.sigmoid %n {device = "cpu"} : (tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %m = tandem.mul %n, %g {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %c2 = tandem.conv %m, %w {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %none = tandem.none
  %sc = tandem.constant {device = "cpu"} dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>
  %u = tandem.resize %c2, %none, %sc {device = "cpu", mode = "nearest"} : (tensor<1x8x4x4xf32>, none, tensor<4xf32>) -> tensor<1x8x8x8xf32>
  %c3 = tandem.conv %u, %w {device = "cpu"} : (tensor<1x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x8x8xf32>
  %n2 = tandem.group_normalization %c3, %s, %b {device = "cpu", num_groups = 4 : i64} : (tensor<1x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x8x8xf32>
  %c4 = tandem.conv %n2, %w {device = "cpu"} : (tensor<1x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x8x8xf32>
  %i = tandem.instance_normalization %c4, %s, %b {device = "cpu"} : (tensor<1x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x8x8xf32>
  %r = tandem.relu %i {device = "cpu"} : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  return %n2, %r : tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32>
}

// -----

// A YOLO C2f block: Conv -> channel Split -> a bottleneck (two Convs, the second with its
// activation, so the residual Add after it is no post-op) with a residual Add of its input ->
// Concat of the Split's halves and the sum -> Conv. Every value between the Convs stays
// in the host layout (the Split and the Add keep it). A same-shape Add with a plain operand (a
// graph input) reads plain, so the conv-epilogue feeding its other operand writes plain: the
// two operands of an Add never differ.
// CHECK-LABEL: func.func @main
// CHECK: %[[C:.*]] = tandem.conv %arg0, %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[S:.*]]:2 = tandem.split %[[C]] {axis = 1 : i64, device = "cpu", result_layouts = ["blocked", "blocked"]}
// CHECK: %[[M1:.*]] = tandem.conv %[[S]]#1, %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[M2:.*]] = tandem.fused "conv-epilogue"(%[[M1]], %{{.*}}) {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[A:.*]] = tandem.add %[[S]]#1, %[[M2]] {device = "cpu", fusion_refused = "{{.*}}", result_layouts = ["blocked"]}
// CHECK: %[[K:.*]] = tandem.concat %[[S]]#0, %[[S]]#1, %[[A]] {axis = 1 : i64, device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[O:.*]] = tandem.conv %[[K]], %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[P:.*]] = tandem.fused "conv-epilogue"(%[[O]], %{{.*}}) {device = "cpu"} :
// CHECK: tandem.add %[[P]], %arg1 {device = "cpu", fusion_refused = "{{.*}}"} :
func.func @main(%x: tensor<1x16x4x4xf32> {tandem.device = "cpu"}, %r: tensor<1x16x4x4xf32> {tandem.device = "cpu"}) -> tensor<1x16x4x4xf32> {
  %w = tandem.constant {device = "cpu"} dense<0.1> : tensor<16x16x1x1xf32>
  %wh = tandem.constant {device = "cpu"} dense<0.1> : tensor<8x8x1x1xf32>
  %w2 = tandem.constant {device = "cpu"} dense<0.1> : tensor<16x24x1x1xf32>
  %c = tandem.conv %x, %w {device = "cpu"} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %s:2 = tandem.split %c {axis = 1 : i64, device = "cpu"} : (tensor<1x16x4x4xf32>) -> (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>)
  %m1 = tandem.conv %s#1, %wh {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %m2c = tandem.conv %m1, %wh {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %m2 = tandem.relu %m2c {device = "cpu"} : (tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %a = tandem.add %s#1, %m2 {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %k = tandem.concat %s#0, %s#1, %a {axis = 1 : i64, device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) -> tensor<1x24x4x4xf32>
  %o = tandem.conv %k, %w2 {device = "cpu"} : (tensor<1x24x4x4xf32>, tensor<16x24x1x1xf32>) -> tensor<1x16x4x4xf32>
  %pc = tandem.conv %o, %w {device = "cpu"} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %p = tandem.relu %pc {device = "cpu"} : (tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %y = tandem.add %p, %r {device = "cpu"} : (tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  return %y : tensor<1x16x4x4xf32>
}

// -----

// MatMul over a [B, S, K] activation with one weight matrix, then a constant bias row (the
// first operand here, as exporters write it), a Mul by a constant row of the last axis, a
// residual Add and a Relu: one gemm-epilogue (the primitive's bias, binary_mul, sum, eltwise).
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "gemm-epilogue"(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %arg1)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.mat_mul
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.mul
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.relu
// CHECK-NEXT: tandem.yield
// CHECK: return %[[F]]
func.func @main(%x: tensor<2x3x8xf32> {tandem.device = "cpu"}, %r: tensor<2x3x4xf32> {tandem.device = "cpu"}) -> tensor<2x3x4xf32> {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<8x4xf32>
  %b = tandem.constant {device = "cpu"} dense<0.5> : tensor<4xf32>
  %g = tandem.constant {device = "cpu"} dense<0.1> : tensor<1x1x4xf32>
  %m = tandem.mat_mul %x, %w {device = "cpu"} : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  %a = tandem.add %b, %m {device = "cpu"} : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = tandem.mul %a, %g {device = "cpu"} : (tensor<2x3x4xf32>, tensor<1x1x4xf32>) -> tensor<2x3x4xf32>
  %y = tandem.add %s, %r {device = "cpu"} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %z = tandem.relu %y {device = "cpu"} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %z : tensor<2x3x4xf32>
}

// -----

// Layout: a channel Concat (GoogLeNet, DenseNet) reads and writes the host layout, so the
// convs and the pool around it skip their reorders; a Concat along another axis does not, and
// the conv feeding it stays plain.
// CHECK-LABEL: func.func @main
// CHECK: %[[A:.*]] = tandem.conv %arg0, %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[B:.*]] = tandem.max_pool %arg0 {device = "cpu", kernel_shape = [1, 1], result_layouts = ["blocked"]}
// CHECK: %[[C:.*]] = tandem.concat %[[A]], %[[B]] {axis = 1 : i64, device = "cpu", result_layouts = ["blocked"]}
// CHECK: tandem.conv %[[C]], %{{.*}} {device = "cpu"} :
// CHECK: %[[D:.*]] = tandem.conv %arg0, %{{.*}} {device = "cpu"} :
// CHECK: tandem.concat %[[D]], %[[D]] {axis = 2 : i64, device = "cpu"} :
func.func @main(%x: tensor<1x8x4x4xf32> {tandem.device = "cpu"}) -> (tensor<1x8x4x4xf32>, tensor<1x8x8x4xf32>) {
  %w = tandem.constant {device = "cpu"} dense<0.1> : tensor<8x8x1x1xf32>
  %w2 = tandem.constant {device = "cpu"} dense<0.1> : tensor<8x16x1x1xf32>
  %a = tandem.conv %x, %w {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %b = tandem.max_pool %x {device = "cpu", kernel_shape = [1, 1]} : (tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %c = tandem.concat %a, %b {axis = 1 : i64, device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) -> tensor<1x16x4x4xf32>
  %y = tandem.conv %c, %w2 {device = "cpu"} : (tensor<1x16x4x4xf32>, tensor<8x16x1x1xf32>) -> tensor<1x8x4x4xf32>
  %d = tandem.conv %x, %w {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %e = tandem.concat %d, %d {axis = 2 : i64, device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) -> tensor<1x8x8x4xf32>
  return %y, %e : tensor<1x8x4x4xf32>, tensor<1x8x8x4xf32>
}

// -----

// A dense block (DenseNet): each layer's channel Concat of the earlier feature maps is read
// only by its pre-activation BatchNormalization + Relu, and the three form one
// `concat-batchnorm-relu` group (the concatenation is never written). The convs feeding those
// groups keep the host layout. A Concat with a second reader (returned) stays on its own and
// its BatchNormalization + Relu are a `batchnorm-relu` group.
// CHECK-LABEL: func.func @main
// CHECK: %[[A:.*]] = tandem.conv %arg0, %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[F:.*]] = tandem.fused "concat-batchnorm-relu"(%arg0, %[[A]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {device = "cpu", result_layouts = ["blocked"]}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.concat
// CHECK-NEXT: tandem.batch_normalization
// CHECK-NEXT: tandem.relu
// CHECK-NEXT: tandem.yield
// CHECK: %[[B:.*]] = tandem.conv %[[F]], %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[C:.*]] = tandem.concat %arg0, %[[A]], %[[B]] {axis = 1 : i64, device = "cpu"} :
// CHECK: tandem.fused "batchnorm-relu"(%[[C]],
func.func @main(%x: tensor<1x8x4x4xf32> {tandem.device = "cpu"}) -> (tensor<1x24x4x4xf32>, tensor<1x24x4x4xf32>) {
  %w = tandem.constant {device = "cpu"} dense<0.1> : tensor<8x8x1x1xf32>
  %w2 = tandem.constant {device = "cpu"} dense<0.1> : tensor<8x16x1x1xf32>
  %s = tandem.constant {device = "cpu"} dense<2.0> : tensor<16xf32>
  %b = tandem.constant {device = "cpu"} dense<-1.0> : tensor<16xf32>
  %m = tandem.constant {device = "cpu"} dense<0.5> : tensor<16xf32>
  %v = tandem.constant {device = "cpu"} dense<4.0> : tensor<16xf32>
  %s3 = tandem.constant {device = "cpu"} dense<2.0> : tensor<24xf32>
  %a = tandem.conv %x, %w {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %c1 = tandem.concat %x, %a {axis = 1 : i64, device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) -> tensor<1x16x4x4xf32>
  %n1 = tandem.batch_normalization %c1, %s, %b, %m, %v {device = "cpu"} : (tensor<1x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16x4x4xf32>
  %r1 = tandem.relu %n1 {device = "cpu"} : (tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %b1 = tandem.conv %r1, %w2 {device = "cpu"} : (tensor<1x16x4x4xf32>, tensor<8x16x1x1xf32>) -> tensor<1x8x4x4xf32>
  %c2 = tandem.concat %x, %a, %b1 {axis = 1 : i64, device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) -> tensor<1x24x4x4xf32>
  %n2 = tandem.batch_normalization %c2, %s3, %s3, %s3, %s3 {device = "cpu"} : (tensor<1x24x4x4xf32>, tensor<24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<1x24x4x4xf32>
  %r2 = tandem.relu %n2 {device = "cpu"} : (tensor<1x24x4x4xf32>) -> tensor<1x24x4x4xf32>
  return %c2, %r2 : tensor<1x24x4x4xf32>, tensor<1x24x4x4xf32>
}

// -----

// Bias row, Gelu and a scale row in one gemm-epilogue; the residual Add after the Gelu is
// refused as for any activation.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "gemm-epilogue"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.mat_mul
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.gelu
// CHECK-NEXT: tandem.mul
// CHECK-NEXT: tandem.yield
// CHECK: tandem.add %[[F]], %arg1 {device = "cpu", fusion_refused = "sum after an activation
func.func @main(%x: tensor<6x8xf32> {tandem.device = "cpu"}, %r: tensor<6x4xf32> {tandem.device = "cpu"}) -> tensor<6x4xf32> {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<8x4xf32>
  %b = tandem.constant {device = "cpu"} dense<0.5> : tensor<1x4xf32>
  %g = tandem.constant {device = "cpu"} dense<0.1> : tensor<4xf32>
  %m = tandem.mat_mul %x, %w {device = "cpu"} : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %a = tandem.add %m, %b {device = "cpu"} : (tensor<6x4xf32>, tensor<1x4xf32>) -> tensor<6x4xf32>
  %e = tandem.gelu %a {device = "cpu"} : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %s = tandem.mul %e, %g {device = "cpu"} : (tensor<6x4xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %y = tandem.add %s, %r {device = "cpu"} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  return %y : tensor<6x4xf32>
}

// -----

// Not a bias: a constant row added after the Relu (the primitive's bias comes before every
// post-op), a bias row that is not constant, and one added to a batched MatMul (B with a
// batch: no single bias vector in the folded product) all stay outside.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "gemm-epilogue"
// CHECK: tandem.mat_mul
// CHECK-NEXT: tandem.relu
// CHECK-NEXT: tandem.yield
// CHECK: tandem.add %[[F]], %{{.*}} {device = "cpu"}
// CHECK: %[[M:[0-9]+]] = tandem.mat_mul %arg0, %{{.*}} {device = "cpu"}
// CHECK-NEXT: tandem.add %[[M]], %arg1 {device = "cpu"}
// CHECK: %[[B:[0-9]+]] = tandem.mat_mul %arg2, %arg3 {device = "cpu"}
// CHECK-NEXT: tandem.add %[[B]], %{{.*}} {device = "cpu"}
func.func @main(%x: tensor<3x8xf32> {tandem.device = "cpu"}, %v: tensor<4xf32> {tandem.device = "cpu"}, %p: tensor<2x3x8xf32> {tandem.device = "cpu"}, %q: tensor<2x8x4xf32> {tandem.device = "cpu"}) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<2x3x4xf32>) {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<8x4xf32>
  %b = tandem.constant {device = "cpu"} dense<0.5> : tensor<4xf32>
  %m = tandem.mat_mul %x, %w {device = "cpu"} : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %r = tandem.relu %m {device = "cpu"} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %a = tandem.add %r, %b {device = "cpu"} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %m2 = tandem.mat_mul %x, %w {device = "cpu"} : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %a2 = tandem.add %m2, %v {device = "cpu"} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %m3 = tandem.mat_mul %p, %q {device = "cpu"} : (tensor<2x3x8xf32>, tensor<2x8x4xf32>) -> tensor<2x3x4xf32>
  %a3 = tandem.add %m3, %b {device = "cpu"} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %a, %a2, %a3 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<2x3x4xf32>
}

// -----

// ConvNeXt's depthwise Conv then a Transpose to channels-last (NCHW -> NHWC): one
// conv-epilogue whose primitive writes nhwc; its result keeps the plain layout (no
// result_layouts: only the LayerNormalization reads it). A Transpose with another perm stays
// outside.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "conv-epilogue"(%arg0, %{{.*}}, %{{.*}}) {device = "cpu"}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.conv
// CHECK-NEXT: tandem.transpose {{.*}}perm = [0, 2, 3, 1]
// CHECK-NEXT: tandem.yield
// CHECK: tandem.layer_normalization %[[F]]
// CHECK: %[[G:.*]] = tandem.fused "conv-epilogue"
// CHECK: tandem.transpose %[[G]] {device = "cpu", perm = [0, 3, 2, 1]}
func.func @main(%x: tensor<1x4x5x5xf32> {tandem.device = "cpu"}) -> (tensor<1x5x5x4xf32>, tensor<1x5x5x4xf32>) {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<4x1x3x3xf32>
  %b = tandem.constant {device = "cpu"} dense<0.5> : tensor<4xf32>
  %s = tandem.constant {device = "cpu"} dense<1.0> : tensor<4xf32>
  %c = tandem.conv %x, %w, %b {device = "cpu", group = 4 : i64, pads = [1, 1, 1, 1]} : (tensor<1x4x5x5xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>) -> tensor<1x4x5x5xf32>
  %t = tandem.transpose %c {device = "cpu", perm = [0, 2, 3, 1]} : (tensor<1x4x5x5xf32>) -> tensor<1x5x5x4xf32>
  %n = tandem.layer_normalization %t, %s {device = "cpu"} : (tensor<1x5x5x4xf32>, tensor<4xf32>) -> tensor<1x5x5x4xf32>
  %c2 = tandem.conv %x, %w, %b {device = "cpu", group = 4 : i64, pads = [1, 1, 1, 1]} : (tensor<1x4x5x5xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>) -> tensor<1x4x5x5xf32>
  %r = tandem.relu %c2 {device = "cpu"} : (tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
  %t2 = tandem.transpose %r {device = "cpu", perm = [0, 3, 2, 1]} : (tensor<1x4x5x5xf32>) -> tensor<1x5x5x4xf32>
  return %n, %t2 : tensor<1x5x5x4xf32>, tensor<1x5x5x4xf32>
}

// -----

// The op table's trigonometric and hyperbolic ops join the CPU element-wise loop (kCpuLoop rows).
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "elementwise"(%arg0, %arg1) {device = "cpu"}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.cos
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.tan
// CHECK-NEXT: tandem.asinh
// CHECK-NEXT: tandem.yield
// CHECK: return %[[F]]
func.func @main(%x: tensor<4x64xf32> {tandem.device = "cpu"}, %y: tensor<4x64xf32> {tandem.device = "cpu"}) -> tensor<4x64xf32> {
  %0 = tandem.cos %x {device = "cpu"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %1 = tandem.add %0, %y {device = "cpu"} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %2 = tandem.tan %1 {device = "cpu"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %3 = tandem.asinh %2 {device = "cpu"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return %3 : tensor<4x64xf32>
}

// -----

// Layout: a squeeze-excitation rescale Mul(s, x), s [1, C, 1, 1] from a GlobalAveragePool of x,
// reads x in the host layout and writes it for the pointwise conv, so x stays blocked from the
// first conv to the second; a Mul whose other operand varies over space ([1, 1, 4, 4]) is not a
// per-channel scale: its x and its result stay plain.
// CHECK-LABEL: func.func @main
// CHECK: %[[C1:.*]] = tandem.conv %arg0, %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[G:.*]] = tandem.global_average_pool %[[C1]] {device = "cpu"}
// CHECK: %[[M:.*]] = tandem.mul %[[G]], %[[C1]] {device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[C2:.*]] = tandem.conv %[[M]], %{{.*}} {device = "cpu"}
// CHECK-NEXT: tandem.mul %arg1, %[[C2]] {device = "cpu"}
func.func @main(%x: tensor<1x8x4x4xf32> {tandem.device = "cpu"}, %t: tensor<1x1x4x4xf32> {tandem.device = "cpu"}) -> tensor<1x16x4x4xf32> {
  %w1 = tandem.constant {device = "cpu"} dense<0.1> : tensor<16x8x1x1xf32>
  %w2 = tandem.constant {device = "cpu"} dense<0.1> : tensor<16x16x1x1xf32>
  %c1 = tandem.conv %x, %w1 {device = "cpu"} : (tensor<1x8x4x4xf32>, tensor<16x8x1x1xf32>) -> tensor<1x16x4x4xf32>
  %g = tandem.global_average_pool %c1 {device = "cpu"} : (tensor<1x16x4x4xf32>) -> tensor<1x16x1x1xf32>
  %m = tandem.mul %g, %c1 {device = "cpu"} : (tensor<1x16x1x1xf32>, tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %c2 = tandem.conv %m, %w2 {device = "cpu"} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
  %n = tandem.mul %t, %c2 {device = "cpu"} : (tensor<1x1x4x4xf32>, tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  return %n : tensor<1x16x4x4xf32>
}

// -----

// Layout: 5-D activations (video, volumes: R3D, S3D) stay in the host's layout between oneDNN's
// 3-D convs, pools and channel Concat, as 4-D ones do, and so does a per-channel Mul by
// s[1, C, 1, 1, 1]; a ceil_mode 3-D max pool that oneDNN can express too. 3-D activations
// (Conv1d chains) stay plain.
// CHECK-LABEL: func.func @main
// CHECK: %[[C1:.*]] = tandem.conv %arg0, %{{.*}} {device = "cpu", pads = [0, 1, 1, 0, 1, 1], result_layouts = ["blocked"]}
// CHECK: %[[P:.*]] = tandem.max_pool %[[C1]] {ceil_mode = 1 : i64, device = "cpu", kernel_shape = [1, 3, 3], result_layouts = ["blocked"], strides = [1, 2, 2]}
// CHECK: %[[C2:.*]] = tandem.conv %[[P]], %{{.*}} {device = "cpu", pads = [1, 0, 0, 1, 0, 0], result_layouts = ["blocked"]}
// CHECK: %[[C3:.*]] = tandem.conv %[[P]], %{{.*}} {device = "cpu", pads = [1, 0, 0, 1, 0, 0], result_layouts = ["blocked"]}
// CHECK: %[[K:.*]] = tandem.concat %[[C2]], %[[C3]] {axis = 1 : i64, device = "cpu", result_layouts = ["blocked"]}
// CHECK: %[[M:.*]] = tandem.mul %[[K]], %{{.*}} {device = "cpu", result_layouts = ["blocked"]}
// CHECK: tandem.conv %[[M]], %{{.*}} {device = "cpu"} :
// CHECK: tandem.conv %arg1, %{{.*}} {device = "cpu", pads = [1, 1]} :
// CHECK: tandem.conv %{{.*}}, %{{.*}} {device = "cpu", pads = [1, 1]} :
func.func @main(%x: tensor<1x8x4x8x8xf32>, %v: tensor<1x8x16xf32>) -> (tensor<1x16x4x4x4xf32>, tensor<1x8x16xf32>) {
  %w1 = tandem.constant {device = "cpu"} dense<1.0> : tensor<16x8x1x3x3xf32>
  %w2 = tandem.constant {device = "cpu"} dense<1.0> : tensor<8x16x3x1x1xf32>
  %w3 = tandem.constant {device = "cpu"} dense<1.0> : tensor<16x16x1x1x1xf32>
  %s = tandem.constant {device = "cpu"} dense<2.0> : tensor<1x16x1x1x1xf32>
  %c1 = tandem.conv %x, %w1 {device = "cpu", pads = [0, 1, 1, 0, 1, 1]} : (tensor<1x8x4x8x8xf32>, tensor<16x8x1x3x3xf32>) -> tensor<1x16x4x8x8xf32>
  %p = tandem.max_pool %c1 {ceil_mode = 1 : i64, device = "cpu", kernel_shape = [1, 3, 3], strides = [1, 2, 2]} : (tensor<1x16x4x8x8xf32>) -> tensor<1x16x4x4x4xf32>
  %c2 = tandem.conv %p, %w2 {device = "cpu", pads = [1, 0, 0, 1, 0, 0]} : (tensor<1x16x4x4x4xf32>, tensor<8x16x3x1x1xf32>) -> tensor<1x8x4x4x4xf32>
  %c3 = tandem.conv %p, %w2 {device = "cpu", pads = [1, 0, 0, 1, 0, 0]} : (tensor<1x16x4x4x4xf32>, tensor<8x16x3x1x1xf32>) -> tensor<1x8x4x4x4xf32>
  %k = tandem.concat %c2, %c3 {axis = 1 : i64, device = "cpu"} : (tensor<1x8x4x4x4xf32>, tensor<1x8x4x4x4xf32>) -> tensor<1x16x4x4x4xf32>
  %m = tandem.mul %k, %s {device = "cpu"} : (tensor<1x16x4x4x4xf32>, tensor<1x16x1x1x1xf32>) -> tensor<1x16x4x4x4xf32>
  %y = tandem.conv %m, %w3 {device = "cpu"} : (tensor<1x16x4x4x4xf32>, tensor<16x16x1x1x1xf32>) -> tensor<1x16x4x4x4xf32>
  %u1 = tandem.constant {device = "cpu"} dense<1.0> : tensor<8x8x3xf32>
  %a = tandem.conv %v, %u1 {device = "cpu", pads = [1, 1]} : (tensor<1x8x16xf32>, tensor<8x8x3xf32>) -> tensor<1x8x16xf32>
  %b = tandem.conv %a, %u1 {device = "cpu", pads = [1, 1]} : (tensor<1x8x16xf32>, tensor<8x8x3xf32>) -> tensor<1x8x16xf32>
  return %y, %b : tensor<1x16x4x4x4xf32>, tensor<1x8x16xf32>
}
