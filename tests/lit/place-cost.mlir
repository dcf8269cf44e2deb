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

// Fusion-aware placement: the Relu reading the only result of a GPU matmul fuses into it on
// cuda:0 (cuBLASLt ReLU epilogue), so it stays there although alone it would cost a 5 us launch
// against 1 us on the CPU; its fused cost on each device is what the log shows. When the matmul
// result is also a graph output (two readers) nothing fuses and the Relu moves to the CPU.
// GPU-LABEL: func.func @main
// GPU: tandem.mat_mul {{.*}}device = "cuda:0"
// GPU: tandem.relu {{.*}}device = "cuda:0", {{.*}}placement_fusion = {devices = ["cpu", "cuda:0"], into = "mm"}, placement_reason = "cost"
func.func @main(%x: tensor<1x12544xf32>) -> tensor<1x128xf32> {
  %w = tandem.constant dense<1.0> : tensor<12544x128xf32>
  %0 = tandem.mat_mul %x, %w : (tensor<1x12544xf32>, tensor<12544x128xf32>) -> tensor<1x128xf32> loc("mm")
  %1 = tandem.relu %0 : (tensor<1x128xf32>) -> tensor<1x128xf32> loc("relu")
  return %1 : tensor<1x128xf32>
}

// -----

// GPU-LABEL: func.func @main
// GPU: tandem.mat_mul {{.*}}device = "cuda:0"
// GPU: tandem.relu
// GPU-NOT: placement_fusion
// GPU-SAME: device = "cpu"
func.func @main(%x: tensor<1x12544xf32>) -> (tensor<1x128xf32>, tensor<1x128xf32>) {
  %w = tandem.constant dense<1.0> : tensor<12544x128xf32>
  %0 = tandem.mat_mul %x, %w : (tensor<1x12544xf32>, tensor<12544x128xf32>) -> tensor<1x128xf32> loc("mm")
  %1 = tandem.relu %0 : (tensor<1x128xf32>) -> tensor<1x128xf32> loc("relu")
  return %0, %1 : tensor<1x128xf32>, tensor<1x128xf32>
}
