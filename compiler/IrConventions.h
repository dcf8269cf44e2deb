// The IR conventions shared by the passes, plan emission and the tools: the discardable
// attributes passes set, names of values and locations, devices of ops, and result-type
// re-inference. MLIR code only; the runtime never sees these (it reads the Plan).
#pragma once
#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace tandem {

/// Discardable attributes the passes set on ops.
inline constexpr const char* kDeviceAttr = "device";                             // StrAttr
inline constexpr const char* kPlacementReasonAttr = "placement_reason";          // StrAttr
inline constexpr const char* kPlacementCandidatesAttr = "placement_candidates";  // [StrAttr]
inline constexpr const char* kPlacementCostsAttr = "placement_costs";  // {device: f64 seconds}
// {device: StrAttr}: devices where placement_costs is the runtime's measured time (the kernel
// timing cache) rather than a model: "measured" for the op's own step or a group it heads,
// "measured-group" for an op fused into a measured head (its time is in the head's). Absent
// when no cost was measured.
inline constexpr const char* kPlacementSourcesAttr = "placement_cost_sources";
// {into: producer name, devices: [StrAttr]}: the op fuses into its producer on these devices,
// and placement_costs there are the fused costs (cpuFusesIntoProducer, passes/Fuse.cpp).
inline constexpr const char* kPlacementFusionAttr = "placement_fusion";
// {device: StrAttr why}: devices with a kernel for the op's dtypes that refuse this instance
// (attributes, shapes: compiler/placement/KernelCapabilities.h deviceKindRejects).
inline constexpr const char* kPlacementRefusedAttr = "placement_refused";
inline constexpr const char* kArenaOffsetAttr = "arena_offset";  // I64ArrayAttr, per result
inline constexpr const char* kFusionRefusedAttr = "fusion_refused";  // StrAttr: why not fused
/// StrAttr on a cheap producer copied into each of its readers' groups (--tandem-fuse's
/// duplication), e.g. "a copy in each of 2 readers"; `fusion_not_duplicated` says why one that
/// qualified otherwise was not ("Exp is expensive (2 readers)").
inline constexpr const char* kFusionDuplicatedAttr = "fusion_duplicated";
inline constexpr const char* kFusionNotDuplicatedAttr = "fusion_not_duplicated";
/// [StrAttr] per result: "blocked" where the value stays in oneDNN's channel-blocked layout
/// between CPU steps (set by --tandem-fuse; emitted as step input_layouts/output_layouts).
inline constexpr const char* kResultLayoutsAttr = "result_layouts";
/// The layout `v` is stored in between steps: its producer's result_layouts entry ("blocked"),
/// or "" (plain row-major) for a block argument or a result without one.
std::string resultLayout(mlir::Value v);
/// Whether `v` is a result of a tandem.dynamic_region (--tandem-outline-dynamic): its producer
/// allocates it at run time, with the shape the run gives it, so it has no arena slot.
bool isAllocatedAtRunTime(mlir::Value v);
/// @main argument/result attributes.
inline constexpr const char* kNameAttr = "tandem.name";                    // ONNX input/output name
inline constexpr const char* kDimParamsAttr = "tandem.dim_params";         // [StrAttr] per dim
inline constexpr const char* kArgDeviceAttr = "tandem.device";             // where an input arrives
inline constexpr const char* kArgArenaOffsetAttr = "tandem.arena_offset";  // i64
// Resident state (training): an @main argument with `tandem.variable` (its initial value, an
// ElementsAttr) is a variable, not a graph input; the @main result with `tandem.variable_update`
// (the variable's tandem.name) is its value after a run, not a graph output. Ops that must share
// a device with a variable carry its group in `tandem.colocation` ([StrAttr]; the placer merges
// groups that share an op). compiler/training/Variables.h makes them.
inline constexpr const char* kVariableAttr = "tandem.variable";
inline constexpr const char* kVariableUpdateAttr = "tandem.variable_update";
// On a variable's update result (UnitAttr, set by --tandem-plan-memory): the update is written
// straight into the variable's buffer rather than into the arena and copied back after a run.
inline constexpr const char* kVariableInPlaceAttr = "tandem.variable_in_place";
inline constexpr const char* kColocationAttr = "tandem.colocation";
// On the ops that sum a training step's metrics (UnitAttr, compiler/training/TrainingGraph.h):
// bookkeeping that goes where the loss goes (they share its colocation group) and must not
// decide where that is, so the placer prices them at 0 on every device with a kernel for them.
inline constexpr const char* kMetricAttr = "tandem.metric";
/// Whether argument `arg` of @main is a variable (kVariableAttr).
bool isVariableArg(mlir::Value v);
/// Whether result `i` of @main is a variable's update (kVariableUpdateAttr).
bool isVariableUpdateResult(mlir::func::FuncOp main, unsigned i);
/// Module attributes.
inline constexpr const char* kModelNameAttr = "tandem.model_name";
inline constexpr const char* kPlacementEstimatesAttr = "tandem.placement_estimates";  // {policy: {total_s, makespan_s}}
inline constexpr const char* kPlacementPolicyAttr = "tandem.placement_policy";  // StrAttr
inline constexpr const char* kCopyEstimatesAttr = "tandem.copy_estimates";  // {"value->to": f64 s}
inline constexpr const char* kDevicesAttr = "tandem.devices";  // [StrAttr], the targets placed on
inline constexpr const char* kArenaPeakAttr = "tandem.arena_peak_bytes";            // {dev: i64}
inline constexpr const char* kArenaUnplannedAttr = "tandem.arena_unplanned_bytes";  // {dev: i64}

/// The graph: `func.func @main` of `module`, or null.
mlir::func::FuncOp getMainFunc(mlir::ModuleOp module);

/// The node name a location carries: NameLoc's name (looking through FusedLoc and CallSiteLoc),
/// or "" when there is none.
std::string nodeName(mlir::Location loc);

/// A location as text for logs and plans: "conv1", "conv1 at model.py:12:3", "f.mlir:3:8"; ""
/// for an unknown location.
std::string locationString(mlir::Location loc);

/// A readable name for a value, for messages and the plan: the `tandem.name` of an @main
/// argument ("x", else "arg0"); the producer's node name for results ("conv1", "split:1" for
/// result 1), or "<OpType>@<locationString>" ("Relu@f.mlir:3:8") when the producer has no name.
std::string valueName(mlir::Value v);

/// Canonical device name: lower case, "/device:GPU:0", "gpu:0", "cuda" -> "cuda:0";
/// "CPU:0", "/cpu:0" -> "cpu"; "cpu:1" stays. Returns "" for something that is not a device.
std::string canonicalDevice(const std::string& name);
/// "cpu" for "cpu:1", "cuda" for "cuda:0".
std::string deviceKindOf(const std::string& device);

/// The device an op (`device` attribute) or an @main argument (`tandem.device`) was placed on;
/// "" when unplaced or not a placed value.
std::string deviceOfOp(mlir::Operation* op);
std::string deviceOfValue(mlir::Value v);

/// Re-infers `op`'s result types from its current operands (refining dynamic dims) and sets
/// them. Non-tandem ops are left alone. Errors are emitted on the op's location.
mlir::LogicalResult reinferResultTypes(mlir::Operation* op);

/// ONNX attribute readers (the importer keeps ONNX's attributes on the op): the integer, float
/// or string attribute `name`, or `dflt` when the op has none of that kind.
int64_t intAttrOr(mlir::Operation* op, llvm::StringRef name, int64_t dflt);
double floatAttrOr(mlir::Operation* op, llvm::StringRef name, double dflt);
std::string strAttrOr(mlir::Operation* op, llvm::StringRef name, llvm::StringRef dflt);
/// The integer entries of array attribute `name` in order (non-integer entries skipped); empty
/// when absent.
llvm::SmallVector<int64_t> intsAttr(mlir::Operation* op, llvm::StringRef name);
/// `n` values: entry i of integer array attribute `name` where it has one, `dflt` elsewhere
/// (kernel_shape, strides, dilations, pads with their ONNX defaults).
llvm::SmallVector<int64_t> intsAttrOr(mlir::Operation* op, llvm::StringRef name, int64_t n,
                                      int64_t dflt);

/// Makes @main's result types equal to the types of the values it returns.
void updateMainResultTypes(mlir::func::FuncOp main);

}  // namespace tandem
