// Test helper: a "Fused" step (a tandem.fused in the plan) for the CPU and CUDA fused-kernel
// tests: its "kind" attribute and its body, plan::FusedBody, as compiler/pipeline/EmitPlan.cpp
// writes them.
#pragma once

#include <string>
#include <vector>

#include "compiler/Plan.pb.h"
#include "runtime/Attr.h"
#include "runtime/Kernel.h"
#include "runtime/PlanFormat.h"

namespace tandem {

/// Appends a member of type `op` to `body` and returns its index. `operands` in the kernels'
/// notation (fused::BodyOp::refs): k >= 0 the step's input k, -1 absent, -2 - j member j's result.
inline int addMember(plan::FusedBody* body, const std::string& op, const std::vector<int64_t>& operands,
                     const AttrMap& attrs = {}) {
  plan::FusedBody::Member* m = body->add_members();
  m->set_op_type(op);
  for (int64_t r : operands) {
    plan::FusedBody::Operand* o = m->add_inputs();
    if (r >= 0) o->set_step_input((int32_t)r);
    else if (r <= -2) o->set_member((int32_t)(-2 - r));
  }
  for (const auto& [name, a] : attrs.all()) attrToPlan(name, a, m->add_attrs());
  return body->members_size() - 1;
}

/// Sets (adds or replaces) attribute `name` of member `j`.
inline void setMemberAttr(plan::FusedBody* body, int j, const std::string& name, const Attr& a) {
  plan::FusedBody::Member* m = body->mutable_members(j);
  for (plan::Attribute& old : *m->mutable_attrs())
    if (old.name() == name) {
      old.Clear();
      attrToPlan(name, a, &old);
      return;
    }
  attrToPlan(name, a, m->add_attrs());
}

/// The step's attributes and body; bind() points a KernelContext at both (they must outlive the
/// kernel's creation).
struct FusedStep {
  AttrMap attrs;
  plan::FusedBody body;
  void setMemberAttr(int j, const std::string& name, const Attr& a) { tandem::setMemberAttr(&body, j, name, a); }
  void bind(KernelContext* ctx) const {
    ctx->attrs = &attrs;
    ctx->fusedBody = &body;
  }
};

/// Members of types `ops`, each reading its `operands` (as addMember); `outputsFrom`: per step
/// output, the member it is. Member shapes are left unset: each is the step's output 0 shape.
inline FusedStep fusedStep(const std::string& kind, const std::vector<std::string>& ops,
                           const std::vector<std::vector<int64_t>>& operands,
                           const std::vector<int64_t>& outputsFrom) {
  FusedStep s;
  s.attrs.set("kind", Attr::ofString(kind));
  for (size_t j = 0; j < ops.size(); ++j)
    addMember(&s.body, ops[j], j < operands.size() ? operands[j] : std::vector<int64_t>{});
  for (int64_t j : outputsFrom) s.body.add_results((int32_t)j);
  return s;
}

}  // namespace tandem
