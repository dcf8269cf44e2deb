// Recognises torch.onnx's EmbeddingBag Loop (EmbeddingBagLoop.h).
#include "frontend/EmbeddingBagLoop.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <onnx/onnx_pb.h>

#include "frontend/OnnxTensor.h"

namespace tandem {
namespace {

bool isTrueScalar(const Tensor& t) {
  if (t.numel() != 1) return false;
  switch (t.dtype()) {
    case DType::Bool:
    case DType::U8:
    case DType::I8: return t.data<uint8_t>()[0] != 0;
    case DType::I32: return t.data<int32_t>()[0] != 0;
    case DType::I64: return t.data<int64_t>()[0] != 0;
    case DType::F32: return t.data<float>()[0] != 0.f;
    default: return false;
  }
}

class BodyReader {
 public:
  BodyReader(const onnx::GraphProto& body, const OuterConstantFn& outer) : outer_(outer) {
    for (const auto& in : body.input()) local_.insert(in.name());
    for (const auto& t : body.initializer()) {
      local_.insert(t.name());
      initializers_[t.name()] = &t;
    }
    for (const auto& n : body.node())
      for (const std::string& o : n.output()) {
        local_.insert(o);
        producer_[o] = &n;
      }
  }

  /// The body node making `name` when it is `opType`, else nullptr.
  const onnx::NodeProto* made(const std::string& name, const char* opType) const {
    auto it = producer_.find(name);
    return it != producer_.end() && it->second->op_type() == opType ? it->second : nullptr;
  }
  /// A name the body reads from the enclosing graph.
  bool outer(const std::string& name) const { return !name.empty() && !local_.count(name); }

  std::optional<Tensor> constant(const std::string& name) const {
    if (name.empty()) return std::nullopt;
    if (auto it = initializers_.find(name); it != initializers_.end()) return parse(*it->second);
    if (const onnx::NodeProto* c = made(name, "Constant")) {
      if (c->attribute_size() != 1) return std::nullopt;
      const onnx::AttributeProto& a = c->attribute(0);
      if (a.name() == "value" && a.has_t()) return parse(a.t());
      if (a.name() == "value_int") return Tensor::fromVector<int64_t>({}, {a.i()});
      if (a.name() == "value_ints")
        return Tensor::fromVector<int64_t>({(int64_t)a.ints_size()},
                                           std::vector<int64_t>(a.ints().begin(), a.ints().end()));
      return std::nullopt;
    }
    if (!outer(name)) return std::nullopt;
    return outer_(name);
  }

  /// A constant integer operand's values.
  std::optional<std::vector<int64_t>> ints(const std::string& name) const {
    std::optional<Tensor> t = constant(name);
    if (!t) return std::nullopt;
    std::vector<int64_t> v;
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (t->dtype() == DType::I64) v.push_back(t->data<int64_t>()[i]);
      else if (t->dtype() == DType::I32) v.push_back(t->data<int32_t>()[i]);
      else return std::nullopt;
    }
    return v;
  }

  /// A constant, one-element, non-zero (true) value.
  bool isTrue(const std::string& name) const {
    std::optional<Tensor> t = constant(name);
    return t && isTrueScalar(*t);
  }

 private:
  static std::optional<Tensor> parse(const onnx::TensorProto& p) {
    Tensor t;
    if (!tensorFromProto(p, &t).isOk()) return std::nullopt;
    return t;
  }

  const OuterConstantFn& outer_;
  std::unordered_set<std::string> local_;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
  std::unordered_map<std::string, const onnx::NodeProto*> producer_;
};

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t intAttribute(const onnx::NodeProto& n, const char* name, int64_t dflt) {
  const onnx::AttributeProto* a = attribute(n, name);
  return a ? a->i() : dflt;
}

/// Whether node `n`'s axes (its attribute, or its input `input` before opset 13/18) are one
/// axis, `axis` or its negative form `negative`; `absentMeans` answers when it has neither.
bool axesAre(const BodyReader& r, const onnx::NodeProto& n, int input, int64_t axis, int64_t negative,
             bool absentMeans) {
  std::optional<std::vector<int64_t>> axes;
  if (const onnx::AttributeProto* a = attribute(n, "axes"))
    axes = std::vector<int64_t>(a->ints().begin(), a->ints().end());
  else if (n.input_size() > input && !n.input(input).empty())
    axes = r.ints(n.input(input));
  else
    return absentMeans;
  return axes && axes->size() == 1 && ((*axes)[0] == axis || (*axes)[0] == negative);
}

/// `name` = Unsqueeze(Gather(table, iter, axis 0), [0]): returns the outer `table`, or "".
std::string bagBound(const BodyReader& r, const std::string& name, const std::string& iter) {
  const onnx::NodeProto* u = r.made(name, "Unsqueeze");
  if (!u || u->input_size() < 1 || !axesAre(r, *u, 1, 0, -1, false)) return "";
  const onnx::NodeProto* g = r.made(u->input(0), "Gather");
  if (!g || g->input_size() != 2 || intAttribute(*g, "axis", 0) != 0 || g->input(1) != iter ||
      !r.outer(g->input(0)))
    return "";
  return g->input(0);
}

/// `name` = Slice(data, starts, ends[, axes [0][, steps [1]]]) on one outer 1-D value: returns
/// the data's name, and its starts and ends operands.
bool bagSlice(const BodyReader& r, const std::string& name, std::string* data, std::string* s,
              std::string* e) {
  const onnx::NodeProto* sl = r.made(name, "Slice");
  if (!sl || sl->input_size() < 3 || attribute(*sl, "starts") || !r.outer(sl->input(0)))
    return false;
  if (!axesAre(r, *sl, 3, 0, -1, true)) return false;
  if (sl->input_size() > 4 && !sl->input(4).empty()) {
    std::optional<std::vector<int64_t>> steps = r.ints(sl->input(4));
    if (!steps || *steps != std::vector<int64_t>{1}) return false;
  }
  *data = sl->input(0);
  *s = sl->input(1);
  *e = sl->input(2);
  return true;
}

}  // namespace

std::optional<EmbeddingBagLoop> matchEmbeddingBagLoop(const onnx::NodeProto& loop,
                                                      const OuterConstantFn& outerConstant) {
  if (loop.op_type() != "Loop" || loop.input_size() != 2 || loop.input(0).empty() ||
      loop.output_size() != 1)
    return std::nullopt;
  const onnx::AttributeProto* bodyAttr = attribute(loop, "body");
  if (!bodyAttr || !bodyAttr->has_g()) return std::nullopt;
  const onnx::GraphProto& body = bodyAttr->g();
  if (body.input_size() != 2 || body.output_size() != 2) return std::nullopt;
  BodyReader r(body, outerConstant);
  const std::string& iter = body.input(0).name();

  // The condition stays true: the Loop's is absent or true, and the body's is its own passed
  // through, or a constant true.
  if (!loop.input(1).empty()) {
    std::optional<Tensor> c = outerConstant(loop.input(1));
    if (!c || !isTrueScalar(*c)) return std::nullopt;
  }
  std::string cond = body.output(0).name();
  for (;;) {
    const onnx::NodeProto* n = r.made(cond, "Identity");
    if (!n) n = r.made(cond, "Cast");
    if (!n) break;
    if (n->input_size() != 1 ||
        (n->op_type() == "Cast" && intAttribute(*n, "to", 0) != onnx::TensorProto::BOOL))
      return std::nullopt;
    cond = n->input(0);
  }
  if (cond != body.input(1).name() && !r.isTrue(cond)) return std::nullopt;

  // The scan output: a reduction over axis 0 of the gathered rows.
  EmbeddingBagLoop m;
  m.tripCount = loop.input(0);
  const std::string& scan = body.output(1).name();
  const onnx::NodeProto* red = nullptr;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax"})
    if (const onnx::NodeProto* n = r.made(scan, op)) {
      red = n;
      m.mode = op == std::string("ReduceSum") ? "sum" : op == std::string("ReduceMean") ? "mean" : "max";
    }
  if (!red || red->input_size() < 1 || intAttribute(*red, "keepdims", 1) != 0 ||
      !axesAre(r, *red, 1, 0, -2, false))
    return std::nullopt;

  // Gather(weight, rows), times Unsqueeze(per-sample weights, [1]) when multiplied.
  std::string rows = red->input(0), scale;
  if (const onnx::NodeProto* mul = r.made(rows, "Mul")) {
    if (mul->input_size() != 2) return std::nullopt;
    const bool first = r.made(mul->input(0), "Gather") != nullptr;
    rows = mul->input(first ? 0 : 1);
    scale = mul->input(first ? 1 : 0);
  }
  const onnx::NodeProto* gather = r.made(rows, "Gather");
  if (!gather || gather->input_size() != 2 || intAttribute(*gather, "axis", 0) != 0 ||
      !r.outer(gather->input(0)))
    return std::nullopt;
  m.weight = gather->input(0);
  std::string s, e;
  if (!bagSlice(r, gather->input(1), &m.indices, &s, &e)) return std::nullopt;
  m.starts = bagBound(r, s, iter);
  m.ends = bagBound(r, e, iter);
  if (m.starts.empty() || m.ends.empty()) return std::nullopt;
  if (!scale.empty()) {
    const onnx::NodeProto* u = r.made(scale, "Unsqueeze");
    std::string ws, we;
    if (!u || u->input_size() < 1 || !axesAre(r, *u, 1, 1, -1, false) ||
        !bagSlice(r, u->input(0), &m.perSampleWeights, &ws, &we) || ws != s || we != e)
      return std::nullopt;
  }
  return m;
}

}  // namespace tandem
