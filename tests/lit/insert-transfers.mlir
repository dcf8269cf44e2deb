// RUN: tandem-opt %s -split-input-file --tandem-insert-transfers | FileCheck %s

// One copy per (value, device): two consumers on cpu:1 share one copy, inserted right after
// the producer; the consumer on the producer's device reads the original; a third device gets
// its own copy. Graph outputs are read on the host (where the inputs arrive): each output made
// on another device is copied back once, right after its producer.
// CHECK-LABEL: func.func @main
// CHECK: %[[R:.*]] = tandem.relu %arg0 {device = "cpu"}
// CHECK-NEXT: %[[C1:.*]] = tandem.copy %[[R]] {device = "cpu:1", from = "cpu", placement_reason = "transfer", to = "cpu:1"} : tensor<4xf32>
// CHECK-NEXT: %[[C2:.*]] = tandem.copy %[[R]] {device = "cpu:2", from = "cpu", placement_reason = "transfer", to = "cpu:2"} : tensor<4xf32>
// CHECK-NEXT: %[[N:.*]] = tandem.neg %[[C1]] {device = "cpu:1"}
// CHECK-NEXT: %[[NB:.*]] = tandem.copy %[[N]] {device = "cpu", from = "cpu:1", placement_reason = "transfer", to = "cpu"}
// CHECK-NEXT: %[[A:.*]] = tandem.abs %[[R]] {device = "cpu"}
// CHECK-NEXT: %[[E:.*]] = tandem.exp %[[C1]] {device = "cpu:1"}
// CHECK-NEXT: %[[EB:.*]] = tandem.copy %[[E]] {device = "cpu", from = "cpu:1", placement_reason = "transfer", to = "cpu"}
// CHECK-NEXT: %[[S:.*]] = tandem.sigmoid %[[C2]] {device = "cpu:2"}
// CHECK-NEXT: %[[SB:.*]] = tandem.copy %[[S]] {device = "cpu", from = "cpu:2", placement_reason = "transfer", to = "cpu"}
// CHECK-NEXT: return %[[NB]], %[[A]], %[[EB]], %[[SB]]
func.func @main(%x: tensor<4xf32> {tandem.device = "cpu"}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = tandem.relu %x {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = tandem.neg %0 {device = "cpu:1"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = tandem.abs %0 {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = tandem.exp %0 {device = "cpu:1"} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = tandem.sigmoid %0 {device = "cpu:2"} : (tensor<4xf32>) -> tensor<4xf32>
  return %1, %2, %3, %4 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A graph input is copied once at the top of the body; a constant read on two devices is
// duplicated (loaded once per device at load time), never copied per run.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[X1:.*]] = tandem.copy %arg0 {device = "cpu:1", from = "cpu", placement_reason = "transfer", to = "cpu:1"}
// CHECK-NEXT: %[[W:.*]] = tandem.constant {device = "cpu"} dense<2.000000e+00>
// CHECK-NEXT: %[[W1:.*]] = tandem.constant {device = "cpu:1", placement_candidates = ["cpu:1"], placement_reason = "copy-of-constant(cpu)"} dense<2.000000e+00>
// CHECK-NEXT: tandem.add %arg0, %[[W]] {device = "cpu"}
// CHECK-NEXT: %[[M:.*]] = tandem.mul %[[X1]], %[[W1]] {device = "cpu:1"}
// CHECK-NEXT: tandem.copy %[[M]] {device = "cpu", from = "cpu:1", placement_reason = "transfer", to = "cpu"}
// CHECK-NEXT: %[[S:.*]] = tandem.sub %[[X1]], %[[W1]] {device = "cpu:1"}
// CHECK-NEXT: tandem.copy %[[S]] {device = "cpu", from = "cpu:1", placement_reason = "transfer", to = "cpu"}
// CHECK-NOT: tandem.copy
func.func @main(%x: tensor<4xf32> {tandem.device = "cpu"}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %w = tandem.constant {device = "cpu"} dense<2.0> : tensor<4xf32>
  %0 = tandem.add %x, %w {device = "cpu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = tandem.mul %x, %w {device = "cpu:1"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = tandem.sub %x, %w {device = "cpu:1"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// One device: nothing to move.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.copy
// CHECK: return
func.func @main(%x: tensor<4xf32> {tandem.device = "cpu"}) -> tensor<4xf32> {
  %0 = tandem.relu %x {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = tandem.neg %0 {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
