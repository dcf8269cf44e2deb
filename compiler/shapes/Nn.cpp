// Shape functions of the NN ops: Conv-11, ConvTranspose-11, MaxPool-12, AveragePool-11,
// GlobalAveragePool/GlobalMaxPool-1, BatchNormalization-15, LayerNormalization-17, and the
// integer convolution ConvInteger-10 and QLinearConv-10.
#include <algorithm>
#include <tuple>

#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The window attributes shared by Conv, ConvTranspose and the pools, validated against the
// number of spatial dims.
struct Window {
  std::string autoPad;
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
};

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Reads auto_pad/strides/dilations/pads (and checks kernel_shape, already set in w.kernel).
std::string readWindow(const Ctx& c, size_t nSpatial, Window* w) {
  w->autoPad = c.attrs.getString("auto_pad", "NOTSET");
  if (w->autoPad != "NOTSET" && w->autoPad != "SAME_UPPER" && w->autoPad != "SAME_LOWER" &&
      w->autoPad != "VALID")
    return c.fail("attribute auto_pad='" + w->autoPad +
                  "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  w->strides = c.attrs.getInts("strides", std::vector<int64_t>(nSpatial, 1));
  w->dilations = c.attrs.getInts("dilations", std::vector<int64_t>(nSpatial, 1));
  w->pads = c.attrs.getInts("pads", std::vector<int64_t>(2 * nSpatial, 0));
  if (w->strides.size() != nSpatial)
    return c.fail("attribute strides has " + std::to_string(w->strides.size()) +
                  " values but the input has " + std::to_string(nSpatial) + " spatial dims");
  if (w->dilations.size() != nSpatial)
    return c.fail("attribute dilations has " + std::to_string(w->dilations.size()) +
                  " values but the input has " + std::to_string(nSpatial) + " spatial dims");
  if (w->pads.size() != 2 * nSpatial)
    return c.fail("attribute pads has " + std::to_string(w->pads.size()) + " values but needs " +
                  std::to_string(2 * nSpatial) + " (begin and end per spatial dim)");
  for (size_t i = 0; i < nSpatial; ++i) {
    if (w->strides[i] < 1) return c.fail("attribute strides " + ints(w->strides) + " must be >= 1");
    if (w->dilations[i] < 1)
      return c.fail("attribute dilations " + ints(w->dilations) + " must be >= 1");
    if (w->kernel[i] < 1 && w->kernel[i] != kUnknownDim)
      return c.fail("kernel shape " + ints(w->kernel) + " must be >= 1");
  }
  for (int64_t p : w->pads)
    if (p < 0) return c.fail("attribute pads " + ints(w->pads) + " must be >= 0");
  return "";
}

// Output size of one spatial dim of a sliding window (Conv, pools). ceil_mode as in PyTorch and
// ONNX Runtime: a last window that would start inside the end padding is dropped.
std::string slidingOut(const Ctx& c, const Window& w, size_t i, int64_t in, bool ceilMode,
                       int64_t* out) {
  if (in == kUnknownDim || w.kernel[i] == kUnknownDim) {
    *out = kUnknownDim;
    return "";
  }
  int64_t s = w.strides[i];
  if (w.autoPad == "SAME_UPPER" || w.autoPad == "SAME_LOWER") {
    *out = ceilDiv(in, s);
    return "";
  }
  int64_t effK = (w.kernel[i] - 1) * w.dilations[i] + 1;
  int64_t padB = w.autoPad == "VALID" ? 0 : w.pads[i];
  int64_t padE = w.autoPad == "VALID" ? 0 : w.pads[i + w.kernel.size()];
  int64_t span = in + padB + padE - effK;
  if (span < 0)
    return c.fail("spatial dim " + std::to_string(i) + " of size " + std::to_string(in) +
                  " plus pads " + std::to_string(padB) + "+" + std::to_string(padE) +
                  " is smaller than the dilated kernel " + std::to_string(effK));
  int64_t n = (ceilMode ? ceilDiv(span, s) : floorDiv(span, s)) + 1;
  if (ceilMode && (n - 1) * s >= in + padB) --n;
  *out = n;
  return "";
}

// Rank >= 3: (N, C, D1..Dn).
std::string checkImage(const Ctx& c, size_t i, const char* name) {
  if (c.in[i].dims.size() < 3)
    return c.fail(operandLabel(i, name) + " must have rank >= 3 (N, C, spatial...), got shape " +
                  dimsStr(c.in[i].dims));
  return "";
}

// Kernel spatial dims: from W when there is one, checked against attribute kernel_shape.
std::string kernelFromWeights(const Ctx& c, const std::vector<int64_t>& wDims, Window* w) {
  w->kernel.assign(wDims.begin() + 2, wDims.end());
  if (c.attrs.has("kernel_shape")) {
    std::vector<int64_t> ks = c.attrs.getInts("kernel_shape");
    if (ks.size() != w->kernel.size())
      return c.fail("attribute kernel_shape " + ints(ks) + " has " + std::to_string(ks.size()) +
                    " values but W has " + std::to_string(w->kernel.size()) + " spatial dims");
    for (size_t i = 0; i < ks.size(); ++i) {
      if (w->kernel[i] != kUnknownDim && ks[i] != w->kernel[i])
        return c.fail("attribute kernel_shape " + ints(ks) + " does not match W's spatial dims " +
                      dimsStr(w->kernel));
      w->kernel[i] = ks[i];
    }
  }
  return "";
}

std::string checkBias(const Ctx& c, size_t i, int64_t m) {
  if (!c.has(i)) return "";
  if (auto e = checkSameDType(c, i, 0, {"X", "W", "B"}); !e.empty()) return e;
  const auto& b = c.in[i].dims;
  if (b.size() != 1 || (b[0] != kUnknownDim && m != kUnknownDim && b[0] != m))
    return c.fail("input 2 (B) must have shape [" + std::to_string(m) + "] (one per output channel), got " +
                  dimsStr(b));
  return "";
}

// Operands and group of Conv-11 / ConvTranspose-11: X, W (same float dtype, same rank, an
// image of rank >= 3), optional B; group >= 1.
std::string checkConvOperands(const Ctx& c, int64_t* group) {
  static const std::vector<const char*> names = {"X", "W", "B"};
  if (auto e = checkArity(c, 2, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  if (auto e = checkImage(c, 0, "X"); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  const auto& wd = c.in[1].dims;
  if (wd.size() != x.size())
    return c.fail("input 1 (W) has rank " + std::to_string(wd.size()) + " but X has rank " +
                  std::to_string(x.size()));
  *group = c.attrs.getInt("group", 1);
  if (*group < 1) return c.fail("attribute group=" + std::to_string(*group) + " must be >= 1");
  return "";
}

// The result shape of an integer convolution (ConvInteger, QLinearConv): X (index xi) and W
// (index wi) u8/i8 images of one rank, group >= 1; channels and window as Conv's.
std::string integerConvShape(const Ctx& c, size_t xi, size_t wi,
                             const std::vector<const char*>& names, std::vector<int64_t>* y) {
  for (size_t i : {xi, wi})
    if (auto e = checkDTypeIn(c, i, {DType::U8, DType::I8}, names); !e.empty()) return e;
  if (auto e = checkImage(c, xi, names[xi]); !e.empty()) return e;
  const auto& x = c.in[xi].dims;
  const auto& wd = c.in[wi].dims;
  if (wd.size() != x.size())
    return c.fail(operandLabel(wi, names[wi]) + " has rank " + std::to_string(wd.size()) +
                  " but " + names[xi] + " has rank " + std::to_string(x.size()));
  const int64_t group = c.attrs.getInt("group", 1);
  if (group < 1) return c.fail("attribute group=" + std::to_string(group) + " must be >= 1");
  if (x[1] != kUnknownDim && wd[1] != kUnknownDim && x[1] != wd[1] * group)
    return c.fail(std::string(names[xi]) + " has " + std::to_string(x[1]) + " channels but " +
                  names[wi] + " expects " + std::to_string(wd[1]) + " x group " +
                  std::to_string(group));
  const size_t n = x.size() - 2;
  Window w;
  if (auto e = kernelFromWeights(c, wd, &w); !e.empty()) return e;
  if (auto e = readWindow(c, n, &w); !e.empty()) return e;
  *y = {x[0], wd[0]};
  for (size_t i = 0; i < n; ++i) {
    int64_t o;
    if (auto e = slidingOut(c, w, i, x[i + 2], false, &o); !e.empty()) return e;
    y->push_back(o);
  }
  return "";
}

}  // namespace

std::string inferConvInteger(const Ctx& c) {
  // ConvInteger-10: x, w u8/i8, optional zero points (x's: scalar; w's: scalar or per output
  // channel, checked by the kernel); y i32.
  static const std::vector<const char*> names = {"x", "w", "x_zero_point", "w_zero_point"};
  if (auto e = checkArity(c, 2, 4, 1, 1, names); !e.empty()) return e;
  for (size_t i = 2; i < 4; ++i)
    if (c.has(i))
      if (auto e = checkSameDType(c, i, i - 2, names); !e.empty()) return e;
  std::vector<int64_t> y;
  if (auto e = integerConvShape(c, 0, 1, names, &y); !e.empty()) return e;
  c.set(0, DType::I32, y);
  return "";
}

std::string inferQLinearConv(const Ctx& c) {
  // QLinearConv-10: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
  // optional B (i32, per output channel); y has y_zero_point's dtype.
  static const std::vector<const char*> names = {"x", "x_scale", "x_zero_point", "w", "w_scale",
                                                 "w_zero_point", "y_scale", "y_zero_point", "B"};
  if (auto e = checkArity(c, 8, 9, 1, 1, names); !e.empty()) return e;
  for (size_t i : {1, 4, 6})
    if (auto e = checkDTypeIn(c, i, {DType::F32}, names); !e.empty()) return e;
  for (size_t i : {2, 5})
    if (auto e = checkSameDType(c, i, i - 2, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 7, {DType::U8, DType::I8}, names); !e.empty()) return e;
  std::vector<int64_t> y;
  if (auto e = integerConvShape(c, 0, 3, names, &y); !e.empty()) return e;
  if (c.has(8)) {
    if (auto e = checkDTypeIn(c, 8, {DType::I32}, names); !e.empty()) return e;
    const auto& b = c.in[8].dims;
    if (b.size() != 1 || (b[0] != kUnknownDim && y[1] != kUnknownDim && b[0] != y[1]))
      return c.fail("input 8 (B) must have shape [" + std::to_string(y[1]) +
                    "] (one per output channel), got " + dimsStr(b));
  }
  c.set(0, c.in[7].dtype, y);
  return "";
}

std::string inferConv(const Ctx& c) {
  int64_t group = 1;
  if (auto e = checkConvOperands(c, &group); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  const auto& wd = c.in[1].dims;
  int64_t m = wd[0], cin = x[1], wc = wd[1];
  if (cin != kUnknownDim && wc != kUnknownDim && cin != wc * group)
    return c.fail("X has " + std::to_string(cin) + " channels but W expects " +
                  std::to_string(wc) + " x group " + std::to_string(group) + " = " +
                  std::to_string(wc * group));
  if (m != kUnknownDim && m % group != 0)
    return c.fail("W has " + std::to_string(m) + " output channels, not a multiple of group " +
                  std::to_string(group));
  if (auto e = checkBias(c, 2, m); !e.empty()) return e;
  size_t n = x.size() - 2;
  Window w;
  if (auto e = kernelFromWeights(c, wd, &w); !e.empty()) return e;
  if (auto e = readWindow(c, n, &w); !e.empty()) return e;
  std::vector<int64_t> y = {x[0], m};
  for (size_t i = 0; i < n; ++i) {
    int64_t o;
    if (auto e = slidingOut(c, w, i, x[i + 2], false, &o); !e.empty()) return e;
    y.push_back(o);
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferConvWeightGrad(const Ctx& c) {
  // X (N, C, D...) and dY (N, M, O...) of a Conv with kernel_shape k -> dW (M, C/group, k...),
  // the Conv's W shape. O is at most the extent the Conv's window gives for D (less for
  // ConvTranspose's weight gradient, whose equivalent Conv may run past the output it keeps).
  static const std::vector<const char*> names = {"X", "dY"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  if (auto e = checkImage(c, 0, "X"); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  const auto& dy = c.in[1].dims;
  if (dy.size() != x.size())
    return c.fail("input 1 (dY) has rank " + std::to_string(dy.size()) + " but X has rank " +
                  std::to_string(x.size()));
  const int64_t group = c.attrs.getInt("group", 1);
  if (group < 1) return c.fail("attribute group=" + std::to_string(group) + " must be >= 1");
  if (x[0] != kUnknownDim && dy[0] != kUnknownDim && x[0] != dy[0])
    return c.fail("X and dY differ in batch: " + dimsStr(x) + " and " + dimsStr(dy));
  for (int64_t ch : {x[1], dy[1]})
    if (ch != kUnknownDim && ch % group != 0)
      return c.fail("channels " + std::to_string(ch) + " are not a multiple of group " +
                    std::to_string(group));
  const size_t n = x.size() - 2;
  Window w;
  w.kernel = c.attrs.getInts("kernel_shape");
  if (w.kernel.size() != n)
    return c.fail("attribute kernel_shape " + ints(w.kernel) + " must have one value per spatial dim (" +
                  std::to_string(n) + ")");
  if (auto e = readWindow(c, n, &w); !e.empty()) return e;
  for (size_t i = 0; i < n; ++i) {
    int64_t o;
    if (auto e = slidingOut(c, w, i, x[i + 2], false, &o); !e.empty()) return e;
    if (o != kUnknownDim && dy[i + 2] != kUnknownDim && (dy[i + 2] > o || dy[i + 2] < 1))
      return c.fail("dY " + dimsStr(dy) + " does not fit the Conv output of X " + dimsStr(x) +
                    " (spatial dim " + std::to_string(i) + ": at most " + std::to_string(o) + ")");
  }
  std::vector<int64_t> wd = {dy[1], x[1] == kUnknownDim ? kUnknownDim : x[1] / group};
  wd.insert(wd.end(), w.kernel.begin(), w.kernel.end());
  c.set(0, c.in[0].dtype, wd);
  return "";
}

std::string inferConvTranspose(const Ctx& c) {
  // W is (C, M/group, k...); out = stride*(in-1) + output_padding + (k-1)*dilation + 1 - pads,
  // or attribute output_shape, or in*stride under SAME_*.
  int64_t group = 1;
  if (auto e = checkConvOperands(c, &group); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  const auto& wd = c.in[1].dims;
  if (x[1] != kUnknownDim && wd[0] != kUnknownDim && x[1] != wd[0])
    return c.fail("X has " + std::to_string(x[1]) + " channels but W expects " +
                  std::to_string(wd[0]) + " (W is C x M/group x kernel)");
  if (x[1] != kUnknownDim && x[1] % group != 0)
    return c.fail("X has " + std::to_string(x[1]) + " channels, not a multiple of group " +
                  std::to_string(group));
  int64_t m = wd[1] == kUnknownDim ? kUnknownDim : wd[1] * group;
  if (auto e = checkBias(c, 2, m); !e.empty()) return e;
  size_t n = x.size() - 2;
  Window w;
  if (auto e = kernelFromWeights(c, wd, &w); !e.empty()) return e;
  if (auto e = readWindow(c, n, &w); !e.empty()) return e;
  std::vector<int64_t> outPad = c.attrs.getInts("output_padding", std::vector<int64_t>(n, 0));
  if (outPad.size() != n)
    return c.fail("attribute output_padding has " + std::to_string(outPad.size()) +
                  " values but the input has " + std::to_string(n) + " spatial dims");
  for (size_t i = 0; i < n; ++i)
    if (outPad[i] < 0) return c.fail("attribute output_padding " + ints(outPad) + " must be >= 0");
  std::vector<int64_t> y = {x[0], m};
  if (c.attrs.has("output_shape")) {
    std::vector<int64_t> os = c.attrs.getInts("output_shape");
    // Exporters write either the spatial dims or the full (N, C, spatial...) shape.
    if (os.size() == n + 2) os.erase(os.begin(), os.begin() + 2);
    if (os.size() != n)
      return c.fail("attribute output_shape " + ints(os) + " must have " + std::to_string(n) +
                    " spatial values");
    for (int64_t v : os)
      if (v < 0) return c.fail("attribute output_shape " + ints(os) + " must be >= 0");
    y.insert(y.end(), os.begin(), os.end());
    c.set(0, c.in[0].dtype, y);
    return "";
  }
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x[i + 2];
    if (in == kUnknownDim || w.kernel[i] == kUnknownDim) {
      y.push_back(kUnknownDim);
      continue;
    }
    if (w.autoPad == "SAME_UPPER" || w.autoPad == "SAME_LOWER") {
      y.push_back(in * w.strides[i]);
      continue;
    }
    int64_t padB = w.autoPad == "VALID" ? 0 : w.pads[i];
    int64_t padE = w.autoPad == "VALID" ? 0 : w.pads[i + n];
    int64_t o = w.strides[i] * (in - 1) + outPad[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 -
                padB - padE;
    if (in == 0) o = 0;  // an empty input gives an empty output, whatever the padding
    if (o < 0)
      return c.fail("spatial dim " + std::to_string(i) + " gets negative output size " +
                    std::to_string(o) + " (pads exceed the transposed extent)");
    y.push_back(o);
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferPool(const Ctx& c) {
  // MaxPool-12 (optional Indices result, i64) and AveragePool-11; kernel_shape is required.
  // MaxPoolGrad (autodiff) takes X and dY, of the MaxPool result's shape, and returns dX.
  static const std::vector<const char*> names = {"X", "dY"};
  const bool isGrad = c.op == "MaxPoolGrad";
  bool isMax = c.op == "MaxPool" || isGrad;
  const int numIn = isGrad ? 2 : 1;
  if (auto e = checkArity(c, numIn, numIn, 1, isMax && !isGrad ? 2 : 1, names); !e.empty())
    return e;
  static const std::vector<DType> maxTypes = {DType::F16, DType::BF16, DType::F32,
                                              DType::F64, DType::I8,   DType::U8};
  if (auto e = checkDTypeIn(c, 0, isMax ? maxTypes : kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkImage(c, 0, "X"); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  size_t n = x.size() - 2;
  Window w;
  if (!c.attrs.has("kernel_shape")) return c.fail("attribute kernel_shape is required");
  w.kernel = c.attrs.getInts("kernel_shape");
  if (w.kernel.size() != n)
    return c.fail("attribute kernel_shape " + ints(w.kernel) + " has " +
                  std::to_string(w.kernel.size()) + " values but X has " + std::to_string(n) +
                  " spatial dims");
  // AveragePool-11 has no dilations; reading them anyway gives AveragePool-19's shapes.
  if (auto e = readWindow(c, n, &w); !e.empty()) return e;
  if (isMax && c.attrs.getInt("storage_order", 0) != 0 && c.attrs.getInt("storage_order", 0) != 1)
    return c.fail("attribute storage_order must be 0 or 1");
  bool ceilMode = c.attrs.getInt("ceil_mode", 0) != 0;
  std::vector<int64_t> y = {x[0], x[1]};
  for (size_t i = 0; i < n; ++i) {
    int64_t o;
    if (auto e = slidingOut(c, w, i, x[i + 2], ceilMode, &o); !e.empty()) return e;
    y.push_back(o);
  }
  if (isGrad) {
    if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
    const auto& dy = c.in[1].dims;
    bool fits = dy.size() == y.size();
    for (size_t i = 0; fits && i < y.size(); ++i)
      fits = dy[i] == y[i] || dy[i] == kUnknownDim || y[i] == kUnknownDim;
    if (!fits)
      return c.fail("input 1 (dY) " + dimsStr(dy) + " must have MaxPool's result shape " +
                    dimsStr(y));
    c.set(0, c.in[0].dtype, x);
    return "";
  }
  c.set(0, c.in[0].dtype, y);
  if (c.numResults == 2) c.set(1, DType::I64, y);
  return "";
}

std::string inferGlobalPool(const Ctx& c) {
  // (N, C, D...) -> (N, C, 1...).
  static const std::vector<const char*> names = {"X"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (x.size() < 2)
    return c.fail("input 0 (X) must have rank >= 2 (N, C, spatial...), got shape " + dimsStr(x));
  std::vector<int64_t> y = x;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferBatchNorm(const Ctx& c) {
  // X (N, C, ...), scale/B/mean/var each (C); Y like X. training_mode=1 (batch statistics) may
  // also give running_mean and running_var, like input_mean and input_var.
  static const std::vector<const char*> names = {"X", "scale", "B", "input_mean", "input_var"};
  const bool training = c.attrs.getInt("training_mode", 0) != 0;
  if (!training && c.numResults > 1)
    return c.fail("outputs running_mean and running_var need attribute training_mode=1");
  if (auto e = checkArity(c, 5, 5, 1, training ? 3 : 1, names); !e.empty()) return e;
  for (size_t i = 0; i < 5; ++i)
    if (auto e = checkDTypeIn(c, i, kFloatTypes, names); !e.empty()) return e;
  // BatchNormalization-15 lets scale/B (T1) and mean/var (T2) differ from X's type.
  if (auto e = checkSameDType(c, 2, 1, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 4, 3, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (x.size() < 2)
    return c.fail("input 0 (X) must have rank >= 2 (N, C, ...), got shape " + dimsStr(x));
  int64_t ch = x[1];
  for (size_t i = 1; i < 5; ++i) {
    const auto& d = c.in[i].dims;
    if (d.size() != 1 || (d[0] != kUnknownDim && ch != kUnknownDim && d[0] != ch))
      return c.fail(operandLabel(i, names[i]) + " must have shape [" +
                    (ch == kUnknownDim ? std::string("C") : std::to_string(ch)) +
                    "] (one per channel of X), got " + dimsStr(d));
  }
  c.set(0, c.in[0].dtype, x);
  for (size_t r = 1; r < c.numResults; ++r) c.set(r, c.in[3].dtype, c.in[3 + r - 1].dims);
  return "";
}

std::string inferBatchNormGrad(const Ctx& c) {
  // X (N, C, ...), dY like X, scale (C) -> dX like X, dscale and dB like scale.
  static const std::vector<const char*> names = {"X", "dY", "scale"};
  if (auto e = checkArity(c, 3, 3, 3, 3, names); !e.empty()) return e;
  for (size_t i = 0; i < 3; ++i)
    if (auto e = checkDTypeIn(c, i, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (x.size() < 2)
    return c.fail("input 0 (X) must have rank >= 2 (N, C, ...), got shape " + dimsStr(x));
  if (c.in[1].dims != x)
    return c.fail("input 1 (dY) must have X's shape " + dimsStr(x) + ", got " + dimsStr(c.in[1].dims));
  const auto& s = c.in[2].dims;
  if (s.size() != 1 || (s[0] != kUnknownDim && x[1] != kUnknownDim && s[0] != x[1]))
    return c.fail("input 2 (scale) must have shape [C] (one per channel of X), got " + dimsStr(s));
  c.set(0, c.in[0].dtype, x);
  c.set(1, c.in[2].dtype, s);
  c.set(2, c.in[2].dtype, s);
  return "";
}

std::string inferLayerNormGrad(const Ctx& c) {
  // X, dY like X, Scale (X's dims from axis on) -> dX like X, dScale and dB like Scale.
  static const std::vector<const char*> names = {"X", "dY", "Scale"};
  if (auto e = checkArity(c, 3, 3, 3, 3, names); !e.empty()) return e;
  for (size_t i = 0; i < 3; ++i)
    if (auto e = checkDTypeIn(c, i, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 2, 0, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t axis = 0;
  if (auto e = normAxis(c, c.attrs.getInt("axis", -1), x.size(), "attribute axis", &axis); !e.empty())
    return e;
  bool same = c.in[1].dims.size() == x.size();
  for (size_t d = 0; same && d < x.size(); ++d) same = dimsAgree(c.in[1].dims[d], x[d]);
  if (!same) return c.fail("input 1 (dY) must have X's shape " + dimsStr(x) + ", got " + dimsStr(c.in[1].dims));
  const auto& s = c.in[2].dims;
  bool normalised = (int64_t)s.size() == (int64_t)x.size() - axis;
  for (size_t d = 0; normalised && d < s.size(); ++d) normalised = dimsAgree(s[d], x[axis + d]);
  if (!normalised)
    return c.fail("input 2 (Scale) must have X's dims from axis " + std::to_string(axis) + " on, got " + dimsStr(s));
  c.set(0, c.in[0].dtype, x);
  c.set(1, c.in[2].dtype, s);
  c.set(2, c.in[2].dtype, s);
  return "";
}

std::string inferLayerNorm(const Ctx& c) {
  // Normalises over axes [axis, rank). Scale and B broadcast to X.shape[axis:]. Optional Mean
  // and InvStdDev have X's shape with the normalised axes set to 1, dtype stash_type (f32).
  static const std::vector<const char*> names = {"X", "Scale", "B"};
  if (auto e = checkArity(c, 2, 3, 1, 3, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  if (c.has(2))
    if (auto e = checkSameDType(c, 2, 0, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t rank = x.size(), axis = 0;
  if (auto e = normAxis(c, c.attrs.getInt("axis", -1), rank, "attribute axis", &axis); !e.empty())
    return e;
  std::vector<int64_t> normShape(x.begin() + axis, x.end());
  for (size_t i = 1; i < 3; ++i) {
    if (!c.has(i)) continue;
    if (auto e = checkUnidirectional(normShape, c.in[i].dims, "X's normalised",
                                     operandLabel(i, names[i]));
        !e.empty())
      return c.fail(e);
  }
  int64_t stash = c.attrs.getInt("stash_type", 1);
  if (stash != (int64_t)DType::F32 && stash != (int64_t)DType::F64 &&
      stash != (int64_t)DType::F16)
    return c.fail("attribute stash_type=" + std::to_string(stash) + " is not a float dtype code");
  c.set(0, c.in[0].dtype, x);
  std::vector<int64_t> stats = x;
  for (int64_t i = axis; i < rank; ++i) stats[i] = 1;
  for (size_t r = 1; r < c.numResults; ++r) c.set(r, (DType)stash, stats);
  return "";
}

std::string inferRmsNorm(const Ctx& c) {
  // Normalises over axes [axis, rank); scale broadcasts to X.shape[axis:] (RMSNormalization-23).
  static const std::vector<const char*> names = {"X", "scale"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  int64_t axis = 0;
  if (auto e = normAxis(c, c.attrs.getInt("axis", -1), x.size(), "attribute axis", &axis); !e.empty())
    return e;
  std::vector<int64_t> normShape(x.begin() + axis, x.end());
  if (auto e = checkUnidirectional(normShape, c.in[1].dims, "X's normalised", operandLabel(1, names[1]));
      !e.empty())
    return c.fail(e);
  c.set(0, c.in[0].dtype, x);
  return "";
}

namespace {

int64_t knownOr(int64_t a, int64_t b) { return a != kUnknownDim ? a : b; }
int64_t mulDims(int64_t a, int64_t b) {
  return a == kUnknownDim || b == kUnknownDim ? kUnknownDim : a * b;
}
int64_t divDims(int64_t a, int64_t b) {
  return a == kUnknownDim || b == kUnknownDim || b == 0 ? kUnknownDim : a / b;
}

}  // namespace

std::string inferAttention(const Ctx& c) {
  // Attention-23/-24/-25. 4-D: Q [B, Hq, Sq, D], K [B, Hkv, Skv, D], V [B, Hkv, Skv, Dv];
  // 3-D: Q [B, Sq, Hq D], K [B, Skv, Hkv D], V [B, Skv, Hkv Dv] with q_num_heads and
  // kv_num_heads. past_key [B, Hkv, P, D], past_value [B, Hkv, P, Dv]. Results: Y (Q's layout,
  // Dv features a head), present_key/value [B, Hkv, P + Skv, D|Dv], qk_matmul_output
  // [B, Hq, Sq, P + Skv].
  static const std::vector<const char*> names = {"Q", "K", "V", "attn_mask", "past_key",
                                                 "past_value", "nonpad_kv_seqlen"};
  if (auto e = checkArity(c, 3, 7, 1, 4, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  for (size_t i : {1, 2, 4, 5})
    if (c.has(i))
      if (auto e = checkSameDType(c, i, 0, names); !e.empty()) return e;
  const auto& q = c.in[0].dims;
  const auto& k = c.in[1].dims;
  const auto& v = c.in[2].dims;
  const size_t r = q.size();
  if ((r != 3 && r != 4) || k.size() != r || v.size() != r)
    return c.fail("Q, K and V must all be 3-D or all 4-D, got " + dimsStr(q) + ", " + dimsStr(k) +
                  ", " + dimsStr(v));
  int64_t hq, hkv, d, dv;
  if (r == 4) {
    hq = q[1];
    hkv = k[1];
    d = q[3];
    dv = v[3];
    if (!dimsAgree(k[1], v[1]) || !dimsAgree(k[2], v[2]))
      return c.fail("K " + dimsStr(k) + " and V " + dimsStr(v) + " must agree in heads and sequence");
    if (!dimsAgree(k[3], d))
      return c.fail("K's head size " + std::to_string(k[3]) + " is not Q's " + std::to_string(d));
  } else {
    hq = c.attrs.getInt("q_num_heads", 0);
    hkv = c.attrs.getInt("kv_num_heads", 0);
    if (hq < 1 || hkv < 1)
      return c.fail("3-D Q, K and V need attributes q_num_heads and kv_num_heads (>= 1)");
    for (auto [dims, heads, what] : {std::tuple{&q, hq, "Q"}, std::tuple{&k, hkv, "K"},
                                     std::tuple{&v, hkv, "V"}})
      if ((*dims)[2] != kUnknownDim && (*dims)[2] % heads != 0)
        return c.fail(std::string(what) + "'s " + std::to_string((*dims)[2]) +
                      " features are not a multiple of its " + std::to_string(heads) + " heads");
    d = divDims(q[2], hq);
    dv = divDims(v[2], hkv);
    if (!dimsAgree(divDims(k[2], hkv), d))
      return c.fail("K's head size " + std::to_string(divDims(k[2], hkv)) + " is not Q's " +
                    std::to_string(d));
    if (!dimsAgree(k[1], v[1]))
      return c.fail("K " + dimsStr(k) + " and V " + dimsStr(v) + " must agree in sequence length");
  }
  if (hq != kUnknownDim && hkv != kUnknownDim && (hkv < 1 || hq % hkv != 0))
    return c.fail("q_num_heads " + std::to_string(hq) + " is not a multiple of kv_num_heads " +
                  std::to_string(hkv));
  const int64_t batch = knownOr(q[0], knownOr(k[0], v[0]));
  const int64_t sq = r == 4 ? q[2] : q[1];
  const int64_t skv = r == 4 ? k[2] : k[1];
  int64_t past = 0;
  if (c.has(4) != c.has(5))
    return c.fail("past_key and past_value must be given together");
  if (c.has(4)) {
    const auto& pk = c.in[4].dims;
    const auto& pv = c.in[5].dims;
    if (pk.size() != 4 || pv.size() != 4 || !dimsAgree(pk[1], hkv) || !dimsAgree(pk[3], d) ||
        !dimsAgree(pv[1], hkv) || !dimsAgree(pv[3], dv) || !dimsAgree(pk[2], pv[2]))
      return c.fail("past_key " + dimsStr(pk) + " and past_value " + dimsStr(pv) +
                    " must be [B, kv_num_heads, P, head size]");
    past = pk[2];
    if (c.has(6)) return c.fail("nonpad_kv_seqlen cannot be used with past_key and past_value");
  }
  if (c.has(6)) {
    if (auto e = checkDTypeIn(c, 6, {DType::I64}, names); !e.empty()) return e;
    if (c.in[6].dims.size() != 1 || !dimsAgree(c.in[6].dims[0], batch))
      return c.fail("nonpad_kv_seqlen must be [batch], got " + dimsStr(c.in[6].dims));
  }
  const int64_t total = past == kUnknownDim || skv == kUnknownDim ? kUnknownDim : past + skv;
  if (c.has(3)) {
    const DType mt = c.in[3].dtype;
    if (mt != DType::Bool && mt != c.in[0].dtype)
      return c.fail(std::string("attn_mask must be bool or Q's dtype, got ") + dtypeName(mt));
    const auto& m = c.in[3].dims;
    const std::vector<int64_t> full = {batch, hq, sq, total};
    if (m.empty() || m.size() > 4)
      return c.fail("attn_mask must have rank 1 to 4, got " + dimsStr(m));
    for (size_t j = 0; j < m.size(); ++j) {
      const int64_t want = full[4 - m.size() + j];
      const bool last = j + 1 == m.size();
      if (m[j] == kUnknownDim || want == kUnknownDim || m[j] == 1 || m[j] == want ||
          (last && m[j] < want))
        continue;
      return c.fail("attn_mask " + dimsStr(m) + " does not broadcast to [batch, q_num_heads, "
                    "q_sequence, total_sequence] = " + dimsStr(full));
    }
  }
  const int64_t mode = c.attrs.getInt("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return c.fail("attribute qk_matmul_output_mode " + std::to_string(mode) + " must be 0 to 3");
  if (c.attrs.has("softmax_precision")) {
    const int64_t p = c.attrs.getInt("softmax_precision", 1);
    if (p != 1 && p != 10 && p != 11 && p != 16)
      return c.fail("attribute softmax_precision " + std::to_string(p) +
                    " must be 1 (float), 10 (float16), 11 (double) or 16 (bfloat16)");
  }
  const DType t = c.in[0].dtype;
  if (r == 4) c.set(0, t, {batch, hq, sq, dv});
  else c.set(0, t, {batch, sq, mulDims(hq, dv)});
  if (c.numResults > 1) c.set(1, t, {batch, hkv, total, d});
  if (c.numResults > 2) c.set(2, t, {batch, hkv, total, dv});
  if (c.numResults > 3) c.set(3, t, {batch, hq, sq, total});
  return "";
}

std::string inferRotaryEmbedding(const Ctx& c) {
  // RotaryEmbedding-23: X [B, H, S, head] or [B, S, H head] (num_heads); cos_cache and
  // sin_cache [max position + 1, rotary / 2] with position_ids [B, S], else [B, S, rotary / 2].
  static const std::vector<const char*> names = {"X", "cos_cache", "sin_cache", "position_ids"};
  if (auto e = checkArity(c, 3, 4, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  for (size_t i : {1, 2})
    if (auto e = checkSameDType(c, i, 0, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (x.size() != 3 && x.size() != 4)
    return c.fail("X must be [batch, heads, sequence, head size] or [batch, sequence, hidden], got " +
                  dimsStr(x));
  const int64_t heads = c.attrs.getInt("num_heads", 0);
  if (x.size() == 3 && heads < 1) return c.fail("a 3-D X needs attribute num_heads (>= 1)");
  if (x.size() == 3 && x[2] != kUnknownDim && x[2] % heads != 0)
    return c.fail("X's hidden size " + std::to_string(x[2]) + " is not a multiple of num_heads " +
                  std::to_string(heads));
  const int64_t head = x.size() == 4 ? x[3] : divDims(x[2], heads);
  const int64_t batch = x[0], seq = x.size() == 4 ? x[2] : x[1];
  int64_t rot = c.attrs.getInt("rotary_embedding_dim", 0);
  if (rot == 0) rot = head;
  if (rot != kUnknownDim && (rot < 0 || rot % 2 != 0 || (head != kUnknownDim && rot > head)))
    return c.fail("the rotary dim " + std::to_string(rot) + " must be even and at most the head size " +
                  std::to_string(head));
  const int64_t half = rot == kUnknownDim ? kUnknownDim : rot / 2;
  const auto& cs = c.in[1].dims;
  if (c.has(3)) {
    if (auto e = checkDTypeIn(c, 3, {DType::I64}, names); !e.empty()) return e;
    const auto& p = c.in[3].dims;
    if (p.size() != 2 || !dimsAgree(p[0], batch) || !dimsAgree(p[1], seq))
      return c.fail("position_ids must be [batch, sequence] = " + dimsStr({batch, seq}) + ", got " +
                    dimsStr(p));
    if (cs.size() != 2 || !dimsAgree(cs[1], half))
      return c.fail("with position_ids, cos_cache must be [max position + 1, " + std::to_string(half) +
                    "], got " + dimsStr(cs));
  } else if (cs.size() != 3 || !dimsAgree(cs[0], batch) || !dimsAgree(cs[1], seq) ||
             !dimsAgree(cs[2], half)) {
    return c.fail("without position_ids, cos_cache must be [batch, sequence, rotary dim / 2] = " +
                  dimsStr({batch, seq, half}) + ", got " + dimsStr(cs));
  }
  if (c.in[2].dims.size() != cs.size() ||
      !std::equal(cs.begin(), cs.end(), c.in[2].dims.begin(), dimsAgree))
    return c.fail("sin_cache " + dimsStr(c.in[2].dims) + " must have cos_cache's shape " + dimsStr(cs));
  c.set(0, c.in[0].dtype, x);
  return "";
}

std::string inferDeformConv(const Ctx& c) {
  // DeformConv-19, 2-D: X [N, C, H, W], W [oC, C / group, kH, kW], offset
  // [N, offset_group kH kW 2, oH, oW], B [oC], mask [N, offset_group kH kW, oH, oW].
  static const std::vector<const char*> names = {"X", "W", "offset", "B", "mask"};
  if (auto e = checkArity(c, 3, 5, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  for (size_t i : {1, 2, 3, 4})
    if (c.has(i))
      if (auto e = checkSameDType(c, i, 0, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  const auto& wd = c.in[1].dims;
  if (x.size() != 4 || wd.size() != 4)
    return c.fail("only 2-D DeformConv is supported: X and W must be 4-D, got " + dimsStr(x) +
                  " and " + dimsStr(wd));
  const int64_t group = c.attrs.getInt("group", 1), og = c.attrs.getInt("offset_group", 1);
  if (group < 1 || og < 1) return c.fail("attributes group and offset_group must be >= 1");
  if (x[1] != kUnknownDim && wd[1] != kUnknownDim && x[1] != wd[1] * group)
    return c.fail("X has " + std::to_string(x[1]) + " channels but W expects " +
                  std::to_string(wd[1]) + " x group " + std::to_string(group));
  if (x[1] != kUnknownDim && x[1] % og != 0)
    return c.fail("X's " + std::to_string(x[1]) + " channels are not a multiple of offset_group " +
                  std::to_string(og));
  if (wd[0] != kUnknownDim && wd[0] % group != 0)
    return c.fail("W's " + std::to_string(wd[0]) + " output channels are not a multiple of group " +
                  std::to_string(group));
  if (c.has(3) && (c.in[3].dims.size() != 1 || !dimsAgree(c.in[3].dims[0], wd[0])))
    return c.fail("input 3 (B) must be [" + std::to_string(wd[0]) + "], got " + dimsStr(c.in[3].dims));
  Window w;
  if (auto e = kernelFromWeights(c, wd, &w); !e.empty()) return e;
  if (auto e = readWindow(c, 2, &w); !e.empty()) return e;
  if (w.autoPad != "NOTSET") return c.fail("DeformConv has no auto_pad");
  std::vector<int64_t> y = {x[0], wd[0]};
  for (size_t i = 0; i < 2; ++i) {
    int64_t o;
    if (auto e = slidingOut(c, w, i, x[i + 2], false, &o); !e.empty()) return e;
    y.push_back(o);
  }
  const int64_t taps = mulDims(w.kernel[0], w.kernel[1]);
  const std::vector<int64_t> wantOffset = {x[0], mulDims(og, mulDims(taps, 2)), y[2], y[3]};
  const std::vector<int64_t> wantMask = {x[0], mulDims(og, taps), y[2], y[3]};
  for (auto [i, want] : {std::pair<size_t, const std::vector<int64_t>*>{2, &wantOffset},
                         std::pair<size_t, const std::vector<int64_t>*>{4, &wantMask}}) {
    if (!c.has(i)) continue;
    const auto& got = c.in[i].dims;
    if (got.size() != 4 || !std::equal(got.begin(), got.end(), want->begin(), dimsAgree))
      return c.fail(operandLabel(i, names[i]) + " must be " + dimsStr(*want) + ", got " + dimsStr(got));
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

}  // namespace tandem::shapes
