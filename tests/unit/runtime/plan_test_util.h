// Helpers for runtime tests that write small plans by hand (plan.proto values).
#pragma once
#include <string>
#include <vector>

#include "compiler/Plan.pb.h"
#include "runtime/DType.h"
#include "runtime/Tensor.h"

namespace tandem {

/// Appends an f32 value on "cpu" with id = its index: `dims` static, `offset` in the device
/// arena (bytes; for INPUT and INTERMEDIATE), bytes = 4 * elements.
inline plan::Value* addValue(plan::Plan& p, const std::string& name, plan::Value::Kind kind,
                             std::vector<int64_t> dims, int64_t offset = 0) {
  plan::Value* v = p.add_values();
  v->set_id(p.values_size() - 1);
  v->set_name(name);
  v->set_dtype((int)DType::F32);
  for (int64_t d : dims) v->add_dims(d);
  v->set_device("cpu");
  v->set_kind(kind);
  v->set_arena_offset(offset);
  v->set_bytes(numElements(dims) * 4);
  return v;
}

/// Appends a "Fused" step on "cpu" of group `kind` (its "kind" attribute) reading value ids
/// `inputs` and writing `outputs`. Its body is empty: add members to step->mutable_fused_body()
/// (fused_attrs_util.h: addMember) and the member each output is (add_results).
inline plan::Step* addFusedStep(plan::Plan& p, const std::string& name, const std::string& kind,
                                std::vector<int> inputs, std::vector<int> outputs) {
  plan::Step* s = p.add_steps();
  s->set_op_type("Fused");
  s->set_name(name);
  s->set_device("cpu");
  for (int id : inputs) s->add_inputs(id);
  for (int id : outputs) s->add_outputs(id);
  plan::Attribute* k = s->add_attrs();
  k->set_name("kind");
  k->set_kind(plan::Attribute::STRING);
  k->set_s(kind);
  return s;
}

}  // namespace tandem
