// The abstract placement problem (devices, ops, values with costs already computed) and its result.
//
// The placer never sees MLIR or the cost model: the place pass turns a module into a
// PlacementProblem (compute times and transfer times in seconds from the CostModel, feasibility
// from the kernel registry), calls placeGraph() (Placer.h), and writes the Placement back.
// Everything here is plain C++17 data.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tandem::placement {

using DeviceId = int;  // index into PlacementProblem::devices
using OpId = int;      // index into PlacementProblem::ops
using ValueId = int;   // index into PlacementProblem::values
constexpr int kNone = -1;

/// Compute time of an op on a device without a kernel for it.
constexpr double kNoKernel = std::numeric_limits<double>::infinity();

/// One target device.
struct PlacementDevice {
  std::string name;  // canonical: "cpu", "cpu:1", "cuda:0"
  std::string kind;  // "cpu" or "cuda" (baselines look at it: greedy/ort/gpu prefer non-cpu)
  /// Bytes that ops placed here may keep resident (sum of PlacementOp::memoryBytes);
  /// 0 = unbounded.
  std::uint64_t memoryCapacityBytes = 0;
};

/// A user pin: `device` as the user spelled it after canonicalisation ("cuda:0"). It need not be
/// a target; a pin to a non-target or to a device without a kernel is unsatisfiable.
struct Pin {
  std::string device;
  /// Unsatisfiable => error instead of fallback (also forced by PlacerOptions::strict).
  bool strict = false;
};

/// One op of the dataflow graph.
struct PlacementOp {
  std::string name;    // ONNX node name (or any unique label) for reasons and errors
  std::string opType;  // "Conv", "Shape", ...; in messages, and the ORT baseline's Shape/Size rule
  /// Seconds to run the op on each device, size == devices.size(); kNoKernel where the device
  /// has no kernel (the op is infeasible there). Must be finite and >= 0 elsewhere.
  std::vector<double> computeSeconds;
  /// Bytes that must stay resident on the op's device (its outputs plus weights it owns); counted
  /// against PlacementDevice::memoryCapacityBytes.
  std::uint64_t memoryBytes = 0;
  std::optional<Pin> pin;
  /// Colocation groups the op belongs to (names). Groups sharing an op merge (union-find);
  /// every op of a merged set lands on one device.
  std::vector<std::string> colocation;

  bool feasible(DeviceId d) const { return computeSeconds[d] != kNoKernel; }
};

/// Where a value comes from.
enum class ValueSource {
  Op,          // produced by `producer`
  GraphInput,  // a graph input resident on `inputDevice` (e.g. host memory: cpu)
  Constant,    // a weight: uploaded once at load to every device that reads it, never copied
               // per run, so it costs no transfer time (its bytes belong in the readers'
               // memoryBytes). Kept in the problem for the ORT baseline's small-initializer rule.
  Variable,    // training state, resident across runs on the device of op `producer` (its
               // update, which the colocation group keeps with the variable): a reader on
               // another device gets a per-run copy like any value, but within the run it is
               // ready at the start (no data dependency on `producer`, which writes it after)
};

/// One tensor of the graph. A value read on a device other than its home (its producer's
/// device, a variable's home op's device, or the input device) is copied there once per run, however many consumers it has
/// there (one copy per (value, destination device)).
struct PlacementValue {
  std::string name;
  ValueSource source = ValueSource::Op;
  OpId producer = kNone;            // ValueSource::Op; ValueSource::Variable: its home op
  DeviceId inputDevice = kNone;     // ValueSource::GraphInput
  std::vector<OpId> consumers;      // duplicates allowed (an op reading the value twice)
  /// Graph outputs: devices where the value must be present after the run (e.g. cpu for a
  /// host-resident output). Crossing to one costs its transfer like a consumer there.
  std::vector<DeviceId> outputDevices;
  std::uint64_t bytes = 0;
  std::int64_t elements = -1;  // element count, -1 unknown (ORT baseline's <= 100 rule)
  /// Seconds to copy the value from device `from` to device `to`, row-major
  /// [from * devices.size() + to]; the diagonal is ignored (0). Directions may differ
  /// (H2D != D2H). Empty means free transfers. Unused for constants.
  std::vector<double> transferSeconds;

  double transfer(DeviceId from, DeviceId to, int numDevices) const {
    return from == to || transferSeconds.empty() ? 0.0
                                                 : transferSeconds[from * numDevices + to];
  }
};

/// The whole problem. Ops may come in any order; the value graph must be acyclic.
struct PlacementProblem {
  std::vector<PlacementDevice> devices;  // in preference order (the first cpu is "the cpu")
  std::vector<PlacementOp> ops;
  std::vector<PlacementValue> values;
};

/// One per-run copy: `value` moved from its home device to `to`.
struct PlacementCopy {
  ValueId value = kNone;
  DeviceId from = kNone, to = kNone;
  std::uint64_t bytes = 0;
  double seconds = 0;
};

/// Estimated cost of a placement (see evaluatePlacement in Placer.h).
struct PlacementCost {
  double computeSeconds = 0;   // sum of op times on their devices
  double transferSeconds = 0;  // sum over copies
  double totalSeconds = 0;     // compute + transfer: the objective of the min cut / expansion
  /// Finish time of a list schedule with the devices running in parallel, each op as soon as
  /// its inputs have arrived and its device is free (ops in HEFT upward-rank order, Topcuoglu
  /// et al. 2002); copies overlap compute and each other (no link contention modelled).
  double makespanSeconds = 0;
  std::vector<PlacementCopy> copies;          // sorted by (value, to)
  std::vector<std::uint64_t> bytesPerDevice;  // sum of memoryBytes of the ops on each device
};

/// Statistics of one placeGraph() call, for the log and the benchmarks.
struct PlacerStats {
  std::string algorithm;      // "single-device", "min-cut", "alpha-expansion", or the baseline
  int units = 0;              // variables after colocation contraction
  int maxflowSolves = 0;
  int starts = 0;             // local searches (alpha-expansion starts)
  int expansionCycles = 0;    // cycles of moves over all devices, summed over the starts
  int truncatedTerms = 0;     // non-submodular transfer terms bounded in expansion moves
  int memoryRounds = 0;       // re-solves with a capacity penalty
  int memoryRepairMoves = 0;  // unit moves of the capacity repair and descent
  int heftMoves = 0;          // ops the makespan refinement moved
  double costBeforeRefinement = 0;      // totalSeconds after the cut / expansion
  double makespanBeforeRefinement = 0;  // its makespan
  double seconds = 0;                   // wall time of placeGraph
};

/// The answer: a device and a reason per op, the copies, and the estimated cost.
struct Placement {
  std::vector<DeviceId> device;  // per op
  /// Per op: "pinned", "colocated(<group>)", "only-kernel", "cost", "fallback(<why>)", or for
  /// a baseline policy "policy(<name>)" ("policy(ort-cpu-fallback)" for ORT's small-input rule).
  std::vector<std::string> reason;
  PlacementCost cost;
  PlacerStats stats;
};

}  // namespace tandem::placement
