// Writes hostile plans for the must-fail tests (issue 15: a plan is untrusted input): each one a
// valid plan with one field corrupted, so the loader must refuse it naming the value or step.
// usage: make_error_plans GOOD_ADD.tplan GOOD_MAXPOOL.tplan GOOD_CHAIN.tplan OUT_DIR
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

// The first step running `op`, or null.
tandem::plan::Step* stepOf(tandem::plan::Plan* p, const std::string& op) {
  for (auto& s : *p->mutable_steps())
    if (s.op_type() == op) return &s;
  return nullptr;
}

// The value named `name`, or null.
tandem::plan::Value* valueNamed(tandem::plan::Plan* p, const std::string& name) {
  for (auto& v : *p->mutable_values())
    if (v.name() == name) return &v;
  return nullptr;
}

// good_add's one step (the fused Add + Relu of x and b) as a plain `op` step on (x, b).
tandem::plan::Step* asPlainStep(tandem::plan::Plan* p, const std::string& op) {
  if (p->steps_size() != 1 || p->steps(0).inputs_size() != 2) return nullptr;
  tandem::plan::Step* s = p->mutable_steps(0);
  s->set_op_type(op);
  s->clear_attrs();
  s->clear_fused_body();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: make_error_plans GOOD_ADD.tplan GOOD_MAXPOOL.tplan GOOD_CHAIN.tplan OUT_DIR\n");
    return 2;
  }
  using tandem::plan::Plan;
  using tandem::plan::Step;
  using tandem::plan::Value;
  Plan add, pool, chain;
  if (!readPlan(argv[1], &add) || !readPlan(argv[2], &pool) || !readPlan(argv[3], &chain)) return 1;
  const std::string dir = argv[4];
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
    Step* s = asPlainStep(p, "Dropout");
    if (!s) return false;
    int b = s->inputs(1);
    s->set_inputs(1, -1);  // no ratio
    s->add_inputs(b);      // training_mode = b, f32[2,3]
    return true;
  });
  make("where_condition_f32", add, [](Plan* p) {
    Step* s = asPlainStep(p, "Where");
    if (!s) return false;
    s->add_inputs(s->inputs(0));  // condition = x, f32[2,3]
    return true;
  });
  // Steps the op's rules refuse (the compiler's shape functions, applied at load): one each.
  make("add_three_inputs", add, [](Plan* p) {
    Step* s = asPlainStep(p, "Add");
    if (!s) return false;
    s->add_inputs(s->inputs(1));
    return true;
  });
  make("add_bool_operand", add, [](Plan* p) {
    Step* s = asPlainStep(p, "Add");
    Value* x = valueNamed(p, "x");
    if (!s || !x) return false;
    x->set_dtype(9);  // bool: one byte an element, so the slot still fits its arena
    return true;
  });
  make("add_result_shape", add, [](Plan* p) {
    Step* s = asPlainStep(p, "Add");
    if (!s) return false;
    Value* y = p->mutable_values(s->outputs(0));
    y->clear_dims();
    y->add_dims(3);
    y->add_dims(2);
    return true;
  });
  make("unknown_op", add, [](Plan* p) {
    return asPlainStep(p, "FooBar") != nullptr;
  });
  // The Relu of the fused Add + Relu becomes a Less: a bool member in an f32 body.
  make("fused_member_dtype", add, [](Plan* p) {
    if (p->steps_size() != 1 || p->steps(0).fused_body().members_size() != 2) return false;
    auto* relu = p->mutable_steps(0)->mutable_fused_body()->mutable_members(1);
    relu->set_op_type("Less");
    *relu->add_inputs() = relu->inputs(0);
    return true;
  });
  make("conv_i64_weights", chain, [](Plan* p) {
    Step* s = stepOf(p, "Conv");
    if (!s || s->inputs_size() < 2) return false;
    Value* w = p->mutable_values(s->inputs(1));
    std::string raw(w->constant().raw().size() * 2, '\0');  // 8-byte elements
    w->set_dtype(7);
    w->mutable_constant()->set_dtype(7);
    w->mutable_constant()->set_raw(raw);
    return true;
  });
  make("matmul_inner_dims", chain, [](Plan* p) {
    Step* s = stepOf(p, "MatMul");
    if (!s) return false;
    Value* m = p->mutable_values(s->inputs(1));  // [16,3] -> [12,4], the same 48 floats
    for (auto* dims : {m->mutable_dims(), m->mutable_constant()->mutable_dims()}) {
      dims->Clear();
      dims->Add(12);
      dims->Add(4);
    }
    return true;
  });
  make("reshape_count", chain, [](Plan* p) {
    Step* s = stepOf(p, "Reshape");
    if (!s) return false;
    Value* shape = p->mutable_values(s->inputs(1));
    const int64_t to[2] = {2, 15};  // 30 elements from Conv's 32
    shape->mutable_constant()->set_raw(std::string(reinterpret_cast<const char*>(to), sizeof to));
    Value* r = p->mutable_values(s->outputs(0));
    r->set_dims(1, 15);
    return true;
  });
  make("transpose_perm", chain, [](Plan* p) {
    Step* s = stepOf(p, "Transpose");
    if (!s) return false;
    for (auto& a : *s->mutable_attrs())
      if (a.name() == "perm") {
        a.clear_ints();
        a.add_ints(0);
        a.add_ints(0);
        return true;
      }
    return false;
  });
  // The MatMul moved before the Reshape that writes its operand.
  make("read_before_write", chain, [](Plan* p) {
    if (p->steps_size() < 3 || p->steps(1).op_type() != "Reshape" || p->steps(2).op_type() != "MatMul")
      return false;
    p->mutable_steps()->SwapElements(1, 2);
    return true;
  });
  // A 9x9 window on the 8x8 input, no padding.
  make("pool_window", pool, [](Plan* p) {
    Step* s = stepOf(p, "MaxPool");
    if (!s) return false;
    for (auto& a : *s->mutable_attrs())
      if (a.name() == "kernel_shape") {
        a.clear_ints();
        a.add_ints(9);
        a.add_ints(9);
        return true;
      }
    return false;
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
  // Resident variables (training): the constant b made a VARIABLE, then one field wrong.
  auto asVariable = [](Plan* p) -> Value* {
    Value* v = firstOf(p, Value::CONSTANT);
    if (v) v->set_kind(Value::VARIABLE);
    return v;
  };
  make("variable_no_update", add, [&](Plan* p) { return asVariable(p) != nullptr; });
  make("variable_update_id", add, [&](Plan* p) {
    Value* v = asVariable(p);
    if (!v) return false;
    v->set_update(999);
    return true;
  });
  make("variable_update_input", add, [&](Plan* p) {
    Value* v = asVariable(p);
    if (!v || p->inputs_size() < 1) return false;
    v->set_update(p->inputs(0));
    return true;
  });
  make("variable_update_type", add, [&](Plan* p) {
    Value* v = asVariable(p);
    if (!v || p->steps_size() < 1) return false;
    v->set_update(p->steps(0).outputs(0));
    v->set_dtype(11);  // f64: the initial value (f32) and the update no longer match it
    return true;
  });
  make("variable_initial_short", add, [&](Plan* p) {
    Value* v = asVariable(p);
    if (!v || p->steps_size() < 1) return false;
    v->set_update(p->steps(0).outputs(0));
    v->mutable_constant()->set_raw(std::string(4, '\0'));
    return true;
  });
  // An update planned in place (Value.aliases_variable) must alias its own variable, and no
  // step may read that variable after the update's step has written it.
  make("variable_alias_kind", add, [&](Plan* p) {
    Value* v = asVariable(p);
    if (!v || p->steps_size() < 1 || p->inputs_size() < 1) return false;
    const int y = p->steps(0).outputs(0);
    v->set_update(y);
    p->mutable_values(y)->set_aliases_variable(p->inputs(0));  // x, a graph input
    return true;
  });
  make("variable_alias_read_after", add, [&](Plan* p) {
    Value* v = asVariable(p);
    if (!v || p->steps_size() != 1) return false;
    const int y = p->steps(0).outputs(0);
    v->set_update(y);
    p->mutable_values(y)->set_aliases_variable(v->id());
    // A second step reads b again, after the first has written y over it.
    Value* z = p->add_values();
    *z = p->values(y);
    z->set_id(p->values_size() - 1);
    z->set_name("z");
    z->clear_aliases_variable();
    Step* again = p->add_steps();
    *again = p->steps(0);
    again->set_name("again");
    again->set_outputs(0, z->id());
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
