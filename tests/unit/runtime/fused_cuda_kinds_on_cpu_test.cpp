// Fusion groups formed on cuda devices run on the CPU when their GPU is absent (the executor's
// device fallback): the CPU "Fused" kernels must compute them right, although a bias row is no
// oneDNN sum and "add-layernorm" runs on the CPU row kernel. Checked against plain loops.
#include "fused_attrs_util.h"
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/Kernel.h"

using namespace tandem;

namespace {


Tensor randomF32(Shape s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  Tensor t = Tensor::alloc(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// Runs a "Fused" step with the CPU kernels; returns its outputs and the implementation.
std::vector<Tensor> runOnCpu(const FusedStep& step, const std::vector<Tensor>& in, const std::vector<Shape>& outShapes,
                             std::string* impl) {
  KernelContext ctx;
  ctx.opType = "Fused";
  step.bind(&ctx);
  for (const Tensor& t : in) {
    ctx.inputTypes.push_back({t.dtype(), t.shape()});
    ctx.constInputs.push_back(nullptr);
  }
  for (const Shape& s : outShapes) ctx.outputTypes.push_back({DType::F32, s});
  std::unique_ptr<Kernel> k;
  Status st = KernelRegistry::global().create("cpu", ctx, &k);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!st.isOk()) return {};
  std::vector<Tensor> out;
  for (const Shape& s : outShapes) out.push_back(Tensor::alloc(DType::F32, s));
  std::vector<const Tensor*> ip;
  for (const Tensor& t : in) ip.push_back(&t);
  std::vector<Tensor*> op;
  for (Tensor& t : out) op.push_back(&t);
  st = k->run(ip, op);
  EXPECT_TRUE(st.isOk()) << st.message();
  *impl = k->implName();
  return out;
}

TEST(FusedCudaKindsOnCpu, MatMulBiasReluRunsOpByOp) {
  // [2,3,8] x [8,5] + bias [5], Relu: a CUDA gemm-epilogue (cuBLASLt RELU_BIAS).
  Tensor a = randomF32({2, 3, 8}, 1), b = randomF32({8, 5}, 2), bias = randomF32({5}, 3);
  FusedStep step = fusedStep("gemm-epilogue", {"MatMul", "Add", "Relu"}, {{0, 1}, {-2, 2}, {-3}}, {2});
  std::string impl;
  std::vector<Tensor> out = runOnCpu(step, {a, b, bias}, {{2, 3, 5}}, &impl);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(impl.find("unfused("), std::string::npos) << impl;
  EXPECT_NE(impl.find("bias Add is no oneDNN sum"), std::string::npos) << impl;
  int bad = 0;
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t n = 0; n < 5; ++n) {
      double s = bias.data<float>()[n];
      for (int64_t k = 0; k < 8; ++k) s += (double)a.data<float>()[r * 8 + k] * b.data<float>()[k * 5 + n];
      double want = std::max(s, 0.0), got = out[0].data<float>()[r * 5 + n];
      if (std::fabs(got - want) > 1e-5 * (1 + std::fabs(want)) && bad++ < 5)
        ADD_FAILURE() << "row " << r << " col " << n << ": " << got << " vs " << want;
    }
}

TEST(FusedCudaKindsOnCpu, ResidualAddLayerNormWritesSumAndNorm) {
  Tensor x = randomF32({4, 16}, 4), h = randomF32({4, 16}, 5), g = randomF32({16}, 6), beta = randomF32({16}, 7);
  FusedStep step = fusedStep("add-layernorm", {"Add", "LayerNormalization"}, {{0, 1}, {-2, 2, 3}}, {0, 1});
  step.setMemberAttr(1, "epsilon", Attr::ofFloat(1e-5f));
  std::string impl;
  std::vector<Tensor> out = runOnCpu(step, {x, h, g, beta}, {{4, 16}, {4, 16}}, &impl);
  ASSERT_EQ(out.size(), 2u);
  for (int64_t r = 0; r < 4; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < 16; ++c) mu += x.data<float>()[r * 16 + c] + h.data<float>()[r * 16 + c];
    mu /= 16;
    for (int64_t c = 0; c < 16; ++c) {
      double d = x.data<float>()[r * 16 + c] + h.data<float>()[r * 16 + c] - mu;
      var += d * d;
    }
    double inv = 1 / std::sqrt(var / 16 + 1e-5);
    for (int64_t c = 0; c < 16; ++c) {
      int64_t i = r * 16 + c;
      double s = (double)x.data<float>()[i] + h.data<float>()[i];
      EXPECT_NEAR(out[0].data<float>()[i], s, 1e-6) << i;
      EXPECT_NEAR(out[1].data<float>()[i], (s - mu) * inv * g.data<float>()[c] + beta.data<float>()[c], 1e-4) << i;
    }
  }
}

}  // namespace
