// Reference kernels of the image ops: Resize-13 (nearest, linear, cubic; every coordinate
// transformation mode; Resize-18's antialias and -19's half_pixel_symmetric), GridSample-16, RoiAlign-16, MaxUnpool-11, LRN-13,
// InstanceNormalization-6, GroupNormalization-21. Sampling ops build their per-axis tap tables
// once at creation (static shapes) and run contiguous loops over the innermost dims.
#include <cmath>
#include <memory>

#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace ref {
namespace {

// ---- Resize: separable, one pass per axis that changes ------------------------------------

// The cubic convolution weights of the four taps floor(x)-1 .. floor(x)+2 (Keys 1981, a = A).
void cubicWeights(double t, double A, double w[4]) {
  auto near = [A](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };             // |d| <= 1
  auto far = [A](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };         // 1 < |d| < 2
  w[0] = far(t + 1), w[1] = near(t), w[2] = near(1 - t), w[3] = far(2 - t);
}

Status resizeAxis(const KernelContext& ctx, int64_t n, int64_t m, double scale, double roiStart,
                  double roiEnd, ResizeAxis* a) {
  // The ONNX reference maps coordinates with the unrounded output length scale * n.
  const double mf = scale * n;
  const std::string mode = ctx.attrs->getString("mode", "nearest");
  const std::string ctm = ctx.attrs->getString("coordinate_transformation_mode", "half_pixel");
  const std::string nearest = ctx.attrs->getString("nearest_mode", "round_prefer_floor");
  const double A = ctx.attrs->getFloat("cubic_coeff_a", -0.75f);
  const bool exclude = ctx.attrs->getInt("exclude_outside", 0) != 0;
  // Resize-18 antialias, downsampling linear or cubic: the filter stretched by 1 / scale, taps
  // start .. start + taps - 1 around floor(x) (ONNX's reference: _linear_coeffs_antialias,
  // _cubic_coeffs_antialias), normalised to sum 1.
  const bool antialias = ctx.attrs->getInt("antialias", 0) != 0 && mode != "nearest" && scale < 1;
  const int64_t start = antialias ? (int64_t)std::floor((mode == "linear" ? -1.0 : -2.0) / scale) + 1 : 0;
  a->in = n, a->out = m;
  a->taps = antialias ? 2 - 2 * start : mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  a->idx.assign(m * a->taps, 0);
  a->w.assign(m * a->taps, 0);
  a->outside.assign(m, 0);
  for (int64_t j = 0; j < m; ++j) {
    double x;
    if (ctm == "half_pixel") x = (j + 0.5) / scale - 0.5;
    else if (ctm == "pytorch_half_pixel") x = mf > 1 ? (j + 0.5) / scale - 0.5 : 0;
    else if (ctm == "align_corners") x = mf == 1 ? 0 : j * double(n - 1) / (mf - 1);
    else if (ctm == "asymmetric") x = j / scale;
    else if (ctm == "tf_half_pixel_for_nn") x = (j + 0.5) / scale;
    else if (ctm == "half_pixel_symmetric")  // Resize-19: the crop's centre kept at the output's
      x = n / 2.0 * (1 - m / mf) + (j + 0.5) / scale - 0.5;
    else if (ctm == "tf_crop_and_resize") {
      x = mf > 1 ? roiStart * (n - 1) + j * (roiEnd - roiStart) * (n - 1) / (mf - 1)
                : 0.5 * (roiStart + roiEnd) * (n - 1);
      if (x < 0 || x > n - 1) a->outside[j] = 1;
    } else {
      return opError(ctx, "coordinate_transformation_mode='" + ctm + "' is not supported");
    }
    int64_t* idx = &a->idx[j * a->taps];
    double* w = &a->w[j * a->taps];
    auto clampIdx = [n](int64_t i) { return std::min<int64_t>(std::max<int64_t>(i, 0), n - 1); };
    if (antialias) {
      // ratio in (0, 1]: an integer x counts as the right end of the interval before it.
      double f = std::floor(x), t = x - f;
      if (t == 0) t = 1, f -= 1;
      double sum = 0;
      for (int64_t k = 0; k < a->taps; ++k) {
        const double d = std::fabs(scale * double(start + k - t));
        w[k] = mode == "linear" ? std::max(0.0, 1 - d)
               : d <= 1         ? ((A + 2) * d - (A + 3)) * d * d + 1
               : d < 2          ? ((A * d - 5 * A) * d + 8 * A) * d - 4 * A
                                : 0.0;
        sum += w[k];
      }
      double kept = 0;
      for (int64_t k = 0; k < a->taps; ++k) {
        const int64_t i = (int64_t)f + start + k;
        w[k] /= sum;
        if (exclude && (i < 0 || i >= n)) w[k] = 0;
        kept += w[k];
        idx[k] = clampIdx(i);
      }
      if (exclude && kept != 0)
        for (int64_t k = 0; k < a->taps; ++k) w[k] /= kept;
    } else if (a->taps == 1) {
      double r;
      if (nearest == "round_prefer_floor") r = x == std::floor(x) + 0.5 ? std::floor(x) : std::round(x);
      else if (nearest == "round_prefer_ceil") r = x == std::floor(x) + 0.5 ? std::ceil(x) : std::round(x);
      else if (nearest == "floor") r = std::floor(x);
      else if (nearest == "ceil") r = std::ceil(x);
      else return opError(ctx, "nearest_mode='" + nearest + "' is not supported");
      idx[0] = clampIdx((int64_t)r);
      w[0] = 1;
    } else if (a->taps == 2) {
      const double f = std::floor(x), t = x - f;
      idx[0] = clampIdx((int64_t)f), idx[1] = clampIdx((int64_t)f + 1);
      w[0] = 1 - t, w[1] = t;
    } else {
      const double f = std::floor(x);
      cubicWeights(x - f, A, w);
      double sum = 0;
      for (int t = 0; t < 4; ++t) {
        const int64_t i = (int64_t)f - 1 + t;
        if (exclude && (i < 0 || i >= n)) w[t] = 0;
        sum += w[t];
        idx[t] = clampIdx(i);
      }
      if (exclude && sum != 0)
        for (int t = 0; t < 4; ++t) w[t] /= sum;
    }
  }
  return Status::ok();
}

// The order of the separable passes that touches the fewest elements: a pass costs its output's
// elements times its taps, four times that on the innermost axis (a scalar loop per element;
// the others run along contiguous rows). Upsampling NCHW by 16 (segmentation heads) then
// widens the rows first, on the small input, and the long pass over the output runs along
// rows: 1.8 -> 0.35 ms for DeepLabV3's [1, 21, 16, 16] -> [1, 21, 256, 256] (Zen 5, 1 thread).
// Linear and cubic passes commute up to rounding; a crop box that leaves the input
// (tf_crop_and_resize's extrapolation) keeps the axis order. Part of the plan, so the CUDA
// kernel (runtime/cuda/Image.cpp) runs the passes in the same order and gives the same bits.
void orderResizePasses(const Shape& xs, std::vector<ResizeAxis>* axes, std::vector<size_t>* axisDim) {
  const size_t n = axes->size();
  if (n < 2 || n > 5) return;
  for (const ResizeAxis& a : *axes)
    if (std::find(a.outside.begin(), a.outside.end(), 1) != a.outside.end()) return;
  std::vector<size_t> order(n), best;
  for (size_t i = 0; i < n; ++i) order[i] = i;
  double bestCost = 0;
  do {
    Shape cur = xs;
    double cost = 0;
    for (size_t k : order) {
      const ResizeAxis& a = (*axes)[k];
      cur[(*axisDim)[k]] = a.out;
      cost += double(numElements(cur)) * double(a.taps) * ((*axisDim)[k] + 1 == xs.size() ? 4 : 1);
    }
    if (best.empty() || cost < bestCost) best = order, bestCost = cost;
  } while (std::next_permutation(order.begin(), order.end()));
  std::vector<ResizeAxis> a;
  std::vector<size_t> d;
  for (size_t k : best) a.push_back(std::move((*axes)[k])), d.push_back((*axisDim)[k]);
  *axes = std::move(a);
  *axisDim = std::move(d);
}

}  // namespace

bool ResizeAxis::identity() const {
  if (in != out || taps != 1) return false;
  for (int64_t j = 0; j < out; ++j)
    if (idx[j] != j || outside[j]) return false;
  return true;
}

Status resizePlan(const KernelContext& ctx, std::vector<ResizeAxis>* axes, std::vector<size_t>* axisDim) {
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  const size_t r = xs.size();
  if (ys.size() != r) return opError(ctx, "output rank differs from input rank");
  const std::string ctm = ctx.attrs->getString("coordinate_transformation_mode", "half_pixel");
  // Scales: the scales input (constant), else sizes / input dims. f64 scales come with sizes
  // (Tandem's form of keep_aspect_ratio_policy): the output is the sizes, X.dims * scales
  // rounded, and the coordinates map by the scales.
  std::vector<double> scale(r), roi(2 * r, 0);
  const Tensor* sc = constInputAt(ctx, 2);
  const bool hasScales = inputPresent(ctx, 2) && numElements(ctx.inputTypes[2].shape) > 0;
  if (hasScales && !sc) return opError(ctx, "input 2 (scales) must be a constant");
  const bool rounded = hasScales && sc->dtype() == DType::F64;
  if (hasScales && sc->numel() != (int64_t)r) return opError(ctx, "input 2 (scales) needs one entry per dim");
  for (size_t d = 0; d < r; ++d) {
    scale[d] = !hasScales ? double(ys[d]) / double(xs[d])
               : rounded  ? sc->data<double>()[d]
                          : (double)sc->data<float>()[d];
    if (hasScales && !rounded && (int64_t)std::floor(xs[d] * scale[d]) != ys[d])
      return opError(ctx, "scales do not give the output shape " + shapeToString(ys));
    if (rounded && !(std::fabs(xs[d] * scale[d] - ys[d]) <= 0.5 + 1e-9))
      return opError(ctx, "scales do not round to the output shape " + shapeToString(ys));
  }
  if (ctm == "tf_crop_and_resize") {
    const Tensor* roiT = constInputAt(ctx, 1);
    if (!roiT || roiT->numel() != (int64_t)(2 * r)) return opError(ctx, "tf_crop_and_resize needs a constant roi of 2 * rank values");
    for (size_t k = 0; k < 2 * r; ++k) roi[k] = roiT->dtype() == DType::F64 ? roiT->data<double>()[k] : roiT->data<float>()[k];
  }
  for (size_t d = 0; d < r; ++d) {
    ResizeAxis a;
    TANDEM_RETURN_IF_ERROR(resizeAxis(ctx, xs[d], ys[d], scale[d], roi[d], roi[r + d], &a));
    if (!a.identity()) {
      axes->push_back(std::move(a));
      axisDim->push_back(d);
    }
  }
  orderResizePasses(xs, axes, axisDim);
  return Status::ok();
}

namespace {

Status createResize(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape;
  const size_t r = xs.size();
  std::vector<ResizeAxis> axes;
  std::vector<size_t> axisDim;
  TANDEM_RETURN_IF_ERROR(resizePlan(ctx, &axes, &axisDim));
  const double extrapolation = ctx.attrs->getFloat("extrapolation_value", 0.f);
  // Nearest everywhere (no crop box outside the input): each output coordinate reads one input
  // coordinate per dim, a gather by per-dim maps (the same values as the passes below, which
  // multiply by a weight of 1).
  bool gather = true;
  for (const ResizeAxis& a : axes)
    gather &= a.taps == 1 && std::find(a.outside.begin(), a.outside.end(), 1) == a.outside.end();
  std::vector<std::vector<int64_t>> maps(r);
  for (size_t d = 0; d < r && gather; ++d) {
    maps[d].resize(xs[d]);
    for (int64_t i = 0; i < xs[d]; ++i) maps[d][i] = i;
  }
  for (size_t k = 0; k < axes.size() && gather; ++k) maps[axisDim[k]] = axes[k].idx;
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (gather) {
      fn = [maps, threads](const Inputs& in, const Outputs& outs) -> Status {
        gatherByDimMaps<T>(*in[0], *outs[0], maps, T(0), threads);
        return Status::ok();
      };
      return;
    }
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      // Pass k maps axis axisDim[k] from its in to its out extent: the first reads the input,
      // the last writes the output, passes between use two scratch buffers in turn. Each output
      // row is its first tap (weight != 0) times the source row plus the others; a zero weight
      // is skipped, so an infinite source value it would multiply does not make a NaN. The
      // innermost axis (rows of one element) has a loop of its own. Threaded over the outer
      // rows from 64K output elements.
      if (axes.empty()) {
        std::copy(in[0]->data<T>(), in[0]->data<T>() + in[0]->numel(), outs[0]->data<T>());
        return Status::ok();
      }
      Shape cur = xs;
      std::unique_ptr<T[]> scratch[2];
      const T* src = in[0]->data<T>();
      for (size_t k = 0; k < axes.size(); ++k) {
        const ResizeAxis& ax = axes[k];
        const size_t d = axisDim[k];
        const int64_t outer = product(cur, 0, d), inner = product(cur, d + 1, r);
        T* dst = outs[0]->data<T>();
        if (k + 1 < axes.size()) {
          scratch[k % 2].reset(new T[outer * ax.out * inner]);
          dst = scratch[k % 2].get();
        }
#pragma omp parallel for schedule(static) if (outer * ax.out * inner >= (int64_t{1} << 16))
        for (int64_t o = 0; o < outer; ++o) {
          const T* so = src + o * ax.in * inner;
          T* dro = dst + o * ax.out * inner;
          for (int64_t j = 0; j < ax.out; ++j) {
            const int64_t* idx = &ax.idx[j * ax.taps];
            const double* w = &ax.w[j * ax.taps];
            if (inner == 1) {
              T acc = T(0);
              for (int64_t t = 0; t < ax.taps; ++t)
                if (w[t] != 0) acc += T(w[t]) * so[idx[t]];
              dro[j] = ax.outside[j] ? T(extrapolation) : acc;
              continue;
            }
            T* row = dro + j * inner;
            bool written = false;
            for (int64_t t = 0; t < ax.taps && !ax.outside[j]; ++t) {
              if (w[t] == 0) continue;
              const T wt = T(w[t]);
              const T* sr = so + idx[t] * inner;
              if (written) {
                for (int64_t i = 0; i < inner; ++i) row[i] += wt * sr[i];
              } else {
                for (int64_t i = 0; i < inner; ++i) row[i] = wt * sr[i];
                written = true;
              }
            }
            if (!written) std::fill(row, row + inner, ax.outside[j] ? T(extrapolation) : T(0));
          }
        }
        cur[d] = ax.out;
        src = dst;
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- GridSample ----------------------------------------------------------------------------

// ONNX GridSample-16's reflection of a coordinate into [lo, hi].
double reflect(double x, double lo, double hi) {
  const double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t k = (int64_t)(dx / rng);
    const double rem = dx - k * rng;
    return k % 2 == 0 ? lo + rem : hi - rem;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t k = (int64_t)(dx / rng);
    const double rem = dx - k * rng;
    return k % 2 == 0 ? hi - rem : lo + rem;
  }
  return x;
}

Status createGridSample(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, gs = ctx.inputTypes[1].shape;
  if (xs.size() != 4 || gs.size() != 4 || gs[3] != 2) return opError(ctx, "needs 4-D X and grid [N,Ho,Wo,2]");
  const std::string mode = ctx.attrs->getString("mode", "bilinear");
  const std::string pad = ctx.attrs->getString("padding_mode", "zeros");
  const bool align = ctx.attrs->getInt("align_corners", 0) != 0;
  const int padMode = pad == "zeros" ? 0 : pad == "border" ? 1 : 2;
  const int sampler = mode == "nearest" ? 0 : mode == "bilinear" ? 1 : 2;
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], Ho = gs[1], Wo = gs[2];
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      const T* g = in[1]->data<T>();
      T* y = outs[0]->data<T>();
      auto unnorm = [&](double v, int64_t size) { return align ? (v + 1) / 2 * (size - 1) : ((v + 1) * size - 1) / 2; };
      const double loX = align ? 0 : -0.5, hiX = align ? W - 1 : W - 0.5;
      const double loY = align ? 0 : -0.5, hiY = align ? H - 1 : H - 0.5;
      // Pixel (iy, ix) of plane p under the padding mode.
      auto pixel = [&](const T* p, int64_t iy, int64_t ix) -> double {
        if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
          if (padMode == 0) return 0;
          if (padMode == 1) {
            iy = std::clamp<int64_t>(iy, 0, H - 1), ix = std::clamp<int64_t>(ix, 0, W - 1);
          } else {
            iy = std::clamp<int64_t>((int64_t)reflect(iy, loY, hiY), 0, H - 1);
            ix = std::clamp<int64_t>((int64_t)reflect(ix, loX, hiX), 0, W - 1);
          }
        }
        return p[iy * W + ix];
      };
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < Ho * Wo; ++i) {
          double fx = unnorm(g[(n * Ho * Wo + i) * 2], W), fy = unnorm(g[(n * Ho * Wo + i) * 2 + 1], H);
          if (padMode == 1) {
            fx = std::clamp<double>(fx, 0, W - 1), fy = std::clamp<double>(fy, 0, H - 1);
          } else if (padMode == 2) {
            fx = reflect(fx, loX, hiX), fy = reflect(fy, loY, hiY);
          }
          for (int64_t c = 0; c < C; ++c) {
            const T* p = x + (n * C + c) * H * W;
            double v = 0;
            if (sampler == 0) {
              v = pixel(p, (int64_t)std::nearbyint(fy), (int64_t)std::nearbyint(fx));
            } else if (sampler == 1) {
              const double x0 = std::floor(fx), y0 = std::floor(fy), tx = fx - x0, ty = fy - y0;
              const int64_t ix = (int64_t)x0, iy = (int64_t)y0;
              v = (1 - ty) * ((1 - tx) * pixel(p, iy, ix) + tx * pixel(p, iy, ix + 1)) +
                  ty * ((1 - tx) * pixel(p, iy + 1, ix) + tx * pixel(p, iy + 1, ix + 1));
            } else {
              const double x0 = std::floor(fx), y0 = std::floor(fy);
              double wx[4], wy[4];
              cubicWeights(fx - x0, -0.75, wx);
              cubicWeights(fy - y0, -0.75, wy);
              for (int a = 0; a < 4; ++a) {
                double row = 0;
                for (int b = 0; b < 4; ++b) row += wx[b] * pixel(p, (int64_t)y0 - 1 + a, (int64_t)x0 - 1 + b);
                v += wy[a] * row;
              }
            }
            y[((n * C + c) * Ho * Wo) + i] = T(v);
          }
        }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- RoiAlign (bilinear samples as ONNX Runtime's RoiAlign, which the ONNX reference follows)

// One bilinear sample of a RoI bin: X's four neighbour offsets (within a channel) and weights;
// `valid` false outside [-1, H] x [-1, W] (the sample is 0). The same for every channel, so it
// is computed once per RoI (as ONNX Runtime's pre_calc), then applied channel by channel.
struct RoiSample {
  int64_t at[4];
  double w[4];
  bool valid;
};

Status createRoiAlign(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  if (xs.size() != 4 || ys.size() != 4) return opError(ctx, "needs 4-D X and output");
  const bool maxMode = ctx.attrs->getString("mode", "avg") == "max";
  const bool halfPixel = ctx.attrs->getString("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const int64_t ratio = ctx.attrs->getInt("sampling_ratio", 0);
  const double spatial = ctx.attrs->getFloat("spatial_scale", 1.f);
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
  const int threads = std::max(1, ctx.threads);
  const OpName name(ctx);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      const T* rois = in[1]->data<T>();
      const int64_t* bi = in[2]->data<int64_t>();
      T* y = outs[0]->data<T>();
      const int64_t R = outs[0]->shape()[0];
      for (int64_t r = 0; r < R; ++r)
        if (bi[r] < 0 || bi[r] >= N)
          return opError(name, "batch index " + std::to_string(bi[r]) + " is out of range");
#pragma omp parallel num_threads(threads) if (R * C * OH * OW > 16384)
      {
        std::vector<RoiSample> samples;
#pragma omp for schedule(dynamic)
        for (int64_t r = 0; r < R; ++r) {
          const double off = halfPixel ? 0.5 : 0;
          const double x1 = rois[r * 4] * spatial - off, y1 = rois[r * 4 + 1] * spatial - off;
          const double x2 = rois[r * 4 + 2] * spatial - off, y2 = rois[r * 4 + 3] * spatial - off;
          double rw = x2 - x1, rh = y2 - y1;
          if (!halfPixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
          const double bh = rh / OH, bw = rw / OW;
          const int64_t gh = ratio > 0 ? ratio : (int64_t)std::ceil(rh / OH);
          const int64_t gw = ratio > 0 ? ratio : (int64_t)std::ceil(rw / OW);
          const double count = std::max<int64_t>(gh * gw, 1);
          // Samples of bin (ph, pw) at [(ph * OW + pw) * gh * gw, + gh * gw).
          samples.clear();
          for (int64_t ph = 0; ph < OH; ++ph)
            for (int64_t pw = 0; pw < OW; ++pw)
              for (int64_t iy = 0; iy < gh; ++iy)
                for (int64_t ix = 0; ix < gw; ++ix) {
                  double yy = y1 + ph * bh + (iy + 0.5) * bh / gh;
                  double xx = x1 + pw * bw + (ix + 0.5) * bw / gw;
                  RoiSample sm{};
                  sm.valid = !(yy < -1.0 || yy > H || xx < -1.0 || xx > W);
                  if (sm.valid) {
                    yy = std::max(yy, 0.0), xx = std::max(xx, 0.0);
                    int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
                    if (yl >= H - 1) yh = yl = H - 1, yy = (double)yl; else yh = yl + 1;
                    if (xl >= W - 1) xh = xl = W - 1, xx = (double)xl; else xh = xl + 1;
                    const double ly = yy - yl, lx = xx - xl, hy = 1 - ly, hx = 1 - lx;
                    sm.at[0] = yl * W + xl, sm.at[1] = yl * W + xh;
                    sm.at[2] = yh * W + xl, sm.at[3] = yh * W + xh;
                    sm.w[0] = hy * hx, sm.w[1] = hy * lx, sm.w[2] = ly * hx, sm.w[3] = ly * lx;
                  }
                  samples.push_back(sm);
                }
          const int64_t per = gh * gw;
          for (int64_t c = 0; c < C; ++c) {
            const T* p = x + (bi[r] * C + c) * H * W;
            T* yc = y + (r * C + c) * OH * OW;
            for (int64_t bin = 0; bin < OH * OW; ++bin) {
              const RoiSample* sb = samples.data() + bin * per;
              double acc = 0;
              for (int64_t k = 0; k < per; ++k) {
                const RoiSample& sm = sb[k];
                double v = 0;
                if (sm.valid) {
                  const double t0 = sm.w[0] * p[sm.at[0]], t1 = sm.w[1] * p[sm.at[1]];
                  const double t2 = sm.w[2] * p[sm.at[2]], t3 = sm.w[3] * p[sm.at[3]];
                  v = maxMode ? std::max(std::max(t0, t1), std::max(t2, t3)) : t0 + t1 + t2 + t3;
                }
                if (maxMode) acc = k == 0 ? v : std::max(acc, v);
                else acc += v;
              }
              yc[bin] = T(maxMode ? acc : acc / count);
            }
          }
        }
      }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

// ---- MaxUnpool: y.flat[I] = X, zeros elsewhere -------------------------------------------

Status createMaxUnpool(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  if (ctx.inputTypes[1].shape != xs || ys.size() != xs.size() || xs.size() < 3)
    return opError(ctx, "I must have X's shape [N, C, spatial...] and the output X's rank");
  // The indices are flat offsets into the default result ((in - 1) * stride + kernel - pads);
  // a larger output_shape keeps each element's coordinates (ONNX MaxUnpool-11 reference).
  const size_t n = xs.size() - 2;
  std::vector<int64_t> k, st, pads;
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "kernel_shape", n, 1, &k));
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "strides", n, 1, &st));
  TANDEM_RETURN_IF_ERROR(intsAttr(ctx, "pads", 2 * n, 0, &pads));
  Shape def = xs;
  for (size_t d = 0; d < n; ++d) def[d + 2] = (xs[d + 2] - 1) * st[d] + k[d] - pads[d] - pads[d + n];
  for (size_t d = 0; d < ys.size(); ++d)
    if (def[d] > ys[d]) return opError(ctx, "output_shape " + shapeToString(ys) + " is smaller than " + shapeToString(def));
  const int64_t total = numElements(ys), defTotal = numElements(def);
  const std::vector<int64_t> defSt = rowMajorStrides(def), ySt = rowMajorStrides(ys);
  const OpName name(ctx);
  RunFn fn;
  dispatchBySize(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      const int64_t* idx = in[1]->data<int64_t>();
      T* y = outs[0]->data<T>();
      std::fill(y, y + total, T(0));
      for (int64_t i = 0, e = in[0]->numel(); i < e; ++i) {
        int64_t v = idx[i], off = 0;
        if (v < 0 || v >= defTotal) return opError(name, "index " + std::to_string(v) + " is outside the output");
        for (size_t d = 0; d < def.size(); ++d) {
          off += (v / defSt[d]) * ySt[d];
          v %= defSt[d];
        }
        y[off] = x[i];
      }
      return Status::ok();
    };
  });
  return makeKernel(out, std::move(fn));
}

// ---- LRN and InstanceNormalization -------------------------------------------------------

Status createLRN(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape;
  const int64_t size = ctx.attrs->getInt("size", 0);
  if (size < 1 || xs.size() < 3) return opError(ctx, "needs attribute size >= 1 and X [N, C, ...]");
  const double alpha = ctx.attrs->getFloat("alpha", 1e-4f), beta = ctx.attrs->getFloat("beta", 0.75f);
  const double bias = ctx.attrs->getFloat("bias", 1.f);
  const int64_t N = xs[0], C = xs[1], S = product(xs, 2, xs.size());
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;  // channels c-lo .. c+hi
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      T* y = outs[0]->data<T>();
      std::vector<double> sq(S);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) {
          std::fill(sq.begin(), sq.end(), 0.0);
          for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(C - 1, c + hi); ++k) {
            const T* p = x + (n * C + k) * S;
            for (int64_t s = 0; s < S; ++s) sq[s] += double(p[s]) * p[s];
          }
          const T* p = x + (n * C + c) * S;
          T* q = y + (n * C + c) * S;
          for (int64_t s = 0; s < S; ++s) q[s] = T(p[s] / std::pow(bias + alpha / size * sq[s], beta));
        }
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

/// InstanceNormalization-6 and GroupNormalization-21: each (n, group) of C / groups channels is
/// one contiguous block; its mean and variance in double (two passes, sums over 8 independent
/// f64 lanes, which vectorise), then each channel's k = scale / sqrt(var + eps),
/// b = bias - mean * k and y = x * k + b. InstanceNormalization is the case groups = C. Blocks
/// in parallel. f32 plans run the oneDNN-side kernel instead (runtime/cpu/dnnl/DnnlNorm.cpp,
/// avx2::groupNorm, any activation layout); this one serves the other float types.
Status createGroupedNorm(const KernelContext& ctx, int64_t groups, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape;
  const int64_t N = xs[0], C = xs[1], S = product(xs, 2, xs.size()), G = groups, Cg = C / G;
  const int64_t block = Cg * S;
  const double eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  const int threads = std::max(1, ctx.threads);
  RunFn fn;
  dispatchFloat(ctx.inputTypes[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    fn = [=](const Inputs& in, const Outputs& outs) -> Status {
      const T* x = in[0]->data<T>();
      const T* scale = in[1]->data<T>();
      const T* bias = in[2]->data<T>();
      T* y = outs[0]->data<T>();
      parallelRanges(threads, N * G, std::max<int64_t>(1, kStreamGrain / std::max<int64_t>(1, block)),
                     [&](int64_t b0, int64_t e0) {
        for (int64_t ng = b0; ng < e0; ++ng) {
          const T* p = x + ng * block;
          T* q = y + ng * block;
          const int64_t c0 = (ng % G) * Cg;
          if (block == 0) continue;
          auto sum8 = [&](auto&& f) {
            double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t i = 0;
            for (; i + 8 <= block; i += 8)
              for (int j = 0; j < 8; ++j) acc[j] += f(double(p[i + j]));
            double total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            for (; i < block; ++i) total += f(double(p[i]));
            return total;
          };
          const double mean = sum8([](double v) { return v; }) / double(block);
          const double var = sum8([mean](double v) { return (v - mean) * (v - mean); }) / double(block);
          for (int64_t j = 0; j < Cg; ++j) {
            const double k = double(scale[c0 + j]) / std::sqrt(var + eps);
            const double b = double(bias[c0 + j]) - mean * k;
            for (int64_t s = 0; s < S; ++s) q[j * S + s] = T(double(p[j * S + s]) * k + b);
          }
        }
      });
      return Status::ok();
    };
  });
  if (!fn) return opError(ctx, "unsupported dtype");
  return makeKernel(out, std::move(fn));
}

Status createInstanceNorm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape;
  if (xs.size() < 3 || numElements(ctx.inputTypes[1].shape) != xs[1] || numElements(ctx.inputTypes[2].shape) != xs[1])
    return opError(ctx, "needs input [N, C, ...] and scale, B of [C]");
  return createGroupedNorm(ctx, std::max<int64_t>(1, xs[1]), out);
}

Status createGroupNorm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape xs = ctx.inputTypes[0].shape;
  const int64_t G = ctx.attrs->getInt("num_groups", 0);
  if (xs.size() < 2 || G < 1 || xs[1] % G != 0 || numElements(ctx.inputTypes[1].shape) != xs[1] ||
      numElements(ctx.inputTypes[2].shape) != xs[1])
    return opError(ctx, "needs X [N, C, ...], scale and bias of [C] and num_groups dividing C");
  return createGroupedNorm(ctx, G, out);
}

}  // namespace

void registerImageKernels(KernelRegistry& r) {
  const std::string floats = dtypesToText(floatTypes());
  addRef(r, "Resize", floatTypes(), createResize);
  addRef(r, "GridSample", acceptsAllSame(floatTypes()), floats, createGridSample);
  addRef(r, "RoiAlign", floatTypes(), createRoiAlign);
  addRef(r, "MaxUnpool", allTypes(), createMaxUnpool);
  addRef(r, "LRN", floatTypes(), createLRN);
  addRef(r, "InstanceNormalization", acceptsAllSame(floatTypes()), floats, createInstanceNorm);
  addRef(r, "GroupNormalization", acceptsAllSame(floatTypes()), floats, createGroupNorm);
}

}  // namespace ref
}  // namespace tandem
