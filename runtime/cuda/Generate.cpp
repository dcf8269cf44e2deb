// CumSum-14 (NVRTC), mirroring runtime/cpu/ref/Generate.cpp: one thread per line along the
// axis adds in the reference's sequential order, so float sums are bit-identical to it (a
// parallel scan would round in another order).
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

std::string cumSumName(DType t) { return std::string("td_cumsum_") + deviceTypeName(t); }

// Line l = (o, in_) of a [outer, n, inner] tensor, l = o * inner + in_ (neighbouring threads
// read neighbouring elements when inner > 1). y may be x's buffer: each element is read before
// its line writes it, as in the reference.
std::string cumSumSource(DType t) {
  const std::string T = deviceTypeName(t);
  return "extern \"C\" __global__ void " + cumSumName(t) + "(i64 lines, i64 n, i64 inner, int exclusive, int reverse, " +
         T + "* y, const " + T + R"(* x) {
  for (i64 l = (i64)blockIdx.x * blockDim.x + threadIdx.x; l < lines; l += (i64)gridDim.x * blockDim.x) {
    const i64 base = (l / inner) * n * inner + l % inner;
    )" + T + R"( acc = 0;
    for (i64 s = 0; s < n; ++s) {
      const i64 at = base + (reverse ? n - 1 - s : s) * inner;
      const )" + T + R"( v = x[at];
      if (exclusive) {
        y[at] = acc;
        acc = ()" + T + R"()(acc + v);
      } else {
        acc = ()" + T + R"()(acc + v);
        y[at] = acc;
      }
    }
  }
}
)";
}

class CumSumKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(DType t) { return use(cumSumName(t), cumSumSource(t), &fn_); }
  int64_t lines = 0, n = 0, inner = 0;
  int exclusive = 0, reverse = 0;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* y = outs[0]->raw();
    const void* x = ins[0]->raw();
    void* args[] = {&lines, &n, &inner, &exclusive, &reverse, &y, &x};
    return launchGridStride(*dc_, fn(fn_), lines, args);
  }

 private:
  size_t fn_ = 0;
};

// Inputs x and axis (a constant i32/i64 scalar, read at load); output y of x's shape.
Status createCumSum(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  if (ctx.outputTypes[0].shape != xs)
    return Status::error(opLabel(ctx) + ": output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not x's " +
                         shapeToString(xs));
  const Tensor* a = ref::constInputAt(ctx, 1);
  if (!a) return Status::error(opLabel(ctx) + ": the CUDA kernel needs axis (input 1) to be a constant");
  std::vector<int64_t> av;
  TANDEM_RETURN_IF_ERROR(ref::readInts(ctx, a, "axis", &av));
  int64_t axis;
  if (av.size() != 1 || !ref::normalizeAxis(av[0], (int64_t)xs.size(), &axis))
    return Status::error(opLabel(ctx) + ": axis must be one value in [-rank, rank) for rank " +
                         std::to_string(xs.size()));
  auto k = std::make_unique<CumSumKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx.inputTypes[0].dtype));
  k->n = xs[axis];
  k->inner = ref::product(xs, axis + 1, xs.size());
  k->lines = k->n == 0 ? 0 : ref::product(xs, 0, axis) * k->inner;
  k->exclusive = ctx.attrs->getInt("exclusive", 0) != 0 ? 1 : 0;
  k->reverse = ctx.attrs->getInt("reverse", 0) != 0 ? 1 : 0;
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> generateSources() {
  std::vector<std::pair<std::string, std::string>> r;
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::I8})
    r.push_back({cumSumName(t), cumSumSource(t)});
  return r;
}

void registerGenerateKernels(KernelRegistry& r) { addCuda(r, "CumSum", "nvrtc", createCumSum); }

}  // namespace cuda
}  // namespace tandem
