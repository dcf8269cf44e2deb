// Reference convolution kernels: Conv-11 and ConvTranspose-11, N-D (any number of spatial dims),
// groups, strides, dilations, explicit pads and auto_pad; ConvTranspose also output_padding and
// output_shape. ConvWeightGrad (autodiff: a Conv's weight gradient). Col2Im-18 (N-D) and DeformConv-19 (2-D; the
// columns' product through the AVX2 GEMM for f32 where it runs).
#include <algorithm>

#include "runtime/cpu/avx2/Sgemm.h"
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

// The Conv's taps (outputs iterated, bounded by the input), with its begin pads from pads or
// auto_pad: shared by Conv and ConvWeightGrad.
Status convTapTable(const KernelContext& ctx, const ConvGeometry& g, std::shared_ptr<WindowTable>* table) {
  std::vector<int64_t> pb, pe;
  TANDEM_RETURN_IF_ERROR(
      windowBeginPads(ctx, g.inSpatial, g.outSpatial, g.kernel, g.strides, g.dilations, &pb, &pe));
  *table = std::make_shared<WindowTable>();
  return windowTable(ctx, g.outSpatial, g.inSpatial, g.kernel, g.strides, g.dilations, pb, table->get());
}

Status createConv(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  ConvGeometry g;
  TANDEM_RETURN_IF_ERROR(readGeometry(ctx, false, &g));
  std::shared_ptr<WindowTable> table;
  TANDEM_RETURN_IF_ERROR(convTapTable(ctx, g, &table));
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

// ---- Col2Im-18: column blocks summed back into an image (N-D) ----------------------------

// input [N, C prod(block), L] -> [N, C, image...]: row c prod(block) + k of column l (block
// position l, row-major over the positions) adds into image point pos(l) * stride - pad_begin
// + k * dilation (k, l as multi-indices); points in the padding are dropped.
Status createCol2Im(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  const Tensor* blockT = constInputAt(ctx, 2);
  if (xs.size() != 3 || ys.size() < 3) return opError(ctx, "input must be [N, C * prod(block), L]");
  const int64_t n = (int64_t)ys.size() - 2;
  if (!blockT || blockT->numel() != n || blockT->dtype() != DType::I64)
    return opError(ctx, "block_shape must be a constant i64 vector of one value per image dim "
                        "(computed at run time it is not supported)");
  const std::vector<int64_t> block(blockT->data<int64_t>(), blockT->data<int64_t>() + n);
  const auto strides = ctx.attrs->getInts("strides", std::vector<int64_t>(n, 1));
  const auto dilations = ctx.attrs->getInts("dilations", std::vector<int64_t>(n, 1));
  const auto pads = ctx.attrs->getInts("pads", std::vector<int64_t>(2 * n, 0));
  if ((int64_t)strides.size() != n || (int64_t)dilations.size() != n || (int64_t)pads.size() != 2 * n)
    return opError(ctx, "strides, dilations and pads do not match the image rank");
  const Shape image(ys.begin() + 2, ys.end());
  std::vector<int64_t> positions(n);
  int64_t taps = 1, L = 1;
  for (int64_t d = 0; d < n; ++d) {
    positions[d] = (image[d] + pads[d] + pads[d + n] - dilations[d] * (block[d] - 1) - 1) / strides[d] + 1;
    taps *= block[d];
    L *= positions[d];
  }
  if (xs[1] != ys[1] * taps || xs[2] != L)
    return opError(ctx, "input " + shapeToString(xs) + " does not hold the blocks of image " +
                            shapeToString(ys));
  const int64_t planes = ys[0] * ys[1], pixels = numElements(image);
  // Where row kk (a block offset) of column ll (a block position) lands in a plane, the same for
  // every plane: built once here; -1 in the padding.
  auto target = std::make_shared<std::vector<int64_t>>(taps * L);
  std::vector<int64_t> k(n);
  for (int64_t kk = 0; kk < taps; ++kk) {
    for (int64_t d = n - 1, r = kk; d >= 0; --d) k[d] = r % block[d], r /= block[d];
    for (int64_t ll = 0; ll < L; ++ll) {
      int64_t at = 0;
      for (int64_t d = n - 1, r = ll, stride = 1; d >= 0 && at >= 0; --d) {
        const int64_t pos = (r % positions[d]) * strides[d] - pads[d] + k[d] * dilations[d];
        r /= positions[d];
        at = pos < 0 || pos >= image[d] ? -1 : at + pos * stride;
        stride *= image[d];
      }
      (*target)[kk * L + ll] = at;
    }
  }
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      T* y = outs[0]->data<T>();
      std::fill(y, y + planes * pixels, T(0));
      const int64_t* to = target->data();
      for (int64_t p = 0; p < planes; ++p)
        for (int64_t j = 0; j < taps * L; ++j)
          if (to[j] >= 0) y[p * pixels + to[j]] += x[p * taps * L + j];
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- DeformConv-19 (2-D) -------------------------------------------------------------------

// X sampled bilinearly (zeros outside) at each tap moved by its offset, times the mask, into
// columns [C / group taps, oH oW] per image and group; then W's rows times the columns, plus B.
// offset is [N, offset_group, kH, kW, 2 (dy, dx), oH, oW], mask [N, offset_group, kH, kW, oH, oW]
// (ONNX's reference, onnx/reference/ops/op_deform_conv.py; torchvision's deform_conv2d).
Status createDeformConv(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 3) return opError(ctx, "expects inputs X, W and offset");
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ws = ctx.inputTypes[1].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  if (xs.size() != 4 || ws.size() != 4) return opError(ctx, "only 2-D DeformConv is supported");
  const int64_t group = ctx.attrs->getInt("group", 1), og = ctx.attrs->getInt("offset_group", 1);
  const int64_t N = xs[0], C = xs[1], H = xs[2], Wd = xs[3], M = ws[0], kh = ws[2], kw = ws[3];
  const int64_t oh = ys[2], ow = ys[3];
  if (group < 1 || og < 1 || C != ws[1] * group || M % group || C % og)
    return opError(ctx, "channels do not divide into group and offset_group");
  const auto strides = ctx.attrs->getInts("strides", {1, 1});
  const auto dil = ctx.attrs->getInts("dilations", {1, 1});
  const auto pads = ctx.attrs->getInts("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    return opError(ctx, "strides, dilations and pads must have 2, 2 and 4 values");
  const bool hasBias = inputPresent(ctx, 3), hasMask = inputPresent(ctx, 4);
  const int64_t taps = kh * kw, P = oh * ow, Cg = C / group, Mg = M / group, Cog = C / og;
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* Wt = in[1]->data<T>();
      const T* off = in[2]->data<T>();
      const T* bias = hasBias ? inputAt(in, 3)->data<T>() : nullptr;
      const T* mask = hasMask ? inputAt(in, 4)->data<T>() : nullptr;
      T* Y = outs[0]->data<T>();
      parallelRanges(threads, N * group, 1, [&](int64_t begin, int64_t end) {
        std::vector<T> cols(Cg * taps * P);
        const bool fast = std::is_same_v<T, float> && avx2::available();
        // The bilinear taps of one offset group (their positions and weights depend on the
        // image, the offset group, the kernel tap and the output position, not the channel):
        // per (tap, position) four corner indices (-1 outside the image) and weights, built
        // once for the channels of that group that this task reads.
        struct Sample {
          int64_t at[4];
          double w[4];
          bool inside;
        };
        std::vector<Sample> samples(taps * P);
        int64_t sampledFor = -1;
        for (int64_t task = begin; task < end; ++task) {
          const int64_t n = task / group, g = task % group;
          for (int64_t cg = 0; cg < Cg; ++cg) {
            const int64_t c = g * Cg + cg, o = c / Cog;
            if (sampledFor != n * og + o) {
              sampledFor = n * og + o;
              for (int64_t i = 0; i < kh; ++i)
                for (int64_t j = 0; j < kw; ++j) {
                  const int64_t tap = i * kw + j;
                  const T* dy = off + ((n * og + o) * taps * 2 + tap * 2) * P;
                  const T* dx = dy + P;
                  for (int64_t y = 0; y < oh; ++y)
                    for (int64_t x = 0; x < ow; ++x) {
                      const int64_t q = y * ow + x;
                      Sample& sm = samples[tap * P + q];
                      const double h = double(y * strides[0] - pads[0] + i * dil[0]) + double(dy[q]);
                      const double w = double(x * strides[1] - pads[1] + j * dil[1]) + double(dx[q]);
                      // Outside by a pixel or more (or NaN): every corner is a zero.
                      sm.inside = h > -1 && h < H && w > -1 && w < Wd;
                      if (!sm.inside) continue;
                      const double h0 = std::floor(h), w0 = std::floor(w);
                      const double fh = h - h0, fw = w - w0;
                      for (int a = 0; a < 2; ++a)
                        for (int bb = 0; bb < 2; ++bb) {
                          const int64_t hh = int64_t(h0) + a, ww = int64_t(w0) + bb;
                          const bool in = hh >= 0 && hh < H && ww >= 0 && ww < Wd;
                          sm.at[2 * a + bb] = in ? hh * Wd + ww : -1;
                          sm.w[2 * a + bb] = (a ? fh : 1 - fh) * (bb ? fw : 1 - fw);
                        }
                    }
                }
            }
            const T* plane = X + (n * C + c) * H * Wd;
            for (int64_t tap = 0; tap < taps; ++tap) {
              const T* mk = mask ? mask + ((n * og + o) * taps + tap) * P : nullptr;
              T* col = cols.data() + (cg * taps + tap) * P;
              for (int64_t q = 0; q < P; ++q) {
                const Sample& sm = samples[tap * P + q];
                if (!sm.inside) {
                  col[q] = T(0);
                  continue;
                }
                double v = 0;
                for (int k = 0; k < 4; ++k)
                  if (sm.at[k] >= 0) v += sm.w[k] * double(plane[sm.at[k]]);
                col[q] = T(mk ? v * double(mk[q]) : v);
              }
            }
          }
          const T* wg = Wt + g * Mg * Cg * taps;
          T* yg = Y + (n * M + g * Mg) * P;
          bool done = false;
          if constexpr (std::is_same_v<T, float>) {
            avx2::PackedB packed;
            if (fast && packed.pack(cols.data(), Cg * taps, P, P, 1)) {
              avx2::sgemm(Mg, wg, Cg * taps, packed, yg, P, avx2::GemmEpilogue{}, 0, packed.panels());
              if (bias)
                for (int64_t m = 0; m < Mg; ++m)
                  for (int64_t q = 0; q < P; ++q) yg[m * P + q] += bias[g * Mg + m];
              done = true;
            }
          }
          for (int64_t m = 0; m < Mg && !done; ++m) {
            std::vector<double> acc(P, bias ? double(bias[g * Mg + m]) : 0.0);
            for (int64_t kk = 0; kk < Cg * taps; ++kk) {
              const double wv = double(wg[m * Cg * taps + kk]);
              const T* col = cols.data() + kk * P;
              for (int64_t q = 0; q < P; ++q) acc[q] += wv * double(col[q]);
            }
            for (int64_t q = 0; q < P; ++q) yg[m * P + q] = T(acc[q]);
          }
        }
      });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- ConvWeightGrad (autodiff) ----------------------------------------------------------------

// dW[m, c, t] = sum_{n, p} dY[n, m, p] * X[n, g*Cg + c, tap(t, p)] over the Conv's tap table
// (outputs iterated, bounded by the input): one job per (m, c), K accumulators.
Status createConvWeightGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() != 2 || ctx.inputTypes[1].dtype != ctx.inputTypes[0].dtype)
    return opError(ctx, "expects X and dY of one dtype");
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.inputTypes[1].shape;
  const Shape& ws = ctx.outputTypes[0].shape;
  if (xs.size() < 3 || ys.size() != xs.size() || ws.size() != xs.size() || ys[0] != xs[0])
    return opError(ctx, "X " + shapeToString(xs) + ", dY " + shapeToString(ys) + " and dW " +
                            shapeToString(ws) + " do not fit a Conv");
  const size_t ns = xs.size() - 2;
  ConvGeometry g;
  g.group = ctx.attrs->getInt("group", 1);
  g.N = xs[0];
  g.C = xs[1];
  g.M = ys[1];
  g.inSpatial.assign(xs.begin() + 2, xs.end());
  g.outSpatial.assign(ys.begin() + 2, ys.end());
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "kernel_shape", ns, 1, &g.kernel));
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "strides", ns, 1, &g.strides));
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "dilations", ns, 1, &g.dilations));
  if (g.group < 1 || g.C % g.group || g.M % g.group || ws[0] != g.M || ws[1] * g.group != g.C ||
      Shape(ws.begin() + 2, ws.end()) != Shape(g.kernel.begin(), g.kernel.end()))
    return opError(ctx, "dW " + shapeToString(ws) + " is not [M, C/group, kernel_shape...]");
  std::shared_ptr<WindowTable> table;
  TANDEM_RETURN_IF_ERROR(convTapTable(ctx, g, &table));
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [g, table, threads](const Inputs& in, const Outputs& outs) -> Status {
      const T* X = in[0]->data<T>();
      const T* dY = in[1]->data<T>();
      T* dW = outs[0]->data<T>();
      const int64_t Pin = numElements(g.inSpatial), Pout = numElements(g.outSpatial);
      const int64_t K = numElements(g.kernel);
      const int64_t Cg = g.C / g.group, Mg = g.M / g.group;
      const int32_t* tab = table->data();
      const int64_t jobs = g.M * Cg;
#pragma omp parallel num_threads(threads) if (jobs * g.N * Pout * K > 32768)
      {
        std::vector<AccOf<T>> acc(K);
#pragma omp for schedule(static)
        for (int64_t job = 0; job < jobs; ++job) {
          const int64_t m = job / Cg, c = job % Cg, grp = m / Mg;
          std::fill(acc.begin(), acc.end(), AccOf<T>(0));
          for (int64_t n = 0; n < g.N; ++n) {
            const T* x = X + (n * g.C + grp * Cg + c) * Pin;
            const T* dy = dY + (n * g.M + m) * Pout;
            for (int64_t kk = 0; kk < K; ++kk) {
              const int32_t* t = tab + kk * Pout;
              AccOf<T> sum = 0;
              for (int64_t p = 0; p < Pout; ++p)
                if (t[p] >= 0) sum += AccOf<T>(dy[p]) * AccOf<T>(x[t[p]]);
              acc[kk] += sum;
            }
          }
          T* w = dW + (m * Cg + c) * K;
          for (int64_t kk = 0; kk < K; ++kk) w[kk] = T(acc[kk]);
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

}  // namespace

void registerConvKernels(KernelRegistry& r) {
  addRef(r, "ConvWeightGrad", acceptsAllSame(floatTypes()), "f32,f64", createConvWeightGrad);
  addRef(r, "Conv", acceptsFloatConv(), "f32,f64", createConv);
  addRef(r, "ConvTranspose", acceptsFloatConv(), "f32,f64", createConvTranspose);
  addRef(r, "DeformConv", acceptsAllSame(floatTypes()), "f32,f64", createDeformConv);
  addRef(
      r, "Col2Im",
      [](const std::vector<DType>& in) {
        return in.size() == 3 && contains(floatTypes(), in[0]) && in[1] == DType::I64 &&
               in[2] == DType::I64;
      },
      "input f32,f64; image_shape and block_shape i64", createCol2Im);
}

}  // namespace ref
}  // namespace tandem
