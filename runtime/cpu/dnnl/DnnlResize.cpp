// Resize-13 nearest (every nearest_mode and coordinate transformation but tf_crop_and_resize) of
// f32 [N, C, spatial...] activations (rank 4 or 5, N and C unchanged) kept in the host's layout
// on either side (input/output_layouts), so a U-Net's or FPN's upsampling between convolutions
// skips two reorders. A gather of whole pixels by the reference kernel's per-axis maps
// (ref::resizePlan: the same source pixel for every output pixel). Plain resizes stay with the
// reference kernel.
#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/cpu/dnnl/DnnlCommon.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

bool resizeSupported(const KernelContext& ctx) {
  if (ctx.outputTypes.size() != 1 || ctx.inputTypes.empty() || hasEmptyTensor(ctx)) return false;
  const Shape &x = ctx.inputTypes[0].shape, &y = ctx.outputTypes[0].shape;
  if (x.size() < 4 || x.size() > 5 || y.size() != x.size() || x[0] != y[0] || x[1] != y[1])
    return false;
  if (ctx.attrs->getString("mode", "nearest") != "nearest" ||
      ctx.attrs->getString("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize")
    return false;
  return isBlocked(ctx, true, 0) || isBlocked(ctx, false, 0);
}

/// The gather runs in the input's layout: `period` floats a pixel (channels-last: C; nChw8c /
/// nChw16c: 8 / 16 per channel block; plain: 1) in `planes` planes (N; N * C / block; N * C).
/// Output rows (every spatial dim but the last) that read the same input row are copied from
/// the first of them. Where the output's layout differs, a oneDNN reorder writes it from the
/// thread workspace.
class ResizeNearestKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    std::vector<ref::ResizeAxis> axes;
    std::vector<size_t> axisDim;
    TANDEM_RETURN_IF_ERROR(ref::resizePlan(ctx, &axes, &axisDim));
    const Shape &x = ctx.inputTypes[0].shape, &y = ctx.outputTypes[0].shape;
    const size_t r = x.size();
    std::vector<std::vector<int64_t>> maps(r);
    for (size_t d = 2; d < r; ++d) {
      maps[d].resize(y[d]);
      for (int64_t i = 0; i < y[d]; ++i) maps[d][i] = i;
    }
    for (size_t k = 0; k < axes.size(); ++k) {
      const ref::ResizeAxis& a = axes[k];
      if (axisDim[k] < 2 || a.taps != 1 ||
          std::find(a.outside.begin(), a.outside.end(), 1) != a.outside.end())
        return Status::error("Resize: only nearest sampling of the spatial dims runs in the host layout");
      maps[axisDim[k]] = a.idx;
    }
    const bool inBlocked = isBlocked(ctx, true, 0), outBlocked = isBlocked(ctx, false, 0);
    const std::string host = activationLayoutName();
    const int64_t C = x[1];
    if (!inBlocked) period_ = 1;
    else if (host == "nhwc") period_ = C;
    else period_ = host == "nChw16c" ? 16 : 8;
    planes_ = x[0] * (C / period_);
    colsIn_ = x[r - 1];
    colsOut_ = y[r - 1];
    cols_ = maps[r - 1];
    // Output row -> input row over the outer spatial dims (H; or D, H).
    rowsIn_ = 1;
    int64_t rowsOut = 1;
    for (size_t d = 2; d + 1 < r; ++d) {
      rowsIn_ *= x[d];
      rowsOut *= y[d];
    }
    rows_.assign(rowsOut, 0);
    for (int64_t o = 0; o < rowsOut; ++o) {
      int64_t rest = o, in = 0, strideIn = 1;
      for (size_t d = r - 2; d >= 2; --d) {
        in += maps[d][rest % y[d]] * strideIn;
        strideIn *= x[d];
        rest /= y[d];
      }
      rows_[o] = in;
    }
    // Runs of output rows reading one input row: the gather's units of work.
    for (int64_t o = 0; o < rowsOut; ++o)
      if (o == 0 || rows_[o] != rows_[o - 1]) runStarts_.push_back(o);
    runStarts_.push_back(rowsOut);
    threads_ = std::max(1, ctx.threads);
    impl_ = std::string("dnnl:resize-nearest:") + (inBlocked ? host : "nchw");
    if (dst_.init(toDims(y), inBlocked, outBlocked)) impl_ += " reorders[dst]";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("Resize", [&] {
      float* y = dst_.target(out[0]);
      gather(in[0]->data<float>(), y);
      dst_.finish(y, out[0]);
      return Status::ok();
    });
  }

 private:
  void gather(const float* x, float* y) const {
    const int64_t runs = (int64_t)runStarts_.size() - 1, P = period_;
    const int64_t rowIn = colsIn_ * P, rowOut = colsOut_ * P;
    const int64_t planeIn = rowsIn_ * rowIn, planeOut = (int64_t)rows_.size() * rowOut;
    const int64_t units = planes_ * runs;
    const int nt = planes_ * planeOut >= 16384 ? threads_ : 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t p = u / runs, k = u % runs;
      const int64_t o0 = runStarts_[k], o1 = runStarts_[k + 1];
      const float* src = x + p * planeIn + rows_[o0] * rowIn;
      float* dst = y + p * planeOut + o0 * rowOut;
      if (P == 1) {
        for (int64_t j = 0; j < colsOut_; ++j) dst[j] = src[cols_[j]];
      } else if (P == 8) {
        for (int64_t j = 0; j < colsOut_; ++j) std::memcpy(dst + j * 8, src + cols_[j] * 8, 8 * sizeof(float));
      } else if (P == 16) {
        for (int64_t j = 0; j < colsOut_; ++j) std::memcpy(dst + j * 16, src + cols_[j] * 16, 16 * sizeof(float));
      } else {
        for (int64_t j = 0; j < colsOut_; ++j) std::memcpy(dst + j * P, src + cols_[j] * P, P * sizeof(float));
      }
      for (int64_t o = o0 + 1; o < o1; ++o) std::memcpy(dst + (o - o0) * rowOut, dst, rowOut * sizeof(float));
    }
  }

  int64_t period_ = 1, planes_ = 0, colsIn_ = 0, colsOut_ = 0, rowsIn_ = 0;
  std::vector<int64_t> cols_;       // output column -> input column
  std::vector<int64_t> rows_;       // output row -> input row (outer spatial dims flattened)
  std::vector<int64_t> runStarts_;  // first output row of each run reading one input row, then the end
  int threads_ = 1;
  OutputReorder dst_;
};

}  // namespace

void registerDnnlResizeKernels(KernelRegistry& r) {
  KernelDef d = makeDef("Resize", resizeSupported, [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    return guardDnnl(ctx, [&] {
      auto k = std::make_unique<ResizeNearestKernel>();
      TANDEM_RETURN_IF_ERROR(k->init(ctx));
      *out = std::move(k);
      return Status::ok();
    });
  });
  // Resize's inputs (roi, scales, sizes) are not all f32: the first one decides.
  d.accepts = [](const std::vector<DType>& dts) { return !dts.empty() && dts[0] == DType::F32; };
  d.dtypesText = "f32 (nearest, in the host layout)";
  r.add(std::move(d));
}

}  // namespace dnnlcpu
}  // namespace tandem
