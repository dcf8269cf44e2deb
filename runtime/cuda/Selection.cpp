// Ops that select elements by index or by value (NVRTC), mirroring runtime/cpu/ref/Selection.cpp:
// GatherElements-13 (indices read on the device; negative ones wrap, out-of-range ones are
// clamped since a kernel cannot fail, where the reference errors) and TopK-11 (one block per row
// selects the K first in the reference's order, one at a time) and NonMaxSuppression-11 (the
// IoU mask on the device, walked on the host: torchvision's nms).
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/CudaKernelTable.h"
#include "runtime/cuda/Generated.h"
#include "runtime/cuda/HostPasses.h"

namespace tandem {
namespace cuda {

namespace {

// ---- GatherElements ------------------------------------------------------------------------

std::string gatherElementsName(DType data, DType index) {
  return std::string("td_gather_elements_") + bitsTypeName(data) + "_" + dtypeName(index);
}

// g iterates the indices' shape; istr[0] holds data's strides, 0 on the axis; aux[0] is the
// axis stride, aux[1] the axis extent.
std::string gatherElementsSource(DType data, DType index) {
  std::string T = bitsTypeName(data), I = deviceTypeName(index);
  return "extern \"C\" __global__ void " + gatherElementsName(data, index) + "(TdGeo g, " + T +
         "* __restrict__ out, const " + T + "* __restrict__ data, const " + I + R"(* __restrict__ idx) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i, io = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      io += (r % g.dims[d]) * g.istr[0][d];
      r /= g.dims[d];
    }
    i64 k = (i64)idx[i];
    if (k < 0) k += g.aux[1];
    k = k < 0 ? 0 : (k >= g.aux[1] ? g.aux[1] - 1 : k);
    out[i] = data[io + k * g.aux[0]];
  }
}
)";
}

class GatherElementsKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(DType data, DType index) {
    return use(gatherElementsName(data, index), gatherElementsSource(data, index), &fn_);
  }
  TdGeo geo;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* o = outs[0]->raw();
    const void* d = ins[0]->raw();
    const void* i = ins[1]->raw();
    void* args[] = {&geo, &o, &d, &i};
    return launchGridStride(*dc_, fn(fn_), geo.n, args);
  }

 private:
  size_t fn_ = 0;
};

// Inputs data and indices (i32/i64, data's rank, no larger than data off the axis); output of
// the indices' shape.
Status createGatherElements(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& is = ctx.inputTypes[1].shape;
  int64_t axis;
  if (!ref::normalizeAxis(ctx.attrs->getInt("axis", 0), (int64_t)xs.size(), &axis) || is.size() != xs.size())
    return Status::error(opLabel(ctx) + ": axis or indices rank does not fit data " + shapeToString(xs));
  for (size_t d = 0; d < xs.size(); ++d)
    if ((int64_t)d != axis && is[d] > xs[d])
      return Status::error(opLabel(ctx) + ": indices " + shapeToString(is) + " exceed data " + shapeToString(xs) +
                           " in dim " + std::to_string(d));
  if (ctx.outputTypes[0].shape != is)
    return Status::error(opLabel(ctx) + ": output shape must be the indices' " + shapeToString(is));
  if (xs[axis] == 0 && numElements(is) > 0) return Status::error(opLabel(ctx) + ": gathers from an empty axis");
  auto k = std::make_unique<GatherElementsKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx.inputTypes[0].dtype, ctx.inputTypes[1].dtype));
  std::vector<int64_t> st = denseStrides(xs);
  const int64_t axisStride = st[axis];
  st[axis] = 0;
  TANDEM_RETURN_IF_ERROR(makeGeo(ctx, is, {st}, &k->geo));
  k->geo.aux[0] = axisStride;
  k->geo.aux[1] = xs[axis];
  *out = std::move(k);
  return Status::ok();
}

// ---- TopK ------------------------------------------------------------------------------------

// Threads of the block that selects one row's K (kCudaTopKMax, CudaKernelTable.h, bounds K: the
// block scans its row once per selection).
constexpr int kTopKThreads = 256;

std::string topKName(DType t) { return std::string("td_topk_") + deviceTypeName(t); }

// Block b takes rows b, b + gridDim.x, ...; row (o, in_) is x[o * n * inner + j * inner + in_].
// Selection s is the first element, in the order `before`, of those after selection s - 1: the
// reference's partial_sort order (larger, or smaller, first; equal values by lower index).
// NaN, which the reference's comparison leaves unordered, is ranked after every number here.
std::string topKSource(DType t) {
  const std::string T = deviceTypeName(t), N = topKName(t);
  return "__device__ __forceinline__ bool " + N + "_before(" + T + " a, i64 ia, " + T + " b, i64 ib, int largest) {\n" +
         (t == DType::F32 || t == DType::F64 ? "  const bool na = a != a, nb = b != b;\n"
                                             : "  const bool na = false, nb = false;\n") +
         R"(  if (na || nb) return na == nb ? ia < ib : nb;
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}
extern "C" __global__ void )" + N + "(i64 rows, i64 n, i64 inner, i64 k, int largest, " + T +
         "* __restrict__ vals, i64* __restrict__ idxOut, const " + T + R"(* __restrict__ x) {
  __shared__ )" + T + R"( wv[32];
  __shared__ i64 wi[32];
  __shared__ )" + T + R"( pv;
  __shared__ i64 pi;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const i64 o = row / inner, in_ = row % inner;
    const )" + T + R"(* src = x + o * n * inner + in_;
    )" + T + R"( prevV = 0;
    i64 prevI = -1;
    for (i64 s = 0; s < k; ++s) {
      )" + T + R"( bv = 0;
      i64 bi = -1;
      for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
        const )" + T + R"( v = src[j * inner];
        if (prevI >= 0 && !)" + N + R"(_before(prevV, prevI, v, j, largest)) continue;
        if (bi < 0 || )" + N + R"(_before(v, j, bv, bi, largest)) {
          bv = v;
          bi = j;
        }
      }
      for (int off = 16; off > 0; off >>= 1) {
        const )" + T + R"( ov = __shfl_down_sync(0xffffffffu, bv, off);
        const i64 oi = __shfl_down_sync(0xffffffffu, bi, off);
        if (oi >= 0 && (bi < 0 || )" + N + R"(_before(ov, oi, bv, bi, largest))) {
          bv = ov;
          bi = oi;
        }
      }
      if (lane == 0) {
        wv[warp] = bv;
        wi[warp] = bi;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int w = 1; w < warps; ++w)
          if (wi[w] >= 0 && (bi < 0 || )" + N + R"(_before(wv[w], wi[w], bv, bi, largest))) {
            bv = wv[w];
            bi = wi[w];
          }
        pv = bv;
        pi = bi;
        const i64 at = (o * k + s) * inner + in_;
        vals[at] = bv;
        if (idxOut) idxOut[at] = bi;
      }
      __syncthreads();
      prevV = pv;
      prevI = pi;
    }
  }
}
)";
}

class TopKKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init(DType t) { return use(topKName(t), topKSource(t), &fn_); }
  int64_t rows = 0, n = 0, inner = 0, k = 0;
  int largest = 1;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    void* v = outs[0]->raw();
    void* i = outs.size() > 1 && outs[1] ? outs[1]->raw() : nullptr;
    const void* x = ins[0]->raw();
    void* args[] = {&rows, &n, &inner, &k, &largest, &v, &i, &x};
    if (k == 0) return Status::ok();
    return launchBlocks(*dc_, fn(fn_), rows, kTopKThreads, args);
  }

 private:
  size_t fn_ = 0;
};

// Inputs X and K (a constant: the plan sized the outputs by it); outputs Values and optional
// Indices (i64). `sorted` is read as the reference does: the results are always in order.
Status createTopK(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& xs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  int64_t axis;
  if (!ref::normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)xs.size(), &axis) || ys.size() != xs.size())
    return Status::error(opLabel(ctx) + ": axis out of range for rank " + std::to_string(xs.size()));
  for (size_t d = 0; d < xs.size(); ++d)
    if ((int64_t)d != axis ? ys[d] != xs[d] : ys[d] > xs[d])
      return Status::error(opLabel(ctx) + ": output " + shapeToString(ys) + " does not fit X " + shapeToString(xs));
  if (ctx.outputTypes.size() > 1 && ctx.outputTypes[1].present() &&
      (ctx.outputTypes[1].dtype != DType::I64 || ctx.outputTypes[1].shape != ys))
    return Status::error(opLabel(ctx) + ": Indices must be i64 of the Values' shape");
  if (ys[axis] > kCudaTopKMax)
    return Status::error(opLabel(ctx) + ": K = " + std::to_string(ys[axis]) + " is above the CUDA kernel's " +
                         std::to_string(kCudaTopKMax));
  auto k = std::make_unique<TopKKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init(ctx.inputTypes[0].dtype));
  k->n = xs[axis], k->k = ys[axis];
  k->inner = ref::product(xs, axis + 1, xs.size());
  k->rows = ref::product(xs, 0, axis) * k->inner;
  k->largest = ctx.attrs->getInt("largest", 1) != 0 ? 1 : 0;
  *out = std::move(k);
  return Status::ok();
}


// ---- NonMaxSuppression ---------------------------------------------------------------------
//
// The plan sized the output [selected, 3] at compile time (the shape function needs constant
// operands: runtime/DataDependent.h), so, like the CPU kernel, this one computes the selection
// and checks it has the planned size. The device computes the suppression bitmask, one 64-bit
// word per (batch, kept box r, 64 candidates), in the reference's arithmetic (each operation
// rounded, no FMA, its min/max and comparisons, so NaN boxes decide as there); the host copies
// the mask and the scores back and walks them per class (cuda::nmsSelect). One synchronisation
// per run: ONNX Runtime's CUDA NMS also copies its count back. The mask needs batches * n *
// ceil(n / 64) * 8 bytes of the plan's workspace (1.25 MB per batch at n = 10,000).

const char* kNmsName = "td_nms_mask";

std::string nmsSource() {
  return R"(__device__ __forceinline__ float td_nms_min(float a, float b) { return b < a ? b : a; }
__device__ __forceinline__ float td_nms_max(float a, float b) { return a < b ? b : a; }
// Box p's corners (y1, x1, y2, x2) as the reference orders them.
__device__ __forceinline__ void td_nms_corners(const float* p, int center, float* q) {
  if (center) {
    const float hw = __fdiv_rn(p[2], 2.f), hh = __fdiv_rn(p[3], 2.f);
    q[0] = __fsub_rn(p[1], hh);
    q[1] = __fsub_rn(p[0], hw);
    q[2] = __fadd_rn(p[1], hh);
    q[3] = __fadd_rn(p[0], hw);
  } else {
    q[0] = td_nms_min(p[0], p[2]);
    q[1] = td_nms_min(p[1], p[3]);
    q[2] = td_nms_max(p[0], p[2]);
    q[3] = td_nms_max(p[1], p[3]);
  }
}
// Whether candidate a is suppressed by kept box o (the reference's test, same operand order).
__device__ __forceinline__ bool td_nms_suppresses(const float* a, const float* o, float iou) {
  const float ih = __fsub_rn(td_nms_min(a[2], o[2]), td_nms_max(a[0], o[0]));
  const float iw = __fsub_rn(td_nms_min(a[3], o[3]), td_nms_max(a[1], o[1]));
  if (ih <= 0 || iw <= 0) return false;
  const float inter = __fmul_rn(ih, iw);
  const float areaA = __fmul_rn(__fsub_rn(a[2], a[0]), __fsub_rn(a[3], a[1]));
  const float areaO = __fmul_rn(__fsub_rn(o[2], o[0]), __fsub_rn(o[3], o[1]));
  const float uni = __fsub_rn(__fadd_rn(areaA, areaO), inter);
  return uni > 0 && __fdiv_rn(inter, uni) > iou;
}
// Word w of row r of batch b: bit jj set when candidate w * 64 + jj is suppressed by box r.
extern "C" __global__ void td_nms_mask(i64 batches, i64 n, i64 words, int center, float iou,
                                       const float* __restrict__ boxes, unsigned long long* __restrict__ mask) {
  const i64 total = batches * n * words;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    const i64 w = i % words, r = (i / words) % n, b = i / (words * n);
    float o[4], a[4];
    td_nms_corners(boxes + (b * n + r) * 4, center, o);
    unsigned long long bits = 0;
    for (int jj = 0; jj < 64; ++jj) {
      const i64 j = w * 64 + jj;
      if (j >= n) break;
      if (j == r) continue;
      td_nms_corners(boxes + (b * n + j) * 4, center, a);
      if (td_nms_suppresses(a, o, iou)) bits |= 1ull << jj;
    }
    mask[i] = bits;
  }
}
)";
}

class NmsKernel : public GeneratedKernel {
 public:
  using GeneratedKernel::GeneratedKernel;
  Status init() { return use(kNmsName, nmsSource(), &fn_); }
  std::string label;
  int64_t batches = 0, classes = 0, n = 0, planned = 0, maxPerClass = 0;
  int center = 0;
  float iou = 0, scoreThreshold = 0;
  bool hasScoreThreshold = false;
  Status run(const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) override {
    std::vector<int64_t> sel;
    if (maxPerClass > 0 && n > 0 && batches > 0 && classes > 0) {
      int64_t words = nmsMaskWords(n);
      const void* boxes = ins[0]->raw();
      void* mask = dc_->workspace;
      void* args[] = {&batches, &n, &words, &center, &iou, &boxes, &mask};
      TANDEM_RETURN_IF_ERROR(launchGridStride(*dc_, fn(fn_), batches * n * words, args));
      std::vector<uint64_t> hostMask(batches * n * words);
      std::vector<float> scores(batches * classes * n);
      TANDEM_CUDA_RETURN(cudaMemcpyAsync(hostMask.data(), mask, hostMask.size() * 8, cudaMemcpyDeviceToHost, dc_->compute));
      TANDEM_CUDA_RETURN(cudaMemcpyAsync(scores.data(), ins[1]->raw(), scores.size() * 4, cudaMemcpyDeviceToHost,
                                         dc_->compute));
      TANDEM_CUDA_RETURN(cudaStreamSynchronize(dc_->compute));
      nmsSelect(scores.data(), hostMask.data(), batches, classes, n, maxPerClass, hasScoreThreshold, scoreThreshold,
                &sel);
    }
    if ((int64_t)sel.size() / 3 != planned)
      return Status::error(label + ": data-dependent output: the plan has " + std::to_string(planned) +
                           " entries but the operand values select " + std::to_string(sel.size() / 3));
    if (sel.empty()) return Status::ok();
    TANDEM_CUDA_RETURN(cudaMemcpyAsync(outs[0]->raw(), sel.data(), sel.size() * 8, cudaMemcpyHostToDevice, dc_->compute));
    // `sel` is freed on return: the copy must be done by then.
    TANDEM_CUDA_RETURN(cudaStreamSynchronize(dc_->compute));
    return Status::ok();
  }

 private:
  size_t fn_ = 0;
};

// Inputs boxes f32 [batches, n, 4], scores f32 [batches, classes, n], then the constants
// max_output_boxes_per_class (i64), iou_threshold and score_threshold (f32, one element each;
// cudaKernelRejects refuses them non-constant); output i64 [selected, 3].
Status createNonMaxSuppression(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  const Shape& bs = ctx.inputTypes[0].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  if (ctx.inputTypes.size() < 2 || !ctx.inputTypes[1].present())
    return Status::error(opLabel(ctx) + ": scores (input 1) is required");
  const Shape& ss = ctx.inputTypes[1].shape;
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1])
    return Status::error(opLabel(ctx) + ": boxes " + shapeToString(bs) + " and scores " + shapeToString(ss) +
                         " must be [batches, n, 4] and [batches, classes, n]");
  if (ys.size() != 2 || ys[1] != 3 || ctx.outputTypes[0].dtype != DType::I64)
    return Status::error(opLabel(ctx) + ": output must be i64 [selected, 3]");
  auto k = std::make_unique<NmsKernel>(ctx.cuda);
  TANDEM_RETURN_IF_ERROR(k->init());
  k->label = opLabel(ctx);
  k->batches = bs[0], k->n = bs[1], k->classes = ss[1], k->planned = ys[0];
  k->center = ctx.attrs->getInt("center_point_box", 0) != 0 ? 1 : 0;
  auto constant = [&](size_t i) -> const Tensor* {
    return i < ctx.constInputs.size() && i < ctx.inputTypes.size() && ctx.inputTypes[i].present() ? ctx.constInputs[i]
                                                                                                  : nullptr;
  };
  for (size_t i = 2; i < 5; ++i)
    if (i < ctx.inputTypes.size() && ctx.inputTypes[i].present() && (!constant(i) || constant(i)->numel() != 1))
      return Status::error(opLabel(ctx) + ": input " + std::to_string(i) + " must be a one-element constant");
  if (const Tensor* m = constant(2))
    k->maxPerClass = m->dtype() == DType::I64 ? m->data<int64_t>()[0] : m->data<int32_t>()[0];
  if (const Tensor* t = constant(3)) k->iou = t->data<float>()[0];
  if (const Tensor* t = constant(4)) k->hasScoreThreshold = true, k->scoreThreshold = t->data<float>()[0];
  ctx.cuda->reserveWorkspace((size_t)(k->batches * k->n * nmsMaskWords(k->n)) * 8);
  *out = std::move(k);
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> selectionSources() {
  std::vector<std::pair<std::string, std::string>> r;
  for (DType t : {DType::U8, DType::I32, DType::I64})
    for (DType i : {DType::I32, DType::I64}) r.push_back({gatherElementsName(t, i), gatherElementsSource(t, i)});
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64}) r.push_back({topKName(t), topKSource(t)});
  r.push_back({kNmsName, nmsSource()});
  return r;
}

void registerSelectionKernels(KernelRegistry& r) {
  addCuda(r, "GatherElements", "nvrtc", createGatherElements);
  addCuda(r, "TopK", "nvrtc", createTopK);
  addCuda(r, "NonMaxSuppression", "nvrtc", createNonMaxSuppression);
}

}  // namespace cuda
}  // namespace tandem
