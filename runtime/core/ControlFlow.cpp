// Subgraph plans of the control-flow ops: signatures and planned trip counts (runtime/ControlFlow.h).
#include "runtime/ControlFlow.h"

#include "runtime/DType.h"
#include "runtime/Tensor.h"

namespace tandem {

Status parseSubgraph(const AttrMap& attrs, const std::string& name, plan::Plan* plan,
                     SubgraphSignature* signature) {
  const std::string* bytes = attrs.getGraph(name);
  if (!bytes) return Status::error("has no subgraph attribute '" + name + "'");
  if (!plan->ParseFromString(*bytes))
    return Status::error("subgraph '" + name + "' is not a valid plan");
  if (!signature) return Status::ok();
  signature->inputs.clear();
  signature->outputs.clear();
  auto typeOf = [&](int id, SubgraphValueType* t) -> Status {
    if (id < 0 || id >= plan->values_size())
      return Status::error("subgraph '" + name + "' names value " + std::to_string(id) +
                           ", which it does not have");
    const plan::Value& v = plan->values(id);
    t->dtype = (DType)v.dtype();
    t->dims.assign(v.dims().begin(), v.dims().end());
    return Status::ok();
  };
  for (int id : plan->inputs()) {
    signature->inputs.emplace_back();
    TANDEM_RETURN_IF_ERROR(typeOf(id, &signature->inputs.back()));
  }
  for (int id : plan->outputs()) {
    signature->outputs.emplace_back();
    TANDEM_RETURN_IF_ERROR(typeOf(id, &signature->outputs.back()));
  }
  return Status::ok();
}

LoopCondition loopConditionOf(const plan::Plan& body) {
  if (body.outputs_size() < 1 || body.inputs_size() < 2) return LoopCondition::Computed;
  int out = body.outputs(0);
  if (out == body.inputs(1)) return LoopCondition::PassThrough;
  if (out < 0 || out >= body.values_size()) return LoopCondition::Computed;
  const plan::Value& v = body.values(out);
  // A folded condition: a constant bool of one element, stored in the plan itself.
  if (v.kind() == plan::Value::CONSTANT && v.dtype() == (int)DType::Bool &&
      v.constant().raw().size() == 1)
    return v.constant().raw()[0] ? LoopCondition::True : LoopCondition::False;
  return LoopCondition::Computed;
}

int64_t plannedLoopIterations(LoopCondition bodyCondition, std::optional<int64_t> m, bool mKnown,
                              std::optional<bool> cond, bool condKnown) {
  if (condKnown && cond && !*cond) return 0;
  if (mKnown && m && *m <= 0) return 0;
  if (!condKnown || !mKnown) return -1;
  switch (bodyCondition) {
    case LoopCondition::PassThrough:
    case LoopCondition::True: return m ? *m : -1;
    case LoopCondition::False: return 1;
    case LoopCondition::Computed: return -1;
  }
  return -1;
}

std::string subgraphTypeString(const SubgraphValueType& t) {
  return std::string(dtypeName(t.dtype)) + shapeToString(t.dims);
}

}  // namespace tandem
