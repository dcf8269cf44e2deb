// ONNX Transpose-13 for f32 as a oneDNN reorder (threaded, vectorised where oneDNN has a JIT
// reorder for the strides; the reference kernel gathers one element at a time on one thread).
#include <string>

#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

/// Y = transpose(X) as a copy from X viewed through permuted strides into plain Y, on the
/// fewest dims: output dims whose input dims are adjacent and in order merge into one, and
/// size-1 dims drop (NCHW -> NHWC is the 3-D [N, C, HW] -> [N, HW, C]). One dim when X's
/// elements stay in order (a copy, as a 1-D reorder).
struct TransposePlan {
  dims ys;       // merged output dims
  dims strides;  // X's stride (elements) per merged output dim
};

bool transposePlan(const KernelContext& ctx, TransposePlan* p) {
  if (ctx.inputTypes.size() != 1 || ctx.outputTypes.size() != 1 || hasEmptyTensor(ctx))
    return false;
  const Shape& xs = ctx.inputTypes[0].shape;
  const int64_t r = (int64_t)xs.size();
  std::vector<int64_t> perm = ctx.attrs->getInts("perm");
  if (!ctx.attrs->has("perm"))
    for (int64_t d = r - 1; d >= 0; --d) perm.push_back(d);
  if ((int64_t)perm.size() != r || r == 0) return false;
  std::vector<bool> seen(r, false);
  for (int64_t& d : perm) {
    if (!normalizeAxis(d, r, &d) || seen[d]) return false;
    seen[d] = true;
  }
  Shape ys(r);
  for (int64_t d = 0; d < r; ++d) ys[d] = xs[perm[d]];
  if (ys != ctx.outputTypes[0].shape) return false;
  std::vector<int64_t> inSt(r, 1);
  for (int64_t d = r - 2; d >= 0; --d) inSt[d] = inSt[d + 1] * xs[d + 1];
  // Drop size-1 dims, then merge output dim d into the previous one when its input dim
  // follows the previous one's directly (stride_prev = stride_d * size_d).
  p->ys.clear();
  p->strides.clear();
  for (int64_t d = 0; d < r; ++d) {
    const int64_t n = ys[d], st = inSt[perm[d]];
    if (n == 1) continue;
    if (!p->ys.empty() && p->strides.back() == st * n) {
      p->ys.back() *= n;
      p->strides.back() = st;
    } else {
      p->ys.push_back(n);
      p->strides.push_back(st);
    }
  }
  if (p->ys.empty()) {  // every dim 1
    p->ys = {1};
    p->strides = {1};
  }
  return p->ys.size() <= DNNL_MAX_NDIMS;
}

class TransposeKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    TransposePlan p;
    if (!transposePlan(ctx, &p)) return Status::error("Transpose: perm or shapes not expressible");
    dnnl::engine& eng = cpuEngine();
    dnnl::memory::desc s(p.ys, dnnl::memory::data_type::f32, p.strides);
    dnnl::memory::desc d = plainDesc(p.ys);
    dnnl::reorder::primitive_desc pd(eng, s, eng, d, baseAttr());
    prim_ = dnnl::reorder(pd);
    setImpl(pd);
    src_ = dnnl::memory(s, eng, DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(d, eng, DNNL_MEMORY_NONE);
    scratch_.init(pd, &ws_, &args_);
    args_.add(DNNL_ARG_FROM, src_);
    args_.add(DNNL_ARG_TO, dst_);
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("Transpose", [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      scratch_.bindBuffers(ws);
      bind(src_, in[0]->raw());
      bind(dst_, out[0]->raw());
      args_.execute(prim_);
      return Status::ok();
    });
  }

 private:
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  dnnl::memory src_, dst_;
  ExecArgs args_;
};

}  // namespace

void registerDnnlTransposeKernels(KernelRegistry& r) {
  r.add(makeDef(
      "Transpose",
      [](const KernelContext& ctx) {
        TransposePlan p;
        return transposePlan(ctx, &p);
      },
      [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
        return guardDnnl(ctx, [&] {
          auto k = std::make_unique<TransposeKernel>();
          TANDEM_RETURN_IF_ERROR(k->init(ctx));
          *out = std::move(k);
          return Status::ok();
        });
      }));
}

}  // namespace dnnlcpu
}  // namespace tandem
