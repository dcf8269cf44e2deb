// The training step graph (compiler/training/TrainingGraph.h) on the committed Fashion-MNIST MLP:
// its signature, and its Adam update against PyTorch's formula computed on the host from the
// gradient (the SGD step with lr 1 gives g = p - p'; the gradients themselves are checked by
// autodiff_test). ONNX Adam-1's eps placement would differ from it by ~eps / sqrt(v') relative
// at t = 1, which the tolerance below resolves for the small gradients of an untrained net.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tools/driver/Driver.h"

using namespace tandem;

namespace {

const std::string kMlp = std::string(TANDEM_SOURCE_DIR) + "/tests/e2e/models/fmnist_mlp.onnx";
constexpr int64_t kBatch = 8;

std::unique_ptr<Executable> compileStep(CompileOptions::Training t) {
  CompileOptions co;
  EXPECT_TRUE(setTargetDevices(&co, "cpu").isOk());
  co.training = t;
  co.inputShapes["image"] = {kBatch, 1, 28, 28};
  CompileResult r;
  Status st = compileOnnxFile(kMlp, ImportOptions{}, co, &r);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!st.isOk()) return nullptr;
  std::unique_ptr<Executable> exe;
  EXPECT_TRUE(Executable::load(r.plan, LoadOptions{1}, &exe).isOk());
  return exe;
}

TEST(TrainingGraph, AdamStepIsPyTorchs) {
  CompileOptions::Training adam;
  adam.learningRate = 0.01;
  adam.epsilon = 1e-3;  // large, so eps's placement (PyTorch's vs ONNX's) matters
  CompileOptions::Training sgd = adam;
  sgd.optimizer = CompileOptions::Training::Optimizer::Sgd;
  sgd.learningRate = 1.0;
  auto a = compileStep(adam), s = compileStep(sgd);
  ASSERT_TRUE(a && s);
  // x, labels, 4 params (two Gemm weights and biases), 4 m, 4 v, step.
  ASSERT_EQ(a->inputNames().size(), 2u + 12u + 1u);
  EXPECT_EQ(a->inputNames()[1], "labels");
  EXPECT_EQ(a->inputNames().back(), "step");
  EXPECT_EQ(a->outputNames().back(), "step_new");
  EXPECT_EQ(a->outputNames()[0], "loss");
  EXPECT_EQ(a->outputNames()[1], a->inputNames()[2] + "_new");
  EXPECT_EQ(a->outputNames()[5], a->inputNames()[6] + "_new");  // the first m
  ASSERT_EQ(s->inputNames().size(), 2u + 4u);

  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.f, 1.f), w(-0.1f, 0.1f);
  std::vector<float> px(kBatch * 784);
  for (float& v : px) v = u(rng);
  std::vector<int64_t> lab(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) lab[i] = i % 10;
  std::vector<Tensor> params;
  for (size_t i = 2; i < 6; ++i) {
    std::vector<float> v(numElements(a->inputTypes()[i].shape));
    for (float& x : v) x = w(rng);
    params.push_back(Tensor::fromVector<float>(a->inputTypes()[i].shape, v));
  }
  Tensor x = Tensor::fromVector<float>({kBatch, 1, 28, 28}, px);
  Tensor labels = Tensor::fromVector<int64_t>({kBatch}, lab);

  // Gradients from SGD with lr 1.
  std::vector<Tensor> in = {x, labels}, out;
  in.insert(in.end(), params.begin(), params.end());
  ASSERT_TRUE(s->run(in, &out).isOk());
  std::vector<Tensor> grads;
  for (size_t i = 0; i < 4; ++i) {
    std::vector<float> g(params[i].numel());
    for (int64_t j = 0; j < params[i].numel(); ++j)
      g[j] = params[i].data<float>()[j] - out[1 + i].data<float>()[j];
    grads.push_back(Tensor::fromVector<float>(params[i].shape(), g));
  }

  // Adam at t = 3 from given moments, against PyTorch's update in double.
  const double b1 = 0.9, b2 = 0.999, eps = adam.epsilon, lr = adam.learningRate, t = 3;
  std::vector<Tensor> m, v;
  for (const Tensor& p : params) {
    std::vector<float> mv(p.numel()), vv(p.numel());
    for (int64_t j = 0; j < p.numel(); ++j) {
      mv[j] = w(rng) * 0.01f;
      vv[j] = std::abs(w(rng)) * 1e-4f;
    }
    m.push_back(Tensor::fromVector<float>(p.shape(), mv));
    v.push_back(Tensor::fromVector<float>(p.shape(), vv));
  }
  in = {x, labels};
  in.insert(in.end(), params.begin(), params.end());
  in.insert(in.end(), m.begin(), m.end());
  in.insert(in.end(), v.begin(), v.end());
  in.push_back(Tensor::fromVector<float>({}, {(float)(t - 1)}));  // `step`: steps completed
  ASSERT_TRUE(a->run(in, &out).isOk());
  ASSERT_EQ(out.size(), 14u);
  EXPECT_EQ(out[13].data<float>()[0], (float)t);  // step_new
  EXPECT_NEAR(out[0].data<float>()[0], std::log(10.0), 0.5);  // near-uniform logits at start
  double worst = 0, worstOnnx = 0;
  for (size_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < params[i].numel(); ++j) {
      const double g = grads[i].data<float>()[j];
      const double m1 = b1 * m[i].data<float>()[j] + (1 - b1) * g;
      const double v1 = b2 * v[i].data<float>()[j] + (1 - b2) * g * g;
      const double p1 = params[i].data<float>()[j] -
                        lr / (1 - std::pow(b1, t)) * m1 /
                            (std::sqrt(v1) / std::sqrt(1 - std::pow(b2, t)) + eps);
      EXPECT_NEAR(out[5 + i].data<float>()[j], m1, 1e-6);
      EXPECT_NEAR(out[9 + i].data<float>()[j], v1, 1e-7);
      worst = std::max(worst, std::abs(out[1 + i].data<float>()[j] - p1));
      // ONNX Adam-1: eps added to sqrt(v') before the bias correction.
      const double pOnnx = params[i].data<float>()[j] - lr * std::sqrt(1 - std::pow(b2, t)) /
                                                            (1 - std::pow(b1, t)) * m1 /
                                                            (std::sqrt(v1) + eps);
      worstOnnx = std::max(worstOnnx, std::abs(out[1 + i].data<float>()[j] - pOnnx));
    }
  // The step is at most lr / (1 - b1^t) ~ 0.037; f32 rounding of the update ~1e-7.
  EXPECT_LT(worst, 2e-6);
  EXPECT_GT(worstOnnx, 10 * 2e-6) << "the test cannot tell PyTorch's Adam from ONNX's";
}

}  // namespace
