// ONNX models built in memory for the unit tests: inputs, initializers, nodes and their
// attributes, serialized or written to a temporary file.
#pragma once
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tandem::testing_onnx {

struct Model {
  onnx::ModelProto m;
  explicit Model(int64_t opset = 13) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
  }
  onnx::GraphProto* g() { return m.mutable_graph(); }
  Model& input(const std::string& name, std::vector<int64_t> dims,
               int32_t type = onnx::TensorProto::FLOAT, std::vector<std::string> params = {}) {
    auto* v = g()->add_input();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = shape->add_dim();
      if (i < params.size() && !params[i].empty()) d->set_dim_param(params[i]);
      else if (dims[i] >= 0) d->set_dim_value(dims[i]);
    }
    return *this;
  }
  Model& output(const std::string& name) {
    g()->add_output()->set_name(name);
    return *this;
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins,
                        std::vector<std::string> outs, const std::string& name = "") {
    auto* n = g()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  Model& floatInit(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    auto* t = g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return *this;
  }
  std::string bytes() const {
    std::string s;
    m.SerializeToString(&s);
    return s;
  }
};

inline void intAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void intsAttr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void floatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

inline void stringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline void stringsAttr(onnx::NodeProto* n, const std::string& name, std::vector<std::string> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (auto& x : v) a->add_strings(x);
}

/// Writes `m` to TempDir()/tandem_<tag>_<pid>.onnx and returns the path (the caller removes it).
inline std::string writeTemp(const Model& m, const std::string& tag) {
  std::string p = ::testing::TempDir() + "/tandem_" + tag + "_" + std::to_string(getpid()) + ".onnx";
  std::ofstream f(p, std::ios::binary);
  f << m.bytes();
  EXPECT_TRUE(f.good()) << p;
  return p;
}

/// A temporary model file removed when the test process exits (hold it in a static).
struct RemovedAtExit {
  std::string path;
  ~RemovedAtExit() { std::remove(path.c_str()); }
};

}  // namespace tandem::testing_onnx
