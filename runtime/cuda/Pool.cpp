// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool through cuDNN pooling (NCHW FP32, 1-D as
// 2-D with a unit dim, up to 3-D). cuDNN pads symmetrically and has no dilation: other cases
// and MaxPool's Indices output are refused by cudaKernelRejects (KernelLimits.cpp). An empty output (zero
// batch or channels, which cuDNN's descriptors reject) is a kernel that does nothing; tensors of
// 2^31 elements or more, which its int sizes and strides cannot describe, are an error.
#include <climits>

#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

std::vector<int> toInts(const Shape& s) { return std::vector<int>(s.begin(), s.end()); }

// An op whose output has no elements: nothing to compute.
class EmptyOutputKernel : public Kernel {
 public:
  Status run(const std::vector<const Tensor*>&, const std::vector<Tensor*>&) override { return Status::ok(); }
  std::string implName() const override { return "none (empty output)"; }
};

class CudnnPoolKernel : public Kernel {
 public:
  explicit CudnnPoolKernel(DeviceContext* dc) : dc_(dc) {}
  ~CudnnPoolKernel() override {
    for (auto d : {x_, y_}) if (d) cudnnDestroyTensorDescriptor(d);
    if (pool_) cudnnDestroyPoolingDescriptor(pool_);
  }
  std::string implName() const override { return "cudnn"; }

  Status init(const KernelContext& ctx, cudnnPoolingMode_t mode, Shape xs, Shape ys, Shape window,
              std::vector<int64_t> pads, std::vector<int64_t> strides) {
    while (xs.size() < 4) xs.push_back(1), ys.push_back(1), window.push_back(1), pads.push_back(0), strides.push_back(1);
    int nd = (int)xs.size();
    TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&x_));
    TANDEM_CUDA_RETURN(cudnnCreateTensorDescriptor(&y_));
    TANDEM_CUDA_RETURN(cudnnCreatePoolingDescriptor(&pool_));
    TANDEM_CUDA_RETURN(cudnnSetTensorNdDescriptor(x_, CUDNN_DATA_FLOAT, nd, toInts(xs).data(), toInts(denseStrides(xs)).data()));
    TANDEM_CUDA_RETURN(cudnnSetTensorNdDescriptor(y_, CUDNN_DATA_FLOAT, nd, toInts(ys).data(), toInts(denseStrides(ys)).data()));
    TANDEM_CUDA_RETURN(cudnnSetPoolingNdDescriptor(pool_, mode, CUDNN_PROPAGATE_NAN, nd - 2, toInts(window).data(),
                                                   toInts(pads).data(), toInts(strides).data()));
    std::vector<int> got(nd);
    TANDEM_CUDA_RETURN(cudnnGetPoolingNdForwardOutputDim(pool_, x_, nd, got.data()));
    if (got != toInts(ys))
      return Status::error(opLabel(ctx) + ": cuDNN pooling (symmetric pads, floor rounding) gives a different shape than the plan's " +
                           shapeToString(ys) + " (ceil_mode or asymmetric pads are not supported by the CUDA kernel)");
    return Status::ok();
  }
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    const float one = 1.f, zero = 0.f;
    return check(cudnnPoolingForward(dc_->dnn, pool_, &one, x_, ins[0]->raw(), &zero, y_, outs[0]->raw()),
                 "cudnnPoolingForward");
  }

 private:
  DeviceContext* dc_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnPoolingDescriptor_t pool_ = nullptr;
};

Status createPool(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  // Ranks 3-5, no dilation, no Indices output: cudaKernelRejects (KernelLimits.cpp) refused the
  // rest before this factory runs.
  if (numElements(ys) == 0) {
    *out = std::make_unique<EmptyOutputKernel>();
    return Status::ok();
  }
  // Dense strides are bounded by the element count: below 2^31 every size and stride fits an int.
  for (const Shape* s : {&xs, &ys})
    if (numElements(*s) > INT_MAX)
      return Status::error(opLabel(ctx) + ": " + shapeToString(*s) + " has " + std::to_string(numElements(*s)) +
                           " elements; cuDNN pooling describes tensors of fewer than 2^31");
  size_t ns = xs.size() - 2;
  Shape inSp(xs.begin() + 2, xs.end()), outSp(ys.begin() + 2, ys.end());
  bool global = ctx.opType.rfind("Global", 0) == 0;
  bool isMax = ctx.opType == "MaxPool" || ctx.opType == "GlobalMaxPool";
  std::vector<int64_t> window, strides, dil, pb, pe;
  if (global) {
    window = inSp;
    strides.assign(ns, 1);
    pb.assign(ns, 0);
  } else {
    TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "kernel_shape", ns, 1, &window));
    TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "strides", ns, 1, &strides));
    TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "dilations", ns, 1, &dil));
    TANDEM_RETURN_IF_ERROR(ref::windowBeginPads(ctx, inSp, outSp, window, strides, dil, &pb, &pe));
  }
  cudnnPoolingMode_t mode = isMax ? CUDNN_POOLING_MAX_DETERMINISTIC
                            : ctx.attrs->getInt("count_include_pad", 0) ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  auto k = std::make_unique<CudnnPoolKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx, mode, xs, ys, window, pb, strides));
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

void registerPoolKernels(KernelRegistry& r) {
  for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
    addCuda(r, op, "cudnn", createPool);
}

}  // namespace cuda
}  // namespace tandem
