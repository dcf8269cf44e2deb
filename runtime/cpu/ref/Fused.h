// The CPU side of tandem.fused steps (op type "Fused"): the plan's body decoded, and
// the kernels every backend can fall back to (unfused composite, element-wise loop, row kernel
// for a reduction root with element-wise producers).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/Kernel.h"

namespace tandem {
namespace fused {

/// One op of a fusion group's body.
struct BodyOp {
  std::string type;           // ONNX op type
  std::string name;           // its node name, for messages; may be empty
  AttrMap attrs;              // its attributes
  std::vector<int64_t> refs;  // per operand: k >= 0 step input k; -1 absent; -2 - j body op j
};

/// A "Fused" step decoded: the step's "kind" attribute ("conv-epilogue", "gemm-epilogue",
/// "elementwise", "batchnorm-relu", "concat-batchnorm-relu", or a row group: "reduction",
/// "softmax", "layernorm", "add-layernorm") and its body, KernelContext::fusedBody (plan::FusedBody in
/// compiler/Plan.proto, written by compiler/pipeline/EmitPlan.cpp), in the kernels' encoding.
/// Every body op has one result, of the step's dtype; its shape is the member's or, where the
/// member gives none, that of the step's output 0.
struct Body {
  std::string kind;
  std::vector<BodyOp> ops;
  std::vector<Shape> shapes;         // result shape per body op
  std::vector<int64_t> outputsFrom;  // body op index per step output
};

/// Decodes and checks the body (references in range, earlier ops only, one output at least,
/// outputs typed as their members). The one reader of plan::FusedBody in the runtime. Errors
/// name the member ("Fused: member 2 (Relu) ...").
Status parseBody(const KernelContext& ctx, Body* out);

/// The KernelContext of body op `k`: its operands typed from the step (step inputs, constant
/// values included) or, for body results, by Body::shapes. `attrs` must outlive it.
KernelContext bodyOpContext(const KernelContext& step, const Body& body, size_t k);

/// Runs the body op by op with the best kernel `registry` has for each (intermediates in buffers
/// owned by the kernel; outputs copied out last, so outputs may alias inputs). `note` is added
/// to implName() to say why the group runs unfused. `registry` must outlive the kernel's
/// creation (the one the Fused def is registered in).
Status createUnfused(const KernelRegistry& registry, const KernelContext& ctx, const Body& body,
                     const std::string& note, std::unique_ptr<Kernel>* out);

/// One loop over memory for an "elementwise" body (f32, operands full-size or scalar): each
/// chunk of elements is read once, evaluated through the whole body in registers/L1, and every
/// output written once. Outputs may alias inputs. Fails for ops the loop does not know.
Status createElementwiseLoop(const KernelContext& ctx, const Body& body,
                             std::unique_ptr<Kernel>* out);

/// One pass over memory for a row group (f32): the body is element-wise loop ops (as above, on
/// X's shape) and last the root, reading X as operand 0: ReduceSum/ReduceMean/ReduceMax/
/// ReduceMin/ReduceL2/ReduceSumSquare over the last axes, Softmax/LogSoftmax or LayerNormalization (Scale, optional B of
/// the row's length) over the last axis. Each row of X (the reduced run) is computed by the
/// loop chunk by chunk and reduced as it comes, or kept in a row buffer (L1/L2-resident) for
/// the normalising roots (statistics, then the normalised row); loop values that are step
/// outputs (the residual sum of add-layernorm) are written as they are made. Outputs may alias
/// the loop's inputs (plan-memory's rule). Statistics accumulate in double. Fails for a body
/// of another form.
Status createRowKernel(const KernelContext& ctx, const Body& body, std::unique_ptr<Kernel>* out);

}  // namespace fused
}  // namespace tandem
