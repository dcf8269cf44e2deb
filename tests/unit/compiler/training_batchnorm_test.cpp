// BatchNormalization in the training step graph (compiler/training/TrainingGraph.h,
// batchNormInTraining): a tiny classifier Gemm -> BatchNormalization (rank 2, PyTorch's
// BatchNorm1d) -> Relu -> MatMul runs SGD steps, and after every step the parameters (the
// BatchNormalization's scale and B among them) and the running statistics must match a host
// double-precision reference written here from PyTorch's model.train() semantics: batch
// statistics, the biased variance for normalising and the unbiased one (N / (N - 1), 6 / 5
// here) for running_var, running = m * running + (1 - m) * batch with ONNX's momentum m = 0.9
// (PyTorch's 0.1). The backward pass through the batch statistics is by hand, so the two sides
// share nothing but the initial values and the batch. Also: the forward plan reads the
// buffers, and --freeze-batchnorm's form keeps them out of the state.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "tests/unit/onnx_model_builder.h"
#include "tools/driver/Driver.h"

using namespace tandem;
using Training = CompileOptions::Training;

namespace {

constexpr int64_t kN = 6, kD = 5, kH = 4, kC = 3;
constexpr double kMomentum = 0.9, kEps = 1e-5;

using Params = std::map<std::string, std::vector<double>>;

struct Data {
  std::vector<double> x;
  std::vector<int64_t> labels;
  Params init;  // parameters and buffers by initializer name
  std::map<std::string, Shape> shapes = {{"W1", {kH, kD}}, {"b1", {kH}},  {"gamma", {kH}},
                                         {"beta", {kH}},   {"W2", {kH, kC}}, {"bn.running_mean", {kH}},
                                         {"bn.running_var", {kH}}};
};

const Data& data() {
  static const Data d = [] {
    Data d;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    auto draw = [&](int64_t n, double scale, double offset) {  // exact in f32
      std::vector<double> v(n);
      for (double& e : v) e = (double)(float)(u(rng) * scale + offset);
      return v;
    };
    d.x = draw(kN * kD, 1.0, 0.0);
    for (int64_t i = 0; i < kN; ++i) d.labels.push_back(i % kC);
    d.init["W1"] = draw(kH * kD, 0.8, 0.0);
    d.init["b1"] = draw(kH, 0.3, 0.5);  // a mean the batch statistics remove
    d.init["gamma"] = draw(kH, 0.3, 1.0);
    d.init["beta"] = draw(kH, 0.3, 0.2);
    d.init["W2"] = draw(kH * kC, 0.8, 0.0);
    d.init["bn.running_mean"] = draw(kH, 0.2, 0.1);
    d.init["bn.running_var"] = draw(kH, 0.2, 1.0);
    return d;
  }();
  return d;
}

std::string writeModel() {
  const Data& d = data();
  testing_onnx::Model m;
  m.g()->set_name("bn_tiny");
  m.input("x", {kN, kD});
  for (const char* n : {"W1", "b1", "gamma", "beta", "bn.running_mean", "bn.running_var", "W2"}) {
    const std::vector<double>& v = d.init.at(n);
    m.floatInit(n, d.shapes.at(n), std::vector<float>(v.begin(), v.end()));
  }
  testing_onnx::intAttr(m.node("Gemm", {"x", "W1", "b1"}, {"h"}, "fc1"), "transB", 1);
  onnx::NodeProto* bn = m.node("BatchNormalization",
                               {"h", "gamma", "beta", "bn.running_mean", "bn.running_var"}, {"a"}, "bn");
  testing_onnx::floatAttr(bn, "momentum", (float)kMomentum);
  testing_onnx::floatAttr(bn, "epsilon", (float)kEps);
  m.node("Relu", {"a"}, {"r"}, "relu");
  m.node("MatMul", {"r", "W2"}, {"logits"}, "fc2");
  m.output("logits");
  return testing_onnx::writeTemp(m, "training_batchnorm");
}

const std::string& modelPath() {
  static const testing_onnx::RemovedAtExit file{writeModel()};
  return file.path;
}

// One SGD step of PyTorch's model.train() on `s` (parameters and buffers); returns the loss.
double referenceStep(Params& s, double lr) {
  const Data& d = data();
  const auto &W1 = s["W1"], &b1 = s["b1"], &gamma = s["gamma"], &beta = s["beta"], &W2 = s["W2"];
  std::vector<double> h(kN * kH), hhat(kN * kH), a(kN * kH), r(kN * kH), mu(kH, 0.0),
      var(kH, 0.0), rstd(kH);
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t j = 0; j < kH; ++j) {
      double v = b1[j];
      for (int64_t k = 0; k < kD; ++k) v += d.x[n * kD + k] * W1[j * kD + k];
      h[n * kH + j] = v;
      mu[j] += v / kN;
    }
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t j = 0; j < kH; ++j) var[j] += (h[n * kH + j] - mu[j]) * (h[n * kH + j] - mu[j]) / kN;
  for (int64_t j = 0; j < kH; ++j) rstd[j] = 1 / std::sqrt(var[j] + kEps);
  for (int64_t i = 0; i < kN * kH; ++i) {
    const int64_t j = i % kH;
    hhat[i] = (h[i] - mu[j]) * rstd[j];
    a[i] = gamma[j] * hhat[i] + beta[j];
    r[i] = std::max(a[i], 0.0);
  }
  // Softmax cross-entropy, mean over the batch.
  std::vector<double> dz(kN * kC);
  double loss = 0;
  for (int64_t n = 0; n < kN; ++n) {
    double z[kC], zmax = -1e300, sum = 0;
    for (int64_t c = 0; c < kC; ++c) {
      z[c] = 0;
      for (int64_t j = 0; j < kH; ++j) z[c] += r[n * kH + j] * W2[j * kC + c];
      zmax = std::max(zmax, z[c]);
    }
    for (int64_t c = 0; c < kC; ++c) sum += std::exp(z[c] - zmax);
    loss += -(z[d.labels[n]] - zmax - std::log(sum)) / kN;
    for (int64_t c = 0; c < kC; ++c)
      dz[n * kC + c] = (std::exp(z[c] - zmax) / sum - (c == d.labels[n] ? 1.0 : 0.0)) / kN;
  }
  Params g;
  g["W2"].assign(kH * kC, 0.0);
  std::vector<double> da(kN * kH, 0.0);
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t j = 0; j < kH; ++j)
      for (int64_t c = 0; c < kC; ++c) {
        g["W2"][j * kC + c] += r[n * kH + j] * dz[n * kC + c];
        if (a[n * kH + j] > 0) da[n * kH + j] += dz[n * kC + c] * W2[j * kC + c];
      }
  // Through the batch statistics: dh = gamma * rstd * (da - mean(da) - hhat * mean(da * hhat)).
  g["gamma"].assign(kH, 0.0);
  g["beta"].assign(kH, 0.0);
  for (int64_t i = 0; i < kN * kH; ++i) {
    g["gamma"][i % kH] += da[i] * hhat[i];
    g["beta"][i % kH] += da[i];
  }
  std::vector<double> dh(kN * kH);
  for (int64_t i = 0; i < kN * kH; ++i) {
    const int64_t j = i % kH;
    dh[i] = gamma[j] * rstd[j] * (da[i] - g["beta"][j] / kN - hhat[i] * g["gamma"][j] / kN);
  }
  g["W1"].assign(kH * kD, 0.0);
  g["b1"].assign(kH, 0.0);
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t j = 0; j < kH; ++j) {
      g["b1"][j] += dh[n * kH + j];
      for (int64_t k = 0; k < kD; ++k) g["W1"][j * kD + k] += dh[n * kH + j] * d.x[n * kD + k];
    }
  for (auto& [name, grad] : g)
    for (size_t i = 0; i < grad.size(); ++i) s[name][i] -= lr * grad[i];
  // torch's running statistics: the unbiased batch variance.
  for (int64_t j = 0; j < kH; ++j) {
    s["bn.running_mean"][j] = kMomentum * s["bn.running_mean"][j] + (1 - kMomentum) * mu[j];
    s["bn.running_var"][j] =
        kMomentum * s["bn.running_var"][j] + (1 - kMomentum) * var[j] * kN / (kN - 1);
  }
  return loss;
}

std::unique_ptr<Executable> compile(const Training& t, std::string* error = nullptr) {
  CompileOptions co;
  EXPECT_TRUE(setTargetDevices(&co, "cpu").isOk());
  co.training = t;
  CompileResult r;
  Status st = compileOnnxFile(modelPath(), ImportOptions{}, co, &r);
  if (error) *error = st.message();
  if (!st.isOk()) return nullptr;
  std::unique_ptr<Executable> exe;
  EXPECT_TRUE(Executable::load(r.plan, LoadOptions{1}, &exe).isOk());
  return exe;
}

Tensor f32Tensor(const Shape& shape, const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor::fromVector<float>(shape, f);
}

Training sgd(double lr) {
  Training t;
  t.optimizer = Training::Optimizer::Sgd;
  t.learningRate = lr;
  return t;
}

// Each step starts both sides from the plan's state (f32 rounding does not accumulate); a
// missing term of the backward pass through the batch statistics, the biased variance in
// running_var or a momentum taken the wrong way round is 1e-3 or more, f32 rounding ~1e-6.
TEST(TrainingBatchNorm, SgdStepsArePyTorchTrainMode) {
  const double lr = 0.5;
  std::string error;
  auto exe = compile(sgd(lr), &error);
  ASSERT_TRUE(exe) << error;
  const auto& names = exe->inputNames();
  const auto& outs = exe->outputNames();
  // x, labels, the 5 parameters in initializer order, then the buffers (mean, var).
  const std::vector<std::string> want = {"x",    "labels", "W1", "b1", "gamma", "beta",
                                         "W2",   "bn.running_mean", "bn.running_var"};
  ASSERT_EQ(names, want);
  ASSERT_EQ(outs.size(), names.size() - 1);
  EXPECT_EQ(outs[0], "loss");
  for (size_t i = 2; i < names.size(); ++i) EXPECT_EQ(outs[i - 1], names[i] + "_new");

  const Data& d = data();
  std::vector<Tensor> state;
  for (size_t i = 2; i < names.size(); ++i)
    state.push_back(f32Tensor(d.shapes.at(names[i]), d.init.at(names[i])));
  const Tensor x = f32Tensor({kN, kD}, d.x);
  const Tensor labels = Tensor::fromVector<int64_t>({kN}, d.labels);
  double worst = 0, firstLoss = 0, lastLoss = 0;
  for (int step = 1; step <= 5; ++step) {
    Params ref;
    for (size_t i = 2; i < names.size(); ++i) {
      const float* v = state[i - 2].data<float>();
      ref[names[i]].assign(v, v + state[i - 2].numel());
    }
    std::vector<Tensor> in = {x, labels}, out;
    in.insert(in.end(), state.begin(), state.end());
    Status st = exe->run(in, &out);
    ASSERT_TRUE(st.isOk()) << st.message();
    const double loss = referenceStep(ref, lr);
    if (step == 1) firstLoss = loss;
    lastLoss = loss;
    EXPECT_NEAR(out[0].data<float>()[0], loss, 2e-6 * (1 + loss)) << "loss, step " << step;
    for (size_t i = 2; i < names.size(); ++i) {
      state[i - 2] = out[i - 1];
      const std::vector<double>& w = ref.at(names[i]);
      ASSERT_EQ((int64_t)w.size(), state[i - 2].numel()) << names[i];
      for (size_t j = 0; j < w.size(); ++j) {
        const double got = state[i - 2].data<float>()[j];
        const double err = std::abs(got - w[j]) / (1 + std::abs(w[j]));
        worst = std::max(worst, err);
        EXPECT_LE(err, 1e-5) << names[i] << "[" << j << "] at step " << step << ": " << got
                             << " vs reference " << w[j];
      }
    }
  }
  std::printf("  5 steps, worst relative error %.1e, loss %.4f -> %.4f\n", worst, firstLoss,
              lastLoss);
  EXPECT_LT(lastLoss, firstLoss) << "it did not train";
}

// The forward plan (the Trainer's evaluation) takes the buffers as inputs and normalises with
// them: inference form, y = gamma * (h - running_mean) / sqrt(running_var + eps) + beta.
TEST(TrainingBatchNorm, ForwardPlanReadsTheBuffers) {
  Training t = sgd(0.1);
  t.forwardOnly = true;
  std::string error;
  auto exe = compile(t, &error);
  ASSERT_TRUE(exe) << error;
  const std::vector<std::string> want = {"x",  "W1", "b1", "gamma", "beta",
                                         "W2", "bn.running_mean", "bn.running_var"};
  ASSERT_EQ(exe->inputNames(), want);
  const Data& d = data();
  // Buffers far from the batch's statistics, so batch and running statistics differ.
  Params s = d.init;
  for (double& v : s["bn.running_mean"]) v += 2.0;
  for (double& v : s["bn.running_var"]) v *= 3.0;
  std::vector<Tensor> in = {f32Tensor({kN, kD}, d.x)}, out;
  for (size_t i = 1; i < want.size(); ++i) in.push_back(f32Tensor(d.shapes.at(want[i]), s[want[i]]));
  ASSERT_TRUE(exe->run(in, &out).isOk());
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t c = 0; c < kC; ++c) {
      double z = 0;
      for (int64_t j = 0; j < kH; ++j) {
        double h = s["b1"][j];
        for (int64_t k = 0; k < kD; ++k) h += d.x[n * kD + k] * s["W1"][j * kD + k];
        const double a = s["gamma"][j] * (h - s["bn.running_mean"][j]) /
                             std::sqrt(s["bn.running_var"][j] + kEps) +
                         s["beta"][j];
        z += std::max(a, 0.0) * s["W2"][j * kC + c];
      }
      EXPECT_NEAR(out[0].data<float>()[n * kC + c], z, 1e-5 * (1 + std::abs(z)));
    }
}

// Frozen (batchNormInTraining off, --freeze-batchnorm): the statistics stay constants of the
// graph, not state; scale and B still train. With resident state the variables are the
// parameters and, when training, the buffers too.
TEST(TrainingBatchNorm, FrozenStatisticsAreNotState) {
  Training t = sgd(0.1);
  t.batchNormInTraining = false;
  std::string error;
  auto exe = compile(t, &error);
  ASSERT_TRUE(exe) << error;
  const std::vector<std::string> want = {"x", "labels", "W1", "b1", "gamma", "beta", "W2"};
  EXPECT_EQ(exe->inputNames(), want);

  Training resident = sgd(0.1);
  resident.residentState = true;
  auto r = compile(resident, &error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->inputNames(), (std::vector<std::string>{"x", "labels"}));
  const std::vector<std::string> vars = r->variableNames();
  for (const char* n : {"gamma", "beta", "bn.running_mean", "bn.running_var"})
    EXPECT_NE(std::find(vars.begin(), vars.end(), n), vars.end()) << n;
}

// With --all-params every f32 initializer trains, but the statistics stay buffers (updated by
// the step, not by the optimizer).
TEST(TrainingBatchNorm, AllParamsKeepsTheStatisticsBuffers) {
  Training t = sgd(0.1);
  t.allFloatConstants = true;
  std::string error;
  auto exe = compile(t, &error);
  ASSERT_TRUE(exe) << error;
  const std::vector<std::string> want = {"x",  "labels", "W1", "b1", "gamma", "beta",
                                         "W2", "bn.running_mean", "bn.running_var"};
  EXPECT_EQ(exe->inputNames(), want);
}

// PyTorch refuses training-mode batch norm with one value per channel; so does the step.
TEST(TrainingBatchNorm, OneValuePerChannelIsAnError) {
  testing_onnx::Model m;
  m.input("x", {1, kH});
  for (const char* n : {"gamma", "beta", "mean", "var"})
    m.floatInit(n, {kH}, std::vector<float>(kH, 1.f));
  m.floatInit("W", {kH, kC}, std::vector<float>(kH * kC, 0.5f));
  m.node("BatchNormalization", {"x", "gamma", "beta", "mean", "var"}, {"a"}, "bn1");
  m.node("MatMul", {"a", "W"}, {"logits"}, "fc");
  m.output("logits");
  const std::string path = testing_onnx::writeTemp(m, "training_bn_one");
  CompileOptions co;
  ASSERT_TRUE(setTargetDevices(&co, "cpu").isOk());
  co.training = sgd(0.1);
  CompileResult res;
  Status st = compileOnnxFile(path, ImportOptions{}, co, &res);
  std::remove(path.c_str());
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("BatchNormalization 'bn1' has 1 value per channel"), std::string::npos)
      << st.message();
}

}  // namespace
