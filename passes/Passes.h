// Tandem's passes (declared in Passes.td, one per file) and the small helpers they share.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/placement/DeviceSpec.h"
#include "compiler/placement/Placer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "runtime/Tensor.h"

namespace tandem {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

// ---- Passes, in pipeline order ----
std::unique_ptr<mlir::Pass> createVerifyPass();
std::unique_ptr<mlir::Pass> createInferShapesPass();
std::unique_ptr<mlir::Pass> createInferShapesPass(const TandemInferShapesOptions& options);
std::unique_ptr<mlir::Pass> createCanonicalizePass();
std::unique_ptr<mlir::Pass> createCanonicalizePass(const TandemCanonicalizeOptions& options);
std::unique_ptr<mlir::Pass> createPlacePass();
std::unique_ptr<mlir::Pass> createPlacePass(const TandemPlaceOptions& options);
/// The place pass's configuration as the compiler hands it over, parsed once
/// (CompileOptions); the text options above (tandem-opt) are parsed into the same form.
struct PlaceConfig {
  std::optional<DeviceSet> devices;  // unset: DeviceSet::live()
  std::string profilePath;           // calibration profile JSON; "" = built-in specs
  placement::PlacementPolicy policy = placement::PlacementPolicy::Cost;
  std::vector<placement::NodePin> pins;
  bool strict = false;
};
std::unique_ptr<mlir::Pass> createPlacePass(PlaceConfig config);
std::unique_ptr<mlir::Pass> createInsertTransfersPass();
std::unique_ptr<mlir::Pass> createFusePass();
/// Whether the fuse pass's CPU rules put `consumer` (reading `producer`'s result) in one kernel
/// with it: an element-wise loop of one result type, a row group (a reduction over the last
/// axes, Softmax/LogSoftmax or LayerNormalization over the last axis, reading a loop-fusible
/// producer as its X), or a Conv/Gemm/MatMul epilogue (activation post-op or residual sum).
/// Devices are not looked at.
/// The place pass prices fusion with this, so its costs and the fuse pass agree.
bool cpuFusesIntoProducer(mlir::Operation* producer, mlir::Operation* consumer);
/// The same for the fuse pass's CUDA rules (passes/FuseCuda.cpp): an element-wise chain of one
/// result type, a Gemm/MatMul with its bias Add or Relu/tanh-Gelu (cuBLASLt epilogue), or a
/// same-shape Add feeding a LayerNormalization's X. Devices are not looked at.
bool cudaFusesIntoProducer(mlir::Operation* producer, mlir::Operation* consumer);
std::unique_ptr<mlir::Pass> createPlanMemoryPass();
std::unique_ptr<mlir::Pass> createPlanMemoryPass(const TandemPlanMemoryOptions& options);

/// registerTandemPasses(): registers every tandem pass with MLIR's pass registry (tandem-opt).
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

// ---- IR conventions shared by passes and plan emission ----

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
/// @main argument/result attributes.
inline constexpr const char* kNameAttr = "tandem.name";                    // ONNX input/output name
inline constexpr const char* kDimParamsAttr = "tandem.dim_params";         // [StrAttr] per dim
inline constexpr const char* kArgDeviceAttr = "tandem.device";             // where an input arrives
inline constexpr const char* kArgArenaOffsetAttr = "tandem.arena_offset";  // i64
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

/// Rewrites @main's argument types (and leaves result types to inference): `inputShapes` by
/// `tandem.name` fix whole shapes; `dimBindings` bind symbolic dims by their `tandem.dim_params`
/// name; remaining dynamic dims get `defaultDim` when it is >= 0, each such use recorded in
/// `notes` as "symbolic dim 'N' of input 'x' bound to 1". Errors (emitted on the argument's
/// location): an inputShapes entry whose rank or static dims disagree with the declared type,
/// an unknown input name, a negative binding.
mlir::LogicalResult bindInputShapes(mlir::ModuleOp module,
                                    const std::map<std::string, int64_t>& dimBindings,
                                    const std::map<std::string, Shape>& inputShapes,
                                    int64_t defaultDim, std::vector<std::string>* notes);

/// Re-infers `op`'s result types from its current operands (refining dynamic dims) and sets
/// them. Non-tandem ops are left alone. Errors are emitted on the op's location.
mlir::LogicalResult reinferResultTypes(mlir::Operation* op);

/// Canonicalization's composite-op recognition (CanonicalizePatterns.cpp), with `op` the last
/// op of a pattern: GELU in erf and tanh forms -> Gelu; LayerNorm written out over the last
/// axis (ReduceMean, Sub, Pow or Mul, ReduceMean, Add eps, Sqrt, Div, optional constant scale
/// and bias) -> LayerNormalization; Exp / ReduceSum (with or without the max subtraction) ->
/// Softmax; 2-D MatMul + Add -> Gemm. Replaces `op` and returns true on a match; the ops it
/// made dead are left for DCE. Returns false, the IR untouched, on anything else (any op
/// type, rank 0 included): the whole pattern is checked before the first change.
bool rewriteCompositeOp(mlir::IRRewriter& rewriter, mlir::Operation* op);

/// Makes @main's result types equal to the types of the values it returns.
void updateMainResultTypes(mlir::func::FuncOp main);

}  // namespace tandem
