// Control flow (ONNX If-16, Loop-16, Scan-16 on tensors): what the compiler's shape functions and
// the CPU kernels (runtime/ControlFlowKernels.cpp) both read about a subgraph. MLIR-free.
//
// Each subgraph is compiled ahead of time, by the importer, into a CPU plan of its own (a GRAPH
// attribute: compiler/Plan.proto). Its graph inputs, in order, are the subgraph's ONNX inputs
// followed by the outer-scope values it reads (its captures), which the op takes as extra
// operands after its ONNX ones, in the same order:
//   If:   operands (cond, captures...);                     branches: (captures...) -> results
//   Loop: operands (M, cond, v_initial[N], captures[K]);    body: (iter i64[], cond bool[],
//         v[N], captures[K]) -> (cond bool[], v[N], scan[S]); results (v_final[N], scans[S])
//   Scan: operands (state[N], scan_inputs[M], captures[K]); body: (state[N], slices[M],
//         captures[K]) -> (state[N], scan_slices[S]); results (state_final[N], scans[S])
// K is the attribute num_captures (Loop, Scan). A subgraph plan has static shapes, so in it a
// loop-carried value keeps its shape across iterations. Where that cannot hold, the importer
// writes the If branches or the Loop body as an eager plan (plan.eager, run op by op with the
// shapes met: runtime/DynamicRegion.h), with a Loop body's loop-carried inputs of unknown dims:
// when the subgraph reads values of run-time shape, or when a Loop body compiled with static
// shapes gives a loop-carried value another shape than it took. A Loop's stacked scan outputs
// have a planned length when its trip count does not depend on values the body computes
// (plannedLoopIterations); otherwise that length, like an eager body's loop-carried dims, is
// unknown, the Loop runs in a dynamic region and its kernel sizes them. Scan's body is always
// a static plan.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/Plan.pb.h"
#include "runtime/Attr.h"
#include "runtime/Status.h"

namespace tandem {

/// The static type of one graph input or output of a subgraph plan.
struct SubgraphValueType {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
};

/// A subgraph plan's graph input and output types, in order.
struct SubgraphSignature {
  std::vector<SubgraphValueType> inputs, outputs;
};

/// Parses the GRAPH attribute `name` of `attrs` into `plan` (and, when non-null, its signature).
/// Error when it is absent, not a GRAPH or not a valid plan.
Status parseSubgraph(const AttrMap& attrs, const std::string& name, plan::Plan* plan,
                     SubgraphSignature* signature = nullptr);

/// How a Loop body computes its condition output (body output 0).
enum class LoopCondition {
  PassThrough,  // the condition input itself: loop-invariant
  True,         // a constant true
  False,        // a constant false: the body runs at most once
  Computed,     // anything else: known only at run time
};
LoopCondition loopConditionOf(const plan::Plan& body);

/// The number of iterations of a Loop whose trip count `m` and initial condition `cond` are
/// known (nullopt: the operand is absent, or not a constant when `known` is false), or -1 when it
/// depends on values the body computes or on an operand that is not a constant. An absent M with
/// a condition that stays true loops forever: -1 too.
int64_t plannedLoopIterations(LoopCondition bodyCondition, std::optional<int64_t> m, bool mKnown,
                              std::optional<bool> cond, bool condKnown);

/// "f32[2,3]" for messages.
std::string subgraphTypeString(const SubgraphValueType& t);

}  // namespace tandem
