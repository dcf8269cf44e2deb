// Shape functions of the linear quantization ops: QuantizeLinear-13, DequantizeLinear-13,
// DynamicQuantizeLinear-11 (ONNX opset 17; 8-bit integers, per-tensor or per-axis scales).
#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {
namespace {

// Scale and zero point: scalars, or 1-D of x's size along `axis` (per-axis quantization).
std::string checkScaleOperand(const Ctx& c, size_t i, const char* name) {
  const auto& d = c.in[i].dims;
  if (d.empty() || (d.size() == 1 && d[0] == 1)) return "";
  int64_t axis;
  const auto& x = c.in[0].dims;
  if (auto e = normAxis(c, c.attrs.getInt("axis", 1), x.size(), "attribute axis", &axis); !e.empty())
    return e;
  if (d.size() != 1 || (d[0] != kUnknownDim && x[axis] != kUnknownDim && d[0] != x[axis]))
    return c.fail(operandLabel(i, name) + " must be a scalar or 1-D of size " +
                  std::to_string(x[axis]) + " (x along axis " + std::to_string(axis) + "), got " +
                  dimsStr(d));
  return "";
}

const std::vector<DType> kQuantTypes = {DType::U8, DType::I8};

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

}  // namespace tandem::shapes
