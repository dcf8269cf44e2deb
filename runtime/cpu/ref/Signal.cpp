// Reference kernels of the Fourier transforms DFT-17 (any signal axis, real or complex input,
// dft_length zero-padding or truncation, inverse, onesided) and STFT-17 (frames times an optional
// window, onesided), and MelWeightMatrix-17. Direct O(n^2) sums in f64 with exact twiddle indices (f * k mod n), which
// keeps the reference accurate for any length; an FFT is the fast path still to write.
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

/// The value of an optional scalar integer operand, or `dflt` when absent.
Status scalarOperand(const OpName& op, const Tensor* t, const char* what, int64_t dflt, int64_t* v) {
  *v = dflt;
  if (!t) return Status::ok();
  std::vector<int64_t> vals;
  TANDEM_RETURN_IF_ERROR(readInts(op, t, what, &vals));
  if (vals.size() != 1) return opError(op, std::string(what) + " must be a scalar");
  *v = vals[0];
  return Status::ok();
}

/// out[f] = sum_{k < count} x[k] e^{sign 2 pi i f k / n} for f < bins; x complex (re, im pairs at
/// stride `xs` elements apart, imaginary part 0 when !complexIn), out likewise at stride `ys`.
template <typename T>
void directDft(const T* x, int64_t xs, bool complexIn, int64_t count, int64_t n, int64_t bins,
               double sign, double scale, T* y, int64_t ys) {
  for (int64_t f = 0; f < bins; ++f) {
    double re = 0, im = 0;
    for (int64_t k = 0; k < count; ++k) {
      const double a = sign * kTwoPi * double((f * k) % n) / double(n);
      const double c = std::cos(a), s = std::sin(a);
      const double xr = double(x[k * xs]), xi = complexIn ? double(x[k * xs + 1]) : 0.0;
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    y[f * ys] = T(re * scale);
    y[f * ys + 1] = T(im * scale);
  }
}

// ---- DFT -----------------------------------------------------------------------------------

Status createDFT(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  const int64_t rank = xs.size();
  if (rank < 3 || (xs.back() != 1 && xs.back() != 2))
    return opError(ctx, "input must be [batch, signal dims..., 1 or 2], got " + shapeToString(xs));
  int64_t axis = ctx.attrs->getInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 1 || axis > rank - 2) return opError(ctx, "axis must name a signal dim");
  const bool inverse = ctx.attrs->getInt("inverse", 0) != 0;
  const bool onesided = ctx.attrs->getInt("onesided", 0) != 0;
  if (inverse && onesided) return opError(ctx, "inverse = 1 with onesided = 1 is not supported");
  Shape want = xs;
  want[axis] = ys.size() == xs.size() ? ys[axis] : 0;
  want.back() = 2;
  if (ys != want) return opError(ctx, "output shape " + shapeToString(ys) + " does not fit input " + shapeToString(xs));
  const int64_t outer = product(xs, 0, axis), nIn = xs[axis], inner = product(xs, axis + 1, rank - 1);
  const bool complexIn = xs.back() == 2;
  const int64_t bins = ys[axis];
  const OpName op(ctx);
  const ConstOperands consts(ctx);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      int64_t n;
      TANDEM_RETURN_IF_ERROR(scalarOperand(op, consts.get(in, 1), "dft_length", nIn, &n));
      if (n < 1 || (onesided ? n / 2 + 1 : n) != bins)
        return opError(op, "dft_length " + std::to_string(n) + " does not give the planned " +
                               std::to_string(bins) + " bins");
      const T* X = in[0]->data<T>();
      T* Y = outs[0]->data<T>();
      const int64_t c = xs.back(), count = std::min(n, nIn);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i)
          directDft(X + (o * nIn * inner + i) * c, inner * c, complexIn, count, n, bins,
                    inverse ? 1.0 : -1.0, inverse ? 1.0 / double(n) : 1.0,
                    Y + (o * bins * inner + i) * 2, inner * 2);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "input must be f32 or f64");
  return makeKernel(out, std::move(fn));
}

// ---- STFT ----------------------------------------------------------------------------------

Status createSTFT(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  if (xs.size() != 3 || (xs[2] != 1 && xs[2] != 2))
    return opError(ctx, "signal must be [batch, length, 1 or 2], got " + shapeToString(xs));
  if (ys.size() != 4 || ys[0] != xs[0] || ys[3] != 2)
    return opError(ctx, "output must be [batch, frames, bins, 2], got " + shapeToString(ys));
  const bool hasWindow = inputPresent(ctx, 2);
  if (hasWindow && ctx.inputTypes[2].dtype != ctx.inputTypes[0].dtype)
    return opError(ctx, "window must have the signal's dtype");
  const bool onesided = ctx.attrs->getInt("onesided", 1) != 0;
  const int64_t winLen = hasWindow ? numElements(ctx.inputTypes[2].shape) : -1;
  const OpName op(ctx);
  const ConstOperands consts(ctx);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      int64_t step, len;
      TANDEM_RETURN_IF_ERROR(scalarOperand(op, consts.get(in, 1), "frame_step", 0, &step));
      TANDEM_RETURN_IF_ERROR(scalarOperand(op, consts.get(in, 3), "frame_length", winLen, &len));
      if (step < 1 || len < 1 || len > xs[1] || (winLen >= 0 && len != winLen))
        return opError(op, "frame_step " + std::to_string(step) + " and frame_length " +
                               std::to_string(len) + " do not fit the signal and window");
      const int64_t frames = (xs[1] - len) / step + 1, bins = onesided ? len / 2 + 1 : len;
      if (ys[1] != frames || ys[2] != bins)
        return opError(op, "planned output " + shapeToString(ys) + " does not fit " +
                               std::to_string(frames) + " frames of " + std::to_string(bins) + " bins");
      const T* X = in[0]->data<T>();
      const T* w = hasWindow ? consts.get(in, 2)->data<T>() : nullptr;
      T* Y = outs[0]->data<T>();
      const int64_t c = xs[2];
      std::vector<T> frame(len * 2);
      for (int64_t b = 0; b < xs[0]; ++b)
        for (int64_t f = 0; f < frames; ++f) {
          for (int64_t k = 0; k < len; ++k) {
            const T* s = X + (b * xs[1] + f * step + k) * c;
            const T wk = w ? w[k] : T(1);
            frame[2 * k] = s[0] * wk;
            frame[2 * k + 1] = c == 2 ? s[1] * wk : T(0);
          }
          directDft(frame.data(), 2, true, len, len, bins, -1.0, 1.0, Y + (b * frames + f) * bins * 2, 2);
        }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "signal must be f32 or f64");
  return makeKernel(out, std::move(fn));
}

// ---- MelWeightMatrix -----------------------------------------------------------------------

// The triangular filters of ONNX's reference: num_mel_bins + 2 points evenly spaced in mel
// (2595 log10(1 + hz / 700)) from lower to upper edge, each mapped to the spectrogram bin
// floor((dft_length + 1) hz / sample_rate); filter i rises from point i to point i + 1 and falls
// to point i + 2 (a filter whose rise is empty is 1 at its centre).
Status createMelWeightMatrix(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape ys = ctx.outputTypes[0].shape;
  if (ys.size() != 2) return opError(ctx, "output must be [dft_length / 2 + 1, num_mel_bins]");
  const OpName op(ctx);
  const ConstOperands consts(ctx, 0);
  RunFn fn;
  dispatchFloat(ctx.outputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      int64_t mel, dft, rate;
      TANDEM_RETURN_IF_ERROR(scalarOperand(op, consts.get(in, 0), "num_mel_bins", 0, &mel));
      TANDEM_RETURN_IF_ERROR(scalarOperand(op, consts.get(in, 1), "dft_length", 0, &dft));
      TANDEM_RETURN_IF_ERROR(scalarOperand(op, consts.get(in, 2), "sample_rate", 0, &rate));
      if (mel < 1 || dft < 1 || rate < 1 || ys != Shape{dft / 2 + 1, mel})
        return opError(op, "num_mel_bins " + std::to_string(mel) + ", dft_length " +
                               std::to_string(dft) + " and sample_rate " + std::to_string(rate) +
                               " must be >= 1 and give the planned " + shapeToString(ys));
      const double lo = elementAsDouble(*consts.get(in, 3), 0), hi = elementAsDouble(*consts.get(in, 4), 0);
      const auto toMel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
      const double loMel = toMel(lo), step = (toMel(hi) - loMel) / double(mel + 2);
      std::vector<int64_t> point(mel + 2);
      for (int64_t i = 0; i < mel + 2; ++i) {
        const double hz = 700.0 * (std::pow(10.0, (double(i) * step + loMel) / 2595.0) - 1.0);
        point[i] = int64_t(std::floor(double(dft + 1) * hz / double(rate)));
      }
      T* Y = outs[0]->data<T>();
      const int64_t bins = ys[0];
      std::fill(Y, Y + bins * mel, T(0));
      auto at = [&](int64_t j, int64_t i) -> T* {
        return j >= 0 && j < bins ? &Y[j * mel + i] : nullptr;
      };
      for (int64_t i = 0; i < mel; ++i) {
        const int64_t l = point[i], c = point[i + 1], h = point[i + 2];
        if (c == l) {
          if (T* p = at(c, i)) *p = T(1);
        } else {
          for (int64_t j = l; j <= c; ++j)
            if (T* p = at(j, i)) *p = T(double(j - l) / double(c - l));
        }
        for (int64_t j = c; j < h; ++j)
          if (T* p = at(j, i)) *p = T(double(h - j) / double(h - c));
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "output_datatype must be f32 or f64");
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerSignalKernels(KernelRegistry& r) {
  addRef(r, "MelWeightMatrix", indexTypes(), createMelWeightMatrix);
  addRef(r, "DFT", floatTypes(), createDFT);
  addRef(r, "STFT", floatTypes(), createSTFT);
}

}  // namespace ref
}  // namespace tandem
