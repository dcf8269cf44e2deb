// Training-mode Dropout in the training step graph (compiler/training/TrainingGraph.h): a tiny
// classifier logits = MatMul(Dropout(Gemm(x, W1, b1)), W2) trained by plain SGD (which has no
// `step` of its own). The step must gain `step` as state and feed it to the Dropouts as their
// counter, so steps 1 and 2 draw different masks from one batch, the same `step` redraws the
// same mask bit for bit (a resumed run), and forward and backward use one mask: each step is
// checked against a host double reference that draws the mask with runtime/Philox.h.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "compiler/training/TrainingGraph.h"
#include "runtime/Philox.h"
#include "tests/unit/onnx_model_builder.h"
#include "tools/driver/Driver.h"

using namespace tandem;
using Training = CompileOptions::Training;

namespace {

constexpr int64_t kN = 4, kD = 3, kH = 16, kC = 3;
constexpr double kRatio = 0.5;
constexpr uint64_t kSeed = 123;  // LoadOptions::seed: the Dropout has no seed attribute

struct Data {
  std::vector<float> x, W1, b1, W2;
  std::vector<int64_t> labels;
};

const Data& data() {
  static const Data d = [] {
    Data d;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    auto draw = [&](int64_t n) {
      std::vector<float> v(n);
      for (float& e : v) e = u(rng);
      return v;
    };
    d.x = draw(kN * kD);
    d.W1 = draw(kH * kD);
    d.b1 = draw(kH);
    d.W2 = draw(kH * kC);
    for (int64_t i = 0; i < kN; ++i) d.labels.push_back(i % kC);
    return d;
  }();
  return d;
}

// h = Gemm(x, W1, b1, transB = 1); hd = Dropout(h, 0.5, true) (node "drop");
// logits = MatMul(hd, W2).
const std::string& modelPath() {
  static const testing_onnx::RemovedAtExit file{[] {
    const Data& d = data();
    testing_onnx::Model m;
    m.g()->set_name("dropout");
    m.input("x", {kN, kD});
    m.floatInit("W1", {kH, kD}, d.W1).floatInit("b1", {kH}, d.b1).floatInit("W2", {kH, kC}, d.W2);
    m.floatInit("ratio", {}, {(float)kRatio});
    auto* mode = m.g()->add_initializer();
    mode->set_name("training_mode");
    mode->set_data_type(onnx::TensorProto::BOOL);
    mode->add_int32_data(1);
    testing_onnx::intAttr(m.node("Gemm", {"x", "W1", "b1"}, {"h"}, "fc1"), "transB", 1);
    m.node("Dropout", {"h", "ratio", "training_mode"}, {"hd"}, "drop");
    m.node("MatMul", {"hd", "W2"}, {"logits"}, "fc2");
    m.output("logits");
    return testing_onnx::writeTemp(m, "dropout");
  }()};
  return file.path;
}

// The host reference of one SGD step (lr) at counter `step`: the loss and the new W1, b1, W2.
// The mask is Philox's (runtime/Philox.h) for the plan seed, the stream of node "drop" and the
// counter; forward and backward share it.
struct RefStep {
  double loss = 0;
  std::vector<double> W1, b1, W2;
};

RefStep reference(const std::vector<float>& W1, const std::vector<float>& b1,
                  const std::vector<float>& W2, uint32_t step, double lr) {
  const Data& d = data();
  DropoutMask m;
  m.seed = kSeed;
  m.stream = fnv1a32("drop", 4);
  m.step = step;
  m.threshold = DropoutMask::thresholdFor(kRatio);
  const double scale = 1 / (1 - kRatio);
  std::vector<double> hd(kN * kH), dW1(kH * kD, 0), db1(kH, 0), dW2(kH * kC, 0);
  RefStep r;
  for (int64_t n = 0; n < kN; ++n) {
    std::vector<double> keep(kH);
    for (int64_t j = 0; j < kH; ++j) {
      double s = b1[j];
      for (int64_t k = 0; k < kD; ++k) s += (double)d.x[n * kD + k] * W1[j * kD + k];
      keep[j] = m.keep((uint64_t)(n * kH + j)) ? scale : 0.0;
      hd[n * kH + j] = s * keep[j];
    }
    double z[kC], zmax = -1e300, sum = 0;
    for (int64_t c = 0; c < kC; ++c) {
      z[c] = 0;
      for (int64_t j = 0; j < kH; ++j) z[c] += hd[n * kH + j] * W2[j * kC + c];
      zmax = std::max(zmax, z[c]);
    }
    for (int64_t c = 0; c < kC; ++c) sum += std::exp(z[c] - zmax);
    r.loss += -(z[d.labels[n]] - zmax - std::log(sum)) / kN;
    for (int64_t c = 0; c < kC; ++c) {
      const double dz = (std::exp(z[c] - zmax) / sum - (c == d.labels[n] ? 1 : 0)) / kN;
      for (int64_t j = 0; j < kH; ++j) {
        dW2[j * kC + c] += hd[n * kH + j] * dz;
        const double dh = W2[j * kC + c] * dz * keep[j];  // through the same mask
        db1[j] += dh;
        for (int64_t k = 0; k < kD; ++k) dW1[j * kD + k] += dh * d.x[n * kD + k];
      }
    }
  }
  auto update = [lr](const std::vector<float>& p, const std::vector<double>& g) {
    std::vector<double> out(p.size());
    for (size_t i = 0; i < p.size(); ++i) out[i] = p[i] - lr * g[i];
    return out;
  };
  r.W1 = update(W1, dW1);
  r.b1 = update(b1, db1);
  r.W2 = update(W2, dW2);
  return r;
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// The model's SGD step (lr 0.5) for the CPU, loaded with the plan seed kSeed; null on failure.
std::unique_ptr<Executable> compileSgdStep(bool allParams) {
  Training t;
  t.optimizer = Training::Optimizer::Sgd;
  t.learningRate = 0.5;
  t.allFloatConstants = allParams;
  CompileOptions co;
  EXPECT_TRUE(setTargetDevices(&co, "cpu").isOk());
  co.training = t;
  CompileResult r;
  Status st = compileOnnxFile(modelPath(), ImportOptions{}, co, &r);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!st.isOk()) return nullptr;
  LoadOptions lo{1};
  lo.seed = kSeed;
  std::unique_ptr<Executable> exe;
  EXPECT_TRUE(Executable::load(r.plan, lo, &exe).isOk());
  return exe;
}

TEST(TrainingDropout, StepFeedsTheCounterNewMaskEachStepSameMaskOnRerun) {
  Training t;
  t.optimizer = Training::Optimizer::Sgd;
  t.learningRate = 0.5;  // compileSgdStep's
  ASSERT_FALSE(training::usesStepCounter(t));  // the Dropout alone must bring `step`
  std::unique_ptr<Executable> exe = compileSgdStep(/*allParams=*/false);
  ASSERT_TRUE(exe);

  // The state convention: step last, f32 [], and step_new last.
  const std::vector<std::string> wantIn = {"x", "labels", "W1", "b1", "W2", "step"};
  const std::vector<std::string> wantOut = {"loss", "W1_new", "b1_new", "W2_new", "step_new"};
  ASSERT_EQ(exe->inputNames(), wantIn);
  ASSERT_EQ(exe->outputNames(), wantOut);
  EXPECT_EQ(exe->inputTypes().back().dtype, DType::F32);
  EXPECT_TRUE(exe->inputTypes().back().shape.empty());

  const Data& d = data();
  auto runStep = [&](const std::vector<float>& W1, const std::vector<float>& b1,
                     const std::vector<float>& W2, float step) {
    std::vector<Tensor> in = {Tensor::fromVector<float>({kN, kD}, d.x),
                              Tensor::fromVector<int64_t>({kN}, d.labels),
                              Tensor::fromVector<float>({kH, kD}, W1),
                              Tensor::fromVector<float>({kH}, b1),
                              Tensor::fromVector<float>({kH, kC}, W2),
                              Tensor::fromVector<float>({}, {step})};
    std::vector<Tensor> out;
    Status s = exe->run(in, &out);
    EXPECT_TRUE(s.isOk()) << s.message();
    return out;
  };
  auto expectMatches = [](const std::vector<Tensor>& out, const RefStep& ref, int stepNo) {
    EXPECT_NEAR(out[0].data<float>()[0], ref.loss, 1e-5 * (1 + ref.loss)) << "step " << stepNo;
    const std::vector<const std::vector<double>*> want = {&ref.W1, &ref.b1, &ref.W2};
    for (size_t p = 0; p < 3; ++p)
      for (size_t i = 0; i < want[p]->size(); ++i)
        EXPECT_NEAR(out[1 + p].data<float>()[i], (*want[p])[i], 1e-5) << "step " << stepNo
                                                                      << " param " << p << " " << i;
  };

  // Step 1 (step = 0) from the initializers, then step 2 (step = 1) from the same parameters
  // and batch: only the counter differs, so any difference is the mask's.
  auto s1 = runStep(d.W1, d.b1, d.W2, 0.f);
  auto s2 = runStep(d.W1, d.b1, d.W2, 1.f);
  ASSERT_EQ(s1.size(), 5u);
  ASSERT_EQ(s2.size(), 5u);
  EXPECT_EQ(s1[4].data<float>()[0], 1.f);  // step_new
  EXPECT_EQ(s2[4].data<float>()[0], 2.f);
  expectMatches(s1, reference(d.W1, d.b1, d.W2, 0, t.learningRate), 1);
  expectMatches(s2, reference(d.W1, d.b1, d.W2, 1, t.learningRate), 2);
  EXPECT_NE(s1[0].data<float>()[0], s2[0].data<float>()[0]);  // different masks, losses
  EXPECT_NE(values(s1[3]), values(s2[3]));                     // and W2 updates
  // The two reference masks differ (else the check above would prove nothing about counters).
  DropoutMask a, b;
  a.seed = b.seed = kSeed;
  a.stream = b.stream = fnv1a32("drop", 4);
  a.threshold = b.threshold = DropoutMask::thresholdFor(kRatio);
  b.step = 1;
  int differ = 0;
  for (uint64_t i = 0; i < (uint64_t)(kN * kH); ++i) differ += a.keep(i) != b.keep(i);
  EXPECT_GT(differ, 10);

  // A real second step from the first step's state; then that step again from the same state
  // (a run resumed from a checkpoint): bit-identical outputs.
  auto W1 = values(s1[1]), b1 = values(s1[2]), W2 = values(s1[3]);
  auto next = runStep(W1, b1, W2, s1[4].data<float>()[0]);
  expectMatches(next, reference(W1, b1, W2, 1, t.learningRate), 2);
  auto again = runStep(W1, b1, W2, s1[4].data<float>()[0]);
  for (size_t o = 0; o < next.size(); ++o) {
    ASSERT_EQ(next[o].bytes(), again[o].bytes());
    EXPECT_EQ(std::memcmp(next[o].raw(), again[o].raw(), next[o].bytes()), 0) << wantOut[o];
  }
}


// Cross-compiled for cpu,cuda:0=h100, the training-mode Dropouts (forward, and the backward
// one that redraws the mask) are CUDA candidates like their neighbours: the CUDA Dropout draws
// the same Philox mask (runtime/cuda/Tensor.cpp), so nothing pins them to the CPU.
// With every f32 initializer a parameter (--all-params), the Dropout's ratio initializer stays a
// hyperparameter: it has no gradient, and the step compiles with W1, b1, W2 alone.
TEST(TrainingDropout, AllParamsLeavesTheRatio) {
  std::unique_ptr<Executable> exe = compileSgdStep(/*allParams=*/true);
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->inputNames(), (std::vector<std::string>{"x", "labels", "W1", "b1", "W2", "step"}));
}

TEST(TrainingDropout, CrossCompiledDropoutsMayRunOnCuda) {
  Training t;
  t.optimizer = Training::Optimizer::Sgd;
  t.learningRate = 0.5;
  CompileOptions co;
  ASSERT_TRUE(setTargetDevices(&co, "cpu,cuda:0=h100").isOk());
  co.training = t;
  CompileResult r;
  Status st = compileOnnxFile(modelPath(), ImportOptions{}, co, &r);
  ASSERT_TRUE(st.isOk()) << st.message();
  int dropouts = 0;
  std::istringstream log(r.placementLogText);
  for (std::string line; std::getline(log, line);) {
    if (line.find("Dropout") == std::string::npos) continue;
    ++dropouts;
    EXPECT_NE(line.find("candidates: cpu"), std::string::npos) << line;
    EXPECT_NE(line.find(", cuda:0 "), std::string::npos) << line;
    EXPECT_EQ(line.find("cuda:0 0us"), std::string::npos) << line << ": a training Dropout is not free";
  }
  EXPECT_EQ(dropouts, 2) << r.placementLogText;
}

}  // namespace
