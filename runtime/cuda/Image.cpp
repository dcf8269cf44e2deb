// Resize-13 (NVRTC), mirroring runtime/cpu/ref/Image.cpp: the reference's tap tables
// (ref::resizePlan, every mode and coordinate transformation) are uploaded at load, and one
// launch per axis that changes samples it, with the reference's order of additions and
// roundings (explicit _rn operations: NVRTC would otherwise fuse w * x + acc into an FMA, which
// the x86-64 reference, built without FMA, does not), so results are bit-identical.
#include <cstring>

#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/Generated.h"

namespace tandem {
namespace cuda {

namespace {

std::string resizeName(DType t) { return std::string("td_resize_") + deviceTypeName(t); }

// One pass over axis `nIn -> nOut` of a [outer, nIn, inner] tensor: out[o, j, i] = extrap when
// outside[j], else 0 + w[j,0] * in[o, idx[j,0], i] + w[j,1] * ... (zero weights skipped), each
// product and sum rounded to T like the reference's `dst[i] += w * src[i]`.
std::string resizeSource(DType t) {
  const std::string T = deviceTypeName(t);
  const bool f64 = t == DType::F64;
  const std::string mul = f64 ? "__dmul_rn" : "__fmul_rn", add = f64 ? "__dadd_rn" : "__fadd_rn";
  return "extern \"C\" __global__ void " + resizeName(t) +
         "(i64 outer, i64 nIn, i64 nOut, i64 inner, i64 taps, " + T + "* __restrict__ out, const " + T +
         "* __restrict__ in, const i64* __restrict__ idx, const " + T + "* __restrict__ w, const u8* __restrict__ outside, " +
         T + R"( extrap) {
  const i64 n = outer * nOut * inner;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    const i64 in_ = i % inner, j = (i / inner) % nOut, o = i / (inner * nOut);
    if (outside[j]) {
      out[i] = extrap;
      continue;
    }
    )" + T + R"( acc = 0;
    for (i64 t = 0; t < taps; ++t) {
      const )" + T + R"( wt = w[j * taps + t];
      if (wt == 0) continue;
      acc = )" + add + "(acc, " + mul + R"((wt, in[(o * nIn + idx[j * taps + t]) * inner + in_]));
    }
    out[i] = acc;
  }
}
)";
}

struct ResizePass {
  int64_t outer = 0, nIn = 0, nOut = 0, inner = 0, taps = 1;
  const void* idx = nullptr;  // device copies of the pass's tables
  const void* w = nullptr;
  const void* outside = nullptr;
};

class ResizeKernel : public GeneratedKernel {
 public:
  ResizeKernel(DeviceContext* dc, DType t) : GeneratedKernel(dc), dtype_(t) {}
  Status init() { return use(resizeName(dtype_), resizeSource(dtype_), &fn_); }
  std::vector<ResizePass> passes;
  size_t scratchOffset = 0;  // byte offset of the second scratch buffer in the workspace
  size_t bytes = 0;          // of X (a plan whose every axis is unchanged copies X)
  double extrap = 0;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    if (passes.empty()) {
      if (bytes == 0 || outs[0]->raw() == ins[0]->raw()) return Status::ok();
      return check(cudaMemcpyAsync(outs[0]->raw(), ins[0]->raw(), bytes, cudaMemcpyDeviceToDevice, dc_->compute),
                   "cudaMemcpyAsync");
    }
    // Pass k reads pass k-1's result; the intermediate ones alternate between two halves of
    // the shared workspace (kernels run one after another on the compute stream).
    char* scratch[2] = {static_cast<char*>(dc_->workspace), static_cast<char*>(dc_->workspace) + scratchOffset};
    const void* src = ins[0]->raw();
    for (size_t k = 0; k < passes.size(); ++k) {
      ResizePass& p = passes[k];
      void* dst = k + 1 == passes.size() ? outs[0]->raw() : scratch[k % 2];
      float ef = (float)extrap;
      void* e = dtype_ == DType::F64 ? (void*)&extrap : (void*)&ef;
      void* args[] = {&p.outer, &p.nIn, &p.nOut, &p.inner, &p.taps, &dst, &src, &p.idx, &p.w, &p.outside, e};
      TANDEM_RETURN_IF_ERROR(launchGridStride(*dc_, fn(fn_), p.outer * p.nOut * p.inner, args));
      src = dst;
    }
    return Status::ok();
  }

 private:
  DType dtype_;
  size_t fn_ = 0;
};

// Inputs X (f32/f64), roi, scales, sizes (constants, as the reference needs them); output Y.
Status createResize(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const DType t = ctx.inputTypes[0].dtype;
  if (t != DType::F32 && t != DType::F64) return Status::error(opLabel(ctx) + ": resizes f32 or f64 data");
  std::vector<ref::ResizeAxis> axes;
  std::vector<size_t> axisDim;
  TANDEM_RETURN_IF_ERROR(ref::resizePlan(ctx, &axes, &axisDim));
  auto k = std::make_unique<ResizeKernel>(ctx.cuda, t);
  TANDEM_RETURN_IF_ERROR(k->init());
  const Shape& xs = ctx.inputTypes[0].shape;
  const size_t esz = dtypeSize(t);
  k->bytes = (size_t)numElements(xs) * esz;
  k->extrap = t == DType::F64 ? ctx.attrs->getFloat("extrapolation_value", 0.f)
                              : (double)(float)ctx.attrs->getFloat("extrapolation_value", 0.f);
  Shape cur = xs;
  size_t scratch = 0;
  for (size_t a = 0; a < axes.size(); ++a) {
    const ref::ResizeAxis& ax = axes[a];
    const size_t d = axisDim[a];
    ResizePass p;
    p.outer = ref::product(cur, 0, d), p.inner = ref::product(cur, d + 1, cur.size());
    p.nIn = ax.in, p.nOut = ax.out, p.taps = ax.taps;
    cur[d] = ax.out;
    if (a + 1 < axes.size()) scratch = std::max(scratch, (size_t)numElements(cur) * esz);
    // The weights in T, as the reference rounds them (T(ax.w[...])).
    std::vector<char> w(ax.w.size() * esz);
    for (size_t i = 0; i < ax.w.size(); ++i) {
      if (t == DType::F64) std::memcpy(&w[i * esz], &ax.w[i], esz);
      else {
        const float f = (float)ax.w[i];
        std::memcpy(&w[i * esz], &f, esz);
      }
    }
    void *di = nullptr, *dw = nullptr, *dout = nullptr;
    const std::string what = opLabel(ctx) + " tap tables";
    if (p.nOut > 0) {
      TANDEM_RETURN_IF_ERROR(ctx.cuda->upload(ax.idx.data(), ax.idx.size() * sizeof(int64_t), what, &di));
      TANDEM_RETURN_IF_ERROR(ctx.cuda->upload(w.data(), w.size(), what, &dw));
      TANDEM_RETURN_IF_ERROR(ctx.cuda->upload(ax.outside.data(), ax.outside.size(), what, &dout));
    }
    p.idx = di, p.w = dw, p.outside = dout;
    k->passes.push_back(p);
  }
  if (cur != ctx.outputTypes[0].shape)
    return Status::error(opLabel(ctx) + ": the passes give " + shapeToString(cur) + ", not the output " +
                         shapeToString(ctx.outputTypes[0].shape));
  // Two intermediate buffers, the second 256-byte aligned.
  k->scratchOffset = (scratch + 255) / 256 * 256;
  if (axes.size() > 1) ctx.cuda->reserveWorkspace(k->scratchOffset + (axes.size() > 2 ? scratch : 0));
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> imageSources() {
  return {{resizeName(DType::F32), resizeSource(DType::F32)}, {resizeName(DType::F64), resizeSource(DType::F64)}};
}

void registerImageKernels(KernelRegistry& r) { addCuda(r, "Resize", "nvrtc", createResize); }

}  // namespace cuda
}  // namespace tandem
