// Helpers for the oneDNN kernel tests: build a KernelContext, create the dnnl kernel through a
// registry holding only the dnnl backend, run it, and compare against naive loops.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compiler/Plan.pb.h"
#include "runtime/Kernel.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnltest {

/// One op instance under test: inputs (nullptr-free; use an undefined Tensor for an absent
/// optional input), which of them are load-time constants, and the output shapes.
struct OpCase {
  std::string op;
  AttrMap attrs;
  plan::FusedBody body;  // "Fused" cases: the group's members (fused_attrs_util.h)
  std::vector<Tensor> inputs;
  std::vector<bool> constant;  // same length as inputs (missing entries: not constant)
  std::vector<Shape> outputs;  // an empty-optional output is given by outputAbsent
  std::vector<bool> outputAbsent;
  WinogradPolicy winograd = WinogradPolicy::Auto;
  int threads = 1;  // KernelContext::threads
  std::string variant;  // KernelContext::variant ("": the factory's choice)

  KernelContext context() const {
    KernelContext ctx;
    ctx.opType = op;
    ctx.threads = threads;
    ctx.variant = variant;
    ctx.winograd = winograd;
    ctx.nodeName = "test_" + op;
    ctx.attrs = &attrs;
    ctx.fusedBody = op == "Fused" ? &body : nullptr;
    for (size_t i = 0; i < inputs.size(); ++i) {
      TensorType t;
      if (inputs[i].defined()) {
        t.dtype = inputs[i].dtype();
        t.shape = inputs[i].shape();
      }
      ctx.inputTypes.push_back(t);
      bool c = i < constant.size() && constant[i] && inputs[i].defined();
      ctx.constInputs.push_back(c ? &inputs[i] : nullptr);
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      TensorType t;
      if (!(i < outputAbsent.size() && outputAbsent[i])) {
        t.dtype = DType::F32;
        t.shape = outputs[i];
      }
      ctx.outputTypes.push_back(t);
    }
    return ctx;
  }
};

/// A registry with only the oneDNN kernels, so a create() that succeeds used them.
inline const KernelRegistry& dnnlRegistry() {
  static KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    registerCpuDnnlKernels(*reg);
    return reg;
  }();
  return *r;
}

/// A registry with only the reference kernels, for differential tests against the dnnl ones.
inline const KernelRegistry& refRegistry() {
  static KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    registerCpuReferenceKernels(*reg);
    return reg;
  }();
  return *r;
}

/// Does the dnnl backend take this case (accepts + supportsContext)?
inline bool dnnlSupports(const OpCase& c) {
  KernelContext ctx = c.context();
  std::vector<DType> dts;
  for (const TensorType& t : ctx.inputTypes)
    if (t.present()) dts.push_back(t.dtype);
  for (const KernelDef& d : dnnlRegistry().all()) {
    if (d.opType != c.op) continue;
    if (d.accepts && !d.accepts(dts)) continue;
    if (d.supportsContext && !d.supportsContext(ctx)) continue;
    return true;
  }
  return false;
}

inline std::unique_ptr<Kernel> createKernel(const OpCase& c) {
  std::unique_ptr<Kernel> k;
  Status st = dnnlRegistry().create("cpu", c.context(), &k);
  EXPECT_TRUE(st.isOk()) << c.op << ": " << st.message();
  if (k) {
    // oneDNN primitives, or Tandem's own kernels the oneDNN entries choose (runtime/cpu/avx2;
    // "scalar:" where the CPU has no AVX2 or TANDEM_MAX_CPU_ISA caps below it).
    const std::string impl = k->implName();
    EXPECT_TRUE(impl.rfind("dnnl:", 0) == 0 || impl.rfind("avx2:", 0) == 0 ||
                impl.rfind("avx512:", 0) == 0 ||
                impl.rfind("scalar:", 0) == 0)
        << impl;
  }
  return k;
}

/// Creates the kernel, runs it once and returns output 0.
inline Tensor runOnce(const OpCase& c, std::string* impl = nullptr) {
  std::unique_ptr<Kernel> k = createKernel(c);
  if (!k) return Tensor();
  if (impl) *impl = k->implName();
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor> outs;
  for (const Shape& s : c.outputs) outs.push_back(Tensor::alloc(DType::F32, s));
  std::vector<Tensor*> outPtrs;
  for (size_t i = 0; i < outs.size(); ++i)
    outPtrs.push_back(i < c.outputAbsent.size() && c.outputAbsent[i] ? nullptr : &outs[i]);
  Status st = k->run(in, outPtrs);
  EXPECT_TRUE(st.isOk()) << st.message();
  return outs[0];
}

inline Tensor randomTensor(Shape s, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::alloc(DType::F32, std::move(s));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
  return t;
}

/// n floats uniform in [lo, hi), from `seed`.
inline std::vector<float> randomVec(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

inline Tensor scalarF32(float v) { return Tensor::fromVector<float>({}, {v}); }

/// Element-wise |got - want| <= tol * max(1, |want|): relative for large values, absolute near
/// zero where a relative bound is meaningless. Reports the first few mismatches.
inline void expectClose(const Tensor& got, const std::vector<double>& want, double tol = 1e-4) {
  ASSERT_EQ(got.numel(), (int64_t)want.size());
  const float* g = got.data<float>();
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double w = want[i];
    bool ok = (std::isnan(w) && std::isnan(g[i])) || (std::isinf(w) && g[i] == w) ||
              std::fabs(g[i] - w) <= tol * std::max(1.0, std::fabs(w));
    if (!ok && bad++ < 5) ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << w;
  }
  EXPECT_EQ(bad, 0) << "mismatching elements";
}

inline std::vector<double> toDouble(const Tensor& t) {
  return std::vector<double>(t.data<float>(), t.data<float>() + t.numel());
}

/// Plain NCHW <-> the runtime's activation layout on this host (dnnlcpu::channelBlockedDesc:
/// nChw8c, nChw16c or nhwc), via a oneDNN reorder.
inline Tensor relayout(const Tensor& t, bool toBlocked) {
  using namespace dnnlcpu;
  dims d = toDims(t.shape());
  Tensor out = Tensor::alloc(DType::F32, t.shape());
  dnnl::memory::desc from = toBlocked ? plainDesc(d) : channelBlockedDesc(d);
  dnnl::memory::desc to = toBlocked ? channelBlockedDesc(d) : plainDesc(d);
  dnnl::memory a(from, cpuEngine(), const_cast<void*>(t.raw())), b(to, cpuEngine(), out.raw());
  dnnl::reorder(a, b).execute(cpuStream(), a, b);
  cpuStream().wait();
  return out;
}

/// Marks a Conv case's X and Y as carried in the host's activation layout (the plan's
/// input_layouts / output_layouts), as between two convolutions.
inline void setHostLayouts(OpCase* c) {
  c->attrs.set("input_layouts", Attr::ofStrings({"blocked", "", ""}));
  c->attrs.set("output_layouts", Attr::ofStrings({"blocked"}));
}

/// True when the Conv kernel offers `variant` for the case (dnnlcpu::convVariants, with an
/// epilogue the AVX2 kernels apply).
inline bool convOffers(const OpCase& c, const std::string& variant) {
  std::vector<std::string> vs = dnnlcpu::convVariants(c.context(), true);
  return std::find(vs.begin(), vs.end(), variant) != vs.end();
}

/// Creates the Conv kernel of `ctx` (whose variant the caller sets) as the fusion pass would:
/// alone, or with oneDNN's sum of input `sumInput` (when >= 0) and then ReLU. The creation's
/// status; *regressed says when the post-ops would regress to another kernel (nothing built).
inline Status makeConvFused(const KernelContext& ctx, bool relu, int sumInput,
                            std::unique_ptr<Kernel>* k, std::string* regressed) {
  regressed->clear();
  if (!relu && sumInput < 0) return dnnlRegistry().create("cpu", ctx, k);
  dnnlcpu::Epilogue ep;
  if (sumInput >= 0) {
    dnnlcpu::Epilogue::Item sum;
    sum.sum = true;
    ep.items.push_back(sum);
    ep.sumInput = sumInput;
  }
  if (relu) {
    dnnlcpu::Epilogue::Item it;
    it.eltwise.a = dnnl::algorithm::eltwise_relu;
    ep.items.push_back(it);
  }
  ep.text = std::string(sumInput >= 0 ? "sum" : "") + (sumInput >= 0 && relu ? "+" : "") +
            (relu ? "eltwise_relu" : "");
  return dnnlcpu::createConvEpilogue(ctx, ep, k, regressed);
}

/// makeConvFused, failing the test when creation fails or regresses to another kernel.
inline void createConvFused(const KernelContext& ctx, bool relu, int sumInput,
                            std::unique_ptr<Kernel>* k) {
  std::string regressed;
  Status st = makeConvFused(ctx, relu, sumInput, k, &regressed);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_TRUE(regressed.empty()) << regressed;
}

}  // namespace dnnltest
}  // namespace tandem
