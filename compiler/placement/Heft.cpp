// List scheduling for the makespan (HEFT, Topcuoglu, Hariri & Wu 2002) and the refinement that
// moves ops between devices when the schedule finishes earlier.
#include <algorithm>
#include <numeric>

#include "compiler/placement/PlacerInternal.h"

namespace tandem::placement::detail {
namespace {

// Op -> values it reads (no constants: they are resident before the run; variables are read
// below, from their home before the run).
struct Inputs {
  std::vector<int> begin, values;
  explicit Inputs(const PlacementProblem& p) : begin(p.ops.size() + 1, 0) {
    for (const PlacementValue& v : p.values)
      if (v.source != ValueSource::Constant)
        for (OpId c : v.consumers) ++begin[c + 1];
    std::partial_sum(begin.begin(), begin.end(), begin.begin());
    values.resize(begin.back());
    std::vector<int> next(begin.begin(), begin.end() - 1);
    for (ValueId v = 0; v < static_cast<ValueId>(p.values.size()); ++v)
      if (p.values[v].source != ValueSource::Constant)
        for (OpId c : p.values[v].consumers) values[next[c]++] = v;
  }
};

// The schedule of one placement, op by op in list order. A value reaches device d at its
// producer's finish time plus one copy's transfer time; every reader on d waits for that copy.
class Scheduler {
 public:
  Scheduler(const PlacementProblem& p, const Inputs& in)
      : p_(p), in_(in), D_(static_cast<int>(p.devices.size())), finish_(p.ops.size(), 0.0),
        devFree_(D_, 0.0), home_(p.ops.size(), kNone) {}

  // When op i's inputs are all on device d.
  double ready(OpId i, DeviceId d) const {
    double t = 0;
    for (int k = in_.begin[i]; k < in_.begin[i + 1]; ++k) t = std::max(t, arrival(in_.values[k], d));
    return t;
  }
  double earliestFinish(OpId i, DeviceId d) const {
    return std::max(ready(i, d), devFree_[d]) + p_.ops[i].computeSeconds[d];
  }
  void run(OpId i, DeviceId d) {
    finish_[i] = earliestFinish(i, d);
    devFree_[d] = finish_[i];
    home_[i] = d;
  }
  // Latest op finish or output arrival.
  double makespan() const {
    double m = 0;
    for (double f : finish_) m = std::max(m, f);
    for (ValueId v = 0; v < static_cast<ValueId>(p_.values.size()); ++v)
      for (DeviceId d : p_.values[v].outputDevices) m = std::max(m, arrival(v, d));
    return m;
  }

 private:
  double arrival(ValueId vi, DeviceId d) const {
    const PlacementValue& v = p_.values[vi];
    if (v.source == ValueSource::Constant) return 0;
    // A variable is resident before the run; its home op may not be scheduled yet, and when
    // it is not, the copy's time is left to the total (evaluatePlacement) rather than guessed.
    if (v.source == ValueSource::Variable)
      return home_[v.producer] == kNone ? 0.0 : v.transfer(home_[v.producer], d, D_);
    DeviceId h = v.source == ValueSource::Op ? home_[v.producer] : v.inputDevice;
    double t = v.source == ValueSource::Op ? finish_[v.producer] : 0.0;
    return t + v.transfer(h, d, D_);
  }
  const PlacementProblem& p_;
  const Inputs& in_;
  int D_;
  std::vector<double> finish_, devFree_;
  std::vector<DeviceId> home_;
};

}  // namespace

// HEFT's upward rank: rank(i) = mean compute(i) + max over readers j of (mean transfer of the
// value + rank(j)); ops sorted by decreasing rank (ties in topological order) form a topological
// order, the list order of the schedule.
std::vector<OpId> rankOrder(const PlacementProblem& p, const std::vector<OpId>& topo) {
  const int n = static_cast<int>(p.ops.size());
  const int D = static_cast<int>(p.devices.size());
  std::vector<double> rank(n, 0.0), tail(n, 0.0);  // tail: max over outgoing (c + rank(j))
  std::vector<double> meanTransfer(p.values.size(), 0.0);
  for (size_t v = 0; v < p.values.size(); ++v) {
    const PlacementValue& val = p.values[v];
    if (val.transferSeconds.empty() || D < 2) continue;
    double s = 0;
    for (int a = 0; a < D; ++a)
      for (int b = 0; b < D; ++b)
        if (a != b) s += val.transferSeconds[a * D + b];
    meanTransfer[v] = s / (D * (D - 1));
  }
  // Values produced by each op.
  std::vector<std::vector<ValueId>> produced(n);
  for (ValueId v = 0; v < static_cast<ValueId>(p.values.size()); ++v)
    if (p.values[v].source == ValueSource::Op) produced[p.values[v].producer].push_back(v);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    OpId i = *it;
    double w = 0;
    int k = 0;
    for (double t : p.ops[i].computeSeconds)
      if (t != kNoKernel) w += t, ++k;
    double out = 0;
    for (ValueId v : produced[i]) {
      if (!p.values[v].outputDevices.empty()) out = std::max(out, meanTransfer[v]);
      for (OpId j : p.values[v].consumers) out = std::max(out, meanTransfer[v] + rank[j]);
    }
    rank[i] = w / k + out;
  }
  std::vector<int> topoIndex(n);
  for (int k = 0; k < n; ++k) topoIndex[topo[k]] = k;
  std::vector<OpId> order(topo);
  std::sort(order.begin(), order.end(), [&](OpId a, OpId b) {
    return rank[a] != rank[b] ? rank[a] > rank[b] : topoIndex[a] < topoIndex[b];
  });
  return order;
}

double makespan(const PlacementProblem& p, const std::vector<OpId>& order,
                const std::vector<DeviceId>& device) {
  Inputs in(p);
  Scheduler s(p, in);
  for (OpId i : order) s.run(i, device[i]);
  return s.makespan();
}

// The refinement sweep is HEFT's processor-selection phase (Topcuoglu et al. 2002, §4.1) limited
// to the ops the constraints leave free: in list order, each free op goes to the device where it
// finishes earliest (staying put on ties), given the devices' queues and the data already
// placed. HEFT alone is greedy about transfers it causes downstream, so a sweep is kept only if
// the whole schedule's makespan drops; sweeps repeat from the new placement while they do (at
// most 4). Each sweep costs O((ops + reads) * devices).
int refineMakespan(const PlacementProblem& p, const Constraints& c,
                   const std::vector<OpId>& order, std::vector<DeviceId>& device) {
  const int n = static_cast<int>(p.ops.size());
  const int D = static_cast<int>(p.devices.size());
  Inputs in(p);
  std::vector<char> movable(n, 0);
  for (OpId i = 0; i < n; ++i) {
    int u = c.unitOf[i];
    int feasible = 0;
    for (DeviceId d = 0; d < D; ++d) feasible += p.ops[i].feasible(d);
    movable[i] = c.members[u].size() == 1 && c.fixedDevice[u] == kNone && feasible > 1;
  }
  double best;
  {
    Scheduler s(p, in);
    for (OpId i : order) s.run(i, device[i]);
    best = s.makespan();
  }
  const std::vector<DeviceId> original(device);
  for (int sweep = 0; sweep < 4; ++sweep) {
    std::vector<std::uint64_t> bytes(D, 0);
    for (OpId i = 0; i < n; ++i) bytes[device[i]] += p.ops[i].memoryBytes;
    std::vector<DeviceId> trial(device);
    Scheduler s(p, in);
    for (OpId i : order) {
      DeviceId cur = trial[i];
      if (movable[i]) {
        double bestFinish = s.earliestFinish(i, cur);
        for (DeviceId d = 0; d < D; ++d) {
          if (d == cur || !p.ops[i].feasible(d)) continue;
          std::uint64_t cap = p.devices[d].memoryCapacityBytes;
          if (cap != 0 && bytes[d] + p.ops[i].memoryBytes > cap) continue;
          double f = s.earliestFinish(i, d);
          if (f < bestFinish * (1 - 1e-12)) bestFinish = f, trial[i] = d;
        }
        bytes[cur] -= p.ops[i].memoryBytes;
        bytes[trial[i]] += p.ops[i].memoryBytes;
      }
      s.run(i, trial[i]);
    }
    double m = s.makespan();
    if (!(m < best * (1 - 1e-12))) break;
    device.swap(trial);
    best = m;
  }
  int moved = 0;
  for (OpId i = 0; i < n; ++i) moved += device[i] != original[i];
  return moved;
}

}  // namespace tandem::placement::detail
