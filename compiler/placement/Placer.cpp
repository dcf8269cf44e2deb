// placeGraph and evaluatePlacement: problem validation, the contracted unit graph, the objective,
// and the driver that runs constraints -> cut / expansion -> memory -> makespan refinement.
#include "compiler/placement/Placer.h"

#include <chrono>
#include <cmath>
#include <numeric>

#include "compiler/placement/PlacerInternal.h"

namespace tandem::placement {

const char* policyName(PlacementPolicy p) {
  switch (p) {
    case PlacementPolicy::Cost: return "cost";
    case PlacementPolicy::Greedy: return "greedy";
    case PlacementPolicy::Ort: return "ort";
    case PlacementPolicy::Cpu: return "cpu";
    case PlacementPolicy::Gpu: return "gpu";
  }
  return "?";
}

std::optional<PlacementPolicy> parsePolicy(const std::string& name) {
  for (PlacementPolicy p : {PlacementPolicy::Cost, PlacementPolicy::Greedy, PlacementPolicy::Ort,
                            PlacementPolicy::Cpu, PlacementPolicy::Gpu})
    if (name == policyName(p)) return p;
  return std::nullopt;
}

namespace detail {

UnitGraph buildUnitGraph(const PlacementProblem& p, const Constraints& c) {
  const int D = static_cast<int>(p.devices.size());
  UnitGraph g;
  g.numDevices = D;
  g.numUnits = c.numUnits;
  g.fixedDevice = c.fixedDevice;
  g.cost.assign(size_t(c.numUnits) * D, 0.0);
  g.memBytes.assign(c.numUnits, 0);
  for (OpId i = 0; i < static_cast<OpId>(p.ops.size()); ++i) {
    int u = c.unitOf[i];
    g.memBytes[u] += p.ops[i].memoryBytes;
    for (DeviceId d = 0; d < D; ++d) g.cost[u * D + d] += p.ops[i].computeSeconds[d];  // inf stays
  }
  // Values that can cost a transfer, with distinct reader units and output devices.
  std::vector<int> stamp(c.numUnits, -1);
  std::vector<int> devStamp(D, -1);
  std::vector<int> incCount(c.numUnits + 1, 0);
  for (ValueId vi = 0; vi < static_cast<ValueId>(p.values.size()); ++vi) {
    const PlacementValue& v = p.values[vi];
    if (v.source == ValueSource::Constant || v.transferSeconds.empty()) continue;
    UnitGraph::Value val;
    val.id = vi;
    val.transfer = v.transferSeconds.data();
    if (v.source == ValueSource::Op || v.source == ValueSource::Variable)
      val.producerUnit = c.unitOf[v.producer];
    else val.sourceDevice = v.inputDevice;
    val.consBegin = static_cast<int>(g.consUnits.size());
    if (val.producerUnit != kNone) stamp[val.producerUnit] = vi;
    for (OpId op : v.consumers) {
      int u = c.unitOf[op];
      if (stamp[u] == vi) continue;
      stamp[u] = vi;
      g.consUnits.push_back(u);
    }
    val.consEnd = static_cast<int>(g.consUnits.size());
    val.outBegin = static_cast<int>(g.outDevices.size());
    for (DeviceId d : v.outputDevices)
      if (devStamp[d] != vi) devStamp[d] = vi, g.outDevices.push_back(d);
    val.outEnd = static_cast<int>(g.outDevices.size());
    if (val.consBegin == val.consEnd && val.outBegin == val.outEnd) continue;
    if (val.producerUnit != kNone) ++incCount[val.producerUnit + 1];
    for (int k = val.consBegin; k < val.consEnd; ++k) ++incCount[g.consUnits[k] + 1];
    g.values.push_back(val);
  }
  std::partial_sum(incCount.begin(), incCount.end(), incCount.begin());
  g.incBegin = incCount;
  g.incValues.resize(incCount.back());
  std::vector<int> next(incCount.begin(), incCount.end() - 1);
  for (int k = 0; k < static_cast<int>(g.values.size()); ++k) {
    const UnitGraph::Value& val = g.values[k];
    if (val.producerUnit != kNone) g.incValues[next[val.producerUnit]++] = k;
    for (int j = val.consBegin; j < val.consEnd; ++j) g.incValues[next[g.consUnits[j]]++] = k;
  }
  return g;
}

double valueCost(const UnitGraph& g, const UnitGraph::Value& v, const std::vector<DeviceId>& label) {
  DeviceId h = v.producerUnit == kNone ? v.sourceDevice : label[v.producerUnit];
  std::uint64_t readers = 0;
  for (int k = v.consBegin; k < v.consEnd; ++k) readers |= std::uint64_t(1) << label[g.consUnits[k]];
  for (int k = v.outBegin; k < v.outEnd; ++k) readers |= std::uint64_t(1) << g.outDevices[k];
  readers &= ~(std::uint64_t(1) << h);
  double s = 0;
  for (DeviceId d = 0; readers; ++d, readers >>= 1)
    if (readers & 1) s += v.transfer[h * g.numDevices + d];
  return s;
}

double energy(const UnitGraph& g, const std::vector<double>& unitCost,
              const std::vector<DeviceId>& label) {
  double e = 0;
  for (int u = 0; u < g.numUnits; ++u) e += unitCost[u * g.numDevices + label[u]];
  for (const UnitGraph::Value& v : g.values) e += valueCost(g, v, label);
  return e;
}

std::vector<OpId> topologicalOrder(const PlacementProblem& p, bool& cyclic) {
  // Kahn 1962, smallest op id first among the ready ones (a stable, reproducible order).
  const int n = static_cast<int>(p.ops.size());
  std::vector<std::vector<OpId>> succ(n);
  std::vector<int> indegree(n, 0);
  for (const PlacementValue& v : p.values)
    if (v.source == ValueSource::Op)
      for (OpId c : v.consumers) succ[v.producer].push_back(c), ++indegree[c];
  std::vector<OpId> order, ready;
  for (OpId i = n - 1; i >= 0; --i)
    if (!indegree[i]) ready.push_back(i);
  while (!ready.empty()) {
    OpId i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (OpId j : succ[i])
      if (--indegree[j] == 0) ready.push_back(j);
  }
  cyclic = static_cast<int>(order.size()) != n;
  return order;
}

}  // namespace detail

namespace {

using namespace detail;

std::string validate(const PlacementProblem& p) {
  const int D = static_cast<int>(p.devices.size());
  if (D == 0) return "no devices";
  if (D > 64) return "more than 64 devices";
  for (int d = 0; d < D; ++d) {
    if (p.devices[d].name.empty()) return "device " + std::to_string(d) + " has no name";
    for (int e = 0; e < d; ++e)
      if (p.devices[e].name == p.devices[d].name) return "device " + p.devices[d].name + " twice";
  }
  const int n = static_cast<int>(p.ops.size());
  for (const PlacementOp& op : p.ops) {
    if (static_cast<int>(op.computeSeconds.size()) != D)
      return "op '" + op.name + "' has " + std::to_string(op.computeSeconds.size()) +
             " compute times for " + std::to_string(D) + " devices";
    for (double t : op.computeSeconds)
      if (t != kNoKernel && !(t >= 0 && std::isfinite(t)))
        return "op '" + op.name + "' has a compute time that is negative or not a number";
  }
  auto device = [&](DeviceId d) { return d >= 0 && d < D; };
  for (const PlacementValue& v : p.values) {
    const std::string what = "value '" + v.name + "'";
    if ((v.source == ValueSource::Op || v.source == ValueSource::Variable) &&
        !(v.producer >= 0 && v.producer < n))
      return what + " has no producer op";
    if (v.source == ValueSource::GraphInput && !device(v.inputDevice))
      return what + " is a graph input on no device";
    for (OpId c : v.consumers)
      if (c < 0 || c >= n) return what + " has a consumer out of range";
    for (DeviceId d : v.outputDevices)
      if (!device(d)) return what + " is an output on a device out of range";
    if (!v.transferSeconds.empty()) {
      if (static_cast<int>(v.transferSeconds.size()) != D * D)
        return what + " has " + std::to_string(v.transferSeconds.size()) +
               " transfer times for " + std::to_string(D) + " devices (want devices^2)";
      for (int a = 0; a < D; ++a)
        for (int b = 0; b < D; ++b)
          if (a != b && !(v.transferSeconds[a * D + b] >= 0 &&
                          std::isfinite(v.transferSeconds[a * D + b])))
            return what + " has a transfer time that is negative or not finite";
    }
  }
  return "";
}

// Prices a validated placement.
PlacementCost price(const PlacementProblem& p, const std::vector<OpId>& order,
                    const std::vector<DeviceId>& device) {
  const int D = static_cast<int>(p.devices.size());
  PlacementCost c;
  c.bytesPerDevice.assign(D, 0);
  for (OpId i = 0; i < static_cast<OpId>(p.ops.size()); ++i) {
    c.computeSeconds += p.ops[i].computeSeconds[device[i]];
    c.bytesPerDevice[device[i]] += p.ops[i].memoryBytes;
  }
  for (ValueId vi = 0; vi < static_cast<ValueId>(p.values.size()); ++vi) {
    const PlacementValue& v = p.values[vi];
    if (v.source == ValueSource::Constant) continue;
    DeviceId h = v.source == ValueSource::GraphInput ? v.inputDevice : device[v.producer];
    std::uint64_t readers = 0;
    for (OpId op : v.consumers) readers |= std::uint64_t(1) << device[op];
    for (DeviceId d : v.outputDevices) readers |= std::uint64_t(1) << d;
    readers &= ~(std::uint64_t(1) << h);
    for (DeviceId d = 0; d < D; ++d)
      if (readers >> d & 1) {
        double t = v.transfer(h, d, D);
        c.copies.push_back({vi, h, d, v.bytes, t});
        c.transferSeconds += t;
      }
  }
  c.totalSeconds = c.computeSeconds + c.transferSeconds;
  c.makespanSeconds = makespan(p, order, device);
  return c;
}

}  // namespace

EvalResult evaluatePlacement(const PlacementProblem& p, const std::vector<DeviceId>& device) {
  EvalResult r;
  if (std::string e = validate(p); !e.empty()) return {"invalid placement problem: " + e, {}};
  if (device.size() != p.ops.size())
    return {"placement has " + std::to_string(device.size()) + " devices for " +
                std::to_string(p.ops.size()) + " ops",
            {}};
  for (OpId i = 0; i < static_cast<OpId>(p.ops.size()); ++i) {
    if (device[i] < 0 || device[i] >= static_cast<int>(p.devices.size()))
      return {"op '" + p.ops[i].name + "' is on no device", {}};
    if (!p.ops[i].feasible(device[i]))
      return {"op '" + p.ops[i].name + "' (" + p.ops[i].opType + ") is on " +
                  p.devices[device[i]].name + ", which has no kernel for it",
              {}};
  }
  bool cyclic = false;
  std::vector<OpId> topo = topologicalOrder(p, cyclic);
  if (cyclic) return {"invalid placement problem: the value graph has a cycle", {}};
  r.cost = price(p, rankOrder(p, topo), device);
  return r;
}

// The driver, in order:
//  1. validate the problem and order it topologically (a cycle is an error);
//  2. resolve pins and colocation into units (Colocation.cpp);
//  3. cost policy: minimise the total cost over units -- one device: trivial; two: Stone's
//     exact cut; more: alpha-expansion (and swap) local search from one or several starts --
//     within memory capacities (AlphaExpansion.cpp); then, with refinement on, the HEFT sweeps
//     (Heft.cpp).
//     Baseline policies: their rule per unit (Baselines.cpp);
//  4. reasons for the ops constraints did not explain, and the price of the plan.
PlaceResult placeGraph(const PlacementProblem& p, const PlacerOptions& o) {
  auto start = std::chrono::steady_clock::now();
  PlaceResult r;
  if (std::string e = validate(p); !e.empty()) return {"invalid placement problem: " + e, {}};
  bool cyclic = false;
  std::vector<OpId> topo = topologicalOrder(p, cyclic);
  if (cyclic) return {"invalid placement problem: the value graph has a cycle", {}};

  Constraints c;
  if (std::string e = resolveConstraints(p, o.strict, c); !e.empty()) return {e, {}};
  UnitGraph g = buildUnitGraph(p, c);
  const int n = static_cast<int>(p.ops.size());
  const int D = static_cast<int>(p.devices.size());
  Placement& pl = r.placement;
  PlacerStats& st = pl.stats;
  st.units = c.numUnits;
  std::vector<OpId> order = rankOrder(p, topo);

  if (o.policy == PlacementPolicy::Cost) {
    st.algorithm = D == 1 ? "single-device" : D == 2 ? "min-cut" : "alpha-expansion";
    std::vector<DeviceId> label = initialLabels(g);
    if (std::string e = minimizeTotalCost(p, g, o, label, st); !e.empty()) return {e, {}};
    pl.device.resize(n);
    for (OpId i = 0; i < n; ++i) pl.device[i] = label[c.unitOf[i]];
    st.costBeforeRefinement = energy(g, g.cost, label);
    st.makespanBeforeRefinement = makespan(p, order, pl.device);
    bool refine = o.refinement == MakespanRefinement::On ||
                  (o.refinement == MakespanRefinement::Auto && D >= 3);
    if (refine && D >= 2) st.heftMoves = refineMakespan(p, c, order, pl.device);
    pl.reason = c.reason;
    for (OpId i = 0; i < n; ++i) {
      if (!pl.reason[i].empty()) continue;
      int feasible = 0;
      for (DeviceId d = 0; d < D; ++d) feasible += p.ops[i].feasible(d);
      pl.reason[i] = feasible == 1 ? "only-kernel" : "cost";
    }
  } else {
    st.algorithm = policyName(o.policy);
    placeBaseline(p, c, g, o.policy, topo, pl.device, pl.reason);
  }
  pl.cost = price(p, order, pl.device);
  if (o.policy != PlacementPolicy::Cost) {
    st.costBeforeRefinement = pl.cost.totalSeconds;
    st.makespanBeforeRefinement = pl.cost.makespanSeconds;
  }
  st.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace tandem::placement
