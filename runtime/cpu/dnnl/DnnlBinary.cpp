// oneDNN binary ops for f32 with numpy broadcasting (ONNX Add/Sub/Mul/Div-14, Min/Max-13 with two
// inputs). dnnl::binary broadcasts only its second source, so the full-shape operand goes first.
// The plan may keep a 4-D operand or the result in the host's activation layout
// (input_layouts / output_layouts: a squeeze-excitation scale x * s[N, C, 1, 1] between a
// depthwise and a pointwise convolution, passes/Fuse.cpp): the primitive computes in the full-
// shape operand's layout and the result is reordered where the plan wants another.
#include <algorithm>
#include <string>

#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

struct BinaryPlan {
  dnnl::algorithm alg = dnnl::algorithm::binary_add;
  dims src0, src1, dst;
  // The caller's layouts (userDesc: plain unless the plan keeps the value blocked).
  dnnl::memory::desc src0User, src1User, dstUser;
  bool swapped = false;  // src0 is ONNX input B
  bool negate = false;   // Sub with swapped operands: A - B = -(B - A), exact in floating point
};

bool binaryPlan(const KernelContext& ctx, BinaryPlan* p) {
  if (ctx.inputTypes.size() != 2 || ctx.outputTypes.empty() || hasEmptyTensor(ctx)) return false;
  const std::string& op = ctx.opType;
  bool commutative = true;
  if (op == "Add") p->alg = dnnl::algorithm::binary_add;
  else if (op == "Mul") p->alg = dnnl::algorithm::binary_mul;
  else if (op == "Min") p->alg = dnnl::algorithm::binary_min;
  else if (op == "Max") p->alg = dnnl::algorithm::binary_max;
  else if (op == "Sub") p->alg = dnnl::algorithm::binary_sub, commutative = false;
  else if (op == "Div") p->alg = dnnl::algorithm::binary_div, commutative = false;
  else return false;

  const Shape& y = ctx.outputTypes[0].shape;
  const size_t r = std::max<size_t>(1, y.size());
  if (r > DNNL_MAX_NDIMS) return false;
  auto padded = [r](const Shape& s) -> dims {
    if (s.size() > r) return {};
    dims d(r - s.size(), 1);
    d.insert(d.end(), s.begin(), s.end());
    return d;
  };
  dims a = padded(ctx.inputTypes[0].shape), b = padded(ctx.inputTypes[1].shape);
  dims out = padded(y);
  if (a.empty() || b.empty()) return false;
  auto broadcastsTo = [&](const dims& s) {
    for (size_t i = 0; i < r; ++i)
      if (s[i] != out[i] && s[i] != 1) return false;
    return true;
  };
  if (a == out && broadcastsTo(b)) {
    p->src0 = a;
    p->src1 = b;
  } else if (b == out && broadcastsTo(a) && (commutative || op == "Sub")) {
    p->src0 = b;
    p->src1 = a;
    p->swapped = true;
    p->negate = op == "Sub";
  } else {
    return false;  // both operands broadcast, or Div with a broadcast numerator
  }
  p->dst = out;
  const size_t i0 = p->swapped ? 1 : 0;
  p->src0User = userDesc(ctx, true, i0, p->src0);
  p->src1User = userDesc(ctx, true, 1 - i0, p->src1);
  // A per-channel src1 [N or 1, C, 1, 1] beside a blocked src0: the same bytes in src0's layout
  // (a block spans only channels), which oneDNN's jit wants (nChw8c with an abcd src1 is ref).
  // With every spatial dim 1 and no padded channels, channel-blocked and nhwc put (n, c) at
  // n * C + c, as plain does.
  if (p->src0.size() >= 3 && p->src0.size() <= 5 && !(p->src0User == plainDesc(p->src0)) &&
      p->src1User == plainDesc(p->src1) &&
      std::all_of(p->src1.begin() + 2, p->src1.end(), [](int64_t d) { return d == 1; })) {
    const dnnl::memory::desc like = channelBlockedDesc(p->src1);
    if (like.get_size() == p->src1User.get_size()) p->src1User = like;
  }
  p->dstUser = userDesc(ctx, false, 0, p->dst);
  return true;
}

dnnl::primitive_attr binaryAttr(const BinaryPlan& p) {
  dnnl::primitive_attr attr = baseAttr();
  if (p.negate) {
    dnnl::post_ops po;
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, -1.f, 0.f);
    attr.set_post_ops(po);
  }
  return attr;
}

dnnl::binary::primitive_desc binaryPd(const BinaryPlan& p) {
  // dst in src0's desc: src0 has the result's dims, and oneDNN's jit binary wants dst in
  // src0's format (the kernel reorders to the plan's dst layout where it differs).
  dnnl::binary::desc bd(p.alg, p.src0User, p.src1User, p.src0User);
  return dnnl::binary::primitive_desc(bd, binaryAttr(p), cpuEngine());
}

/// Whether oneDNN runs this broadcast with a jit kernel. Its jit binary covers no broadcast,
/// a scalar, per-channel and a few spatial patterns; anything else (a middle dim broadcast,
/// Swin's [1,64,3,49,49] + [1,64,1,49,49]) gets "ref:any", one element at a time with index
/// arithmetic: 17 ms there against 0.4 ms for the reference kernels' broadcasting rows
/// (runtime/cpu/ref/Elementwise.cpp), which then take the op.
bool jitBroadcast(const BinaryPlan& p) {
  try {
    return !isReferenceImpl(binaryPd(p));
  } catch (const dnnl::error&) {
    return false;
  }
}

class BinaryKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    BinaryPlan p;
    if (!binaryPlan(ctx, &p))
      return Status::error(ctx.opType + ": broadcast not expressible with dnnl::binary");
    op_ = ctx.opType;
    swapped_ = p.swapped;
    dnnl::engine& eng = cpuEngine();
    dnnl::binary::primitive_desc pd = binaryPd(p);
    prim_ = dnnl::binary(pd);
    scratch_.init(pd, &ws_, &args_);
    src0_ = dnnl::memory(p.src0User, eng, DNNL_MEMORY_NONE);
    src1_ = dnnl::memory(p.src1User, eng, DNNL_MEMORY_NONE);
    dst_.init(p.dstUser, pd.dst_desc(), /*isInput=*/false, &ws_);
    setImpl(pd);
    if (dst_.reordered()) impl_ += " reorders[dst]";
    args_.add(DNNL_ARG_SRC_0, src0_);
    args_.add(DNNL_ARG_SRC_1, src1_);
    args_.add(DNNL_ARG_DST, dst_.inner());
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun(op_.c_str(), [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      scratch_.bindBuffers(ws);
      bind(src0_, in[swapped_ ? 1 : 0]->raw());
      bind(src1_, in[swapped_ ? 0 : 1]->raw());
      dst_.bindBuffers(out[0]->raw(), ws);
      args_.execute(prim_);
      dst_.toUser();
      return Status::ok();
    });
  }

 private:
  std::string op_;
  bool swapped_ = false;
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  dnnl::memory src0_, src1_;
  Operand dst_;
  ExecArgs args_;
};

}  // namespace

void registerDnnlBinaryKernels(KernelRegistry& r) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Min", "Max"}) {
    r.add(makeDef(
        op,
        [](const KernelContext& ctx) {
          BinaryPlan p;
          return binaryPlan(ctx, &p) && jitBroadcast(p);
        },
        [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
          return guardDnnl(ctx, [&] {
            auto k = std::make_unique<BinaryKernel>();
            TANDEM_RETURN_IF_ERROR(k->init(ctx));
            *out = std::move(k);
            return Status::ok();
          });
        }));
  }
}

}  // namespace dnnlcpu
}  // namespace tandem
