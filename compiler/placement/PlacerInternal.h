// Internals shared by the placer's files: constraint resolution, the contracted unit graph, the
// binary cut, the expansion driver, the list scheduler and the baselines. Not a public header.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/placement/PlacementGraph.h"
#include "compiler/placement/Placer.h"

namespace tandem::placement::detail {

// ---- Colocation.cpp ---------------------------------------------------------------------------

/// Pins and colocation groups resolved into "units": the sets of ops that must share a device
/// (union-find over the groups), each optionally fixed to a device by a pin.
struct Constraints {
  int numUnits = 0;
  std::vector<int> unitOf;                 // op -> unit; units numbered by their first op
  std::vector<std::vector<OpId>> members;  // unit -> ops, ascending
  std::vector<DeviceId> fixedDevice;       // unit -> pinned device or kNone
  std::vector<std::string> groupName;      // unit -> colocation set name, "" if none
  std::vector<std::uint64_t> feasibleMask; // unit -> devices where every member has a kernel
  /// op -> "pinned", "colocated(<g>)", "fallback(<why>)", or "" (decided later).
  std::vector<std::string> reason;
};

/// Resolves pins and colocation groups (see Placer.h for the rules and messages). Returns "" or
/// the user error.
std::string resolveConstraints(const PlacementProblem& p, bool strict, Constraints& out);

/// "{cpu, cuda:0}" for a device mask.
std::string deviceSetText(const PlacementProblem& p, std::uint64_t mask);

// ---- Placer.cpp: the unit graph ---------------------------------------------------------------

/// The problem after contracting every colocation set into one unit. Only values that can cost
/// a transfer are kept (no constants, no free transfers, at least one reader outside the
/// producer's unit or one output device).
struct UnitGraph {
  int numDevices = 0;
  int numUnits = 0;
  std::vector<double> cost;           // [unit * D + d]: sum of member compute, kNoKernel if any
                                      // member lacks a kernel on d
  std::vector<DeviceId> fixedDevice;  // unit -> device or kNone
  std::vector<std::uint64_t> memBytes;

  struct Value {
    ValueId id = kNone;
    int producerUnit = kNone;        // kNone for a graph input
    DeviceId sourceDevice = kNone;   // the graph input's device
    int consBegin = 0, consEnd = 0;  // into consUnits: distinct reader units != producerUnit
    int outBegin = 0, outEnd = 0;    // into outDevices: distinct output devices
    const double* transfer = nullptr;  // [from * D + to] seconds
  };
  std::vector<Value> values;
  std::vector<int> consUnits;
  std::vector<DeviceId> outDevices;
  std::vector<int> incBegin, incValues;  // unit -> values it produces or reads (CSR)

  double transfer(const Value& v, DeviceId from, DeviceId to) const {
    return from == to ? 0.0 : v.transfer[from * numDevices + to];
  }
};

UnitGraph buildUnitGraph(const PlacementProblem& p, const Constraints& c);

/// Transfer seconds of one value under a unit labelling: sum of T(home -> d) over the distinct
/// devices d != home that read it.
double valueCost(const UnitGraph& g, const UnitGraph::Value& v, const std::vector<DeviceId>& label);
/// The total-cost objective: sum of unitCost[u * D + label[u]] plus every value's transfers.
double energy(const UnitGraph& g, const std::vector<double>& unitCost,
              const std::vector<DeviceId>& label);

/// Ops in a topological order of the value graph, or empty with `cyclic` set.
std::vector<OpId> topologicalOrder(const PlacementProblem& p, bool& cyclic);

// ---- MinCut.cpp -------------------------------------------------------------------------------

/// An s-t cut problem over binary variables: node in S (side 0) or T (side 1). Edges cost their
/// capacity when cut from S to T. Solved with Boost.Graph's boykov_kolmogorov_max_flow
/// (Boykov & Kolmogorov 2004) on a compressed sparse row graph.
class BinaryCut {
 public:
  static constexpr int kSource = -1, kSink = -2;
  explicit BinaryCut(int numNodes);
  int addNode();
  int numNodes() const { return static_cast<int>(termS_.size()); }
  /// Costs `ifS` when the node ends in S, `ifT` when in T (both >= 0).
  void addUnary(int node, double ifS, double ifT);
  /// Costs `capUV` when u in S and v in T, `capVU` when v in S and u in T. Terminals allowed.
  void addPair(int u, int v, double capUV, double capVU = 0);
  /// Forbids u in S with v in T.
  void addInfinite(int u, int v);
  void addConstant(double c) { constant_ += c; }
  /// Minimum cut. side[i] = 0 (S) or 1 (T); returns cut value + constants.
  double solve(std::vector<char>& side) const;

 private:
  struct Pair { int u, v; double uv, vu; bool infinite; };
  std::vector<double> termS_, termT_;  // cost if in T (edge s->i), cost if in S (edge i->t)
  std::vector<Pair> pairs_;
  double constant_ = 0;
};

/// One binary move: every unit keeps `srcLabel[u]` (side S) or switches to `alpha` (side T).
/// Units pinned, already on alpha, or infeasible on one side are fixed. Transfer costs use one
/// gadget per (value, device) -- see the derivation in MinCut.cpp. Writes the new labelling and
/// returns the cut's energy, an upper bound on its true energy (equal when `truncated` is 0;
/// always equal for two devices).
/// `frozen` (optional, per unit): units that keep srcLabel whatever the cut (an alpha-beta swap
/// freezes the units on neither label).
double solveBinaryMove(const UnitGraph& g, const std::vector<double>& unitCost,
                       const std::vector<DeviceId>& srcLabel, DeviceId alpha,
                       std::vector<DeviceId>& outLabel, int& truncated,
                       const std::vector<char>* frozen = nullptr);

// ---- AlphaExpansion.cpp -----------------------------------------------------------------------

/// Minimises energy() over unit labellings respecting feasibility and pins: the exact cut for
/// two devices, alpha-expansion from `label` (must be feasible) otherwise; then the memory
/// capacity loop. Returns "" or a user error (capacity unsatisfiable).
std::string minimizeTotalCost(const PlacementProblem& p, const UnitGraph& g,
                              const PlacerOptions& o, std::vector<DeviceId>& label,
                              PlacerStats& stats);

/// Cheapest feasible device per unit (pinned units on their pin): the expansion's start.
std::vector<DeviceId> initialLabels(const UnitGraph& g);

// ---- Heft.cpp ---------------------------------------------------------------------------------

/// Ops in HEFT upward-rank order (Topcuoglu et al. 2002), which is topological.
std::vector<OpId> rankOrder(const PlacementProblem& p, const std::vector<OpId>& topo);
/// Makespan of a list schedule of `device` in `order` (see PlacementCost::makespanSeconds).
double makespan(const PlacementProblem& p, const std::vector<OpId>& order,
                const std::vector<DeviceId>& device);
/// HEFT-style refinement: sweeps the ops in rank order, moving a free op (singleton unit, not
/// pinned) to the device that finishes it earliest; keeps a sweep only when the whole
/// schedule's makespan improves and memory capacities hold. Returns ops moved.
int refineMakespan(const PlacementProblem& p, const Constraints& c,
                   const std::vector<OpId>& order, std::vector<DeviceId>& device);

// ---- Baselines.cpp ----------------------------------------------------------------------------

/// Per-op devices and reasons for a baseline policy (constraints honoured like the cost plan).
void placeBaseline(const PlacementProblem& p, const Constraints& c, const UnitGraph& g,
                   PlacementPolicy policy, const std::vector<OpId>& topo,
                   std::vector<DeviceId>& device, std::vector<std::string>& reason);

}  // namespace tandem::placement::detail
