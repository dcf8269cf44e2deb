// Reductions as generated kernels: ReduceSum/Mean/Max/Min over any set of axes (one block per
// output element, block-wide tree reduction; a NaN among the inputs is the result, as in the
// reference kernel, and the mean of nothing is NaN) and ArgMax-13 (one thread per output element;
// NaN ranks above every number, as in the reference kernel).
#include <cmath>

#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

struct RedSpec {
  const char* op;
  const char* init;
  const char* combine;  // of acc and v
  const char* block;    // block-wide reduction of the prelude
  bool nanFlag;         // fmaxf/fminf drop NaN: a second block reduction says whether one was seen
};

const std::vector<RedSpec>& specs() {
  static const std::vector<RedSpec> s = {
      {"ReduceSum", "0.f", "acc + v", "td_block_sum", false},
      {"ReduceMean", "0.f", "acc + v", "td_block_sum", false},
      {"ReduceMax", "-__int_as_float(0x7f800000)", "fmaxf(acc, v)", "td_block_max", true},
      {"ReduceMin", "__int_as_float(0x7f800000)", "fminf(acc, v)", "td_block_min", true},
  };
  return s;
}

std::string reduceName(const RedSpec& s) { return std::string("td_") + s.op + "_f32"; }

// g.dims: input dims with reduced ones set to 1 (the output layout); g.imod: input dims with
// kept ones set to 1 (the reduced layout); g.istr[0]: input strides. g.alpha scales the result.
std::string reduceSource(const RedSpec& s) {
  const std::string nanDecl = s.nanFlag ? ", nan = 0.f" : "";
  const std::string nanSeen = s.nanFlag ? "      if (v != v) nan = 1.f;\n" : "";
  const std::string nanOut = s.nanFlag ? "    if (td_block_max(nan) != 0.f) acc = __int_as_float(0x7fffffff);\n" : "";
  return "extern \"C\" __global__ void " + reduceName(s) +
         "(TdGeo g, i64 nOut, i64 nRed, float* __restrict__ out, const float* __restrict__ in) {\n" +
         R"(  for (i64 o = blockIdx.x; o < nOut; o += gridDim.x) {
    i64 base = 0, r = o;
    for (int d = g.rank - 1; d >= 0; --d) {
      i64 x = r % g.dims[d];
      r /= g.dims[d];
      base += x * g.istr[0][d];
    }
    float acc = )" + s.init + nanDecl + R"(;
    for (i64 j = threadIdx.x; j < nRed; j += blockDim.x) {
      i64 off = base, q = j;
      for (int d = g.rank - 1; d >= 0; --d) {
        i64 x = q % g.imod[d];
        q /= g.imod[d];
        off += x * g.istr[0][d];
      }
      float v = in[off];
      acc = )" + s.combine + R"(;
)" + nanSeen + R"(    }
    acc = )" + s.block + R"((acc);
)" + nanOut + R"(    if (threadIdx.x == 0) out[o] = acc * g.alpha;
  }
}
)";
}

class ReduceKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(const RedSpec& s) { return use(reduceName(s), reduceSource(s), &fn_); }
  TdGeo geo;
  int64_t nOut = 0, nRed = 0;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* o = outs[0]->raw();
    const void* i = ins[0]->raw();
    void* args[] = {&geo, &nOut, &nRed, &o, &i};
    return launchBlocks(*dc_, fn(fn_), nOut, 256, args);
  }

 private:
  size_t fn_ = 0;
};

Status createReduce(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const RedSpec* spec = nullptr;
  for (const RedSpec& s : specs())
    if (ctx.opType == s.op) spec = &s;
  const Shape& xs = ctx.inputTypes[0].shape;
  const int64_t rank = (int64_t)xs.size();
  std::vector<int64_t> axes = ctx.attrs->getInts("axes");
  if (ctx.inputTypes.size() > 1 && ctx.inputTypes[1].present()) {
    if (!ctx.constInputs[1]) return Status::error(opLabel(ctx) + ": the CUDA kernel needs axes to be a constant");
    TANDEM_RETURN_IF_ERROR(ref::readInts(ctx, ctx.constInputs[1], "axes", &axes));
  }
  bool noop = ctx.attrs->getInt("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(rank, axes.empty() && !noop);
  for (int64_t a : axes) {
    int64_t ax;
    if (!ref::normalizeAxis(a, rank, &ax))
      return Status::error(opLabel(ctx) + ": axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    if (reduced[ax]) return Status::error(opLabel(ctx) + ": axis " + std::to_string(a) + " is repeated");
    reduced[ax] = true;
  }
  auto k = std::make_unique<ReduceKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(*spec));
  Shape kept = xs, red = xs;
  for (int64_t d = 0; d < rank; ++d) (reduced[d] ? kept : red)[d] = 1;
  TANDEM_RETURN_IF_ERROR(makeGeo(ctx, kept, {denseStrides(xs)}, &k->geo));
  for (int64_t d = 0; d < rank; ++d) k->geo.imod[d] = red[d];
  k->nOut = numElements(kept);
  k->nRed = numElements(red);
  if (k->nOut != numElements(ctx.outputTypes[0].shape))
    return Status::error(opLabel(ctx) + ": output " + shapeToString(ctx.outputTypes[0].shape) +
                         " does not hold the reduction of " + shapeToString(xs));
  // The mean of nothing is 0 * NaN = NaN, as on the CPU.
  k->geo.alpha = ctx.opType == "ReduceMean" ? (k->nRed ? 1.f / (float)k->nRed : std::nanf("")) : 1.f;
  *out = std::move(k);
  return Status::ok();
}

std::string argmaxName(bool last) { return last ? "td_argmax_last_f32" : "td_argmax_first_f32"; }

std::string argmaxSource(bool last) {
  return "extern \"C\" __global__ void " + argmaxName(last) +
         "(i64 n, i64 axisLen, i64 inner, i64* __restrict__ out, const float* __restrict__ in) {\n" +
         R"(  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    const float* x = in + (i / inner) * axisLen * inner + i % inner;
    i64 best = 0;
    for (i64 k = 1; k < axisLen; ++k) {
      float v = x[k * inner], b = x[best * inner];
      bool take;
      if (b != b) take = )" + std::string(last ? "v != v" : "false") + R"(;
      else if (v != v) take = true;
      else take = )" + std::string(last ? "v >= b" : "v > b") + R"(;
      if (take) best = k;
    }
    out[i] = best;
  }
}
)";
}

class ArgMaxKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(bool last) { return use(argmaxName(last), argmaxSource(last), &fn_); }
  int64_t n = 0, axisLen = 0, inner = 0;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* o = outs[0]->raw();
    const void* i = ins[0]->raw();
    void* args[] = {&n, &axisLen, &inner, &o, &i};
    return launchGridStride(*dc_, fn(fn_), n, args);
  }

 private:
  size_t fn_ = 0;
};

Status createArgMax(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  int64_t axis;
  if (!ref::normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)xs.size(), &axis))
    return Status::error(opLabel(ctx) + ": axis out of range for rank " + std::to_string(xs.size()));
  auto k = std::make_unique<ArgMaxKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx.attrs->getInt("select_last_index", 0) != 0));
  k->axisLen = xs[axis];
  k->inner = ref::product(xs, axis + 1, xs.size());
  k->n = ref::product(xs, 0, axis) * k->inner;
  if (k->axisLen == 0 && k->n > 0) return Status::error(opLabel(ctx) + ": cannot take the argmax over an empty axis");
  if (ctx.outputTypes[0].dtype != DType::I64 || numElements(ctx.outputTypes[0].shape) != k->n)
    return Status::error(opLabel(ctx) + ": output must be i64 with " + std::to_string(k->n) + " elements");
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> reductionSources() {
  std::vector<std::pair<std::string, std::string>> r;
  for (const RedSpec& s : specs()) r.push_back({reduceName(s), reduceSource(s)});
  for (bool last : {false, true}) r.push_back({argmaxName(last), argmaxSource(last)});
  return r;
}

void registerReductionKernels(KernelRegistry& r) {
  for (const RedSpec& s : specs()) addCuda(r, s.op, "nvrtc", createReduce);
  addCuda(r, "ArgMax", "nvrtc", createArgMax);
}

}  // namespace cuda
}  // namespace tandem
