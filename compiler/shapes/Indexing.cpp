// Shape functions of the gather/scatter, rearranging, top-k, Einsum and value-dependent ops
// (ONNX opset 17 forms): GatherElements-13, GatherND-13, ScatterElements-16, ScatterND-16,
// OneHot-11, DepthToSpace-13, SpaceToDepth-13, ReverseSequence-10, TopK-11, Einsum-12, and
// Compress-11, NonZero-13, Unique-11, NonMaxSuppression-11, whose result sizes come from operand
// values (runtime/DataDependent.h): computed when those operands are constants (or, in a
// dynamic region, the run-time values: runtime/DynamicRegion.h), otherwise kUnknownDim in a
// result of known rank, which puts the op in a dynamic region (--tandem-outline-dynamic).
#include <algorithm>

#include "compiler/shapes/ShapeFns.h"
#include "runtime/DataDependent.h"
#include "runtime/Einsum.h"

namespace tandem::shapes {
namespace {

// Scalar or one-element operand i as int64 (known=false when not constant).
std::string readScalarInt(const Ctx& c, size_t i, const char* name, bool* known, int64_t* v) {
  std::vector<int64_t> vals;
  *known = false;
  if (!c.has(i) || !c.in[i].value) return "";
  if (c.in[i].value->rank() > 1 || c.in[i].value->numel() != 1)
    return c.fail(operandLabel(i, name) + " must have one element");
  if (auto e = readInts(c, i, name, known, &vals); !e.empty()) return e;
  *v = vals[0];
  return "";
}

}  // namespace

std::string inferGatherElements(const Ctx& c) {
  // Result: the indices' shape, data's dtype; same rank.
  static const std::vector<const char*> names = {"data", "indices"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, kIntIndexTypes, names); !e.empty()) return e;
  const auto &x = c.in[0].dims, &ix = c.in[1].dims;
  int64_t axis;
  if (x.empty()) return c.fail("input 0 (data) must have rank >= 1, got a scalar");
  if (auto e = normAxis(c, c.attrs.getInt("axis", 0), x.size(), "attribute axis", &axis); !e.empty())
    return e;
  if (ix.size() != x.size())
    return c.fail("input 1 (indices) shape " + dimsStr(ix) + " must have the rank of input 0 (data) " +
                  dimsStr(x));
  c.set(0, c.in[0].dtype, ix);
  return "";
}

std::string inferScatterElements(const Ctx& c) {
  // data, indices, updates: indices and updates of one shape, rank of data; result is data's.
  static const std::vector<const char*> names = {"data", "indices", "updates"};
  if (auto e = checkArity(c, 3, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, kIntIndexTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 2, 0, names); !e.empty()) return e;
  const auto &x = c.in[0].dims, &ix = c.in[1].dims, &u = c.in[2].dims;
  int64_t axis;
  if (x.empty()) return c.fail("input 0 (data) must have rank >= 1, got a scalar");
  if (auto e = normAxis(c, c.attrs.getInt("axis", 0), x.size(), "attribute axis", &axis); !e.empty())
    return e;
  if (ix.size() != x.size() || u.size() != ix.size())
    return c.fail("input 1 (indices) " + dimsStr(ix) + " and input 2 (updates) " + dimsStr(u) +
                  " must have one shape of the rank of input 0 (data) " + dimsStr(x));
  std::string red = c.attrs.getString("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    return c.fail("attribute reduction='" + red + "' is not one of none, add, mul, max, min");
  c.set(0, c.in[0].dtype, x);
  return "";
}

std::string inferGatherND(const Ctx& c) {
  // indices [..., k] pick k-tuples after batch_dims b: indices.shape[:-1] + data.shape[b+k:].
  static const std::vector<const char*> names = {"data", "indices"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (c.in[1].dtype != DType::I64) return c.fail("input 1 (indices) must be i64");
  const auto &x = c.in[0].dims, &ix = c.in[1].dims;
  const int64_t b = c.attrs.getInt("batch_dims", 0);
  if (x.empty() || ix.empty()) return c.fail("data and indices must have rank >= 1");
  const int64_t k = ix.back();
  if (k == kUnknownDim) return c.fail("the last dim of input 1 (indices) must be known");
  if (b < 0 || b >= (int64_t)std::min(x.size(), ix.size()) || b + k > (int64_t)x.size())
    return c.fail("batch_dims " + std::to_string(b) + " with index tuples of " + std::to_string(k) +
                  " do not fit data " + dimsStr(x) + " and indices " + dimsStr(ix));
  std::vector<int64_t> y(ix.begin(), ix.end() - 1);
  y.insert(y.end(), x.begin() + b + k, x.end());
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferScatterND(const Ctx& c) {
  // updates = indices.shape[:-1] + data.shape[k:]; result is data's.
  static const std::vector<const char*> names = {"data", "indices", "updates"};
  if (auto e = checkArity(c, 3, 3, 1, 1, names); !e.empty()) return e;
  if (c.in[1].dtype != DType::I64) return c.fail("input 1 (indices) must be i64");
  if (auto e = checkSameDType(c, 2, 0, names); !e.empty()) return e;
  const auto &x = c.in[0].dims, &ix = c.in[1].dims, &u = c.in[2].dims;
  if (ix.empty()) return c.fail("input 1 (indices) must have rank >= 1");
  const int64_t k = ix.back();
  if (k != kUnknownDim && (k < 1 || k > (int64_t)x.size()))
    return c.fail("index tuples of " + std::to_string(k) + " do not fit data " + dimsStr(x));
  if (k != kUnknownDim && u.size() != ix.size() - 1 + x.size() - k)
    return c.fail("input 2 (updates) " + dimsStr(u) + " must have rank " +
                  std::to_string(ix.size() - 1 + x.size() - k));
  std::string red = c.attrs.getString("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    return c.fail("attribute reduction='" + red + "' is not one of none, add, mul, max, min");
  c.set(0, c.in[0].dtype, x);
  return "";
}

std::string inferOneHot(const Ctx& c) {
  // indices, depth (one element), values [off, on]: indices' shape with depth at axis.
  static const std::vector<const char*> names = {"indices", "depth", "values"};
  if (auto e = checkArity(c, 3, 3, 1, 1, names); !e.empty()) return e;
  const auto& ix = c.in[0].dims;
  const int64_t r = ix.size() + 1;
  int64_t axis = c.attrs.getInt("axis", -1);
  if (auto e = normAxis(c, axis, r, "attribute axis", &axis); !e.empty()) return e;
  bool known;
  int64_t depth = kUnknownDim;
  if (c.in[1].value && isFloat(c.in[1].dtype)) {
    known = true;
    double d = c.in[1].dtype == DType::F32 ? c.in[1].value->data<float>()[0]
                                           : c.in[1].value->data<double>()[0];
    depth = (int64_t)d;
  } else if (auto e = readScalarInt(c, 1, "depth", &known, &depth); !e.empty()) {
    return e;
  }
  if (!known) return c.fail("input 1 (depth) must be a constant");
  if (depth < 1) return c.fail("input 1 (depth) is " + std::to_string(depth) + "; it must be >= 1");
  std::vector<int64_t> y(ix);
  y.insert(y.begin() + axis, depth);
  c.set(0, c.in[2].dtype, y);
  return "";
}

static std::string inferBlocks(const Ctx& c, bool toSpace) {
  static const std::vector<const char*> names = {"input"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (x.size() != 4) return c.fail("input 0 must be 4-D [N, C, H, W], got " + dimsStr(x));
  if (!c.attrs.has("blocksize")) return c.fail("attribute blocksize is required");
  const int64_t b = c.attrs.getInt("blocksize", 0);
  if (b < 1) return c.fail("attribute blocksize must be >= 1");
  if (toSpace) {
    std::string mode = c.attrs.getString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return c.fail("attribute mode='" + mode + "' is not DCR or CRD");
  }
  auto mul = [](int64_t d, int64_t f) { return d == kUnknownDim ? d : d * f; };
  std::vector<int64_t> y = x;
  if (toSpace) {
    if (x[1] != kUnknownDim && x[1] % (b * b))
      return c.fail("channels " + std::to_string(x[1]) + " are not a multiple of blocksize^2 = " +
                    std::to_string(b * b));
    y = {x[0], x[1] == kUnknownDim ? x[1] : x[1] / (b * b), mul(x[2], b), mul(x[3], b)};
  } else {
    for (int d = 2; d < 4; ++d)
      if (x[d] != kUnknownDim && x[d] % b)
        return c.fail("spatial dim " + std::to_string(x[d]) + " is not a multiple of blocksize " +
                      std::to_string(b));
    y = {x[0], mul(x[1], b * b), x[2] == kUnknownDim ? x[2] : x[2] / b,
         x[3] == kUnknownDim ? x[3] : x[3] / b};
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}
std::string inferDepthToSpace(const Ctx& c) { return inferBlocks(c, true); }
std::string inferSpaceToDepth(const Ctx& c) { return inferBlocks(c, false); }

std::string inferReverseSequence(const Ctx& c) {
  static const std::vector<const char*> names = {"input", "sequence_lens"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (c.in[1].dtype != DType::I64) return c.fail("input 1 (sequence_lens) must be i64");
  const auto& x = c.in[0].dims;
  if (x.size() < 2) return c.fail("input 0 must have rank >= 2, got " + dimsStr(x));
  const int64_t ba = c.attrs.getInt("batch_axis", 1), ta = c.attrs.getInt("time_axis", 0);
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
    return c.fail("attributes batch_axis and time_axis must be 0 and 1 in some order");
  if (c.in[1].dims.size() != 1) return c.fail("input 1 (sequence_lens) must be 1-D");
  c.set(0, c.in[0].dtype, x);
  return "";
}

std::string inferTopK(const Ctx& c) {
  // X, K (one element, constant): Values and i64 Indices with dim axis = K.
  static const std::vector<const char*> names = {"X", "K"};
  if (auto e = checkArity(c, 2, 2, 1, 2, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kNumericTypes, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t axis;
  if (x.empty()) return c.fail("input 0 (X) must have rank >= 1, got a scalar");
  if (auto e = normAxis(c, c.attrs.getInt("axis", -1), x.size(), "attribute axis", &axis); !e.empty())
    return e;
  bool known;
  int64_t k = 0;
  if (c.in[1].dtype != DType::I64) return c.fail("input 1 (K) must be i64");
  if (auto e = readScalarInt(c, 1, "K", &known, &k); !e.empty()) return e;
  if (!known) k = kUnknownDim;  // K computed at run time: a dynamic region's op
  else if (k < 0 || (x[axis] != kUnknownDim && k > x[axis]))
    return c.fail("input 1 (K) is " + std::to_string(k) + " but axis " + std::to_string(axis) +
                  " has size " + std::to_string(x[axis]));
  std::vector<int64_t> y = x;
  y[axis] = k;
  c.set(0, c.in[0].dtype, y);
  if (c.numResults > 1) c.set(1, DType::I64, y);
  return "";
}

std::string inferEinsum(const Ctx& c) {
  if (auto e = checkArity(c, 1, SIZE_MAX, 1, 1); !e.empty()) return e;
  if (!c.attrs.has("equation")) return c.fail("attribute equation is required");
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (i > 0)
      if (auto e = checkSameDType(c, i, 0); !e.empty()) return e;
    shapes.push_back(c.in[i].dims);
  }
  EinsumSpec spec;
  if (auto e = parseEinsum(c.attrs.getString("equation", ""), shapes, &spec); !e.empty())
    return c.fail(e);
  std::vector<int64_t> y;
  for (int l : spec.outputLabels) y.push_back(spec.extent[l]);
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferCompress(const Ctx& c) {
  // With axis: data with that dim = the number of true conditions; without: 1-D.
  static const std::vector<const char*> names = {"input", "condition"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (c.in[1].dtype != DType::Bool) return c.fail("input 1 (condition) must be bool");
  if (c.in[1].dims.size() != 1) return c.fail("input 1 (condition) must be 1-D");
  const auto& x = c.in[0].dims;
  int64_t axis = -1, limit = 0;
  if (c.attrs.has("axis")) {
    if (auto e = normAxis(c, c.attrs.getInt("axis", 0), x.size(), "attribute axis", &axis); !e.empty())
      return e;
    limit = x[axis];
  } else {
    limit = 1;
    for (int64_t d : x) limit = d == kUnknownDim || limit == kUnknownDim ? kUnknownDim : limit * d;
  }
  const Tensor* cond = c.in[1].value;
  if (!cond) {
    c.set(0, c.in[0].dtype, selectedShape(x, axis, kUnknownDim));
    return "";
  }
  if (limit == kUnknownDim) return c.fail("the compressed extent of input 0 must be known");
  if (cond->numel() > limit)
    return c.fail("input 1 (condition) has " + std::to_string(cond->numel()) +
                  " entries but the compressed extent is " + std::to_string(limit));
  c.set(0, c.in[0].dtype, selectedShape(x, axis, countTrue(*cond, limit)));
  return "";
}

std::string inferNonZero(const Ctx& c) {
  if (auto e = checkArity(c, 1, 1, 1, 1); !e.empty()) return e;
  const int64_t rank = (int64_t)c.in[0].dims.size();
  c.set(0, DType::I64, {rank, c.in[0].value ? countNonZero(*c.in[0].value) : kUnknownDim});
  return "";
}

std::string inferUnique(const Ctx& c) {
  // Y: the unique elements (1-D) or slices along axis; indices, inverse_indices, counts: i64 1-D.
  static const std::vector<const char*> names = {"X"};
  if (auto e = checkArity(c, 1, 1, 1, 4, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t axis = -1;
  if (c.attrs.has("axis"))
    if (auto e = normAxis(c, c.attrs.getInt("axis", 0), x.size(), "attribute axis", &axis); !e.empty())
      return e;
  if (!c.in[0].value) {
    c.set(0, c.in[0].dtype, selectedShape(x, axis, kUnknownDim));
    int64_t slices = kUnknownDim;
    if (axis >= 0) slices = x[axis];
    else if (std::find(x.begin(), x.end(), kUnknownDim) == x.end()) slices = numElements(x);
    for (size_t i = 1; i < c.numResults; ++i) c.set(i, DType::I64, {i == 2 ? slices : kUnknownDim});
    return "";
  }
  UniqueResult u;
  Status st = uniqueSlices(*c.in[0].value, axis, c.attrs.getInt("sorted", 1) != 0, &u);
  if (!st.isOk()) return c.fail(st.message());
  const int64_t n = u.first.size();
  c.set(0, c.in[0].dtype, selectedShape(x, axis, n));
  const int64_t slices = u.inverse.size();
  for (size_t i = 1; i < c.numResults; ++i) c.set(i, DType::I64, {i == 2 ? slices : n});
  return "";
}

std::string inferNonMaxSuppression(const Ctx& c) {
  // [selected, 3] i64 (batch, class, box); every operand's value decides `selected`.
  static const std::vector<const char*> names = {"boxes", "scores", "max_output_boxes_per_class",
                                                 "iou_threshold", "score_threshold"};
  if (auto e = checkArity(c, 2, 5, 1, 1, names); !e.empty()) return e;
  if (c.in[0].dtype != DType::F32 || c.in[1].dtype != DType::F32)
    return c.fail("inputs 0 (boxes) and 1 (scores) must be f32");
  for (size_t i = 0; i < 5; ++i) {
    if (c.has(i) && !c.in[i].value) {
      c.set(0, DType::I64, {kUnknownDim, 3});
      return "";
    }
  }
  int64_t maxPerClass = 0;
  bool known;
  if (c.has(2))
    if (auto e = readScalarInt(c, 2, names[2], &known, &maxPerClass); !e.empty()) return e;
  auto scalarF = [&](size_t i) { return c.in[i].value->data<float>()[0]; };
  for (size_t i = 3; i < 5; ++i)
    if (c.has(i) && (c.in[i].dtype != DType::F32 || c.in[i].value->numel() != 1))
      return c.fail(operandLabel(i, names[i]) + " must be one f32");
  std::vector<int64_t> sel;
  Status st = nonMaxSuppression(*c.in[0].value, *c.in[1].value, maxPerClass,
                                c.has(3) ? scalarF(3) : 0.f, c.has(4), c.has(4) ? scalarF(4) : 0.f,
                                c.attrs.getInt("center_point_box", 0) != 0, &sel);
  if (!st.isOk()) return c.fail(st.message());
  c.set(0, DType::I64, {(int64_t)sel.size() / 3, 3});
  return "";
}

std::string inferTensorScatter(const Ctx& c) {
  // TensorScatter-24: update [B, ..., S, ...] written into past_cache [B, ..., M, ...] along
  // `axis` (not 0) from write_indices [B] (i64; 0s when absent); the result is past_cache's.
  static const std::vector<const char*> names = {"past_cache", "update", "write_indices"};
  if (auto e = checkArity(c, 2, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  const auto& p = c.in[0].dims;
  const auto& u = c.in[1].dims;
  if (p.size() < 2 || u.size() != p.size())
    return c.fail("past_cache " + dimsStr(p) + " and update " + dimsStr(u) +
                  " must have one rank of at least 2");
  int64_t axis = 0;
  if (auto e = normAxis(c, c.attrs.getInt("axis", -2), p.size(), "attribute axis", &axis); !e.empty())
    return e;
  if (axis == 0) return c.fail("attribute axis cannot be 0 (the batch dim)");
  const std::string mode = c.attrs.getString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return c.fail("attribute mode must be linear or circular, got '" + mode + "'");
  for (size_t i = 0; i < p.size(); ++i) {
    const bool ok = p[i] == kUnknownDim || u[i] == kUnknownDim ||
                    ((int64_t)i == axis ? u[i] <= p[i] : u[i] == p[i]);
    if (!ok)
      return c.fail("update " + dimsStr(u) + " does not fit past_cache " + dimsStr(p) +
                    " (dims other than axis " + std::to_string(axis) +
                    " equal, the sequence no longer)");
  }
  if (c.has(2)) {
    if (auto e = checkDTypeIn(c, 2, {DType::I64}, names); !e.empty()) return e;
    const auto& w = c.in[2].dims;
    if (w.size() != 1 || (w[0] != kUnknownDim && p[0] != kUnknownDim && w[0] != p[0]))
      return c.fail("write_indices must be [batch], got " + dimsStr(w));
  }
  c.set(0, c.in[0].dtype, p);
  return "";
}

std::string inferEmbeddingBag(const Ctx& c) {
  // weight [V, D], indices [L], starts [M], ends [M][, per_sample_weights [L]] -> [M, D] of
  // weight's dtype; mode sum, mean or max.
  static const std::vector<const char*> names = {"weight", "indices", "starts", "ends",
                                                 "per_sample_weights"};
  if (auto e = checkArity(c, 4, 5, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, {DType::F32, DType::F64}, names); !e.empty()) return e;
  for (size_t i = 1; i < 4; ++i)
    if (auto e = checkDTypeIn(c, i, {DType::I32, DType::I64}, names); !e.empty()) return e;
  const std::string mode = c.attrs.getString("mode", "sum");
  if (mode != "sum" && mode != "mean" && mode != "max")
    return c.fail("attribute mode must be sum, mean or max, got '" + mode + "'");
  const auto& w = c.in[0].dims;
  if (w.size() != 2) return c.fail("weight must be [V, D], got " + dimsStr(w));
  for (size_t i = 1; i < 4; ++i)
    if (c.in[i].dims.size() != 1)
      return c.fail(operandLabel(i, names[i]) + " must be 1-D, got " + dimsStr(c.in[i].dims));
  const int64_t ms = c.in[2].dims[0], me = c.in[3].dims[0];
  if (ms != kUnknownDim && me != kUnknownDim && ms != me)
    return c.fail("starts " + dimsStr(c.in[2].dims) + " and ends " + dimsStr(c.in[3].dims) +
                  " must have one length (the bags)");
  if (c.has(4)) {
    if (auto e = checkSameDType(c, 4, 0, names); !e.empty()) return e;
    const auto& p = c.in[4].dims;
    const int64_t l = c.in[1].dims[0];
    if (p.size() != 1 || (p[0] != kUnknownDim && l != kUnknownDim && p[0] != l))
      return c.fail("per_sample_weights must be [L] as indices " + dimsStr(c.in[1].dims) +
                    ", got " + dimsStr(p));
  }
  c.set(0, c.in[0].dtype, {me != kUnknownDim ? me : ms, w[1]});
  return "";
}

std::string inferEmbeddingBagGrad(const Ctx& c) {
  // weight [V, D], indices [L], starts [M], ends [M], dY [M, D][, per_sample_weights [L]] ->
  // d weight [V, D].
  static const std::vector<const char*> names = {"weight", "indices", "starts", "ends", "dY",
                                                 "per_sample_weights"};
  if (auto e = checkArity(c, 5, 6, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, {DType::F32, DType::F64}, names); !e.empty()) return e;
  for (size_t i = 1; i < 4; ++i)
    if (auto e = checkDTypeIn(c, i, {DType::I32, DType::I64}, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 4, 0, names); !e.empty()) return e;
  const auto& w = c.in[0].dims;
  const auto& dy = c.in[4].dims;
  if (w.size() != 2 || dy.size() != 2 || c.in[1].dims.size() != 1 || c.in[3].dims.size() != 1 ||
      (dy[1] != kUnknownDim && w[1] != kUnknownDim && dy[1] != w[1]) ||
      (dy[0] != kUnknownDim && c.in[3].dims[0] != kUnknownDim && dy[0] != c.in[3].dims[0]))
    return c.fail("dY " + dimsStr(dy) + " must be [M, D] for weight " + dimsStr(w) + " and ends " +
                  dimsStr(c.in[3].dims));
  if (c.has(5))
    if (auto e = checkSameDType(c, 5, 0, names); !e.empty()) return e;
  c.set(0, c.in[0].dtype, w);
  return "";
}

std::string inferCol2Im(const Ctx& c) {
  // Col2Im-18: input [N, C prod(block_shape), L], image_shape and block_shape (i64, one value
  // per spatial dim) -> [N, C, image_shape...]; L must be the count of block positions.
  static const std::vector<const char*> names = {"input", "image_shape", "block_shape"};
  if (auto e = checkArity(c, 3, 3, 1, 1, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (x.size() != 3)
    return c.fail("input must be [N, C * prod(block_shape), L], got " + dimsStr(x));
  int64_t nImage = 0, nBlock = 0;
  if (auto e = checkIntVector(c, 1, "image_shape", &nImage); !e.empty()) return e;
  if (auto e = checkIntVector(c, 2, "block_shape", &nBlock); !e.empty()) return e;
  bool imageKnown = false, blockKnown = false;
  std::vector<int64_t> image, block;
  if (auto e = readInts(c, 1, "image_shape", &imageKnown, &image); !e.empty()) return e;
  if (auto e = readInts(c, 2, "block_shape", &blockKnown, &block); !e.empty()) return e;
  const int64_t n = nImage != kUnknownDim ? nImage : nBlock;
  if (n == kUnknownDim) return c.fail("image_shape needs a known length (the spatial rank)");
  if (nBlock != kUnknownDim && nBlock != n)
    return c.fail("image_shape has " + std::to_string(n) + " values but block_shape " +
                  std::to_string(nBlock));
  const auto strides = c.attrs.getInts("strides", std::vector<int64_t>(n, 1));
  const auto dilations = c.attrs.getInts("dilations", std::vector<int64_t>(n, 1));
  const auto pads = c.attrs.getInts("pads", std::vector<int64_t>(2 * n, 0));
  if ((int64_t)strides.size() != n || (int64_t)dilations.size() != n ||
      (int64_t)pads.size() != 2 * n)
    return c.fail("attributes strides and dilations need " + std::to_string(n) +
                  " values and pads " + std::to_string(2 * n));
  std::vector<int64_t> y = {x[0], kUnknownDim};
  for (int64_t i = 0; i < n; ++i) y.push_back(imageKnown ? image[i] : kUnknownDim);
  if (blockKnown) {
    int64_t taps = 1, blocks = 1;
    for (int64_t i = 0; i < n; ++i) {
      if (block[i] < 1 || strides[i] < 1 || dilations[i] < 1)
        return c.fail("block_shape, strides and dilations must be >= 1");
      taps *= block[i];
      if (imageKnown) {
        const int64_t span = image[i] + pads[i] + pads[i + n] - dilations[i] * (block[i] - 1) - 1;
        if (span < 0)
          return c.fail("block " + std::to_string(block[i]) + " (dilated) does not fit image dim " +
                        std::to_string(image[i]) + " with its pads");
        blocks *= span / strides[i] + 1;
      }
    }
    if (x[1] != kUnknownDim && x[1] % taps != 0)
      return c.fail("input's " + std::to_string(x[1]) + " rows are not a multiple of prod(block_shape) = " +
                    std::to_string(taps));
    if (x[1] != kUnknownDim) y[1] = x[1] / taps;
    if (imageKnown && x[2] != kUnknownDim && x[2] != blocks)
      return c.fail("input has " + std::to_string(x[2]) + " blocks (L) but image_shape and "
                    "block_shape give " + std::to_string(blocks));
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

}  // namespace tandem::shapes
