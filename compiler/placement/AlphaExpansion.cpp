// Minimising the total-cost objective: Stone's exact cut for two devices, alpha-expansion for
// more (Boykov, Veksler & Zabih 2001), and the memory-capacity penalty loop around both.
#include <algorithm>
#include <cmath>

#include "compiler/placement/PlacerInternal.h"

namespace tandem::placement::detail {
namespace {

// True when `next` is cheaper than `cur` by more than rounding.
bool lower(double next, double cur) { return next < cur - 1e-12 * std::max(1.0, std::abs(cur)); }

// Graphs with units x devices up to this get every start and swap moves; larger ones one start
// and expansion moves only, which keeps 100k-op graphs near a second (see placer_bench).
constexpr long kMultiStartWork = 2048;
// A cycle of moves that lowers the energy by less than this fraction ends the search: 0.01% of
// the estimated time is far below what the cost model can resolve.
constexpr double kCycleTolerance = 1e-4;

// Local search from `label` with graph-cut moves (Boykov, Veksler & Zabih 2001):
//  - alpha-expansion: for each device alpha, "every unit keeps its label or switches to alpha",
//    one cut (MinCut.cpp). Transfer terms that are not submodular inside the move are bounded
//    from above, tight at the current labelling, so the move never raises the true energy;
//  - alpha-beta swap (with `swaps`): for each pair of devices, "units on alpha or beta choose
//    between them", the others frozen; one cut, always exact: every free reader's source-side
//    label is the producer's or a frozen device, so no term is truncated.
// A move is kept when the re-priced true energy is lower. Cycles over all moves repeat until one
// improves by less than kCycleTolerance (relative) or maxCycles pass.
double localSearch(const UnitGraph& g, const std::vector<double>& unitCost, int maxCycles,
                   bool swaps, std::vector<DeviceId>& label, PlacerStats& stats) {
  const int D = g.numDevices;
  double E = energy(g, unitCost, label);
  std::vector<DeviceId> next, src(g.numUnits);
  std::vector<char> frozen(g.numUnits);
  int truncated = 0;
  auto keepIfLower = [&]() {
    ++stats.maxflowSolves;
    stats.truncatedTerms += truncated;
    double En = energy(g, unitCost, next);
    if (!lower(En, E)) return;
    label.swap(next);
    E = En;
  };
  for (int cycle = 0; cycle < maxCycles; ++cycle) {
    double before = E;
    for (DeviceId alpha = 0; alpha < D; ++alpha) {
      bool anyMovable = false;
      for (int u = 0; u < g.numUnits && !anyMovable; ++u)
        anyMovable = label[u] != alpha && g.fixedDevice[u] == kNone &&
                     unitCost[u * D + alpha] != kNoKernel;
      if (!anyMovable) continue;
      solveBinaryMove(g, unitCost, label, alpha, next, truncated);
      keepIfLower();
    }
    for (DeviceId a = 0; swaps && a < D; ++a)
      for (DeviceId b = a + 1; b < D; ++b) {
        bool any = false;
        for (int u = 0; u < g.numUnits; ++u) {
          frozen[u] = label[u] != a && label[u] != b;
          src[u] = label[u] == b ? a : label[u];
          any |= !frozen[u] && g.fixedDevice[u] == kNone;
        }
        if (!any) continue;
        solveBinaryMove(g, unitCost, src, b, next, truncated, &frozen);
        keepIfLower();
      }
    ++stats.expansionCycles;
    if (!(before - E > kCycleTolerance * std::abs(before))) break;
  }
  return E;
}

// Minimises energy(g, unitCost, .) from the feasible labelling `label`.
//  - One device: nothing to choose.
//  - Two devices: one binary cut with every unit's source side on device 0 and its sink side on
//    device 1 -- Stone 1977's cut, exact (see MinCut.cpp); the start labelling is irrelevant.
//  - More: local search with expansion (and swap) moves, which stops in a local minimum with
//    respect to those moves. For metric pairwise energies such a minimum is within a constant
//    factor of the optimum (Boykov et al. 2001, Thm. 6.1); ours are not pairwise (one charge per
//    value and device), lack kernels and may break the triangle inequality, so no bound holds
//    and we measure instead (placer_expansion_test: against an ILP optimum). Which minimum is
//    reached depends on the start, so small graphs run the search from several starts (below)
//    and keep the best; large graphs run once, from the start of lowest energy.
double minimizeEnergy(const UnitGraph& g, const std::vector<double>& unitCost, int maxCycles,
                      std::vector<DeviceId>& label, PlacerStats& stats) {
  const int D = g.numDevices;
  if (D == 1) {
    std::fill(label.begin(), label.end(), 0);
    return energy(g, unitCost, label);
  }
  if (D == 2) {
    std::vector<DeviceId> src(g.numUnits, 0);
    int truncated = 0;
    solveBinaryMove(g, unitCost, src, 1, label, truncated);
    ++stats.maxflowSolves;
    return energy(g, unitCost, label);
  }
  // Starts: the given labelling; per device d, every unit that can run there on d; per pair of
  // devices (a, b), the exact two-device optimum with every unit on a or b (units that can run
  // on neither keep their label) -- one cut, exact like Stone's.
  std::vector<std::vector<DeviceId>> starts = {label};
  for (DeviceId d = 0; d < D; ++d) {
    std::vector<DeviceId> l = label;
    for (int u = 0; u < g.numUnits; ++u)
      if (g.fixedDevice[u] == kNone && unitCost[u * D + d] != kNoKernel) l[u] = d;
    starts.push_back(std::move(l));
  }
  const bool small = long(g.numUnits) * D <= kMultiStartWork;
  if (small) {
    for (DeviceId a = 0; a < D; ++a)
      for (DeviceId b = a + 1; b < D; ++b) {
        std::vector<DeviceId> src = label, pair;
        std::vector<char> frozen(g.numUnits, 0);
        for (int u = 0; u < g.numUnits; ++u) {
          if (g.fixedDevice[u] != kNone) continue;
          if (unitCost[u * D + a] != kNoKernel) src[u] = a;
          else if (unitCost[u * D + b] != kNoKernel) src[u] = b;
          else frozen[u] = 1;
        }
        int truncated = 0;
        solveBinaryMove(g, unitCost, src, b, pair, truncated, &frozen);
        ++stats.maxflowSolves;
        starts.push_back(std::move(pair));
      }
  } else {
    size_t best = 0;
    double bestE = kNoKernel;
    for (size_t k = 0; k < starts.size(); ++k)
      if (double e = energy(g, unitCost, starts[k]); e < bestE) bestE = e, best = k;
    starts = {starts[best]};
  }
  double bestE = kNoKernel;
  for (std::vector<DeviceId>& start : starts) {
    ++stats.starts;
    double e = localSearch(g, unitCost, maxCycles, small, start, stats);
    if (bestE == kNoKernel || lower(e, bestE)) bestE = e, label = start;
  }
  return bestE;
}

std::vector<std::uint64_t> bytesPerDevice(const UnitGraph& g, const std::vector<DeviceId>& label) {
  std::vector<std::uint64_t> bytes(g.numDevices, 0);
  for (int u = 0; u < g.numUnits; ++u) bytes[label[u]] += g.memBytes[u];
  return bytes;
}

bool fits(const PlacementProblem& p, const std::vector<std::uint64_t>& bytes, DeviceId d) {
  std::uint64_t cap = p.devices[d].memoryCapacityBytes;
  return cap == 0 || bytes[d] <= cap;
}

bool allFit(const PlacementProblem& p, const std::vector<std::uint64_t>& bytes) {
  for (DeviceId d = 0; d < static_cast<DeviceId>(bytes.size()); ++d)
    if (!fits(p, bytes, d)) return false;
  return true;
}

// Exact change of energy when unit u moves to `to` (only its values are re-priced).
double moveDelta(const UnitGraph& g, const std::vector<double>& unitCost,
                 std::vector<DeviceId>& label, int u, DeviceId to) {
  const int D = g.numDevices;
  DeviceId from = label[u];
  double delta = unitCost[u * D + to] - unitCost[u * D + from];
  for (int k = g.incBegin[u]; k < g.incBegin[u + 1]; ++k)
    delta -= valueCost(g, g.values[g.incValues[k]], label);
  label[u] = to;
  for (int k = g.incBegin[u]; k < g.incBegin[u + 1]; ++k)
    delta += valueCost(g, g.values[g.incValues[k]], label);
  label[u] = from;
  return delta;
}

// Greedy repair after the penalty rounds: move units off each over-full device in order of
// energy increase per byte freed, onto the cheapest device with room. Deltas are computed once
// per device (a heuristic for the rare case the penalty did not converge).
int repairMemory(const PlacementProblem& p, const UnitGraph& g, std::vector<DeviceId>& label) {
  const int D = g.numDevices;
  std::vector<std::uint64_t> bytes = bytesPerDevice(g, label);
  int moves = 0;
  for (DeviceId d = 0; d < D; ++d) {
    if (fits(p, bytes, d)) continue;
    struct Cand { double perByte; int u; };
    std::vector<Cand> cands;
    for (int u = 0; u < g.numUnits; ++u) {
      if (label[u] != d || g.fixedDevice[u] != kNone || g.memBytes[u] == 0) continue;
      double best = kNoKernel;
      for (DeviceId e = 0; e < D; ++e)
        if (e != d && g.cost[u * D + e] != kNoKernel)
          best = std::min(best, moveDelta(g, g.cost, label, u, e));
      if (best != kNoKernel) cands.push_back({best / double(g.memBytes[u]), u});
    }
    std::sort(cands.begin(), cands.end(),
              [](const Cand& a, const Cand& b) { return a.perByte < b.perByte; });
    for (const Cand& cand : cands) {
      if (fits(p, bytes, d)) break;
      int u = cand.u;
      DeviceId bestTo = kNone;
      double best = kNoKernel;
      for (DeviceId e = 0; e < D; ++e) {
        if (e == d || g.cost[u * D + e] == kNoKernel) continue;
        std::uint64_t cap = p.devices[e].memoryCapacityBytes;
        if (cap != 0 && bytes[e] + g.memBytes[u] > cap) continue;
        double delta = moveDelta(g, g.cost, label, u, e);
        if (delta < best) best = delta, bestTo = e;
      }
      if (bestTo == kNone) continue;
      bytes[d] -= g.memBytes[u];
      bytes[bestTo] += g.memBytes[u];
      label[u] = bestTo;
      ++moves;
    }
  }
  return moves;
}

// Descent within the capacities after the penalty rounds: single moves to a device with room and,
// where the pairs are few, exchanges of two units between devices (a price per byte cannot tell
// apart units whose savings tie, so the Lagrangian plan can miss such swaps). True energies;
// best improvement first per unit; at most 4 passes. Returns the moves made.
int improveWithinCapacity(const PlacementProblem& p, const UnitGraph& g,
                          std::vector<DeviceId>& label) {
  const int D = g.numDevices;
  std::vector<std::uint64_t> bytes = bytesPerDevice(g, label);
  auto room = [&](DeviceId e, std::uint64_t add, std::uint64_t remove) {
    std::uint64_t cap = p.devices[e].memoryCapacityBytes;
    return cap == 0 || bytes[e] - remove + add <= cap;
  };
  std::vector<int> movable, bounded;
  for (int u = 0; u < g.numUnits; ++u) {
    if (g.fixedDevice[u] != kNone) continue;
    movable.push_back(u);
    if (p.devices[label[u]].memoryCapacityBytes != 0) bounded.push_back(u);
  }
  const bool exchanges = double(bounded.size()) * double(movable.size()) <= 1e6;
  int moves = 0;
  for (int pass = 0; pass < 4; ++pass) {
    bool improved = false;
    for (int u : movable) {
      DeviceId from = label[u], bestTo = kNone;
      double best = -1e-12;
      for (DeviceId e = 0; e < D; ++e) {
        if (e == from || g.cost[u * D + e] == kNoKernel || !room(e, g.memBytes[u], 0)) continue;
        if (double delta = moveDelta(g, g.cost, label, u, e); delta < best) best = delta, bestTo = e;
      }
      if (bestTo == kNone) continue;
      bytes[from] -= g.memBytes[u], bytes[bestTo] += g.memBytes[u];
      label[u] = bestTo;
      ++moves, improved = true;
    }
    if (exchanges)
      for (int u : bounded)
        for (int v : movable) {
          DeviceId du = label[u], dv = label[v];
          if (du == dv || g.cost[u * D + dv] == kNoKernel || g.cost[v * D + du] == kNoKernel ||
              !room(dv, g.memBytes[u], g.memBytes[v]) || !room(du, g.memBytes[v], g.memBytes[u]))
            continue;
          double delta = moveDelta(g, g.cost, label, u, dv);
          label[u] = dv;
          delta += moveDelta(g, g.cost, label, v, du);
          if (delta < -1e-12) {
            label[v] = du;
            bytes[du] += g.memBytes[v] - g.memBytes[u];
            bytes[dv] += g.memBytes[u] - g.memBytes[v];
            moves += 2, improved = true;
          } else {
            label[u] = du;
          }
        }
    if (!improved) break;
  }
  return moves;
}

}  // namespace

std::vector<DeviceId> initialLabels(const UnitGraph& g) {
  const int D = g.numDevices;
  std::vector<DeviceId> label(g.numUnits);
  for (int u = 0; u < g.numUnits; ++u) {
    if (g.fixedDevice[u] != kNone) {
      label[u] = g.fixedDevice[u];
      continue;
    }
    DeviceId best = 0;
    for (DeviceId d = 1; d < D; ++d)
      if (g.cost[u * D + d] < g.cost[u * D + best]) best = d;
    label[u] = best;
  }
  return label;
}

// Memory capacity (DESIGN §4.4). The objective has no memory term, so we solve without one and,
// while some device d holds more than its capacity, add a price lambda_d per byte to every
// unit's cost on d and re-solve (a Lagrangian relaxation of the capacity constraint; Fisher
// 1981, "The Lagrangian relaxation method for solving integer programming problems"). lambda_d
// starts at the average compute saving per byte of the units on d and doubles each round, so it
// overshoots the smallest sufficient price by at most 2x. If maxMemoryRounds pass without a
// fitting plan, a greedy repair moves the cheapest units per byte off the full devices; then a
// descent with single moves and exchanges improves the plan within the capacities. A device
// whose pinned or only-kernel units alone exceed it is an error up front.
std::string minimizeTotalCost(const PlacementProblem& p, const UnitGraph& g,
                              const PlacerOptions& o, std::vector<DeviceId>& label,
                              PlacerStats& stats) {
  const int D = g.numDevices;
  std::vector<double> unitCost = g.cost;
  minimizeEnergy(g, unitCost, o.maxExpansionCycles, label, stats);
  std::vector<std::uint64_t> bytes = bytesPerDevice(g, label);
  if (allFit(p, bytes)) return "";

  std::vector<std::uint64_t> forced(D, 0);
  for (int u = 0; u < g.numUnits; ++u) {
    DeviceId only = g.fixedDevice[u];
    int feasible = 0;
    for (DeviceId d = 0; d < D; ++d)
      if (g.cost[u * D + d] != kNoKernel) ++feasible, only = only == kNone ? d : only;
    if (g.fixedDevice[u] != kNone || feasible == 1) forced[only] += g.memBytes[u];
  }
  for (DeviceId d = 0; d < D; ++d) {
    std::uint64_t cap = p.devices[d].memoryCapacityBytes;
    if (cap != 0 && forced[d] > cap)
      return "device " + p.devices[d].name + " holds " + std::to_string(cap) +
             " bytes but the ops that must run there (pinned, or with no kernel elsewhere) need " +
             std::to_string(forced[d]) + " bytes";
  }

  std::vector<double> lambda(D, 0.0);
  for (int round = 0; round < o.maxMemoryRounds && !allFit(p, bytes); ++round) {
    for (DeviceId d = 0; d < D; ++d) {
      if (fits(p, bytes, d)) continue;
      if (lambda[d] > 0) {
        lambda[d] *= 2;
        continue;
      }
      double saving = 0, onD = 0;
      for (int u = 0; u < g.numUnits; ++u) {
        if (label[u] != d) continue;
        double alt = kNoKernel;
        for (DeviceId e = 0; e < D; ++e)
          if (e != d) alt = std::min(alt, g.cost[u * D + e]);
        if (alt != kNoKernel) saving += std::max(0.0, alt - g.cost[u * D + d]);
        onD += double(g.memBytes[u]);
      }
      lambda[d] = saving > 0 && onD > 0 ? saving / onD : 1e-15;
    }
    for (int u = 0; u < g.numUnits; ++u)
      for (DeviceId d = 0; d < D; ++d)
        if (g.cost[u * D + d] != kNoKernel)
          unitCost[u * D + d] = g.cost[u * D + d] + lambda[d] * double(g.memBytes[u]);
    minimizeEnergy(g, unitCost, o.maxExpansionCycles, label, stats);
    bytes = bytesPerDevice(g, label);
    ++stats.memoryRounds;
  }
  if (!allFit(p, bytes)) {
    stats.memoryRepairMoves = repairMemory(p, g, label);
    bytes = bytesPerDevice(g, label);
  }
  if (allFit(p, bytes)) stats.memoryRepairMoves += improveWithinCapacity(p, g, label);
  for (DeviceId d = 0; d < D; ++d)
    if (!fits(p, bytes, d))
      return "the ops do not fit in device memory: " + p.devices[d].name + " holds " +
             std::to_string(p.devices[d].memoryCapacityBytes) + " bytes but " +
             std::to_string(bytes[d]) + " bytes remain there after moving every op that fits "
             "elsewhere";
  return "";
}

}  // namespace tandem::placement::detail
