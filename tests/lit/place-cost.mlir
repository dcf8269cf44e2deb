// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-place="target=cpu" | FileCheck %s
// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-place="target=cpu,cuda:0=h100" | FileCheck %s --check-prefix=GPU

// Placement where the cost model decides, and where nothing can run an op.


// A 1024x1024x1024 matmul: 2 GFLOP costs milliseconds on this CPU and microseconds on an H100,
// which pays for moving 8 MB over PCIe; the cost policy sends it to cuda:0.
// CHECK-LABEL: func.func @main
// CHECK: tandem.mat_mul {{.*}} {device = "cpu", placement_candidates = ["cpu"], {{.*}}placement_reason = "only-kernel"}
// GPU-LABEL: func.func @main
// GPU: tandem.mat_mul {{.*}} {device = "cuda:0", placement_candidates = ["cpu", "cuda:0"], {{.*}}placement_reason = "cost"}
func.func @main(%a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %0 = tandem.mat_mul %a, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("mm")
  return %0 : tensor<1024x1024xf32>
}
// -----


// No target has a kernel: an error on the op, naming the dtypes and the targets.
func.func @main(%x: tensor<4xf16>) -> tensor<4xf16> {
  // expected-error @below {{no kernel for Abs on (f16) on any of: cpu}}
  %0 = tandem.abs %x : (tensor<4xf16>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// Fusion-aware placement: the Relu reading the only result of a matmul pinned to the CPU fuses
// into it there (a oneDNN eltwise post-op; on cuda:0 it would be a cuBLASLt epilogue, but the
// matmul is pinned), so it costs its arithmetic alone on the CPU (1M FLOPs, ~7 us on two
// cores). On cuda:0, where the next matmul runs, its launch overlaps the stream's work and it
// costs one enqueue (3 us, CostModel.h), less than that arithmetic: it goes there although the
// fusion is offered (placement_fusion records it); the 4 MB crossing is the same either way.
// When the first matmul's result is also a graph output (two readers) nothing fuses and the
// Relu goes to cuda:0 too.
// GPU-LABEL: func.func @main
// GPU: tandem.mat_mul {{.*}}device = "cpu"
// GPU: tandem.relu {{.*}}device = "cuda:0", {{.*}}placement_fusion = {devices = ["cpu", "cuda:0"], into = "mm1"}, placement_reason = "cost"
// GPU: tandem.mat_mul {{.*}}device = "cuda:0"
func.func @main(%a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %0 = tandem.mat_mul %a, %b {device = "cpu"} : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("mm1")
  %1 = tandem.relu %0 : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("relu")
  %2 = tandem.mat_mul %1, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("mm2")
  return %2 : tensor<1024x1024xf32>
}

// -----

// GPU-LABEL: func.func @main
// GPU: tandem.mat_mul {{.*}}device = "cpu"
// GPU: tandem.relu
// GPU-NOT: placement_fusion
// GPU-SAME: device = "cuda:0"
func.func @main(%a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>) -> (tensor<1024x1024xf32>, tensor<1024x1024xf32>) {
  %0 = tandem.mat_mul %a, %b {device = "cpu"} : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("mm1")
  %1 = tandem.relu %0 : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("relu")
  %2 = tandem.mat_mul %1, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("mm2")
  return %0, %2 : tensor<1024x1024xf32>, tensor<1024x1024xf32>
}

// -----

// Beyond dtypes: cuDNN pools with symmetric pads and floor rounding, so a ceil_mode MaxPool has
// no CUDA kernel for this instance (the backend would refuse it at load). The placer keeps it
// on the CPU and records why; the same pool without ceil_mode is a GPU candidate like any other.
// GPU-LABEL: func.func @main
// GPU: tandem.max_pool {{.*}}ceil_mode = 1 : i64, device = "cpu", {{.*}}placement_candidates = ["cpu"], {{.*}}placement_reason = "only-kernel", placement_refused = {"cuda:0" = "cuDNN's symmetric-pad, floor-rounded pooling does not give this output (ceil_mode or asymmetric pads)"}
// GPU: tandem.max_pool {{.*}}placement_candidates = ["cpu", "cuda:0"]
// GPU-NOT: placement_refused
func.func @main(%x: tensor<32x64x57x57xf32>) -> (tensor<32x64x29x29xf32>, tensor<32x64x28x28xf32>) {
  %0 = tandem.max_pool %x {ceil_mode = 1 : i64, kernel_shape = [2, 2], strides = [2, 2]} : (tensor<32x64x57x57xf32>) -> tensor<32x64x29x29xf32> loc("pool_ceil")
  %1 = tandem.max_pool %x {kernel_shape = [2, 2], strides = [2, 2]} : (tensor<32x64x57x57xf32>) -> tensor<32x64x28x28xf32> loc("pool_floor")
  return %0, %1 : tensor<32x64x29x29xf32>, tensor<32x64x28x28xf32>
}

// -----

// Fusion-aware placement for a row group: the LayerNormalization reading the only result of
// a residual Add pinned to the CPU is priced as fused into it there (add-layernorm: the row
// kernel reads the sum from registers, not memory), as the fuse pass will group them. With a
// GPU, cuda:0 could fuse them too (one block per row), but the pinned Add keeps the pair on cpu.
// CHECK-LABEL: func.func @main
// CHECK: tandem.layer_normalization {{.*}}placement_fusion = {devices = ["cpu"], into = "add1"}
// GPU-LABEL: func.func @main
// GPU: tandem.layer_normalization {{.*}}device = "cpu", {{.*}}placement_fusion = {devices = ["cpu", "cuda:0"], into = "add1"}
func.func @main(%x: tensor<4096x1024xf32>, %r: tensor<4096x1024xf32>) -> tensor<4096x1024xf32> {
  %g = tandem.constant dense<1.0> : tensor<1024xf32>
  %s = tandem.add %x, %r {device = "cpu"} : (tensor<4096x1024xf32>, tensor<4096x1024xf32>) -> tensor<4096x1024xf32> loc("add1")
  %n = tandem.layer_normalization %s, %g : (tensor<4096x1024xf32>, tensor<1024xf32>) -> tensor<4096x1024xf32> loc("ln1")
  return %n : tensor<4096x1024xf32>
}

// -----

// A pre-activation BatchNormalization + Relu (DenseNet) is one batchnorm-relu step on the CPU
// (passes/Fuse.cpp formBatchNormRelu): the Relu is priced as fused into the BatchNormalization,
// not as a memory pass of its own.
// CHECK-LABEL: func.func @main(%arg0: tensor<1x64x56x56xf32>
// CHECK: tandem.relu {{.*}}placement_fusion = {devices = ["cpu"], into = "bn1"}
func.func @main(%x: tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32> {
  %p = tandem.constant dense<1.0> : tensor<64xf32>
  %b = tandem.batch_normalization %x, %p, %p, %p, %p {epsilon = 1.0e-05 : f32} : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32> loc("bn1")
  %r = tandem.relu %b : (tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32> loc("relu1")
  return %r : tensor<1x64x56x56xf32>
}
