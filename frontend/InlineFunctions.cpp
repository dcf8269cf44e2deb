// Inlining of model-local functions (InlineFunctions.h).
#include "frontend/InlineFunctions.h"

#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace tandem {
namespace {

// (domain, name, overload): IR 10 lets one name have several overloads.
using Key = std::tuple<std::string, std::string, std::string>;

bool isDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Fields newer than Debian's onnx 1.12 protobuf, which keeps them as unknown fields: the
// length-delimited values of field `number` of `m`, in order.
std::vector<std::string> newerField(const google::protobuf::Message& m, int number) {
  std::vector<std::string> out;
  const google::protobuf::UnknownFieldSet& u = m.GetReflection()->GetUnknownFields(m);
  for (int i = 0; i < u.field_count(); ++i)
    if (u.field(i).number() == number &&
        u.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      out.push_back(u.field(i).length_delimited());
  return out;
}
// FunctionProto.overload (13) and NodeProto.overload (8), IR 10.
std::string overloadOf(const google::protobuf::Message& m, int number) {
  std::vector<std::string> v = newerField(m, number);
  return v.empty() ? std::string() : v.back();
}
constexpr int kFunctionOverload = 13, kNodeOverload = 8, kFunctionAttributeProto = 11;

class Inliner {
 public:
  Inliner(const onnx::ModelProto& model, std::string* error) : error_(error) {
    for (const onnx::FunctionProto& f : model.functions())
      functions_[{f.domain(), f.name(), overloadOf(f, kFunctionOverload)}] = &f;
    for (const onnx::OperatorSetIdProto& o : model.opset_import())
      if (isDefaultDomain(o.domain())) modelOpset_ = o.version();
  }

  bool hasFunctions() const { return !functions_.empty(); }

  // Inlines every call in `g` (and its subgraphs), in place.
  bool graph(onnx::GraphProto* g) {
    collectNames(*g);
    std::vector<onnx::NodeProto> out;
    for (const onnx::NodeProto& n : g->node())
      if (!node(n, &out, {})) return false;
    g->clear_node();
    for (onnx::NodeProto& n : out) *g->add_node() = std::move(n);
    return true;
  }

 private:
  // Appends `n` (its subgraphs inlined) or, for a call, the inlined body. `chain`: the
  // functions being expanded around this call (a recursion check).
  bool node(const onnx::NodeProto& n, std::vector<onnx::NodeProto>* out, std::vector<Key> chain) {
    auto it = functions_.find({n.domain(), n.op_type(), overloadOf(n, kNodeOverload)});
    if (it == functions_.end()) {
      onnx::NodeProto copy = n;
      for (onnx::AttributeProto& a : *copy.mutable_attribute()) {
        if (a.has_g() && !graph(a.mutable_g())) return false;
        for (onnx::GraphProto& sub : *a.mutable_graphs())
          if (!graph(&sub)) return false;
      }
      out->push_back(std::move(copy));
      return true;
    }
    const onnx::FunctionProto& f = *it->second;
    const std::string label = "function '" + f.name() + "' of domain '" + f.domain() + "'";
    for (const Key& k : chain)
      if (k == it->first) return fail(label + " calls itself (directly or through others)");
    chain.push_back(it->first);
    for (const onnx::OperatorSetIdProto& o : f.opset_import())
      if (isDefaultDomain(o.domain()) && modelOpset_ && o.version() != modelOpset_)
        return fail(label + " imports opset " + std::to_string(o.version()) +
                    " of the default domain but the model imports " + std::to_string(modelOpset_) +
                    " (its ops would mean another version)");
    if (n.input_size() > f.input_size() || n.output_size() > f.output_size())
      return fail("node '" + n.name() + "' calls " + label + " with " +
                  std::to_string(n.input_size()) + " inputs and " + std::to_string(n.output_size()) +
                  " outputs; it declares " + std::to_string(f.input_size()) + " and " +
                  std::to_string(f.output_size()));
    // Value names: formal inputs and outputs to the call's, every other one fresh.
    const std::string prefix = unique((n.name().empty() ? f.name() : n.name()) + "/");
    std::map<std::string, std::string> rename;
    for (int i = 0; i < f.input_size(); ++i) rename[f.input(i)] = i < n.input_size() ? n.input(i) : "";
    for (int i = 0; i < f.output_size(); ++i)
      rename[f.output(i)] = i < n.output_size() && !n.output(i).empty() ? n.output(i)
                                                                          : prefix + f.output(i);
    // The call's attributes, over the function's defaults (FunctionProto.attribute_proto, IR 9).
    std::map<std::string, onnx::AttributeProto> given;
    for (const std::string& bytes : newerField(f, kFunctionAttributeProto)) {
      onnx::AttributeProto d;
      if (!d.ParseFromString(bytes)) return fail(label + ": an attribute default does not parse");
      given[d.name()] = d;
    }
    for (const onnx::AttributeProto& a : n.attribute()) given[a.name()] = a;
    auto mapped = [&](const std::string& name) {
      if (name.empty()) return name;
      auto r = rename.find(name);
      if (r != rename.end()) return r->second;
      return rename[name] = prefix + name;
    };
    for (const onnx::NodeProto& b : f.node()) {
      onnx::NodeProto copy = b;
      copy.set_name(prefix + (b.name().empty() ? b.op_type() : b.name()));
      for (std::string& in : *copy.mutable_input()) in = mapped(in);
      for (std::string& o : *copy.mutable_output()) o = mapped(o);
      // Attributes: references take the call's value; subgraphs see the renamed values.
      google::protobuf::RepeatedPtrField<onnx::AttributeProto> attrs;
      for (const onnx::AttributeProto& a : b.attribute()) {
        if (!a.ref_attr_name().empty()) {
          auto g = given.find(a.ref_attr_name());
          if (g == given.end()) continue;  // no value nor default: the op's own default
          onnx::AttributeProto v = g->second;
          v.set_name(a.name());
          *attrs.Add() = std::move(v);
          continue;
        }
        onnx::AttributeProto v = a;
        if (v.has_g()) renameGraph(v.mutable_g(), mapped);
        for (onnx::GraphProto& sub : *v.mutable_graphs()) renameGraph(&sub, mapped);
        *attrs.Add() = std::move(v);
      }
      *copy.mutable_attribute() = std::move(attrs);
      if (!node(copy, out, chain)) return false;
    }
    return true;
  }

  // A subgraph inside a function body reads the body's values by name: rename the ones it
  // does not define itself.
  template <typename Map>
  void renameGraph(onnx::GraphProto* g, Map& mapped) {
    std::set<std::string> local;
    for (const auto& i : g->input()) local.insert(i.name());
    for (const auto& i : g->initializer()) local.insert(i.name());
    for (const auto& n : g->node())
      for (const auto& o : n.output()) local.insert(o);
    for (onnx::NodeProto& n : *g->mutable_node()) {
      for (std::string& in : *n.mutable_input())
        if (!in.empty() && !local.count(in)) in = mapped(in);
      for (onnx::AttributeProto& a : *n.mutable_attribute()) {
        if (a.has_g()) renameGraph(a.mutable_g(), mapped);
        for (onnx::GraphProto& sub : *a.mutable_graphs()) renameGraph(&sub, mapped);
      }
    }
    for (auto& o : *g->mutable_output())
      if (!local.count(o.name())) o.set_name(mapped(o.name()));
  }

  void collectNames(const onnx::GraphProto& g) {
    for (const auto& n : g.node()) names_.insert(n.name());
  }
  std::string unique(const std::string& base) {
    std::string s = base;
    for (int k = 1; names_.count(s); ++k) s = base.substr(0, base.size() - 1) + "_" + std::to_string(k) + "/";
    names_.insert(s);
    return s;
  }
  bool fail(const std::string& msg) {
    if (error_) *error_ = msg;
    return false;
  }

  std::map<Key, const onnx::FunctionProto*> functions_;
  std::set<std::string> names_;
  int64_t modelOpset_ = 0;
  std::string* error_;
};

}  // namespace

bool inlineLocalFunctions(onnx::ModelProto* model, std::string* error) {
  Inliner inliner(*model, error);
  if (!inliner.hasFunctions()) return true;
  onnx::GraphProto g = model->graph();
  if (!inliner.graph(&g)) return false;
  *model->mutable_graph() = std::move(g);
  model->clear_functions();
  return true;
}

}  // namespace tandem
