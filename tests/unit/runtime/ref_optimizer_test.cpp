// Tests of the reference optimizer updates (ai.onnx.preview.training-1 Adagrad, Adam, Momentum):
// hand-computed steps, bias correction and the first-step rules, several tensors per op, and
// updates run in place (results over their inputs), as the training plans run them.
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {

using namespace reftest;

// A factory's refusal reaches the caller inside the registry's "no cpu kernel ..." message.
#define EXPECT_ERROR_HAS(call, sub)                                              \
  do {                                                                           \
    const std::string e_ = errorOf(call);                                        \
    EXPECT_NE(e_.find(sub), std::string::npos) << "error was: '" << e_ << "'"; \
  } while (0)

AttrMap floats(std::initializer_list<std::pair<const char*, float>> l) {
  AttrMap a;
  for (const auto& [k, v] : l) a.set(k, Attr::ofFloat(v));
  return a;
}

std::vector<Tensor> runAll(const std::string& op, AttrMap a, std::vector<Tensor> in,
                           std::vector<TensorType> outTypes) {
  OpCall c{op, std::move(a), std::move(in), std::move(outTypes)};
  std::vector<Tensor> outs;
  Status st = c.run(&outs);
  EXPECT_TRUE(st.isOk()) << st.message();
  return outs;
}

TEST(RefMomentum, StandardFirstStepIgnoresBeta) {
  AttrMap a = floats({{"alpha", 0.9f}, {"beta", 0.1f}, {"norm_coefficient", 0}});
  a.set("mode", Attr::ofString("standard"));
  // T = 0: v' = 0.9 * 3 + 1 * 2 = 4.7, x' = 1 - 0.1 * 4.7.
  auto o = runAll("Momentum", a, {f32({}, {0.1f}), i64({}, {0}), f32({1}, {1}), f32({1}, {2}), f32({1}, {3})},
                  {{DType::F32, {1}}, {DType::F32, {1}}});
  expectValues<float>(o[0], {1}, {0.53f});
  expectValues<float>(o[1], {1}, {4.7f});
  // T = 1: v' = 0.9 * 3 + 0.1 * 2 = 2.9.
  o = runAll("Momentum", a, {f32({}, {0.1f}), i64({}, {1}), f32({1}, {1}), f32({1}, {2}), f32({1}, {3})},
             {{DType::F32, {1}}, {DType::F32, {1}}});
  expectValues<float>(o[0], {1}, {0.71f});
  expectValues<float>(o[1], {1}, {2.9f});
}

TEST(RefMomentum, NesterovAndRegularisation) {
  AttrMap a = floats({{"alpha", 0.9f}, {"beta", 0.1f}, {"norm_coefficient", 0.5f}});
  a.set("mode", Attr::ofString("nesterov"));
  // g = 0.5 * 2 + 1 = 2 (x = 2); v' = 0.9 * 3 + 0.1 * 2 = 2.9; x' = 2 - 0.1 * (2 + 0.9 * 2.9).
  auto o = runAll("Momentum", a, {f64({}, {0.1}), i64({}, {4}), f64({1}, {2}), f64({1}, {1}), f64({1}, {3})},
                  {{DType::F64, {1}}, {DType::F64, {1}}});
  expectValues<double>(o[0], {1}, {2 - 0.1 * (2 + 0.9 * 2.9)}, 1e-7);
  expectValues<double>(o[1], {1}, {2.9}, 1e-7);
}

TEST(RefMomentum, ModeIsRequired) {
  OpCall c{"Momentum", floats({{"alpha", 0.9f}, {"beta", 0.1f}, {"norm_coefficient", 0}}),
           {f32({}, {0.1f}), i64({}, {0}), f32({1}, {1}), f32({1}, {2}), f32({1}, {3})},
           {{DType::F32, {1}}, {DType::F32, {1}}}};
  EXPECT_ERROR_HAS(c, "Momentum 'n': attribute mode is required");
}

TEST(RefAdagrad, DecayedRateAndAccumulator) {
  // T = 0, no decay: h' = 2 + 1 = 3, x' = 1 - 0.1 * (-1) / sqrt(3).
  auto o = runAll("Adagrad", floats({{"epsilon", 0}}),
                  {f32({}, {0.1f}), i64({}, {0}), f32({1}, {1}), f32({1}, {-1}), f32({1}, {2})},
                  {{DType::F32, {1}}, {DType::F32, {1}}});
  expectValues<float>(o[0], {1}, {float(1 + 0.1 / std::sqrt(3.0))});
  expectValues<float>(o[1], {1}, {3});
  // T = 4, decay 0.25: rate 0.1 / 2; epsilon 1 is added to sqrt(h').
  o = runAll("Adagrad", floats({{"epsilon", 1}, {"decay_factor", 0.25f}}),
             {f64({}, {0.1}), i64({}, {4}), f64({2}, {1, 5}), f64({2}, {-1, 3}), f64({2}, {3, 0})},
             {{DType::F64, {2}}, {DType::F64, {2}}});
  expectValues<double>(o[0], {2}, {1 + 0.05 / 3, 5 - 0.05 * 3 / 4}, 1e-7);
  expectValues<double>(o[1], {2}, {4, 9}, 1e-12);
}

TEST(RefAdam, BiasCorrectionFromTheSecondStep) {
  AttrMap a = floats({{"alpha", 0.5f}, {"beta", 0.5f}, {"epsilon", 0}});
  // T = 1: v' = 1, h' = 2, rate = 0.1 * sqrt(1 - 0.5) / (1 - 0.5); x' = 1 - rate / sqrt(2) = 0.9.
  auto o = runAll("Adam", a,
                  {f32({}, {0.1f}), i64({}, {1}), f32({1}, {1}), f32({1}, {2}), f32({1}, {0}), f32({1}, {0})},
                  {{DType::F32, {1}}, {DType::F32, {1}}, {DType::F32, {1}}});
  expectValues<float>(o[0], {1}, {0.9f});
  expectValues<float>(o[1], {1}, {1});
  expectValues<float>(o[2], {1}, {2});
  // T = 0: no correction, x' = 1 - 0.1 / sqrt(2); norm_coefficient_post scales the result.
  a.set("norm_coefficient_post", Attr::ofFloat(0.5f));
  o = runAll("Adam", a,
             {f32({}, {0.1f}), i64({}, {0}), f32({1}, {1}), f32({1}, {2}), f32({1}, {0}), f32({1}, {0})},
             {{DType::F32, {1}}, {DType::F32, {1}}, {DType::F32, {1}}});
  expectValues<float>(o[0], {1}, {float(0.5 * (1 - 0.1 / std::sqrt(2.0)))});
}

// Adam of two tensors, checked against the update written out per element in f64.
TEST(RefAdam, SeveralTensorsAreGroupedByRole) {
  const double alpha = 0.75, beta = 0.875, eps = 0.0625, norm = 0.125, r = 0.5;
  const int64_t t = 3;
  AttrMap a = floats({{"alpha", (float)alpha}, {"beta", (float)beta}, {"epsilon", (float)eps},
                      {"norm_coefficient", (float)norm}});
  const std::vector<double> x1 = {1, -2, 3}, g1 = {0.5, 0.25, -1}, v1 = {0.1, 0.2, 0.3},
                            h1 = {1, 2, 3}, x2 = {4}, g2 = {-2}, v2 = {1}, h2 = {0.5};
  auto o = runAll("Adam", a,
                  {f64({}, {r}), i64({}, {t}), f64({3}, x1), f64({1}, x2), f64({3}, g1), f64({1}, g2),
                   f64({3}, v1), f64({1}, v2), f64({3}, h1), f64({1}, h2)},
                  {{DType::F64, {3}}, {DType::F64, {1}}, {DType::F64, {3}}, {DType::F64, {1}},
                   {DType::F64, {3}}, {DType::F64, {1}}});
  const double rate = r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t));
  auto expect = [&](const std::vector<double>& x, const std::vector<double>& g,
                    const std::vector<double>& v, const std::vector<double>& h, size_t xi) {
    std::vector<double> ex, ev, eh;
    for (size_t i = 0; i < x.size(); ++i) {
      const double gr = norm * x[i] + g[i];
      ev.push_back(alpha * v[i] + (1 - alpha) * gr);
      eh.push_back(beta * h[i] + (1 - beta) * gr * gr);
      ex.push_back(x[i] - rate * ev.back() / (std::sqrt(eh.back()) + eps));
    }
    const Shape s = {(int64_t)x.size()};
    expectValues<double>(o[xi], s, ex, 1e-12);
    expectValues<double>(o[xi + 2], s, ev, 1e-12);
    expectValues<double>(o[xi + 4], s, eh, 1e-12);
  };
  expect(x1, g1, v1, h1, 0);
  expect(x2, g2, v2, h2, 1);
}

// The training plans run the update over the variable and its state: results alias inputs.
TEST(RefAdam, InPlaceUpdateEqualsOutOfPlace) {
  AttrMap a = floats({{"alpha", 0.9f}, {"beta", 0.99f}, {"epsilon", 1e-3f}, {"norm_coefficient", 0.01f}});
  std::vector<Tensor> in = {f32({}, {0.01f}), i64({}, {7}), f32({4}, {1, -1, 2, -2}),
                            f32({4}, {0.5f, 0.25f, -0.5f, 1}), f32({4}, {0.1f, 0, -0.1f, 0.2f}),
                            f32({4}, {0.01f, 0.02f, 0, 0.5f})};
  const std::vector<TensorType> types(3, TensorType{DType::F32, {4}});
  std::vector<Tensor> ref = runAll("Adam", a, in, types);

  OpCall c{"Adam", a, in, types};
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(c.create(&k).isOk());
  std::vector<Tensor> state = {Tensor::copyOf(in[2]), Tensor::copyOf(in[3]), Tensor::copyOf(in[4]),
                               Tensor::copyOf(in[5])};
  std::vector<const Tensor*> ins = {&in[0], &in[1], &state[0], &state[1], &state[2], &state[3]};
  std::vector<Tensor*> outs = {&state[0], &state[2], &state[3]};
  ASSERT_TRUE(k->run(ins, outs).isOk());
  for (int i = 0; i < 3; ++i)
    for (int64_t e = 0; e < 4; ++e)
      EXPECT_EQ(outs[i]->data<float>()[e], ref[i].data<float>()[e]) << "result " << i << " element " << e;
}

TEST(RefAdagrad, MismatchedStateIsAnError) {
  OpCall c{"Adagrad", AttrMap(),
           {f32({}, {0.1f}), i64({}, {0}), f32({2}, {1, 2}), f32({2}, {1, 2}), f32({3}, {1, 2, 3})},
           {{DType::F32, {2}}, {DType::F32, {2}}}};
  EXPECT_ERROR_HAS(c, "Adagrad 'n': input 4 must be f32[2] like X1");
}

}  // namespace
}  // namespace tandem
