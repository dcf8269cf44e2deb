// Reference convolution kernels: Conv-11 and ConvTranspose-11, N-D (any number of spatial dims),
// groups, strides, dilations, explicit pads and auto_pad; ConvTranspose also output_padding and
// output_shape.
#include <algorithm>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

/// Shapes and attributes common to Conv and ConvTranspose, validated against the static types.
struct ConvGeometry {
  int64_t N = 0, C = 0, M = 0, group = 1;
  Shape inSpatial, outSpatial;
  std::vector<int64_t> kernel, strides, dilations;
};

Status readGeometry(const KernelContext& ctx, bool transpose, ConvGeometry* g) {
  if (ctx.inputTypes.size() < 2) return opError(ctx, "expects inputs X, W and optional B");
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ws = ctx.inputTypes[1].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  if (xs.size() < 3)
    return opError(ctx, "X must have rank >= 3 (N, C, spatial...), got " + shapeToString(xs));
  if (ws.size() != xs.size() || ys.size() != xs.size())
    return opError(ctx, "X, W and Y must have the same rank, got " + shapeToString(xs) + ", " +
                            shapeToString(ws) + ", " + shapeToString(ys));
  const size_t ns = xs.size() - 2;
  g->group = ctx.attrs->getInt("group", 1);
  if (g->group < 1) return opError(ctx, "group must be >= 1");
  g->N = xs[0];
  g->C = xs[1];
  g->M = ys[1];
  g->inSpatial.assign(xs.begin() + 2, xs.end());
  g->outSpatial.assign(ys.begin() + 2, ys.end());
  g->kernel.assign(ws.begin() + 2, ws.end());
  if (ctx.attrs->has("kernel_shape")) {
    std::vector<int64_t> ks;
    TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "kernel_shape", ns, 1, &ks));
    if (ks != g->kernel)
      return opError(ctx, "kernel_shape does not match the spatial dims of W " + shapeToString(ws));
  }
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "strides", ns, 1, &g->strides));
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "dilations", ns, 1, &g->dilations));
  for (size_t i = 0; i < ns; ++i)
    if (g->strides[i] < 1 || g->dilations[i] < 1)
      return opError(ctx, "strides and dilations must be >= 1");
  if (g->C % g->group || g->M % g->group)
    return opError(ctx, "channels (" + std::to_string(g->C) + " in, " + std::to_string(g->M) +
                            " out) are not divisible by group " + std::to_string(g->group));
  if (!transpose) {
    if (ws[0] != g->M || ws[1] * g->group != g->C)
      return opError(ctx, "W " + shapeToString(ws) + " does not fit X " + shapeToString(xs) +
                              " with group " + std::to_string(g->group));
  } else {
    if (ws[0] != g->C || ws[1] * g->group != g->M)
      return opError(ctx, "W " + shapeToString(ws) + " does not fit X " + shapeToString(xs) +
                              " and Y " + shapeToString(ys) + " with group " +
                              std::to_string(g->group));
  }
  if (ys[0] != g->N) return opError(ctx, "Y batch differs from X batch");
  if (inputPresent(ctx, 2) && ctx.inputTypes[2].shape != Shape{g->M})
    return opError(ctx, "B must have shape [" + std::to_string(g->M) + "], got " +
                            shapeToString(ctx.inputTypes[2].shape));
  return Status::ok();
}

// ---- Conv ----------------------------------------------------------------------------------

Status createConv(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  ConvGeometry g;
  TANDEM_RETURN_IF_ERROR(readGeometry(ctx, false, &g));
  std::vector<int64_t> pb, pe;
  TANDEM_RETURN_IF_ERROR(
      windowBeginPads(ctx, g.inSpatial, g.outSpatial, g.kernel, g.strides, g.dilations, &pb, &pe));
  auto table = std::make_shared<WindowTable>();
  TANDEM_RETURN_IF_ERROR(windowTable(ctx, g.outSpatial, g.inSpatial, g.kernel, g.strides,
                                     g.dilations, pb, table.get()));
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [g, table, threads](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* W = in[1]->data<T>();
      const Tensor* Bt = inputAt(in, 2);
      const T* B = Bt ? Bt->data<T>() : nullptr;
      T* Y = outs[0]->data<T>();
      const int64_t Pin = numElements(g.inSpatial), Pout = numElements(g.outSpatial);
      const int64_t K = numElements(g.kernel);
      const int64_t Cg = g.C / g.group, Mg = g.M / g.group;
      const int32_t* tab = table->data();
      const int64_t jobs = g.N * g.M;
#pragma omp parallel num_threads(threads) if (jobs * Pout * Cg * K > 32768)
      {
        std::vector<AccOf<T>> acc(Pout);
#pragma omp for schedule(static)
        for (int64_t job = 0; job < jobs; ++job) {
          const int64_t n = job / g.M, m = job % g.M, grp = m / Mg;
          std::fill(acc.begin(), acc.end(), AccOf<T>(B ? B[m] : T(0)));
          for (int64_t c = 0; c < Cg; ++c) {
            const T* x = X + (n * g.C + grp * Cg + c) * Pin;
            const T* w = W + (m * Cg + c) * K;
            for (int64_t kk = 0; kk < K; ++kk) {
              const AccOf<T> wv = w[kk];
              const int32_t* t = tab + kk * Pout;
              for (int64_t p = 0; p < Pout; ++p)
                if (t[p] >= 0) acc[p] += wv * AccOf<T>(x[t[p]]);
            }
          }
          T* y = Y + (n * g.M + m) * Pout;
          for (int64_t p = 0; p < Pout; ++p) y[p] = T(acc[p]);
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- ConvTranspose -------------------------------------------------------------------------

// Begin pads per ONNX ConvTranspose-11: explicit `pads`, or derived from the output extent when
// output_shape or auto_pad=SAME_* fixes it: total = s*(in-1) + output_padding + (k-1)*d + 1 - out,
// split with the smaller half first for SAME_UPPER and the larger half first otherwise.
Status transposeBeginPads(const KernelContext& ctx, const ConvGeometry& g,
                          std::vector<int64_t>* pb) {
  const size_t ns = g.inSpatial.size();
  const std::string autoPad = ctx.attrs->getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return opError(ctx, "attribute auto_pad='" + autoPad +
                            "' is not one of NOTSET, SAME_UPPER, "
                            "SAME_LOWER, VALID");
  std::vector<int64_t> outPad;
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "output_padding", ns, 0, &outPad));
  const bool derived =
      ctx.attrs->has("output_shape") || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  pb->assign(ns, 0);
  if (derived) {
    for (size_t i = 0; i < ns; ++i) {
      int64_t total = g.strides[i] * (g.inSpatial[i] - 1) + outPad[i] +
                      (g.kernel[i] - 1) * g.dilations[i] + 1 - g.outSpatial[i];
      // An output larger than the natural extent keeps the extra positions at the end.
      if (total < 0) total = 0;
      (*pb)[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    }
    return Status::ok();
  }
  if (autoPad == "VALID") return Status::ok();
  std::vector<int64_t> pads;
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "pads", 2 * ns, 0, &pads));
  for (size_t i = 0; i < ns; ++i) {
    if (pads[i] < 0 || pads[ns + i] < 0) return opError(ctx, "negative pads are not allowed");
    (*pb)[i] = pads[i];
  }
  return Status::ok();
}

Status createConvTranspose(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  ConvGeometry g;
  TANDEM_RETURN_IF_ERROR(readGeometry(ctx, true, &g));
  std::vector<int64_t> pb;
  TANDEM_RETURN_IF_ERROR(transposeBeginPads(ctx, g, &pb));
  // Input position i and tap k contribute to output position i*s - pad + k*d.
  auto table = std::make_shared<WindowTable>();
  TANDEM_RETURN_IF_ERROR(windowTable(ctx, g.inSpatial, g.outSpatial, g.kernel, g.strides,
                                     g.dilations, pb, table.get()));
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [g, table, threads](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* W = in[1]->data<T>();
      const Tensor* Bt = inputAt(in, 2);
      const T* B = Bt ? Bt->data<T>() : nullptr;
      T* Y = outs[0]->data<T>();
      const int64_t Pin = numElements(g.inSpatial), Pout = numElements(g.outSpatial);
      const int64_t K = numElements(g.kernel);
      const int64_t Cg = g.C / g.group, Mg = g.M / g.group;
      const int32_t* tab = table->data();
      const int64_t jobs = g.N * g.M;
      // One job per output channel: every scatter of a job lands in its own rows, so no races.
#pragma omp parallel num_threads(threads) if (jobs * Pin * Cg * K > 32768)
      {
        std::vector<AccOf<T>> acc(Pout);
#pragma omp for schedule(static)
        for (int64_t job = 0; job < jobs; ++job) {
          const int64_t n = job / g.M, m = job % g.M, grp = m / Mg, mi = m % Mg;
          std::fill(acc.begin(), acc.end(), AccOf<T>(B ? B[m] : T(0)));
          for (int64_t c = 0; c < Cg; ++c) {
            const int64_t cin = grp * Cg + c;
            const T* x = X + (n * g.C + cin) * Pin;
            const T* w = W + (cin * Mg + mi) * K;
            for (int64_t kk = 0; kk < K; ++kk) {
              const AccOf<T> wv = w[kk];
              const int32_t* t = tab + kk * Pin;
              for (int64_t p = 0; p < Pin; ++p)
                if (t[p] >= 0) acc[t[p]] += wv * AccOf<T>(x[p]);
            }
          }
          T* y = Y + (n * g.M + m) * Pout;
          for (int64_t p = 0; p < Pout; ++p) y[p] = T(acc[p]);
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

AcceptsFn acceptsFloatConv() {
  return [](const std::vector<DType>& in) {
    if (in.size() < 2 || !contains(floatTypes(), in[0])) return false;
    for (DType t : in)
      if (t != in[0]) return false;
    return true;
  };
}

}  // namespace

void registerConvKernels(KernelRegistry& r) {
  addRef(r, "Conv", acceptsFloatConv(), "f32,f64", createConv);
  addRef(r, "ConvTranspose", acceptsFloatConv(), "f32,f64", createConvTranspose);
}

}  // namespace ref
}  // namespace tandem
