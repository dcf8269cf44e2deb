// The oneDNN Attention variants (runtime/cpu/dnnl/DnnlAttention.cpp: two batched matmuls
// around the shared row pass, "dnnl"; the same per head on each thread, "dnnl-head") against the
// reference variant on the same instances, every output: 3-D GQA with a past cache, float mask,
// causal offset, softcap and qk mode 3; 4-D MHA with nonpad_kv_seqlen and a bool mask, qk mode 2;
// 4-D MQA with a past cache and no present outputs (the keys gathered by the kernel). All are the def's variants (the loader
// times them); the reference one is checked against numpy by e2e.small_models.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/unit/runtime/dnnl_test_util.h"

namespace tandem {
namespace {
using dnnltest::dnnlRegistry;

struct Case {
  AttrMap attrs;
  std::vector<Tensor> inputs;            // undefined: absent
  std::vector<TensorType> outputs;       // dtype Undefined: not requested
  KernelContext context(const std::string& variant) const {
    KernelContext ctx;
    ctx.opType = "Attention";
    ctx.nodeName = "att";
    ctx.attrs = &attrs;
    ctx.threads = 2;
    ctx.variant = variant;
    for (const Tensor& t : inputs) {
      TensorType tt;
      if (t.defined()) tt = {t.dtype(), t.shape()};
      ctx.inputTypes.push_back(tt);
      ctx.constInputs.push_back(nullptr);
    }
    ctx.outputTypes = outputs;
    return ctx;
  }
};

Tensor randomF32(Shape s, std::mt19937* gen) {
  std::normal_distribution<float> n;
  Tensor t = Tensor::alloc(DType::F32, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(*gen);
  return t;
}

// Runs the variant; false (with the reason in *why) when it cannot be built here.
bool runVariant(const Case& c, const std::string& variant, std::vector<Tensor>* outs,
                std::string* impl, std::string* why) {
  std::unique_ptr<Kernel> k;
  Status st = dnnlRegistry().create("cpu", c.context(variant), &k);
  if (!st) {
    *why = st.message();
    return false;
  }
  *impl = k->implName();
  outs->clear();
  std::vector<Tensor*> ptrs;
  for (const TensorType& t : c.outputs) outs->push_back(t.present() ? Tensor::alloc(t.dtype, t.shape) : Tensor());
  for (Tensor& t : *outs) ptrs.push_back(t.defined() ? &t : nullptr);
  std::vector<const Tensor*> ins;
  for (const Tensor& t : c.inputs) ins.push_back(t.defined() ? &t : nullptr);
  st = k->run(ins, ptrs);
  EXPECT_TRUE(st.isOk()) << st.message();
  return st.isOk();
}

void expectVariantAgrees(const Case& c, const std::string& variant) {
  std::vector<Tensor> ref, dnnl;
  std::string refImpl, dnnlImpl, why;
  ASSERT_TRUE(runVariant(c, "ref", &ref, &refImpl, &why)) << why;
  EXPECT_EQ(refImpl, "ref");
  if (!runVariant(c, variant, &dnnl, &dnnlImpl, &why)) {
    // Only where oneDNN has nothing but its reference matmul for these strides.
    EXPECT_NE(why.find("only its reference matmul"), std::string::npos) << why;
    GTEST_SKIP() << "dnnl variant not built on this host: " << why;
  }
  EXPECT_EQ(dnnlImpl.rfind("dnnl:", 0), 0u) << dnnlImpl;
  for (size_t o = 0; o < ref.size(); ++o) {
    if (!ref[o].defined()) continue;
    double worst = 0;
    for (int64_t i = 0; i < ref[o].numel(); ++i) {
      const float a = ref[o].data<float>()[i], b = dnnl[o].data<float>()[i];
      if (std::isinf(a) || std::isinf(b)) {
        EXPECT_EQ(a, b) << "output " << o << " element " << i;
        continue;
      }
      worst = std::max(worst, (double)std::fabs(a - b));
    }
    EXPECT_LT(worst, 2e-5) << variant << " output " << o;
  }
}

void expectVariantsAgree(const Case& c) {
  expectVariantAgrees(c, "dnnl");
  expectVariantAgrees(c, "dnnl-head");
}

TEST(DnnlAttention, ThreeDGqaPastCausalSoftcapQkAfterSoftmax) {
  std::mt19937 gen(11);
  const int64_t B = 2, Hq = 4, Hkv = 2, Sq = 19, Skv = 11, P = 7, D = 24, Dv = 40, T = P + Skv;
  Case c;
  c.attrs.set("is_causal", Attr::ofInt(1));
  c.attrs.set("q_num_heads", Attr::ofInt(Hq));
  c.attrs.set("kv_num_heads", Attr::ofInt(Hkv));
  c.attrs.set("softcap", Attr::ofFloat(5.f));
  c.attrs.set("qk_matmul_output_mode", Attr::ofInt(3));
  c.inputs = {randomF32({B, Sq, Hq * D}, &gen), randomF32({B, Skv, Hkv * D}, &gen),
              randomF32({B, Skv, Hkv * Dv}, &gen), randomF32({Sq, T}, &gen),
              randomF32({B, Hkv, P, D}, &gen),     randomF32({B, Hkv, P, Dv}, &gen)};
  c.outputs = {{DType::F32, {B, Sq, Hq * Dv}}, {DType::F32, {B, Hkv, T, D}},
               {DType::F32, {B, Hkv, T, Dv}}, {DType::F32, {B, Hq, Sq, T}}};
  expectVariantsAgree(c);
}

TEST(DnnlAttention, FourDNonpadBoolMaskQkWithBias) {
  std::mt19937 gen(12);
  const int64_t B = 3, H = 5, Sq = 6, T = 33, D = 16;
  Case c;
  c.attrs.set("is_causal", Attr::ofInt(1));
  c.attrs.set("qk_matmul_output_mode", Attr::ofInt(2));
  c.attrs.set("scale", Attr::ofFloat(0.2f));
  Tensor mask = Tensor::alloc(DType::Bool, {B, 1, 1, T});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<bool>()[i] = gen() % 4 != 0;
  Tensor nonpad = Tensor::alloc(DType::I64, {B});
  const int64_t lens[3] = {33, 10, 4};  // the last: fewer keys than queries, leading rows empty
  for (int64_t b = 0; b < B; ++b) nonpad.data<int64_t>()[b] = lens[b];
  c.inputs = {randomF32({B, H, Sq, D}, &gen), randomF32({B, H, T, D}, &gen),
              randomF32({B, H, T, D}, &gen), mask, Tensor(), Tensor(), nonpad};
  c.outputs = {{DType::F32, {B, H, Sq, D}}, {}, {}, {DType::F32, {B, H, Sq, T}}};
  expectVariantsAgree(c);
}

TEST(DnnlAttention, FourDMqaPastWithoutPresentOutputs) {
  std::mt19937 gen(13);
  const int64_t B = 2, Hq = 3, Sq = 4, Skv = 5, P = 9, D = 8, T = P + Skv;
  Case c;
  c.inputs = {randomF32({B, Hq, Sq, D}, &gen), randomF32({B, 1, Skv, D}, &gen),
              randomF32({B, 1, Skv, D}, &gen), randomF32({B, 1, Sq, T}, &gen),
              randomF32({B, 1, P, D}, &gen),  randomF32({B, 1, P, D}, &gen)};
  c.outputs = {{DType::F32, {B, Hq, Sq, D}}};
  expectVariantsAgree(c);
}

TEST(DnnlAttention, DefListsTheVariants) {
  for (const KernelDef& d : dnnlRegistry().all())
    if (d.opType == "Attention") {
      ASSERT_TRUE(d.variants);
      Case c;
      EXPECT_EQ(d.variants(c.context("")),
                (std::vector<std::string>{"dnnl", "dnnl-head", "ref"}));
      return;
    }
  FAIL() << "no dnnl Attention def";
}

}  // namespace
}  // namespace tandem
