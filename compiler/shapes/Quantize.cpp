// Shape functions of the linear quantization ops: QuantizeLinear-13, DequantizeLinear-13,
// DynamicQuantizeLinear-11 (ONNX opset 17; 8-bit integers, per-tensor or per-axis scales), and
// the quantized matrix products MatMulInteger-10 and QLinearMatMul-10, and Tandem's fused
// QLinearMatMulBias, DynamicQuantizeMatMul and DequantizeMatMul.
#include <algorithm>

#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {
namespace {

// Scale and zero point: scalars, or 1-D of x's size along `axis` (per-axis quantization).
std::string checkScaleOperand(const Ctx& c, size_t i, const char* name) {
  const auto& d = c.in[i].dims;
  const int64_t block = c.attrs.getInt("block_size", 0);
  if (block < 0) return c.fail("attribute block_size must be >= 0, got " + std::to_string(block));
  if (block == 0 && (d.empty() || (d.size() == 1 && d[0] == 1))) return "";
  int64_t axis;
  const auto& x = c.in[0].dims;
  if (auto e = normAxis(c, c.attrs.getInt("axis", 1), x.size(), "attribute axis", &axis); !e.empty())
    return e;
  if (block > 0) {
    // Blocked (opsets 21+): x's shape with ceil(x[axis] / block_size) along axis.
    std::vector<int64_t> want = x;
    if (x[axis] != kUnknownDim) want[axis] = (x[axis] + block - 1) / block;
    bool ok = d.size() == x.size();
    for (size_t k = 0; ok && k < d.size(); ++k)
      ok = d[k] == kUnknownDim || want[k] == kUnknownDim || d[k] == want[k];
    if (!ok)
      return c.fail(operandLabel(i, name) + " must have shape " + dimsStr(want) + " for block_size " +
                    std::to_string(block) + " along axis " + std::to_string(axis) + ", got " +
                    dimsStr(d));
    return "";
  }
  if (d.size() != 1 || (d[0] != kUnknownDim && x[axis] != kUnknownDim && d[0] != x[axis]))
    return c.fail(operandLabel(i, name) + " must be a scalar or 1-D of size " +
                  std::to_string(x[axis]) + " (x along axis " + std::to_string(axis) + "), got " +
                  dimsStr(d));
  return "";
}

const std::vector<DType> kQuantTypes = {DType::U8, DType::I8};

// numpy.matmul's result shape for u8/i8 operands a (index ia) and b (index ib); 1-D operands
// are promoted and the promoted 1 dropped, batch dims broadcast.
std::string quantMatMulShape(const Ctx& c, size_t ia, size_t ib, const std::vector<const char*>& names,
                             std::vector<int64_t>* y) {
  std::vector<int64_t> a = c.in[ia].dims, b = c.in[ib].dims;
  for (size_t i : {ia, ib})
    if (c.in[i].dims.empty()) return c.fail(operandLabel(i, names[i]) + " must not be a scalar");
  const bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec) a.insert(a.begin(), 1);
  if (bVec) b.push_back(1);
  const int64_t ka = a.back(), kb = b[b.size() - 2];
  if (ka != kUnknownDim && kb != kUnknownDim && ka != kb)
    return c.fail(operandLabel(ia, names[ia]) + " shape " + dimsStr(c.in[ia].dims) + " and " +
                  operandLabel(ib, names[ib]) + " shape " + dimsStr(c.in[ib].dims) +
                  " have mismatched inner dims");
  std::vector<int64_t> batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2);
  if (auto e = broadcastTwo(batchA, batchB, "A batch", "B batch", y); !e.empty()) return c.fail(e);
  if (!aVec) y->push_back(a[a.size() - 2]);
  if (!bVec) y->push_back(b.back());
  return "";
}

// A zero point or scale of a quantized matrix product: a scalar, or 1-D (per row of A, per
// column of B: the kernels check the length).
std::string checkScalarOr1D(const Ctx& c, size_t i, const std::vector<const char*>& names) {
  const auto& d = c.in[i].dims;
  if (d.size() > 1 && std::any_of(d.begin(), d.end(), [](int64_t n) { return n != 1; }))
    return c.fail(operandLabel(i, names[i]) + " must be a scalar or 1-D, got shape " +
                  dimsStr(c.in[i].dims));
  return "";
}

}  // namespace

std::string inferQuantizeLinear(const Ctx& c) {
  // x f32 (or i32); y_scale f32; optional y_zero_point u8/i8 (default u8) gives y's dtype.
  static const std::vector<const char*> names = {"x", "y_scale", "y_zero_point"};
  if (auto e = checkArity(c, 2, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, {DType::F32, DType::I32}, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, {DType::F32}, names); !e.empty()) return e;
  if (auto e = checkScaleOperand(c, 1, names[1]); !e.empty()) return e;
  DType y = DType::U8;
  if (c.has(2)) {
    if (auto e = checkDTypeIn(c, 2, kQuantTypes, names); !e.empty()) return e;
    if (auto e = checkScaleOperand(c, 2, names[2]); !e.empty()) return e;
    y = c.in[2].dtype;
  }
  c.set(0, y, c.in[0].dims);
  return "";
}

std::string inferDequantizeLinear(const Ctx& c) {
  // x u8/i8/i32; x_scale f32; optional x_zero_point of x's dtype; y f32.
  static const std::vector<const char*> names = {"x", "x_scale", "x_zero_point"};
  if (auto e = checkArity(c, 2, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, {DType::U8, DType::I8, DType::I32}, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, {DType::F32}, names); !e.empty()) return e;
  if (auto e = checkScaleOperand(c, 1, names[1]); !e.empty()) return e;
  if (c.has(2)) {
    if (auto e = checkSameDType(c, 2, 0, names); !e.empty()) return e;
    if (auto e = checkScaleOperand(c, 2, names[2]); !e.empty()) return e;
  }
  c.set(0, DType::F32, c.in[0].dims);
  return "";
}

std::string inferDynamicQuantizeLinear(const Ctx& c) {
  // x f32; results y (u8, x's shape), y_scale (f32 scalar), y_zero_point (u8 scalar).
  if (auto e = checkArity(c, 1, 1, 3, 3, {"x"}); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, {DType::F32}, {"x"}); !e.empty()) return e;
  c.set(0, DType::U8, c.in[0].dims);
  c.set(1, DType::F32, {});
  c.set(2, DType::U8, {});
  return "";
}

std::string inferMatMulInteger(const Ctx& c) {
  // MatMulInteger-10: A, B u8/i8; optional zero points of their operand's dtype; Y i32.
  static const std::vector<const char*> names = {"A", "B", "a_zero_point", "b_zero_point"};
  if (auto e = checkArity(c, 2, 4, 1, 1, names); !e.empty()) return e;
  for (size_t i = 0; i < 2; ++i)
    if (auto e = checkDTypeIn(c, i, kQuantTypes, names); !e.empty()) return e;
  for (size_t i = 2; i < 4; ++i)
    if (c.has(i)) {
      if (auto e = checkSameDType(c, i, i - 2, names); !e.empty()) return e;
      if (auto e = checkScalarOr1D(c, i, names); !e.empty()) return e;
    }
  std::vector<int64_t> y;
  if (auto e = quantMatMulShape(c, 0, 1, names, &y); !e.empty()) return e;
  c.set(0, DType::I32, y);
  return "";
}

namespace {

/// QLinearMatMul's operands 0-7 and result; `bias` adds QLinearMatMulBias's operand 8.
std::string qlinearMatMul(const Ctx& c, bool bias) {
  // a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point[, B];
  // scales f32, zero points of their operand's dtype; y has y_zero_point's dtype.
  static const std::vector<const char*> names = {"a", "a_scale", "a_zero_point", "b", "b_scale",
                                                 "b_zero_point", "y_scale", "y_zero_point", "B"};
  const size_t n = bias ? 9 : 8;
  if (auto e = checkArity(c, n, n, 1, 1, names); !e.empty()) return e;
  for (size_t i : {0, 3, 7})
    if (auto e = checkDTypeIn(c, i, kQuantTypes, names); !e.empty()) return e;
  for (size_t i : {1, 4, 6}) {
    if (auto e = checkDTypeIn(c, i, {DType::F32}, names); !e.empty()) return e;
    if (auto e = checkScalarOr1D(c, i, names); !e.empty()) return e;
  }
  for (size_t i : {2, 5}) {
    if (auto e = checkSameDType(c, i, i - 2, names); !e.empty()) return e;
    if (auto e = checkScalarOr1D(c, i, names); !e.empty()) return e;
  }
  std::vector<int64_t> y;
  if (auto e = quantMatMulShape(c, 0, 3, names, &y); !e.empty()) return e;
  if (bias) {
    if (auto e = checkDTypeIn(c, 8, {DType::I32}, names); !e.empty()) return e;
    const auto& b = c.in[8].dims;
    const int64_t cols = c.in[3].dims.empty() ? kUnknownDim : c.in[3].dims.back();
    if (c.in[3].dims.size() < 2 || b.size() != 1 ||
        (b[0] != kUnknownDim && cols != kUnknownDim && b[0] != cols))
      return c.fail("input 8 (B) must have shape [" + std::to_string(cols) +
                    "] (one per column of b, a matrix), got " + dimsStr(b));
  }
  c.set(0, c.in[7].dtype, y);
  return "";
}

}  // namespace

std::string inferQLinearMatMul(const Ctx& c) {
  // QLinearMatMul-10.
  return qlinearMatMul(c, /*bias=*/false);
}

std::string inferDynamicQuantizeMatMul(const Ctx& c) {
  // Tandem's DynamicQuantizeMatMul-1 (ONNX Runtime's contrib op): A f32 [..., M, K], B u8/i8
  // [K, N], b_scale f32 and b_zero_point (B's dtype) scalar or [N], bias f32 [N]; Y f32.
  static const std::vector<const char*> names = {"A", "B", "b_scale", "b_zero_point", "bias"};
  if (auto e = checkArity(c, 3, 5, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, {DType::F32}, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, kQuantTypes, names); !e.empty()) return e;
  if (c.in[1].dims.size() != 2)
    return c.fail("input 1 (B) must be a matrix [K, N], got " + dimsStr(c.in[1].dims));
  if (auto e = checkDTypeIn(c, 2, {DType::F32}, names); !e.empty()) return e;
  if (auto e = checkScalarOr1D(c, 2, names); !e.empty()) return e;
  if (c.has(3)) {
    if (auto e = checkSameDType(c, 3, 1, names); !e.empty()) return e;
    if (auto e = checkScalarOr1D(c, 3, names); !e.empty()) return e;
  }
  if (c.has(4)) {
    if (auto e = checkDTypeIn(c, 4, {DType::F32}, names); !e.empty()) return e;
    const auto& b = c.in[4].dims;
    const int64_t n = c.in[1].dims[1];
    if (b.size() != 1 || (b[0] != kUnknownDim && n != kUnknownDim && b[0] != n))
      return c.fail("input 4 (bias) must have shape [" + std::to_string(n) + "], got " + dimsStr(b));
  }
  std::vector<int64_t> y;
  if (auto e = quantMatMulShape(c, 0, 1, names, &y); !e.empty()) return e;
  c.set(0, DType::F32, y);
  return "";
}

std::string inferDequantizeMatMul(const Ctx& c) {
  // Tandem's DequantizeMatMul-1: A f32 [..., M, K], B u8/i8 [K, N], b_scale f32 [] or [N], or
  // [ceil(K / block_size), N] for block_size > 0, b_zero_point B's dtype and b_scale's shape,
  // bias f32 [N]; Y f32 [..., M, N]. accuracy_level 0-4 (4: int8 activations allowed).
  static const std::vector<const char*> names = {"A", "B", "b_scale", "b_zero_point", "bias"};
  if (auto e = checkArity(c, 3, 5, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, {DType::F32}, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 1, kQuantTypes, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 2, {DType::F32}, names); !e.empty()) return e;
  const auto& b = c.in[1].dims;
  if (b.size() != 2) return c.fail("input 1 (B) must be a matrix [K, N], got " + dimsStr(b));
  const int64_t block = c.attrs.getInt("block_size", 0);
  if (block < 0) return c.fail("attribute block_size must be >= 0, got " + std::to_string(block));
  const int64_t level = c.attrs.getInt("accuracy_level", 0);
  if (level < 0 || level > 4)
    return c.fail("attribute accuracy_level must be 0 to 4, got " + std::to_string(level));
  const int64_t K = b[0], N = b[1];
  std::vector<int64_t> want;
  if (block > 0) want = {K == kUnknownDim ? kUnknownDim : (K + block - 1) / block, N};
  auto fits = [&](const std::vector<int64_t>& d) {
    if (block > 0)
      return d.size() == 2 && dimsAgree(d[0], want[0]) && dimsAgree(d[1], want[1]);
    return d.empty() || (d.size() == 1 && (d[0] == 1 || dimsAgree(d[0], N)));
  };
  const std::string shapes =
      block > 0 ? dimsStr(want) + " (blocks of " + std::to_string(block) + " rows of B, its columns)"
                : "[] or [" + std::to_string(N) + "] (per tensor or per column of B)";
  if (!fits(c.in[2].dims))
    return c.fail("input 2 (b_scale) must have shape " + shapes + ", got " + dimsStr(c.in[2].dims));
  if (c.has(3)) {
    if (auto e = checkSameDType(c, 3, 1, names); !e.empty()) return e;
    if (c.in[3].dims != c.in[2].dims)
      return c.fail("input 3 (b_zero_point) must have b_scale's shape " + dimsStr(c.in[2].dims) +
                    ", got " + dimsStr(c.in[3].dims));
  }
  if (c.has(4)) {
    if (auto e = checkDTypeIn(c, 4, {DType::F32}, names); !e.empty()) return e;
    const auto& d = c.in[4].dims;
    if (d.size() != 1 || !dimsAgree(d[0], N))
      return c.fail("input 4 (bias) must have shape [" + std::to_string(N) + "], got " + dimsStr(d));
  }
  const auto& a = c.in[0].dims;
  if (a.size() < 2) return c.fail("input 0 (A) must have rank >= 2, got " + dimsStr(a));
  if (!dimsAgree(a.back(), K))
    return c.fail("input 0 (A) shape " + dimsStr(a) + " and input 1 (B) shape " + dimsStr(b) +
                  " have mismatched inner dims");
  std::vector<int64_t> y = a;
  y.back() = N;
  c.set(0, DType::F32, y);
  return "";
}

std::string inferQLinearMatMulBias(const Ctx& c) {
  // Tandem's QLinearMatMulBias-1: QLinearMatMul's operands, then B (i32 [N], b's columns),
  // added to each row's accumulators before the requantization.
  return qlinearMatMul(c, /*bias=*/true);
}

}  // namespace tandem::shapes
