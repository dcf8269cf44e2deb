// Reference normalisation kernels: BatchNormalization-15 (inference, and training mode for
// completeness) and Tandem's BatchNormalizationGrad (autodiff), LayerNormalization-17 and
// Tandem's LayerNormalizationGrad (autodiff), RMSNormalization-23, MeanVarianceNormalization-13,
// Softmax-13 and LogSoftmax-13 (single axis).
#include <algorithm>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

std::vector<double> asDoubles(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = elementAsDouble(t, i);
  return v;
}

void storeDoubles(const std::vector<double>& v, Tensor* t) {
  dispatchFloat(t->dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < v.size(); ++i) t->data<T>()[i] = T(v[i]);
  });
}

// ---- BatchNormalization --------------------------------------------------------------------

Status createBatchNorm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 5)
    return opError(ctx, "expects 5 inputs (X, scale, B, input_mean, input_var)");
  const Shape& xs = ctx.inputTypes[0].shape;
  if (xs.size() < 2) return opError(ctx, "X must have rank >= 2, got " + shapeToString(xs));
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  const int64_t N = xs[0], C = xs[1], P = product(xs, 2, xs.size());
  for (size_t i = 1; i < 5; ++i) {
    if (!isFloat(ctx.inputTypes[i].dtype) || isHalfFloat(ctx.inputTypes[i].dtype))
      return opError(ctx, "input " + std::to_string(i) + " must be f32 or f64");
    if (ctx.inputTypes[i].shape != Shape{C})
      return opError(ctx, "input " + std::to_string(i) + " must have shape [" + std::to_string(C) +
                              "], got " + shapeToString(ctx.inputTypes[i].shape));
  }
  const double eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  const double momentum = ctx.attrs->getFloat("momentum", 0.9f);
  const bool training = ctx.attrs->getInt("training_mode", 0) != 0;
  if (!training && ctx.outputTypes.size() > 1 &&
      (outputRequested(ctx, 1) || outputRequested(ctx, 2)))
    return opError(ctx, "running_mean/running_var outputs need training_mode=1");
  for (size_t i = 1; i < 3; ++i)
    if (outputRequested(ctx, i) &&
        (!isFloat(ctx.outputTypes[i].dtype) || isHalfFloat(ctx.outputTypes[i].dtype) ||
         ctx.outputTypes[i].shape != Shape{C}))
      return opError(ctx, "running_mean/running_var outputs must be f32/f64 of shape [" +
                              std::to_string(C) + "]");
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      T* Y = outs[0]->data<T>();
      std::vector<double> scale = asDoubles(*in[1]), bias = asDoubles(*in[2]);
      std::vector<double> mean = asDoubles(*in[3]), var = asDoubles(*in[4]);
      if (training) {
        // Batch statistics over N and the spatial dims; population variance (ONNX reference).
        std::vector<double> bm(C, 0.0), bv(C, 0.0);
        const double cnt = double(N * P);
        for (int64_t c = 0; c < C; ++c) {
          for (int64_t n = 0; n < N; ++n)
            for (int64_t p = 0; p < P; ++p) bm[c] += double(X[(n * C + c) * P + p]);
          bm[c] /= cnt;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t p = 0; p < P; ++p) {
              const double d = double(X[(n * C + c) * P + p]) - bm[c];
              bv[c] += d * d;
            }
          bv[c] /= cnt;
        }
        if (Tensor* rm = outputAt(outs, 1)) {
          std::vector<double> v(C);
          for (int64_t c = 0; c < C; ++c) v[c] = mean[c] * momentum + bm[c] * (1 - momentum);
          storeDoubles(v, rm);
        }
        if (Tensor* rv = outputAt(outs, 2)) {
          std::vector<double> v(C);
          for (int64_t c = 0; c < C; ++c) v[c] = var[c] * momentum + bv[c] * (1 - momentum);
          storeDoubles(v, rv);
        }
        mean = bm;
        var = bv;
      }
      for (int64_t c = 0; c < C; ++c) {
        const double a = scale[c] / std::sqrt(var[c] + eps);
        const double b = bias[c] - mean[c] * a;
        for (int64_t n = 0; n < N; ++n) {
          const T* x = X + (n * C + c) * P;
          T* y = Y + (n * C + c) * P;
          for (int64_t p = 0; p < P; ++p) y[p] = T(double(x[p]) * a + b);
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- BatchNormalizationGrad (autodiff) -------------------------------------------------------

// X [N, C, ...], dY like X, scale [C] -> dX, dscale, dB (TandemOps.td): the batch statistics
// recomputed, every sum in f64.
Status createBatchNormGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 3 || ctx.outputTypes.size() != 3)
    return opError(ctx, "expects 3 inputs (X, dY, scale) and 3 outputs (dX, dscale, dB)");
  const Shape& xs = ctx.inputTypes[0].shape;
  if (xs.size() < 2 || ctx.inputTypes[1].shape != xs || ctx.inputTypes[2].shape != Shape{xs[1]})
    return opError(ctx, "needs X [N, C, ...], dY of X's shape and scale [C]");
  for (size_t i = 0; i < 3; ++i)
    if (!isFloat(ctx.inputTypes[i].dtype) || isHalfFloat(ctx.inputTypes[i].dtype))
      return opError(ctx, "input " + std::to_string(i) + " must be f32 or f64");
  const int64_t N = xs[0], C = xs[1], P = product(xs, 2, xs.size());
  const double eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* dY = in[1]->data<T>();
      const std::vector<double> scale = asDoubles(*in[2]);
      T* dX = outs[0]->data<T>();
      std::vector<double> dScale(C), dB(C);
      const double cnt = double(N * P);
      auto at = [&](int64_t n, int64_t c, int64_t p) { return (n * C + c) * P + p; };
      for (int64_t c = 0; c < C; ++c) {
        double mean = 0, var = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t p = 0; p < P; ++p) mean += double(X[at(n, c, p)]);
        mean /= cnt;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t p = 0; p < P; ++p) var += std::pow(double(X[at(n, c, p)]) - mean, 2);
        const double rstd = 1 / std::sqrt(var / cnt + eps);
        double sumDy = 0, sumDyXhat = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t p = 0; p < P; ++p) {
            const double dy = double(dY[at(n, c, p)]);
            sumDy += dy;
            sumDyXhat += dy * (double(X[at(n, c, p)]) - mean) * rstd;
          }
        for (int64_t n = 0; n < N; ++n)
          for (int64_t p = 0; p < P; ++p) {
            const double xhat = (double(X[at(n, c, p)]) - mean) * rstd;
            dX[at(n, c, p)] = T(scale[c] * rstd *
                                (double(dY[at(n, c, p)]) - sumDy / cnt - xhat * sumDyXhat / cnt));
          }
        dScale[c] = sumDyXhat;
        dB[c] = sumDy;
      }
      storeDoubles(dScale, outs[1]);
      storeDoubles(dB, outs[2]);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- LayerNormalizationGrad (autodiff) -----------------------------------------------------

// X, dY like X, Scale (X's dims from axis on) -> dX, dScale, dB (TandemOps.td): the row
// statistics recomputed, every sum in f64.
Status createLayerNormGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 3 || ctx.outputTypes.size() != 3)
    return opError(ctx, "expects 3 inputs (X, dY, Scale) and 3 outputs (dX, dScale, dB)");
  const Shape& xs = ctx.inputTypes[0].shape;
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)xs.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
  const Shape norm(xs.begin() + axis, xs.end());
  if (ctx.inputTypes[1].shape != xs || ctx.inputTypes[2].shape != norm)
    return opError(ctx, "needs dY of X's shape and Scale of X's dims from axis on " + shapeToString(norm));
  for (size_t i = 0; i < 3; ++i)
    if (!isFloat(ctx.inputTypes[i].dtype) || isHalfFloat(ctx.inputTypes[i].dtype))
      return opError(ctx, "input " + std::to_string(i) + " must be f32 or f64");
  const int64_t rows = product(xs, 0, axis), n = numElements(norm);
  const double eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* dY = in[1]->data<T>();
      const std::vector<double> scale = asDoubles(*in[2]);
      T* dX = outs[0]->data<T>();
      std::vector<double> dScale(n), dB(n);
      for (int64_t r = 0; r < rows; ++r) {
        const T* x = X + r * n;
        const T* dy = dY + r * n;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < n; ++j) mean += double(x[j]);
        mean /= double(n);
        for (int64_t j = 0; j < n; ++j) var += std::pow(double(x[j]) - mean, 2);
        const double rstd = 1 / std::sqrt(var / double(n) + eps);
        double sumG = 0, sumGXhat = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double g = double(dy[j]) * scale[j], xhat = (double(x[j]) - mean) * rstd;
          sumG += g;
          sumGXhat += g * xhat;
          dScale[j] += double(dy[j]) * xhat;
          dB[j] += double(dy[j]);
        }
        for (int64_t j = 0; j < n; ++j) {
          const double xhat = (double(x[j]) - mean) * rstd;
          dX[r * n + j] = T(rstd * (double(dy[j]) * scale[j] - sumG / double(n) - xhat * sumGXhat / double(n)));
        }
      }
      storeDoubles(dScale, outs[1]);
      storeDoubles(dB, outs[2]);
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- LayerNormalization --------------------------------------------------------------------

/// Offsets into a parameter (Scale or B) broadcast to the normalised shape, one per element.
Status paramIndex(const KernelContext& ctx, const Shape& param, const Shape& norm, const char* what,
                  std::vector<int64_t>* idx) {
  Shape p = param;
  while (p.size() > norm.size() && p.front() == 1) p.erase(p.begin());
  if (!broadcastsTo(p, norm))
    return opError(ctx, std::string(what) + " of shape " + shapeToString(param) +
                            " does not broadcast to the normalized shape " + shapeToString(norm));
  std::vector<int64_t> st = broadcastStrides(p, norm);
  idx->assign(numElements(norm), 0);
  forEachStrided<1>(norm, {st.data()}, {0},
                    [&](int64_t i, const std::array<int64_t, 1>& o) { (*idx)[i] = o[0]; });
  return Status::ok();
}

// RMSNormalization-23: per row of the dims from axis on, y = x / sqrt(mean(x^2) + eps) * scale,
// the mean in double.
Status createRmsNorm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 2) return opError(ctx, "expects inputs X and scale");
  const Shape& xs = ctx.inputTypes[0].shape;
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)xs.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
  if (ctx.inputTypes[1].dtype != ctx.inputTypes[0].dtype)
    return opError(ctx, "scale must have the dtype of X");
  const double eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  const Shape norm(xs.begin() + axis, xs.end());
  const int64_t outer = product(xs, 0, axis), inner = numElements(norm);
  auto sIdx = std::make_shared<std::vector<int64_t>>();
  TANDEM_RETURN_IF_ERROR(paramIndex(ctx, ctx.inputTypes[1].shape, norm, "scale", sIdx.get()));
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* S = in[1]->data<T>();
      T* Y = outs[0]->data<T>();
      parallelRanges(threads, outer, std::max<int64_t>(1, kStreamGrain / std::max<int64_t>(1, inner)),
                     [&](int64_t b0, int64_t e0) {
        for (int64_t o = b0; o < e0; ++o) {
          const T* x = X + o * inner;
          T* y = Y + o * inner;
          double squares = 0;
          for (int64_t j = 0; j < inner; ++j) squares += double(x[j]) * double(x[j]);
          const double inv = inner ? 1.0 / std::sqrt(squares / double(inner) + eps) : 0.0;
          for (int64_t j = 0; j < inner; ++j) y[j] = T(double(x[j]) * inv * double(S[(*sIdx)[j]]));
        }
      });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

Status createLayerNorm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 2) return opError(ctx, "expects inputs X, Scale and optional B");
  const Shape& xs = ctx.inputTypes[0].shape;
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  int64_t axis;
  if (!normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)xs.size(), &axis))
    return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
  const double eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  const Shape norm(xs.begin() + axis, xs.end());
  const int64_t outer = product(xs, 0, axis), inner = numElements(norm);
  auto sIdx = std::make_shared<std::vector<int64_t>>();
  auto bIdx = std::make_shared<std::vector<int64_t>>();
  TANDEM_RETURN_IF_ERROR(paramIndex(ctx, ctx.inputTypes[1].shape, norm, "Scale", sIdx.get()));
  if (inputPresent(ctx, 2))
    TANDEM_RETURN_IF_ERROR(paramIndex(ctx, ctx.inputTypes[2].shape, norm, "B", bIdx.get()));
  for (size_t i = 1; i < 3; ++i)
    if (outputRequested(ctx, i)) {
      if (!isFloat(ctx.outputTypes[i].dtype) || isHalfFloat(ctx.outputTypes[i].dtype))
        return opError(ctx, "Mean/InvStdDev outputs must be f32 or f64");
      if (numElements(ctx.outputTypes[i].shape) != outer)
        return opError(ctx, "Mean/InvStdDev output shape " +
                                shapeToString(ctx.outputTypes[i].shape) + " does not have " +
                                std::to_string(outer) + " elements");
    }
  for (size_t i = 1; i < ctx.inputTypes.size(); ++i)
    if (inputPresent(ctx, i) && ctx.inputTypes[i].dtype != ctx.inputTypes[0].dtype)
      return opError(ctx, "Scale and B must have the dtype of X");
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* S = in[1]->data<T>();
      const Tensor* Bt = inputAt(in, 2);
      const T* B = Bt ? Bt->data<T>() : nullptr;
      T* Y = outs[0]->data<T>();
      Tensor* meanOut = outputAt(outs, 1);
      Tensor* invOut = outputAt(outs, 2);
      for (int64_t o = 0; o < outer; ++o) {
        const T* x = X + o * inner;
        T* y = Y + o * inner;
        double mean = 0;
        for (int64_t j = 0; j < inner; ++j) mean += double(x[j]);
        mean /= double(inner);
        double var = 0;
        for (int64_t j = 0; j < inner; ++j) {
          const double d = double(x[j]) - mean;
          var += d * d;
        }
        var /= double(inner);
        const double inv = 1.0 / std::sqrt(var + eps);
        for (int64_t j = 0; j < inner; ++j) {
          double v = (double(x[j]) - mean) * inv * double(S[(*sIdx)[j]]);
          if (B) v += double(B[(*bIdx)[j]]);
          y[j] = T(v);
        }
        dispatchFloat(meanOut ? meanOut->dtype() : DType::Undefined,
                      [&](auto t2) { meanOut->data<decltype(t2)>()[o] = decltype(t2)(mean); });
        dispatchFloat(invOut ? invOut->dtype() : DType::Undefined,
                      [&](auto t2) { invOut->data<decltype(t2)>()[o] = decltype(t2)(inv); });
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- Softmax / LogSoftmax ------------------------------------------------------------------

KernelFactory softmaxFactory(bool isLog) {
  return [isLog](const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    const Shape& xs = ctx.inputTypes[0].shape;
    TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
    int64_t axis;
    if (!normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)xs.size(), &axis))
      return opError(ctx, "axis out of range for rank " + std::to_string(xs.size()));
    const int64_t outer = product(xs, 0, axis), n = xs.empty() ? 1 : xs[axis];
    const int64_t inner = product(xs, axis + 1, xs.size());
    RunFn fn;
    dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      fn = [=](const Inputs& in, const Outputs& outs) -> Status {
        const T* X = in[0]->data<T>();
        T* Y = outs[0]->data<T>();
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            const T* x = X + o * n * inner + i;
            T* y = Y + o * n * inner + i;
            // Subtracting the max keeps exp() in range (numerically stable softmax).
            double mx = -std::numeric_limits<double>::infinity();
            for (int64_t k = 0; k < n; ++k) mx = std::max(mx, double(x[k * inner]));
            double sum = 0;
            for (int64_t k = 0; k < n; ++k) sum += std::exp(double(x[k * inner]) - mx);
            if (isLog) {
              const double lse = std::log(sum);
              for (int64_t k = 0; k < n; ++k) y[k * inner] = T(double(x[k * inner]) - mx - lse);
            } else {
              for (int64_t k = 0; k < n; ++k)
                y[k * inner] = T(std::exp(double(x[k * inner]) - mx) / sum);
            }
          }
        return Status::ok();
      };
    });
    if (!fn) return opError(ctx, "unsupported dtype");
    return makeKernel(out, std::move(fn));
  };
}

// ---- MeanVarianceNormalization-13 ---------------------------------------------------------

// Over the elements that share the non-`axes` indices: y = (x - E[x]) / (sqrt(E[x^2] - E[x]^2)
// + 1e-9), the ONNX function body's formula and epsilon. Moments accumulate in double.
Status createMvn(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx));
  const Shape xs = ctx.inputTypes[0].shape;
  const int64_t rank = (int64_t)xs.size();
  std::vector<bool> reduced(rank, false);
  for (int64_t a : ctx.attrs->getInts("axes", {0, 2, 3})) {
    int64_t ax;
    if (!normalizeAxis(a, rank, &ax) || reduced[ax])
      return opError(ctx, "axes value " + std::to_string(a) + " is out of range or repeated for rank " +
                              std::to_string(rank));
    reduced[ax] = true;
  }
  // Group index of each element: the row-major index over the kept dims.
  Shape kept(rank);
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    kept[d] = reduced[d] ? 1 : xs[d];
    if (reduced[d]) count *= xs[d];
  }
  std::vector<int64_t> st = rowMajorStrides(kept);
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[d]) st[d] = 0;
  const int64_t groups = numElements(kept);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      T* y = outs[0]->data<T>();
      std::vector<double> sum(groups, 0.0), sq(groups, 0.0);
      forEachStrided<1>(xs, {st.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
        sum[o[0]] += double(x[i]);
        sq[o[0]] += double(x[i]) * double(x[i]);
      });
      for (int64_t g = 0; g < groups; ++g) {
        const double mean = sum[g] / double(count);
        sum[g] = mean;
        sq[g] = std::sqrt(std::max(sq[g] / double(count) - mean * mean, 0.0)) + 1e-9;
      }
      forEachStrided<1>(xs, {st.data()}, {0}, [&](int64_t i, const std::array<int64_t, 1>& o) {
        y[i] = T((double(x[i]) - sum[o[0]]) / sq[o[0]]);
      });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerNormKernels(KernelRegistry& r) {
  addRef(r, "BatchNormalization", floatTypes(), createBatchNorm);
  addRef(r, "BatchNormalizationGrad", floatTypes(), createBatchNormGrad);
  addRef(r, "LayerNormalization", floatTypes(), createLayerNorm);
  addRef(r, "LayerNormalizationGrad", floatTypes(), createLayerNormGrad);
  addRef(r, "RMSNormalization", floatTypes(), createRmsNorm);
  addRef(r, "MeanVarianceNormalization", floatTypes(), createMvn);
  addRef(r, "Softmax", floatTypes(), softmaxFactory(false));
  addRef(r, "LogSoftmax", floatTypes(), softmaxFactory(true));
}

}  // namespace ref
}  // namespace tandem
