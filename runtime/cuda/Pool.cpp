// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool through cuDNN pooling (NCHW FP32, 1-D as
// 2-D with a unit dim, up to 3-D). cuDNN pads symmetrically and has no dilation: other cases
// and MaxPool's Indices output are refused by cudaKernelRejects (KernelLimits.cpp). An empty output (zero
// batch or channels, which cuDNN's descriptors reject) is a kernel that does nothing; tensors of
// 2^31 elements or more, which its int sizes and strides cannot describe, are an error.
// MaxPoolGrad (autodiff's gradient of MaxPool) as a generated kernel: 1-D to 3-D windows with any
// pads, strides and dilations, the reference kernel's choice of element per window.
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

// ---- MaxPoolGrad ---------------------------------------------------------------------------
//
// cuDNN's pooling backward needs Y and chooses its own element among equal maxima; MaxPoolGrad
// has X and dY only and must give dY to the element the reference MaxPool takes (windowArgMax in
// runtime/cpu/ref/Pool.cpp: taps in row-major kernel order, the first of equal maxima kept, NaN
// wins). So a generated kernel, one thread per element of dX: it walks the windows that have a
// tap on its element in row-major output order, recomputes each one's arg-max and adds dY where
// that is its element. No atomics, and the same additions in the same order as the reference
// (dX = 0, then dY[p] added for p ascending): the result is bit-identical to it.

/// Byte-for-byte TdPoolWin of maxPoolGradSource(): spatial dims padded to 3 with extent 1,
/// window 1, stride 1, dilation 1, pad 0.
struct PoolWin {
  int64_t nc = 0;   // N * C
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, dil[3] = {1, 1, 1},
          pb[3] = {0, 0, 0};
};
static_assert(sizeof(PoolWin) == 19 * 8, "PoolWin must match the generated TdPoolWin");

const char* kMaxPoolGradName = "td_maxpoolgrad_f32";

std::string maxPoolGradSource() {
  return std::string(R"(struct TdPoolWin {
  i64 nc;
  i64 in[3], out[3], k[3], s[3], dil[3], pb[3];
};
extern "C" __global__ void )") + kMaxPoolGradName +
         R"((TdPoolWin w, float* __restrict__ dx, const float* __restrict__ x, const float* __restrict__ dy) {
  const i64 pin = w.in[0] * w.in[1] * w.in[2], pout = w.out[0] * w.out[1] * w.out[2];
  const i64 n = w.nc * pin;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    const i64 nc = i / pin, at = i % pin;
    i64 q[3], lo[3], hi[3];
    q[2] = at % w.in[2];
    q[1] = (at / w.in[2]) % w.in[1];
    q[0] = at / (w.in[2] * w.in[1]);
    // Outputs o with a tap on q: o * s + k * dil = q + pb for some k in [0, kernel).
    for (int d = 0; d < 3; ++d) {
      const i64 t = q[d] + w.pb[d], u = t - (w.k[d] - 1) * w.dil[d];
      hi[d] = t < 0 ? -1 : t / w.s[d];
      if (hi[d] > w.out[d] - 1) hi[d] = w.out[d] - 1;
      lo[d] = u <= 0 ? 0 : (u + w.s[d] - 1) / w.s[d];
    }
    const float* xc = x + nc * pin;
    const float* dyc = dy + nc * pout;
    float acc = 0.f;
    for (i64 o0 = lo[0]; o0 <= hi[0]; ++o0)
      for (i64 o1 = lo[1]; o1 <= hi[1]; ++o1)
        for (i64 o2 = lo[2]; o2 <= hi[2]; ++o2) {
          const i64 o[3] = {o0, o1, o2};
          bool tap = true;
          for (int d = 0; d < 3; ++d) {
            const i64 r = q[d] + w.pb[d] - o[d] * w.s[d];
            if (r % w.dil[d] != 0 || r / w.dil[d] >= w.k[d]) tap = false;
          }
          if (!tap) continue;
          // The window's arg-max: windowArgMax of the reference kernel.
          i64 arg = -1;
          float best = 0.f;
          for (i64 k0 = 0; k0 < w.k[0]; ++k0) {
            const i64 a0 = o0 * w.s[0] - w.pb[0] + k0 * w.dil[0];
            if (a0 < 0 || a0 >= w.in[0]) continue;
            for (i64 k1 = 0; k1 < w.k[1]; ++k1) {
              const i64 a1 = o1 * w.s[1] - w.pb[1] + k1 * w.dil[1];
              if (a1 < 0 || a1 >= w.in[1]) continue;
              for (i64 k2 = 0; k2 < w.k[2]; ++k2) {
                const i64 a2 = o2 * w.s[2] - w.pb[2] + k2 * w.dil[2];
                if (a2 < 0 || a2 >= w.in[2]) continue;
                const i64 off = (a0 * w.in[1] + a1) * w.in[2] + a2;
                const float v = xc[off];
                if (arg < 0 || v > best || (v != v && best == best)) {
                  best = v;
                  arg = off;
                }
              }
            }
          }
          if (arg == at) acc += dyc[(o0 * w.out[1] + o1) * w.out[2] + o2];
        }
    dx[i] = acc;
  }
}
)";
}

class MaxPoolGradKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init() { return use(kMaxPoolGradName, maxPoolGradSource(), &fn_); }
  PoolWin win;
  int64_t n = 0;  // elements of dX
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* dx = outs[0]->raw();
    const void* x = ins[0]->raw();
    const void* dy = ins[1]->raw();
    void* args[] = {&win, &dx, &x, &dy};
    return launchGridStride(*dc_, fn(fn_), n, args);
  }

 private:
  size_t fn_ = 0;
};

// Inputs X [N, C, spatial...] and dY (MaxPool's output shape); output dX of X's shape. The pool's
// attributes (kernel_shape, strides, pads or auto_pad, dilations; ceil_mode shows in dY's shape).
Status createMaxPoolGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.inputTypes.size() < 2 || !ctx.inputTypes[1].present())
    return Status::error(opLabel(ctx) + ": expects X and dY");
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.inputTypes[1].shape;
  // Ranks 3-5: cudaKernelRejects (KernelLimits.cpp) refused the rest.
  if (xs.size() < 3 || xs.size() > 5 || ys.size() != xs.size() || ys[0] != xs[0] || ys[1] != xs[1])
    return Status::error(opLabel(ctx) + ": dY " + shapeToString(ys) + " does not fit X " + shapeToString(xs) +
                         " (the CUDA kernel pools 1-D to 3-D inputs)");
  if (ctx.outputTypes[0].shape != xs)
    return Status::error(opLabel(ctx) + ": output shape " + shapeToString(ctx.outputTypes[0].shape) +
                         " is not X's " + shapeToString(xs));
  if (!ctx.attrs->has("kernel_shape")) return Status::error(opLabel(ctx) + ": attribute kernel_shape is required");
  const size_t ns = xs.size() - 2;
  Shape inSp(xs.begin() + 2, xs.end()), outSp(ys.begin() + 2, ys.end());
  std::vector<int64_t> window, strides, dil, pb, pe;
  TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "kernel_shape", ns, 1, &window));
  TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "strides", ns, 1, &strides));
  TANDEM_RETURN_IF_ERROR(ref::intsAttr(ctx, "dilations", ns, 1, &dil));
  for (size_t d = 0; d < ns; ++d)
    if (window[d] < 1 || strides[d] < 1 || dil[d] < 1)
      return Status::error(opLabel(ctx) + ": kernel_shape, strides and dilations must be >= 1");
  TANDEM_RETURN_IF_ERROR(ref::windowBeginPads(ctx, inSp, outSp, window, strides, dil, &pb, &pe));
  auto k = std::make_unique<MaxPoolGradKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init());
  k->win.nc = xs[0] * xs[1];
  for (size_t d = 0; d < ns; ++d) {
    k->win.in[d] = inSp[d], k->win.out[d] = outSp[d], k->win.k[d] = window[d];
    k->win.s[d] = strides[d], k->win.dil[d] = dil[d], k->win.pb[d] = pb[d];
  }
  k->n = numElements(xs);
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> poolSources() {
  return {{kMaxPoolGradName, maxPoolGradSource()}};
}

void registerPoolKernels(KernelRegistry& r) {
  for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
    addCuda(r, op, "cudnn", createPool);
  addCuda(r, "MaxPoolGrad", "nvrtc", createMaxPoolGrad);
}

}  // namespace cuda
}  // namespace tandem
