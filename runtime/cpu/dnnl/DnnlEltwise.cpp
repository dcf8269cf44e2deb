// oneDNN unary element-wise ops for f32 (ONNX opset 17 semantics): Relu, LeakyRelu, Elu, Selu,
// Sigmoid, HardSigmoid, HardSwish, Tanh, Clip (constant bounds), Exp, Sqrt, Abs, Neg, Reciprocal, Gelu, and Pow
// with a constant scalar exponent, and GeluGrad (eltwise backward). Erf has no oneDNN algorithm. Log and Softplus are left to
// the reference kernels on purpose: oneDNN 2.6's JIT log has an absolute error of ~3e-6 around
// 1 (Log(1) = -1.4e-6, failing ONNX's test_log_example at atol 1e-7), and soft_relu inherits it
// (relative errors of several percent for x < -10).
#include <cmath>
#include <limits>
#include <string>

#include "runtime/OpTable.h"
#include "runtime/cpu/avx2/Activation.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

using alg = dnnl::algorithm;

/// ONNX op -> one or two eltwise steps (the second runs in place on Y). Two-step forms are
/// exact compositions of the ONNX formula: Selu = gamma * elu_alpha(x); HardSigmoid =
/// clip(alpha*x + beta, 0, 1).
}  // namespace

bool eltwiseSteps(const KernelContext& ctx, std::vector<EltwiseStep>* steps) {
  const AttrMap& at = *ctx.attrs;
  const std::string& op = ctx.opType;
  if (op == "Relu") *steps = {{alg::eltwise_relu, 0.f}};
  else if (op == "LeakyRelu") *steps = {{alg::eltwise_relu, at.getFloat("alpha", 0.01f)}};
  else if (op == "Elu") *steps = {{alg::eltwise_elu, at.getFloat("alpha", 1.0f)}};
  else if (op == "Selu")
    *steps = {{alg::eltwise_elu, at.getFloat("alpha", 1.67326319217681884765625f)},
              {alg::eltwise_linear, at.getFloat("gamma", 1.05070102214813232421875f), 0.f}};
  else if (op == "Sigmoid") *steps = {{alg::eltwise_logistic}};
  else if (op == "HardSigmoid")
    *steps = {{alg::eltwise_linear, at.getFloat("alpha", 0.2f), at.getFloat("beta", 0.5f)},
              {alg::eltwise_clip, 0.f, 1.f}};
  else if (op == "HardSwish") *steps = {{alg::eltwise_hardswish}};  // x * relu6(x + 3) / 6
  else if (op == "Tanh") *steps = {{alg::eltwise_tanh}};
  else if (op == "Exp") *steps = {{alg::eltwise_exp}};
  else if (op == "Sqrt") *steps = {{alg::eltwise_sqrt}};
  else if (op == "Abs") *steps = {{alg::eltwise_abs}};
  else if (op == "Neg") *steps = {{alg::eltwise_linear, -1.f, 0.f}};
  else if (op == "Reciprocal") *steps = {{alg::eltwise_pow, 1.f, -1.f}};
  else if (op == "Clip") {
    // Bounds are optional inputs 1 and 2; oneDNN needs them at creation, so they must be
    // constants. Absent bounds are infinite.
    float lo = -std::numeric_limits<float>::infinity();
    float hi = std::numeric_limits<float>::infinity();
    for (size_t i = 1; i <= 2; ++i) {
      if (!inputPresent(ctx, i)) continue;
      const Tensor* c = i < ctx.constInputs.size() ? ctx.constInputs[i] : nullptr;
      if (!c || c->numel() != 1 || c->dtype() != DType::F32) return false;
      (i == 1 ? lo : hi) = c->data<float>()[0];
    }
    // ONNX is min(max(x, lo), hi) = hi when lo > hi; oneDNN's clip returns lo there.
    if (!(lo <= hi)) return false;
    *steps = {{alg::eltwise_clip, lo, hi}};
  } else if (op == "Pow") {
    // Only a constant scalar exponent: oneDNN's pow is alpha * x^beta with beta fixed at
    // creation.
    const Tensor* e = ctx.constInputs.size() > 1 ? ctx.constInputs[1] : nullptr;
    if (!e || e->numel() != 1) return false;
    double v;
    switch (e->dtype()) {
      case DType::F32: v = e->data<float>()[0]; break;
      case DType::F64: v = e->data<double>()[0]; break;
      case DType::I32: v = e->data<int32_t>()[0]; break;
      case DType::I64: v = (double)e->data<int64_t>()[0]; break;
      default: return false;
    }
    if ((double)(float)v != v) return false;
    *steps = {{alg::eltwise_pow, 1.f, (float)v}};
  } else if (op == "Gelu") {
    *steps = {{at.getString("approximate", "none") == "tanh" ? alg::eltwise_gelu_tanh
                                                             : alg::eltwise_gelu_erf}};
  } else {
    return false;
  }
  return true;
}

namespace {

bool eltwiseSupported(const KernelContext& ctx) {
  if (ctx.inputTypes.empty() || ctx.outputTypes.empty() || hasEmptyTensor(ctx)) return false;
  if (ctx.inputTypes[0].shape != ctx.outputTypes[0].shape) return false;
  std::vector<EltwiseStep> steps;
  return eltwiseSteps(ctx, &steps);
}

class EltwiseKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    std::vector<EltwiseStep> steps;
    if (!eltwiseSupported(ctx) || !eltwiseSteps(ctx, &steps))
      return Status::error(ctx.opType + ": unsupported configuration for the oneDNN kernel");
    op_ = ctx.opType;
    dnnl::engine& eng = cpuEngine();
    // Element-wise: the shape does not matter, a flat vector gives the simplest kernel.
    dnnl::memory::desc md = plainDesc({ctx.inputTypes[0].shape.empty()
                                           ? 1
                                           : numElements(ctx.inputTypes[0].shape)});
    src_ = dnnl::memory(md, eng, DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(md, eng, DNNL_MEMORY_NONE);
    std::string impl;
    for (size_t i = 0; i < steps.size(); ++i) {
      dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, steps[i].a, md,
                                    steps[i].alpha, steps[i].beta);
      dnnl::eltwise_forward::primitive_desc pd(d, baseAttr(), eng);
      prims_.emplace_back(dnnl::eltwise_forward(pd));
      scratch_.emplace_back();
      args_.emplace_back();
      scratch_.back().init(pd, &ws_, &args_.back());
      // Step 0 reads X; later steps update Y in place.
      args_.back().add(DNNL_ARG_SRC, i == 0 ? src_ : dst_);
      args_.back().add(DNNL_ARG_DST, dst_);
      impl += (i ? "+" : "") + std::string(pd.impl_info_str());
    }
    impl_ = "dnnl:" + impl;
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun(op_.c_str(), [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      bind(src_, in[0]->raw());
      bind(dst_, out[0]->raw());
      for (size_t i = 0; i < prims_.size(); ++i) {
        scratch_[i].bindBuffers(ws);
        args_[i].execute(prims_[i]);
      }
      return Status::ok();
    });
  }

 private:
  std::string op_;
  std::vector<dnnl::primitive> prims_;
  WorkspaceLayout ws_;
  std::vector<Scratchpad> scratch_;
  std::vector<ExecArgs> args_;
  dnnl::memory src_, dst_;
};

Status createEltwise(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  return guardDnnl(ctx, [&] {
    auto k = std::make_unique<EltwiseKernel>();
    TANDEM_RETURN_IF_ERROR(k->init(ctx));
    *out = std::move(k);
    return Status::ok();
  });
}

// GeluGrad: oneDNN's eltwise backward (gelu_tanh / gelu_erf, from the source), dX = dY *
// Gelu'(X) in one pass over f32 dY and X of one shape.
bool geluGradSupported(const KernelContext& ctx) {
  return ctx.inputTypes.size() == 2 && ctx.outputTypes.size() == 1 && !hasEmptyTensor(ctx) &&
         ctx.inputTypes[0].shape == ctx.inputTypes[1].shape &&
         ctx.outputTypes[0].shape == ctx.inputTypes[1].shape;
}

class GeluGradKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    if (!geluGradSupported(ctx)) return Status::error("GeluGrad: unsupported configuration for the oneDNN kernel");
    dnnl::engine& eng = cpuEngine();
    const alg a = ctx.attrs->getString("approximate", "none") == "tanh" ? alg::eltwise_gelu_tanh
                                                                       : alg::eltwise_gelu_erf;
    dnnl::memory::desc md = plainDesc({numElements(ctx.inputTypes[1].shape)});
    dnnl::eltwise_forward::primitive_desc fwd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, a, md, 0.f, 0.f), eng);
    dnnl::eltwise_backward::primitive_desc pd(dnnl::eltwise_backward::desc(a, md, md, 0.f, 0.f), baseAttr(),
                                              eng, fwd);
    prim_ = dnnl::eltwise_backward(pd);
    x_ = dnnl::memory(md, eng, DNNL_MEMORY_NONE);
    dy_ = dnnl::memory(md, eng, DNNL_MEMORY_NONE);
    dx_ = dnnl::memory(md, eng, DNNL_MEMORY_NONE);
    scratch_.init(pd, &ws_, &args_);
    args_.add(DNNL_ARG_SRC, x_);
    args_.add(DNNL_ARG_DIFF_DST, dy_);
    args_.add(DNNL_ARG_DIFF_SRC, dx_);
    impl_ = "dnnl:" + std::string(pd.impl_info_str());
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("GeluGrad", [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      bind(dy_, in[0]->raw());
      bind(x_, in[1]->raw());
      bind(dx_, out[0]->raw());
      scratch_.bindBuffers(ws);
      args_.execute(prim_);
      return Status::ok();
    });
  }

 private:
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  ExecArgs args_;
  dnnl::memory x_, dy_, dx_;
};

// GeluGrad as avx2::geluGrad: one pass, on the plan's threads, wherever the host has AVX2
// (oneDNN's eltwise backward otherwise). Not offered to the tuner as a choice: timed alone on
// its scratch values the two were even (GPT LM's [32, 64, 1024] tanh-GELU, AMD EPYC Zen 5, 2
// threads: 1.18 ms ours, 1.11 oneDNN's jit:avx512_core), but in the training step oneDNN's
// took 6.6 ms a call (median of 80) against 0.83 for this one, which streams dY, X and dX
// (24 MB) at about 30 GB/s, so no kernel can be much faster; the cause of oneDNN's slowness
// there was not found (not thread overlap, not the arrays' relative alignment, not tiny dY in
// a stand-alone run).
class Avx2GeluGradKernel : public DnnlKernel {
 public:
  explicit Avx2GeluGradKernel(const KernelContext& ctx)
      : n_(numElements(ctx.inputTypes[1].shape)),
        tanh_(ctx.attrs->getString("approximate", "none") == "tanh"),
        threads_(ctx.threads) {
    impl_ = "avx2:gelu-grad";
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    avx2::geluGrad(in[0]->data<float>(), in[1]->data<float>(), out[0]->data<float>(), n_, tanh_, threads_);
    return Status::ok();
  }

 private:
  int64_t n_;
  bool tanh_;
  int threads_;
};

Status createGeluGrad(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (!geluGradSupported(ctx)) return Status::error("GeluGrad: unsupported configuration for the CPU kernel");
  if (ctx.variant == "avx2" || (ctx.variant.empty() && avx2::available())) {
    if (!avx2::available()) return Status::error("GeluGrad: the avx2 variant needs AVX2 and FMA");
    *out = std::make_unique<Avx2GeluGradKernel>(ctx);
    return Status::ok();
  }
  if (!ctx.variant.empty() && ctx.variant != "dnnl")
    return Status::error("GeluGrad: unknown kernel variant '" + ctx.variant + "'");
  return guardDnnl(ctx, [&] {
    auto k = std::make_unique<GeluGradKernel>();
    TANDEM_RETURN_IF_ERROR(k->init(ctx));
    *out = std::move(k);
    return Status::ok();
  });
}

}  // namespace

void registerDnnlEltwiseKernels(KernelRegistry& r) {
  r.add(makeDef("GeluGrad", geluGradSupported, createGeluGrad));
  // The ops are the table's (runtime/core/OpTable.def, flag kDnnlEltwise); algorithmOf above
  // maps each to its oneDNN algorithm.
  size_t n = 0;
  const OpInfo* ops = allOps(&n);
  for (size_t i = 0; i < n; ++i)
    if (ops[i].has(kDnnlEltwise)) r.add(makeDef(std::string(ops[i].name), eltwiseSupported, createEltwise));
  KernelDef pow = makeDef("Pow", eltwiseSupported, createEltwise);
  // Base f32, exponent any numeric dtype (it is read once as a constant scalar).
  pow.accepts = [](const std::vector<DType>& in) {
    return in.size() == 2 && in[0] == DType::F32 &&
           (in[1] == DType::F32 || in[1] == DType::F64 || in[1] == DType::I32 ||
            in[1] == DType::I64);
  };
  pow.dtypesText = "f32 (constant scalar exponent)";
  r.add(std::move(pow));
}

}  // namespace dnnlcpu
}  // namespace tandem
