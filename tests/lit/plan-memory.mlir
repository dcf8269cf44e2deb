// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-plan-memory | FileCheck %s

// An element-wise chain runs in place: each op is its operand's last reader, so relu, neg and
// exp all overwrite x's slot and the arena is one slot of 64 bytes instead of 4 (12-byte
// tensors round up to 64).
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 64 : i64}, tandem.arena_unplanned_bytes = {cpu = 256 : i64}}
// CHECK-LABEL: func.func @main
// CHECK-SAME: tandem.arena_offset = 0 : i64
// CHECK-NEXT: tandem.relu %arg0 {arena_offset = [0], device = "cpu"}
// CHECK-NEXT: tandem.neg %{{.*}} {arena_offset = [0], device = "cpu"}
// CHECK-NEXT: tandem.exp %{{.*}} {arena_offset = [0], device = "cpu"}
func.func @main(%x: tensor<3xf32> {tandem.device = "cpu"}) -> tensor<3xf32> {
  %0 = tandem.relu %x {device = "cpu"} : (tensor<3xf32>) -> tensor<3xf32>
  %1 = tandem.neg %0 {device = "cpu"} : (tensor<3xf32>) -> tensor<3xf32>
  %2 = tandem.exp %1 {device = "cpu"} : (tensor<3xf32>) -> tensor<3xf32>
  return %2 : tensor<3xf32>
}

// -----

// No in-place reuse without liveness reuse: transposes (not element-wise) ping-pong between two
// slots (x and %1 at 0, %0 and %2 at 64), 2 slots of 64 bytes instead of 4.
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 128 : i64}, tandem.arena_unplanned_bytes = {cpu = 256 : i64}}
// CHECK-LABEL: func.func @main
// CHECK-SAME: tandem.arena_offset = 0 : i64
// CHECK-NEXT: tandem.transpose %arg0 {arena_offset = [64], device = "cpu"}
// CHECK-NEXT: tandem.transpose %{{.*}} {arena_offset = [0], device = "cpu"}
// CHECK-NEXT: tandem.transpose %{{.*}} {arena_offset = [64], device = "cpu"}
func.func @main(%x: tensor<1x3xf32> {tandem.device = "cpu"}) -> tensor<3x1xf32> {
  %0 = tandem.transpose %x {device = "cpu"} : (tensor<1x3xf32>) -> tensor<3x1xf32>
  %1 = tandem.transpose %0 {device = "cpu"} : (tensor<3x1xf32>) -> tensor<1x3xf32>
  %2 = tandem.transpose %1 {device = "cpu"} : (tensor<1x3xf32>) -> tensor<3x1xf32>
  return %2 : tensor<3x1xf32>
}

// -----

// In place only where it is safe: Add overwrites operand 0 (x, last read here); the sub's
// operand 0 (%0) is read again by the mul, so the sub gets a new slot; the fused element-wise
// loop overwrites its operand (%1, last read there); the mul overwrites %0 at last.
// Op indices: constant 0, add 1, sub 2, fused 3, mul 4, return 5.
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 128 : i64}, tandem.arena_unplanned_bytes = {cpu = 320 : i64}}
// CHECK-LABEL: func.func @main
// CHECK-SAME: tandem.arena_offset = 0 : i64
// CHECK: tandem.add %arg0, %{{.*}} {arena_offset = [0], device = "cpu"}
// CHECK-NEXT: tandem.sub %{{.*}}, %{{.*}} {arena_offset = [64], device = "cpu"}
// CHECK-NEXT: tandem.fused "elementwise"(%{{.*}}) {arena_offset = [64], device = "cpu"}
// CHECK: tandem.mul %{{.*}}, %{{.*}} {arena_offset = [0], device = "cpu"}
func.func @main(%x: tensor<16xf32> {tandem.device = "cpu"}) -> tensor<16xf32> {
  %c = tandem.constant {device = "cpu"} dense<1.0> : tensor<f32>
  %0 = tandem.add %x, %c {device = "cpu"} : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %1 = tandem.sub %0, %c {device = "cpu"} : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %2 = tandem.fused "elementwise"(%1) {device = "cpu"} : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %e = tandem.exp %a : (tensor<16xf32>) -> tensor<16xf32>
    %n = tandem.neg %e : (tensor<16xf32>) -> tensor<16xf32>
    tandem.yield %n : tensor<16xf32>
  }
  %3 = tandem.mul %0, %2 {device = "cpu"} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %3 : tensor<16xf32>
}

// -----

// Graph outputs live to the end (%0 keeps its slot); the larger value is placed first. relu is
// not in place (x is read again by reduce_sum); exp overwrites %1, its last reader. Constants
// take no arena space. Op indices: constant 0, relu 1, reduce_sum 2, exp 3, return 4.
// x: 256 B [-1, 2], %0: 256 B [1, 4], %1 and %2 (one slot): 64 B [2, 4].
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 576 : i64}, tandem.arena_unplanned_bytes = {cpu = 640 : i64}}
// CHECK-LABEL: func.func @main
// CHECK-SAME: tandem.arena_offset = 0 : i64
// CHECK-NEXT: tandem.constant
// CHECK-NOT: arena_offset
// CHECK-NEXT: tandem.relu %arg0 {arena_offset = [256], device = "cpu"}
// CHECK-NEXT: tandem.reduce_sum %arg0, %{{.*}} {arena_offset = [512], device = "cpu"}
// CHECK-NEXT: tandem.exp %{{.*}} {arena_offset = [512], device = "cpu"}
func.func @main(%x: tensor<4x16xf32> {tandem.device = "cpu"}) -> (tensor<4x16xf32>, tensor<4x1xf32>) {
  %axes = tandem.constant {device = "cpu"} dense<1> : tensor<1xi64>
  %0 = tandem.relu %x {device = "cpu"} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = tandem.reduce_sum %x, %axes {device = "cpu"} : (tensor<4x16xf32>, tensor<1xi64>) -> tensor<4x1xf32>
  %2 = tandem.exp %1 {device = "cpu"} : (tensor<4x1xf32>) -> tensor<4x1xf32>
  return %0, %2 : tensor<4x16xf32>, tensor<4x1xf32>
}

// -----

// One arena per device: a copy's result lives on its destination; in-place reuse stays within
// a device (relu over x on cpu, neg over the copy on cpu:1; the copy itself never aliases).
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 64 : i64, "cpu:1" = 64 : i64}, tandem.arena_unplanned_bytes = {cpu = 128 : i64, "cpu:1" = 128 : i64}}
// CHECK-LABEL: func.func @main
// CHECK-NEXT: tandem.relu %arg0 {arena_offset = [0], device = "cpu"}
// CHECK-NEXT: tandem.copy %{{.*}} {arena_offset = [0], device = "cpu:1"
// CHECK-NEXT: tandem.neg %{{.*}} {arena_offset = [0], device = "cpu:1"}
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

// -----

// A conv epilogue's output takes its residual's slot (oneDNN's sum reads it there), but not
// when the convolution also reads that value (conv(x) + x): a conv must not overwrite its own
// source while reading it.
// x, r: 64-byte slots at 0 and 64; the first epilogue writes r's slot (64); the second may not
// write its own source's slot (64 again) and takes x's, dead by then (0).
// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg1: tensor<1x2x2x2xf32> {tandem.arena_offset = 64 : i64
// CHECK: %[[F:.*]] = tandem.fused "conv-epilogue"(%arg0, %{{.*}}, %arg1) {arena_offset = [64]
// CHECK: tandem.fused "conv-epilogue"(%[[F]], %{{.*}}) {arena_offset = [0]
func.func @main(%x: tensor<1x2x2x2xf32> {tandem.device = "cpu"}, %r: tensor<1x2x2x2xf32> {tandem.device = "cpu"}) -> tensor<1x2x2x2xf32> {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<2x2x1x1xf32>
  %0 = tandem.fused "conv-epilogue"(%x, %w, %r) {device = "cpu"} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  ^bb0(%a: tensor<1x2x2x2xf32>, %b: tensor<2x2x1x1xf32>, %c: tensor<1x2x2x2xf32>):
    %1 = tandem.conv %a, %b : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
    %2 = tandem.add %1, %c : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    tandem.yield %2 : tensor<1x2x2x2xf32>
  }
  %3 = tandem.fused "conv-epilogue"(%0, %w) {device = "cpu"} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32> {
  ^bb0(%a: tensor<1x2x2x2xf32>, %b: tensor<2x2x1x1xf32>):
    %1 = tandem.conv %a, %b : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
    %2 = tandem.add %1, %a : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    tandem.yield %2 : tensor<1x2x2x2xf32>
  }
  return %3 : tensor<1x2x2x2xf32>
}

// -----

// ... and only when the residual is stored in the layout the epilogue writes: a blocked output
// over a plain residual would be the residual reordered onto its own bytes (found on LR-ASPP's
// MobileNetV3 blocks: the HardSwish loop's plain output as the residual of a 1x1 conv writing
// blocked for the next conv). The plain Relu result keeps its slot (64); the epilogue takes a
// new one (128).
// CHECK-LABEL: func.func @main
// CHECK: %[[P:.*]] = tandem.relu %arg0 {arena_offset = [64]
// CHECK: tandem.fused "conv-epilogue"(%arg0, %{{.*}}, %[[P]]) {arena_offset = [128]
func.func @main(%x: tensor<1x2x2x2xf32> {tandem.device = "cpu"}) -> tensor<1x2x2x2xf32> {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<2x2x1x1xf32>
  %p = tandem.relu %x {device = "cpu"} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %0 = tandem.fused "conv-epilogue"(%x, %w, %p) {device = "cpu", result_layouts = ["blocked"]} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  ^bb0(%a: tensor<1x2x2x2xf32>, %b: tensor<2x2x1x1xf32>, %c: tensor<1x2x2x2xf32>):
    %1 = tandem.conv %a, %b : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
    %2 = tandem.add %1, %c : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    tandem.yield %2 : tensor<1x2x2x2xf32>
  }
  %3 = tandem.conv %0, %w {device = "cpu"} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  return %3 : tensor<1x2x2x2xf32>
}

// -----

// The same with a blocked residual (a conv's blocked result): same layout, so shared (64).
// CHECK-LABEL: func.func @main
// CHECK: %[[P:.*]] = tandem.conv %arg0, %{{.*}} {arena_offset = [64]
// CHECK: tandem.fused "conv-epilogue"(%arg0, %{{.*}}, %[[P]]) {arena_offset = [64]
func.func @main(%x: tensor<1x2x2x2xf32> {tandem.device = "cpu"}) -> tensor<1x2x2x2xf32> {
  %w = tandem.constant {device = "cpu"} dense<1.0> : tensor<2x2x1x1xf32>
  %p = tandem.conv %x, %w {device = "cpu", result_layouts = ["blocked"]} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  %0 = tandem.fused "conv-epilogue"(%x, %w, %p) {device = "cpu", result_layouts = ["blocked"]} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  ^bb0(%a: tensor<1x2x2x2xf32>, %b: tensor<2x2x1x1xf32>, %c: tensor<1x2x2x2xf32>):
    %1 = tandem.conv %a, %b : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
    %2 = tandem.add %1, %c : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    tandem.yield %2 : tensor<1x2x2x2xf32>
  }
  %3 = tandem.conv %0, %w {device = "cpu"} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  return %3 : tensor<1x2x2x2xf32>
}

// -----

// Flatten keeps the row-major bytes: it shares the Relu's slot (its last reader) and its copy
// vanishes; one slot instead of two. A Flatten whose input is read again later gets its own.
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 128 : i64}
// CHECK-LABEL: func.func @main
// CHECK-NEXT: tandem.relu %arg0 {arena_offset = [0], device = "cpu"}
// CHECK-NEXT: tandem.flatten %{{.*}} {arena_offset = [0], axis = 1 : i64, device = "cpu"}
// CHECK-NEXT: tandem.flatten %{{.*}} {arena_offset = [64], axis = 1 : i64, device = "cpu"}
func.func @main(%x: tensor<1x2x2xf32> {tandem.device = "cpu"}) -> (tensor<1x4xf32>, tensor<1x4xf32>) {
  %0 = tandem.relu %x {device = "cpu"} : (tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  %1 = tandem.flatten %0 {axis = 1 : i64, device = "cpu"} : (tensor<1x2x2xf32>) -> tensor<1x4xf32>
  %2 = tandem.flatten %1 {axis = 1 : i64, device = "cpu"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
  return %1, %2 : tensor<1x4xf32>, tensor<1x4xf32>
}

// -----

// On CUDA a gemm-epilogue's Add is a bias row that cuBLASLt reads while it writes the output:
// the output never takes the bias's slot (64), although it is the bias's last reader with the
// same element count; x (0) is the product's source, so the output takes a new slot.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg1: tensor<16xf32> {tandem.arena_offset = 64 : i64
// CHECK: tandem.fused "gemm-epilogue"(%arg0, %{{.*}}, %arg1) {arena_offset = [128]
func.func @main(%x: tensor<1x16xf32> {tandem.device = "cuda:0"}, %b: tensor<16xf32> {tandem.device = "cuda:0"}) -> tensor<1x16xf32> {
  %w = tandem.constant {device = "cuda:0"} dense<1.0> : tensor<16x16xf32>
  %0 = tandem.fused "gemm-epilogue"(%x, %w, %b) {device = "cuda:0"} : (tensor<1x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<1x16xf32> {
  ^bb0(%a: tensor<1x16xf32>, %m: tensor<16x16xf32>, %c: tensor<16xf32>):
    %1 = tandem.gemm %a, %m : (tensor<1x16xf32>, tensor<16x16xf32>) -> tensor<1x16xf32>
    %2 = tandem.add %1, %c : (tensor<1x16xf32>, tensor<16xf32>) -> tensor<1x16xf32>
    tandem.yield %2 : tensor<1x16xf32>
  }
  return %0 : tensor<1x16xf32>
}

// -----

// A variable's update written into the variable (training): w's update, the sub, reads w at
// the index it writes (operand 0 of an element-wise op) and runs after w's other reader, the
// mul, so it gets no arena slot (offset 0, not counted) and its result is marked in place.
// The arena holds g and %0 only: 2 slots of 64 bytes.
// CHECK: module attributes {tandem.arena_peak_bytes = {cpu = 128 : i64}, tandem.arena_unplanned_bytes = {cpu = 128 : i64}}
// CHECK-LABEL: func.func @main
// CHECK-SAME: tandem.variable_in_place, tandem.variable_update = "w"
// CHECK: tandem.mul %arg0, %arg1 {arena_offset = [{{[0-9]+}}], device = "cpu"}
// CHECK-NEXT: tandem.sub %arg0, %{{.*}} {arena_offset = [0], device = "cpu"}
func.func @main(%w: tensor<4xf32> {tandem.device = "cpu", tandem.name = "w", tandem.variable = dense<1.0> : tensor<4xf32>},
                %g: tensor<4xf32> {tandem.device = "cpu", tandem.name = "g"})
    -> (tensor<4xf32> {tandem.name = "p"}, tensor<4xf32> {tandem.name = "w_new", tandem.variable_update = "w"}) {
  %0 = tandem.mul %w, %g {device = "cpu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = tandem.sub %w, %0 {device = "cpu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Not in place when w is read after its update is computed: the mul after the sub must see
// the old w, so the update keeps an arena slot of its own and is copied back after the run.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.variable_in_place
// CHECK: tandem.sub %arg0, %arg1 {arena_offset = [{{[0-9]+}}], device = "cpu"}
// CHECK-NEXT: tandem.mul %arg0, %arg1
func.func @main(%w: tensor<4xf32> {tandem.device = "cpu", tandem.name = "w", tandem.variable = dense<1.0> : tensor<4xf32>},
                %g: tensor<4xf32> {tandem.device = "cpu", tandem.name = "g"})
    -> (tensor<4xf32> {tandem.name = "p"}, tensor<4xf32> {tandem.name = "w_new", tandem.variable_update = "w"}) {
  %0 = tandem.sub %w, %g {device = "cpu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = tandem.mul %w, %g {device = "cpu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1, %0 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Not in place when the update's op reads w other than at the index it writes: a transpose
// reads w[j][i] for y[i][j], so writing y over w would corrupt elements not yet read.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tandem.variable_in_place
// CHECK: tandem.transpose %arg0
func.func @main(%w: tensor<2x2xf32> {tandem.device = "cpu", tandem.name = "w", tandem.variable = dense<1.0> : tensor<2x2xf32>})
    -> (tensor<2x2xf32> {tandem.name = "w_new", tandem.variable_update = "w"}) {
  %0 = tandem.transpose %w {device = "cpu"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}
