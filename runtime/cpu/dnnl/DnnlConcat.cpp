// Concat (ONNX Concat-13) along the channel axis of [N, C, spatial...] f32 activations kept in
// the host's layout (input/output_layouts), so the convolutions around an Inception or DenseNet
// concatenation skip their reorders. Plain concatenations stay with the reference kernel.
#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

bool anyLayoutBlocked(const KernelContext& ctx) {
  for (size_t i = 0; i < ctx.inputTypes.size(); ++i)
    if (isBlocked(ctx, true, i)) return true;
  return isBlocked(ctx, false, 0);
}

// Channel concatenation of rank 3-5 f32 values with at least one side in the host layout.
bool concatSupported(const KernelContext& ctx) {
  if (ctx.outputTypes.size() != 1 || ctx.inputTypes.empty() || hasEmptyTensor(ctx)) return false;
  const Shape& y = ctx.outputTypes[0].shape;
  int64_t axis;
  if (y.size() < 3 || y.size() > 5 || !normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)y.size(), &axis) ||
      axis != 1)
    return false;
  int64_t c = 0;
  for (const TensorType& t : ctx.inputTypes) {
    if (!t.present() || t.dtype != DType::F32 || t.shape.size() != y.size()) return false;
    for (size_t d = 0; d < y.size(); ++d)
      if (d != 1 && t.shape[d] != y[d]) return false;
    c += t.shape[1];
  }
  return c == y[1] && anyLayoutBlocked(ctx);
}

/// Every value, inputs and output, in one layout where each input is one contiguous chunk per
/// outer index: plain (outer N, chunk C_i * S), nChw8c / nChw16c (the same: each C_i is a whole
/// number of blocks, as isBlocked() guarantees) and nhwc (outer N * S, chunk C_i). Otherwise the
/// values meet in plain layout: blocked inputs are reordered into the workspace, the plain
/// concatenation written there, and reordered into a blocked output.
class ConcatKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    const Shape& y = ctx.outputTypes[0].shape;
    const dims yd = toDims(y);
    int64_t S = 1;
    for (size_t d = 2; d < y.size(); ++d) S *= y[d];
    const bool outBlocked = isBlocked(ctx, false, 0);
    bool uniform = true;
    for (size_t i = 0; i < ctx.inputTypes.size(); ++i) uniform &= isBlocked(ctx, true, i) == outBlocked;
    const bool channelsLast = std::string(activationLayoutName()) == "nhwc";
    // Chunks in the common layout (plain when the values do not share one).
    const bool nhwcChunks = uniform && outBlocked && channelsLast;
    outer_ = nhwcChunks ? y[0] * S : y[0];
    for (const TensorType& t : ctx.inputTypes) {
      chunkOffsets_.push_back(rowElems_);
      chunks_.push_back(nhwcChunks ? t.shape[1] : t.shape[1] * S);
      rowElems_ += chunks_.back();
    }
    threads_ = std::max(1, ctx.threads);
    // "dnnl:" as every kernel of this family that reads the plan's layouts; the copy is ours.
    impl_ = std::string("dnnl:concat-copy:") + (uniform && outBlocked ? activationLayoutName() : "nchw");
    if (uniform) return Status::ok();
    ins_.resize(ctx.inputTypes.size());
    for (size_t i = 0; i < ctx.inputTypes.size(); ++i)
      if (isBlocked(ctx, true, i)) ins_[i].init(toDims(ctx.inputTypes[i].shape), /*input=*/true, &ws_);
    if (outBlocked) out_.init(yd, /*input=*/false, &ws_);
    std::string moved;
    for (size_t i = 0; i < ins_.size(); ++i)
      if (ins_[i].used()) moved += (moved.empty() ? "src" : ",src") + std::to_string(i);
    if (outBlocked) moved += moved.empty() ? "dst" : ",dst";
    impl_ += " reorders[" + moved + "]";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("Concat", [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      std::vector<const float*> src(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        src[i] = in[i]->data<float>();
        if (i < ins_.size() && ins_[i].used()) {
          ins_[i].reorder(ws, in[i]->raw());
          src[i] = ins_[i].plain(ws);
        }
      }
      float* y = out_.used() ? out_.plain(ws) : out[0]->data<float>();
      copyChunks(src, y);
      if (out_.used()) out_.reorder(ws, out[0]->raw());
      return Status::ok();
    });
  }

 private:
  /// y[o][offset_i ..] = src_i[o][..] for every outer index o and input i. The (o, i) copies
  /// are split over the step's threads when there is enough to copy: DenseNet's channel
  /// Concats move 0.4-100 MB at batch 32, in chunks of 32-1024 channels per pixel (nhwc), and
  /// were single-threaded, ~10% of the model's time at batch 32.
  void copyChunks(const std::vector<const float*>& src, float* y) const {
    const int64_t k = (int64_t)src.size();
    const bool parallel = threads_ > 1 && outer_ * rowElems_ * (int64_t)sizeof(float) >= kParallelBytes;
#pragma omp parallel for collapse(2) num_threads(threads_) if (parallel) schedule(static)
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t i = 0; i < k; ++i)
        std::memcpy(y + o * rowElems_ + chunkOffsets_[i], src[i] + o * chunks_[i],
                    chunks_[i] * sizeof(float));
  }

  // Below this many output bytes a second thread costs more to wake than it saves.
  static constexpr int64_t kParallelBytes = 256 * 1024;
  int64_t outer_ = 0;
  std::vector<int64_t> chunks_;        // elements of input i per outer index
  std::vector<int64_t> chunkOffsets_;  // where input i's chunk starts in an output row
  int64_t rowElems_ = 0;               // elements of one output row (the chunks' sum)
  int threads_ = 1;
  WorkspaceLayout ws_;
  std::vector<PlainStaging> ins_;
  PlainStaging out_;
};

}  // namespace

void registerDnnlConcatKernels(KernelRegistry& r) {
  r.add(makeDef("Concat", concatSupported, [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    return guardDnnl(ctx, [&] {
      auto k = std::make_unique<ConcatKernel>();
      TANDEM_RETURN_IF_ERROR(k->init(ctx));
      *out = std::move(k);
      return Status::ok();
    });
  }));
}

}  // namespace dnnlcpu
}  // namespace tandem
