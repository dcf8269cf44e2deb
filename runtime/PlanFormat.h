// What the runtime reads of a Plan (compiler/Plan.proto) besides its structure: the version it
// accepts, and plan attributes and tensors as the runtime's Attr and Tensor (both directions, so
// the compiler writes them with the same table).
#pragma once
#include <string>

#include "compiler/Plan.pb.h"
#include "runtime/Attr.h"
#include "runtime/Status.h"

namespace tandem {

/// The Plan.version this tandem writes and reads. 3: a variable's update may alias the
/// variable's buffer (Value.aliases_variable; a version-2 runtime would ignore it and write the
/// update over arena offset 0). 2: a fused step's body is the typed Step.fused_body (version 1
/// spelled it as "ops"/"op_inputs"/"<j>.attr" step attributes).
constexpr int kPlanVersion = 3;

/// ok for kPlanVersion; otherwise an error that says which tandem wrote the plan and that the
/// model must be recompiled ("plan version 1 was written by an older tandem; ...").
Status checkPlanVersion(int version);

/// A plan tensor as a host Tensor. Errors: an unknown dtype code, a negative dimension, a size
/// that overflows or disagrees with raw's length (`what` names the tensor in the message).
Status tensorFromPlan(const plan::TensorData& d, const std::string& what, Tensor* out);

/// Plan attributes (a step's or a fused member's) added to `out` by name. Errors: an unknown
/// kind, a bad TENSOR value (as tensorFromPlan).
Status attrsFromPlan(const google::protobuf::RepeatedPtrField<plan::Attribute>& attrs, AttrMap* out);

/// `a` as a plan attribute named `name` (what compiler/pipeline/EmitPlan.cpp writes).
void attrToPlan(const std::string& name, const Attr& a, plan::Attribute* out);

}  // namespace tandem
