// Resident training state and the Trainer: a step plan whose parameters and optimizer state are
// variables computes exactly what the plan with state fed in and out computes; checkpoints
// resume bit-identically; bad data, NaN losses and another model's checkpoint are clear errors;
// cross-compiled for cpu,cuda:0=h100 every variable stays with its readers and update, and the
// plan runs here through the CPU fallback with the CPU plan's losses.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "frontend/OnnxTensor.h"
#include "runtime/FileIO.h"
#include "runtime/Trainer.h"
#include "tests/unit/onnx_model_builder.h"
#include "tests/unit/runtime/fake_gpu.h"
#include "tools/driver/Driver.h"
#include "tools/driver/Train.h"

using namespace tandem;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kD = 16, kC = 4;

// x [N, 16] -> Gemm(hidden) -> Relu -> Gemm(4): logits, or with `logSoftmax` their
// LogSoftmax (log-probabilities; the same initial weights).
std::string writeModel(int64_t hidden, const std::string& tag, bool logSoftmax = false) {
  testing_onnx::Model m;
  m.input("x", {-1, kD}, onnx::TensorProto::FLOAT, {"N"});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.4f, 0.4f);
  auto init = [&](const std::string& name, std::vector<int64_t> dims) {
    std::vector<float> v((size_t)(dims.size() == 2 ? dims[0] * dims[1] : dims[0]));
    for (float& e : v) e = u(rng);
    m.floatInit(name, dims, v);
  };
  init("fc1.weight", {hidden, kD});
  init("fc1.bias", {hidden});
  init("fc2.weight", {kC, hidden});
  init("fc2.bias", {kC});
  testing_onnx::intAttr(m.node("Gemm", {"x", "fc1.weight", "fc1.bias"}, {"h"}, "fc1"), "transB", 1);
  m.node("Relu", {"h"}, {"hr"}, "relu");
  testing_onnx::intAttr(m.node("Gemm", {"hr", "fc2.weight", "fc2.bias"}, {"logits"}, "fc2"), "transB", 1);
  if (logSoftmax)
    testing_onnx::intAttr(m.node("LogSoftmax", {"logits"}, {"logp"}, "log_softmax"), "axis", 1);
  m.output(logSoftmax ? "logp" : "logits");
  return testing_onnx::writeTemp(m, "trainer_" + tag);
}

struct TempModel {
  std::string path;
  TempModel(int64_t hidden, const std::string& tag, bool logSoftmax = false)
      : path(writeModel(hidden, tag, logSoftmax)) {}
  ~TempModel() { std::remove(path.c_str()); }
};

CompileOptions::Training adam() {
  CompileOptions::Training t;
  t.optimizer = CompileOptions::Training::Optimizer::Adam;
  t.learningRate = 1e-2;
  return t;
}

// `model` compiled with `co` and loaded on 1 thread (null, with a test failure, on an error);
// `result` (optional) gets the compile result.
std::unique_ptr<Executable> compileAndLoadOneThread(const std::string& model, const CompileOptions& co,
                                                    CompileResult* result = nullptr) {
  CompileResult r;
  Status st = compileOnnxFile(model, ImportOptions{}, co, &r);
  EXPECT_TRUE(st.isOk()) << st.message();
  std::unique_ptr<Executable> exe;
  LoadOptions lo;
  lo.threads = 1;
  st = Executable::load(r.plan, lo, &exe);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (result) *result = r;
  return exe;
}

// The training step (batch `batch`, state resident or fed back) or, with `forwardOnly`, the
// forward plan taking the parameters as inputs; compiled for `targets` and loaded on 1 thread.
// `inPlace`: CompileOptions::Training::updatesInPlace.
std::unique_ptr<Executable> compilePlan(
    const std::string& model, int64_t batch, bool resident, bool forwardOnly,
    const std::string& targets, CompileResult* result, bool inPlace = true,
    CompileOptions::Training::Loss loss = CompileOptions::Training::Loss::CrossEntropy,
    bool metrics = false) {
  CompileOptions co;
  EXPECT_TRUE(setTargetDevices(&co, targets).isOk());
  co.training = adam();
  co.training->loss = loss;
  co.training->residentState = resident;
  co.training->forwardOnly = forwardOnly;
  co.training->updatesInPlace = inPlace;
  co.training->metrics = metrics;
  co.inputShapes["x"] = {batch, kD};
  return compileAndLoadOneThread(model, co, result);
}

std::unique_ptr<Executable> compileStep(const std::string& model, int64_t batch, bool resident,
                                        const std::string& targets = "cpu",
                                        CompileResult* result = nullptr) {
  return compilePlan(model, batch, resident, false, targets, result);
}

std::unique_ptr<Executable> compileForward(const std::string& model, int64_t batch) {
  return compilePlan(model, batch, false, true, "cpu", nullptr);
}

// A learnable synthetic set: the label is the argmax of four fixed projections of x.
struct Data {
  std::vector<float> x;
  std::vector<int64_t> labels;
  SampleSource source() const {
    SampleSource s;
    s.count = (int64_t)labels.size();
    s.sampleShape = {kD};
    s.samples = x.data();
    s.labels = labels.data();
    return s;
  }
};

Data makeData(int64_t n, uint64_t seed) {
  Data d;
  std::mt19937 rng((unsigned)seed);
  std::normal_distribution<float> g;
  d.x.resize((size_t)(n * kD));
  for (float& v : d.x) v = g(rng);
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    float bestV = -1e30f;
    for (int64_t c = 0; c < kC; ++c) {
      float s = 0;
      for (int64_t k = 0; k < kD; ++k) s += d.x[i * kD + k] * (float)(((k + 3 * c) % 5) - 2);
      if (s > bestV) bestV = s, best = c;
    }
    d.labels.push_back(best);
  }
  return d;
}

std::vector<Tensor> batchOf(const Data& d, int64_t b, int64_t batch) {
  std::vector<float> x(d.x.begin() + b * batch * kD, d.x.begin() + (b + 1) * batch * kD);
  std::vector<int64_t> l(d.labels.begin() + b * batch, d.labels.begin() + (b + 1) * batch);
  return {Tensor::fromVector<float>({batch, kD}, x), Tensor::fromVector<int64_t>({batch}, l)};
}

bool sameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

TEST(ResidentState, StepPlanTakesTheBatchAndKeepsTheState) {
  TempModel m(32, "shape");
  auto step = compileStep(m.path, 8, true);
  ASSERT_TRUE(step);
  EXPECT_EQ(step->inputNames(), (std::vector<std::string>{"x", "labels"}));
  EXPECT_EQ(step->outputNames(), (std::vector<std::string>{"loss"}));
  const auto& v = step->variableNames();
  for (const char* n : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc1.weight.m",
                        "fc2.bias.v", "step"})
    EXPECT_NE(std::find(v.begin(), v.end(), n), v.end()) << n;
  Tensor s;
  ASSERT_TRUE(step->readVariable("step", &s).isOk());
  EXPECT_EQ(s.data<float>()[0], 0.f);
  // Type-checked writes; an unknown name is an error.
  EXPECT_FALSE(step->writeVariable("step", Tensor::fromVector<float>({1}, {1.f})).isOk());
  EXPECT_NE(step->readVariable("nope", &s).message().find("no variable 'nope'"), std::string::npos);
}

TEST(ResidentState, MatchesThePlanThatFeedsTheStateBack) {
  // Same model, same batches: the resident plan and the plan with the state as inputs and
  // outputs give bit-identical losses and parameters after every step.
  TempModel m(32, "match");
  const int64_t batch = 8;
  auto resident = compileStep(m.path, batch, true);
  auto fed = compileStep(m.path, batch, false);
  ASSERT_TRUE(resident && fed);
  const Data d = makeData(64, 3);
  // The fed plan's state: its inputs 2.. start as the resident plan's initial variables.
  std::vector<Tensor> state;
  for (size_t i = 2; i < fed->inputNames().size(); ++i) {
    Tensor t;
    ASSERT_TRUE(resident->readVariable(fed->inputNames()[i], &t).isOk()) << fed->inputNames()[i];
    state.push_back(t);
  }
  for (int64_t s = 0; s < 6; ++s) {
    std::vector<Tensor> in = batchOf(d, s, batch), out, outFed;
    ASSERT_TRUE(resident->run(in, &out).isOk());
    for (const Tensor& t : state) in.push_back(t);
    ASSERT_TRUE(fed->run(in, &outFed).isOk());
    EXPECT_TRUE(sameBits(out[0], outFed[0])) << "step " << s << ": " << out[0].data<float>()[0]
                                             << " vs " << outFed[0].data<float>()[0];
    for (size_t i = 0; i < state.size(); ++i) state[i] = outFed[1 + i];
  }
  for (size_t i = 2; i < fed->inputNames().size(); ++i) {
    Tensor t;
    ASSERT_TRUE(resident->readVariable(fed->inputNames()[i], &t).isOk());
    EXPECT_TRUE(sameBits(t, state[i - 2])) << fed->inputNames()[i];
  }
  Tensor s;
  ASSERT_TRUE(resident->readVariable("step", &s).isOk());
  EXPECT_EQ(s.data<float>()[0], 6.f);
}

TEST(ResidentState, AFailedRunLeavesTheVariables) {
  // A wrong input type fails before any step; a label outside [0, 4) fails in the loss, which
  // runs before every update, those planned in place included (Executable.h): both leave every
  // variable as it was.
  TempModel m(32, "fail");
  auto step = compileStep(m.path, 8, true);
  ASSERT_TRUE(step);
  auto readAll = [&](std::vector<Tensor>* out) {
    out->clear();
    for (const std::string& n : step->variableNames()) {
      Tensor t;
      ASSERT_TRUE(step->readVariable(n, &t).isOk()) << n;
      out->push_back(t);
    }
  };
  std::vector<Tensor> before, after;
  readAll(&before);
  std::vector<Tensor> bad = {Tensor::alloc(DType::F32, {7, kD}), Tensor::alloc(DType::I64, {8})}, out;
  EXPECT_FALSE(step->run(bad, &out).isOk());
  std::vector<Tensor> badLabel = batchOf(makeData(8, 4), 0, 8);
  badLabel[1].data<int64_t>()[5] = 9;
  Status st = step->run(badLabel, &out);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.message().find("updated in place"), std::string::npos) << st.message();
  readAll(&after);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(sameBits(before[i], after[i])) << step->variableNames()[i];
}

TEST(ResidentState, AdamUpdatesArePlannedInPlace) {
  // Every update of the CPU Adam step (parameters, m, v, the step counter) is written into its
  // variable by its step: no update has an arena slot or is copied back, and the placement log
  // says so. With updatesInPlace off, every one is copied back.
  TempModel m(32, "inplace");
  CompileResult r, off;
  ASSERT_TRUE(compileStep(m.path, 8, true, "cpu", &r));
  ASSERT_TRUE(compilePlan(m.path, 8, true, false, "cpu", &off, false));
  int64_t bytes = 0, count = 0;
  for (const plan::Value& v : r.plan.values()) {
    if (v.kind() != plan::Value::VARIABLE) continue;
    const plan::Value& u = r.plan.values(v.update());
    EXPECT_TRUE(u.has_aliases_variable() && u.aliases_variable() == v.id()) << v.name() << " is copied back";
    bytes += v.bytes();
    ++count;
  }
  EXPECT_EQ(count, 13);  // 4 parameters, their m and v, the step counter
  const std::string n = std::to_string(count);
  EXPECT_NE(r.placementLogText.find("variables: " + std::to_string(bytes) + " bytes updated in place (" + n +
                                    " of " + n + "), 0 bytes copied back per run\n"),
            std::string::npos)
      << r.placementLogText;
  for (const plan::Value& v : off.plan.values()) EXPECT_FALSE(v.has_aliases_variable()) << v.name();
  EXPECT_NE(off.placementLogText.find("variables: 0 bytes updated in place (0 of " + n + "), " +
                                      std::to_string(bytes) + " bytes copied back per run ("),
            std::string::npos)
      << off.placementLogText;
  // The arena no longer holds the updates: the in-place plan's is smaller.
  ASSERT_EQ(r.plan.arenas_size(), 1);
  EXPECT_LT(r.plan.arenas(0).unplanned_bytes(), off.plan.arenas(0).unplanned_bytes());
}

TEST(ResidentState, InPlaceUpdatesMatchCopyBack) {
  // The same step with every update written in place and with every update copied back:
  // bit-identical losses for 6 steps and bit-identical variables after them.
  TempModel m(32, "inplace_bits");
  auto inPlace = compileStep(m.path, 8, true);
  auto copied = compilePlan(m.path, 8, true, false, "cpu", nullptr, false);
  ASSERT_TRUE(inPlace && copied);
  const Data d = makeData(48, 11);
  for (int64_t s = 0; s < 6; ++s) {
    std::vector<Tensor> in = batchOf(d, s, 8), a, b;
    ASSERT_TRUE(inPlace->run(in, &a).isOk());
    ASSERT_TRUE(copied->run(in, &b).isOk());
    EXPECT_TRUE(sameBits(a[0], b[0])) << "step " << s << ": " << a[0].data<float>()[0] << " vs "
                                      << b[0].data<float>()[0];
  }
  ASSERT_EQ(inPlace->variableNames(), copied->variableNames());
  for (const std::string& n : inPlace->variableNames()) {
    Tensor a, b;
    ASSERT_TRUE(inPlace->readVariable(n, &a).isOk());
    ASSERT_TRUE(copied->readVariable(n, &b).isOk());
    EXPECT_TRUE(sameBits(a, b)) << n;
  }
  Tensor s;
  ASSERT_TRUE(inPlace->readVariable("step", &s).isOk());
  EXPECT_EQ(s.data<float>()[0], 6.f);
}

std::unique_ptr<Trainer> makeTrainer(
    const std::string& model, int64_t batch,
    CompileOptions::Training::Loss loss = CompileOptions::Training::Loss::CrossEntropy,
    bool metrics = false) {
  std::unique_ptr<Trainer> t;
  Status st = Trainer::create(compilePlan(model, batch, true, false, "cpu", nullptr, true, loss, metrics),
                              compileForward(model, 16), &t);
  EXPECT_TRUE(st.isOk()) << st.message();
  return t;
}

TrainerOptions quiet(int epochs) {
  TrainerOptions o;
  o.epochs = epochs;
  o.showProgress = false;
  o.seed = 7;
  o.order = [](int64_t epoch) {
    std::vector<int64_t> v(64);
    for (int64_t i = 0; i < 64; ++i) v[(size_t)i] = (i * 37 + epoch * 11) % 64;
    return v;
  };
  return o;
}

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& tag)
      : path(testing::TempDir() + "/tandem_ckpt_" + tag + "_" + std::to_string(getpid())) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST(Trainer, LearnsAndEvaluates) {
  TempModel m(32, "learn");
  auto t = makeTrainer(m.path, 8);
  ASSERT_TRUE(t);
  const Data train = makeData(64, 1), test = makeData(48, 2);
  const SampleSource tr = train.source(), te = test.source();
  double acc0 = 0;
  ASSERT_TRUE(t->evaluate(te, &acc0, nullptr).isOk());
  std::vector<EpochReport> reports;
  ASSERT_TRUE(t->fit(tr, &te, quiet(20), &reports).isOk());
  ASSERT_EQ(reports.size(), 20u);
  EXPECT_EQ(reports[0].steps, 8);
  EXPECT_LT(reports.back().meanLoss, reports[0].meanLoss * 0.6);
  EXPECT_GT(reports.back().validationAccuracy, acc0 + 0.2);
  EXPECT_EQ(t->step(), 160);
  // predict: the forward plan with the trained parameters (48 rows: padded last batch).
  Tensor logits;
  ASSERT_TRUE(t->predict(Tensor::fromVector<float>({48, kD}, test.x), &logits).isOk());
  EXPECT_EQ(logits.shape(), (Shape{48, kC}));
}

// The Trainer on a model ending in LogSoftmax trained with nll: the same run as cross-entropy
// on the logits. Its accuracy (argmax) and validation loss (the host's cross-entropy of the
// forward plan's output, which for log-probabilities is their nll) are the logits run's; the
// losses agree to the CPU LogSoftmax kernel's f32 error (training_optimizer_test: Loss.*).
TEST(Trainer, NllOnLogSoftmaxIsCrossEntropyOnLogits) {
  TempModel logits(32, "ce"), logp(32, "nll", /*logSoftmax=*/true);
  auto ce = makeTrainer(logits.path, 8);
  auto nll = makeTrainer(logp.path, 8, CompileOptions::Training::Loss::Nll);
  ASSERT_TRUE(ce && nll);
  const Data train = makeData(64, 1), test = makeData(48, 2);
  const SampleSource tr = train.source(), te = test.source();
  std::vector<EpochReport> a, b;
  ASSERT_TRUE(ce->fit(tr, &te, quiet(5), &a).isOk());
  ASSERT_TRUE(nll->fit(tr, &te, quiet(5), &b).isOk());
  ASSERT_EQ(a.size(), b.size());
  for (size_t e = 0; e < a.size(); ++e) {
    EXPECT_NEAR(b[e].meanLoss, a[e].meanLoss, 1e-5 * a[e].meanLoss) << "epoch " << e;
    EXPECT_NEAR(b[e].validationLoss, a[e].validationLoss, 1e-5 * a[e].validationLoss)
        << "epoch " << e;
    EXPECT_EQ(b[e].validationAccuracy, a[e].validationAccuracy) << "epoch " << e;
  }
  EXPECT_LT(a.back().meanLoss, a.front().meanLoss * 0.8);
  // predict gives log-probabilities: each row's exp sums to 1.
  Tensor out;
  ASSERT_TRUE(nll->predict(Tensor::fromVector<float>({48, kD}, test.x), &out).isOk());
  for (int64_t i = 0; i < 48; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < kC; ++c) sum += std::exp((double)out.data<float>()[i * kC + c]);
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << i;
  }
}

TEST(Trainer, ResumeIsBitIdentical) {
  TempModel m(32, "resume");
  const Data train = makeData(64, 1);
  const SampleSource tr = train.source();
  for (bool metrics : {false, true}) {
    SCOPED_TRACE(metrics ? "with metrics" : "without metrics");
    const auto ce = CompileOptions::Training::Loss::CrossEntropy;
    // Uninterrupted: 2 epochs of 8 steps.
    auto a = makeTrainer(m.path, 8, ce, metrics);
    std::vector<EpochReport> ra, rc;
    ASSERT_TRUE(a->fit(tr, nullptr, quiet(2), &ra).isOk());
    std::map<std::string, Tensor> want;
    ASSERT_TRUE(a->variables(&want).isOk());
    // Interrupted after epoch 1 with checkpoints every 3 steps (3, 6 and the epoch's end, 8);
    // `latest` pointed back at step 6 as if the process had died there.
    TempDir dir(metrics ? "resume_metrics" : "resume");
    auto b = makeTrainer(m.path, 8, ce, metrics);
    TrainerOptions o = quiet(1);
    o.checkpointDir = dir.path;
    o.checkpointEverySteps = 3;
    ASSERT_TRUE(b->fit(tr, nullptr, o, nullptr).isOk());
    ASSERT_TRUE(fs::exists(dir.path + "/ckpt-6.tckpt"));
    ASSERT_TRUE(fs::exists(dir.path + "/ckpt-8.tckpt"));
    std::ofstream(dir.path + "/latest") << "ckpt-6.tckpt\n";
    auto c = makeTrainer(m.path, 8, ce, metrics);
    o = quiet(2);
    o.checkpointDir = dir.path;
    o.resume = true;
    ASSERT_TRUE(c->fit(tr, nullptr, o, &rc).isOk());
    EXPECT_EQ(c->step(), 16);
    std::map<std::string, Tensor> got;
    ASSERT_TRUE(c->variables(&got).isOk());
    ASSERT_EQ(got.size(), want.size());
    for (auto& [name, t] : want) EXPECT_TRUE(sameBits(t, got[name])) << name;
    ASSERT_EQ(rc.size(), 2u);
    EXPECT_EQ(rc[0].steps, 2);  // steps 7 and 8 of epoch 1 in this session
    if (metrics) {
      // The checkpoint kept epoch 1's sums: the resumed epoch reports the whole epoch.
      EXPECT_EQ(rc[0].meanLoss, ra[0].meanLoss);
      EXPECT_EQ(rc[0].trainAccuracy, ra[0].trainAccuracy);
    }
    EXPECT_EQ(rc[1].meanLoss, ra[1].meanLoss);
    // Another model's checkpoint (hidden 24, not 32) is refused by name.
    TempModel other(24, "other");
    auto d = makeTrainer(other.path, 8, ce, metrics);
    Status st = d->fit(tr, nullptr, o, nullptr);
    ASSERT_FALSE(st.isOk());
    EXPECT_NE(st.message().find("fingerprint"), std::string::npos) << st.message();
  }
}

// The step's metric state: metric.loss_sum adds each step's loss, metric.correct counts the
// samples whose argmax (of the logits with the parameters before the step's update, the
// forward plan's) is their label.
TEST(ResidentState, MetricsAreSummedInTheStep) {
  TempModel m(32, "metrics");
  for (auto loss : {CompileOptions::Training::Loss::CrossEntropy, CompileOptions::Training::Loss::Nll}) {
    // The step with metrics returns nothing; the same step without them gives each loss.
    auto step = compilePlan(m.path, 8, true, false, "cpu", nullptr, true, loss, /*metrics=*/true);
    auto plain = compilePlan(m.path, 8, true, false, "cpu", nullptr, true, loss);
    auto forward = compilePlan(m.path, 8, false, true, "cpu", nullptr);
    ASSERT_TRUE(step && plain && forward);
    EXPECT_TRUE(step->outputNames().empty());
    const Data d = makeData(48, 4);
    double lossSum = 0;
    int64_t correct = 0;
    for (int64_t b = 0; b < 6; ++b) {
      std::vector<Tensor> in = batchOf(d, b, 8), out, logits, fin = {in[0]};
      for (size_t j = 1; j < forward->inputNames().size(); ++j) {
        Tensor p;
        ASSERT_TRUE(step->readVariable(forward->inputNames()[j], &p).isOk());
        fin.push_back(p);
      }
      ASSERT_TRUE(forward->run(fin, &logits).isOk());
      for (int64_t i = 0; i < 8; ++i) {
        const float* z = logits[0].data<float>() + i * kC;
        correct += (std::max_element(z, z + kC) - z) == in[1].data<int64_t>()[i];
      }
      ASSERT_TRUE(step->run(in, &out).isOk());
      EXPECT_TRUE(out.empty());
      ASSERT_TRUE(plain->run(in, &out).isOk());
      lossSum += out[0].data<float>()[0];
      Tensor l, c;
      ASSERT_TRUE(step->readVariable("metric.loss_sum", &l).isOk());
      ASSERT_TRUE(step->readVariable("metric.correct", &c).isOk());
      EXPECT_NEAR(l.data<float>()[0], lossSum, 1e-5 * std::fabs(lossSum) + 1e-6) << "step " << b;
      EXPECT_EQ(c.data<float>()[0], (float)correct) << "step " << b;
    }
    EXPECT_GT(correct, 0);
    EXPECT_LT(correct, 48);
  }
}

// The Trainer with the step's metrics: the same training as without (the metrics change no
// update), the epoch's loss from the device's sums, its accuracy, fetched every N steps.
TEST(Trainer, MetricsFromTheDeviceMatchTheStepLosses) {
  TempModel m(32, "fit_metrics");
  auto plain = makeTrainer(m.path, 8);
  auto withMetrics = makeTrainer(m.path, 8, CompileOptions::Training::Loss::CrossEntropy, true);
  ASSERT_TRUE(plain && withMetrics);
  const Data train = makeData(64, 1), test = makeData(48, 2);
  const SampleSource tr = train.source(), te = test.source();
  std::vector<EpochReport> a, b;
  ASSERT_TRUE(plain->fit(tr, &te, quiet(3), &a).isOk());
  TrainerOptions o = quiet(3);
  o.metricsEverySteps = 3;
  std::vector<std::string> lines;
  o.showProgress = true;
  o.progress.tty = false;
  o.progress.write = [&](const std::string& s) { lines.push_back(s); };
  ASSERT_TRUE(withMetrics->fit(tr, &te, o, &b).isOk());
  ASSERT_EQ(a.size(), b.size());
  for (size_t e = 0; e < a.size(); ++e) {
    EXPECT_NEAR(b[e].meanLoss, a[e].meanLoss, 1e-5 * a[e].meanLoss) << "epoch " << e;
    EXPECT_EQ(b[e].validationAccuracy, a[e].validationAccuracy) << "epoch " << e;
    EXPECT_EQ(a[e].trainAccuracy, -1);
    EXPECT_GE(b[e].trainAccuracy, 0.0);
    EXPECT_LE(b[e].trainAccuracy, 1.0);
  }
  EXPECT_GT(b.back().trainAccuracy, b.front().trainAccuracy);
  std::map<std::string, Tensor> va, vb;
  ASSERT_TRUE(plain->variables(&va).isOk());
  ASSERT_TRUE(withMetrics->variables(&vb).isOk());
  for (auto& [name, t] : va) EXPECT_TRUE(sameBits(t, vb[name])) << name;
  std::string all;
  for (const std::string& l : lines) all += l;
  EXPECT_NE(all.find("accuracy"), std::string::npos) << all;
}

TEST(Trainer, BadDataIsAClearError) {
  TempModel m(32, "bad");
  auto t = makeTrainer(m.path, 8);
  Data d = makeData(64, 1);
  d.labels[13] = 9;
  Status st = t->fit(d.source(), nullptr, quiet(1), nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("sample 13 has label 9, outside [0, 4)"), std::string::npos) << st.message();
  // A fetch source's labels are checked as its batches arrive.
  SampleSource fetched = d.source();
  fetched.samples = nullptr;
  fetched.labels = nullptr;
  fetched.fetch = [&d](int64_t i, void* out, int64_t* label) {
    std::memcpy(out, d.x.data() + i * kD, kD * sizeof(float));
    *label = d.labels[(size_t)i];
    return Status::ok();
  };
  st = t->fit(fetched, nullptr, quiet(1), nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("training data: sample 13 has label 9, outside [0, 4)"), std::string::npos)
      << st.message();
  d = makeData(64, 1);
  for (int64_t k = 0; k < kD; ++k) d.x[(size_t)k] = 3e38f;  // logits overflow: inf - inf
  st = t->fit(d.source(), nullptr, quiet(1), nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("the loss is nan"), std::string::npos) << st.message();
  // With the metrics fetched every 4 steps the error names the steps among which it was.
  auto withMetrics = makeTrainer(m.path, 8, CompileOptions::Training::Loss::CrossEntropy, true);
  TrainerOptions every4 = quiet(1);
  every4.metricsEverySteps = 4;
  st = withMetrics->fit(d.source(), nullptr, every4, nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("steps 1 to 4: the loss is nan"), std::string::npos) << st.message();
  // A plan without variables is not a training step.
  std::unique_ptr<Trainer> none;
  st = Trainer::create(compileForward(m.path, 8), compileForward(m.path, 8), &none);
  EXPECT_NE(st.message().find("no variables"), std::string::npos) << st.message();
}

TEST(ResidentState, CrossCompiledForAGpuKeepsVariablesWithTheirUpdates) {
  // Whatever the cost model chooses for this small MLP on cpu + H100 at batch 128, every
  // variable lives where its readers and its update run (no Copy ever reads one), only the
  // batch and the loss cross per run besides copies of activations, and the plan runs here
  // through the CPU fallback with the CPU plan's losses.
  TempModel m(256, "gpu");
  const int64_t batch = 128;
  CompileResult r;
  auto gpu = compileStep(m.path, batch, true, "cpu,cuda:0=h100", &r);
  ASSERT_TRUE(gpu);
  const plan::Plan& p = r.plan;
  for (const plan::Value& v : p.values()) {
    if (v.kind() != plan::Value::VARIABLE) continue;
    EXPECT_EQ(p.values(v.update()).device(), v.device()) << v.name();
    for (const plan::Step& s : p.steps())
      for (int id : s.inputs())
        if (id == v.id()) {
          EXPECT_NE(s.op_type(), "Copy") << v.name() << " is copied per run";
          EXPECT_EQ(s.device(), v.device()) << s.name() << " reads " << v.name();
        }
  }
  EXPECT_NE(r.placementLogText.find("per run: in " + std::to_string(batch * kD * 4 + batch * 8) +
                                    " bytes (x " + std::to_string(batch * kD * 4) + ", labels " +
                                    std::to_string(batch * 8) + "); out 4 bytes (loss 4)"),
            std::string::npos)
      << r.placementLogText;
  EXPECT_NE(r.placementLogText.find("variables resident, not moved"), std::string::npos);
  auto cpu = compileStep(m.path, batch, true);
  const Data d = makeData(3 * batch, 9);
  for (int64_t s = 0; s < 3; ++s) {
    std::vector<Tensor> in = batchOf(d, s, batch), a, b;
    ASSERT_TRUE(gpu->run(in, &a).isOk());
    ASSERT_TRUE(cpu->run(in, &b).isOk());
    EXPECT_NEAR(a[0].data<float>()[0], b[0].data<float>()[0], 1e-5 * std::fabs(b[0].data<float>()[0]))
        << "step " << s;
  }
}

// Keras's MNIST CNN (Conv 32 3x3, Relu, Conv 64 3x3, Relu, MaxPool 2, Dropout .25, Flatten,
// Dense 128, Relu, Dropout .5, Dense 10), random weights, written to a temporary file.
std::string writeKerasCnn() {
  testing_onnx::Model m;
  m.input("x", {-1, 1, 28, 28}, onnx::TensorProto::FLOAT, {"N"});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  auto init = [&](const std::string& name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> v((size_t)n);
    for (float& e : v) e = u(rng);
    m.floatInit(name, dims, v);
  };
  init("conv1.weight", {32, 1, 3, 3});
  init("conv1.bias", {32});
  init("conv2.weight", {64, 32, 3, 3});
  init("conv2.bias", {64});
  init("fc1.weight", {128, 9216});
  init("fc1.bias", {128});
  init("fc2.weight", {10, 128});
  init("fc2.bias", {10});
  m.floatInit("p1", {}, {0.25f});
  m.floatInit("p2", {}, {0.5f});
  m.node("Conv", {"x", "conv1.weight", "conv1.bias"}, {"c1"}, "conv1");
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  m.node("Conv", {"r1", "conv2.weight", "conv2.bias"}, {"c2"}, "conv2");
  m.node("Relu", {"c2"}, {"r2"}, "relu2");
  testing_onnx::intsAttr(m.node("MaxPool", {"r2"}, {"mp"}, "pool"), "kernel_shape", {2, 2});
  testing_onnx::intsAttr(m.g()->mutable_node(m.g()->node_size() - 1), "strides", {2, 2});
  m.node("Dropout", {"mp", "p1"}, {"d1"}, "drop1");
  m.node("Flatten", {"d1"}, {"f"}, "flatten");
  testing_onnx::intAttr(m.node("Gemm", {"f", "fc1.weight", "fc1.bias"}, {"h"}, "fc1"), "transB", 1);
  m.node("Relu", {"h"}, {"hr"}, "relu3");
  m.node("Dropout", {"hr", "p2"}, {"d2"}, "drop2");
  testing_onnx::intAttr(m.node("Gemm", {"d2", "fc2.weight", "fc2.bias"}, {"logits"}, "fc2"), "transB", 1);
  m.output("logits");
  return testing_onnx::writeTemp(m, "trainer_keras_cnn");
}

TEST(ResidentState, KerasCnnStepRunsWhollyOnTheGpu) {
  // The scenario: the Keras CNN's Adam step at batch 128 cross-compiled for
  // cpu,cuda:0=h100. Every step (forward, loss, backward, the updates, the step counter and
  // Adam's scalars) and every variable is on cuda:0; per run only the batch goes in and the
  // loss comes out. Fails when the cost model prices a host round trip, a fused update or a
  // variable read off its device as cheaper than it is (each made the last Dense, the loss and
  // the step scalars go to the host).
  const std::string path = writeKerasCnn();
  struct Remove {
    std::string p;
    ~Remove() { std::remove(p.c_str()); }
  } remove{path};
  const int64_t batch = 128;
  CompileOptions co;
  ASSERT_TRUE(setTargetDevices(&co, "cpu,cuda:0=h100").isOk());
  co.training = adam();
  co.training->learningRate = 1e-3;
  co.training->residentState = true;
  co.training->metrics = true;  // as tandem train and the example compile it
  co.inputShapes["x"] = {batch, 1, 28, 28};
  CompileResult r;
  Status st = compileOnnxFile(path, ImportOptions{}, co, &r);
  ASSERT_TRUE(st.isOk()) << st.message();
  int variables = 0;
  for (const plan::Value& v : r.plan.values())
    if (v.kind() == plan::Value::VARIABLE) {
      ++variables;
      EXPECT_EQ(v.device(), "cuda:0") << v.name();
    }
  // 8 parameters, their two Adam slots each, the step counter, the two metrics.
  EXPECT_EQ(variables, 8 * 3 + 1 + 2);
  int copies = 0;
  for (const plan::Step& s : r.plan.steps()) {
    if (s.op_type() == "Copy") {
      ++copies;
      continue;
    }
    EXPECT_EQ(s.device(), "cuda:0") << s.name() << " (" << s.op_type() << ")";
  }
  EXPECT_LE(copies, 2) << "the batch in (x, labels); the loss is summed on the device";
  const int64_t in = batch * 28 * 28 * 4 + batch * 8;
  EXPECT_NE(r.placementLogText.find("per run: in " + std::to_string(in) + " bytes (x " +
                                    std::to_string(batch * 28 * 28 * 4) + ", labels " +
                                    std::to_string(batch * 8) + "); out 0 bytes; between devices " +
                                    std::to_string(in) + " bytes"),
            std::string::npos)
      << r.placementLogText;

  // Loaded on a fake asynchronous GPU (testing_fake::FakeGpu: CPU kernels, work run only when
  // the host waits): every step is issued to the device, so enqueue() returns with the step
  // in flight, and three steps give the CPU plan's metrics.
  testing_fake::FakeGpu* gpu = nullptr;
  LoadOptions lo;
  lo.threads = 1;
  lo.backendFactory = testing_fake::fakeGpuFactory(&gpu);
  std::unique_ptr<Executable> onGpu, onCpu;
  st = Executable::load(r.plan, lo, &onGpu);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_TRUE(onGpu->isAsynchronous()) << "a step of the training plan runs on the host";
  ASSERT_TRUE(setTargetDevices(&co, "cpu").isOk());
  CompileResult rc;
  st = compileOnnxFile(path, ImportOptions{}, co, &rc);
  ASSERT_TRUE(st.isOk()) << st.message();
  lo.backendFactory = nullptr;
  ASSERT_TRUE(Executable::load(rc.plan, lo, &onCpu).isOk());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int s = 0; s < 3; ++s) {
    Tensor x, labels;
    ASSERT_TRUE(onGpu->allocateInput(0, &x).isOk());
    ASSERT_TRUE(onGpu->allocateInput(1, &labels).isOk());
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
    for (int64_t i = 0; i < batch; ++i) labels.data<int64_t>()[i] = (i * 7 + s) % 10;
    ASSERT_TRUE(onGpu->enqueue({x, labels}).isOk());
    EXPECT_GT(gpu->pending(), 0u) << "step " << s << " waited for the device";
    std::vector<Tensor> out;
    ASSERT_TRUE(onCpu->run({x, labels}, &out).isOk());
  }
  for (const char* name : {"metric.loss_sum", "metric.correct", "step"}) {
    Tensor a, b;
    ASSERT_TRUE(onGpu->readVariable(name, &a).isOk());
    ASSERT_TRUE(onCpu->readVariable(name, &b).isOk());
    EXPECT_NEAR(a.data<float>()[0], b.data<float>()[0], 1e-4 * std::fabs(b.data<float>()[0])) << name;
  }
}

TEST(TrainingStepKitPlan, WritesKitPlans) {
  // For scripts/gpu-kit.sh: the step plan cross-compiled for cpu,cuda:0=h100 (batch 128), one
  // batch, and the loss the CPU plan reports at the 3rd step on that batch repeated; the lent
  // GPU machine runs gpu.tplan 3 times (tandem-run --iterations 3 --warmup 0) and compares.
  const char* dir = std::getenv("TANDEM_KIT_PLANS");
  if (!dir || !*dir) GTEST_SKIP() << "TANDEM_KIT_PLANS is not set (scripts/gpu-kit.sh sets it)";
  const std::string d = dir;
  TempModel m(256, "kit");
  const int64_t batch = 128;
  CompileResult r;
  auto gpu = compileStep(m.path, batch, true, "cpu,cuda:0=h100", &r);
  ASSERT_TRUE(gpu);
  std::string bytes;
  ASSERT_TRUE(r.plan.SerializeToString(&bytes));
  fs::create_directories(d + "/data");
  ASSERT_TRUE(writeFileAtomic(d + "/gpu.tplan", bytes).isOk());
  ASSERT_TRUE(writeFileAtomic(d + "/placement.txt", r.placementLogText).isOk());
  auto cpu = compileStep(m.path, batch, true);
  const Data data = makeData(batch, 9);
  std::vector<Tensor> in = batchOf(data, 0, batch), out;
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(cpu->run(in, &out).isOk());
  ASSERT_TRUE(writeTensorFile(d + "/data/input_0.pb", in[0], "x").isOk());
  ASSERT_TRUE(writeTensorFile(d + "/data/input_1.pb", in[1], "labels").isOk());
  ASSERT_TRUE(writeTensorFile(d + "/data/output_0.pb", out[0], "loss").isOk());
}

// `tandem train -o` writes what trained back by initializer name. PyTorch's PRESERVE export
// shares a BatchNorm's equal statistics with its scale and bias through Identity, which the
// importer folds into constants of their own: trained, they could not be written back, so
// trainModel refuses before training (naming the value and the export to use); without -o it
// trains, and --freeze-batchnorm's form (the statistics left constant) writes.
// DIR/{train,test}/test_data_set_0: `x` and `labels` in both (the test set is the training set).
void writeSplitData(const std::string& dir, const Tensor& x, const Tensor& labels) {
  for (const char* split : {"train", "test"}) {
    const std::string ds = dir + "/" + split + "/test_data_set_0";
    fs::create_directories(ds);
    ASSERT_TRUE(writeTensorFile(ds + "/input_0.pb", x, "x").isOk());
    ASSERT_TRUE(writeTensorFile(ds + "/input_1.pb", labels, "y").isOk());
  }
}

// writeSplitData of n samples [F] uniform in [-1, 1) (seed 4) with labels i % C.
void writeRandomSplitData(const std::string& dir, int64_t n, int64_t F, int64_t C) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> xs(n * F);
  for (float& v : xs) v = u(rng);
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = i % C;
  writeSplitData(dir, Tensor::fromVector<float>({n, F}, xs), Tensor::fromVector<int64_t>({n}, labels));
}

// `tandem train MODEL --data onnx:DIR --batch B --no-progress --threads 1`.
TrainOptions onnxDataOptions(const std::string& model, const std::string& dir, int64_t batch) {
  TrainOptions o;
  o.model = model;
  o.dataFormat = "onnx";
  o.dataDir = dir;
  o.batch = batch;
  o.threads = 1;
  o.progress = false;
  return o;
}

TEST(TrainModel, AValueThatIsNoInitializerIsRefusedBeforeTraining) {
  constexpr int64_t F = 8, C = 3, n = 16;
  testing_onnx::Model m;
  m.input("x", {-1, F}, onnx::TensorProto::FLOAT, {"N"});
  m.floatInit("bn.weight", {F}, std::vector<float>(F, 1.f));
  m.floatInit("bn.bias", {F}, std::vector<float>(F, 0.f));
  m.floatInit("fc.weight", {F, C}, std::vector<float>(F * C, 0.25f));
  m.node("Identity", {"bn.weight"}, {"bn.running_var"}, "id_var");
  m.node("Identity", {"bn.bias"}, {"bn.running_mean"}, "id_mean");
  m.node("BatchNormalization", {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
         {"a"}, "bn");
  m.node("MatMul", {"a", "fc.weight"}, {"logits"}, "fc");
  m.output("logits");
  const testing_onnx::RemovedAtExit model{testing_onnx::writeTemp(m, "trainer_shared_bn")};
  const std::string dir = std::filesystem::temp_directory_path() / ("tandem_shared_bn_" + std::to_string(getpid()));
  writeRandomSplitData(dir, n, F, C);
  TrainOptions o = onnxDataOptions(model.path, dir, 8);
  o.maxSteps = 2;
  o.output = dir + "/trained.onnx";
  Status st = trainModel(o, nullptr, nullptr);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("is not one of the model's initializers"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("TrainingMode.TRAINING"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(o.output));
  o.output.clear();
  st = trainModel(o, nullptr, nullptr);
  EXPECT_TRUE(st.isOk()) << st.message();
  o.output = dir + "/trained.onnx";
  o.training.batchNormInTraining = false;
  st = trainModel(o, nullptr, nullptr);
  EXPECT_TRUE(st.isOk()) << st.message();
  EXPECT_TRUE(std::filesystem::exists(o.output));
  std::filesystem::remove_all(dir);
}

// A Constant node holding `t` (its output named `name`).
void constantNode(testing_onnx::Model& m, const std::string& name, const Tensor& t) {
  onnx::NodeProto* n = m.node("Constant", {}, {name}, name);
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* p = a->mutable_t();
  p->set_data_type(static_cast<int32_t>(t.dtype()));  // DType is ONNX's data type code
  for (int64_t d : t.shape()) p->add_dims(d);
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.bytes()));
}

// An f32 initializer `name` of shape `dims`, uniform in [-0.5, 0.5) from `rng`.
void uniformInit(testing_onnx::Model& m, std::mt19937& rng, const std::string& name, std::vector<int64_t> dims) {
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> v((size_t)numElements(Shape(dims.begin(), dims.end())));
  for (float& e : v) e = u(rng);
  m.floatInit(name, dims, v);
}

// A token classifier as a transformer export writes one: ids [N, 4] (int64, or int32) ->
// Gather(tok.weight [9, 2]) -> the last position (Gather axis 1, index -1) -> a Reshape to
// [Shape(h)[0], -1] (shape arithmetic that folds only once N is bound) -> Mul by a Constant
// node -> Gemm(head) [N, 3]. The label is the last id mod 3, which a linear head cannot read
// off the two random embedding dims: the embedding must train.
std::string writeTokenModel(int32_t idType, const std::string& tag) {
  testing_onnx::Model m;
  m.input("ids", {-1, 4}, idType, {"N"});
  std::mt19937 rng(11);
  auto init = [&](const std::string& name, std::vector<int64_t> dims) { uniformInit(m, rng, name, dims); };
  init("tok.weight", {9, 2});
  init("head.weight", {3, 2});
  init("head.bias", {3});
  constantNode(m, "last", Tensor::fromVector<int64_t>({}, {-1}));
  constantNode(m, "zero", Tensor::fromVector<int64_t>({}, {0}));
  constantNode(m, "axes0", Tensor::fromVector<int64_t>({1}, {0}));
  constantNode(m, "minus_one", Tensor::fromVector<int64_t>({1}, {-1}));
  constantNode(m, "scale", Tensor::fromVector<float>({}, {2.f}));
  m.node("Gather", {"tok.weight", "ids"}, {"e"}, "tok");
  testing_onnx::intAttr(m.node("Gather", {"e", "last"}, {"h"}, "last_position"), "axis", 1);
  m.node("Shape", {"h"}, {"hs"}, "shape");
  m.node("Gather", {"hs", "zero"}, {"n"}, "batch_dim");
  m.node("Unsqueeze", {"n", "axes0"}, {"n1"}, "unsqueeze");
  testing_onnx::intAttr(m.node("Concat", {"n1", "minus_one"}, {"target"}, "target"), "axis", 0);
  m.node("Reshape", {"h", "target"}, {"h2"}, "view");
  m.node("Mul", {"h2", "scale"}, {"h3"}, "scaled");
  testing_onnx::intAttr(m.node("Gemm", {"h3", "head.weight", "head.bias"}, {"logits"}, "head"), "transB", 1);
  m.output("logits");
  return testing_onnx::writeTemp(m, "trainer_tokens_" + tag);
}

// DIR/{train,test}/test_data_set_0 of n random ids [n, 4] in [0, 9) (as `dtype`: the .pb's
// type, which need not be the model's) and labels ids[:, 3] mod 3.
void writeTokenData(const std::string& dir, int64_t n, DType dtype) {
  std::mt19937 rng(3);
  for (const char* split : {"train", "test"}) {
    std::vector<int64_t> ids((size_t)(n * 4)), labels((size_t)n);
    for (int64_t& v : ids) v = (int64_t)(rng() % 9);
    for (int64_t i = 0; i < n; ++i) labels[i] = ids[i * 4 + 3] % 3;
    const std::string ds = dir + "/" + split + "/test_data_set_0";
    std::filesystem::create_directories(ds);
    Tensor x = Tensor::fromVector<int64_t>({n, 4}, ids);
    if (dtype == DType::F32) {
      std::vector<float> f(ids.begin(), ids.end());
      x = Tensor::fromVector<float>({n, 4}, f);
    }
    ASSERT_TRUE(writeTensorFile(ds + "/input_0.pb", x, "ids").isOk());
    ASSERT_TRUE(writeTensorFile(ds + "/input_1.pb", Tensor::fromVector<int64_t>({n}, labels), "y").isOk());
  }
}

TEST(TrainModel, TokenIdsTrainTheEmbeddingWithAllParams) {
  const std::string dir = fs::temp_directory_path() / ("tandem_tokens_" + std::to_string(getpid()));
  writeTokenData(dir, 512, DType::I64);
  for (int32_t idType : {(int32_t)onnx::TensorProto::INT64, (int32_t)onnx::TensorProto::INT32}) {
    SCOPED_TRACE(idType == onnx::TensorProto::INT64 ? "int64 ids" : "int32 ids");
    const testing_onnx::RemovedAtExit model{writeTokenModel(idType, std::to_string(idType))};
    TrainOptions o = onnxDataOptions(model.path, dir, 32);
    o.epochs = 6;
    o.training.optimizer = CompileOptions::Training::Optimizer::Adam;
    o.training.learningRate = 0.05;
    o.training.allFloatConstants = true;  // --all-params: every f32 initializer
    o.output = dir + "/trained.onnx";
    std::vector<EpochReport> reports;
    Status st = trainModel(o, nullptr, &reports);
    ASSERT_TRUE(st.isOk()) << st.message();
    ASSERT_EQ(reports.size(), 6u);
    // The Constant node 'scale' did not train (-o would have refused it: no initializer).
    EXPECT_GE(reports.back().validationAccuracy, 0.97);
    // The written embedding differs from the initial one and runs.
    std::string bytes;
    ASSERT_TRUE(readInputFile(o.output, &bytes).isOk());
    onnx::ModelProto trained, initial;
    ASSERT_TRUE(trained.ParseFromString(bytes));
    ASSERT_TRUE(readInputFile(model.path, &bytes).isOk());
    ASSERT_TRUE(initial.ParseFromString(bytes));
    Tensor before, after;
    for (int k = 0; k < initial.graph().initializer_size(); ++k)
      if (initial.graph().initializer(k).name() == "tok.weight") {
        ASSERT_TRUE(tensorFromProto(initial.graph().initializer(k), &before).isOk());
        ASSERT_TRUE(tensorFromProto(trained.graph().initializer(k), &after).isOk());
      }
    ASSERT_EQ(before.numel(), 18);
    EXPECT_FALSE(sameBits(before, after));
    std::filesystem::remove(o.output);
  }
  std::filesystem::remove_all(dir);
}

// PyTorch's GPT export (../shared/models/gpt_like, skipped when absent): with --all-params
// every one of its 53 f32 initializers trains, the position table gathered by constant ids
// included (folded at import it had vanished from the graph), and the written model differs
// from the initial one in each.
TEST(TrainModel, SharedGptTrainsEveryInitializer) {
  const std::string gpt = std::string(TANDEM_SOURCE_DIR) + "/../shared/models/gpt_like/model.onnx";
  if (!fs::exists(gpt)) GTEST_SKIP() << gpt << " not found";
  const std::string dir = fs::temp_directory_path() / ("tandem_gpt_" + std::to_string(getpid()));
  std::mt19937 rng(9);
  for (const char* split : {"train", "test"}) {
    const int64_t n = 32;
    std::vector<int64_t> ids((size_t)(n * 64)), labels((size_t)n);
    for (int64_t& v : ids) v = (int64_t)(rng() % 1000);
    for (int64_t i = 0; i < n; ++i) labels[i] = ids[i * 64 + 63] % 10;
    const std::string ds = dir + "/" + split + "/test_data_set_0";
    fs::create_directories(ds);
    ASSERT_TRUE(writeTensorFile(ds + "/input_0.pb", Tensor::fromVector<int64_t>({n, 64}, ids), "input").isOk());
    ASSERT_TRUE(writeTensorFile(ds + "/input_1.pb", Tensor::fromVector<int64_t>({n}, labels), "y").isOk());
  }
  TrainOptions o = onnxDataOptions(gpt, dir, 16);
  o.maxSteps = 2;
  o.threads = 2;
  o.training.optimizer = CompileOptions::Training::Optimizer::Sgd;
  o.training.learningRate = 0.05;
  o.training.allFloatConstants = true;
  o.output = dir + "/trained.onnx";
  const std::string logPath = dir + "/log.txt";
  std::FILE* log = std::fopen(logPath.c_str(), "w");
  ASSERT_NE(log, nullptr);
  Status st = trainModel(o, log, nullptr);
  std::fclose(log);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::string text;
  ASSERT_TRUE(readInputFile(logPath, &text).isOk());
  EXPECT_EQ(text.find("do not train"), std::string::npos) << text;
  onnx::ModelProto initial, trained;
  std::string bytes;
  ASSERT_TRUE(readInputFile(gpt, &bytes).isOk());
  ASSERT_TRUE(initial.ParseFromString(bytes));
  ASSERT_TRUE(readInputFile(o.output, &bytes).isOk());
  ASSERT_TRUE(trained.ParseFromString(bytes));
  ASSERT_EQ(initial.graph().initializer_size(), trained.graph().initializer_size());
  int moved = 0, floats = 0;
  for (int k = 0; k < initial.graph().initializer_size(); ++k) {
    if (initial.graph().initializer(k).data_type() != onnx::TensorProto::FLOAT) continue;
    ++floats;
    Tensor a, b;
    ASSERT_TRUE(tensorFromProto(initial.graph().initializer(k), &a).isOk());
    ASSERT_TRUE(tensorFromProto(trained.graph().initializer(k), &b).isOk());
    if (!sameBits(a, b)) ++moved;
    else ADD_FAILURE() << initial.graph().initializer(k).name() << " did not train";
  }
  EXPECT_EQ(floats, 53);
  EXPECT_EQ(moved, floats);
  fs::remove_all(dir);
}


// A language model's loss: logits [N, T, V] and a label per position ([N, T], the next token).
// A bigram model, ids [N, 6] in [0, 7) -> Gather(tok.weight [7, 8]) -> MatMul(head.weight
// [8, 7]) + head.bias, learns next = (3 * id + 1) mod 7 at every position (1/7 at the start);
// data with one label a sample is refused, naming both shapes.
TEST(TrainModel, PerPositionLabelsTrainALanguageModel) {
  constexpr int64_t V = 7, T = 6, D = 8, n = 256;
  testing_onnx::Model m;
  m.input("ids", {-1, T}, onnx::TensorProto::INT64, {"N"});
  std::mt19937 rng(5);
  auto init = [&](const std::string& name, std::vector<int64_t> dims) { uniformInit(m, rng, name, dims); };
  init("tok.weight", {V, D});
  init("head.weight", {D, V});
  init("head.bias", {V});
  m.node("Gather", {"tok.weight", "ids"}, {"e"}, "tok");
  m.node("MatMul", {"e", "head.weight"}, {"z"}, "head");
  m.node("Add", {"z", "head.bias"}, {"logits"}, "bias");
  m.output("logits");
  const testing_onnx::RemovedAtExit model{testing_onnx::writeTemp(m, "trainer_bigram")};
  std::vector<int64_t> ids((size_t)(n * T)), next((size_t)(n * T));
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = (int64_t)(rng() % V);
    next[i] = (3 * ids[i] + 1) % V;
  }
  const std::string dir = fs::temp_directory_path() / ("tandem_bigram_" + std::to_string(getpid()));
  writeSplitData(dir, Tensor::fromVector<int64_t>({n, T}, ids), Tensor::fromVector<int64_t>({n, T}, next));
  TrainOptions o = onnxDataOptions(model.path, dir, 32);
  o.epochs = 4;
  o.training.learningRate = 0.05;
  o.training.allFloatConstants = true;
  std::vector<EpochReport> reports;
  Status st = trainModel(o, nullptr, &reports);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_LT(reports.front().trainAccuracy, 0.9);
  EXPECT_GE(reports.back().validationAccuracy, 0.99);
  EXPECT_LT(reports.back().validationLoss, 0.5 * reports.front().meanLoss);
  // One label a sample for logits [N, 6, 7]: the Trainer names what the model takes.
  fs::remove_all(dir);
  std::vector<int64_t> one(next.begin(), next.begin() + n);
  writeSplitData(dir, Tensor::fromVector<int64_t>({n, T}, ids), Tensor::fromVector<int64_t>({n}, one));
  st = trainModel(o, nullptr, nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("a sample's labels are [], the model's logits take [6]"), std::string::npos)
      << st.message();
  // A label outside the vocabulary names its sample and position.
  fs::remove_all(dir);
  next[2 * T + 4] = V;
  writeSplitData(dir, Tensor::fromVector<int64_t>({n, T}, ids), Tensor::fromVector<int64_t>({n, T}, next));
  st = trainModel(o, nullptr, nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("sample 2 label 4 is 7, outside [0, 7)"), std::string::npos) << st.message();
  // Padding: -100 there counts for nothing with the ignore index (the driver passes it to the
  // step plan and the Trainer, which must agree).
  fs::remove_all(dir);
  next[2 * T + 4] = -100;
  writeSplitData(dir, Tensor::fromVector<int64_t>({n, T}, ids), Tensor::fromVector<int64_t>({n, T}, next));
  o.epochs = 1;
  o.training.ignoreIndex = -100;
  st = trainModel(o, nullptr, &reports);
  EXPECT_TRUE(st.isOk()) << st.message();
  fs::remove_all(dir);
}

// The class axis anywhere: x [N, 3, 2, 5] -> Conv 1x1 to 4 channels -> Transpose(perm) gives
// logits with the 4 classes on axis 1 ([N, C, H, W], a segmenter), 2 ([N, H, C, W]) or 3
// ([N, H, W, C]), labels the other dims. With lr 0 one step's loss (the graph's
// SoftmaxCrossEntropyLoss on the reshaped or transposed logits) is the evaluation's mean
// cross-entropy (the Trainer's host loop over [outer, C, inner]) on the same samples, and the
// step's right answers (ArgMax in the graph) are the evaluation's.
TEST(TrainModel, TheLossIsTheMeanOverEveryLabelOnAnyClassAxis) {
  constexpr int64_t n = 16, C = 4;
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> xs(n * 3 * 2 * 5), w(C * 3);
  for (float& v : xs) v = u(rng);
  for (float& v : w) v = u(rng);
  struct Case {
    int classAxis;
    std::vector<int64_t> perm, labelDims;
  };
  for (const Case& c : {Case{1, {0, 1, 2, 3}, {n, 2, 5}}, Case{2, {0, 2, 1, 3}, {n, 2, 5}},
                        Case{-1, {0, 2, 3, 1}, {n, 2, 5}}, Case{-2, {0, 2, 1, 3}, {n, 2, 5}}}) {
    SCOPED_TRACE("class axis " + std::to_string(c.classAxis));
    testing_onnx::Model m;
    m.input("x", {-1, 3, 2, 5}, onnx::TensorProto::FLOAT, {"N"});
    m.floatInit("conv.weight", {C, 3, 1, 1}, w);
    m.node("Conv", {"x", "conv.weight"}, {"y"}, "conv");
    testing_onnx::intsAttr(m.node("Transpose", {"y"}, {"logits"}, "perm"), "perm", c.perm);
    m.output("logits");
    const testing_onnx::RemovedAtExit model{testing_onnx::writeTemp(m, "trainer_class_axis")};
    std::vector<int64_t> labels((size_t)(n * 10));
    for (int64_t& v : labels) v = (int64_t)(rng() % C);
    const std::string dir = fs::temp_directory_path() / ("tandem_class_axis_" + std::to_string(getpid()));
    writeSplitData(dir, Tensor::fromVector<float>({n, 3, 2, 5}, xs),
                   Tensor::fromVector<int64_t>(Shape(c.labelDims.begin(), c.labelDims.end()), labels));
    TrainOptions o = onnxDataOptions(model.path, dir, n);
    o.maxSteps = 1;
    o.training.optimizer = CompileOptions::Training::Optimizer::Sgd;
    o.training.learningRate = 0;
    o.training.classAxis = c.classAxis;
    std::vector<EpochReport> reports;
    Status st = trainModel(o, nullptr, &reports);
    ASSERT_TRUE(st.isOk()) << st.message();
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_GT(reports[0].meanLoss, 0.5);
    EXPECT_NEAR(reports[0].meanLoss, reports[0].validationLoss, 1e-5);
    EXPECT_EQ(reports[0].trainAccuracy, reports[0].validationAccuracy);
    fs::remove_all(dir);
  }
  // An axis the logits do not have.
  testing_onnx::Model m;
  m.input("x", {-1, 3}, onnx::TensorProto::FLOAT, {"N"});
  m.floatInit("fc.weight", {3, C}, std::vector<float>(3 * C, 0.1f));
  m.node("MatMul", {"x", "fc.weight"}, {"logits"}, "fc");
  m.output("logits");
  const testing_onnx::RemovedAtExit model{testing_onnx::writeTemp(m, "trainer_bad_axis")};
  const std::string dir = fs::temp_directory_path() / ("tandem_bad_axis_" + std::to_string(getpid()));
  writeSplitData(dir, Tensor::fromVector<float>({4, 3}, std::vector<float>(12, 0.5f)),
                 Tensor::fromVector<int64_t>({4}, {0, 1, 2, 3}));
  TrainOptions o = onnxDataOptions(model.path, dir, 4);
  o.training.classAxis = 2;
  Status st = trainModel(o, nullptr, nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("the class axis 2 is not an axis of result 0 after the batch"), std::string::npos)
      << st.message();
  fs::remove_all(dir);
}

// The SGD step of `model` at learning rate `lr` (resident state, with `metrics` and the ignore
// index `ignore`) or, with `forwardOnly`, its forward plan, for x of shape `x`; loaded on 1 thread.
std::unique_ptr<Executable> compileSgdPlan(const std::string& model, const Shape& x, bool forwardOnly, bool metrics,
                                           std::optional<int64_t> ignore, double lr) {
  CompileOptions co;
  EXPECT_TRUE(setTargetDevices(&co, "cpu").isOk());
  co.training.emplace();
  co.training->optimizer = CompileOptions::Training::Optimizer::Sgd;
  co.training->learningRate = lr;
  co.training->residentState = !forwardOnly;
  co.training->forwardOnly = forwardOnly;
  co.training->metrics = metrics;
  co.training->ignoreIndex = ignore;
  co.inputShapes["x"] = x;
  return compileAndLoadOneThread(model, co);
}

// A label equal to the ignore index counts for nothing (padding): x [N, 5, 3] -> MatMul [3, 4]
// gives logits [N, 5, 4], labels [N, 5] random classes with every position of samples 0-3 and
// about a third of the rest set to the ignore index (-100, outside the classes, or 0, a class).
// With lr 0 the epoch's mean loss and accuracy (from the step's metrics, or without metrics from
// the step losses weighted by the labels counted on the host) and the evaluation's are the mean
// cross-entropy and the hits over the labels kept, computed here in double. The first batch
// (samples 0-3) has no label kept: its loss is 0/0, which is no error and moves nothing.
TEST(Trainer, IgnoredLabelsCountForNothing) {
  constexpr int64_t n = 16, T = 5, F = 3, C = 4, B = 4;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> xs(n * T * F), w(F * C);
  for (float& v : xs) v = u(rng);
  for (float& v : w) v = u(rng);
  testing_onnx::Model m;
  m.input("x", {-1, T, F}, onnx::TensorProto::FLOAT, {"N"});
  m.floatInit("fc.weight", {F, C}, w);
  m.node("MatMul", {"x", "fc.weight"}, {"logits"}, "fc");
  m.output("logits");
  const testing_onnx::RemovedAtExit model{testing_onnx::writeTemp(m, "trainer_ignore")};
  auto compile = [&](int64_t batch, bool forwardOnly, bool metrics, std::optional<int64_t> ignore) {
    return compileSgdPlan(model.path, {batch, T, F}, forwardOnly, metrics, ignore, 0);
  };
  for (int64_t ignore : {int64_t{-100}, int64_t{0}}) {
    std::vector<int64_t> labels((size_t)(n * T));
    for (size_t i = 0; i < labels.size(); ++i) {
      labels[i] = (int64_t)(rng() % C);
      if (i < (size_t)(B * T) || rng() % 3 == 0) labels[i] = ignore;
    }
    double lossSum = 0;
    int64_t kept = 0, hits = 0;
    for (int64_t i = 0; i < n * T; ++i) {
      if (labels[i] == ignore) continue;
      double z[C], mx = -1e30;
      int64_t arg = 0;
      for (int64_t c = 0; c < C; ++c) {
        z[c] = 0;
        for (int64_t f = 0; f < F; ++f) z[c] += (double)xs[i * F + f] * w[f * C + c];
        if (z[c] > mx) mx = z[c], arg = c;
      }
      double sum = 0;
      for (double v : z) sum += std::exp(v - mx);
      lossSum += std::log(sum) + mx - z[labels[i]];
      ++kept;
      hits += arg == labels[i];
    }
    ASSERT_GT(kept, 20);
    ASSERT_LT(kept, (n - B) * T);
    SampleSource data;
    data.count = n;
    data.sampleShape = {T, F};
    data.labelShape = {T};
    data.samples = xs.data();
    data.labels = labels.data();
    for (bool metrics : {true, false}) {
      SCOPED_TRACE("ignore index " + std::to_string(ignore) + (metrics ? ", metrics" : ", no metrics"));
      std::unique_ptr<Trainer> t;
      Status st = Trainer::create(compile(B, false, metrics, ignore), compile(8, true, false, std::nullopt), &t, -1,
                                  ignore);
      ASSERT_TRUE(st.isOk()) << st.message();
      TrainerOptions o;
      o.epochs = 1;
      o.showProgress = false;
      std::vector<EpochReport> reports;
      st = t->fit(data, &data, o, &reports);
      ASSERT_TRUE(st.isOk()) << st.message();
      ASSERT_EQ(reports.size(), 1u);
      EXPECT_EQ(reports[0].steps, n / B);
      EXPECT_NEAR(reports[0].meanLoss, lossSum / kept, 1e-5);
      EXPECT_NEAR(reports[0].validationLoss, lossSum / kept, 1e-5);
      EXPECT_DOUBLE_EQ(reports[0].validationAccuracy, (double)hits / kept);
      if (metrics) {
        EXPECT_DOUBLE_EQ(reports[0].trainAccuracy, (double)hits / kept);
      }
    }
  }
  // Step plan and Trainer must agree on it; without one the padding is a label outside.
  std::unique_ptr<Trainer> t;
  Status st = Trainer::create(compile(B, false, true, int64_t{-100}), compile(8, true, false, std::nullopt), &t);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("compiled with an ignore index, the Trainer is given none"), std::string::npos)
      << st.message();
  std::vector<int64_t> padded((size_t)(n * T), 1);
  padded[7] = -100;
  SampleSource data;
  data.count = n;
  data.sampleShape = {T, F};
  data.labelShape = {T};
  data.samples = xs.data();
  data.labels = padded.data();
  st = Trainer::create(compile(B, false, true, std::nullopt), compile(8, true, false, std::nullopt), &t);
  ASSERT_TRUE(st.isOk()) << st.message();
  TrainerOptions o;
  o.showProgress = false;
  st = t->fit(data, nullptr, o, nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("sample 1 label 2 is -100, outside [0, 4)"), std::string::npos) << st.message();
}

// x [N, 16] -> MatMul [16, 8] -> GELU (tanh) -> MatMul [8, 4]: the GELU as one Gelu-20 node
// or written out as torch.onnx writes nn.GELU(approximate="tanh") at opset 13 (x * x, x *
// that, 0.044715 *, x +, 0.7978845608 *, Tanh, 1 +, x *, 0.5 *).
std::string writeGeluModel(bool writtenOut) {
  testing_onnx::Model m(writtenOut ? 13 : 20);
  m.input("x", {-1, kD}, onnx::TensorProto::FLOAT, {"N"});
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-0.6f, 0.6f);
  std::vector<float> w1(kD * 8), w2(8 * kC);
  for (float& v : w1) v = u(rng);
  for (float& v : w2) v = u(rng);
  m.floatInit("fc1.weight", {kD, 8}, w1);
  m.floatInit("fc2.weight", {8, kC}, w2);
  m.node("MatMul", {"x", "fc1.weight"}, {"h"}, "fc1");
  if (writtenOut) {
    constantNode(m, "c", Tensor::fromVector<float>({}, {0.044715f}));
    constantNode(m, "k", Tensor::fromVector<float>({}, {0.7978845834732056f}));
    constantNode(m, "one", Tensor::fromVector<float>({}, {1.f}));
    constantNode(m, "half", Tensor::fromVector<float>({}, {0.5f}));
    m.node("Mul", {"h", "h"}, {"h2"}, "act/Mul");
    m.node("Mul", {"h", "h2"}, {"h3"}, "act/Mul_1");
    m.node("Mul", {"c", "h3"}, {"ch3"}, "act/Mul_2");
    m.node("Add", {"h", "ch3"}, {"s"}, "act/Add");
    m.node("Mul", {"k", "s"}, {"u"}, "act/Mul_3");
    m.node("Tanh", {"u"}, {"t"}, "act/Tanh");
    m.node("Add", {"one", "t"}, {"p"}, "act/Add_1");
    m.node("Mul", {"h", "p"}, {"hp"}, "act/Mul_4");
    m.node("Mul", {"hp", "half"}, {"a"}, "act/Mul_5");
  } else {
    onnx::NodeProto* g = m.node("Gelu", {"h"}, {"a"}, "act");
    onnx::AttributeProto* at = g->add_attribute();
    at->set_name("approximate");
    at->set_type(onnx::AttributeProto::STRING);
    at->set_s("tanh");
  }
  m.node("MatMul", {"a", "fc2.weight"}, {"logits"}, "fc2");
  m.output("logits");
  return testing_onnx::writeTemp(m, writtenOut ? "trainer_gelu_written" : "trainer_gelu_op");
}

// The op type of every step of `model`'s training step plan (Adam, x [8, kD]), once a step.
std::multiset<std::string> stepOpTypes(const std::string& model) {
  CompileOptions co;
  co.training = adam();
  co.inputShapes["x"] = {8, kD};
  CompileResult r;
  Status st = compileOnnxFile(model, ImportOptions{}, co, &r);
  EXPECT_TRUE(st.isOk()) << st.message();
  std::multiset<std::string> ops;
  for (const plan::Step& s : r.plan.steps()) ops.insert(s.op_type());
  return ops;
}

// A GELU written out op by op trains as one Gelu (passes/Passes.h, rewriteWrittenOutGelu,
// before the loss): the step plan has the Gelu model's steps, op for op, and the same losses
// (its backward is Gelu's rule, not the 25-op derivative of the written-out form).
TEST(TrainModel, AWrittenOutGeluTrainsAsOneGelu) {
  const testing_onnx::RemovedAtExit written{writeGeluModel(true)}, op{writeGeluModel(false)};
  const std::multiset<std::string> a = stepOpTypes(written.path), b = stepOpTypes(op.path);
  EXPECT_FALSE(b.empty());
  EXPECT_EQ(a, b);
  Data d = makeData(64, 5);
  const std::string dir = fs::temp_directory_path() / ("tandem_gelu_" + std::to_string(getpid()));
  writeSplitData(dir, Tensor::fromVector<float>({64, kD}, d.x), Tensor::fromVector<int64_t>({64}, d.labels));
  std::vector<double> losses[2];
  for (int k = 0; k < 2; ++k) {
    TrainOptions o = onnxDataOptions(k == 0 ? written.path : op.path, dir, 16);
    o.epochs = 3;
    o.training.learningRate = 0.05;
    std::vector<EpochReport> reports;
    Status st = trainModel(o, nullptr, &reports);
    ASSERT_TRUE(st.isOk()) << st.message();
    for (const EpochReport& r : reports) losses[k].push_back(r.meanLoss);
  }
  ASSERT_EQ(losses[0].size(), 3u);
  for (size_t e = 0; e < 3; ++e) EXPECT_NEAR(losses[0][e], losses[1][e], 1e-6) << "epoch " << e + 1;
  fs::remove_all(dir);
}

// x [N, 16] -> MatMul [16, 8] -> LayerNorm (ln.weight, ln.bias [8]) -> MatMul [8, 4]: the
// LayerNorm as one LayerNormalization-17 node or written out as torch.onnx writes nn.LayerNorm
// at opset 13 (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul weight, Add bias).
std::string writeLayerNormModel(bool writtenOut) {
  testing_onnx::Model m(writtenOut ? 13 : 17);
  m.input("x", {-1, kD}, onnx::TensorProto::FLOAT, {"N"});
  std::mt19937 rng(22);
  std::uniform_real_distribution<float> u(-0.6f, 0.6f);
  std::vector<float> w1(kD * 8), w2(8 * kC), g(8), b(8);
  for (float& v : w1) v = u(rng);
  for (float& v : w2) v = u(rng);
  for (float& v : g) v = 1.f + u(rng);
  for (float& v : b) v = u(rng);
  m.floatInit("fc1.weight", {kD, 8}, w1);
  m.floatInit("ln.weight", {8}, g);
  m.floatInit("ln.bias", {8}, b);
  m.floatInit("fc2.weight", {8, kC}, w2);
  m.node("MatMul", {"x", "fc1.weight"}, {"h"}, "fc1");
  if (writtenOut) {
    constantNode(m, "two", Tensor::fromVector<float>({}, {2.f}));
    constantNode(m, "eps", Tensor::fromVector<float>({}, {1e-5f}));
    testing_onnx::intsAttr(m.node("ReduceMean", {"h"}, {"mean"}, "ln/ReduceMean"), "axes", {-1});
    m.node("Sub", {"h", "mean"}, {"d"}, "ln/Sub");
    m.node("Pow", {"d", "two"}, {"d2"}, "ln/Pow");
    testing_onnx::intsAttr(m.node("ReduceMean", {"d2"}, {"var"}, "ln/ReduceMean_1"), "axes", {-1});
    m.node("Add", {"var", "eps"}, {"ve"}, "ln/Add");
    m.node("Sqrt", {"ve"}, {"sd"}, "ln/Sqrt");
    m.node("Div", {"d", "sd"}, {"xhat"}, "ln/Div");
    m.node("Mul", {"xhat", "ln.weight"}, {"sx"}, "ln/Mul");
    m.node("Add", {"sx", "ln.bias"}, {"a"}, "ln/Add_1");
  } else {
    testing_onnx::floatAttr(m.node("LayerNormalization", {"h", "ln.weight", "ln.bias"}, {"a"}, "ln"),
                            "epsilon", 1e-5f);
  }
  m.node("MatMul", {"a", "fc2.weight"}, {"logits"}, "fc2");
  m.output("logits");
  return testing_onnx::writeTemp(m, writtenOut ? "trainer_ln_written" : "trainer_ln_op");
}

// A LayerNorm written out op by op trains as one LayerNormalization (passes/Passes.h,
// rewriteWrittenOutLayerNorm, before the loss) reading the model's own scale and bias: the step
// plan has the LayerNormalization model's steps, op for op, among them one
// LayerNormalizationGrad; the losses agree, and with --all-params ln.weight and ln.bias train
// and are written back as the LayerNormalization model's are.
TEST(TrainModel, AWrittenOutLayerNormTrainsAsOneLayerNormalization) {
  const testing_onnx::RemovedAtExit written{writeLayerNormModel(true)}, op{writeLayerNormModel(false)};
  const std::multiset<std::string> a = stepOpTypes(written.path), b = stepOpTypes(op.path);
  EXPECT_EQ(b.count("LayerNormalizationGrad"), 1u);
  EXPECT_EQ(a, b);
  Data d = makeData(64, 6);
  const std::string dir = fs::temp_directory_path() / ("tandem_ln_" + std::to_string(getpid()));
  writeSplitData(dir, Tensor::fromVector<float>({64, kD}, d.x), Tensor::fromVector<int64_t>({64}, d.labels));
  std::vector<double> losses[2];
  std::map<std::string, Tensor> trainedParams[2];
  for (int k = 0; k < 2; ++k) {
    TrainOptions o = onnxDataOptions(k == 0 ? written.path : op.path, dir, 16);
    o.epochs = 3;
    o.training.learningRate = 0.05;
    o.training.allFloatConstants = true;  // --all-params: LayerNorm scales and biases train
    o.output = dir + "/trained" + std::to_string(k) + ".onnx";
    std::vector<EpochReport> reports;
    Status st = trainModel(o, nullptr, &reports);
    ASSERT_TRUE(st.isOk()) << st.message();
    for (const EpochReport& r : reports) losses[k].push_back(r.meanLoss);
    onnx::ModelProto trained;
    std::string bytes;
    ASSERT_TRUE(readInputFile(o.output, &bytes).isOk());
    ASSERT_TRUE(trained.ParseFromString(bytes));
    for (const onnx::TensorProto& init : trained.graph().initializer())
      ASSERT_TRUE(tensorFromProto(init, &trainedParams[k][init.name()]).isOk());
  }
  ASSERT_EQ(losses[0].size(), 3u);
  for (size_t e = 0; e < 3; ++e) EXPECT_NEAR(losses[0][e], losses[1][e], 1e-5) << "epoch " << e + 1;
  onnx::ModelProto initial;  // the values before training, to see that they moved
  std::string bytes;
  ASSERT_TRUE(readInputFile(op.path, &bytes).isOk());
  ASSERT_TRUE(initial.ParseFromString(bytes));
  std::map<std::string, Tensor> initialParams;
  for (const onnx::TensorProto& init : initial.graph().initializer())
    ASSERT_TRUE(tensorFromProto(init, &initialParams[init.name()]).isOk());
  for (const char* name : {"ln.weight", "ln.bias"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(trainedParams[0].count(name) && trainedParams[1].count(name));
    const Tensor& w = trainedParams[0][name];
    const Tensor& o = trainedParams[1][name];
    ASSERT_EQ(w.numel(), 8);
    const Tensor& init = initialParams[name];
    double moved = 0;
    for (int64_t i = 0; i < 8; ++i) {
      EXPECT_NEAR(w.data<float>()[i], o.data<float>()[i], 1e-4) << i;
      moved = std::max(moved, (double)std::fabs(w.data<float>()[i] - init.data<float>()[i]));
    }
    EXPECT_GT(moved, 1e-3);
  }
  fs::remove_all(dir);
}

// What trains by default is what PyTorch holds as parameters in nn.Embedding, nn.Linear and
// nn.LayerNorm: ids [N, 4] -> Gather(tok.weight [9, 8]) + pos.weight [4, 8] -> MatMul(fc.weight
// [8, 8]) + fc.bias [8] -> LayerNormalization(ln.weight, ln.bias) -> the last position -> Gemm
// (head.weight, head.bias). pos.weight (added to no product) trains only with --all-params, and
// the note names it; with --all-params no note.
TEST(TrainModel, TheDefaultTrainsEmbeddingsLinearBiasesAndNormScales) {
  testing_onnx::Model m(17);
  m.input("ids", {-1, 4}, onnx::TensorProto::INT64, {"N"});
  std::mt19937 rng(12);
  auto init = [&](const std::string& name, std::vector<int64_t> dims) { uniformInit(m, rng, name, dims); };
  init("tok.weight", {9, 8});
  init("pos.weight", {4, 8});
  init("fc.weight", {8, 8});
  init("fc.bias", {8});
  init("ln.weight", {8});
  init("ln.bias", {8});
  init("head.weight", {3, 8});
  init("head.bias", {3});
  constantNode(m, "last", Tensor::fromVector<int64_t>({}, {-1}));
  m.node("Gather", {"tok.weight", "ids"}, {"e"}, "tok");
  m.node("Add", {"e", "pos.weight"}, {"ep"}, "pos");
  m.node("MatMul", {"ep", "fc.weight"}, {"h"}, "fc/MatMul");
  m.node("Add", {"fc.bias", "h"}, {"hb"}, "fc/Add");
  m.node("LayerNormalization", {"hb", "ln.weight", "ln.bias"}, {"n"}, "ln");
  testing_onnx::intAttr(m.node("Gather", {"n", "last"}, {"l"}, "last_position"), "axis", 1);
  testing_onnx::intAttr(m.node("Gemm", {"l", "head.weight", "head.bias"}, {"logits"}, "head"), "transB", 1);
  m.output("logits");
  const testing_onnx::RemovedAtExit model{testing_onnx::writeTemp(m, "trainer_default_params")};
  const std::string dir = fs::temp_directory_path() / ("tandem_default_params_" + std::to_string(getpid()));
  writeTokenData(dir, 32, DType::I64);
  onnx::ModelProto initial;
  std::string bytes;
  ASSERT_TRUE(readInputFile(model.path, &bytes).isOk());
  ASSERT_TRUE(initial.ParseFromString(bytes));
  for (bool allParams : {false, true}) {
    SCOPED_TRACE(allParams ? "--all-params" : "default");
    TrainOptions o = onnxDataOptions(model.path, dir, 16);
    o.maxSteps = 2;
    o.training.learningRate = 0.05;
    o.training.allFloatConstants = allParams;
    o.output = dir + "/trained.onnx";
    const std::string logPath = dir + "/log.txt";
    std::FILE* log = std::fopen(logPath.c_str(), "w");
    ASSERT_NE(log, nullptr);
    Status st = trainModel(o, log, nullptr);
    std::fclose(log);
    ASSERT_TRUE(st.isOk()) << st.message();
    std::string text;
    ASSERT_TRUE(readInputFile(logPath, &text).isOk());
    if (allParams) {
      EXPECT_EQ(text.find("do not train"), std::string::npos) << text;
    } else {
      EXPECT_NE(text.find("note: 1 f32 initializer(s) do not train"), std::string::npos) << text;
      EXPECT_NE(text.find("--all-params trains every one the graph reads): pos.weight\n"), std::string::npos) << text;
    }
    onnx::ModelProto trained;
    ASSERT_TRUE(readInputFile(o.output, &bytes).isOk());
    ASSERT_TRUE(trained.ParseFromString(bytes));
    ASSERT_EQ(initial.graph().initializer_size(), trained.graph().initializer_size());
    for (int k = 0; k < initial.graph().initializer_size(); ++k) {
      const std::string& name = initial.graph().initializer(k).name();
      Tensor a, b;
      ASSERT_TRUE(tensorFromProto(initial.graph().initializer(k), &a).isOk());
      ASSERT_TRUE(tensorFromProto(trained.graph().initializer(k), &b).isOk());
      EXPECT_EQ(sameBits(a, b), !allParams && name == "pos.weight") << name;
    }
  }
  fs::remove_all(dir);
}

TEST(TrainModel, TokenModelsRefuseDataThatIsNoIds) {
  const std::string dir = fs::temp_directory_path() / ("tandem_float_ids_" + std::to_string(getpid()));
  writeTokenData(dir, 64, DType::F32);
  const testing_onnx::RemovedAtExit model{writeTokenModel(onnx::TensorProto::INT64, "float_data")};
  TrainOptions o = onnxDataOptions(model.path, dir, 32);
  o.maxSteps = 1;
  Status st = trainModel(o, nullptr, nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("must have an integer dtype"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("input_0.pb"), std::string::npos) << st.message();
  o.dataFormat = "fashion-mnist";
  o.dataDir = "/nonexistent";
  st = trainModel(o, nullptr, nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("use --data onnx:DIR"), std::string::npos) << st.message();
  std::filesystem::remove_all(dir);
}

}  // namespace

// torch.onnx.export's default fixes the batch dim (input [1, ...], Reshape targets of [1, ...]):
// such a model trains at that batch, its forward (evaluation) plan too, and another --batch is
// refused before the data is read, saying how to re-export. The default parameters are the
// ConvTranspose's weight and bias and a MatMul weight read through a Transpose (nn.Linear's
// weight as exported without constant folding).
TEST(TrainModel, AFixedBatchTrainsAtThatBatchOnly) {
  testing_onnx::Model m(17);
  m.input("x", {1, 4});
  std::mt19937 rng(21);
  auto init = [&](const std::string& name, std::vector<int64_t> dims) { uniformInit(m, rng, name, dims); };
  init("up.weight", {1, 1, 2, 2});
  init("up.bias", {1});
  init("fc.weight", {3, 16});
  constantNode(m, "image", Tensor::fromVector<int64_t>({4}, {1, 1, 2, 2}));
  constantNode(m, "flat", Tensor::fromVector<int64_t>({2}, {1, 16}));
  m.node("Reshape", {"x", "image"}, {"img"}, "to_image");
  testing_onnx::intsAttr(m.node("ConvTranspose", {"img", "up.weight", "up.bias"}, {"u"}, "up"), "strides", {2, 2});
  m.node("Reshape", {"u", "flat"}, {"f"}, "flatten");
  testing_onnx::intsAttr(m.node("Transpose", {"fc.weight"}, {"wt"}, "fc/Transpose"), "perm", {1, 0});
  m.node("MatMul", {"f", "wt"}, {"logits"}, "fc/MatMul");
  m.output("logits");
  const testing_onnx::RemovedAtExit model{testing_onnx::writeTemp(m, "trainer_fixed_batch")};
  const std::string dir = fs::temp_directory_path() / ("tandem_fixed_batch_" + std::to_string(getpid()));
  constexpr int64_t n = 8;
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> xs(n * 4);
  for (float& v : xs) v = u(rng);
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = i % 3;

  TrainOptions o = onnxDataOptions(model.path, dir + "/absent", 4);
  Status st = trainModel(o, nullptr, nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("input 'x' has a fixed batch of 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--batch 1 only, not 4"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("dynamic_axes={'x': {0: 'N'}}"), std::string::npos) << st.message();

  writeSplitData(dir, Tensor::fromVector<float>({n, 4}, xs), Tensor::fromVector<int64_t>({n}, labels));
  o = onnxDataOptions(model.path, dir, 1);
  o.maxSteps = 3;
  o.training.learningRate = 0.1;
  o.output = dir + "/trained.onnx";
  const std::string logPath = dir + "/log.txt";
  std::FILE* log = std::fopen(logPath.c_str(), "w");
  ASSERT_NE(log, nullptr);
  std::vector<EpochReport> reports;
  st = trainModel(o, log, &reports);
  std::fclose(log);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::string text;
  ASSERT_TRUE(readInputFile(logPath, &text).isOk());
  EXPECT_EQ(text.find("do not train"), std::string::npos) << text;
  ASSERT_FALSE(reports.empty());
  EXPECT_GE(reports.back().validationAccuracy, 0.0);  // evaluated by the forward plan at batch 1
  EXPECT_GE(reports.back().validationLoss, 0.0);
  onnx::ModelProto initial, trained;
  std::string bytes;
  ASSERT_TRUE(readInputFile(model.path, &bytes).isOk());
  ASSERT_TRUE(initial.ParseFromString(bytes));
  ASSERT_TRUE(readInputFile(o.output, &bytes).isOk());
  ASSERT_TRUE(trained.ParseFromString(bytes));
  ASSERT_EQ(initial.graph().initializer_size(), trained.graph().initializer_size());
  for (int k = 0; k < initial.graph().initializer_size(); ++k) {
    Tensor a, b;
    ASSERT_TRUE(tensorFromProto(initial.graph().initializer(k), &a).isOk());
    ASSERT_TRUE(tensorFromProto(trained.graph().initializer(k), &b).isOk());
    EXPECT_FALSE(sameBits(a, b)) << initial.graph().initializer(k).name() << " did not train";
  }
  fs::remove_all(dir);
}

// TrainerOptions::dropLast false: the last partial batch trains, padded with rows of the
// ignore index, exactly as a step on its real rows alone: a linear softmax classifier, SGD,
// 10 samples in batches of 4 (4, 4, then 2), against the same three steps in double; dropped,
// two steps. The epoch's loss is the mean over the 10 samples' step losses, weighted by count.
TEST(Trainer, TheLastPartialBatchTrainsAsItsRealRows) {
  constexpr int64_t n = 10, F = 3, C = 4, B = 4;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> xs(n * F), w(F * C);
  for (float& v : xs) v = u(rng);
  for (float& v : w) v = u(rng);
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = (int64_t)(rng() % C);
  testing_onnx::Model m;
  m.input("x", {-1, F}, onnx::TensorProto::FLOAT, {"N"});
  m.floatInit("fc.weight", {F, C}, w);
  m.node("MatMul", {"x", "fc.weight"}, {"logits"}, "fc");
  m.output("logits");
  const testing_onnx::RemovedAtExit model{testing_onnx::writeTemp(m, "trainer_last_batch")};
  constexpr double lr = 0.5;
  auto compile = [&](int64_t batch, bool forwardOnly, std::optional<int64_t> ignore) {
    return compileSgdPlan(model.path, {batch, F}, forwardOnly, !forwardOnly, ignore, lr);
  };
  // The reference: SGD on the mean cross-entropy of each batch's real rows, in double.
  auto reference = [&](int steps, double* meanLoss) {
    std::vector<double> W(w.begin(), w.end());
    double lossSum = 0;
    int64_t seen = 0;
    for (int s = 0; s < steps; ++s) {
      const int64_t lo = s * B, hi = std::min(n, lo + B);
      std::vector<double> g(F * C, 0.0);
      for (int64_t i = lo; i < hi; ++i) {
        double z[C], mx = -1e300, sum = 0;
        for (int64_t c = 0; c < C; ++c) {
          z[c] = 0;
          for (int64_t f = 0; f < F; ++f) z[c] += xs[i * F + f] * W[f * C + c];
          mx = std::max(mx, z[c]);
        }
        for (double v : z) sum += std::exp(v - mx);
        lossSum += std::log(sum) + mx - z[labels[i]];
        for (int64_t c = 0; c < C; ++c) {
          const double d = (std::exp(z[c] - mx) / sum - (c == labels[i])) / double(hi - lo);
          for (int64_t f = 0; f < F; ++f) g[f * C + c] += xs[i * F + f] * d;
        }
      }
      seen += hi - lo;
      for (int64_t k = 0; k < F * C; ++k) W[k] -= lr * g[k];
    }
    *meanLoss = lossSum / double(seen);
    return W;
  };
  SampleSource data;
  data.count = n;
  data.sampleShape = {F};
  data.samples = xs.data();
  data.labels = labels.data();
  for (bool dropLast : {false, true}) {
    SCOPED_TRACE(dropLast ? "dropped" : "kept");
    std::unique_ptr<Trainer> t;
    Status st = Trainer::create(compile(B, false, int64_t{-100}), compile(n, true, std::nullopt), &t, -1, int64_t{-100});
    ASSERT_TRUE(st.isOk()) << st.message();
    TrainerOptions o;
    o.showProgress = false;
    o.dropLast = dropLast;
    std::vector<EpochReport> reports;
    st = t->fit(data, nullptr, o, &reports);
    ASSERT_TRUE(st.isOk()) << st.message();
    const int steps = dropLast ? 2 : 3;
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(reports[0].steps, steps);
    double meanLoss = 0;
    const std::vector<double> want = reference(steps, &meanLoss);
    EXPECT_NEAR(reports[0].meanLoss, meanLoss, 1e-5);
    std::map<std::string, Tensor> vars;
    ASSERT_TRUE(t->variables(&vars).isOk());
    ASSERT_TRUE(vars.count("fc.weight"));
    for (int64_t k = 0; k < F * C; ++k) EXPECT_NEAR(vars["fc.weight"].data<float>()[k], want[k], 2e-6) << k;
  }
  // The padding needs an ignore index in the step.
  std::unique_ptr<Trainer> t;
  ASSERT_TRUE(Trainer::create(compile(B, false, std::nullopt), compile(n, true, std::nullopt), &t).isOk());
  TrainerOptions o;
  o.showProgress = false;
  o.dropLast = false;
  Status st = t->fit(data, nullptr, o, nullptr);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("needs a step plan compiled with an ignore index"), std::string::npos) << st.message();
}

// tandem train --keep-last-batch refuses a model that trains a BatchNormalization on batch
// statistics (the padding would change them), naming it and the ways out; frozen, it trains.
TEST(TrainModel, KeepingTheLastBatchRefusesBatchStatistics) {
  constexpr int64_t F = 8, C = 3, n = 10;
  testing_onnx::Model m;
  m.input("x", {-1, F}, onnx::TensorProto::FLOAT, {"N"});
  m.floatInit("bn.weight", {F}, std::vector<float>(F, 1.f));
  m.floatInit("bn.bias", {F}, std::vector<float>(F, 0.f));
  m.floatInit("bn.running_mean", {F}, std::vector<float>(F, 0.f));
  m.floatInit("bn.running_var", {F}, std::vector<float>(F, 1.f));
  m.floatInit("fc.weight", {F, C}, std::vector<float>(F * C, 0.25f));
  m.node("BatchNormalization", {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"a"}, "bn");
  m.node("MatMul", {"a", "fc.weight"}, {"logits"}, "fc");
  m.output("logits");
  const testing_onnx::RemovedAtExit model{testing_onnx::writeTemp(m, "trainer_keep_last_bn")};
  const std::string dir = fs::temp_directory_path() / ("tandem_keep_last_" + std::to_string(getpid()));
  writeRandomSplitData(dir, n, F, C);
  TrainOptions o = onnxDataOptions(model.path, dir, 4);
  o.keepLastBatch = true;
  std::vector<EpochReport> reports;
  Status st = trainModel(o, nullptr, &reports);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("--keep-last-batch: BatchNormalization 'bn' trains on batch statistics"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("--freeze-batchnorm"), std::string::npos) << st.message();
  o.training.batchNormInTraining = false;
  st = trainModel(o, nullptr, &reports);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].steps, 3);  // 4, 4, 2
  o.keepLastBatch = false;
  reports.clear();
  ASSERT_TRUE(trainModel(o, nullptr, &reports).isOk());
  EXPECT_EQ(reports[0].steps, 2);
  fs::remove_all(dir);
}
