// The placer: device per op for a PlacementProblem under the cost objective or a baseline
// policy, and the evaluator that prices any placement the same way.
//
// Algorithms (DESIGN §4):
//  1. Constraints: colocation groups merged by union-find, pins honoured when feasible
//     (Colocation.cpp).
//  2. Two devices: the exact minimum s-t cut of Stone 1977 ("Multiprocessor scheduling with the
//     aid of network flow algorithms", IEEE TSE 3(1)), with one gadget per (value, device) so a
//     value is charged once per destination device and H2D != D2H; max-flow by Boost.Graph's
//     boykov_kolmogorov_max_flow (Boykov & Kolmogorov 2004) (MinCut.cpp).
//  3. More devices: alpha-expansion (Boykov, Veksler & Zabih 2001, "Fast approximate energy
//     minimization via graph cuts", IEEE PAMI 23(11)) over the same cuts, then a HEFT-style
//     list-scheduling refinement for makespan (Topcuoglu, Hariri & Wu 2002, IEEE TPDS 13(3))
//     (AlphaExpansion.cpp, Heft.cpp).
//  4. Memory: a device's capacity bounds the bytes of the ops placed there: a per-byte penalty
//     on that device, raised and re-solved until the plan fits, then a greedy repair.
//  5. Baselines: greedy (TensorFlow), ort (ONNX Runtime), cpu, gpu (Baselines.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "compiler/placement/PlacementGraph.h"

namespace tandem::placement {

enum class PlacementPolicy {
  Cost,    // minimum estimated time (the default)
  Greedy,  // TensorFlow: first non-cpu device with a kernel, else cpu
  Ort,     // ONNX Runtime: execution providers cuda then cpu, plus its small-input cpu fallback
  Cpu,     // every op on the first cpu with a kernel (else its first feasible device)
  Gpu,     // every op on the first cuda device with a kernel, else cpu
};
/// "cost", "greedy", "ort", "cpu", "gpu".
const char* policyName(PlacementPolicy p);
std::optional<PlacementPolicy> parsePolicy(const std::string& name);

/// A user pin (--pin NODE=DEVICE): the op whose node name (its NameLoc) is `node` goes on
/// `device`, a canonical device name (runtime/Device.h canonicalDeviceName); soft unless the
/// compile is strict (CompileOptions::strictPlacement).
struct NodePin {
  std::string node;
  std::string device;
};

enum class MakespanRefinement { Auto /* on with >= 3 devices */, On, Off };

struct PlacerOptions {
  PlacementPolicy policy = PlacementPolicy::Cost;
  /// Strict placement: an unsatisfiable pin is an error instead of a fallback.
  bool strict = false;
  MakespanRefinement refinement = MakespanRefinement::Auto;
  int maxExpansionCycles = 16;  // sweeps over all devices; stops earlier when none improves
  int maxMemoryRounds = 24;     // penalty re-solves before the greedy repair
};

struct PlaceResult {
  std::string error;  // user error; empty on success
  Placement placement;
  bool ok() const { return error.empty(); }
};

/// Places every op.
///
/// Constraints, in order:
///  - An op with no kernel on any device is an error: "op 'x' (Foo) has no kernel on any target
///    device (cpu, cuda:0)".
///  - Colocation sets (groups sharing an op merge) land on one device among those where every
///    member has a kernel; none is an error naming two members and their devices.
///  - A pin to a device where the op (and its colocation set) has kernels is honoured (reason
///    `pinned`; the set's other members get `colocated(<group>)`). Otherwise, with soft placement,
///    the op is placed as if unpinned with reason `fallback(pinned device X has no kernel for
///    Op)` (or `fallback(X is not a target)`); with strict placement (PlacerOptions::strict or
///    Pin::strict) it is an error.
///  - Two satisfiable pins in one colocation set on different devices are an error in either
///    mode: "op 'a' is pinned to cuda:0 but is colocated (group 'w1') with op 'b' pinned to cpu".
///  - Cost policy only: the ops' memoryBytes on a device stay within its capacity, else error.
/// Unconstrained ops get `only-kernel` (one feasible device) or `cost` / `policy(<name>)`.
///
/// Estimated time: PlacementCost of the result (evaluatePlacement). The cost policy minimises
/// totalSeconds exactly for two devices and approximately (alpha-expansion) for more, and then,
/// with refinement on, lowers makespanSeconds (which may raise totalSeconds).
PlaceResult placeGraph(const PlacementProblem& problem, const PlacerOptions& options = {});

struct EvalResult {
  std::string error;  // invalid problem, wrong size, or an op on a device without its kernel
  PlacementCost cost;
  bool ok() const { return error.empty(); }
};

/// Prices a placement (one device per op): compute seconds of every op on its device, one copy
/// per (value, destination device != home) at the value's transfer time from its home, and the
/// list-schedule makespan. Constants cost nothing. Memory is reported, not enforced.
EvalResult evaluatePlacement(const PlacementProblem& problem, const std::vector<DeviceId>& device);

}  // namespace tandem::placement
