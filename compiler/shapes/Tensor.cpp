// Shape functions of the data-movement ops (ONNX opset 17 forms): Flatten-13, Reshape-14,
// Transpose-13, Squeeze-13, Unsqueeze-13, Concat-13, Split-13/18, Slice-13, Gather-13, Shape-15,
// Constant-13, ConstantOfShape-9, Expand-13, Pad-13, Tile-13.
#include <algorithm>
#include <limits>
#include <set>

#include "compiler/shapes/ShapeFns.h"
#include "runtime/CheckedMath.h"

namespace tandem::shapes {
namespace {

// Marks a product that overflows int64 (a shape operand asking for more than 2^63 elements).
constexpr int64_t kOverflow = -2;

// Product of dims [b, e); kUnknownDim if any is unknown (but 0 if any known dim is 0),
// kOverflow if the known dims' product overflows int64.
int64_t product(const std::vector<int64_t>& d, size_t b, size_t e) {
  int64_t p = 1;
  bool unknown = false, overflow = false;
  for (size_t i = b; i < e; ++i) {
    if (d[i] == 0) return 0;
    if (d[i] == kUnknownDim)
      unknown = true;
    else if (!overflow && !checkedMul(p, d[i], &p))
      overflow = true;
  }
  return overflow ? kOverflow : unknown ? kUnknownDim : p;
}

// Normalises a list of axes against `rank`, rejecting duplicates.
std::string normAxes(const Ctx& c, const std::vector<int64_t>& axes, int64_t rank,
                     const std::string& what, std::vector<int64_t>* out) {
  out->clear();
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    int64_t n;
    if (auto e = normAxis(c, a, rank, what, &n); !e.empty()) return e;
    if (!seen.insert(n).second) return c.fail(what + " " + std::to_string(a) + " appears twice");
    out->push_back(n);
  }
  return "";
}

std::string vecStr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::string inferFlatten(const Ctx& c) {
  // (d0..d_{axis-1}, d_axis..) -> (prod before, prod from axis); axis in [-r, r].
  static const std::vector<const char*> names = {"input"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t rank = x.size(), axis = c.attrs.getInt("axis", 1);
  if (axis < -rank || axis > rank)
    return c.fail("attribute axis " + std::to_string(axis) + " is out of range [" +
                  std::to_string(-rank) + ", " + std::to_string(rank) + "] for a rank-" +
                  std::to_string(rank) + " input");
  if (axis < 0) axis += rank;
  c.set(0, c.in[0].dtype, {product(x, 0, axis), product(x, axis, rank)});
  return "";
}

std::string inferReshape(const Ctx& c) {
  // shape: 0 copies the input dim (unless allowzero=1, when it means 0), one -1 is inferred.
  static const std::vector<const char*> names = {"data", "shape"};
  if (auto e = rejectOldAttr(c, "shape", "input 1 (shape)"); !e.empty()) return e;
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  int64_t len;
  if (auto e = checkIntVector(c, 1, "shape", &len); !e.empty()) return e;
  bool known;
  std::vector<int64_t> shape;
  if (auto e = readInts(c, 1, "shape", &known, &shape); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (!known) {
    if (len == kUnknownDim)
      return c.fail("input 1 (shape) is not constant and its length is unknown, so the result "
                    "rank is unknown");
    c.set(0, c.in[0].dtype, std::vector<int64_t>(len, kUnknownDim));
    return "";
  }
  bool allowZero = c.attrs.getInt("allowzero", 0) != 0;
  std::vector<int64_t> y(shape.size());
  int64_t inferAt = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t s = shape[i];
    if (s == -1) {
      if (inferAt >= 0) return c.fail("input 1 (shape) " + vecStr(shape) + " has more than one -1");
      inferAt = i;
      y[i] = kUnknownDim;
    } else if (s == 0 && !allowZero) {
      if (i >= x.size())
        return c.fail("input 1 (shape) " + vecStr(shape) + " has 0 at index " + std::to_string(i) +
                      " but data has only rank " + std::to_string(x.size()));
      y[i] = x[i];
    } else if (s < 0) {
      return c.fail("input 1 (shape) " + vecStr(shape) + " has invalid entry " + std::to_string(s));
    } else {
      y[i] = s;
    }
  }
  if (allowZero && inferAt >= 0 && std::count(shape.begin(), shape.end(), 0) > 0)
    return c.fail("input 1 (shape) " + vecStr(shape) + " has both -1 and 0 with allowzero=1");
  int64_t total = product(x, 0, x.size());
  if (product(y, 0, y.size()) == kOverflow)
    return c.fail("input 1 (shape) " + vecStr(shape) + ": the element count overflows 64 bits");
  if (inferAt >= 0) {
    std::vector<int64_t> others = y;
    others.erase(others.begin() + inferAt);
    int64_t rest = product(others, 0, others.size());
    if (rest == 0)
      return c.fail("input 1 (shape) " + vecStr(shape) +
                    " has -1 but the other dims multiply to 0, so it cannot be inferred");
    if (total != kUnknownDim && rest != kUnknownDim) {
      if (total % rest != 0)
        return c.fail("cannot reshape data of shape " + dimsStr(x) + " (" + std::to_string(total) +
                      " elements) to " + vecStr(shape));
      y[inferAt] = total / rest;
    }
  } else {
    int64_t outTotal = product(y, 0, y.size());
    if (total != kUnknownDim && outTotal != kUnknownDim && total != outTotal)
      return c.fail("cannot reshape data of shape " + dimsStr(x) + " (" + std::to_string(total) +
                    " elements) to " + dimsStr(y) + " (" + std::to_string(outTotal) +
                    " elements)");
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferTranspose(const Ctx& c) {
  // perm defaults to reversing the dims.
  static const std::vector<const char*> names = {"data"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t rank = x.size();
  std::vector<int64_t> perm;
  if (c.attrs.has("perm")) {
    perm = c.attrs.getInts("perm");
  } else {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if ((int64_t)perm.size() != rank)
    return c.fail("attribute perm " + vecStr(perm) + " has " + std::to_string(perm.size()) +
                  " entries but data has rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> y;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return c.fail("attribute perm " + vecStr(perm) + " is not a permutation of 0.." +
                    std::to_string(rank - 1));
    seen[p] = true;
    y.push_back(x[p]);
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferSqueeze(const Ctx& c) {
  // Without axes every dim of size 1 goes, which needs every dim known.
  static const std::vector<const char*> names = {"data", "axes"};
  if (auto e = rejectOldAttr(c, "axes", "input 1 (axes)"); !e.empty()) return e;
  if (auto e = checkArity(c, 1, 2, 1, 1, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t rank = x.size();
  std::vector<int64_t> y;
  if (!c.has(1)) {
    for (int64_t i = 0; i < rank; ++i) {
      if (x[i] == kUnknownDim)
        return c.fail("without axes, dim " + std::to_string(i) +
                      " of data is unknown, so whether it is squeezed (and the result rank) is "
                      "unknown");
      if (x[i] != 1) y.push_back(x[i]);
    }
    c.set(0, c.in[0].dtype, y);
    return "";
  }
  int64_t len;
  if (auto e = checkIntVector(c, 1, "axes", &len); !e.empty()) return e;
  bool known;
  std::vector<int64_t> axes, norm;
  if (auto e = readInts(c, 1, "axes", &known, &axes); !e.empty()) return e;
  if (!known) return c.fail("input 1 (axes) must be constant");
  if (auto e = normAxes(c, axes, rank, "input 1 (axes) value", &norm); !e.empty()) return e;
  for (int64_t a : norm)
    if (x[a] != 1 && x[a] != kUnknownDim)
      return c.fail("cannot squeeze axis " + std::to_string(a) + " of data shape " + dimsStr(x) +
                    ": its size is " + std::to_string(x[a]) + ", not 1");
  for (int64_t i = 0; i < rank; ++i)
    if (std::find(norm.begin(), norm.end(), i) == norm.end()) y.push_back(x[i]);
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferUnsqueeze(const Ctx& c) {
  // axes index the result (rank r + len(axes)).
  static const std::vector<const char*> names = {"data", "axes"};
  if (auto e = rejectOldAttr(c, "axes", "input 1 (axes)"); !e.empty()) return e;
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  int64_t len;
  if (auto e = checkIntVector(c, 1, "axes", &len, /*allow0D=*/true); !e.empty()) return e;
  bool known;
  std::vector<int64_t> axes, norm;
  if (auto e = readInts(c, 1, "axes", &known, &axes); !e.empty()) return e;
  if (!known) return c.fail("input 1 (axes) must be constant");
  const auto& x = c.in[0].dims;
  int64_t outRank = x.size() + axes.size();
  for (int64_t a : axes)
    if (a < -outRank || a >= outRank)
      return c.fail("input 1 (axes) value " + std::to_string(a) + " is out of range [" +
                    std::to_string(-outRank) + ", " + std::to_string(outRank - 1) +
                    "] for the rank-" + std::to_string(outRank) + " result");
  if (auto e = normAxes(c, axes, outRank, "input 1 (axes) value", &norm); !e.empty()) return e;
  std::vector<int64_t> y(outRank, 1);
  std::vector<bool> isNew(outRank, false);
  for (int64_t a : norm) isNew[a] = true;
  size_t k = 0;
  for (int64_t i = 0; i < outRank; ++i)
    if (!isNew[i]) y[i] = x[k++];
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferConcat(const Ctx& c) {
  // Same dtype and rank; dims equal except along axis, where they add.
  if (auto e = checkArity(c, 1, SIZE_MAX, 1, 1); !e.empty()) return e;
  size_t n = c.in.size();
  while (n > 0 && !c.in[n - 1].present) --n;
  for (size_t i = 0; i < n; ++i)
    if (!c.in[i].present) return c.fail(operandLabel(i, nullptr) + " is required but absent");
  if (!c.attrs.has("axis")) return c.fail("attribute axis is required");
  const auto& x0 = c.in[0].dims;
  int64_t rank = x0.size(), axis;
  if (rank == 0) return c.fail("input 0 is a scalar; Concat needs rank >= 1");
  if (auto e = normAxis(c, c.attrs.getInt("axis", 0), rank, "attribute axis", &axis); !e.empty())
    return e;
  std::vector<int64_t> y = x0;
  for (size_t i = 1; i < n; ++i) {
    if (auto e = checkSameDType(c, i, 0); !e.empty()) return e;
    const auto& xi = c.in[i].dims;
    if ((int64_t)xi.size() != rank)
      return c.fail("input " + std::to_string(i) + " has rank " + std::to_string(xi.size()) +
                    " but input 0 has rank " + std::to_string(rank));
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) {
        if (y[d] == kUnknownDim || xi[d] == kUnknownDim)
          y[d] = kUnknownDim;
        else if (!checkedAdd(y[d], xi[d], &y[d]))
          return c.fail("the inputs' sizes along axis " + std::to_string(axis) +
                        " add up to more than 2^63");
      } else if (y[d] == kUnknownDim) {
        y[d] = xi[d];
      } else if (xi[d] != kUnknownDim && xi[d] != y[d]) {
        return c.fail("input " + std::to_string(i) + " shape " + dimsStr(xi) +
                      " differs from input 0 shape " + dimsStr(x0) + " in dim " +
                      std::to_string(d) + " (only axis " + std::to_string(axis) + " may differ)");
      }
    }
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferSplit(const Ctx& c) {
  // Sizes along axis: input `split`, else attribute num_outputs (Split-18: ceil-sized chunks,
  // the last one smaller), else numResults equal parts (Split-13: must divide evenly).
  static const std::vector<const char*> names = {"input", "split"};
  if (auto e = rejectOldAttr(c, "split", "input 1 (split)"); !e.empty()) return e;
  if (auto e = checkArity(c, 1, 2, 1, SIZE_MAX, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t rank = x.size(), axis;
  if (auto e = normAxis(c, c.attrs.getInt("axis", 0), rank, "attribute axis", &axis); !e.empty())
    return e;
  int64_t dim = x[axis], n = c.numResults;
  std::vector<int64_t> sizes(n, kUnknownDim);
  if (c.has(1)) {
    if (c.attrs.has("num_outputs"))
      return c.fail("input 1 (split) and attribute num_outputs cannot both be given");
    int64_t len;
    if (auto e = checkIntVector(c, 1, "split", &len); !e.empty()) return e;
    if (len != kUnknownDim && len != n)
      return c.fail("input 1 (split) has " + std::to_string(len) + " entries but there are " +
                    std::to_string(n) + " results");
    bool known;
    std::vector<int64_t> split;
    if (auto e = readInts(c, 1, "split", &known, &split); !e.empty()) return e;
    if (known) {
      int64_t sum = 0;
      for (int64_t s : split) {
        if (s < 0) return c.fail("input 1 (split) " + vecStr(split) + " has a negative entry");
        if (!checkedAdd(sum, s, &sum))
          return c.fail("input 1 (split) " + vecStr(split) + ": the sum overflows 64 bits");
      }
      if (dim != kUnknownDim && sum != dim)
        return c.fail("input 1 (split) " + vecStr(split) + " sums to " + std::to_string(sum) +
                      " but axis " + std::to_string(axis) + " has size " + std::to_string(dim));
      sizes = split;
    }
  } else {
    if (c.attrs.has("num_outputs")) {
      int64_t k = c.attrs.getInt("num_outputs", 0);
      if (k != n)
        return c.fail("attribute num_outputs=" + std::to_string(k) + " but there are " +
                      std::to_string(n) + " results");
      if (dim != kUnknownDim) {
        if (n <= 0) return c.fail("attribute num_outputs must be positive");
        int64_t chunk = dim / n + (dim % n != 0);
        for (int64_t i = 0; i < n; ++i) sizes[i] = std::max<int64_t>(0, std::min(chunk, dim - i * chunk));
      }
    } else if (dim != kUnknownDim) {
      if (dim % n != 0)
        return c.fail("axis " + std::to_string(axis) + " of size " + std::to_string(dim) +
                      " cannot be split equally into " + std::to_string(n) + " results");
      std::fill(sizes.begin(), sizes.end(), dim / n);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> y = x;
    y[axis] = sizes[i];
    c.set(i, c.in[0].dtype, y);
  }
  return "";
}

std::string inferSlice(const Ctx& c) {
  // Per sliced axis: negative starts/ends count from the end; starts clamp to [0, d] (step > 0)
  // or [0, d-1] (step < 0), ends to [0, d] or [-1, d-1]; size = max(0, ceil((end-start)/step)).
  static const std::vector<const char*> names = {"data", "starts", "ends", "axes", "steps"};
  if (auto e = rejectOldAttr(c, "starts", "input 1 (starts)"); !e.empty()) return e;
  if (auto e = rejectOldAttr(c, "ends", "input 2 (ends)"); !e.empty()) return e;
  if (auto e = rejectOldAttr(c, "axes", "input 3 (axes)"); !e.empty()) return e;
  if (auto e = checkArity(c, 3, 5, 1, 1, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t rank = x.size();
  int64_t lens[5] = {0, 0, 0, 0, 0};
  bool known[5] = {true, true, true, true, true};
  std::vector<int64_t> vals[5];
  for (size_t i = 1; i < 5; ++i) {
    if (!c.has(i)) continue;
    if (auto e = checkIntVector(c, i, names[i], &lens[i]); !e.empty()) return e;
    if (auto e = readInts(c, i, names[i], &known[i], &vals[i]); !e.empty()) return e;
  }
  for (size_t i = 2; i < 5; ++i) {
    if (!c.has(i)) continue;
    if (lens[1] != kUnknownDim && lens[i] != kUnknownDim && lens[i] != lens[1])
      return c.fail(operandLabel(i, names[i]) + " has " + std::to_string(lens[i]) +
                    " entries but input 1 (starts) has " + std::to_string(lens[1]));
  }
  std::vector<int64_t> y = x;
  bool axesKnown = !c.has(3) || known[3];
  if (!axesKnown) {
    // Which dims change is unknown; the rank does not change.
    c.set(0, c.in[0].dtype, std::vector<int64_t>(rank, kUnknownDim));
    return "";
  }
  int64_t n = lens[1] != kUnknownDim ? lens[1] : lens[2];
  if (n == kUnknownDim && c.has(3)) n = lens[3];
  std::vector<int64_t> axes;
  if (c.has(3)) {
    if (auto e = normAxes(c, vals[3], rank, "input 3 (axes) value", &axes); !e.empty()) return e;
    n = axes.size();
  } else {
    if (n == kUnknownDim) {
      c.set(0, c.in[0].dtype, std::vector<int64_t>(rank, kUnknownDim));
      return "";
    }
    if (n > rank)
      return c.fail("input 1 (starts) has " + std::to_string(n) + " entries but data has rank " +
                    std::to_string(rank));
    for (int64_t i = 0; i < n; ++i) axes.push_back(i);
  }
  for (size_t i = 1; i < 5; ++i)
    if (c.has(i) && known[i] && (int64_t)vals[i].size() != n)
      return c.fail(operandLabel(i, names[i]) + " has " + std::to_string(vals[i].size()) +
                    " entries but " + std::to_string(n) + " axes are sliced");
  if (c.has(4) && known[4])
    for (int64_t s : vals[4])
      if (s == 0) return c.fail("input 4 (steps) " + vecStr(vals[4]) + " has a zero step");
  for (int64_t k = 0; k < n; ++k) {
    int64_t a = axes[k], d = x[a];
    if (!known[1] || !known[2] || !known[4] || d == kUnknownDim) {
      y[a] = kUnknownDim;
      continue;
    }
    int64_t step = c.has(4) ? vals[4][k] : 1;
    int64_t start = vals[1][k], end = vals[2][k];
    if (start < 0) start += d;
    if (end < 0) end += d;
    if (d == 0) {
      y[a] = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, d);
      end = std::clamp<int64_t>(end, 0, d);
      y[a] = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, d - 1);
      end = std::clamp<int64_t>(end, -1, d - 1);
      // -step would overflow for INT64_MIN; such a step takes one element.
      int64_t back = step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
      y[a] = start > end ? (start - end - 1) / back + 1 : 0;
    }
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferGather(const Ctx& c) {
  // data.shape[:axis] + indices.shape + data.shape[axis+1:]; indices in [-s, s-1].
  static const std::vector<const char*> names = {"data", "indices"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, kIntIndexTypes, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t rank = x.size(), axis;
  if (rank == 0) return c.fail("input 0 (data) must have rank >= 1, got a scalar");
  if (auto e = normAxis(c, c.attrs.getInt("axis", 0), rank, "attribute axis", &axis); !e.empty())
    return e;
  const Tensor* iv = c.in[1].value;
  if (iv && (iv->dtype() == DType::I64 || iv->dtype() == DType::I32) && x[axis] != kUnknownDim) {
    // Constant indices are checked now rather than failing at run time.
    const Tensor& t = *iv;
    int64_t s = x[axis];
    for (int64_t k = 0; k < t.numel(); ++k) {
      int64_t v = t.dtype() == DType::I64 ? t.data<int64_t>()[k] : t.data<int32_t>()[k];
      if (v < -s || v >= s)
        return c.fail("input 1 (indices) has value " + std::to_string(v) + " out of range [" +
                      std::to_string(-s) + ", " + std::to_string(s - 1) + "] for axis " +
                      std::to_string(axis) + " of size " + std::to_string(s));
    }
  }
  std::vector<int64_t> y(x.begin(), x.begin() + axis);
  y.insert(y.end(), c.in[1].dims.begin(), c.in[1].dims.end());
  y.insert(y.end(), x.begin() + axis + 1, x.end());
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferShape(const Ctx& c) {
  // 1-D i64 of length clamp(end) - clamp(start) (Shape-15; negatives count from the end).
  static const std::vector<const char*> names = {"data"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  int64_t rank = c.in[0].dims.size();
  int64_t start = c.attrs.getInt("start", 0), end = c.attrs.getInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  c.set(0, DType::I64, {std::max<int64_t>(0, end - start)});
  return "";
}

std::string inferConstant(const Ctx& c) {
  // Exactly one of value (tensor), value_float, value_floats, value_int, value_ints.
  if (auto e = checkArity(c, 0, 0, 1, 1); !e.empty()) return e;
  static const char* const kinds[] = {"value", "value_float", "value_floats", "value_int",
                                      "value_ints", "value_string", "value_strings",
                                      "sparse_value"};
  std::string given;
  int count = 0;
  for (const char* k : kinds)
    if (c.attrs.has(k)) {
      ++count;
      given = k;
    }
  if (count != 1)
    return c.fail("exactly one of the value* attributes must be given, got " +
                  std::to_string(count));
  const Attr& a = *c.attrs.find(given);
  if (given == "value") {
    if (a.kind != Attr::Kind::Tensor || !a.t.defined())
      return c.fail("attribute value must be a tensor");
    c.set(0, a.t.dtype(), a.t.shape());
  } else if (given == "value_float") {
    if (a.kind != Attr::Kind::Float) return c.fail("attribute value_float must be a float");
    c.set(0, DType::F32, {});
  } else if (given == "value_floats") {
    if (a.kind != Attr::Kind::Floats) return c.fail("attribute value_floats must be floats");
    c.set(0, DType::F32, {(int64_t)a.floats.size()});
  } else if (given == "value_int") {
    if (a.kind != Attr::Kind::Int) return c.fail("attribute value_int must be an int");
    c.set(0, DType::I64, {});
  } else if (given == "value_ints") {
    if (a.kind != Attr::Kind::Ints) return c.fail("attribute value_ints must be ints");
    c.set(0, DType::I64, {(int64_t)a.ints.size()});
  } else {
    return c.fail("attribute " + given + " is not supported (no string or sparse tensors)");
  }
  return "";
}

std::string inferConstantOfShape(const Ctx& c) {
  // input: 1-D i64 shape (empty -> scalar); value: one-element tensor giving dtype (default
  // f32 0).
  static const std::vector<const char*> names = {"input"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  DType t = DType::F32;
  if (const Attr* a = c.attrs.find("value")) {
    if (a->kind != Attr::Kind::Tensor || !a->t.defined() || a->t.numel() != 1)
      return c.fail("attribute value must be a one-element tensor");
    t = a->t.dtype();
  }
  int64_t len;
  if (auto e = checkIntVector(c, 0, "input", &len); !e.empty()) return e;
  bool known;
  std::vector<int64_t> shape;
  if (auto e = readInts(c, 0, "input", &known, &shape); !e.empty()) return e;
  if (!known) {
    if (len == kUnknownDim)
      return c.fail("input 0 (input) is not constant and its length is unknown, so the result "
                    "rank is unknown");
    c.set(0, t, std::vector<int64_t>(len, kUnknownDim));
    return "";
  }
  for (int64_t s : shape)
    if (s < 0) return c.fail("input 0 (input) " + vecStr(shape) + " has a negative dim");
  c.set(0, t, shape);
  return "";
}

std::string inferExpand(const Ctx& c) {
  // Bidirectional broadcast of input's shape with the shape operand.
  static const std::vector<const char*> names = {"input", "shape"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  int64_t len;
  if (auto e = checkIntVector(c, 1, "shape", &len); !e.empty()) return e;
  bool known;
  std::vector<int64_t> shape;
  if (auto e = readInts(c, 1, "shape", &known, &shape); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (!known) {
    if (len == kUnknownDim)
      return c.fail("input 1 (shape) is not constant and its length is unknown, so the result "
                    "rank is unknown");
    // A shape entry may be 1 (keep the input dim) or equal to it, so a known input dim other
    // than 1 survives; every other dim is unknown.
    int64_t r = std::max<int64_t>(x.size(), len);
    std::vector<int64_t> y(r, kUnknownDim);
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] != 1) y[r - x.size() + i] = x[i];
    c.set(0, c.in[0].dtype, y);
    return "";
  }
  for (int64_t s : shape)
    if (s < 0) return c.fail("input 1 (shape) " + vecStr(shape) + " has a negative dim");
  std::vector<int64_t> y;
  if (auto e = broadcastTwo(x, shape, operandLabel(0, "input"), "input 1 (shape) value", &y);
      !e.empty())
    return c.fail(e);
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferPad(const Ctx& c) {
  // pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] (negative crops); constant_value is
  // an optional scalar of data's dtype; mode constant/reflect/edge, or wrap (Pad-19; the CPU
  // and CUDA kernels wrap around the input's extent).
  static const std::vector<const char*> names = {"data", "pads", "constant_value"};
  if (auto e = rejectOldAttr(c, "pads", "input 1 (pads)"); !e.empty()) return e;
  if (auto e = rejectOldAttr(c, "value", "input 2 (constant_value)"); !e.empty()) return e;
  if (auto e = checkArity(c, 2, 3, 1, 1, names); !e.empty()) return e;
  std::string mode = c.attrs.getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return c.fail("attribute mode='" + mode + "' is not one of constant, reflect, edge, wrap");
  const auto& x = c.in[0].dims;
  int64_t rank = x.size(), len;
  if (auto e = checkIntVector(c, 1, "pads", &len); !e.empty()) return e;
  if (len != kUnknownDim && len != 2 * rank)
    return c.fail("input 1 (pads) has " + std::to_string(len) + " entries but data of rank " +
                  std::to_string(rank) + " needs " + std::to_string(2 * rank));
  if (c.has(2)) {
    if (auto e = checkSameDType(c, 2, 0, names); !e.empty()) return e;
    const auto& d = c.in[2].dims;
    if (!(d.empty() || (d.size() == 1 && (d[0] == 1 || d[0] == kUnknownDim))))
      return c.fail("input 2 (constant_value) must be a scalar, got shape " + dimsStr(d));
  }
  bool known;
  std::vector<int64_t> pads;
  if (auto e = readInts(c, 1, "pads", &known, &pads); !e.empty()) return e;
  std::vector<int64_t> y(rank, kUnknownDim);
  if (known) {
    for (int64_t i = 0; i < rank; ++i) {
      if (x[i] == kUnknownDim) continue;
      if (!checkedAdd(x[i], pads[i], &y[i]) || !checkedAdd(y[i], pads[i + rank], &y[i]))
        return c.fail("input 1 (pads) " + vecStr(pads) + ": dim " + std::to_string(i) +
                      " of size " + std::to_string(x[i]) + " padded overflows 64 bits");
      if (y[i] < 0)
        return c.fail("input 1 (pads) " + vecStr(pads) + " crops dim " + std::to_string(i) +
                      " of size " + std::to_string(x[i]) + " to a negative size");
      if (mode != "constant" && x[i] == 0 && y[i] > 0)
        return c.fail("mode '" + mode + "' cannot pad dim " + std::to_string(i) +
                      ", which has size 0");
    }
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferTile(const Ctx& c) {
  // repeats: 1-D, one non-negative entry per dim of input.
  static const std::vector<const char*> names = {"input", "repeats"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t rank = x.size(), len;
  if (auto e = checkIntVector(c, 1, "repeats", &len); !e.empty()) return e;
  if (len != kUnknownDim && len != rank)
    return c.fail("input 1 (repeats) has " + std::to_string(len) + " entries but input has rank " +
                  std::to_string(rank));
  bool known;
  std::vector<int64_t> reps;
  if (auto e = readInts(c, 1, "repeats", &known, &reps); !e.empty()) return e;
  std::vector<int64_t> y(rank, kUnknownDim);
  if (known) {
    for (int64_t i = 0; i < rank; ++i) {
      if (reps[i] < 0)
        return c.fail("input 1 (repeats) " + vecStr(reps) + " has a negative entry");
      if (reps[i] == 0)
        y[i] = 0;
      else if (x[i] != kUnknownDim && !checkedMul(x[i], reps[i], &y[i]))
        return c.fail("input 1 (repeats) " + vecStr(reps) + ": dim " + std::to_string(i) +
                      " of size " + std::to_string(x[i]) + " repeated overflows 64 bits");
    }
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

}  // namespace tandem::shapes
