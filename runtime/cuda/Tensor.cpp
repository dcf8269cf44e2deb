// Data movement without arithmetic: the reshape family (a device copy, or nothing when the plan
// aliases the buffers), and Transpose, Expand, Tile, Concat, Split, Slice as launches of the generated
// strided copy (td_copy_<bits>, Generated.cpp), one per operand. Dropout: at inference a copy,
// in training mode the generated td_dropout_<type>, which draws the CPU kernel's Philox mask.
#include <cmath>

#include "runtime/Philox.h"
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

// out = in for the reshape family: same bytes, another shape.
class DeviceCopyKernel : public Kernel {
 public:
  explicit DeviceCopyKernel(DeviceContext* dc) : dc_(dc) {}
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    if (ins[0]->raw() == outs[0]->raw() || !outs[0]->bytes()) return Status::ok();
    return check(cudaMemcpyAsync(outs[0]->raw(), ins[0]->raw(), outs[0]->bytes(),
                                 cudaMemcpyDeviceToDevice, dc_->compute),
                 "cudaMemcpyAsync");
  }
  std::string implName() const override { return "cuda-memcpy"; }

 private:
  DeviceContext* dc_;
};

Status createReshapeLike(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  size_t in = numElements(ctx.inputTypes[0].shape) * dtypeSize(ctx.inputTypes[0].dtype);
  size_t o = numElements(ctx.outputTypes[0].shape) * dtypeSize(ctx.outputTypes[0].dtype);
  if (in != o)
    return Status::error(opLabel(ctx) + ": output has " + std::to_string(o) + " bytes, input " + std::to_string(in));
  *out = std::make_unique<DeviceCopyKernel>(ctx.cuda);
  return Status::ok();
}

/// Copies described as (output index, input index, geometry).
class StridedCopyKernel : public GeneratedKernel {
 public:
  StridedCopyKernel(DeviceContext* dc, DType t) : GeneratedKernel(dc), dtype_(t) {}
  Status init() { return use(copyKernelName(dtype_), copyKernelSource(dtype_), &fn_); }
  struct Copy {
    int out = 0, in = 0;
    TdGeo geo;
  };
  std::vector<Copy> copies;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    for (Copy& c : copies) {
      void* o = outs[c.out]->raw();
      const void* i = ins[c.in]->raw();
      void* args[] = {&c.geo, &o, &i};
      TANDEM_RETURN_IF_ERROR(launchGridStride(*dc_, fn(fn_), c.geo.n, args));
    }
    return Status::ok();
  }

 private:
  DType dtype_;
  size_t fn_ = 0;
};

Status createTransposeLike(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  std::vector<int64_t> xst = denseStrides(xs), st(ys.size(), 0);
  auto k = std::make_unique<StridedCopyKernel>(ctx.cuda, ctx.inputTypes[0].dtype);
  TANDEM_RETURN_IF_ERROR(k->init());
  StridedCopyKernel::Copy c;
  if (ctx.opType == "Transpose") {
    std::vector<int64_t> perm = ctx.attrs->getInts("perm");
    if (perm.empty())
      for (int64_t d = (int64_t)xs.size() - 1; d >= 0; --d) perm.push_back(d);
    if (perm.size() != xs.size() || ys.size() != xs.size())
      return Status::error(opLabel(ctx) + ": perm has " + std::to_string(perm.size()) + " entries for rank " +
                           std::to_string(xs.size()));
    for (size_t d = 0; d < ys.size(); ++d) {
      if (perm[d] < 0 || perm[d] >= (int64_t)xs.size() || xs[perm[d]] != ys[d])
        return Status::error(opLabel(ctx) + ": perm does not map " + shapeToString(xs) + " to " + shapeToString(ys));
      st[d] = xst[perm[d]];
    }
    TANDEM_RETURN_IF_ERROR(makeGeo(ctx, ys, {st}, &c.geo));
  } else if (ctx.opType == "Expand") {
    if (!ref::broadcastsTo(xs, ys))
      return Status::error(opLabel(ctx) + ": " + shapeToString(xs) + " does not broadcast to " + shapeToString(ys));
    TANDEM_RETURN_IF_ERROR(makeGeo(ctx, ys, {ref::broadcastStrides(xs, ys)}, &c.geo));
  } else {  // Tile: output index modulo the input extent
    if (xs.size() != ys.size())
      return Status::error(opLabel(ctx) + ": rank of " + shapeToString(ys) + " differs from " + shapeToString(xs));
    for (size_t d = 0; d < xs.size(); ++d)
      if (xs[d] == 0 ? ys[d] != 0 : ys[d] % xs[d] != 0)
        return Status::error(opLabel(ctx) + ": " + shapeToString(ys) + " is not a tiling of " + shapeToString(xs));
    TANDEM_RETURN_IF_ERROR(makeGeo(ctx, ys, {xst}, &c.geo));
    for (size_t d = 0; d < xs.size(); ++d) c.geo.imod[d] = std::max<int64_t>(xs[d], 1);
    c.geo.contiguous = 0;
  }
  k->copies.push_back(c);
  *out = std::move(k);
  return Status::ok();
}

// Concat: input k lands at offset_k along the axis of the output. Split: the reverse.
Status createConcatSplit(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  bool concat = ctx.opType == "Concat";
  const Shape& whole = concat ? ctx.outputTypes[0].shape : ctx.inputTypes[0].shape;
  int64_t axis;
  if (!ref::normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)whole.size(), &axis))
    return Status::error(opLabel(ctx) + ": axis out of range for rank " + std::to_string(whole.size()));
  std::vector<int64_t> wst = denseStrides(whole);
  auto k = std::make_unique<StridedCopyKernel>(ctx.cuda, concat ? ctx.outputTypes[0].dtype : ctx.inputTypes[0].dtype);
  TANDEM_RETURN_IF_ERROR(k->init());
  size_t parts = concat ? ctx.inputTypes.size() : ctx.outputTypes.size();
  int64_t offset = 0;
  for (size_t i = 0; i < parts; ++i) {
    const Shape& part = concat ? ctx.inputTypes[i].shape : ctx.outputTypes[i].shape;
    bool fits = part.size() == whole.size();
    for (size_t d = 0; fits && d < whole.size(); ++d) fits = (int64_t)d == axis || part[d] == whole[d];
    if (!fits)
      return Status::error(opLabel(ctx) + ": part " + std::to_string(i) + " " + shapeToString(part) +
                           " does not fit " + shapeToString(whole));
    StridedCopyKernel::Copy c;
    if (!concat && !ctx.outputTypes[i].present()) {
      offset += part[axis];
      continue;
    }
    if (concat) {
      TANDEM_RETURN_IF_ERROR(makeGeo(ctx, part, {denseStrides(part)}, &c.geo));
      for (size_t d = 0; d < part.size(); ++d) c.geo.ostr[d] = wst[d];
      c.geo.obase = offset * wst[axis];
      c.geo.contiguous = 0;
      c.in = (int)i;
    } else {
      TANDEM_RETURN_IF_ERROR(makeGeo(ctx, part, {wst}, &c.geo));
      c.geo.ibase[0] = offset * wst[axis];
      c.out = (int)i;
    }
    offset += part[axis];
    if (c.geo.n) k->copies.push_back(c);
  }
  if (offset != whole[axis])
    return Status::error(opLabel(ctx) + ": parts add up to " + std::to_string(offset) + " along axis " +
                         std::to_string(axis) + ", not " + std::to_string(whole[axis]));
  *out = std::move(k);
  return Status::ok();
}

// Slice-13 with constant starts/ends/axes/steps: one strided copy (ref::slicePlan clamps).
Status createSlice(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  ref::Inputs known(ctx.inputTypes.size(), nullptr);
  for (size_t i = 1; i < ctx.inputTypes.size(); ++i) {
    if (!ctx.inputTypes[i].present()) continue;
    known[i] = ctx.constInputs[i];
    if (!known[i])
      return Status::error(opLabel(ctx) + ": the CUDA kernel needs starts, ends, axes and steps to be constants");
  }
  std::vector<int64_t> start, step;
  Shape count;
  TANDEM_RETURN_IF_ERROR(ref::slicePlan(ctx, xs, known, &start, &step, &count));
  if (count != ys)
    return Status::error(opLabel(ctx) + ": slice of " + shapeToString(xs) + " has shape " + shapeToString(count) +
                         ", output is " + shapeToString(ys));
  auto k = std::make_unique<StridedCopyKernel>(ctx.cuda, ctx.inputTypes[0].dtype);
  TANDEM_RETURN_IF_ERROR(k->init());
  std::vector<int64_t> xst = denseStrides(xs), st(xs.size());
  int64_t base = 0;
  for (size_t d = 0; d < xs.size(); ++d) {
    st[d] = step[d] * xst[d];
    base += start[d] * xst[d];
  }
  StridedCopyKernel::Copy c;
  TANDEM_RETURN_IF_ERROR(makeGeo(ctx, ys, {st}, &c.geo));
  c.geo.ibase[0] = base;
  c.geo.contiguous = 0;
  if (c.geo.n) k->copies.push_back(c);
  *out = std::move(k);
  return Status::ok();
}

// ---- Dropout --------------------------------------------------------------------------------

std::string dropoutName(DType t) { return std::string("td_dropout_") + deviceTypeName(t); }

// Dropout-13 as runtime/cpu/ref/Tensor.cpp's createDropout computes it, operand for operand: one
// thread per Philox block of four elements (DropoutMask::words), kept when the word is >= the
// threshold, scaled by T(1 / (1 - ratio)) computed in double. ratio (f32 or f64), training_mode
// and counter (f32 or i64) are read here from device memory, so a step needs no host sync; a
// null pointer is an absent operand. A kernel cannot fail: where the CPU kernel returns an error
// (ratio outside [0, 1) in training mode, a counter that is not a non-negative whole number)
// every output is NaN and every mask element false, which a loss shows at once. x and y may
// alias (no __restrict__): each element is read before it is written, by the same thread.
std::string dropoutSource(DType t) {
  const std::string T = deviceTypeName(t);
  return "extern \"C\" __global__ void " + dropoutName(t) + "(i64 n, u64 seed, u32 stream, const " + T +
         "* x, " + T + "* y, bool* __restrict__ mask, const void* __restrict__ ratio, int ratioF64, " +
         "const u8* __restrict__ training, const void* __restrict__ counter, int counterI64) {\n  typedef " + T +
         R"( T;
  double r = 0;
  if (training && training[0])
    r = !ratio ? 0.5 : ratioF64 ? *(const double*)ratio : (double)*(const float*)ratio;
  bool bad = !(r >= 0 && r < 1);
  u32 step = 0;
  if (!bad && r != 0 && counter) {
    const double c = counterI64 ? (double)*(const i64*)counter : (double)*(const float*)counter;
    bad = !(c >= 0 && c == floor(c) && c < 18446744073709551616.0);
    if (!bad) step = counterI64 ? (u32)*(const i64*)counter : (u32)(u64)c;
  }
  const double t = r * 4294967296.0;  // DropoutMask::thresholdFor
  const u32 threshold = t <= 0 ? 0u : t >= 4294967295.0 ? 0xFFFFFFFFu : (u32)t;
  const T scale = (T)(1.0 / (1.0 - r));
  const i64 blocks = (n + 3) / 4;
  for (i64 b = (i64)blockIdx.x * blockDim.x + threadIdx.x; b < blocks; b += (i64)gridDim.x * blockDim.x) {
    u32 w[4] = {(u32)(u64)b, (u32)((u64)b >> 32), stream, step};
    if (r != 0 && !bad) td_philox4x32_10(w, (u32)seed, (u32)(seed >> 32));
    for (int j = 0; j < 4; ++j) {
      const i64 i = 4 * b + j;
      if (i >= n) break;
      bool keep;
      T v;
      if (bad) {
        keep = false;
        v = (T)__longlong_as_double(0x7ff8000000000000ll);
      } else if (r == 0) {
        keep = true;
        v = x[i];
      } else {
        keep = w[j] >= threshold;
        v = keep ? x[i] * scale : (T)0;
      }
      y[i] = v;
      if (mask) mask[i] = keep;
    }
  }
}
)";
}

// A Dropout with a training_mode operand: one launch of td_dropout_<type>.
class DropoutKernel : public GeneratedKernel {
 public:
  DropoutKernel(DeviceContext* dc, DType t) : GeneratedKernel(dc), dtype_(t) {}
  Status init() { return use(dropoutName(dtype_), dropoutSource(dtype_), &fn_); }
  int64_t n = 0;
  uint64_t seed = 0;
  uint32_t stream = 0;
  int ratioF64 = 0, counterI64 = 0;
  bool hasRatio = false, hasTraining = false, hasCounter = false;  // present, one element
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    auto at = [&](size_t i, bool has) -> const void* {
      return has && i < ins.size() && ins[i] ? ins[i]->raw() : nullptr;
    };
    const void* x = ins[0]->raw();
    void* y = outs[0]->raw();
    Tensor* maskT = outs.size() > 1 ? outs[1] : nullptr;
    void* mask = maskT ? maskT->raw() : nullptr;
    const void* ratio = at(1, hasRatio);
    const void* training = at(2, hasTraining);
    const void* counter = at(3, hasCounter);
    void* args[] = {&n, &seed, &stream, &x, &y, &mask, &ratio, &ratioF64, &training, &counter, &counterI64};
    return launchGridStride(*dc_, fn(fn_), (n + 3) / 4, args);
  }

 private:
  DType dtype_;
  size_t fn_ = 0;
};

// Dropout without training_mode: y = x and a mask of all true.
class InferenceDropoutKernel : public Kernel {
 public:
  explicit InferenceDropoutKernel(DeviceContext* dc) : copy_(dc), dc_(dc) {}
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    TANDEM_RETURN_IF_ERROR(copy_.run(ins, outs));
    Tensor* mask = outs.size() > 1 ? outs[1] : nullptr;
    if (!mask || !mask->bytes()) return Status::ok();
    return check(cudaMemsetAsync(mask->raw(), 1, mask->bytes(), dc_->compute), "cudaMemsetAsync");
  }
  std::string implName() const override { return "cuda-memcpy"; }

 private:
  DeviceCopyKernel copy_;
  DeviceContext* dc_;
};

Status createDropout(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  using ref::inputPresent;
  const TensorType& x = ctx.inputTypes[0];
  const TensorType& y = ctx.outputTypes[0];
  if (x.dtype != y.dtype || x.shape != y.shape)
    return Status::error(opLabel(ctx) + ": output " + dtypeName(y.dtype) + shapeToString(y.shape) +
                         " is not input " + dtypeName(x.dtype) + shapeToString(x.shape));
  if (ref::outputRequested(ctx, 1) && (ctx.outputTypes[1].dtype != DType::Bool || ctx.outputTypes[1].shape != x.shape))
    return Status::error(opLabel(ctx) + ": mask output must be bool of the input's shape");
  if (inputPresent(ctx, 1) && ((ctx.inputTypes[1].dtype != DType::F32 && ctx.inputTypes[1].dtype != DType::F64) ||
                               numElements(ctx.inputTypes[1].shape) > 1))
    return Status::error(opLabel(ctx) + ": the CUDA kernel needs ratio (input 1) to be an f32 or f64 scalar, got " +
                         dtypeName(ctx.inputTypes[1].dtype) + shapeToString(ctx.inputTypes[1].shape));
  if (inputPresent(ctx, 2) && ctx.inputTypes[2].dtype != DType::Bool)
    return Status::error(opLabel(ctx) + ": training_mode (input 2) must be bool, got " +
                         dtypeName(ctx.inputTypes[2].dtype));
  if (inputPresent(ctx, 3) &&
      ((ctx.inputTypes[3].dtype != DType::F32 && ctx.inputTypes[3].dtype != DType::I64) ||
       numElements(ctx.inputTypes[3].shape) != 1))
    return Status::error(opLabel(ctx) + ": counter (input 3) must be an f32 or i64 scalar, got " +
                         dtypeName(ctx.inputTypes[3].dtype) + shapeToString(ctx.inputTypes[3].shape));
  // No training_mode: inference whatever the ratio and counter (the CPU kernel never reads them).
  if (!inputPresent(ctx, 2)) {
    *out = std::make_unique<InferenceDropoutKernel>(ctx.cuda);
    return Status::ok();
  }
  if (x.dtype != DType::F32 && x.dtype != DType::F64)
    return Status::error(opLabel(ctx) + ": training mode needs f32 or f64 data, got " + dtypeName(x.dtype));
  auto k = std::make_unique<DropoutKernel>(ctx.cuda, x.dtype);
  TANDEM_RETURN_IF_ERROR(k->init());
  k->n = numElements(x.shape);
  // The mask's key and stream: the seed attribute, or the plan's seed and the node name.
  if (ctx.attrs->has("seed")) {
    k->seed = (uint64_t)ctx.attrs->getInt("seed", 0);
  } else {
    k->seed = ctx.seed;
    k->stream = fnv1a32(ctx.nodeName.data(), ctx.nodeName.size());
  }
  k->hasRatio = inputPresent(ctx, 1) && numElements(ctx.inputTypes[1].shape) == 1;
  k->ratioF64 = k->hasRatio && ctx.inputTypes[1].dtype == DType::F64;
  k->hasTraining = numElements(ctx.inputTypes[2].shape) > 0;
  k->hasCounter = inputPresent(ctx, 3);
  k->counterI64 = k->hasCounter && ctx.inputTypes[3].dtype == DType::I64;
  // Operands known at load are checked now, with the CPU kernel's messages, rather than
  // becoming NaN outputs at run time.
  const Tensor* mode = ref::constInputAt(ctx, 2);
  const Tensor* ratio = k->hasRatio ? ref::constInputAt(ctx, 1) : nullptr;
  if (mode && mode->numel() > 0 && mode->data<bool>()[0] && (ratio || !k->hasRatio)) {
    const double r = ratio ? ref::elementAsDouble(*ratio, 0) : 0.5;
    if (!(r >= 0 && r < 1))
      return Status::error(opLabel(ctx) + ": ratio " + std::to_string(r) + " is outside [0, 1)");
    const Tensor* counter = ref::constInputAt(ctx, 3);
    if (r != 0 && counter) {
      const double c = ref::elementAsDouble(*counter, 0);
      if (!(c >= 0 && c == std::floor(c) && c < 18446744073709551616.0))
        return Status::error(opLabel(ctx) + ": counter " + std::to_string(c) + " is not a non-negative whole number");
    }
  }
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> tensorSources() {
  std::vector<std::pair<std::string, std::string>> r;
  for (DType t : {DType::U8, DType::I32, DType::I64}) r.push_back({copyKernelName(t), copyKernelSource(t)});
  for (DType t : {DType::F32, DType::F64}) r.push_back({dropoutName(t), dropoutSource(t)});
  return r;
}

void registerTensorKernels(KernelRegistry& r) {
  for (const char* op : {"Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze"})
    addCuda(r, op, "cuda-memcpy", createReshapeLike);
  addCuda(r, "Dropout", "nvrtc", createDropout);
  for (const char* op : {"Transpose", "Expand", "Tile"}) addCuda(r, op, "nvrtc", createTransposeLike);
  for (const char* op : {"Concat", "Split"}) addCuda(r, op, "nvrtc", createConcatSplit);
  addCuda(r, "Slice", "nvrtc", createSlice);
}

}  // namespace cuda
}  // namespace tandem
