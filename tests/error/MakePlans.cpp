// Writes hostile plans for the must-fail tests (issue 15: a plan is untrusted input): each one a
// valid plan with one field corrupted, so the loader must refuse it naming the value or step.
// usage: make_error_plans GOOD_ADD.tplan GOOD_MAXPOOL.tplan OUT_DIR
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "compiler/Plan.pb.h"

namespace {

bool readPlan(const std::string& path, tandem::plan::Plan* p) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!p->ParseFromString(ss.str())) {
    std::fprintf(stderr, "make_error_plans: cannot read %s\n", path.c_str());
    return false;
  }
  return true;
}

bool writePlan(const std::string& path, const tandem::plan::Plan& p) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << p.SerializeAsString();
  if (!out) std::fprintf(stderr, "make_error_plans: cannot write %s\n", path.c_str());
  return (bool)out;
}

// The first value of `kind`, or null.
tandem::plan::Value* firstOf(tandem::plan::Plan* p, tandem::plan::Value::Kind kind) {
  for (auto& v : *p->mutable_values())
    if (v.kind() == kind) return &v;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: make_error_plans GOOD_ADD.tplan GOOD_MAXPOOL.tplan OUT_DIR\n");
    return 2;
  }
  using tandem::plan::Plan;
  using tandem::plan::Value;
  Plan add, pool;
  if (!readPlan(argv[1], &add) || !readPlan(argv[2], &pool)) return 1;
  const std::string dir = argv[3];
  bool ok = true;
  // Applies `mutate` to a copy of `base` and writes DIR/NAME.tplan; a mutation that finds nothing
  // to corrupt fails the generator, so no case silently tests a valid plan.
  auto make = [&](const std::string& name, const Plan& base, const std::function<bool(Plan*)>& mutate) {
    Plan p = base;
    if (!mutate(&p)) {
      std::fprintf(stderr, "make_error_plans: %s: nothing to corrupt\n", name.c_str());
      ok = false;
      return;
    }
    ok &= writePlan(dir + "/" + name + ".tplan", p);
  };
  const int64_t k2p32 = int64_t(1) << 32;

  make("offset_int64max", add, [](Plan* p) {
    Value* v = firstOf(p, Value::INTERMEDIATE);
    if (!v) return false;
    v->set_arena_offset(INT64_MAX);  // offset + bytes wraps negative in signed arithmetic
    return true;
  });
  make("offset_past_end", add, [](Plan* p) {
    Value* v = firstOf(p, Value::INPUT);
    if (!v || p->arenas_size() == 0) return false;
    v->set_arena_offset(p->arenas(0).bytes() - 8);
    return true;
  });
  // Found by fuzz_plan (tests/fuzz): inside the arena but not on an element boundary, so every
  // kernel reading it made misaligned f32 loads.
  make("offset_misaligned", add, [](Plan* p) {
    Value* v = firstOf(p, Value::INPUT);
    if (!v) return false;
    v->set_arena_offset(v->arena_offset() + 2);
    return true;
  });
  // Found by fuzz_plan: Dropout's kernel read an f32 training_mode as bool (the registry
  // constrains only its data input). Where's condition, checked by the registry, alongside.
  make("dropout_training_f32", add, [](Plan* p) {
    if (p->steps_size() == 0 || p->steps(0).inputs_size() != 2) return false;
    tandem::plan::Step* s = p->mutable_steps(0);
    s->set_op_type("Dropout");
    s->clear_attrs();
    s->add_inputs(s->inputs(1));  // training_mode = b, f32[2,3]
    return true;
  });
  make("where_condition_f32", add, [](Plan* p) {
    if (p->steps_size() == 0 || p->steps(0).inputs_size() != 2) return false;
    tandem::plan::Step* s = p->mutable_steps(0);
    s->set_op_type("Where");
    s->clear_attrs();
    s->add_inputs(s->inputs(0));  // condition = x, f32[2,3]
    return true;
  });
  make("dims_overflow", add, [&](Plan* p) {
    Value* v = firstOf(p, Value::INTERMEDIATE);
    if (!v) return false;
    v->clear_dims();
    v->add_dims(k2p32);
    v->add_dims(k2p32);
    return true;
  });
  make("dims_huge", add, [](Plan* p) {
    Value* v = firstOf(p, Value::INPUT);
    if (!v) return false;
    v->clear_dims();
    v->add_dims(int64_t(1) << 40);
    v->add_dims(int64_t(1) << 20);
    return true;
  });
  make("constant_short", add, [](Plan* p) {
    Value* v = firstOf(p, Value::CONSTANT);
    if (!v) return false;
    v->mutable_constant()->set_raw(std::string(4, '\0'));
    return true;
  });
  make("constant_overflow", add, [&](Plan* p) {
    Value* v = firstOf(p, Value::CONSTANT);
    if (!v) return false;
    v->mutable_constant()->clear_dims();
    v->mutable_constant()->add_dims(int64_t(1) << 62);
    v->mutable_constant()->add_dims(4);
    v->clear_dims();
    v->add_dims(int64_t(1) << 62);
    v->add_dims(4);
    return true;
  });
  make("step_input_id", add, [](Plan* p) {
    if (p->steps_size() == 0) return false;
    p->mutable_steps(0)->set_inputs(0, 999);
    return true;
  });
  make("step_output_id", add, [](Plan* p) {
    if (p->steps_size() == 0) return false;
    p->mutable_steps(0)->set_outputs(0, -5);
    return true;
  });
  make("graph_input_id", add, [](Plan* p) {
    if (p->inputs_size() == 0) return false;
    p->set_inputs(0, 12345);
    return true;
  });
  make("arena_huge", add, [](Plan* p) {
    if (p->arenas_size() == 0) return false;
    p->mutable_arenas(0)->set_bytes(INT64_MAX);
    return true;
  });
  // A plan of version 1 (fused bodies as flat step attributes): refused, never misread.
  make("version_1", add, [](Plan* p) {
    p->set_version(1);
    return true;
  });
  // MaxPool kernel_shape [2^40, 3]: its window table would have 2^41 * 49 entries.
  make("maxpool_kernel", pool, [](Plan* p) {
    for (auto& s : *p->mutable_steps())
      for (auto& a : *s.mutable_attrs())
        if (a.name() == "kernel_shape") {
          a.clear_ints();
          a.add_ints(int64_t(1) << 40);
          a.add_ints(3);
          return true;
        }
    return false;
  });
  return ok ? 0 : 1;
}
