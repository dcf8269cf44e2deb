// ONNX-style op attributes without MLIR or protobuf: what kernels and shape functions read.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/Tensor.h"

namespace tandem {

/// One attribute value, tagged like ONNX AttributeProto (INT, FLOAT, STRING, INTS, FLOATS,
/// STRINGS, TENSOR, GRAPH). Floats are stored as ONNX stores them: 32-bit. A Graph (a control-flow
/// op's subgraph) is its compiled plan::Plan, serialized, in `s` (compiler/Plan.proto).
struct Attr {
  enum class Kind { Int, Float, String, Ints, Floats, Strings, Tensor, Graph };
  Kind kind = Kind::Int;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  tandem::Tensor t;

  static Attr ofInt(int64_t v) { Attr a; a.kind = Kind::Int; a.i = v; return a; }
  static Attr ofFloat(float v) { Attr a; a.kind = Kind::Float; a.f = v; return a; }
  static Attr ofString(std::string v) { Attr a; a.kind = Kind::String; a.s = std::move(v); return a; }
  static Attr ofInts(std::vector<int64_t> v) { Attr a; a.kind = Kind::Ints; a.ints = std::move(v); return a; }
  static Attr ofFloats(std::vector<float> v) { Attr a; a.kind = Kind::Floats; a.floats = std::move(v); return a; }
  static Attr ofStrings(std::vector<std::string> v) { Attr a; a.kind = Kind::Strings; a.strings = std::move(v); return a; }
  static Attr ofTensor(tandem::Tensor v) { Attr a; a.kind = Kind::Tensor; a.t = std::move(v); return a; }
  static Attr ofGraph(std::string planBytes) { Attr a; a.kind = Kind::Graph; a.s = std::move(planBytes); return a; }
};

/// Attributes of one op by ONNX name. Getters return the default when the attribute is absent
/// (ONNX defaults are stated by each kernel / shape function at the call site).
class AttrMap {
 public:
  void set(const std::string& name, Attr a) { m_[name] = std::move(a); }
  bool has(const std::string& name) const { return m_.count(name) != 0; }
  const Attr* find(const std::string& name) const {
    auto it = m_.find(name);
    return it == m_.end() ? nullptr : &it->second;
  }
  int64_t getInt(const std::string& name, int64_t dflt) const {
    const Attr* a = find(name);
    return a && a->kind == Attr::Kind::Int ? a->i : dflt;
  }
  float getFloat(const std::string& name, float dflt) const {
    const Attr* a = find(name);
    return a && a->kind == Attr::Kind::Float ? a->f : dflt;
  }
  std::string getString(const std::string& name, const std::string& dflt) const {
    const Attr* a = find(name);
    return a && a->kind == Attr::Kind::String ? a->s : dflt;
  }
  std::vector<int64_t> getInts(const std::string& name, std::vector<int64_t> dflt = {}) const {
    const Attr* a = find(name);
    return a && a->kind == Attr::Kind::Ints ? a->ints : dflt;
  }
  std::vector<float> getFloats(const std::string& name, std::vector<float> dflt = {}) const {
    const Attr* a = find(name);
    return a && a->kind == Attr::Kind::Floats ? a->floats : dflt;
  }
  const Tensor* getTensor(const std::string& name) const {
    const Attr* a = find(name);
    return a && a->kind == Attr::Kind::Tensor ? &a->t : nullptr;
  }
  /// A Graph attribute's serialized plan::Plan, or null when absent or of another kind.
  const std::string* getGraph(const std::string& name) const {
    const Attr* a = find(name);
    return a && a->kind == Attr::Kind::Graph ? &a->s : nullptr;
  }
  const std::map<std::string, Attr>& all() const { return m_; }

 private:
  std::map<std::string, Attr> m_;
};

}  // namespace tandem
