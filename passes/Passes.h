// Tandem's passes (declared in Passes.td, one per file). The IR conventions they share with plan
// emission (attribute names, value names, devices) are in compiler/IrConventions.h.
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
namespace plan {
class Plan;  // compiler/Plan.proto
}

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

// ---- Passes, in pipeline order ----
std::unique_ptr<mlir::Pass> createVerifyPass();
std::unique_ptr<mlir::Pass> createInferShapesPass();
std::unique_ptr<mlir::Pass> createInferShapesPass(const TandemInferShapesOptions& options);
std::unique_ptr<mlir::Pass> createAutodiffPass();
std::unique_ptr<mlir::Pass> createAutodiffPass(const TandemAutodiffOptions& options);
std::unique_ptr<mlir::Pass> createLegalizeF16Pass();
std::unique_ptr<mlir::Pass> createLegalizeF16Pass(const TandemLegalizeF16Options& options);
/// Module attribute --tandem-fuse-qdq sets to how many QDQ convolutions matched but stay f32
/// because this CPU has no fast kernel for their QLinearConv (absent: none).
constexpr const char* kQdqWithoutFastKernelAttr = "tandem.qdq_without_fast_kernel";
/// Set by --tandem-fuse-qdq (require-fast-kernel): how many weight-only quantized products
/// (DequantizeLinear of constants -> MatMul/Gemm) stayed as written because this CPU has no
/// kernel for DequantizeMatMul but the reference; canonicalize then folds their weights to f32.
constexpr const char* kWeightOnlyWithoutFastKernelAttr = "tandem.weight_only_without_fast_kernel";
std::unique_ptr<mlir::Pass> createFuseQdqPass();
std::unique_ptr<mlir::Pass> createFuseQdqPass(const TandemFuseQdqOptions& options);
std::unique_ptr<mlir::Pass> createCanonicalizePass();
std::unique_ptr<mlir::Pass> createCanonicalizePass(const TandemCanonicalizeOptions& options);
std::unique_ptr<mlir::Pass> createOutlineDynamicPass();
/// An eager plan (plan.eager, compiler/Plan.proto; run by runtime/DynamicRegion.h) of `ops`, in
/// order, all on the CPU: `inputs` become its inputs, tandem.constant ops its constants, every
/// other op a step with its attributes (values keep the dims inference knew, -1 where it did
/// not), `outputs` its outputs. Every operand of an op must be an input, a constant, a
/// tandem.none or a result of an earlier op. --tandem-outline-dynamic writes a region's body
/// with it, the importer an If branch that reads values of run-time shape.
void writeEagerPlan(llvm::ArrayRef<mlir::Value> inputs, llvm::ArrayRef<mlir::Operation*> ops,
                    llvm::ArrayRef<mlir::Value> outputs, plan::Plan* out);
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
/// producer as its X), a Conv/Gemm/MatMul epilogue (activation post-op or residual sum), an
/// inference BatchNormalization's Relu (batchnorm-relu), or a channel Concat's inference
/// BatchNormalization (concat-batchnorm-relu). Devices are not looked at.
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

// ---- Pass entry points used outside the pass manager ----

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

/// Canonicalization's composite-op recognition (CanonicalizePatterns.cpp), with `op` the last
/// op of a pattern: GELU in erf and tanh forms -> Gelu; LayerNorm written out over the last
/// axis (ReduceMean, Sub, Pow or Mul, ReduceMean, Add eps, Sqrt, Div, optional constant scale
/// and bias) -> LayerNormalization; Exp / ReduceSum (with or without the max subtraction) ->
/// Softmax; 2-D MatMul + Add -> Gemm. Replaces `op` and returns true on a match; the ops it
/// made dead are left for DCE. Returns false, the IR untouched, on anything else (any op
/// type, rank 0 included): the whole pattern is checked before the first change.
bool rewriteCompositeOp(mlir::IRRewriter& rewriter, mlir::Operation* op);

/// Every GELU written out op by op in `main` (the erf and tanh forms rewriteCompositeOp
/// recognises) becomes one Gelu, and the ops the rewrites left dead are erased. Nothing else
/// changes: no constant is folded or made, so every initializer stays the value it was (the
/// training graph runs this before buildLoss: its Gelu has one gradient rule, where the
/// written-out form differentiated op by op, 25 ops in a GPT's backward). Returns how many.
int rewriteWrittenOutGelu(mlir::func::FuncOp main);

/// Every LayerNorm written out op by op in `main` (rewriteCompositeOp's pattern: ReduceMean,
/// Sub, Pow or Mul, ReduceMean, Add eps, Sqrt, Div over the last axis) whose scale, and bias if
/// any, are f32 [C] constants becomes one LayerNormalization(x, scale, bias) reading those
/// constants themselves, and the ops the rewrites left dead are erased. No constant is folded
/// or made (the training graph runs this before buildLoss: the initializers stay parameters,
/// and LayerNormalization's gradient is one LayerNormalizationGrad op where the written-out
/// form differentiated op by op took about 20). Returns how many.
int rewriteWrittenOutLayerNorm(mlir::func::FuncOp main);

}  // namespace tandem
