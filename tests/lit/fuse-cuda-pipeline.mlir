// RUN: tandem-opt %s --tandem-place="target=cpu,cuda:0=h100 pins=mm1=cuda:0,bias1=cuda:0,relu1=cuda:0" | FileCheck %s --check-prefix=PLACE
// RUN: tandem-opt %s --tandem-place="target=cpu,cuda:0=h100 pins=mm1=cuda:0,bias1=cuda:0,relu1=cuda:0" --tandem-insert-transfers --tandem-fuse | FileCheck %s
// RUN: tandem-opt %s --tandem-place="target=cpu,cuda:0=h100 pins=mm1=cuda:0,bias1=cuda:0,relu1=cpu" --tandem-insert-transfers --tandem-fuse | FileCheck %s --check-prefix=CUT

// The pipeline as compiled for a CPU and an H100. The placer prices the MatMul's bias Add and
// the Relu after it as fused on either device (cudaFusesIntoProducer: one cuBLASLt RELU_BIAS
// epilogue; cpuFusesIntoProducer: oneDNN's matmul bias and an eltwise post-op).
// PLACE-LABEL: func.func @main
// PLACE: tandem.add {{.*}}device = "cuda:0", {{.*}}placement_fusion = {devices = ["cpu", "cuda:0"], into = "mm1"}
// PLACE: tandem.relu {{.*}}device = "cuda:0", {{.*}}placement_fusion = {devices = ["cpu", "cuda:0"], into = "bias1"}

// All three on cuda:0: one gemm-epilogue (RELU_BIAS) between the copies of x in and y out.
// CHECK-LABEL: func.func @main
// CHECK: tandem.copy %arg0 {device = "cuda:0", from = "cpu"
// CHECK: %[[F:.*]] = tandem.fused "gemm-epilogue"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tandem.mat_mul
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.relu
// CHECK-NEXT: tandem.yield
// CHECK: tandem.copy %[[F]] {device = "cpu", from = "cuda:0"

// The Relu pinned to the CPU: the copy cuts the chain, the epilogue keeps only the bias and the
// Relu runs alone on the CPU, reading the copy.
// CUT-LABEL: func.func @main
// CUT: %[[F:.*]] = tandem.fused "gemm-epilogue"
// CUT-NEXT: ^bb0
// CUT-NEXT: tandem.mat_mul
// CUT-NEXT: tandem.add
// CUT-NEXT: tandem.yield
// CUT: %[[C:.*]] = tandem.copy %[[F]] {device = "cpu", from = "cuda:0"
// CUT-NEXT: tandem.relu %[[C]] {device = "cpu"
func.func @main(%x: tensor<64x256xf32> {tandem.name = "x"}) -> tensor<64x128xf32> {
  %w = tandem.constant dense<0.01> : tensor<256x128xf32>
  %b = tandem.constant dense<0.5> : tensor<128xf32>
  %m = tandem.mat_mul %x, %w : (tensor<64x256xf32>, tensor<256x128xf32>) -> tensor<64x128xf32> loc("mm1")
  %s = tandem.add %m, %b : (tensor<64x128xf32>, tensor<128xf32>) -> tensor<64x128xf32> loc("bias1")
  %y = tandem.relu %s : (tensor<64x128xf32>) -> tensor<64x128xf32> loc("relu1")
  return %y : tensor<64x128xf32>
}
