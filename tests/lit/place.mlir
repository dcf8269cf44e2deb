// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-place | FileCheck %s
// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-place="devices=cpu,cpu:1 pins=relu1=cpu:1" | FileCheck %s --check-prefix=TWO
// RUN: tandem-opt %s -split-input-file -verify-diagnostics --tandem-place="devices=cpu,cuda:0 pins=relu1=cuda:0,neg1=cuda:3" | FileCheck %s --check-prefix=SOFT
// RUN: not tandem-opt %s -split-input-file --tandem-place="devices=cpu,cuda:0 pins=relu1=gpu:0 strict=true" 2>&1 | FileCheck %s --check-prefix=STRICT

// One target: every op has one feasible device. Constants and inputs go to their first consumer.
// CHECK: module attributes {tandem.devices = ["cpu"]}
// CHECK-LABEL: func.func @main
// CHECK-SAME: tandem.device = "cpu"
// CHECK: tandem.constant {device = "cpu", placement_candidates = ["cpu"], placement_reason = "colocated(add1)"}
// CHECK: tandem.add {{.*}} {device = "cpu", placement_candidates = ["cpu"], placement_reason = "only-kernel"}
// CHECK: tandem.relu {{.*}} {device = "cpu", placement_candidates = ["cpu"], placement_reason = "only-kernel"}
// CHECK: tandem.neg {{.*}} {device = "cpu", placement_candidates = ["cpu"], placement_reason = "only-kernel"}
// A `device` attribute already on an op (GraphBuilder's device scope) is a pin, here to a
// device that is not a target.
// CHECK: tandem.exp {{.*}} {device = "cpu", placement_candidates = ["cpu"], placement_reason = "fallback(cpu:1 is not a target)"}

// Two CPU targets: a pin is honoured; unpinned ops had a choice ("cost": first target for now).
// TWO-LABEL: func.func @main
// TWO: tandem.add {{.*}} {device = "cpu", placement_candidates = ["cpu", "cpu:1"], placement_reason = "cost"}
// TWO: tandem.relu {{.*}} {device = "cpu:1", placement_candidates = ["cpu", "cpu:1"], placement_reason = "pinned"}
// TWO: tandem.neg {{.*}} {device = "cpu", placement_candidates = ["cpu", "cpu:1"], placement_reason = "cost"}
// TWO: tandem.exp {{.*}} {device = "cpu:1", placement_candidates = ["cpu", "cpu:1"], placement_reason = "pinned"}

// Soft placement: pins to a device without the kernel, or not targeted, fall back and say why.
// SOFT-LABEL: func.func @main
// SOFT: tandem.add {{.*}} {device = "cpu", placement_candidates = ["cpu"], placement_reason = "only-kernel"}
// SOFT: tandem.relu {{.*}} {device = "cpu", placement_candidates = ["cpu"], placement_reason = "fallback(no kernel for Relu on (f32) on cuda:0)"}
// SOFT: tandem.neg {{.*}} {device = "cpu", placement_candidates = ["cpu"], placement_reason = "fallback(cuda:3 is not a target)"}
// SOFT: tandem.exp {{.*}} {device = "cpu", placement_candidates = ["cpu"], placement_reason = "fallback(cpu:1 is not a target)"}

// Strict placement: the same kind of pin is an error naming the pin and the reason.
// STRICT: error: loc("relu1"): op 'relu1' (Relu) is pinned to gpu:0 but no kernel for Relu on (f32) on cuda:0
// STRICT: error: loc("exp1"): op 'exp1' (Exp) is pinned to cpu:1 but cpu:1 is not a target
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = tandem.constant dense<1.0> : tensor<4xf32> loc("w")
  %0 = tandem.add %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("add1")
  %1 = tandem.relu %0 : (tensor<4xf32>) -> tensor<4xf32> loc("relu1")
  %2 = tandem.neg %1 : (tensor<4xf32>) -> tensor<4xf32> loc("neg1")
  %3 = tandem.exp %2 {device = "cpu:1"} : (tensor<4xf32>) -> tensor<4xf32> loc("exp1")
  return %3 : tensor<4xf32>
}

// -----

// No target has a kernel: an error on the op, naming the dtypes and the targets.
func.func @main(%x: tensor<4xf16>) -> tensor<4xf16> {
  // expected-error @below {{no kernel for Abs on (f16) on any of: cpu}}
  %0 = tandem.abs %x : (tensor<4xf16>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}
