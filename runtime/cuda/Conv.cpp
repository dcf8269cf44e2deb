// Conv-11, ConvTranspose-11 and Tandem's ConvWeightGrad (autodiff) through cuDNN (legacy convolution API, NCHW FP32, FMA math so
// results match the CPU within FP32 rounding): 1-D (as 2-D with a unit dim), 2-D and 3-D, groups,
// strides, dilations. cuDNN pads symmetrically: a Conv whose begin and end pads differ
// (SAME_UPPER with stride 2, explicit asymmetric pads) first zero-pads X into a plan-lifetime
// buffer with the generated index-map gather, then convolves it unpadded. ConvTranspose pads
// must fit cuDNN's symmetric form (else an error naming the pads). Algorithm and workspace are
// chosen once at load: cuDNN's best ranked algorithm whose workspace fits cudnnWorkspaceCap
// (runtime/cuda/Choices.h), so a fast algorithm's hundreds of MB cannot break
// --gpu-memory-fraction; bias by cudnnAddTensor. ConvWeightGrad is cuDNN's backward-filter
// convolution of X and dY (X zero-padded first for asymmetric pads, as a Conv's).
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Choices.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

std::vector<int> toInts(const Shape& s) { return std::vector<int>(s.begin(), s.end()); }

// Forward: Conv; BackwardData: ConvTranspose; BackwardFilter: ConvWeightGrad.
enum class ConvMode { Forward, BackwardData, BackwardFilter };

class CudnnConvKernel : public GeneratedKernel {
 public:
  CudnnConvKernel(DeviceContext* dc, ConvMode mode)
      : GeneratedKernel(dc), mode_(mode), transpose_(mode == ConvMode::BackwardData) {}
  ~CudnnConvKernel() override {
    for (auto d : {x_, y_, b_}) if (d) cudnnDestroyTensorDescriptor(d);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
  }
  std::string implName() const override {
    const char* base = mode_ == ConvMode::BackwardData     ? "cudnn:bwd-data"
                       : mode_ == ConvMode::BackwardFilter ? "cudnn:bwd-filter"
                                                           : "cudnn";
    return prepad_ ? std::string("nvrtc-pad+") + base : std::string(base);
  }

  // Zero-pads X (shape xs, begin pads pb, end pads pe per spatial dim) into a buffer of this
  // plan; returns the padded shape. Index maps as Pad's constant mode.
  Status usePrepad(const KernelContext& ctx, const Shape& xs, const std::vector<int64_t>& pb,
                   const std::vector<int64_t>& pe, Shape* padded) {
    *padded = xs;
    for (size_t i = 0; i < pb.size(); ++i) (*padded)[i + 2] += pb[i] + pe[i];
    TANDEM_RETURN_IF_ERROR(use(padName(DType::F32), padSource(DType::F32), &padFn_));
    TANDEM_RETURN_IF_ERROR(makeGeo(ctx, *padded, {denseStrides(xs)}, &padGeo_));
    std::vector<int64_t> maps;
    for (size_t d = 0; d < padded->size(); ++d) {
      padGeo_.aux[d] = (int64_t)maps.size();
      int64_t begin = d < 2 ? 0 : pb[d - 2];
      for (int64_t o = 0; o < (*padded)[d]; ++o) {
        int64_t s = o - begin;
        maps.push_back(s >= 0 && s < xs[d] ? s : -1);
      }
    }
    void* deviceMaps = nullptr;
    TANDEM_RETURN_IF_ERROR(dc_->upload(maps.data(), maps.size() * sizeof(int64_t), opLabel(ctx) + " pad maps", &deviceMaps));
    maps_ = deviceMaps;
    TANDEM_RETURN_IF_ERROR(dc_->allocate(numElements(*padded) * sizeof(float), opLabel(ctx) + " padded input", &padded_));
    prepad_ = true;
    return Status::ok();
  }

  // x: the op's input, y: its output, w: the weight, all with >= 2 spatial dims (1-D padded).
  Status init(const KernelContext& ctx, Shape xs, Shape ys, Shape ws, std::vector<int64_t> pads,
              std::vector<int64_t> strides, std::vector<int64_t> dil, int64_t group, bool bias) {
    while (xs.size() < 4) {  // cuDNN convolves 2-D or 3-D: add a unit spatial dim
      xs.push_back(1), ys.push_back(1), ws.push_back(1);
      pads.push_back(0), strides.push_back(1), dil.push_back(1);
    }
    int nd = (int)xs.size();
    TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&x_));
    TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&y_));
    TANDEM_CUDA_RETURN(cudnnCreateFilterDescriptor(&w_));
    TANDEM_CUDA_RETURN(cudnnCreateConvolutionDescriptor(&conv_));
    auto dense = [](const Shape& s) { return toInts(denseStrides(s)); };
    TANDEM_CUDA_RETURN(cudnnSetTensorNdDescriptor(x_, CUDNN_DATA_FLOAT, nd, toInts(xs).data(), dense(xs).data()));
    TANDEM_CUDA_RETURN(cudnnSetTensorNdDescriptor(y_, CUDNN_DATA_FLOAT, nd, toInts(ys).data(), dense(ys).data()));
    TANDEM_CUDA_RETURN(cudnnSetFilterNdDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd, toInts(ws).data()));
    TANDEM_CUDA_RETURN(cudnnSetConvolutionNdDescriptor(conv_, nd - 2, toInts(pads).data(), toInts(strides).data(),
                                                       toInts(dil).data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    TANDEM_CUDA_RETURN(cudnnSetConvolutionGroupCount(conv_, (int)group));
    TANDEM_CUDA_RETURN(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH));
    // cuDNN derives the forward output from the forward input; it must be the plan's shape.
    std::vector<int> fwdOut(nd);
    TANDEM_CUDA_RETURN(cudnnGetConvolutionNdForwardOutputDim(conv_, transpose_ ? y_ : x_, w_, nd, fwdOut.data()));
    if (fwdOut != toInts(transpose_ ? xs : ys))
      return Status::error(opLabel(ctx) + ": with symmetric pads " + shapeToString(Shape(pads.begin(), pads.end())) +
                           " cuDNN computes a different shape than the plan's " + shapeToString(transpose_ ? xs : ys) +
                           " (asymmetric pads are not supported by the CUDA kernel)");
    if (bias) {
      TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&b_));
      Shape bs(nd, 1);
      bs[1] = ys[1];
      TANDEM_CUDA_RETURN(cudnnSetTensorNdDescriptor(b_, CUDNN_DATA_FLOAT, nd, toInts(bs).data(), dense(bs).data()));
    }
    int found = 0;
    size_t cap = cudnnWorkspaceCap(dc_->arena ? dc_->arena->limitBytes() : 0);
    std::vector<AlgoCandidate> ranked;
    // Walks the ranked list: the first usable algorithm whose workspace (as cuDNN reports it for
    // the chosen algorithm, which may differ from the estimate) fits the cap.
    auto choose = [&](auto& perf, auto workspaceOf, auto* algo) -> Status {
      for (int i = 0; i < found; ++i) ranked.push_back({perf[i].status == CUDNN_STATUS_SUCCESS, perf[i].memory});
      for (;;) {
        int i = firstAlgoWithin(ranked, cap);
        if (i < 0) return Status::ok();
        size_t bytes = 0;
        TANDEM_RETURN_IF_ERROR(workspaceOf(perf[i].algo, &bytes));
        if (bytes <= cap) {
          *algo = perf[i].algo, wsBytes_ = bytes, chosen_ = true;
          return Status::ok();
        }
        ranked[i].ok = false;
      }
    };
    if (!transpose_) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      TANDEM_CUDA_RETURN(cudnnGetConvolutionForwardAlgorithm_v7(dc_->dnn, x_, w_, conv_, y_,
                                                                CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf));
      TANDEM_RETURN_IF_ERROR(choose(perf, [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
        return check(cudnnGetConvolutionForwardWorkspaceSize(dc_->dnn, x_, w_, conv_, y_, a, bytes),
                     "cudnnGetConvolutionForwardWorkspaceSize");
      }, &fwd_));
    } else if (mode_ == ConvMode::BackwardFilter) {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      TANDEM_CUDA_RETURN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          dc_->dnn, x_, y_, conv_, w_, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, perf));
      TANDEM_RETURN_IF_ERROR(choose(perf, [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
        return check(cudnnGetConvolutionBackwardFilterWorkspaceSize(dc_->dnn, x_, y_, conv_, w_, a, bytes),
                     "cudnnGetConvolutionBackwardFilterWorkspaceSize");
      }, &bwdFilter_));
    } else {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      TANDEM_CUDA_RETURN(cudnnGetConvolutionBackwardDataAlgorithm_v7(dc_->dnn, w_, x_, conv_, y_,
                                                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf));
      TANDEM_RETURN_IF_ERROR(choose(perf, [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
        return check(cudnnGetConvolutionBackwardDataWorkspaceSize(dc_->dnn, w_, x_, conv_, y_, a, bytes),
                     "cudnnGetConvolutionBackwardDataWorkspaceSize");
      }, &bwd_));
    }
    if (!chosen_) {
      size_t least = SIZE_MAX;
      for (const AlgoCandidate& c : ranked)
        if (c.ok) least = std::min(least, c.memory);
      if (least == SIZE_MAX) return Status::error(opLabel(ctx) + ": cuDNN has no algorithm for this convolution");
      return Status::error(opLabel(ctx) + ": every cuDNN algorithm for this convolution needs more workspace than the cap of " +
                           std::to_string(cap) + " bytes (least " + std::to_string(least) + ")");
    }
    dc_->reserveWorkspace(wsBytes_);
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    const float one = 1.f, zero = 0.f;
    const void* x = ins[0]->raw();
    if (prepad_) {
      const void* in = x;
      void* out = padded_;
      uint32_t fill = 0;  // +0.0f
      void* args[] = {&padGeo_, &out, &in, &maps_, &fill};
      TANDEM_RETURN_IF_ERROR(launchGridStride(*dc_, fn(padFn_), padGeo_.n, args));
      x = padded_;
    }
    if (mode_ == ConvMode::BackwardFilter)
      TANDEM_CUDA_RETURN(cudnnConvolutionBackwardFilter(dc_->dnn, &one, x_, x, y_, ins[1]->raw(), conv_,
                                                        bwdFilter_, dc_->workspace, wsBytes_, &zero, w_,
                                                        outs[0]->raw()));
    else if (!transpose_)
      TANDEM_CUDA_RETURN(cudnnConvolutionForward(dc_->dnn, &one, x_, x, w_, ins[1]->raw(), conv_, fwd_,
                                                 dc_->workspace, wsBytes_, &zero, y_, outs[0]->raw()));
    else
      TANDEM_CUDA_RETURN(cudnnConvolutionBackwardData(dc_->dnn, &one, w_, ins[1]->raw(), x_, ins[0]->raw(), conv_,
                                                      bwd_, dc_->workspace, wsBytes_, &zero, y_, outs[0]->raw()));
    if (b_ && ins.size() > 2 && ins[2])
      TANDEM_CUDA_RETURN(cudnnAddTensor(dc_->dnn, &one, b_, ins[2]->raw(), &one, y_, outs[0]->raw()));
    return Status::ok();
  }

 private:
  ConvMode mode_;
  bool transpose_;
  bool prepad_ = false;
  TdGeo padGeo_;
  size_t padFn_ = 0;
  const void* maps_ = nullptr;
  void* padded_ = nullptr;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, b_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwd_{};
  cudnnConvolutionBwdFilterAlgo_t bwdFilter_{};
  bool chosen_ = false;
  size_t wsBytes_ = 0;  // this call's need; the shared workspace is at least this large
};

Status createConv(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const bool filter = ctx.opType == "ConvWeightGrad";
  const bool transpose = ctx.opType == "ConvTranspose";
  if (ctx.inputTypes.size() < 2)
    return Status::error(opLabel(ctx) + (filter ? ": expects inputs X and dY" : ": expects inputs X, W and optional B"));
  // ConvWeightGrad: X, dY in, dW out, which take the places of a Conv's X, Y and W.
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ws = filter ? ctx.outputTypes[0].shape : ctx.inputTypes[1].shape;
  const Shape& ys = filter ? ctx.inputTypes[1].shape : ctx.outputTypes[0].shape;
  // X, W, Y of one rank, 3-5: cudaKernelRejects (KernelLimits.cpp) refused the rest.
  size_t ns = xs.size() - 2;
  int64_t group = ctx.attrs->getInt("group", 1);
  std::vector<int64_t> strides, dil;
  TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "strides", ns, 1, &strides));
  TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "dilations", ns, 1, &dil));
  Shape kernel(ws.begin() + 2, ws.end());
  Shape inSp(xs.begin() + 2, xs.end()), outSp(ys.begin() + 2, ys.end());
  std::vector<int64_t> pb, pe;
  if (!transpose) {
    TANDEM_RETURN_IF_ERROR(ref::windowBeginPads(ctx, inSp, outSp, kernel, strides, dil, &pb, &pe));
  } else {
    // ONNX ConvTranspose-11 begin pads (as runtime/cpu/ref/Conv.cpp): explicit, or derived from
    // the output extent when output_shape or auto_pad=SAME_* fixes it.
    std::string autoPad = ctx.attrs->getString("auto_pad", "NOTSET");
    std::vector<int64_t> outPad;
    TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "output_padding", ns, 0, &outPad));
    pb.assign(ns, 0);
    if (ctx.attrs->has("output_shape") || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      for (size_t i = 0; i < ns; ++i) {
        int64_t total = strides[i] * (inSp[i] - 1) + outPad[i] + (kernel[i] - 1) * dil[i] + 1 - outSp[i];
        if (total < 0) total = 0;
        pb[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      }
    } else if (autoPad != "VALID") {
      std::vector<int64_t> pads;
      TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "pads", 2 * ns, 0, &pads));
      for (size_t i = 0; i < ns; ++i) pb[i] = pads[i];
    }
  }
  bool bias = !filter && ctx.inputTypes.size() > 2 && ctx.inputTypes[2].present();
  auto k = std::make_unique<CudnnConvKernel>(
      ctx.cuda, filter ? ConvMode::BackwardFilter : transpose ? ConvMode::BackwardData : ConvMode::Forward);
  Shape convIn = xs;
  if (!transpose && pb != pe) {
    TANDEM_RETURN_IF_ERROR(k->usePrepad(ctx, xs, pb, pe, &convIn));
    pb.assign(pb.size(), 0);
  }
  TANDEM_RETURN_IF_ERROR(k->init(ctx, convIn, ys, ws, pb, strides, dil, group, bias));
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

void registerConvKernels(KernelRegistry& r) {
  addCuda(r, "Conv", "cudnn", createConv);
  addCuda(r, "ConvTranspose", "cudnn", createConv);
  addCuda(r, "ConvWeightGrad", "cudnn", createConv);
}

}  // namespace cuda
}  // namespace tandem
