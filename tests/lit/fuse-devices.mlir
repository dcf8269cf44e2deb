// RUN: tandem-opt %s --tandem-place="target=cpu,cpu:1 pins=relu1=cpu:1" --tandem-insert-transfers --tandem-fuse | FileCheck %s
// RUN: tandem-opt %s --tandem-place="target=cpu,cpu:1" --tandem-insert-transfers --tandem-fuse | FileCheck %s --check-prefix=ONE

// The pipeline as compiled: with relu1 pinned to cpu:1 the conv -> add -> relu chain is cut by
// a transfer, so the Conv keeps only the Add (sum) on cpu and the Relu runs alone on cpu:1,
// reading the copy. Without the pin, the whole chain is one conv-epilogue kernel.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = tandem.fused "conv-epilogue"
// CHECK: tandem.conv
// CHECK-NEXT: tandem.add
// CHECK-NEXT: tandem.yield
// CHECK: %[[C:.*]] = tandem.copy %[[F]] {device = "cpu:1", from = "cpu"
// CHECK-NEXT: tandem.relu %[[C]] {device = "cpu:1"
// ONE-LABEL: func.func @main
// ONE: tandem.fused "conv-epilogue"
// ONE: tandem.conv
// ONE-NEXT: tandem.add
// ONE-NEXT: tandem.relu
// ONE-NEXT: tandem.yield
// ONE-NOT: tandem.copy
func.func @main(%x: tensor<1x2x3x3xf32> {tandem.name = "x"}, %r: tensor<1x2x3x3xf32> {tandem.name = "r"}) -> tensor<1x2x3x3xf32> {
  %w = tandem.constant dense<1.0> : tensor<2x2x1x1xf32>
  %c = tandem.conv %x, %w : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x3x3xf32> loc("conv1")
  %s = tandem.add %c, %r : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> loc("add1")
  %y = tandem.relu %s : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> loc("relu1")
  return %y : tensor<1x2x3x3xf32>
}
