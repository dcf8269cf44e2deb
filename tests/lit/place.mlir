// RUN: tandem-opt %s -verify-diagnostics --tandem-place="target=cpu" | FileCheck %s
// RUN: tandem-opt %s -verify-diagnostics --tandem-place="devices=cpu,cpu:1 pins=relu1=cpu:1" | FileCheck %s --check-prefix=TWO
// RUN: tandem-opt %s -verify-diagnostics --tandem-place="target=cpu,cuda:0=h100 pins=relu1=cuda:0,neg1=cuda:3" | FileCheck %s --check-prefix=SOFT
// RUN: not tandem-opt %s --tandem-place="target=cpu,cuda:0=h100 pins=neg1=gpu:3 strict=true" 2>&1 | FileCheck %s --check-prefix=STRICT
// RUN: tandem-opt %s -verify-diagnostics --tandem-place="target=cpu,cuda:0=h100" | FileCheck %s --check-prefix=GPU
// RUN: tandem-opt %s -verify-diagnostics --tandem-place="target=cpu,cuda:0=h100 policy=greedy" | FileCheck %s --check-prefix=GREEDY

// One target: every op has one feasible device. Constants go to their first consumer, graph
// inputs arrive on the host. Each op records its candidates' estimated times.
// CHECK: module attributes {{{.*}}tandem.devices = ["cpu"], tandem.placement_estimates = {cost = {makespan_s = {{.*}}}, tandem.placement_policy = "cost"}
// CHECK-LABEL: func.func @main
// CHECK-SAME: tandem.device = "cpu"
// CHECK: tandem.constant {device = "cpu", placement_candidates = ["cpu"], placement_reason = "colocated(add1)"}
// CHECK: tandem.add {{.*}} {device = "cpu", placement_candidates = ["cpu"], placement_costs = {cpu = {{.*}} : f64}, placement_fusion = {devices = ["cpu"], into = "relu1"}, placement_reason = "only-kernel"}
// CHECK: tandem.relu {{.*}} {device = "cpu", {{.*}}placement_reason = "only-kernel"}
// CHECK: tandem.neg {{.*}} {device = "cpu", {{.*}}placement_reason = "only-kernel"}
// A `device` attribute already on an op (GraphBuilder's device scope) is a pin, here to a
// device that is not a target.
// CHECK: tandem.exp {{.*}} {device = "cpu", {{.*}}placement_reason = "fallback(cpu:1 is not a target)"}

// Two CPU targets: pins are honoured, and neg1, between two ops pinned to cpu:1, joins them by
// cost (placing it on cpu would need two copies).
// TWO-LABEL: func.func @main
// TWO: tandem.add {{.*}} {device = "{{cpu|cpu:1}}", placement_candidates = ["cpu", "cpu:1"], {{.*}}placement_reason = "cost"}
// TWO: tandem.relu {{.*}} {device = "cpu:1", placement_candidates = ["cpu", "cpu:1"], {{.*}}placement_reason = "pinned"}
// TWO: tandem.neg {{.*}} {device = "cpu:1", placement_candidates = ["cpu", "cpu:1"], {{.*}}placement_reason = "cost"}
// TWO: tandem.exp {{.*}} {device = "cpu:1", placement_candidates = ["cpu", "cpu:1"], {{.*}}placement_reason = "pinned"}

// Soft placement on a CPU + H100 target (the CUDA capability table answers for the GPU): a
// satisfiable pin holds, pins to devices that are not targets fall back and say why. The
// element-wise chain fuses on either device (cpu- and cudaFusesIntoProducer), so with the Relu
// pinned to cuda:0 the whole chain joins it there: one copy in and one out, as with the Add
// alone on the CPU, but one fused kernel.
// SOFT-LABEL: func.func @main
// SOFT: tandem.add {{.*}} {device = "cuda:0", placement_candidates = ["cpu", "cuda:0"], {{.*}}placement_fusion = {devices = ["cpu", "cuda:0"], into = "relu1"}, placement_reason = "cost"}
// SOFT: tandem.relu {{.*}} {device = "cuda:0", placement_candidates = ["cpu", "cuda:0"], {{.*}}placement_fusion = {devices = ["cpu", "cuda:0"], into = "neg1"}, placement_reason = "pinned"}
// SOFT: tandem.neg {{.*}} {device = "cuda:0", {{.*}}placement_fusion = {devices = ["cpu", "cuda:0"], into = "exp1"}, placement_reason = "fallback(cuda:3 is not a target)"}
// SOFT: tandem.exp {{.*}} {device = "cuda:0", {{.*}}placement_reason = "fallback(cpu:1 is not a target)"}

// Strict placement: the same kind of pin is an error on the op, naming the pin and the reason.
// STRICT: error: loc("neg1"): tandem-place: op 'neg1' (Neg) is pinned to cuda:3 (strict placement), but cuda:3 is not a target

// Tiny ops next to host-resident data stay on the CPU: a GPU launch costs more than they do.
// GPU-LABEL: func.func @main
// GPU: tandem.add {{.*}} {device = "cpu", {{.*}}placement_reason = "cost"}
// GPU: tandem.relu {{.*}} {device = "cpu", {{.*}}placement_reason = "cost"}
// GPU: tandem.neg {{.*}} {device = "cpu", {{.*}}placement_reason = "cost"}

// The TensorFlow baseline puts every op with a GPU kernel on the GPU, whatever it costs.
// GREEDY-LABEL: func.func @main
// GREEDY: tandem.add {{.*}} {device = "cuda:0", {{.*}}placement_reason = "policy(greedy)"}
// GREEDY: tandem.relu {{.*}} {device = "cuda:0", {{.*}}placement_reason = "{{.*}}"}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = tandem.constant dense<1.0> : tensor<4xf32> loc("w")
  %0 = tandem.add %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("add1")
  %1 = tandem.relu %0 : (tensor<4xf32>) -> tensor<4xf32> loc("relu1")
  %2 = tandem.neg %1 : (tensor<4xf32>) -> tensor<4xf32> loc("neg1")
  %3 = tandem.exp %2 {device = "cpu:1"} : (tensor<4xf32>) -> tensor<4xf32> loc("exp1")
  return %3 : tensor<4xf32>
}

