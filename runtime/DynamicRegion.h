// The CPU kernel of a DynamicRegion step: the ops downstream of a value-dependent result size
// (NonZero, Compress, Unique, NonMaxSuppression, TopK with a computed K), outlined by the
// compiler (--tandem-outline-dynamic, passes/Passes.td) into one step whose `body` attribute
// is their plan (compiler/Plan.proto; values of unknown dims are -1, no arena offsets).
//
// Each run executes the body's steps in order, eagerly, as ONNX Runtime runs every graph:
// a step's result types come from the compiler's shape functions (compiler/ShapeInference.h,
// MLIR-free) given its operands' run-time shapes and the values of its shape operands
// (shapeOperandPositions) and of every operand up to 4,096 elements; its results are allocated
// at that size (an op whose result size is counted from its data, sizeCountedFromData in
// runtime/DataDependent.h, gets an unknown dim instead and its kernel sizes the result, so
// NonMaxSuppression runs once, not once to size and once to fill); an op that only moves
// elements as they lie (Reshape, Flatten, Squeeze, Unsqueeze, Identity, a Transpose keeping
// the order of its non-unit dims, a Split into contiguous chunks) is a view sharing its
// operand's buffer instead, no kernel and no copy; its kernel is the registry's best CPU kernel for those types, created on first
// use and kept per step for the last 16 distinct operand signatures (types and shape-operand
// values), so a region that sees the same shapes again creates nothing. Where the kernel has
// variants (KernelDef::variants: oneDNN or Tandem's packed GEMM, ...) and its first run took
// 1 ms or more, each variant is timed on that run's operands and the fastest kept, as the
// loader tunes a plan's steps (not when LoadOptions::tuning is off; not written to the timing
// cache). Operands the outer plan
// holds as constants (weights) are constants of the body's kernels too, prepacked once per
// signature. The step's outputs are allocated by the kernel, at the size the run gives them
// (the executor binds no arena slot to them: runtime/Executable.h). The results the executor
// sizes, and those the value-sized kernels size (KernelContext::allocResult), come
// uninitialised (every kernel writes its outputs whole) from a caching arena the plan keeps (runtime/CachingArena.h over host memory): a run reuses the pages of the last
// instead of faulting in fresh zeroed ones, and the arena holds at most the region's peak.
//
// Errors name the body step ("DynamicRegion 'r': step 'n' (Gather): ..."): a shape function's
// error with the run-time operands, a result size it still cannot know, no CPU kernel for the
// run-time dtypes, or the kernel's own error. Runs of one Executable through one region are
// serialised (its kernel cache is shared).
//
// The same executor runs control-flow subgraphs compiled as eager bodies (plan.eager: an If
// branch or a Loop body that reads values of run-time shape, or a Loop body whose loop-carried
// values change shape, runtime/ControlFlow.h): EagerPlan. An If or Loop whose result dims stay
// unknown with the run-time operands (branches of different shapes; a Loop's iteration count
// or loop-carried shapes) is sized by its kernel, like the ops counted from their data.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/Kernel.h"

namespace tandem {
namespace plan {
class Plan;
}

/// An eager body (plan.eager, compiler/Plan.proto) ready to run: its steps' kernels are created
/// on first use per operand signature, as described above.
class EagerPlan {
 public:
  /// `label` prefixes every error ("DynamicRegion 'r'"). `outer`: the context of the step
  /// that runs the body, whose threads, seed, winograd and measureVariants its kernels take.
  /// `constInputs`: per body input, the outer plan's constant it always receives (kept by
  /// pointer: must outlive this), or null for a run-time value. Errors: a body whose ids, op
  /// types or attributes do not resolve.
  static Status load(plan::Plan body, const std::string& label, const KernelContext& outer,
                     const std::vector<const Tensor*>& constInputs, std::unique_ptr<EagerPlan>* out);
  ~EagerPlan();
  /// Runs the body on `inputs` (its inputs in order, host tensors of the declared dtypes and
  /// ranks; any dims); `outputs` gets its outputs, owning. Thread-safe (one run at a time).
  /// `subSteps` (optional) gets each body step's timing, operand types and kernel, in order.
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
             std::vector<SubStepTiming>* subSteps = nullptr);
  size_t numSteps() const;

 private:
  EagerPlan();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Registers the DynamicRegion CPU kernel (KernelRegistry::global() calls it).
void registerDynamicRegionKernel(KernelRegistry& r);

}  // namespace tandem
