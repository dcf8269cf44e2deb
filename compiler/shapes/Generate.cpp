// Shape functions of the tensor-generation and scan ops: Range-11, EyeLike-9, Size-13, Trilu-14,
// CumSum-14, HannWindow/HammingWindow/BlackmanWindow-17 (ONNX opset 17; type constraints as in
// each op's spec).
#include <cmath>

#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {
namespace {

// Range-11's types: f32, f64, i16, i32, i64 (those Tandem has).
const std::vector<DType> kRangeTypes = {DType::F32, DType::F64, DType::I32, DType::I64};

// The value of a 0-D or one-element constant operand as double; false when not constant.
bool scalarValue(const Ctx& c, size_t i, double* v) {
  const Tensor* t = c.has(i) ? c.in[i].value : nullptr;
  if (!t || t->numel() != 1) return false;
  bool ok = dispatchDType(t->dtype(), [&](auto tag) {
    using T = decltype(tag);
    *v = double(t->data<T>()[0]);
  });
  return ok;
}

}  // namespace

std::string inferRange(const Ctx& c) {
  // Range-11: scalars start, limit, delta of one dtype; the result has
  // max(ceil((limit - start) / delta), 0) elements, known when the three are constants.
  static const std::vector<const char*> names = {"start", "limit", "delta"};
  if (auto e = checkArity(c, 3, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kRangeTypes, names); !e.empty()) return e;
  for (size_t i = 0; i < 3; ++i) {
    if (i > 0)
      if (auto e = checkSameDType(c, i, 0, names); !e.empty()) return e;
    const auto& d = c.in[i].dims;
    if (!(d.empty() || (d.size() == 1 && (d[0] == 1 || d[0] == kUnknownDim))))
      return c.fail(operandLabel(i, names[i]) + " must be a scalar, got shape " + dimsStr(d));
  }
  double v[3];
  int64_t n = kUnknownDim;
  if (scalarValue(c, 0, &v[0]) && scalarValue(c, 1, &v[1]) && scalarValue(c, 2, &v[2])) {
    if (v[2] == 0) return c.fail("input 2 (delta) is 0");
    const double count = std::ceil((v[1] - v[0]) / v[2]);
    if (!(count < 9.0e15)) return c.fail("the range has too many elements");
    n = count > 0 ? (int64_t)count : 0;
  }
  c.set(0, c.in[0].dtype, {n});
  return "";
}

std::string inferEyeLike(const Ctx& c) {
  // EyeLike-9: a 2-D input's shape; dtype (default: the input's) from the attribute.
  static const std::vector<const char*> names = {"input"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  if (c.in[0].dims.size() != 2)
    return c.fail("input 0 (input) must be 2-D, got shape " + dimsStr(c.in[0].dims));
  DType t = c.in[0].dtype;
  if (const Attr* a = c.attrs.find("dtype")) {
    if (a->kind != Attr::Kind::Int || a->i <= 0 || a->i > INT32_MAX || !isKnownDType((int32_t)a->i))
      return c.fail("attribute dtype is not a supported ONNX dtype code");
    t = (DType)a->i;
  }
  c.set(0, t, c.in[0].dims);
  return "";
}

std::string inferSize(const Ctx& c) {
  // Size-13: the element count as an i64 scalar.
  if (auto e = checkArity(c, 1, 1, 1, 1, {"data"}); !e.empty()) return e;
  c.set(0, DType::I64, {});
  return "";
}

std::string inferWindow(const Ctx& c) {
  // *Window-17: a scalar i32/i64 size; a 1-D result of that length and output_datatype (default
  // f32), known when size is a constant.
  static const std::vector<const char*> names = {"size"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kIntIndexTypes, names); !e.empty()) return e;
  const int64_t code = c.attrs.getInt("output_datatype", (int64_t)DType::F32);
  if (code <= 0 || code > INT32_MAX || !isKnownDType((int32_t)code) || !isFloat((DType)code) ||
      isHalfFloat((DType)code))
    return c.fail("attribute output_datatype=" + std::to_string(code) + " is not f32 or f64");
  double n;
  int64_t len = kUnknownDim;
  if (scalarValue(c, 0, &n)) {
    if (n < 0) return c.fail("input 0 (size) is negative: " + std::to_string((int64_t)n));
    len = (int64_t)n;
  }
  c.set(0, (DType)code, {len});
  return "";
}

std::string inferTrilu(const Ctx& c) {
  // Trilu-14: rank >= 2, optional scalar i64 k; the result has the input's type.
  static const std::vector<const char*> names = {"input", "k"};
  if (auto e = checkArity(c, 1, 2, 1, 1, names); !e.empty()) return e;
  if (c.in[0].dims.size() < 2)
    return c.fail("input 0 (input) must have rank >= 2, got shape " + dimsStr(c.in[0].dims));
  if (c.has(1)) {
    if (auto e = checkDTypeIn(c, 1, {DType::I64}, names); !e.empty()) return e;
    const auto& d = c.in[1].dims;
    if (!(d.empty() || (d.size() == 1 && (d[0] == 1 || d[0] == kUnknownDim))))
      return c.fail("input 1 (k) must be a scalar, got shape " + dimsStr(d));
  }
  c.set(0, c.in[0].dtype, c.in[0].dims);
  return "";
}

std::string inferCumSum(const Ctx& c) {
  // CumSum-14: numeric x, a scalar i32/i64 axis (read at run time); the result has x's type.
  static const std::vector<const char*> names = {"x", "axis"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kNumericTypes, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, kIntIndexTypes, names); !e.empty()) return e;
  const auto& d = c.in[1].dims;
  if (!(d.empty() || (d.size() == 1 && (d[0] == 1 || d[0] == kUnknownDim))))
    return c.fail("input 1 (axis) must be a scalar, got shape " + dimsStr(d));
  bool known;
  std::vector<int64_t> axis;
  if (auto e = readInts(c, 1, "axis", &known, &axis); !e.empty()) return e;
  if (known && axis.size() == 1) {
    int64_t a;
    if (auto e = normAxis(c, axis[0], c.in[0].dims.size(), "input 1 (axis) value", &a); !e.empty())
      return e;
  }
  c.set(0, c.in[0].dtype, c.in[0].dims);
  return "";
}

}  // namespace tandem::shapes
