// oneDNN ConvWeightGrad (Tandem, autodiff: a Conv's weight gradient) on
// convolution_backward_weights, 1-D to 3-D, groups, strides, dilations, explicit pads; f32.
// Written as a forward Conv of X by dY (batch and channels swapped), the gradient ran a
// 24 x 24 "kernel" to 3 x 3 outputs at about 2 GFLOP/s (the Keras MNIST CNN's second
// convolution); the backward-weights primitive (which PyTorch's CPU backend uses) is made for it.
#include <string>

#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

struct WeightGradGeometry {
  dims src, diffDst, weights /* [G, M/G, C/G, k..] or [M, C, k..] */, strides,
      dilations /* oneDNN: ONNX - 1 */, padL, padR;
};

bool weightGradGeometry(const KernelContext& ctx, WeightGradGeometry* g, std::string* why) {
  if (ctx.inputTypes.size() != 2 || ctx.outputTypes.empty()) {
    *why = "expects X and dY";
    return false;
  }
  if (hasEmptyTensor(ctx)) {
    *why = "zero-size tensor";
    return false;
  }
  const Shape& x = ctx.inputTypes[0].shape;
  const Shape& y = ctx.inputTypes[1].shape;
  const Shape& w = ctx.outputTypes[0].shape;
  const int rank = (int)x.size();
  if (rank < 3 || rank > 5 || (int)y.size() != rank || (int)w.size() != rank) {
    *why = "only 1-D, 2-D and 3-D convolutions";
    return false;
  }
  const int sp = rank - 2;
  const int64_t group = ctx.attrs->getInt("group", 1);
  const std::vector<int64_t> k = ctx.attrs->getInts("kernel_shape");
  const std::vector<int64_t> s = ctx.attrs->getInts("strides", std::vector<int64_t>(sp, 1));
  const std::vector<int64_t> d = ctx.attrs->getInts("dilations", std::vector<int64_t>(sp, 1));
  const std::vector<int64_t> p = ctx.attrs->getInts("pads", std::vector<int64_t>(2 * sp, 0));
  if ((int)k.size() != sp || (int)s.size() != sp || (int)d.size() != sp || (int)p.size() != 2 * sp ||
      ctx.attrs->getString("auto_pad", "NOTSET") != "NOTSET" || group < 1 || x[1] % group ||
      y[1] % group) {
    *why = "needs kernel_shape, strides, dilations and explicit pads for each spatial dim";
    return false;
  }
  g->src = dims(x.begin(), x.end());
  g->diffDst = dims(y.begin(), y.end());
  g->weights = group > 1 ? dims{group, y[1] / group, x[1] / group} : dims{y[1], x[1]};
  g->weights.insert(g->weights.end(), k.begin(), k.end());
  for (int i = 0; i < sp; ++i) {
    // The output extent the window gives must be dY's (oneDNN checks it too, by throwing);
    // a shorter dY (ConvTranspose's weight gradient with output_padding >= strides) is left
    // to the reference kernel.
    const int64_t span = x[2 + i] + p[i] + p[sp + i] - ((k[i] - 1) * d[i] + 1);
    if (s[i] < 1 || d[i] < 1 || span < 0 || span / s[i] + 1 != y[2 + i]) {
      *why = "dY is not the Conv output of X for these attributes";
      return false;
    }
    g->strides.push_back(s[i]);
    g->dilations.push_back(d[i] - 1);
    g->padL.push_back(p[i]);
    g->padR.push_back(p[sp + i]);
  }
  return true;
}

// Reorders X and dY (plain, or the host layout where the plan keeps them so) into the layouts
// the primitive picks, runs it, and reorders dW into the plain [M, C/group, k..] result.
class ConvWeightGradKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    WeightGradGeometry g;
    std::string why;
    if (!weightGradGeometry(ctx, &g, &why)) return Status::error("ConvWeightGrad: " + why);
    dnnl::engine& eng = cpuEngine();
    const auto alg = dnnl::algorithm::convolution_direct;
    using cf = dnnl::convolution_forward;
    using cw = dnnl::convolution_backward_weights;
    cf::desc fd(dnnl::prop_kind::forward_training, alg, anyDesc(g.src), anyDesc(g.weights),
                anyDesc(g.diffDst), g.strides, g.dilations, g.padL, g.padR);
    cf::primitive_desc fpd(fd, baseAttr(), eng, /*allow_empty=*/true);
    if (!fpd) return Status::error("ConvWeightGrad: no oneDNN forward convolution for the hint");
    cw::desc bd(alg, anyDesc(g.src), anyDesc(g.weights), anyDesc(g.diffDst), g.strides,
                g.dilations, g.padL, g.padR);
    cw::primitive_desc bpd(bd, baseAttr(), eng, fpd, /*allow_empty=*/true);
    if (!bpd) return Status::error("ConvWeightGrad: no oneDNN implementation");
    prim_ = cw(bpd);
    setImpl(bpd);
    scratch_.init(bpd, &ws_, &args_);
    src_.init(userDesc(ctx, true, 0, g.src), bpd.src_desc(), /*isInput=*/true, &ws_);
    diffDst_.init(userDesc(ctx, true, 1, g.diffDst), bpd.diff_dst_desc(), /*isInput=*/true, &ws_);
    diffWeights_.init(plainDesc(g.weights), bpd.diff_weights_desc(), /*isInput=*/false, &ws_);
    if (src_.reordered() || diffDst_.reordered() || diffWeights_.reordered()) {
      std::string r;
      for (auto [used, name] : {std::pair{src_.reordered(), "src"}, {diffDst_.reordered(), "diff_dst"},
                                {diffWeights_.reordered(), "diff_weights"}})
        if (used) r += (r.empty() ? "" : ",") + std::string(name);
      impl_ += " reorders[" + r + "]";
    }
    args_.add(DNNL_ARG_SRC, src_.inner());
    args_.add(DNNL_ARG_DIFF_DST, diffDst_.inner());
    args_.add(DNNL_ARG_DIFF_WEIGHTS, diffWeights_.inner());
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("ConvWeightGrad", [&] {
      char* ws = threadWorkspace(ws_.total());
      scratch_.bindBuffers(ws);
      src_.bindBuffers(in[0]->raw(), ws);
      src_.toInner();
      diffDst_.bindBuffers(in[1]->raw(), ws);
      diffDst_.toInner();
      diffWeights_.bindBuffers(out[0]->raw(), ws);
      args_.execute(prim_);
      diffWeights_.toUser();
      return Status::ok();
    });
  }

 private:
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  Operand src_, diffDst_, diffWeights_;
  ExecArgs args_;
};

}  // namespace

void registerDnnlConvGradKernels(KernelRegistry& r) {
  r.add(makeDef(
      "ConvWeightGrad",
      [](const KernelContext& ctx) {
        WeightGradGeometry g;
        std::string why;
        return weightGradGeometry(ctx, &g, &why);
      },
      [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
        return guardDnnl(ctx, [&] {
          auto k = std::make_unique<ConvWeightGradKernel>();
          TANDEM_RETURN_IF_ERROR(k->init(ctx));
          *out = std::move(k);
          return Status::ok();
        });
      }));
}

}  // namespace dnnlcpu
}  // namespace tandem
