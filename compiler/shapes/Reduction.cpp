// Shape functions of ReduceMean/Max/Min/L1/L2/SumSquare/Prod/LogSum/LogSumExp-13 (axes
// attribute), ReduceSum-13 (axes input) and ArgMax/ArgMin-13.
#include <set>

#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {

std::string inferReduce(const Ctx& c) {
  // keepdims (default 1) keeps reduced axes as 1; empty axes reduce everything unless
  // noop_with_empty_axes=1, which makes the op an identity.
  bool axesInput = c.op == "ReduceSum";
  static const std::vector<const char*> names = {"data", "axes"};
  if (axesInput)
    if (auto e = rejectOldAttr(c, "axes", "input 1 (axes)"); !e.empty()) return e;
  if (auto e = checkArity(c, 1, axesInput ? 2 : 1, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kNumericTypes, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t rank = x.size();
  bool keep = c.attrs.getInt("keepdims", 1) != 0;
  bool noop = c.attrs.getInt("noop_with_empty_axes", 0) != 0;

  std::vector<int64_t> axes;
  bool axesKnown = true;
  int64_t axesLen = 0;
  if (axesInput) {
    if (c.has(1)) {
      if (auto e = checkIntVector(c, 1, "axes", &axesLen); !e.empty()) return e;
      if (auto e = readInts(c, 1, "axes", &axesKnown, &axes); !e.empty()) return e;
    }
  } else {
    if (c.attrs.has("axes")) axes = c.attrs.getInts("axes");
    axesLen = axes.size();
  }

  if (!axesKnown) {
    // Non-constant axes: with keepdims the rank is kept and every dim may have become 1;
    // otherwise the rank is rank - len(axes), known only from the axes operand's length.
    if (keep) {
      c.set(0, c.in[0].dtype, std::vector<int64_t>(rank, kUnknownDim));
      return "";
    }
    if (axesLen == kUnknownDim)
      return c.fail("input 1 (axes) is not constant and its length is unknown, so with "
                    "keepdims=0 the result rank is unknown");
    if (axesLen == 0 && noop) {
      c.set(0, c.in[0].dtype, x);
      return "";
    }
    int64_t outRank = axesLen == 0 ? 0 : rank - axesLen;
    if (outRank < 0)
      return c.fail("input 1 (axes) has " + std::to_string(axesLen) + " entries but data has rank " +
                    std::to_string(rank));
    c.set(0, c.in[0].dtype, std::vector<int64_t>(outRank, kUnknownDim));
    return "";
  }

  if (axes.empty()) {
    if (noop) {
      c.set(0, c.in[0].dtype, x);
      return "";
    }
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  std::set<int64_t> reduced;
  for (int64_t a : axes) {
    int64_t n;
    if (auto e = normAxis(c, a, rank, axesInput ? "input 1 (axes) value" : "attribute axes value", &n);
        !e.empty())
      return e;
    if (!reduced.insert(n).second)
      return c.fail("axis " + std::to_string(a) + " appears twice in axes");
  }
  std::vector<int64_t> y;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced.count(i))
      y.push_back(x[i]);
    else if (keep)
      y.push_back(1);
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferArgMax(const Ctx& c) {
  // Result i64; axis (default 0) kept as 1 when keepdims (default 1), else removed.
  static const std::vector<const char*> names = {"data"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kNumericTypes, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t axis;
  if (auto e = normAxis(c, c.attrs.getInt("axis", 0), x.size(), "attribute axis", &axis);
      !e.empty())
    return e;
  if (x[axis] == 0)
    return c.fail("cannot take " + c.op + " over axis " + std::to_string(axis) + " of size 0");
  std::vector<int64_t> y = x;
  if (c.attrs.getInt("keepdims", 1) != 0)
    y[axis] = 1;
  else
    y.erase(y.begin() + axis);
  c.set(0, DType::I64, y);
  return "";
}

}  // namespace tandem::shapes
