// Helpers shared by the shape functions (arity/dtype checks, axes, constant operands) and the
// public broadcastShapes.
#include <sstream>

#include "compiler/shapes/ShapeFns.h"

namespace tandem {

namespace shapes {

const std::vector<DType> kFloatTypes = {DType::F16, DType::BF16, DType::F32, DType::F64};
const std::vector<DType> kNumericTypes = {DType::F16, DType::BF16, DType::F32, DType::F64,
                                          DType::I32,
                                          DType::I64, DType::U8,  DType::I8,  DType::U16,
                                          DType::I16, DType::U32, DType::U64};
const std::vector<DType> kIntIndexTypes = {DType::I32, DType::I64};
const std::vector<DType> kUnsignedTypes = {DType::U8, DType::U16, DType::U32, DType::U64};

std::string operandLabel(size_t i, const char* name) {
  std::string s = "input " + std::to_string(i);
  if (name && *name) s += std::string(" (") + name + ")";
  return s;
}

static const char* nameAt(const std::vector<const char*>& names, size_t i) {
  return i < names.size() ? names[i] : nullptr;
}

std::string dimsStr(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ",";
    s += d[i] == kUnknownDim ? std::string("?") : std::to_string(d[i]);
  }
  return s + "]";
}

static std::string countPhrase(size_t lo, size_t hi, const char* noun) {
  std::string n = noun;
  if (hi == SIZE_MAX) return "at least " + std::to_string(lo) + " " + n + (lo == 1 ? "" : "s");
  if (lo == hi) return std::to_string(lo) + " " + n + (lo == 1 ? "" : "s");
  if (hi == lo + 1) return std::to_string(lo) + " or " + std::to_string(hi) + " " + n + "s";
  return std::to_string(lo) + " to " + std::to_string(hi) + " " + n + "s";
}

std::string checkArity(const Ctx& c, size_t minIn, size_t maxIn, size_t minOut, size_t maxOut,
                       const std::vector<const char*>& names) {
  size_t n = c.in.size();
  while (n > 0 && !c.in[n - 1].present) --n;
  if (n < minIn || n > maxIn)
    return c.op + " expects " + countPhrase(minIn, maxIn, "input") + ", got " + std::to_string(n);
  if (c.numResults < minOut || c.numResults > maxOut)
    return c.op + " expects " + countPhrase(minOut, maxOut, "result") + ", got " +
           std::to_string(c.numResults);
  for (size_t i = 0; i < n; ++i) {
    const OperandInfo& o = c.in[i];
    if (!o.present) {
      if (i < minIn) return c.fail(operandLabel(i, nameAt(names, i)) + " is required but absent");
      continue;
    }
    if (o.dtype == DType::Undefined || !isKnownDType((int32_t)o.dtype))
      return c.fail(operandLabel(i, nameAt(names, i)) + " has an undefined dtype");
    for (int64_t d : o.dims)
      if (d < 0 && d != kUnknownDim)
        return c.fail(operandLabel(i, nameAt(names, i)) + " has invalid dim " + std::to_string(d));
  }
  return "";
}

std::string checkSameDType(const Ctx& c, size_t i, size_t j, const std::vector<const char*>& names) {
  if (c.in[i].dtype == c.in[j].dtype) return "";
  return c.fail(operandLabel(i, nameAt(names, i)) + " has dtype " + dtypeName(c.in[i].dtype) +
                " but " + operandLabel(j, nameAt(names, j)) + " has " + dtypeName(c.in[j].dtype));
}

std::string checkDTypeIn(const Ctx& c, size_t i, const std::vector<DType>& allowed,
                         const std::vector<const char*>& names) {
  for (DType t : allowed)
    if (c.in[i].dtype == t) return "";
  std::string list;
  for (size_t k = 0; k < allowed.size(); ++k) {
    if (isHalfFloat(allowed[k])) continue;  // f16, bf16: mostly run in f32, not advertised
    if (!list.empty()) list += ", ";
    list += dtypeName(allowed[k]);
  }
  return c.fail(operandLabel(i, nameAt(names, i)) + " has dtype " + dtypeName(c.in[i].dtype) +
                " but must be one of " + list);
}

std::string normAxis(const Ctx& c, int64_t axis, int64_t rank, const std::string& what,
                     int64_t* out) {
  if (axis < -rank || axis >= rank) {
    if (rank == 0)
      return c.fail(what + " " + std::to_string(axis) + " is invalid for a rank-0 input");
    return c.fail(what + " " + std::to_string(axis) + " is out of range [" +
                  std::to_string(-rank) + ", " + std::to_string(rank - 1) + "] for a rank-" +
                  std::to_string(rank) + " input");
  }
  *out = axis < 0 ? axis + rank : axis;
  return "";
}

std::string readInts(const Ctx& c, size_t i, const char* name, bool* known,
                     std::vector<int64_t>* vals) {
  *known = false;
  vals->clear();
  if (!c.has(i) || c.in[i].value == nullptr) return "";
  const Tensor& t = *c.in[i].value;
  if (t.rank() > 1)
    return c.fail(operandLabel(i, name) + " must be 1-D, got rank " + std::to_string(t.rank()));
  int64_t n = t.numel();
  if (t.dtype() == DType::I64) {
    vals->assign(t.data<int64_t>(), t.data<int64_t>() + n);
  } else if (t.dtype() == DType::I32) {
    for (int64_t k = 0; k < n; ++k) vals->push_back(t.data<int32_t>()[k]);
  } else {
    return c.fail(operandLabel(i, name) + " must be i64 or i32, got " + dtypeName(t.dtype()));
  }
  *known = true;
  return "";
}

std::string checkIntVector(const Ctx& c, size_t i, const char* name, int64_t* len, bool allow0D) {
  const OperandInfo& o = c.in[i];
  if (o.dtype != DType::I64 && o.dtype != DType::I32)
    return c.fail(operandLabel(i, name) + " must be i64 or i32, got " + dtypeName(o.dtype));
  if (o.dims.size() == 1) {
    *len = o.dims[0];
  } else if (o.dims.empty() && allow0D) {
    *len = 1;
  } else {
    return c.fail(operandLabel(i, name) + " must be 1-D, got shape " + dimsStr(o.dims));
  }
  if (o.value) {
    if (*len != kUnknownDim && o.value->numel() != *len)
      return c.fail(operandLabel(i, name) + " has shape " + dimsStr(o.dims) + " but its value has " +
                    std::to_string(o.value->numel()) + " elements");
    *len = o.value->numel();
  }
  return "";
}

std::string rejectOldAttr(const Ctx& c, const char* attr, const std::string& input) {
  if (!c.attrs.has(attr)) return "";
  return c.fail(std::string("attribute ") + attr + " is the pre-opset-13 form; opset 17 takes it as " +
                input);
}

std::string broadcastTwo(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                         const std::string& la, const std::string& lb, std::vector<int64_t>* out) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> res(r);
  for (size_t k = 0; k < r; ++k) {
    // Align from the right; a missing leading dim acts as 1.
    int64_t da = k < r - a.size() ? 1 : a[k - (r - a.size())];
    int64_t db = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (da == 1) {
      res[k] = db;
    } else if (db == 1) {
      res[k] = da;
    } else if (da == kUnknownDim) {
      res[k] = db;  // da must be 1 or db at run time, so the result is db (or unknown)
    } else if (db == kUnknownDim) {
      res[k] = da;
    } else if (da == db) {
      res[k] = da;
    } else {
      return la + " shape " + dimsStr(a) + " and " + lb + " shape " + dimsStr(b) +
             " are not broadcastable (dim " + std::to_string(da) + " vs " + std::to_string(db) +
             ")";
    }
  }
  *out = std::move(res);
  return "";
}

std::string checkUnidirectional(const std::vector<int64_t>& target, const std::vector<int64_t>& b,
                                const std::string& lt, const std::string& lb) {
  std::string bad = lb + " shape " + dimsStr(b) + " is not unidirectionally broadcastable to " +
                    lt + " shape " + dimsStr(target);
  if (b.size() > target.size()) return bad;
  size_t off = target.size() - b.size();
  for (size_t k = 0; k < b.size(); ++k) {
    int64_t t = target[k + off], d = b[k];
    if (d == 1 || d == kUnknownDim || t == kUnknownDim || d == t) continue;
    return bad;
  }
  return "";
}

}  // namespace shapes

std::string broadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                            std::vector<int64_t>* out) {
  return shapes::broadcastTwo(a, b, "first", "second", out);
}

}  // namespace tandem
