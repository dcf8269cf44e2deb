// oneDNN MaxPool (ONNX MaxPool-12, Y only), AveragePool (ONNX AveragePool-11), GlobalAveragePool
// and GlobalMaxPool for 1-D/2-D/3-D f32 on pooling_v2_forward; MaxPoolGrad (autodiff) on
// pooling_v2_forward (training) + pooling_v2_backward.
#include <algorithm>
#include <string>

#include "runtime/cpu/avx2/Pool.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"

#include <omp.h>

namespace tandem {
namespace dnnlcpu {
namespace {

enum class PoolKind { Max, Average, GlobalMax, GlobalAverage, MaxGrad };

struct PoolGeometry {
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  dims src, dst, kernel, strides, dilations /* oneDNN: ONNX - 1 */, padL, padR;
};

bool poolGeometry(const KernelContext& ctx, PoolKind kind, PoolGeometry* g, std::string* why) {
  if (ctx.inputTypes.empty() || ctx.outputTypes.empty()) {
    *why = "expects input X";
    return false;
  }
  if (hasEmptyTensor(ctx)) {
    *why = "zero-size tensor";
    return false;
  }
  if (outputRequested(ctx, 1)) {
    *why = "the Indices output is not supported by the oneDNN kernel";
    return false;
  }
  const Shape& x = ctx.inputTypes[0].shape;
  // MaxPoolGrad: the pooled shape is its input dY's; its result is X-shaped.
  const bool grad = kind == PoolKind::MaxGrad;
  if (grad && (ctx.inputTypes.size() < 2 || ctx.outputTypes[0].shape != x)) {
    *why = "expects X and dY, and dX of X's shape";
    return false;
  }
  const Shape& y = grad ? ctx.inputTypes[1].shape : ctx.outputTypes[0].shape;
  const int rank = (int)x.size();
  if (rank < 3 || rank > 5 || (int)y.size() != rank || y[0] != x[0] || y[1] != x[1]) {
    *why = "only 1-D, 2-D and 3-D pooling of [N, C, ...] tensors";
    return false;
  }
  const int sp = rank - 2;
  g->src = dims(x.begin(), x.end());
  g->dst = dims(y.begin(), y.end());
  g->strides.assign(sp, 1);
  g->dilations.assign(sp, 0);
  g->padL.assign(sp, 0);
  g->padR.assign(sp, 0);
  if (kind == PoolKind::GlobalMax || kind == PoolKind::GlobalAverage) {
    g->kernel = dims(x.begin() + 2, x.end());
    for (int i = 0; i < sp; ++i) {
      if (y[2 + i] != 1) {
        *why = "global pooling output must have spatial size 1";
        return false;
      }
    }
    g->alg = kind == PoolKind::GlobalMax ? dnnl::algorithm::pooling_max
                                         : dnnl::algorithm::pooling_avg_exclude_padding;
    return true;
  }

  const AttrMap& a = *ctx.attrs;
  std::vector<int64_t> ks = a.getInts("kernel_shape");
  std::vector<int64_t> st = a.getInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dl = a.getInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = a.getInts("pads", std::vector<int64_t>(2 * sp, 0));
  if ((int)ks.size() != sp || (int)st.size() != sp || (int)dl.size() != sp ||
      (int)pads.size() != 2 * sp) {
    *why = "kernel_shape/strides/dilations/pads have the wrong length";
    return false;
  }
  const std::string autoPad = a.getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER") {
    *why = "unknown auto_pad '" + autoPad + "'";
    return false;
  }
  const bool includePad =
      kind == PoolKind::Average && a.getInt("count_include_pad", 0) != 0;
  g->alg = kind == PoolKind::Max || grad ? dnnl::algorithm::pooling_max
           : includePad          ? dnnl::algorithm::pooling_avg_include_padding
                                 : dnnl::algorithm::pooling_avg_exclude_padding;
  g->kernel = dims(ks.begin(), ks.end());
  for (int i = 0; i < sp; ++i) {
    const int64_t in = x[2 + i], out = y[2 + i], s = st[i], k = ks[i], d = dl[i];
    if (k <= 0 || s <= 0 || d <= 0) {
      *why = "kernel_shape, strides and dilations must be positive";
      return false;
    }
    const int64_t ext = (k - 1) * d + 1;
    g->strides[i] = s;
    g->dilations[i] = d - 1;
    int64_t pl = 0, pr = 0;
    if (autoPad == "NOTSET") {
      pl = pads[i];
      pr = pads[sp + i];
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t total = std::max<int64_t>(0, (out - 1) * s + ext - in);
      pl = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pr = total - pl;
    }
    if (pl < 0 || pr < 0) {
      *why = "negative pads";
      return false;
    }
    // oneDNN needs out == (in + pl + pr - ext) / s + 1. With ceil_mode the last window may hang
    // past the end pad; oneDNN expresses that as extra right padding, which max and
    // exclude-padding average ignore, but include-padding average would count in its divisor
    // where ONNX does not (ONNX counts only the explicit pads).
    const int64_t span = in + pl + pr - ext;
    if (span < 0 || span / s + 1 != out) {
      int64_t need = (out - 1) * s + ext - in - pl;
      if (need < pr || includePad) {
        *why = "output shape " + shapeToString(y) +
               " needs padding the oneDNN pooling cannot express exactly";
        return false;
      }
      pr = need;
    }
    // A window lying entirely in padding has no input element; ONNX and oneDNN disagree there.
    if (pl >= ext || pr >= ext) {
      *why = "padding as large as the window";
      return false;
    }
    g->padL[i] = pl;
    g->padR[i] = pr;
  }
  return true;
}

class PoolKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx, PoolKind kind) {
    PoolGeometry g;
    std::string why;
    if (!poolGeometry(ctx, kind, &g, &why)) return Status::error(ctx.opType + ": " + why);
    op_ = kind == PoolKind::Max           ? "MaxPool"
          : kind == PoolKind::Average     ? "AveragePool"
          : kind == PoolKind::GlobalMax   ? "GlobalMaxPool"
                                          : "GlobalAveragePool";
    dnnl::engine& eng = cpuEngine();
    dnnl::memory::desc srcPlain = plainDesc(g.src), dstPlain = plainDesc(g.dst);
    // The caller's buffers: plain, or blocked when the plan carries that layout here.
    dnnl::memory::desc srcUser = userDesc(ctx, true, 0, g.src);
    dnnl::memory::desc dstUser = userDesc(ctx, false, 0, g.dst);
    if (initAvx2(kind, g, srcUser, dstUser, dstPlain)) return Status::ok();
    // Layout policy: oneDNN's optimized pooling kernels need channel-blocked tensors; its plain
    // NCHW pooling is a scalar loop. Measured on the AVX2 build machine, 1 thread, ResNet
    // max-pool 3x3/2 on 64x112x112, including both reorders: batch 1 0.89 vs 13.5 ms, batch
    // 32 88 vs 550 ms; global average pool 2048x7x7: batch 1 0.082 vs 0.145 ms, batch 32 2.5
    // vs 4.7 ms. So we reorder to blocked unless only a reference kernel exists for it.
    dnnl::pooling_v2_forward::primitive_desc pd;
    for (bool blocked : {true, false}) {
      dnnl::memory::desc srcMd = blocked ? channelBlockedDesc(g.src) : srcPlain;
      dnnl::memory::desc dstMd = blocked ? channelBlockedDesc(g.dst) : dstPlain;
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, g.alg, srcMd, dstMd,
                                       g.strides, g.kernel, g.dilations, g.padL, g.padR);
      pd = dnnl::pooling_v2_forward::primitive_desc(d, baseAttr(), eng, /*allow_empty=*/true);
      if (pd && !(blocked && isReferenceImpl(pd))) break;
    }
    if (!pd) return Status::error(std::string(op_) + ": no oneDNN implementation");
    prim_ = dnnl::pooling_v2_forward(pd);
    setImpl(pd);
    scratch_.init(pd, &ws_, &args_);
    src_.init(srcUser, pd.src_desc(), /*isInput=*/true, &ws_);
    dst_.init(dstUser, pd.dst_desc(), /*isInput=*/false, &ws_);
    args_.add(DNNL_ARG_SRC, src_.inner());
    args_.add(DNNL_ARG_DST, dst_.inner());
    if (src_.reordered() || dst_.reordered())
      impl_ += std::string(" reorders[") + (src_.reordered() ? "src" : "") +
               (src_.reordered() && dst_.reordered() ? "," : "") +
               (dst_.reordered() ? "dst" : "") + "]";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun(op_, [&] {
      if (avx2_) {
        avx2::maxPool2dBlocked8(avx2Shape_, in[0]->data<float>(), out[0]->data<float>(),
                                avx2DstBlocked_, omp_get_max_threads());
        return Status::ok();
      }
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      scratch_.bindBuffers(ws);
      src_.bindBuffers(in[0]->raw(), ws);
      src_.toInner();
      dst_.bindBuffers(out[0]->raw(), ws);
      args_.execute(prim_);
      dst_.toUser();
      return Status::ok();
    });
  }

 private:
  /// 2-D MaxPool whose input the plan keeps 8-channel-blocked (AVX2 machines) runs on
  /// runtime/cpu/avx2/Pool.h, writing blocked or plain output directly. Measured (1 thread):
  /// ResNet-18's 3x3/2 pool at batch 1 0.94 ms with oneDNN vs 0.33 ms for ONNX Runtime; MNIST's
  /// 2x2/2 pool into Flatten paid a separate blocked-to-plain reorder. False: oneDNN runs it.
  bool initAvx2(PoolKind kind, const PoolGeometry& g, const dnnl::memory::desc& srcUser,
                const dnnl::memory::desc& dstUser, const dnnl::memory::desc& dstPlain) {
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    if (kind != PoolKind::Max || g.src.size() != 4 || !avx2::available() ||
        g.dilations != dims{0, 0} || g.src[1] % 8 != 0)
      return false;
    if (srcUser != dnnl::memory::desc(g.src, f32, tag::nChw8c)) return false;
    const bool dstBlocked = dstUser == dnnl::memory::desc(g.dst, f32, tag::nChw8c);
    if (!dstBlocked && dstUser != dstPlain) return false;
    avx2Shape_ = {g.src[0], g.src[1],    g.src[2],    g.src[3],   g.dst[2], g.dst[3],
                  g.kernel[0], g.kernel[1], g.strides[0], g.strides[1], g.padL[0], g.padL[1]};
    avx2DstBlocked_ = dstBlocked;
    avx2_ = true;
    impl_ = std::string("avx2:maxpool_nChw8c") + (dstBlocked ? "" : " to nchw");
    return true;
  }

  bool avx2_ = false, avx2DstBlocked_ = false;
  avx2::MaxPool2dShape avx2Shape_;

  const char* op_ = "Pool";
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  Operand src_, dst_;
  ExecArgs args_;
};

// MaxPoolGrad: oneDNN's max-pooling backward needs the forward's workspace (where each window's
// maximum was), so run() first runs the forward in training mode on X, then the backward on dY.
// The forward's Y and the workspace live in the thread workspace; both primitives use the
// channel-blocked layout oneDNN's optimized pooling needs (plain if only a reference kernel
// exists there), with reorders from and to the caller's plain buffers.
class MaxPoolGradKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    PoolGeometry g;
    std::string why;
    if (!poolGeometry(ctx, PoolKind::MaxGrad, &g, &why))
      return Status::error("MaxPoolGrad: " + why);
    dnnl::engine& eng = cpuEngine();
    using pf = dnnl::pooling_v2_forward;
    using pb = dnnl::pooling_v2_backward;
    pf::primitive_desc fpd;
    pb::primitive_desc bpd;
    for (bool blocked : {true, false}) {
      dnnl::memory::desc srcMd = blocked ? channelBlockedDesc(g.src) : plainDesc(g.src);
      dnnl::memory::desc dstMd = blocked ? channelBlockedDesc(g.dst) : plainDesc(g.dst);
      pf::desc fd(dnnl::prop_kind::forward_training, g.alg, srcMd, dstMd, g.strides, g.kernel,
                  g.dilations, g.padL, g.padR);
      fpd = pf::primitive_desc(fd, baseAttr(), eng, /*allow_empty=*/true);
      if (!fpd) continue;
      pb::desc bd(g.alg, srcMd, dstMd, g.strides, g.kernel, g.dilations, g.padL, g.padR);
      bpd = pb::primitive_desc(bd, baseAttr(), eng, fpd, /*allow_empty=*/true);
      if (bpd && !(blocked && (isReferenceImpl(fpd) || isReferenceImpl(bpd)))) break;
    }
    if (!fpd || !bpd) return Status::error("MaxPoolGrad: no oneDNN implementation");
    fwd_ = pf(fpd);
    bwd_ = pb(bpd);
    impl_ = std::string("dnnl:") + bpd.impl_info_str();
    fwdScratch_.init(fpd, &ws_, &fwdArgs_);
    bwdScratch_.init(bpd, &ws_, &bwdArgs_);
    src_.init(userDesc(ctx, true, 0, g.src), fpd.src_desc(), /*isInput=*/true, &ws_);
    diffDst_.init(userDesc(ctx, true, 1, g.dst), bpd.diff_dst_desc(), /*isInput=*/true, &ws_);
    diffSrc_.init(userDesc(ctx, false, 0, g.src), bpd.diff_src_desc(), /*isInput=*/false, &ws_);
    dstOffset_ = ws_.add(fpd.dst_desc().get_size());
    wsOffset_ = ws_.add(fpd.workspace_desc().get_size());
    dst_ = dnnl::memory(fpd.dst_desc(), eng, DNNL_MEMORY_NONE);
    workspace_ = dnnl::memory(fpd.workspace_desc(), eng, DNNL_MEMORY_NONE);
    fwdArgs_.add(DNNL_ARG_SRC, src_.inner());
    fwdArgs_.add(DNNL_ARG_DST, dst_);
    fwdArgs_.add(DNNL_ARG_WORKSPACE, workspace_);
    bwdArgs_.add(DNNL_ARG_DIFF_DST, diffDst_.inner());
    bwdArgs_.add(DNNL_ARG_WORKSPACE, workspace_);
    bwdArgs_.add(DNNL_ARG_DIFF_SRC, diffSrc_.inner());
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("MaxPoolGrad", [&] {
      char* ws = threadWorkspace(ws_.total());
      fwdScratch_.bindBuffers(ws);
      bwdScratch_.bindBuffers(ws);
      src_.bindBuffers(in[0]->raw(), ws);
      src_.toInner();
      dst_.set_data_handle(ws + dstOffset_);
      workspace_.set_data_handle(ws + wsOffset_);
      fwdArgs_.execute(fwd_);
      diffDst_.bindBuffers(in[1]->raw(), ws);
      diffDst_.toInner();
      diffSrc_.bindBuffers(out[0]->raw(), ws);
      bwdArgs_.execute(bwd_);
      diffSrc_.toUser();
      return Status::ok();
    });
  }

 private:
  dnnl::primitive fwd_, bwd_;
  WorkspaceLayout ws_;
  Scratchpad fwdScratch_, bwdScratch_;
  Operand src_, diffDst_, diffSrc_;
  dnnl::memory dst_, workspace_;
  size_t dstOffset_ = 0, wsOffset_ = 0;
  ExecArgs fwdArgs_, bwdArgs_;
};

void addPool(KernelRegistry& r, const char* op, PoolKind kind) {
  r.add(makeDef(
      op,
      [kind](const KernelContext& ctx) {
        PoolGeometry g;
        std::string why;
        return poolGeometry(ctx, kind, &g, &why);
      },
      [kind](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
        return guardDnnl(ctx, [&] {
          auto k = std::make_unique<PoolKernel>();
          TANDEM_RETURN_IF_ERROR(k->init(ctx, kind));
          *out = std::move(k);
          return Status::ok();
        });
      }));
}

}  // namespace

void registerDnnlPoolKernels(KernelRegistry& r) {
  addPool(r, "MaxPool", PoolKind::Max);
  addPool(r, "AveragePool", PoolKind::Average);
  addPool(r, "GlobalMaxPool", PoolKind::GlobalMax);
  addPool(r, "GlobalAveragePool", PoolKind::GlobalAverage);
  r.add(makeDef(
      "MaxPoolGrad",
      [](const KernelContext& ctx) {
        PoolGeometry g;
        std::string why;
        return poolGeometry(ctx, PoolKind::MaxGrad, &g, &why);
      },
      [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
        return guardDnnl(ctx, [&] {
          auto k = std::make_unique<MaxPoolGradKernel>();
          TANDEM_RETURN_IF_ERROR(k->init(ctx));
          *out = std::move(k);
          return Status::ok();
        });
      }));
}

}  // namespace dnnlcpu
}  // namespace tandem
