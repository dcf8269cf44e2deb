// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-plan-memory | FileCheck %s

// A chain: values whose lifetimes do not overlap share offsets (x and %1 at 0, %0 and %2 at 64),
// so the arena peaks at 2 slots of 64 bytes instead of 4 (12-byte tensors round up to 64).
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 128 : i64}, tandem.arena_unplanned_bytes = {cpu = 256 : i64}}
// CHECK-LABEL: func.func @main
// CHECK-SAME: tandem.arena_offset = 0 : i64
// CHECK-NEXT: tandem.relu %arg0 {arena_offset = [64], device = "cpu"}
// CHECK-NEXT: tandem.neg %{{.*}} {arena_offset = [0], device = "cpu"}
// CHECK-NEXT: tandem.exp %{{.*}} {arena_offset = [64], device = "cpu"}
func.func @main(%x: tensor<3xf32> {tandem.device = "cpu"}) -> tensor<3xf32> {
  %0 = tandem.relu %x {device = "cpu"} : (tensor<3xf32>) -> tensor<3xf32>
  %1 = tandem.neg %0 {device = "cpu"} : (tensor<3xf32>) -> tensor<3xf32>
  %2 = tandem.exp %1 {device = "cpu"} : (tensor<3xf32>) -> tensor<3xf32>
  return %2 : tensor<3xf32>
}

// -----

// Graph outputs live to the end (%0 keeps its slot); the larger value is placed first and the
// small ones reuse the input's slot once it is dead. Constants take no arena space.
// Op indices: constant 0, relu 1, reduce_sum 2, exp 3, return 4.
// x: 256 B [-1, 2], %0: 256 B [1, 4], %1: 64 B [2, 3], %2: 64 B [3, 4].
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 576 : i64}, tandem.arena_unplanned_bytes = {cpu = 640 : i64}}
// CHECK-LABEL: func.func @main
// CHECK-SAME: tandem.arena_offset = 0 : i64
// CHECK-NEXT: tandem.constant
// CHECK-NOT: arena_offset
// CHECK-NEXT: tandem.relu %arg0 {arena_offset = [256], device = "cpu"}
// CHECK-NEXT: tandem.reduce_sum %arg0, %{{.*}} {arena_offset = [512], device = "cpu"}
// CHECK-NEXT: tandem.exp %{{.*}} {arena_offset = [0], device = "cpu"}
func.func @main(%x: tensor<4x16xf32> {tandem.device = "cpu"}) -> (tensor<4x16xf32>, tensor<4x1xf32>) {
  %axes = tandem.constant {device = "cpu"} dense<1> : tensor<1xi64>
  %0 = tandem.relu %x {device = "cpu"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = tandem.reduce_sum %x, %axes {device = "cpu"} : (tensor<4x16xf32>, tensor<1xi64>) -> tensor<4x1xf32>
  %2 = tandem.exp %1 {device = "cpu"} : (tensor<4x1xf32>) -> tensor<4x1xf32>
  return %0, %2 : tensor<4x16xf32>, tensor<4x1xf32>
}

// -----

// One arena per device: a copy's result lives on its destination.
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 128 : i64, "cpu:1" = 128 : i64}, tandem.arena_unplanned_bytes = {cpu = 128 : i64, "cpu:1" = 128 : i64}}
// CHECK-LABEL: func.func @main
// CHECK-NEXT: tandem.relu %arg0 {arena_offset = [64], device = "cpu"}
// CHECK-NEXT: tandem.copy %{{.*}} {arena_offset = [0], device = "cpu:1"
// CHECK-NEXT: tandem.neg %{{.*}} {arena_offset = [64], device = "cpu:1"}
func.func @main(%x: tensor<3xf32> {tandem.device = "cpu"}) -> tensor<3xf32> {
  %0 = tandem.relu %x {device = "cpu"} : (tensor<3xf32>) -> tensor<3xf32>
  %1 = tandem.copy %0 {device = "cpu:1", from = "cpu", to = "cpu:1"} : tensor<3xf32>
  %2 = tandem.neg %1 {device = "cpu:1"} : (tensor<3xf32>) -> tensor<3xf32>
  return %2 : tensor<3xf32>
}

// -----

// expected-error @below {{tandem-plan-memory: value 'x' has type 'tensor<?x3xf32>'; memory planning needs static shapes (bind the symbolic dims)}}
func.func @main(%x: tensor<?x3xf32> {tandem.device = "cpu", tandem.name = "x"}) -> tensor<?x3xf32> {
  %0 = tandem.relu %x {device = "cpu"} : (tensor<?x3xf32>) -> tensor<?x3xf32> loc("relu1")
  return %0 : tensor<?x3xf32>
}
