// SoftmaxCrossEntropyLoss-13 and its gradient SoftmaxCrossEntropyLossGrad (Tandem's, autodiff) as
// generated kernels: f32 scores [N, C, d...], i32/i64 labels [N, d...], optional f32 weight [C],
// reductions none/sum/mean, ignore_index, the optional log_prob output. The arithmetic is the
// reference kernel's (runtime/cpu/ref/Loss.cpp): a stable log-softmax and the loss in f64, sums in
// f64, results rounded to f32 once.
//
// Forward: one warp per (n, d) row (the scores of a row are C values D apart) computes its
// log-sum-exp, log_prob and the row's loss and weight; for sum/mean one block then adds the rows'
// f64 loss and weight (from the plan's shared workspace) into the scalar. Gradient: for mean one
// block adds the weights, then one thread per element of dX.
//
// A kernel cannot fail: a label outside [0, C) that is not ignore_index, a run-time error on the
// CPU, makes its row's loss and gradient NaN here (and so a sum or mean loss NaN).
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

// The weight of the row's label t, or NaN for a label outside [0, C) that is not ignored.
std::string labelWeightCode() {
  return R"(    double w;
    if (hasIgnore && (i64)t == ignore) w = 0.0;
    else if ((i64)t < 0 || (i64)t >= C) w = __longlong_as_double(0x7ff8000000000000LL);
    else w = weight ? (double)weight[t] : 1.0;
)";
}

// Warp-wide (all 32 lanes) f64 sum and max; block-wide sum of two values.
std::string helpers(const std::string& prefix) {
  return "__device__ __forceinline__ double " + prefix + "_warp_sum(double v) {\n" +
         R"(  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
)" + "__device__ __forceinline__ double " + prefix + "_warp_max(double v) {\n" +
         R"(  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
)" + "__device__ __forceinline__ void " + prefix + "_block_sum2(double* a, double* b) {\n" +
         R"(  __shared__ double sa[32], sb[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double x = )" + prefix + "_warp_sum(*a), y = " + prefix + R"(_warp_sum(*b);
  if (lane == 0) sa[warp] = x, sb[warp] = y;
  __syncthreads();
  x = lane < (blockDim.x >> 5) ? sa[lane] : 0.0;
  y = lane < (blockDim.x >> 5) ? sb[lane] : 0.0;
  *a = )" + prefix + "_warp_sum(x);\n  *b = " + prefix + R"(_warp_sum(y);
}
)";
}

std::string rowsName(DType label) { return std::string("td_sce_rows_") + dtypeName(label); }
const char* kReduceName = "td_sce_reduce";
std::string weightSumName(DType label) { return std::string("td_sce_wsum_") + dtypeName(label); }
std::string gradName(DType label) { return std::string("td_sce_grad_") + dtypeName(label); }

// Block of 32 threads per row. loss (none) gets the row's loss; rowLoss/rowW (sum, mean) the
// row's loss and weight in f64; logp (optional) the log-softmax.
std::string rowsSource(DType label) {
  const std::string n = rowsName(label), L = deviceTypeName(label);
  return helpers(n) + "extern \"C\" __global__ void " + n +
         "(i64 rows, i64 C, i64 D, i64 ignore, i32 hasIgnore, const float* __restrict__ x, const " + L +
         "* __restrict__ label, const float* __restrict__ weight, float* __restrict__ loss, "
         "float* __restrict__ logp, double* __restrict__ rowLoss, double* __restrict__ rowW) {\n" +
         R"(  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const i64 base = (row / D) * C * D + row % D;
    const float* xr = x + base;
    double m = -__longlong_as_double(0x7ff0000000000000LL);
    for (i64 c = threadIdx.x; c < C; c += 32) m = fmax(m, (double)xr[c * D]);
    m = )" + n + R"(_warp_max(m);
    double s = 0.0;
    for (i64 c = threadIdx.x; c < C; c += 32) s += exp((double)xr[c * D] - m);
    const double lse = m + log()" + n + R"(_warp_sum(s));
    if (logp)
      for (i64 c = threadIdx.x; c < C; c += 32) logp[base + c * D] = (float)((double)xr[c * D] - lse);
    if (threadIdx.x == 0) {
      const )" + L + R"( t = label[row];
  )" + labelWeightCode() + R"(      double l = 0.0;
      if (w != w) l = w;
      else if (w != 0.0) l = -w * ((double)xr[(i64)t * D] - lse);
      if (loss) loss[row] = (float)l;
      if (rowLoss) {
        rowLoss[row] = l;
        rowW[row] = w;
      }
    }
  }
}
)";
}

// One block: loss[0] = sum of rowLoss, divided by the sum of rowW for mean (0/0 = NaN).
std::string reduceSource() {
  return helpers(kReduceName) + "extern \"C\" __global__ void " + kReduceName +
         "(i64 rows, i32 mean, const double* __restrict__ rowLoss, const double* __restrict__ rowW, "
         "float* __restrict__ loss) {\n" +
         R"(  double l = 0.0, w = 0.0;
  for (i64 r = threadIdx.x; r < rows; r += blockDim.x) {
    l += rowLoss[r];
    w += rowW[r];
  }
  )" + kReduceName + R"(_block_sum2(&l, &w);
  if (threadIdx.x == 0) loss[0] = (float)(mean ? l / w : l);
}
)";
}

// One block: *out = the sum over rows of the labels' weights (mean's divisor).
std::string weightSumSource(DType label) {
  const std::string n = weightSumName(label), L = deviceTypeName(label);
  return helpers(n) + "extern \"C\" __global__ void " + n + "(i64 rows, i64 C, i64 ignore, i32 hasIgnore, const " + L +
         "* __restrict__ label, const float* __restrict__ weight, double* __restrict__ out) {\n" +
         R"(  double sum = 0.0, unused = 0.0;
  for (i64 row = threadIdx.x; row < rows; row += blockDim.x) {
    const )" + L + R"( t = label[row];
)" + labelWeightCode() + R"(    sum += w;
  }
  )" + n + R"(_block_sum2(&sum, &unused);
  if (threadIdx.x == 0) *out = sum;
}
)";
}

// dx[n, c, d] = g * (exp(logp) - [c == label]), g = w * scale * dY (dY[row] for none, dY[0]
// otherwise; scale = 1 / *wsum for mean, else 1); an ignored row gives 0.
std::string gradSource(DType label) {
  const std::string n = gradName(label), L = deviceTypeName(label);
  return "extern \"C\" __global__ void " + n +
         "(i64 n, i64 C, i64 D, i64 ignore, i32 hasIgnore, i32 perRow, const float* __restrict__ dy, "
         "const float* __restrict__ logp, const " + L +
         "* __restrict__ label, const float* __restrict__ weight, const double* __restrict__ wsum, "
         "float* __restrict__ dx) {\n" +
         R"(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    const i64 d = i % D, c = (i / D) % C, row = (i / (C * D)) * D + d;
    const )" + L + R"( t = label[row];
)" + labelWeightCode() + R"(    const double scale = wsum ? 1.0 / *wsum : 1.0;
    const double g = w == 0.0 ? 0.0 : w * scale * (double)(perRow ? dy[row] : dy[0]);
    const double p = exp((double)logp[i]);
    dx[i] = (float)(g == 0.0 ? 0.0 : g * (p - (c == (i64)t ? 1.0 : 0.0)));
  }
}
)";
}

enum class Reduction { None, Sum, Mean };

struct LossSpec {
  int64_t N = 0, C = 0, D = 1;
  Reduction reduction = Reduction::Mean;
  int32_t hasIgnore = 0;
  int64_t ignoreIndex = 0;
};

// Scores (operand s: f32 [N, C, d...]), labels (operand l: i32/i64 [N, d...]), optional weight
// (operand w: f32 [C]); the attributes. The dtypes were checked by the table (cudaKernelAccepts).
Status readSpec(const KernelContext& ctx, size_t s, size_t l, size_t w, LossSpec* spec) {
  const std::string r = ctx.attrs->getString("reduction", "mean");
  if (r == "none") spec->reduction = Reduction::None;
  else if (r == "sum") spec->reduction = Reduction::Sum;
  else if (r == "mean") spec->reduction = Reduction::Mean;
  else return Status::error(opLabel(ctx) + ": reduction '" + r + "' is not one of none, sum, mean");
  spec->hasIgnore = ctx.attrs->has("ignore_index") ? 1 : 0;
  spec->ignoreIndex = ctx.attrs->getInt("ignore_index", 0);
  if (ctx.inputTypes.size() <= l || !ctx.inputTypes[s].present() || !ctx.inputTypes[l].present())
    return Status::error(opLabel(ctx) + ": expects scores (input " + std::to_string(s) + ") and labels (input " +
                         std::to_string(l) + ")");
  const Shape& xs = ctx.inputTypes[s].shape;
  if (xs.size() < 2) return Status::error(opLabel(ctx) + ": scores must have rank >= 2, got " + shapeToString(xs));
  Shape expect = xs;
  expect.erase(expect.begin() + 1);
  if (ctx.inputTypes[l].shape != expect)
    return Status::error(opLabel(ctx) + ": labels shape " + shapeToString(ctx.inputTypes[l].shape) + " is not " +
                         shapeToString(expect) + " (the scores' without dim 1)");
  spec->N = xs[0];
  spec->C = xs[1];
  spec->D = ref::product(xs, 2, xs.size());
  if (w < ctx.inputTypes.size() && ctx.inputTypes[w].present() && ctx.inputTypes[w].shape != Shape{spec->C})
    return Status::error(opLabel(ctx) + ": weight must be f32[" + std::to_string(spec->C) + "], got " +
                         shapeToString(ctx.inputTypes[w].shape));
  return Status::ok();
}

Shape lossShape(const KernelContext& ctx, const LossSpec& spec, size_t l) {
  return spec.reduction == Reduction::None ? ctx.inputTypes[l].shape : Shape{};
}

const void* optionalInput(const std::vector<const Tensor*>& ins, size_t i) {
  return i < ins.size() && ins[i] ? ins[i]->raw() : nullptr;
}

class LossKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(DType label) {
    TANDEM_RETURN_IF_ERROR(use(rowsName(label), rowsSource(label), &rows_));
    if (spec.reduction != Reduction::None) {
      TANDEM_RETURN_IF_ERROR(use(kReduceName, reduceSource(), &reduce_));
      // Two f64 per row, read by the reduction right after on the same stream.
      dc_->reserveWorkspace(2 * sizeof(double) * (size_t)std::max<int64_t>(1, spec.N * spec.D));
    }
    return Status::ok();
  }
  LossSpec spec;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    int64_t rows = spec.N * spec.D, C = spec.C, D = spec.D, ignore = spec.ignoreIndex;
    int32_t hasIgnore = spec.hasIgnore;
    const void* x = ins[0]->raw();
    const void* label = ins[1]->raw();
    const void* weight = optionalInput(ins, 2);
    const bool none = spec.reduction == Reduction::None;
    void* loss = none ? outs[0]->raw() : nullptr;
    void* logp = outs.size() > 1 && outs[1] ? outs[1]->raw() : nullptr;
    void* rowLoss = none ? nullptr : dc_->workspace;
    void* rowW = none ? nullptr : (void*)((double*)dc_->workspace + std::max<int64_t>(1, rows));
    if (!none && !dc_->workspace) return Status::error("internal: SoftmaxCrossEntropyLoss ran without its workspace");
    void* args[] = {&rows, &C, &D, &ignore, &hasIgnore, &x, &label, &weight, &loss, &logp, &rowLoss, &rowW};
    TANDEM_RETURN_IF_ERROR(launchBlocks(*dc_, fn(rows_), rows, 32, args));
    if (none) return Status::ok();
    int32_t mean = spec.reduction == Reduction::Mean ? 1 : 0;
    void* out = outs[0]->raw();
    void* rargs[] = {&rows, &mean, &rowLoss, &rowW, &out};
    return launchBlocks(*dc_, fn(reduce_), 1, 256, rargs);
  }

 private:
  size_t rows_ = 0, reduce_ = 0;
};

// Inputs scores, labels[, weight]; outputs loss[, log_prob].
Status createLoss(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  auto k = std::make_unique<LossKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(readSpec(ctx, 0, 1, 2, &k->spec));
  if (ctx.outputTypes[0].shape != lossShape(ctx, k->spec, 1))
    return Status::error(opLabel(ctx) + ": output 0 (loss) shape " + shapeToString(ctx.outputTypes[0].shape) +
                         " is not " + shapeToString(lossShape(ctx, k->spec, 1)));
  if (ctx.outputTypes.size() > 1 && ctx.outputTypes[1].present() &&
      (ctx.outputTypes[1].dtype != DType::F32 || ctx.outputTypes[1].shape != ctx.inputTypes[0].shape))
    return Status::error(opLabel(ctx) + ": output 1 (log_prob) must have the scores' type");
  TANDEM_RETURN_IF_ERROR(k->init(ctx.inputTypes[1].dtype));
  *out = std::move(k);
  return Status::ok();
}

class LossGradKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(DType label) {
    TANDEM_RETURN_IF_ERROR(use(gradName(label), gradSource(label), &grad_));
    if (spec.reduction == Reduction::Mean) {
      TANDEM_RETURN_IF_ERROR(use(weightSumName(label), weightSumSource(label), &wsum_));
      dc_->reserveWorkspace(sizeof(double));
    }
    return Status::ok();
  }
  LossSpec spec;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    int64_t rows = spec.N * spec.D, n = rows * spec.C, C = spec.C, D = spec.D, ignore = spec.ignoreIndex;
    int32_t hasIgnore = spec.hasIgnore, perRow = spec.reduction == Reduction::None ? 1 : 0;
    const void* dy = ins[0]->raw();
    const void* logp = ins[1]->raw();
    const void* label = ins[2]->raw();
    const void* weight = optionalInput(ins, 3);
    void* wsum = nullptr;
    if (spec.reduction == Reduction::Mean) {
      if (!dc_->workspace) return Status::error("internal: SoftmaxCrossEntropyLossGrad ran without its workspace");
      wsum = dc_->workspace;
      void* wargs[] = {&rows, &C, &ignore, &hasIgnore, &label, &weight, &wsum};
      TANDEM_RETURN_IF_ERROR(launchBlocks(*dc_, fn(wsum_), 1, 256, wargs));
    }
    void* dx = outs[0]->raw();
    void* args[] = {&n, &C, &D, &ignore, &hasIgnore, &perRow, &dy, &logp, &label, &weight, &wsum, &dx};
    return launchGridStride(*dc_, fn(grad_), n, args);
  }

 private:
  size_t grad_ = 0, wsum_ = 0;
};

// Inputs dY (the loss's shape), log_prob (the scores' shape), labels[, weight]; output dScores.
Status createLossGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  auto k = std::make_unique<LossGradKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(readSpec(ctx, 1, 2, 3, &k->spec));
  const Shape want = lossShape(ctx, k->spec, 2);
  if (ctx.inputTypes[0].shape != want)
    return Status::error(opLabel(ctx) + ": dY must be f32" + shapeToString(want) + " (the loss's type), got " +
                         shapeToString(ctx.inputTypes[0].shape));
  if (ctx.outputTypes[0].shape != ctx.inputTypes[1].shape)
    return Status::error(opLabel(ctx) + ": output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                         shapeToString(ctx.inputTypes[1].shape));
  TANDEM_RETURN_IF_ERROR(k->init(ctx.inputTypes[2].dtype));
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> lossSources() {
  std::vector<std::pair<std::string, std::string>> r = {{kReduceName, reduceSource()}};
  for (DType l : {DType::I32, DType::I64}) {
    r.push_back({rowsName(l), rowsSource(l)});
    r.push_back({weightSumName(l), weightSumSource(l)});
    r.push_back({gradName(l), gradSource(l)});
  }
  return r;
}

void registerLossKernels(KernelRegistry& r) {
  addCuda(r, "SoftmaxCrossEntropyLoss", "nvrtc", createLoss);
  addCuda(r, "SoftmaxCrossEntropyLossGrad", "nvrtc", createLossGrad);
}

}  // namespace cuda
}  // namespace tandem
