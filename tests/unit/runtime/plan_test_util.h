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

}  // namespace tandem
