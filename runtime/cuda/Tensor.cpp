// Data movement without arithmetic: the reshape family (a device copy, or nothing when the plan
// aliases the buffers), and Transpose, Expand, Tile, Concat, Split, Slice as launches of the generated
// strided copy (td_copy_<bits>, Generated.cpp), one per operand.
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

}  // namespace

std::vector<std::pair<std::string, std::string>> tensorSources() {
  std::vector<std::pair<std::string, std::string>> r;
  for (DType t : {DType::U8, DType::I32, DType::I64}) r.push_back({copyKernelName(t), copyKernelSource(t)});
  return r;
}

void registerTensorKernels(KernelRegistry& r) {
  for (const char* op : {"Identity", "Dropout", "Flatten", "Reshape", "Squeeze", "Unsqueeze"})
    addCuda(r, op, "cuda-memcpy", createReshapeLike);
  for (const char* op : {"Transpose", "Expand", "Tile"}) addCuda(r, op, "nvrtc", createTransposeLike);
  for (const char* op : {"Concat", "Split"}) addCuda(r, op, "nvrtc", createConcatSplit);
  addCuda(r, "Slice", "nvrtc", createSlice);
}

}  // namespace cuda
}  // namespace tandem
