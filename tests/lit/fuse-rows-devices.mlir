// RUN: tandem-opt %s --tandem-place="target=cpu,cpu:1 pins=add1=cpu,ln1=cpu:1" --tandem-insert-transfers --tandem-fuse | FileCheck %s
// RUN: tandem-opt %s --tandem-place="target=cpu,cpu:1 pins=add1=cpu,ln1=cpu" --tandem-insert-transfers --tandem-fuse | FileCheck %s --check-prefix=ONE

// The pipeline as compiled: with the LayerNormalization pinned to cpu:1 the residual Add on cpu
// reaches it through a copy, so no add-layernorm group forms and each runs alone. With both on
// cpu they are one add-layernorm kernel.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.fused
// CHECK: %[[S:.*]] = tandem.add %arg0, %arg1 {device = "cpu"
// CHECK: %[[C:.*]] = tandem.copy %[[S]] {device = "cpu:1", from = "cpu"
// CHECK: tandem.layer_normalization %[[C]], %{{.*}} {device = "cpu:1"
// ONE-LABEL: func.func @main
// ONE: tandem.fused "add-layernorm"
// ONE-NEXT: ^bb0
// ONE-NEXT: tandem.add
// ONE-NEXT: tandem.layer_normalization
// ONE-NEXT: tandem.yield
// ONE-NOT: tandem.copy
func.func @main(%x: tensor<2x8xf32> {tandem.name = "x"}, %r: tensor<2x8xf32> {tandem.name = "r"}) -> tensor<2x8xf32> {
  %g = tandem.constant dense<1.0> : tensor<8xf32>
  %s = tandem.add %x, %r : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> loc("add1")
  %n = tandem.layer_normalization %s, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc("ln1")
  return %n : tensor<2x8xf32>
}
