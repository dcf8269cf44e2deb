// Reference pooling kernels: MaxPool-12 (with the optional Indices output), AveragePool-11
// (plus dilations as in AveragePool-19), GlobalAveragePool-1, GlobalMaxPool-1; N-D. And
// MaxPoolGrad, Tandem's gradient of MaxPool (autodiff).
#include <algorithm>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

struct PoolGeometry {
  int64_t NC = 0;  // N * C
  Shape inSpatial, outSpatial;
  std::vector<int64_t> kernel, strides, dilations, pb, pe;
};

// `ys` is the pooled shape: output 0 of a pool, input 1 (dY) of MaxPoolGrad.
Status readPoolGeometry(const KernelContext& ctx, bool allowDilations, const Shape& ys,
                        PoolGeometry* g) {
  const Shape& xs = ctx.inputTypes[0].shape;
  if (xs.size() < 3)
    return opError(ctx, "X must have rank >= 3 (N, C, spatial...), got " + shapeToString(xs));
  if (ys.size() != xs.size() || ys[0] != xs[0] || ys[1] != xs[1])
    return opError(ctx, "Y " + shapeToString(ys) + " does not fit X " + shapeToString(xs));
  const size_t ns = xs.size() - 2;
  if (!ctx.attrs->has("kernel_shape")) return opError(ctx, "attribute kernel_shape is required");
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "kernel_shape", ns, 1, &g->kernel));
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "strides", ns, 1, &g->strides));
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "dilations", ns, 1, &g->dilations));
  for (size_t i = 0; i < ns; ++i) {
    if (g->kernel[i] < 1 || g->strides[i] < 1 || g->dilations[i] < 1)
      return opError(ctx, "kernel_shape, strides and dilations must be >= 1");
    if (!allowDilations && g->dilations[i] != 1)
      return opError(ctx, "dilations other than 1 are not supported");
  }
  g->NC = xs[0] * xs[1];
  g->inSpatial.assign(xs.begin() + 2, xs.end());
  g->outSpatial.assign(ys.begin() + 2, ys.end());
  return windowBeginPads(ctx, g->inSpatial, g->outSpatial, g->kernel, g->strides, g->dilations,
                         &g->pb, &g->pe);
}

// ---- MaxPool -------------------------------------------------------------------------------

// Per output position p of one channel: the maximum of its window's taps (`tab`, K rows of
// Pout input offsets, -1 in the padding) into best[p] and its input offset into arg[p] (-1 for
// a window wholly in the padding). Taps in table order, the first of equal maxima kept, NaN
// wins: MaxPool and MaxPoolGrad pick the same element.
template <typename T>
void windowArgMax(const T* x, const int32_t* tab, int64_t K, int64_t Pout, T* best, int64_t* arg) {
  std::fill(arg, arg + Pout, int64_t(-1));
  for (int64_t kk = 0; kk < K; ++kk) {
    const int32_t* t = tab + kk * Pout;
    for (int64_t p = 0; p < Pout; ++p) {
      const int64_t s = t[p];
      if (s < 0) continue;
      if (arg[p] < 0 || x[s] > best[p] || (isNaN(x[s]) && !isNaN(best[p]))) {
        best[p] = x[s];
        arg[p] = s;
      }
    }
  }
}

Status createMaxPool(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  PoolGeometry g;
  TANDEM_RETURN_IF_ERROR(readPoolGeometry(ctx, true, ctx.outputTypes[0].shape, &g));
  const bool wantIndices = outputRequested(ctx, 1);
  if (wantIndices && (ctx.outputTypes[1].dtype != DType::I64 ||
                      ctx.outputTypes[1].shape != ctx.outputTypes[0].shape))
    return opError(ctx, "Indices output must be i64 with the shape of Y");
  const int64_t storageOrder = ctx.attrs->getInt("storage_order", 0);
  if (storageOrder != 0 && storageOrder != 1) return opError(ctx, "storage_order must be 0 or 1");
  auto table = std::make_shared<WindowTable>();
  TANDEM_RETURN_IF_ERROR(windowTable(ctx, g.outSpatial, g.inSpatial, g.kernel, g.strides,
                                     g.dilations, g.pb, table.get()));
  // Indices count spatial positions row-major (storage_order 0) or column-major (1).
  auto spatialIndex = std::make_shared<std::vector<int64_t>>();
  if (storageOrder == 1) {
    const size_t ns = g.inSpatial.size();
    std::vector<int64_t> colStride(ns, 1);
    for (size_t d = 1; d < ns; ++d) colStride[d] = colStride[d - 1] * g.inSpatial[d - 1];
    forEachIndex(g.inSpatial, [&](int64_t, const int64_t* idx) {
      int64_t v = 0;
      for (size_t d = 0; d < ns; ++d) v += idx[d] * colStride[d];
      spatialIndex->push_back(v);
    });
  }
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  auto build = [&](auto tag) {
    using T = decltype(tag);
    fn = [g, table, spatialIndex, threads](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      T* Y = outs[0]->data<T>();
      Tensor* It = outputAt(outs, 1);
      int64_t* I = It ? It->data<int64_t>() : nullptr;
      const int64_t Pin = numElements(g.inSpatial), Pout = numElements(g.outSpatial);
      const int64_t K = numElements(g.kernel);
      const int32_t* tab = table->data();
      const int64_t* sidx = spatialIndex->empty() ? nullptr : spatialIndex->data();
#pragma omp parallel num_threads(threads) if (g.NC * Pout * K > 32768)
      {
        std::vector<int64_t> arg(Pout);
#pragma omp for schedule(static)
        for (int64_t nc = 0; nc < g.NC; ++nc) {
          const T* x = X + nc * Pin;
          T* y = Y + nc * Pout;
          windowArgMax(x, tab, K, Pout, y, arg.data());
          for (int64_t p = 0; p < Pout; ++p) {
            // A window wholly inside the padding holds no element: the max of nothing.
            if (arg[p] < 0)
              y[p] = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity()
                                                 : std::numeric_limits<T>::lowest();
            if (I) I[nc * Pout + p] = arg[p] < 0 ? -1 : nc * Pin + (sidx ? sidx[arg[p]] : arg[p]);
          }
        }
      }
      return Status::ok();
    };
  };
  switch (ctx.inputTypes[0].dtype) {
    case DType::F32: build(float{}); break;
    case DType::F64: build(double{}); break;
    case DType::U8: build(uint8_t{}); break;
    case DType::I8: build(int8_t{}); break;
    default: return opError(ctx, "unsupported dtype");
  }
  return makeKernel(out, std::move(fn));
}

// ---- MaxPoolGrad ---------------------------------------------------------------------------

// dX = 0, then for each window dY added at the element MaxPool took (the same tap order and
// comparison as createMaxPool, so equal maxima resolve alike). Parallel over N * C: windows of
// one channel write only that channel.
Status createMaxPoolGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 2 || ctx.inputTypes[1].dtype != ctx.inputTypes[0].dtype)
    return opError(ctx, "expects X and dY of one dtype");
  PoolGeometry g;
  TANDEM_RETURN_IF_ERROR(readPoolGeometry(ctx, true, ctx.inputTypes[1].shape, &g));
  TANDEM_RETURN_IF_ERROR(checkSameShape(ctx, 0));
  auto table = std::make_shared<WindowTable>();
  TANDEM_RETURN_IF_ERROR(windowTable(ctx, g.outSpatial, g.inSpatial, g.kernel, g.strides,
                                     g.dilations, g.pb, table.get()));
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  auto build = [&](auto tag) {
    using T = decltype(tag);
    fn = [g, table, threads](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* dY = in[1]->data<T>();
      T* dX = outs[0]->data<T>();
      const int64_t Pin = numElements(g.inSpatial), Pout = numElements(g.outSpatial);
      const int64_t K = numElements(g.kernel);
      const int32_t* tab = table->data();
#pragma omp parallel num_threads(threads) if (g.NC * Pout * K > 32768)
      {
        std::vector<int64_t> arg(Pout);
        std::vector<T> best(Pout);
#pragma omp for schedule(static)
        for (int64_t nc = 0; nc < g.NC; ++nc) {
          const T* x = X + nc * Pin;
          T* dx = dX + nc * Pin;
          std::fill(dx, dx + Pin, T(0));
          windowArgMax(x, tab, K, Pout, best.data(), arg.data());
          const T* dy = dY + nc * Pout;
          for (int64_t p = 0; p < Pout; ++p)
            if (arg[p] >= 0) dx[arg[p]] += dy[p];
        }
      }
      return Status::ok();
    };
  };
  switch (ctx.inputTypes[0].dtype) {
    case DType::F32: build(float{}); break;
    case DType::F64: build(double{}); break;
    default: return opError(ctx, "unsupported dtype");
  }
  return makeKernel(out, std::move(fn));
}

// ---- AveragePool ---------------------------------------------------------------------------

Status createAveragePool(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  PoolGeometry g;
  TANDEM_RETURN_IF_ERROR(readPoolGeometry(ctx, true, ctx.outputTypes[0].shape, &g));
  const bool includePad = ctx.attrs->getInt("count_include_pad", 0) != 0;
  auto table = std::make_shared<WindowTable>();
  TANDEM_RETURN_IF_ERROR(windowTable(ctx, g.outSpatial, g.inSpatial, g.kernel, g.strides,
                                     g.dilations, g.pb, table.get()));
  // The divisor of each output position: its taps inside the input, or (count_include_pad)
  // inside the padded input; taps that ceil_mode pushes past the end padding never count.
  const size_t ns = g.inSpatial.size();
  std::vector<std::vector<int64_t>> perDim(ns);
  for (size_t d = 0; d < ns; ++d) {
    const int64_t lo = includePad ? -g.pb[d] : 0;
    const int64_t hi = includePad ? g.inSpatial[d] + g.pe[d] : g.inSpatial[d];
    for (int64_t o = 0; o < g.outSpatial[d]; ++o) {
      int64_t cnt = 0;
      for (int64_t k = 0; k < g.kernel[d]; ++k) {
        const int64_t c = o * g.strides[d] - g.pb[d] + k * g.dilations[d];
        cnt += c >= lo && c < hi;
      }
      perDim[d].push_back(cnt);
    }
  }
  auto divisor = std::make_shared<std::vector<int64_t>>();
  forEachIndex(g.outSpatial, [&](int64_t, const int64_t* o) {
    int64_t cnt = 1;
    for (size_t d = 0; d < ns; ++d) cnt *= perDim[d][o[d]];
    divisor->push_back(cnt);
  });
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [g, table, divisor, threads](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      T* Y = outs[0]->data<T>();
      const int64_t Pin = numElements(g.inSpatial), Pout = numElements(g.outSpatial);
      const int64_t K = numElements(g.kernel);
      const int32_t* tab = table->data();
#pragma omp parallel num_threads(threads) if (g.NC * Pout * K > 32768)
      {
        std::vector<double> acc(Pout);
#pragma omp for schedule(static)
        for (int64_t nc = 0; nc < g.NC; ++nc) {
          const T* x = X + nc * Pin;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t kk = 0; kk < K; ++kk) {
            const int32_t* t = tab + kk * Pout;
            for (int64_t p = 0; p < Pout; ++p)
              if (t[p] >= 0) acc[p] += double(x[t[p]]);
          }
          T* y = Y + nc * Pout;
          for (int64_t p = 0; p < Pout; ++p) y[p] = T(acc[p] / double((*divisor)[p]));
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- GlobalAveragePool / GlobalMaxPool -----------------------------------------------------

KernelFactory globalPoolFactory(bool isMax) {
  return [isMax](const KernelContext& ctx, std::unique_ptr<Kernel>* out) -> Status {
    const Shape& xs = ctx.inputTypes[0].shape;
    if (xs.size() < 2) return opError(ctx, "X must have rank >= 2, got " + shapeToString(xs));
    const int64_t NC = xs[0] * xs[1], P = product(xs, 2, xs.size());
    const Shape& ys = ctx.outputTypes[0].shape;
    if (ys.size() != xs.size() || numElements(ys) != NC)
      return opError(ctx, "output shape " + shapeToString(ys) + " is not [N, C, 1, ...]");
    RunFn fn;
    dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      fn = [isMax, NC, P](const Inputs& in, const Outputs& outs) -> Status {
        const T* X = in[0]->data<T>();
        T* Y = outs[0]->data<T>();
        for (int64_t nc = 0; nc < NC; ++nc) {
          const T* x = X + nc * P;
          if (isMax) {
            T m = -std::numeric_limits<T>::infinity();
            for (int64_t p = 0; p < P; ++p)
              if (x[p] > m || isNaN(x[p])) m = x[p];
            Y[nc] = m;
          } else {
            double s = 0;
            for (int64_t p = 0; p < P; ++p) s += double(x[p]);
            Y[nc] = T(s / double(P));
          }
        }
        return Status::ok();
      };
    });
    if (!fn) return opError(ctx, "unsupported dtype");
    return makeKernel(out, std::move(fn));
  };
}

}  // namespace

void registerPoolKernels(KernelRegistry& r) {
  addRef(r, "MaxPool", {DType::F32, DType::F64, DType::U8, DType::I8}, createMaxPool);
  addRef(r, "MaxPoolGrad", floatTypes(), createMaxPoolGrad);
  addRef(r, "AveragePool", floatTypes(), createAveragePool);
  addRef(r, "GlobalAveragePool", floatTypes(), globalPoolFactory(false));
  addRef(r, "GlobalMaxPool", floatTypes(), globalPoolFactory(true));
}

}  // namespace ref
}  // namespace tandem
