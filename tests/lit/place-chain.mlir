// RUN: tandem-opt %s -verify-diagnostics --tandem-place="target=cpu,cuda:0=h100" --tandem-insert-transfers | FileCheck %s

// An op without a CUDA kernel inside a GPU chain: f64 Abs has no CUDA kernel (f64 on the GPU is
// data movement and casts only: runtime/cuda/CudaKernelTable.h), so it goes to the CPU between
// two 2-GFLOP matmuls that the cost model sends to cuda:0. The casts either side stay on the GPU
// (moving 8 MB costs less than a CPU cast of 1M elements). Exactly the copies it needs: one down
// (D2H), one up (H2D), plus the graph inputs and the output at the run boundary; each input is
// copied once although %b has two readers.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[B:.*]] = tandem.copy %arg1 {{.*}}from = "cpu", {{.*}}to = "cuda:0"
// CHECK-NEXT: %[[A:.*]] = tandem.copy %arg0 {{.*}}from = "cpu", {{.*}}to = "cuda:0"
// CHECK-NEXT: tandem.mat_mul %[[A]], %[[B]] {device = "cuda:0"
// CHECK-NEXT: tandem.cast {{.*}}device = "cuda:0"
// CHECK-NEXT: tandem.copy {{.*}}from = "cuda:0", {{.*}}to = "cpu"
// CHECK-NEXT: tandem.abs {{.*}}device = "cpu", placement_candidates = ["cpu"]{{.*}}placement_reason = "only-kernel"
// CHECK-NEXT: tandem.copy {{.*}}from = "cpu", {{.*}}to = "cuda:0"
// CHECK-NEXT: tandem.cast {{.*}}device = "cuda:0"
// CHECK-NEXT: tandem.mat_mul {{.*}}, %[[B]] {device = "cuda:0"
// CHECK-NEXT: %[[OUT:.*]] = tandem.copy {{.*}}from = "cuda:0", {{.*}}to = "cpu"
// CHECK-NEXT: return %[[OUT]]
func.func @main(%a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %0 = tandem.mat_mul %a, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("mm1")
  %1 = tandem.cast %0 {to = 11 : i64} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf64> loc("to_f64")
  %2 = tandem.abs %1 : (tensor<1024x1024xf64>) -> tensor<1024x1024xf64> loc("abs_f64")
  %3 = tandem.cast %2 {to = 1 : i64} : (tensor<1024x1024xf64>) -> tensor<1024x1024xf32> loc("to_f32")
  %4 = tandem.mat_mul %3, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32> loc("mm2")
  return %4 : tensor<1024x1024xf32>
}
