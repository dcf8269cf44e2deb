// Shape functions of the image ops (ONNX opset 17 forms): Resize-13, GridSample-16, RoiAlign-16,
// MaxUnpool-11, LRN-13, InstanceNormalization-6, GroupNormalization-21.
#include <cmath>

#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {

std::string inferResize(const Ctx& c) {
  // X, roi, scales, sizes: the result is sizes, or floor(X.dims * scales) (Resize-13); exactly
  // one of scales and sizes is given (an empty tensor counts as absent), except in Tandem's
  // form of Resize-18's keep_aspect_ratio_policy (written by the importer): sizes give the
  // result and f64 scales the coordinate mapping. Resize-19's half_pixel_symmetric is one more
  // coordinate mode; -18's axes were made full-rank at import.
  static const std::vector<const char*> names = {"X", "roi", "scales", "sizes"};
  if (auto e = checkArity(c, 1, 4, 1, 1, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  const int64_t r = x.size();
  auto given = [&](size_t i) { return c.has(i) && !(c.in[i].dims.size() == 1 && c.in[i].dims[0] == 0); };
  const bool hasScales = given(2), hasSizes = given(3);
  const bool aspectForm = hasScales && hasSizes && c.in[2].dtype == DType::F64;
  if (hasScales == hasSizes && !aspectForm)
    return c.fail("exactly one of input 2 (scales) and input 3 (sizes) must be given");
  std::string mode = c.attrs.getString("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return c.fail("attribute mode='" + mode + "' is not one of nearest, linear, cubic");
  std::string ctm = c.attrs.getString("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "align_corners" &&
      ctm != "asymmetric" && ctm != "tf_crop_and_resize" && ctm != "tf_half_pixel_for_nn" &&
      ctm != "half_pixel_symmetric")
    return c.fail("attribute coordinate_transformation_mode='" + ctm + "' is not supported");
  std::vector<int64_t> y(r, kUnknownDim);
  if (hasSizes) {
    bool known;
    std::vector<int64_t> sizes;
    if (c.in[3].dtype != DType::I64) return c.fail("input 3 (sizes) must be i64");
    if (auto e = readInts(c, 3, "sizes", &known, &sizes); !e.empty()) return e;
    if (known) {
      if ((int64_t)sizes.size() != r)
        return c.fail("input 3 (sizes) has " + std::to_string(sizes.size()) + " entries for a rank-" +
                      std::to_string(r) + " input");
      for (int64_t s : sizes)
        if (s < 0) return c.fail("input 3 (sizes) has a negative entry");
      y = sizes;
    }
    if (aspectForm) {
      // The scales the sizes were rounded from: positive, the result within 1 of X.dims * scales.
      if (c.in[2].dims.size() != 1 || (c.in[2].dims[0] != r && c.in[2].dims[0] != kUnknownDim))
        return c.fail("input 2 (scales) must have one entry per dim of X");
      if (const Tensor* s = c.in[2].value)
        for (int64_t d = 0; d < r; ++d) {
          const double f = s->data<double>()[d];
          if (!(f > 0)) return c.fail("input 2 (scales) must be positive");
          if (known && x[d] != kUnknownDim && !(std::fabs((double)x[d] * f - (double)sizes[d]) <= 0.5 + 1e-9))
            return c.fail("input 3 (sizes) is not X.dims * scales rounded (dim " + std::to_string(d) + ")");
        }
    }
  } else {
    if (c.in[2].dtype != DType::F32) return c.fail("input 2 (scales) must be f32");
    if (const Tensor* s = c.in[2].value) {
      if (s->numel() != r)
        return c.fail("input 2 (scales) has " + std::to_string(s->numel()) + " entries for a rank-" +
                      std::to_string(r) + " input");
      for (int64_t d = 0; d < r; ++d) {
        const float f = s->data<float>()[d];
        if (!(f > 0)) return c.fail("input 2 (scales) must be positive");
        if (x[d] != kUnknownDim) y[d] = (int64_t)std::floor((double)x[d] * (double)f);
      }
    }
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferGridSample(const Ctx& c) {
  // X [N, C, H, W], grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo].
  static const std::vector<const char*> names = {"X", "grid"};
  if (auto e = checkArity(c, 2, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  const auto &x = c.in[0].dims, &g = c.in[1].dims;
  if (x.size() != 4 || g.size() != 4 || (g[3] != 2 && g[3] != kUnknownDim))
    return c.fail("X " + dimsStr(x) + " and grid " + dimsStr(g) + " must be [N,C,H,W] and [N,Ho,Wo,2]");
  std::string mode = c.attrs.getString("mode", "bilinear"), pad = c.attrs.getString("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return c.fail("attribute mode='" + mode + "' is not one of bilinear, nearest, bicubic");
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    return c.fail("attribute padding_mode='" + pad + "' is not one of zeros, border, reflection");
  c.set(0, c.in[0].dtype, {x[0], x[1], g[1], g[2]});
  return "";
}

std::string inferRoiAlign(const Ctx& c) {
  // X [N, C, H, W], rois [R, 4], batch_indices [R] -> [R, C, output_height, output_width].
  static const std::vector<const char*> names = {"X", "rois", "batch_indices"};
  if (auto e = checkArity(c, 3, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  if (auto e = checkSameDType(c, 1, 0, names); !e.empty()) return e;
  if (c.in[2].dtype != DType::I64) return c.fail("input 2 (batch_indices) must be i64");
  const auto &x = c.in[0].dims, &r = c.in[1].dims;
  if (x.size() != 4 || r.size() != 2 || c.in[2].dims.size() != 1)
    return c.fail("X, rois, batch_indices must be 4-D, 2-D and 1-D");
  std::string mode = c.attrs.getString("mode", "avg");
  if (mode != "avg" && mode != "max") return c.fail("attribute mode='" + mode + "' is not avg or max");
  const int64_t oh = c.attrs.getInt("output_height", 1), ow = c.attrs.getInt("output_width", 1);
  if (oh < 1 || ow < 1) return c.fail("output_height and output_width must be >= 1");
  c.set(0, c.in[0].dtype, {r[0], x[1], oh, ow});
  return "";
}

std::string inferMaxUnpool(const Ctx& c) {
  // X, I (i64, X's shape), output_shape (optional): (in - 1) * stride + kernel - pads.
  static const std::vector<const char*> names = {"X", "I", "output_shape"};
  if (auto e = checkArity(c, 2, 3, 1, 1, names); !e.empty()) return e;
  if (c.in[1].dtype != DType::I64) return c.fail("input 1 (I) must be i64");
  const auto& x = c.in[0].dims;
  if (x.size() < 3) return c.fail("input 0 (X) must be [N, C, spatial...]");
  const size_t n = x.size() - 2;
  std::vector<int64_t> k = c.attrs.getInts("kernel_shape");
  if (k.size() != n) return c.fail("attribute kernel_shape must have " + std::to_string(n) + " entries");
  std::vector<int64_t> s = c.attrs.has("strides") ? c.attrs.getInts("strides") : std::vector<int64_t>(n, 1);
  std::vector<int64_t> p = c.attrs.has("pads") ? c.attrs.getInts("pads") : std::vector<int64_t>(2 * n, 0);
  if (s.size() != n || p.size() != 2 * n) return c.fail("attributes strides/pads do not fit the rank");
  std::vector<int64_t> y = x;
  if (c.has(2)) {
    bool known;
    std::vector<int64_t> shape;
    if (auto e = readInts(c, 2, "output_shape", &known, &shape); !e.empty()) return e;
    if (!known) return c.fail("input 2 (output_shape) must be constant");
    if (shape.size() != x.size()) return c.fail("input 2 (output_shape) must have X's rank");
    y = shape;
  } else {
    for (size_t d = 0; d < n; ++d)
      if (x[d + 2] != kUnknownDim) y[d + 2] = (x[d + 2] - 1) * s[d] + k[d] - p[d] - p[d + n];
  }
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferLRN(const Ctx& c) {
  static const std::vector<const char*> names = {"X"};
  if (auto e = checkArity(c, 1, 1, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  if (c.in[0].dims.size() < 3) return c.fail("input 0 (X) must be [N, C, spatial...]");
  if (c.attrs.getInt("size", 0) < 1) return c.fail("attribute size is required and must be >= 1");
  c.set(0, c.in[0].dtype, c.in[0].dims);
  return "";
}

std::string inferInstanceNorm(const Ctx& c) {
  // input [N, C, ...], scale [C], B [C].
  static const std::vector<const char*> names = {"input", "scale", "B"};
  if (auto e = checkArity(c, 3, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  for (size_t i = 1; i < 3; ++i) {
    if (auto e = checkSameDType(c, i, 0, names); !e.empty()) return e;
    const auto& d = c.in[i].dims;
    if (d.size() != 1 || (d[0] != kUnknownDim && c.in[0].dims.size() >= 2 &&
                          c.in[0].dims[1] != kUnknownDim && d[0] != c.in[0].dims[1]))
      return c.fail(operandLabel(i, names[i]) + " must be [C]");
  }
  if (c.in[0].dims.size() < 3) return c.fail("input 0 must be [N, C, spatial...]");
  c.set(0, c.in[0].dtype, c.in[0].dims);
  return "";
}

std::string inferGroupNorm(const Ctx& c) {
  // X [N, C, ...], scale [C], bias [C] (GroupNormalization-21), num_groups dividing C.
  static const std::vector<const char*> names = {"X", "scale", "bias"};
  if (auto e = checkArity(c, 3, 3, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (x.size() < 2) return c.fail("input 0 (X) must be [N, C, ...]");
  if (!c.attrs.has("num_groups")) return c.fail("attribute num_groups is required");
  const int64_t groups = c.attrs.getInt("num_groups", 0);
  if (groups < 1 || (x[1] != kUnknownDim && x[1] % groups != 0))
    return c.fail("attribute num_groups " + std::to_string(groups) + " does not divide the " +
                  std::to_string(x[1]) + " channels");
  for (size_t i = 1; i < 3; ++i) {
    if (auto e = checkSameDType(c, i, 0, names); !e.empty()) return e;
    const auto& d = c.in[i].dims;
    if (d.size() != 1 || (d[0] != kUnknownDim && x[1] != kUnknownDim && d[0] != x[1]))
      return c.fail(operandLabel(i, names[i]) + " must be [C]");
  }
  c.set(0, c.in[0].dtype, x);
  return "";
}

}  // namespace tandem::shapes
