// Split (ONNX Split-13/-18) along the channel axis of [N, C, spatial...] f32 activations kept in
// the host's layout (input/output_layouts), so a YOLO C2f or CSP block's convolutions around its
// Split skip their reorders: DnnlConcat.cpp's copy the other way. Plain splits stay with the
// reference kernel.
#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

// A channel split of a rank 4-5 f32 value with at least one side in the host layout; the
// outputs' channel counts (from their shapes) add up to the input's.
bool splitSupported(const KernelContext& ctx) {
  if (ctx.inputTypes.empty() || ctx.outputTypes.empty() || hasEmptyTensor(ctx)) return false;
  const TensorType& x = ctx.inputTypes[0];
  int64_t axis;
  if (x.dtype != DType::F32 || x.shape.size() < 4 || x.shape.size() > 5 ||
      !normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)x.shape.size(), &axis) || axis != 1)
    return false;
  int64_t c = 0;
  bool anyBlocked = isBlocked(ctx, true, 0);
  for (size_t i = 0; i < ctx.outputTypes.size(); ++i) {
    const TensorType& t = ctx.outputTypes[i];
    if (t.dtype != DType::F32 || t.shape.size() != x.shape.size()) return false;
    for (size_t d = 0; d < x.shape.size(); ++d)
      if (d != 1 && t.shape[d] != x.shape[d]) return false;
    c += t.shape[1];
    anyBlocked |= isBlocked(ctx, false, i);
  }
  return c == x.shape[1] && anyBlocked;
}

/// Every value in one layout where each output is one contiguous chunk per outer index: plain
/// and nChw8c / nChw16c (outer N, chunk C_i * S: each C_i a whole number of blocks, as
/// isBlocked() guarantees) and nhwc (outer N * S, chunk C_i). Otherwise the values meet in
/// plain layout: a blocked input is reordered into the workspace, the plain split written there
/// for the blocked outputs, and reordered into them.
class SplitKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    const Shape& x = ctx.inputTypes[0].shape;
    int64_t S = 1;
    for (size_t d = 2; d < x.size(); ++d) S *= x[d];
    const bool inBlocked = isBlocked(ctx, true, 0);
    bool uniform = true;
    for (size_t i = 0; i < ctx.outputTypes.size(); ++i) uniform &= isBlocked(ctx, false, i) == inBlocked;
    const bool nhwcChunks = uniform && inBlocked && std::string(activationLayoutName()) == "nhwc";
    outer_ = nhwcChunks ? x[0] * S : x[0];
    for (const TensorType& t : ctx.outputTypes) {
      chunkOffsets_.push_back(rowElems_);
      chunks_.push_back(nhwcChunks ? t.shape[1] : t.shape[1] * S);
      rowElems_ += chunks_.back();
    }
    threads_ = std::max(1, ctx.threads);
    impl_ = std::string("dnnl:split-copy:") + (uniform && inBlocked ? activationLayoutName() : "nchw");
    if (uniform) return Status::ok();
    if (inBlocked) in_.init(toDims(x), /*input=*/true, &ws_);
    std::string moved = inBlocked ? "src" : "";
    outs_.resize(ctx.outputTypes.size());
    for (size_t i = 0; i < ctx.outputTypes.size(); ++i)
      if (isBlocked(ctx, false, i)) {
        outs_[i].init(toDims(ctx.outputTypes[i].shape), /*input=*/false, &ws_);
        moved += (moved.empty() ? "dst" : ",dst") + std::to_string(i);
      }
    impl_ += " reorders[" + moved + "]";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("Split", [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      const float* x = in[0]->data<float>();
      if (in_.used()) {
        in_.reorder(ws, in[0]->raw());
        x = in_.plain(ws);
      }
      std::vector<float*> dst(out.size());
      for (size_t i = 0; i < out.size(); ++i)
        dst[i] = i < outs_.size() && outs_[i].used() ? outs_[i].plain(ws) : out[i]->data<float>();
      copyChunks(x, dst);
      for (size_t i = 0; i < outs_.size(); ++i)
        if (outs_[i].used()) outs_[i].reorder(ws, out[i]->raw());
      return Status::ok();
    });
  }

 private:
  /// dst_i[o][..] = x[o][offset_i ..] for every outer index o and output i, split over the
  /// step's threads when there is enough to copy.
  void copyChunks(const float* x, const std::vector<float*>& dst) const {
    const int64_t k = (int64_t)dst.size();
    const bool parallel = threads_ > 1 && outer_ * rowElems_ * (int64_t)sizeof(float) >= kParallelBytes;
#pragma omp parallel for collapse(2) num_threads(threads_) if (parallel) schedule(static)
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t i = 0; i < k; ++i)
        std::memcpy(dst[i] + o * chunks_[i], x + o * rowElems_ + chunkOffsets_[i],
                    chunks_[i] * sizeof(float));
  }

  // Below this many bytes a second thread costs more to wake than it saves (as DnnlConcat).
  static constexpr int64_t kParallelBytes = 256 * 1024;
  int64_t outer_ = 0;
  std::vector<int64_t> chunks_;        // elements of output i per outer index
  std::vector<int64_t> chunkOffsets_;  // where output i's chunk starts in an input row
  int64_t rowElems_ = 0;               // elements of one input row (the chunks' sum)
  int threads_ = 1;
  WorkspaceLayout ws_;
  PlainStaging in_;
  std::vector<PlainStaging> outs_;
};

}  // namespace

void registerDnnlSplitKernels(KernelRegistry& r) {
  KernelDef d = makeDef("Split", splitSupported, [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    return guardDnnl(ctx, [&] {
      auto k = std::make_unique<SplitKernel>();
      TANDEM_RETURN_IF_ERROR(k->init(ctx));
      *out = std::move(k);
      return Status::ok();
    });
  });
  // Split-13's optional second input (the sizes) is i64: the first input decides.
  d.accepts = [](const std::vector<DType>& dts) { return !dts.empty() && dts[0] == DType::F32; };
  d.dtypesText = "f32 (channel split in the host layout)";
  r.add(std::move(d));
}

}  // namespace dnnlcpu
}  // namespace tandem
