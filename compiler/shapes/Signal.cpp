// Shape functions of the Fourier transforms DFT-17 and STFT-17 (real ([..., 1]) or complex
// ([..., 2]) signals in, complex ([..., 2]) spectra out) and of MelWeightMatrix-17.
#include "compiler/shapes/ShapeFns.h"

namespace tandem::shapes {
namespace {

// The value of the optional scalar integer operand i: `known` false when absent or not constant.
std::string scalarInt(const Ctx& c, size_t i, const char* name, bool* known, int64_t* v) {
  *known = false;
  if (!c.has(i)) return "";
  if (auto e = checkDTypeIn(c, i, kIntIndexTypes, {}); !e.empty())
    return c.fail(operandLabel(i, name) + " must be an i32 or i64 scalar");
  std::vector<int64_t> vals;
  if (auto e = readInts(c, i, name, known, &vals); !e.empty()) return e;
  if (*known && vals.size() != 1)
    return c.fail(operandLabel(i, name) + " must be a scalar, got " + std::to_string(vals.size()) +
                  " values");
  if (*known) *v = vals[0];
  return "";
}

}  // namespace

std::string inferDFT(const Ctx& c) {
  // input [batch, n_1, ..., n_k, 1 or 2]; optional scalar dft_length; axis in [1, rank - 2]
  // (negative: counted from the back, as DFT-20 allows). The result has 2 in the last dim and,
  // along axis, dft_length (default n_axis) bins, or dft_length / 2 + 1 with onesided = 1.
  static const std::vector<const char*> names = {"input", "dft_length"};
  if (auto e = checkArity(c, 1, 2, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  const int64_t rank = x.size();
  if (rank < 3 || (x.back() != 1 && x.back() != 2 && x.back() != kUnknownDim))
    return c.fail("input 0 (input) must be [batch, signal dims..., 1 or 2], got shape " + dimsStr(x));
  int64_t axis = c.attrs.getInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 1 || axis > rank - 2)
    return c.fail("attribute axis=" + std::to_string(c.attrs.getInt("axis", 1)) +
                  " must name a signal dim, in [1, " + std::to_string(rank - 2) + "]");
  const bool inverse = c.attrs.getInt("inverse", 0) != 0, onesided = c.attrs.getInt("onesided", 0) != 0;
  if (inverse && onesided) return c.fail("inverse = 1 with onesided = 1 is not supported");
  bool known;
  int64_t n = x[axis];
  if (auto e = scalarInt(c, 1, names[1], &known, &n); !e.empty()) return e;
  if (c.has(1) && !known) n = kUnknownDim;
  if (n != kUnknownDim && n < 1)
    return c.fail("input 1 (dft_length) must be >= 1, got " + std::to_string(n));
  std::vector<int64_t> y = x;
  y[axis] = n == kUnknownDim ? n : onesided ? n / 2 + 1 : n;
  y.back() = 2;
  c.set(0, c.in[0].dtype, y);
  return "";
}

std::string inferSTFT(const Ctx& c) {
  // signal [batch, length, 1 or 2]; frame_step scalar; optional window [frame_length]; optional
  // frame_length scalar. Result [batch, (length - frame_length) / frame_step + 1, bins, 2], bins
  // frame_length / 2 + 1 with onesided (default 1), else frame_length.
  static const std::vector<const char*> names = {"signal", "frame_step", "window", "frame_length"};
  if (auto e = checkArity(c, 2, 4, 1, 1, names); !e.empty()) return e;
  if (auto e = checkDTypeIn(c, 0, kFloatTypes, names); !e.empty()) return e;
  const auto& x = c.in[0].dims;
  if (x.size() != 3 || (x[2] != 1 && x[2] != 2 && x[2] != kUnknownDim))
    return c.fail("input 0 (signal) must be [batch, length, 1 or 2], got shape " + dimsStr(x));
  bool stepKnown, lenKnown;
  int64_t step = 0, len = kUnknownDim;
  if (auto e = scalarInt(c, 1, names[1], &stepKnown, &step); !e.empty()) return e;
  if (stepKnown && step < 1) return c.fail("input 1 (frame_step) must be >= 1, got " + std::to_string(step));
  if (c.has(2)) {
    if (auto e = checkSameDType(c, 2, 0, names); !e.empty()) return e;
    if (c.in[2].dims.size() != 1)
      return c.fail("input 2 (window) must be 1-D, got shape " + dimsStr(c.in[2].dims));
    len = c.in[2].dims[0];
  }
  int64_t given = kUnknownDim;
  if (auto e = scalarInt(c, 3, names[3], &lenKnown, &given); !e.empty()) return e;
  if (lenKnown) {
    if (len != kUnknownDim && given != len)
      return c.fail("input 3 (frame_length) is " + std::to_string(given) +
                    " but input 2 (window) has " + std::to_string(len) + " values");
    len = given;
  }
  if (!c.has(2) && !c.has(3)) return c.fail("needs input 2 (window) or input 3 (frame_length)");
  if (len != kUnknownDim && (len < 1 || (x[1] != kUnknownDim && len > x[1])))
    return c.fail("frame length " + std::to_string(len) + " must be in [1, signal length " +
                  std::to_string(x[1]) + "]");
  int64_t frames = kUnknownDim, bins = kUnknownDim;
  if (len != kUnknownDim) {
    bins = c.attrs.getInt("onesided", 1) != 0 ? len / 2 + 1 : len;
    if (stepKnown && x[1] != kUnknownDim) frames = (x[1] - len) / step + 1;
  }
  c.set(0, c.in[0].dtype, {x[0], frames, bins, 2});
  return "";
}

std::string inferMelWeightMatrix(const Ctx& c) {
  // Scalars num_mel_bins, dft_length, sample_rate (integers), lower_edge_hertz, upper_edge_hertz
  // (floats); the result [dft_length / 2 + 1, num_mel_bins] of output_datatype (default f32),
  // known when the first two are constants.
  static const std::vector<const char*> names = {"num_mel_bins", "dft_length", "sample_rate",
                                                 "lower_edge_hertz", "upper_edge_hertz"};
  if (auto e = checkArity(c, 5, 5, 1, 1, names); !e.empty()) return e;
  for (size_t i = 0; i < 3; ++i)
    if (auto e = checkDTypeIn(c, i, kIntIndexTypes, names); !e.empty()) return e;
  for (size_t i = 3; i < 5; ++i)
    if (auto e = checkDTypeIn(c, i, kFloatTypes, names); !e.empty()) return e;
  const int64_t code = c.attrs.getInt("output_datatype", (int64_t)DType::F32);
  if (code != (int64_t)DType::F32 && code != (int64_t)DType::F64)
    return c.fail("attribute output_datatype=" + std::to_string(code) + " is not f32 or f64");
  bool known;
  int64_t mel = kUnknownDim, dft = kUnknownDim;
  if (auto e = scalarInt(c, 0, names[0], &known, &mel); !e.empty()) return e;
  if (!known) mel = kUnknownDim;
  if (auto e = scalarInt(c, 1, names[1], &known, &dft); !e.empty()) return e;
  if (!known) dft = kUnknownDim;
  if ((mel != kUnknownDim && mel < 1) || (dft != kUnknownDim && dft < 1))
    return c.fail("num_mel_bins and dft_length must be >= 1");
  c.set(0, (DType)code, {dft == kUnknownDim ? dft : dft / 2 + 1, mel});
  return "";
}

}  // namespace tandem::shapes
