// Baseline placement policies kept for comparison (DESIGN §4.5): what TensorFlow, ONNX Runtime
// and the trivial all-cpu / all-gpu plans would do on the same graph and devices.
#include "compiler/placement/PlacerInternal.h"

namespace tandem::placement::detail {
namespace {

DeviceId firstOfKind(const PlacementProblem& p, std::uint64_t mask, const char* kind,
                     bool wantKind = true) {
  for (DeviceId d = 0; d < static_cast<DeviceId>(p.devices.size()); ++d)
    if ((mask >> d & 1) && (p.devices[d].kind == kind) == wantKind) return d;
  return kNone;
}

DeviceId firstFeasible(std::uint64_t mask) {
  for (DeviceId d = 0; d < 64; ++d)
    if (mask >> d & 1) return d;
  return kNone;
}

// The device a policy gives a unconstrained unit that can run on `mask`.
DeviceId choose(const PlacementProblem& p, std::uint64_t mask, PlacementPolicy policy) {
  DeviceId d = kNone;
  switch (policy) {
    case PlacementPolicy::Cpu:
      d = firstOfKind(p, mask, "cpu");
      break;
    case PlacementPolicy::Gpu:
    case PlacementPolicy::Ort:  // execution providers in order: cuda, then cpu
      d = firstOfKind(p, mask, "cuda");
      if (d == kNone) d = firstOfKind(p, mask, "cpu");
      break;
    case PlacementPolicy::Greedy:
      // TensorFlow's placer (core/common_runtime/placer.cc, colocation_graph.cc) ranks the
      // devices that have a kernel by device-type priority, GPU above CPU, and takes the first:
      // no cost model.
      d = firstOfKind(p, mask, "cpu", /*wantKind=*/false);
      if (d == kNone) d = firstOfKind(p, mask, "cpu");
      break;
    case PlacementPolicy::Cost:
      break;
  }
  return d == kNone ? firstFeasible(mask) : d;
}

}  // namespace

void placeBaseline(const PlacementProblem& p, const Constraints& c, const UnitGraph& g,
                   PlacementPolicy policy, const std::vector<OpId>& topo,
                   std::vector<DeviceId>& device, std::vector<std::string>& reason) {
  const int n = static_cast<int>(p.ops.size());
  const int D = static_cast<int>(p.devices.size());
  const std::string tag = std::string("policy(") + policyName(policy) + ")";
  std::vector<DeviceId> unitDevice(c.numUnits);
  for (int u = 0; u < c.numUnits; ++u)
    unitDevice[u] = c.fixedDevice[u] != kNone ? c.fixedDevice[u]
                                              : choose(p, c.feasibleMask[u], policy);
  device.assign(n, kNone);
  reason = c.reason;
  for (OpId i = 0; i < n; ++i) {
    device[i] = unitDevice[c.unitOf[i]];
    if (!reason[i].empty()) continue;
    int feasible = 0;
    for (DeviceId d = 0; d < D; ++d) feasible += p.ops[i].feasible(d);
    reason[i] = feasible == 1 ? "only-kernel" : tag;
  }
  if (policy != PlacementPolicy::Ort) return;

  // ONNX Runtime's CPU fallback, GetCpuPreferredNodes (onnxruntime/core/framework/
  // fallback_cpu_capability.cc): starting from tensors that live in CPU memory -- outputs of
  // nodes that run on the CPU EP, and outputs the CUDA EP keeps on the host (Shape, Size) --
  // visit their consumers in topological order; a node tentatively on the GPU moves to the CPU
  // when every input is such a CPU tensor, a graph input, or a small initializer (at most
  // kSmallInitializerThreshold = 100 elements), and its outputs become CPU tensors in turn. This
  // pulls shape computations back to the host. Not modelled: the float16/bfloat16 exclusion and
  // kernels that declare a CPU input (we have no dtypes or kernel defs here).
  DeviceId cpu = firstOfKind(p, ~std::uint64_t(0) >> (64 - D), "cpu");
  if (cpu == kNone) return;
  std::vector<std::vector<ValueId>> inputs(n), outputs(n);
  for (ValueId v = 0; v < static_cast<ValueId>(p.values.size()); ++v) {
    for (OpId op : p.values[v].consumers) inputs[op].push_back(v);
    if (p.values[v].source == ValueSource::Op) outputs[p.values[v].producer].push_back(v);
  }
  std::vector<char> cpuTensor(p.values.size(), 0);
  for (OpId i : topo) {
    const PlacementOp& op = p.ops[i];
    bool onCpu = p.devices[device[i]].kind == "cpu";
    int u = c.unitOf[i];
    bool movable = c.members[u].size() == 1 && c.fixedDevice[u] == kNone && op.feasible(cpu);
    if (!onCpu && movable) {
      bool readsCpuTensor = false, allCpu = true;
      for (ValueId v : inputs[i]) {
        const PlacementValue& val = p.values[v];
        if (val.source == ValueSource::Constant)
          allCpu &= val.elements >= 0 && val.elements <= 100;
        else if (val.source == ValueSource::Op)
          readsCpuTensor |= cpuTensor[v], allCpu &= cpuTensor[v] != 0;
      }
      if (readsCpuTensor && allCpu) {
        device[i] = cpu;
        reason[i] = "policy(ort-cpu-fallback)";
        onCpu = true;
      }
    }
    bool hostOutput = onCpu || op.opType == "Shape" || op.opType == "Size";
    for (ValueId v : outputs[i]) cpuTensor[v] = hostOutput;
  }
}

}  // namespace tandem::placement::detail
