// Ops that pick elements by index: Gather-13 (indices read on the device; negative ones wrap,
// out-of-range ones are clamped since a kernel cannot fail) and Pad (constant, edge, reflect,
// wrap) as a gather through per-dim index maps built at load, like the reference kernel.
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

std::string padName(DType t) { return std::string("td_pad_") + bitsTypeName(t); }

// maps: for dim d, entries [g.aux[d], g.aux[d] + dims[d]) give the input index or -1 (fill).
std::string padSource(DType t) {
  std::string T = bitsTypeName(t);
  return "extern \"C\" __global__ void " + padName(t) + "(TdGeo g, " + T + "* __restrict__ out, const " + T +
         "* __restrict__ in, const i64* __restrict__ maps, " + T + R"( fill) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i, io = 0;
    bool inside = true;
    for (int d = g.rank - 1; d >= 0; --d) {
      i64 x = r % g.dims[d];
      r /= g.dims[d];
      i64 s = maps[g.aux[d] + x];
      if (s < 0) inside = false;
      io += s * g.istr[0][d];
    }
    out[i] = inside ? in[io] : fill;
  }
}
)";
}


namespace {

std::string gatherName(DType data, DType index) {
  return std::string("td_gather_") + bitsTypeName(data) + "_" + dtypeName(index);
}

std::string gatherSource(DType data, DType index) {
  std::string T = bitsTypeName(data), I = deviceTypeName(index);
  return "extern \"C\" __global__ void " + gatherName(data, index) +
         "(i64 n, i64 axisLen, i64 nIdx, i64 inner, " + T + "* __restrict__ out, const " + T +
         "* __restrict__ data, const " + I + R"(* __restrict__ idx) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    i64 in_ = i % inner, j = (i / inner) % nIdx, o = i / (inner * nIdx);
    i64 k = (i64)idx[j];
    if (k < 0) k += axisLen;
    k = k < 0 ? 0 : (k >= axisLen ? axisLen - 1 : k);
    out[i] = data[(o * axisLen + k) * inner + in_];
  }
}
)";
}

class GatherKernel : public GeneratedKernel {
 public:
  GatherKernel(DeviceContext* dc) : GeneratedKernel(dc) {}
  Status init(DType data, DType index) { return use(gatherName(data, index), gatherSource(data, index), &fn_); }
  int64_t n = 0, axisLen = 0, nIdx = 0, inner = 0;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* o = outs[0]->raw();
    const void* d = ins[0]->raw();
    const void* i = ins[1]->raw();
    void* args[] = {&n, &axisLen, &nIdx, &inner, &o, &d, &i};
    return launchGridStride(*dc_, fn(fn_), n, args);
  }

 private:
  size_t fn_ = 0;
};

Status createGather(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& is = ctx.inputTypes[1].shape;
  int64_t axis;
  if (!ref::normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)xs.size(), &axis))
    return Status::error(opLabel(ctx) + ": axis out of range for rank " + std::to_string(xs.size()));
  Shape ys(xs.begin(), xs.begin() + axis);
  ys.insert(ys.end(), is.begin(), is.end());
  ys.insert(ys.end(), xs.begin() + axis + 1, xs.end());
  if (ys != ctx.outputTypes[0].shape)
    return Status::error(opLabel(ctx) + ": output shape " + shapeToString(ctx.outputTypes[0].shape) + " is not " +
                         shapeToString(ys));
  auto k = std::make_unique<GatherKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx.inputTypes[0].dtype, ctx.inputTypes[1].dtype));
  k->n = numElements(ys);
  k->axisLen = xs[axis];
  k->nIdx = numElements(is);
  k->inner = std::max<int64_t>(1, ref::product(xs, axis + 1, xs.size()));
  if (k->axisLen == 0 && k->n > 0)
    return Status::error(opLabel(ctx) + ": gathers from an empty axis");
  *out = std::move(k);
  return Status::ok();
}

class PadKernel : public GeneratedKernel {
 public:
  PadKernel(DeviceContext* dc, DType t) : GeneratedKernel(dc), dtype_(t) {}
  Status init() { return use(padName(dtype_), padSource(dtype_), &fn_); }
  TdGeo geo;
  const void* maps = nullptr;
  uint64_t fill = 0;  // the fill value's bytes, in the low bytes (little-endian)
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* o = outs[0]->raw();
    const void* i = ins[0]->raw();
    void* args[] = {&geo, &o, &i, &maps, &fill};
    return launchGridStride(*dc_, fn(fn_), geo.n, args);
  }

 private:
  DType dtype_;
  size_t fn_ = 0;
};

Status createPad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const std::string mode = ctx.attrs->getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return Status::error(opLabel(ctx) + ": attribute mode='" + mode + "' is not one of constant, reflect, edge, wrap");
  auto constAt = [&](size_t i) -> const Tensor* {
    return i < ctx.constInputs.size() && i < ctx.inputTypes.size() && ctx.inputTypes[i].present() ? ctx.constInputs[i] : nullptr;
  };
  auto present = [&](size_t i) { return i < ctx.inputTypes.size() && ctx.inputTypes[i].present(); };
  for (size_t i = 1; i < 4; ++i)
    if (present(i) && !constAt(i))
      return Status::error(opLabel(ctx) + ": the CUDA kernel needs pads, constant_value and axes to be constants");
  if (!present(1)) return Status::error(opLabel(ctx) + ": the pads input is required");
  const Shape xs = ctx.inputTypes[0].shape, ys = ctx.outputTypes[0].shape;
  const int64_t r = (int64_t)xs.size();
  std::vector<int64_t> pads, axes;
  TANDEM_RETURN_IF_ERROR(ref::readInts(ctx, constAt(1), "pads", &pads));
  if (const Tensor* a = constAt(3)) TANDEM_RETURN_IF_ERROR(ref::readInts(ctx, a, "axes", &axes));
  else for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    return Status::error(opLabel(ctx) + ": pads has " + std::to_string(pads.size()) + " values, expected " +
                         std::to_string(2 * axes.size()));
  std::vector<int64_t> pb(r, 0), pe(r, 0);
  for (size_t j = 0; j < axes.size(); ++j) {
    int64_t ax;
    if (!ref::normalizeAxis(axes[j], r, &ax)) return Status::error(opLabel(ctx) + ": axis out of range");
    pb[ax] = pads[j];
    pe[ax] = pads[axes.size() + j];
  }
  std::vector<int64_t> maps;
  auto k = std::make_unique<PadKernel>(ctx.cuda, ctx.inputTypes[0].dtype);
  TANDEM_RETURN_IF_ERROR(k->init());
  TANDEM_RETURN_IF_ERROR(makeGeo(ctx, ys, {denseStrides(xs)}, &k->geo));
  for (int64_t d = 0; d < r; ++d) {
    const int64_t n = xs[d];
    if (n + pb[d] + pe[d] != ys[d])
      return Status::error(opLabel(ctx) + ": padding dim " + std::to_string(d) + " of " + shapeToString(xs) +
                           " does not give the output " + shapeToString(ys));
    if (mode != "constant" && n == 0 && ys[d] > 0)
      return Status::error(opLabel(ctx) + ": mode '" + mode + "' cannot pad an empty dim");
    k->geo.aux[d] = (int64_t)maps.size();
    for (int64_t o = 0; o < ys[d]; ++o) {
      int64_t s = o - pb[d];
      if (s < 0 || s >= n) {
        if (mode == "constant") s = -1;
        else if (mode == "edge") s = s < 0 ? 0 : n - 1;
        else if (mode == "wrap") s = ((s % n) + n) % n;
        else if (n == 1) s = 0;
        else {
          const int64_t period = 2 * (n - 1);
          s = ((s % period) + period) % period;
          if (s >= n) s = period - s;
        }
      }
      maps.push_back(s);
    }
  }
  if (const Tensor* cv = constAt(2))
    if (cv->numel() > 0) std::memcpy(&k->fill, cv->raw(), dtypeSize(cv->dtype()));
  void* dmaps = nullptr;
  TANDEM_RETURN_IF_ERROR(ctx.cuda->upload(maps.data(), maps.size() * sizeof(int64_t), opLabel(ctx) + " index maps", &dmaps));
  k->maps = dmaps;
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> indexingSources() {
  std::vector<std::pair<std::string, std::string>> r;
  for (DType t : {DType::U8, DType::I32, DType::I64}) {
    for (DType i : {DType::I32, DType::I64}) r.push_back({gatherName(t, i), gatherSource(t, i)});
    r.push_back({padName(t), padSource(t)});
  }
  return r;
}

void registerIndexingKernels(KernelRegistry& r) {
  addCuda(r, "Gather", "nvrtc", createGather);
  addCuda(r, "Pad", "nvrtc", createPad);
}

}  // namespace cuda
}  // namespace tandem
