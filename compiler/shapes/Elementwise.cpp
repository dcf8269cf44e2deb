// Shape functions of elementwise ops: arithmetic, comparisons, activations, Cast, Where, Clip,
// Dropout (ONNX opset 17; type constraints as in each op's spec).
#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {
namespace {

// Signed types only (ONNX Neg-13, Relu-14): unsigned negation makes no sense.
const std::vector<DType> kSignedTypes = {DType::F16, DType::BF16, DType::F32, DType::F64,
                                         DType::I32, DType::I64, DType::I8};
const std::vector<DType> kAllTypes = {DType::F16, DType::BF16, DType::F32, DType::F64,
                                      DType::I32,
                                      DType::I64, DType::U8,  DType::I8,  DType::Bool,
                                      DType::U16, DType::I16, DType::U32, DType::U64};

// n-way broadcast of operands [first, in.size()), labelled with `names`.
std::string broadcastAll(const Ctx& c, size_t first, const std::vector<const char*>& names,
                         std::vector<int64_t>* out) {
  *out = c.in[first].dims;
  std::string label = operandLabel(first, first < names.size() ? names[first] : nullptr);
  for (size_t i = first + 1; i < c.in.size(); ++i) {
    if (!c.in[i].present) continue;  // only trailing absent slots reach here (arity checked)
    std::vector<int64_t> next;
    std::string li = operandLabel(i, i < names.size() ? names[i] : nullptr);
    std::string err = broadcastTwo(*out, c.in[i].dims, i == first + 1 ? label : "the broadcast of inputs before it",
                                   li, &next);
    if (!err.empty()) return c.fail(err);
    *out = std::move(next);
  }
  return "";
}

// Shared by the one-input, one-result ops whose result equals the input.
std::string unary(const Ctx& c, const std::vector<DType>& allowed) {
  static const std::vector<const char*> names = {"X"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, allowed, names); !e.empty()) return e;
  c.set(0, c.in[0].dtype, c.in[0].dims);
  return "";
}

}  // namespace

std::string inferBinaryArith(const Ctx& c) {
  static const std::vector<const char*> names = {"A", "B"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kNumericTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  std::vector<int64_t> dims;
  if (auto e = broadcastAll(c, 0, names, &dims); !e.empty()) return e;
  c.set(0, c.in[0].dtype, dims);
  return "";
}

std::string inferPow(const Ctx& c) {
  // Pow-15: base T in {i32, i64, floats}, exponent T1 any numeric; result has the base's dtype.
  static const std::vector<const char*> names = {"X", "Y"};
  static const std::vector<DType> baseTypes = {DType::F16, DType::BF16, DType::F32,
                                               DType::F64, DType::I32,  DType::I64};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, baseTypes, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, kNumericTypes, names); !e.empty()) return e;
  std::vector<int64_t> dims;
  if (auto e = broadcastAll(c, 0, names, &dims); !e.empty()) return e;
  c.set(0, c.in[0].dtype, dims);
  return "";
}

std::string inferVariadic(const Ctx& c) {
  // Sum-13 and Mean-13 are float-only; Min-13/Max-13 take every numeric type.
  if (auto e = checkArity(c, 1, SIZE_MAX, 1, 1); !e.empty()) return e;
  for (size_t i = 0; i < c.in.size(); ++i)
    if (!c.in[i].present && i + 1 < c.in.size())
      return c.fail(operandLabel(i, nullptr) + " is required but absent");
  if (auto e = checkDTypeIn(c, 0, c.op == "Sum" || c.op == "Mean" ? kFloatTypes : kNumericTypes);
      !e.empty())
    return e;
  for (size_t i = 1; i < c.in.size(); ++i)
    if (c.in[i].present)
      if (auto e = checkSameDType(c, i, 0); !e.empty()) return e;
  std::vector<int64_t> dims;
  if (auto e = broadcastAll(c, 0, {}, &dims); !e.empty()) return e;
  c.set(0, c.in[0].dtype, dims);
  return "";
}

std::string inferCompare(const Ctx& c) {
  // Equal-13 also takes bool; Less-13/Greater-13 and LessOrEqual-16/GreaterOrEqual-16 numeric
  // only. Result is bool.
  static const std::vector<const char*> names = {"A", "B"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, c.op == "Equal" ? kAllTypes : kNumericTypes, names);
      !e.empty())
    return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  std::vector<int64_t> dims;
  if (auto e = broadcastAll(c, 0, names, &dims); !e.empty()) return e;
  c.set(0, DType::Bool, dims);
  return "";
}

std::string inferMod(const Ctx& c) {
  // Mod-13: A and B of one numeric dtype, broadcast; floats need fmod = 1 (Python's % is only
  // defined for integers there).
  static const std::vector<const char*> names = {"A", "B"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kNumericTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  const int64_t fmod = c.attrs.getInt("fmod", 0);
  if (fmod != 0 && fmod != 1) return c.fail("attribute fmod must be 0 or 1, got " + std::to_string(fmod));
  if (fmod == 0 && isFloat(c.in[0].dtype))
    return c.fail(std::string("fmod = 0 is undefined for ") + dtypeName(c.in[0].dtype) +
                  " operands (set fmod = 1)");
  std::vector<int64_t> dims;
  if (auto e = broadcastAll(c, 0, names, &dims); !e.empty()) return e;
  c.set(0, c.in[0].dtype, dims);
  return "";
}

std::string inferBitShift(const Ctx& c) {
  // BitShift-11: unsigned X and Y of one dtype, broadcast; direction LEFT or RIGHT (required).
  static const std::vector<const char*> names = {"X", "Y"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kUnsignedTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  const std::string dir = c.attrs.getString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return c.fail("attribute direction must be LEFT or RIGHT, got '" + dir + "'");
  std::vector<int64_t> dims;
  if (auto e = broadcastAll(c, 0, names, &dims); !e.empty()) return e;
  c.set(0, c.in[0].dtype, dims);
  return "";
}

std::string inferBitwise(const Ctx& c) {
  // BitwiseAnd/Or/Xor-18 (two operands, broadcast) and BitwiseNot-18 (one): integers of one dtype.
  static const std::vector<DType> integers = {DType::I8,  DType::I16, DType::I32, DType::I64,
                                              DType::U8,  DType::U16, DType::U32, DType::U64};
  static const std::vector<const char*> names = {"A", "B"};
  static const std::vector<const char*> notNames = {"X"};
  const size_t arity = c.op == "BitwiseNot" ? 1 : 2;
  const auto& nm = arity == 1 ? notNames : names;
  if (auto e = checkArity(c, arity, arity, 1, 1, nm); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, integers, nm); !e.empty()) return e;
  if (arity == 1) {
    c.set(0, c.in[0].dtype, c.in[0].dims);
    return "";
  }
  if (auto e = checkSameDType(c, 1, 0, nm); !e.empty()) return e;
  std::vector<int64_t> dims;
  if (auto e = broadcastAll(c, 0, nm, &dims); !e.empty()) return e;
  c.set(0, c.in[0].dtype, dims);
  return "";
}

std::string inferLogical(const Ctx& c) {
  // Not-1 (one operand), And/Or/Xor-7 (two, broadcast): bool in, bool out.
  static const std::vector<const char*> names = {"A", "B"};
  const size_t arity = c.op == "Not" ? 1 : 2;
  if (auto e = checkArity(c, arity, arity, 1, 1, names); !e.empty()) return e;
  for (size_t i = 0; i < arity; ++i)
    if (auto e = checkDTypeIn(c, i, {DType::Bool}, names); !e.empty()) return e;
  std::vector<int64_t> dims;
  if (auto e = broadcastAll(c, 0, names, &dims); !e.empty()) return e;
  c.set(0, DType::Bool, dims);
  return "";
}

std::string inferClassify(const Ctx& c) {
  // IsNaN-13, IsInf-10: float in, bool of the same shape out.
  static const std::vector<const char*> names = {"X"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  c.set(0, DType::Bool, c.in[0].dims);
  return "";
}

std::string inferWhere(const Ctx& c) {
  static const std::vector<const char*> names = {"condition", "X", "Y"};
  if (auto e = checkArity(c, 3, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, {DType::Bool}, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 2, 1, names); !e.empty()) return e;
  std::vector<int64_t> dims;
  if (auto e = broadcastAll(c, 0, names, &dims); !e.empty()) return e;
  c.set(0, c.in[1].dtype, dims);
  return "";
}

std::string inferUnaryFloat(const Ctx& c) { return unary(c, kFloatTypes); }

std::string inferUnaryNumeric(const Ctx& c) {
  // Abs-13, Erf-13 and Shrink-9 take every numeric type; Neg-13 and Relu-14 only signed ones.
  if (c.op == "Abs" || c.op == "Erf" || c.op == "Shrink") return unary(c, kNumericTypes);
  return unary(c, kSignedTypes);
}

std::string inferIdentity(const Ctx& c) { return unary(c, kAllTypes); }

std::string inferPRelu(const Ctx& c) {
  // PRelu-16: slope is unidirectionally broadcastable to X; the result has X's shape.
  static const std::vector<const char*> names = {"X", "slope"};
  static const std::vector<DType> types = {DType::F16, DType::BF16, DType::F32,
                                           DType::F64, DType::I32,  DType::I64};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, types, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  if (auto e = checkUnidirectional(c.in[0].dims, c.in[1].dims, operandLabel(0, "X"),
                                   operandLabel(1, "slope"));
      !e.empty())
    return c.fail(e);
  c.set(0, c.in[0].dtype, c.in[0].dims);
  return "";
}

std::string inferClip(const Ctx& c) {
  // Clip-13: min and max are optional scalar inputs of the input's dtype.
  static const std::vector<const char*> names = {"input", "min", "max"};
  if (auto e = rejectOldAttr(c, "min", "input 1 (min)"); !e.empty()) return e;
  if (auto e = rejectOldAttr(c, "max", "input 2 (max)"); !e.empty()) return e;
  if (auto e = checkArity(c, 1, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kNumericTypes, names); !e.empty()) return e;
  for (size_t i = 1; i < 3; ++i) {
    if (!c.has(i)) continue;
    if (auto e = checkSameDType(c, i, 0, names); !e.empty()) return e;
    const auto& d = c.in[i].dims;
    // Exporters often emit shape [1] for the bound; it holds one value all the same.
    bool scalar = d.empty() || (d.size() == 1 && (d[0] == 1 || d[0] == kUnknownDim));
    if (!scalar)
      return c.fail(operandLabel(i, names[i]) + " must be a scalar, got shape " + dimsStr(d));
  }
  c.set(0, c.in[0].dtype, c.in[0].dims);
  return "";
}

std::string inferCast(const Ctx& c) {
  static const std::vector<const char*> names = {"input"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  const Attr* to = c.attrs.find("to");
  if (!to || to->kind != Attr::Kind::Int) return c.fail("attribute 'to' (an integer) is required");
  if (to->i == 0 || to->i > INT32_MAX || !isKnownDType((int32_t)to->i))
    return c.fail("attribute to=" + std::to_string(to->i) + " is not a supported ONNX dtype code");
  c.set(0, (DType)to->i, c.in[0].dims);
  return "";
}

std::string inferCastLike(const Ctx& c) {
  // CastLike-15: input converted to the dtype of target_type (whose values are not read).
  static const std::vector<const char*> names = {"input", "target_type"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  c.set(0, c.in[1].dtype, c.in[0].dims);
  return "";
}

std::string inferDropout(const Ctx& c) {
  // Dropout-13: data, optional ratio (float scalar), optional training_mode (bool scalar), and
  // Tandem's optional counter (f32 or i64 scalar: the training step, which selects the mask);
  // results: output (as data) and optional mask (bool, data's shape).
  static const std::vector<const char*> names = {"data", "ratio", "training_mode", "counter"};
  if (auto e = checkArity(c, 1, 4, 1, 2, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  if (c.has(1)) {
    if (auto e = checkDTypeIn(c, 1, kFloatTypes, names); !e.empty()) return e;
    if (!c.in[1].dims.empty())
      return c.fail("input 1 (ratio) must be a scalar, got shape " + dimsStr(c.in[1].dims));
  }
  if (c.has(2)) {
    if (auto e = checkDTypeIn(c, 2, {DType::Bool}, names); !e.empty()) return e;
    if (!c.in[2].dims.empty())
      return c.fail("input 2 (training_mode) must be a scalar, got shape " +
                    dimsStr(c.in[2].dims));
  }
  if (c.has(3)) {
    if (auto e = checkDTypeIn(c, 3, {DType::F32, DType::I64}, names); !e.empty()) return e;
    if (!c.in[3].dims.empty())
      return c.fail("input 3 (counter) must be a scalar, got shape " + dimsStr(c.in[3].dims));
  }
  c.set(0, c.in[0].dtype, c.in[0].dims);
  if (c.numResults == 2) c.set(1, DType::Bool, c.in[0].dims);
  return "";
}

}  // namespace tandem::shapes
