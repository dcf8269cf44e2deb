// Helpers for runtime tests that write small plans by hand (plan.proto values).
#pragma once
#include <random>
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

/// Appends an f32 constant whose data is uniform in [-scale, scale] from `seed`.
inline plan::Value* addConstant(plan::Plan& p, const std::string& name, std::vector<int64_t> dims,
                                uint32_t seed, float scale) {
  plan::Value* v = addValue(p, name, plan::Value::CONSTANT, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> data((size_t)numElements(dims));
  for (float& x : data) x = u(rng);
  v->mutable_constant()->set_dtype((int)DType::F32);
  for (int64_t d : dims) v->mutable_constant()->add_dims(d);
  v->mutable_constant()->set_raw(std::string((const char*)data.data(), data.size() * sizeof(float)));
  return v;
}

/// Appends a step named after its op and position ("Relu3") reading value ids `ins` and
/// writing `outs`.
inline plan::Step* addStep(plan::Plan& p, const std::string& op, const std::string& device,
                           std::vector<int> ins, std::vector<int> outs) {
  plan::Step* s = p.add_steps();
  s->set_op_type(op);
  s->set_name(op + std::to_string(p.steps_size()));
  s->set_device(device);
  for (int i : ins) s->add_inputs(i);
  for (int o : outs) s->add_outputs(o);
  return s;
}

/// y = Relu(x) on cpu, copied to cpu:1, + a constant b there (`shape`'s last dim, uniform in
/// [-bScale, bScale] from seed 5; 0: zeros): a plan over two host devices (a queue thread each),
/// arenas of 512 bytes (x and y at most 64 floats). Version `version` (the caller passes
/// runtime/PlanFormat.h kPlanVersion).
inline plan::Plan twoHostDevicePlan(std::vector<int64_t> shape, float bScale, int version) {
  plan::Plan p;
  p.set_version(version);
  addValue(p, "x", plan::Value::INPUT, shape, 0);                            // 0
  addValue(p, "r", plan::Value::INTERMEDIATE, shape, 256);                   // 1
  addValue(p, "r1", plan::Value::INTERMEDIATE, shape, 0)->set_device("cpu:1");  // 2
  addConstant(p, "b", {shape.back()}, 5, bScale);                            // 3
  addValue(p, "y", plan::Value::INTERMEDIATE, shape, 256)->set_device("cpu:1");  // 4
  addStep(p, "Relu", "cpu", {0}, {1});
  addStep(p, "Copy", "cpu:1", {1}, {2});
  addStep(p, "Add", "cpu:1", {2, 3}, {4});
  p.add_inputs(0);
  p.add_outputs(4);
  for (const char* d : {"cpu", "cpu:1"}) {
    plan::Arena* a = p.add_arenas();
    a->set_device(d);
    a->set_bytes(512);
  }
  return p;
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
