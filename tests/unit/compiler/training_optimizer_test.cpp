// The optimizers of the training step graph (compiler/training/TrainingGraph.h) against a host
// double-precision reference written here from PyTorch's documented algorithms
// (torch.optim.SGD / Adam / AdamW, clip_grad_norm_, StepLR) and tf.keras's Adam epsilon: a tiny
// two-layer linear classifier (Gemm then MatMul, three parameters) runs K steps per
// configuration, and after every step each parameter must match the reference trajectory.
// The reference computes the loss and its gradients itself (softmax cross-entropy, backprop
// by hand), so the two trajectories share nothing but the initial values and the batch.
// The loss choice (nll on a LogSoftmax model against cross-entropy on its logits) is at the end.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include "compiler/training/TrainingGraph.h"
#include "tests/unit/onnx_model_builder.h"
#include "tools/driver/Driver.h"

using namespace tandem;
using Training = CompileOptions::Training;

namespace {

constexpr int64_t kN = 6, kD = 5, kH = 4, kC = 3;

// The model's data, drawn once: x [N, D], labels, W1 [H, D], b1 [H], W2 [H, C].
struct Data {
  std::vector<double> x;
  std::vector<int64_t> labels;
  std::map<std::string, std::vector<double>> init;
  std::map<std::string, Shape> shapes = {{"W1", {kH, kD}}, {"b1", {kH}}, {"W2", {kH, kC}}};
};

const Data& data() {
  static const Data d = [] {
    Data d;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    // Values exactly representable in f32, so both sides start from the same numbers.
    auto draw = [&](int64_t n, double scale) {
      std::vector<double> v(n);
      for (double& e : v) e = (double)(float)(u(rng) * scale);
      return v;
    };
    d.x = draw(kN * kD, 1.0);
    for (int64_t i = 0; i < kN; ++i) d.labels.push_back(i % kC);
    d.init["W1"] = draw(kH * kD, 0.8);
    d.init["b1"] = draw(kH, 0.3);
    d.init["W2"] = draw(kH * kC, 0.8);
    return d;
  }();
  return d;
}

using testing_onnx::RemovedAtExit;

// logits = MatMul(Gemm(x, W1, b1, transB = 1), W2), or with `logSoftmax` LogSoftmax(logits,
// axis 1) (log-probabilities), written once to a temporary file that is removed when the test
// process exits.
std::string writeModel(bool logSoftmax) {
  const Data& d = data();
  testing_onnx::Model m;
  m.g()->set_name("tiny");
  m.input("x", {kN, kD});
  for (const char* n : {"W1", "b1", "W2"}) {
    const std::vector<double>& v = d.init.at(n);
    m.floatInit(n, d.shapes.at(n), std::vector<float>(v.begin(), v.end()));
  }
  testing_onnx::intAttr(m.node("Gemm", {"x", "W1", "b1"}, {"h"}, "fc1"), "transB", 1);
  m.node("MatMul", {"h", "W2"}, {"logits"}, "fc2");
  if (logSoftmax)
    testing_onnx::intAttr(m.node("LogSoftmax", {"logits"}, {"logp"}, "log_softmax"), "axis", 1);
  m.output(logSoftmax ? "logp" : "logits");
  return testing_onnx::writeTemp(m, std::string("optimizer_") + (logSoftmax ? "logsoftmax" : "plain"));
}

const std::string& modelPath() {
  static const RemovedAtExit file{writeModel(false)};
  return file.path;
}

const std::string& logSoftmaxModelPath() {
  static const RemovedAtExit file{writeModel(true)};
  return file.path;
}

// ---- The reference (double), after PyTorch's algorithms ----

using Params = std::map<std::string, std::vector<double>>;

// Mean softmax cross-entropy of the model at `p` and its gradients; with label smoothing eps
// (PyTorch's) against the target (1 - eps) one-hot + eps / C; with class weights w PyTorch's
// weighted form: ((1 - eps) sum_n w[y_n] nll_n + eps / C sum_n sum_c w_c (-log p_nc)) / sum_n w[y_n].
double lossAndGrads(const Params& p, Params* grads, double eps = 0, const std::vector<double>& weights = {}) {
  const Data& d = data();
  const auto &W1 = p.at("W1"), &b1 = p.at("b1"), &W2 = p.at("W2");
  std::vector<double> h(kN * kH), dz(kN * kC), dh(kN * kH, 0.0);
  double loss = 0;
  auto w = [&](int64_t c) { return weights.empty() ? 1.0 : weights[(size_t)c]; };
  double W = 0, wSum = 0;  // sum_n w[y_n]; sum_c w_c
  for (int64_t n = 0; n < kN; ++n) W += w(d.labels[n]);
  for (int64_t c = 0; c < kC; ++c) wSum += w(c);
  for (int64_t n = 0; n < kN; ++n) {
    for (int64_t j = 0; j < kH; ++j) {
      double s = b1[j];
      for (int64_t k = 0; k < kD; ++k) s += d.x[n * kD + k] * W1[j * kD + k];
      h[n * kH + j] = s;
    }
    double z[kC], zmax = -1e300, sum = 0;
    for (int64_t c = 0; c < kC; ++c) {
      z[c] = 0;
      for (int64_t j = 0; j < kH; ++j) z[c] += h[n * kH + j] * W2[j * kC + c];
      zmax = std::max(zmax, z[c]);
    }
    for (int64_t c = 0; c < kC; ++c) sum += std::exp(z[c] - zmax);
    const double wy = w(d.labels[n]);
    for (int64_t c = 0; c < kC; ++c) {
      const double logp = z[c] - zmax - std::log(sum), prob = std::exp(logp);
      const double hit = c == d.labels[n] ? 1.0 : 0.0;
      loss += -((1 - eps) * wy * hit + eps / kC * w(c)) * logp / W;
      dz[n * kC + c] = ((1 - eps) * wy * (prob - hit) + eps / kC * (prob * wSum - w(c))) / W;
    }
  }
  auto& gW1 = (*grads)["W1"] = std::vector<double>(kH * kD, 0.0);
  auto& gb1 = (*grads)["b1"] = std::vector<double>(kH, 0.0);
  auto& gW2 = (*grads)["W2"] = std::vector<double>(kH * kC, 0.0);
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t j = 0; j < kH; ++j)
      for (int64_t c = 0; c < kC; ++c) {
        gW2[j * kC + c] += h[n * kH + j] * dz[n * kC + c];
        dh[n * kH + j] += dz[n * kC + c] * W2[j * kC + c];
      }
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t j = 0; j < kH; ++j) {
      gb1[j] += dh[n * kH + j];
      for (int64_t k = 0; k < kD; ++k) gW1[j * kD + k] += dh[n * kH + j] * d.x[n * kD + k];
    }
  return loss;
}

// The reference optimizer: torch.optim.{SGD,Adam,AdamW}.step() with the schedule's lr, after
// clip_grad_norm_ (when on). `keras` switches Adam's update to tf.keras's.
struct Reference {
  Training o;
  bool keras = false;
  Params p, buf, m, v, vmax, squareAvg, gradAvg, sum;
  int64_t t = 0;  // steps taken
  double lastClipCoef = 1;

  explicit Reference(const Training& opts) : o(opts), p(data().init) {
    keras = o.epsilonMode == Training::EpsilonMode::Keras;
  }

  // The storage of the state named `name` by the step graph's convention (null for `step`).
  std::vector<double>* state(const std::string& name) {
    const size_t dot = name.find('.');
    const std::string param = name.substr(0, dot);
    const std::string slot = dot == std::string::npos ? "" : name.substr(dot);
    if (name == "step") return nullptr;
    if (slot.empty()) return &p.at(param);
    if (slot == ".momentum_buffer") return &buf[param];
    if (slot == ".m") return &m[param];
    if (slot == ".v") return &v[param];
    if (slot == ".v_max") return &vmax[param];
    if (slot == ".square_avg") return &squareAvg[param];
    if (slot == ".grad_avg") return &gradAvg[param];
    if (slot == ".sum") return &sum[param];
    ADD_FAILURE() << "unknown state '" << name << "'";
    return nullptr;
  }

  // The lr used by step `step` (1-based).
  double lr(int64_t step) const {
    const double base = o.learningRate;
    if (o.lrSchedule == Training::LrSchedule::Step)  // StepLR: scheduler.step() after each step
      return base * std::pow(o.lrGamma, (double)((step - 1) / o.lrStepSize));
    if (o.lrSchedule == Training::LrSchedule::Cosine) {
      const double w = (double)o.warmupSteps, total = (double)o.totalSteps;
      if (step <= o.warmupSteps) return base * (double)step / w;
      if (step >= o.totalSteps) return o.lrMin;
      const double progress = ((double)step - w) / (total - w);
      return o.lrMin + (base - o.lrMin) * (1 + std::cos(M_PI * progress)) / 2;
    }
    return base;
  }

  double step() {
    Params g;
    const double loss = lossAndGrads(p, &g, o.labelSmoothing, o.classWeights);
    ++t;
    if (o.clipNorm > 0) {  // torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=2)
      double sq = 0;
      for (auto& [name, gv] : g)
        for (double e : gv) sq += e * e;
      const double clipCoef = o.clipNorm / (std::sqrt(sq) + 1e-6);
      lastClipCoef = std::min(clipCoef, 1.0);
      for (auto& [name, gv] : g)
        for (double& e : gv) e *= lastClipCoef;
    }
    const double lrT = lr(t), wd = o.weightDecay;
    for (auto& [name, param] : p) {
      std::vector<double>& grad = g[name];
      if (o.optimizer == Training::Optimizer::Sgd) {
        std::vector<double>& b = buf[name];
        b.resize(param.size());
        for (size_t i = 0; i < param.size(); ++i) {
          double dp = grad[i];
          if (wd != 0) dp += wd * param[i];
          if (o.momentum != 0) {
            if (t == 1) {
              b[i] = dp;  // buf = torch.clone(d_p).detach()
            } else {
              b[i] = o.momentum * b[i] + (1 - o.dampening) * dp;
            }
            dp = o.nesterov ? dp + o.momentum * b[i] : b[i];
          }
          param[i] -= lrT * dp;
        }
        continue;
      }
      if (o.optimizer == Training::Optimizer::RmsProp) {  // torch.optim.RMSprop (torch 1.13)
        std::vector<double>& sq = squareAvg[name];
        std::vector<double>& ga = gradAvg[name];
        std::vector<double>& b = buf[name];
        sq.resize(param.size(), 0.0);
        ga.resize(param.size(), 0.0);
        b.resize(param.size(), 0.0);
        const double a = o.alpha;
        for (size_t i = 0; i < param.size(); ++i) {
          double gi = grad[i];
          if (wd != 0) gi += wd * param[i];
          sq[i] = a * sq[i] + (1 - a) * gi * gi;  // square_avg.mul_(alpha).addcmul_(g, g, 1 - alpha)
          double avg;
          if (o.centered) {
            ga[i] = a * ga[i] + (1 - a) * gi;
            avg = std::sqrt(sq[i] - ga[i] * ga[i]) + o.epsilon;
          } else {
            avg = std::sqrt(sq[i]) + o.epsilon;
          }
          if (o.momentum > 0) {
            b[i] = o.momentum * b[i] + gi / avg;
            param[i] -= lrT * b[i];
          } else {
            param[i] -= lrT * gi / avg;
          }
        }
        continue;
      }
      if (o.optimizer == Training::Optimizer::Adagrad) {  // torch.optim.Adagrad (torch 1.13)
        std::vector<double>& s = sum[name];  // the sum of squares less initial_accumulator_value
        s.resize(param.size(), 0.0);
        const double clr = lrT / (1 + (double)(t - 1) * o.lrDecay);
        for (size_t i = 0; i < param.size(); ++i) {
          double gi = grad[i];
          if (wd != 0) gi += wd * param[i];
          s[i] += gi * gi;
          param[i] -= clr * gi / (std::sqrt(s[i] + o.initialAccumulator) + o.epsilon);
        }
        continue;
      }
      std::vector<double>& ma = m[name];
      std::vector<double>& va = v[name];
      std::vector<double>& vm = vmax[name];
      ma.resize(param.size(), 0.0);
      va.resize(param.size(), 0.0);
      vm.resize(param.size(), 0.0);
      const double bc1 = 1 - std::pow(o.beta1, (double)t), bc2 = 1 - std::pow(o.beta2, (double)t);
      for (size_t i = 0; i < param.size(); ++i) {
        double gi = grad[i];
        if (o.optimizer == Training::Optimizer::AdamW) {
          param[i] *= 1 - lrT * wd;
        } else if (wd != 0) {
          gi += wd * param[i];
        }
        ma[i] = o.beta1 * ma[i] + (1 - o.beta1) * gi;   // exp_avg.lerp_(grad, 1 - beta1)
        va[i] = o.beta2 * va[i] + (1 - o.beta2) * gi * gi;
        // amsgrad: torch.maximum(max_exp_avg_sq, exp_avg_sq) in the denominator.
        vm[i] = std::max(vm[i], va[i]);
        const double vd = o.amsgrad ? vm[i] : va[i];
        if (keras) {  // tf.keras Adam: alpha = lr * sqrt(1 - b2^t) / (1 - b1^t)
          const double alpha = lrT * std::sqrt(bc2) / bc1;
          param[i] -= alpha * ma[i] / (std::sqrt(vd) + o.epsilon);
        } else {      // torch: denom = sqrt(v) / sqrt(bc2) + eps; p -= lr / bc1 * m / denom
          param[i] -= lrT / bc1 * ma[i] / (std::sqrt(vd) / std::sqrt(bc2) + o.epsilon);
        }
      }
    }
    return loss;
  }
};

// ---- The plan under test ----

std::unique_ptr<Executable> compileStep(const Training& t, std::string* error = nullptr,
                                        const std::string& model = modelPath()) {
  CompileOptions co;
  EXPECT_TRUE(setTargetDevices(&co, "cpu").isOk());
  co.training = t;
  CompileResult r;
  Status st = compileOnnxFile(model, ImportOptions{}, co, &r);
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

// The plan's gradients themselves are f32 (its softmax's exp included): on this model they
// are within ~7e-7 absolute of the double reference's, which bounds a momentum buffer's first
// value; every other difference measured is below 4e-7. A wrong formula (a missing (1 - d), a
// misplaced eps, an lr off by a schedule step, an unclipped gradient) is 1e-4 or more.
constexpr double kTolerance = 2e-6;

struct RunSummary {
  double worst = 0;  // max |tandem - reference| / (1 + |reference|) over all steps and state
  std::vector<double> clipCoefs;
};

// Runs `steps` steps of the plan, state fed back by the convention (result 1 + i -> argument
// 2 + i; slots and step start at zeros). Before each step the reference takes the plan's state
// (identical at step 1: the initializers and zeros), so every step is checked from the same
// point: the f32 rounding of earlier steps does not accumulate into the comparison, and a
// wrong formula shows at the first step it matters, far above the tolerance.
RunSummary runAgainstReference(const Training& t, int steps, double tolerance = kTolerance) {
  RunSummary sum;
  std::string error;
  auto exe = compileStep(t, &error);
  EXPECT_TRUE(exe) << error;
  if (!exe) return sum;
  const auto& names = exe->inputNames();
  const auto& outNames = exe->outputNames();
  // The state convention.
  EXPECT_EQ(names[0], "x");
  EXPECT_EQ(names[1], "labels");
  EXPECT_EQ(outNames.size(), names.size() - 1);
  EXPECT_EQ(outNames[0], "loss");
  for (size_t i = 2; i < names.size() && i - 1 < outNames.size(); ++i) {
    EXPECT_EQ(outNames[i - 1], names[i] + "_new");
    EXPECT_EQ(exe->outputTypes()[i - 1].shape, exe->inputTypes()[i].shape) << names[i];
  }
  const bool hasStep = training::usesStepCounter(t);
  EXPECT_EQ(names.back() == "step", hasStep);
  if (hasStep) {
    EXPECT_TRUE(exe->inputTypes().back().shape.empty());
  }

  const Data& d = data();
  std::vector<Tensor> state;
  for (size_t i = 2; i < names.size(); ++i) {
    auto it = d.init.find(names[i]);
    state.push_back(it != d.init.end() ? f32Tensor(d.shapes.at(names[i]), it->second)
                                       : Tensor::alloc(DType::F32, exe->inputTypes()[i].shape));
  }
  Reference ref(t);
  const Tensor x = f32Tensor({kN, kD}, d.x);
  const Tensor labels = Tensor::fromVector<int64_t>({kN}, d.labels);
  for (int step = 1; step <= steps; ++step) {
    for (size_t i = 2; i < names.size(); ++i)
      if (std::vector<double>* r = ref.state(names[i])) {
        const float* v = state[i - 2].data<float>();
        r->assign(v, v + state[i - 2].numel());
      }
    std::vector<Tensor> in = {x, labels}, out;
    in.insert(in.end(), state.begin(), state.end());
    Status st = exe->run(in, &out);
    EXPECT_TRUE(st.isOk()) << st.message();
    if (!st.isOk()) return sum;
    const double loss = ref.step();
    sum.clipCoefs.push_back(ref.lastClipCoef);
    EXPECT_NEAR(out[0].data<float>()[0], loss, 1e-6 * (1 + loss)) << "loss, step " << step;
    for (size_t i = 2; i < names.size(); ++i) {
      state[i - 2] = out[i - 1];
      std::vector<double>* want = ref.state(names[i]);
      if (!want) {
        EXPECT_EQ(state[i - 2].data<float>()[0], (float)step) << "step_new";
        continue;
      }
      EXPECT_EQ((int64_t)want->size(), state[i - 2].numel()) << names[i];
      if ((int64_t)want->size() != state[i - 2].numel()) return sum;
      for (size_t j = 0; j < want->size(); ++j) {
        const double w = (*want)[j], got = state[i - 2].data<float>()[j];
        const double err = std::abs(got - w) / (1 + std::abs(w));
        sum.worst = std::max(sum.worst, err);
        EXPECT_LE(err, tolerance) << names[i] << "[" << j << "] at step " << step << ": " << got
                             << " vs reference " << w;
      }
    }
  }
  std::printf("  %d steps, worst relative error %.1e\n", steps, sum.worst);
  return sum;
}

constexpr int kSteps = 6;

Training sgd(double lr) {
  Training t;
  t.optimizer = Training::Optimizer::Sgd;
  t.learningRate = lr;
  return t;
}

Training adam(Training::Optimizer which = Training::Optimizer::Adam) {
  Training t;
  t.optimizer = which;
  t.learningRate = 0.01;
  return t;
}

TEST(Optimizer, SgdPlain) {
  Training t = sgd(0.5);
  runAgainstReference(t, kSteps);
}

TEST(Optimizer, SgdMomentum) {
  Training t = sgd(0.2);
  t.momentum = 0.9;
  runAgainstReference(t, kSteps);
}

// The first step's buffer is the gradient itself, not (1 - dampening) * g: with dampening 0.5
// the two differ by half the first step.
TEST(Optimizer, SgdMomentumDampening) {
  Training t = sgd(0.2);
  t.momentum = 0.8;
  t.dampening = 0.5;
  runAgainstReference(t, kSteps);
}

TEST(Optimizer, SgdNesterov) {
  Training t = sgd(0.2);
  t.momentum = 0.9;
  t.nesterov = true;
  runAgainstReference(t, kSteps);
}

TEST(Optimizer, SgdWeightDecay) {
  Training t = sgd(0.2);
  t.weightDecay = 0.3;
  runAgainstReference(t, kSteps);
  t.momentum = 0.5;
  runAgainstReference(t, kSteps);
}

TEST(Optimizer, Adam) { runAgainstReference(adam(), kSteps); }

// AMSGrad divides by the running maximum of v: with beta2 0.5 v falls quickly after the large
// first gradients, so v_max and v part, and the test must tell the two apart.
TEST(Optimizer, AdamAmsgrad) {
  Training t = adam();
  t.amsgrad = true;
  t.beta2 = 0.5;
  auto exe = compileStep(t);
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->inputNames(),
            (std::vector<std::string>{"x", "labels", "W1", "b1", "W2", "W1.m", "b1.m", "W2.m",
                                      "W1.v", "b1.v", "W2.v", "W1.v_max", "b1.v_max", "W2.v_max",
                                      "step"}));
  runAgainstReference(t, kSteps);
  Reference ams(t), plain(t);
  plain.o.amsgrad = false;
  for (int i = 0; i < kSteps; ++i) {
    ams.step();
    plain.step();
  }
  double differ = 0;
  for (const auto& [name, v] : ams.p)
    for (size_t j = 0; j < v.size(); ++j) differ = std::max(differ, std::abs(v[j] - plain.p[name][j]));
  EXPECT_GT(differ, 1e-4) << "the test cannot tell AMSGrad from Adam";
  t.optimizer = Training::Optimizer::AdamW;
  t.weightDecay = 0.1;
  runAgainstReference(t, kSteps);
  t.epsilonMode = Training::EpsilonMode::Keras;
  runAgainstReference(t, kSteps);
}

TEST(Optimizer, AdamL2WeightDecay) {
  Training t = adam();
  t.weightDecay = 0.5;
  runAgainstReference(t, kSteps);
}

TEST(Optimizer, AdamWDecoupledWeightDecay) {
  Training t = adam(Training::Optimizer::AdamW);
  t.learningRate = 0.05;
  t.weightDecay = 0.5;  // each step shrinks p by 2.5%, far above the tolerance
  runAgainstReference(t, kSteps);
}

// Keras's eps placement: checked against the Keras reference, and the test must be able to
// tell it from PyTorch's (a large eps makes the two differ well above the tolerance).
TEST(Optimizer, AdamKerasEpsilon) {
  Training t = adam();
  t.epsilon = 1e-2;
  t.epsilonMode = Training::EpsilonMode::Keras;
  runAgainstReference(t, kSteps);
  Reference keras(t), torch(t);
  torch.keras = false;
  for (int i = 0; i < 2; ++i) {
    keras.step();
    torch.step();
  }
  double differ = 0;
  for (const auto& [name, v] : keras.p)
    for (size_t j = 0; j < v.size(); ++j)
      differ = std::max(differ, std::abs(v[j] - torch.p[name][j]));
  EXPECT_GT(differ, 1e-4) << "the test cannot tell Keras's eps from PyTorch's";
  // Adam with AdamW's decoupled decay in Keras mode too.
  t.optimizer = Training::Optimizer::AdamW;
  t.weightDecay = 0.1;
  runAgainstReference(t, kSteps);
}

Training rmsprop() {
  Training t;
  t.optimizer = Training::Optimizer::RmsProp;
  t.learningRate = 0.01;
  return t;
}

// RMSprop: plain; with momentum (its buffer starts at zeros, so its first value is g / avg:
// no first-step copy as SGD's); centered (grad_avg); L2 weight decay; and a schedule. The state
// is square_avg, then momentum_buffer, then grad_avg, as torch's, and no step counter without a
// schedule. Centered and plain differ well above the tolerance.
TEST(Optimizer, RmsProp) {
  Training t = rmsprop();
  auto exe = compileStep(t);
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->inputNames(), (std::vector<std::string>{"x", "labels", "W1", "b1", "W2", "W1.square_avg",
                                                         "b1.square_avg", "W2.square_avg"}));
  runAgainstReference(t, kSteps);
  // g / sqrt(square_avg) does not scale with g, so the f32 gradients' absolute error (about
  // 7e-7, see kTolerance) comes out relative: a momentum buffer of 5 was 1.9e-5 from the double
  // reference, where a wrong formula is 1e-3 or more (the checks below).
  constexpr double kRatioTolerance = 5e-5;
  t.momentum = 0.9;
  t.centered = true;
  t.alpha = 0.9;
  exe = compileStep(t);
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->inputNames(),
            (std::vector<std::string>{"x", "labels", "W1", "b1", "W2", "W1.square_avg", "b1.square_avg",
                                      "W2.square_avg", "W1.momentum_buffer", "b1.momentum_buffer",
                                      "W2.momentum_buffer", "W1.grad_avg", "b1.grad_avg", "W2.grad_avg"}));
  runAgainstReference(t, kSteps, kRatioTolerance);
  // The variants must differ from each other far beyond that: centered from plain, momentum
  // from none (each against the test's own reference, 6 steps).
  auto apart = [](Training a, Training b) {
    Reference ra(a), rb(b);
    for (int i = 0; i < kSteps; ++i) {
      ra.step();
      rb.step();
    }
    double differ = 0;
    for (const auto& [name, v] : ra.p)
      for (size_t j = 0; j < v.size(); ++j)
        differ = std::max(differ, std::abs(v[j] - rb.p[name][j]) / (1 + std::abs(v[j])));
    return differ;
  };
  Training plain = t, still = t;
  plain.centered = false;
  still.momentum = 0;
  EXPECT_GT(apart(t, plain), 20 * kRatioTolerance) << "the test cannot tell centered RMSprop from plain";
  EXPECT_GT(apart(t, still), 20 * kRatioTolerance) << "the test cannot tell RMSprop's momentum from none";
  t.centered = false;
  runAgainstReference(t, kSteps, kRatioTolerance);
  t.momentum = 0;
  t.weightDecay = 0.3;
  runAgainstReference(t, kSteps);
  t.lrSchedule = Training::LrSchedule::Step;
  t.lrStepSize = 2;
  t.lrGamma = 0.5;
  runAgainstReference(t, kSteps);
}

// Adagrad: plain (eps 1e-10, PyTorch's); lr_decay (needs the step counter); a starting
// accumulator (added in the update, the slot itself starting at zeros); L2 weight decay.
TEST(Optimizer, Adagrad) {
  Training t;
  t.optimizer = Training::Optimizer::Adagrad;
  t.learningRate = 0.1;
  t.epsilon = 1e-10;
  auto exe = compileStep(t);
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->inputNames(), (std::vector<std::string>{"x", "labels", "W1", "b1", "W2", "W1.sum", "b1.sum",
                                                         "W2.sum"}));
  runAgainstReference(t, kSteps);
  t.lrDecay = 0.5;
  EXPECT_TRUE(training::usesStepCounter(t));
  runAgainstReference(t, kSteps);
  t.initialAccumulator = 0.1;
  t.weightDecay = 0.2;
  runAgainstReference(t, kSteps);
}

// Label smoothing (PyTorch's cross_entropy(label_smoothing=eps)): the step's loss and every
// parameter follow the reference's smoothed target; the smoothing must move them well beyond
// the tolerance. It applies to the cross-entropy only and must lie in [0, 1].
TEST(Optimizer, LabelSmoothingAndClassWeights) {
  Training t = sgd(0.5);
  t.labelSmoothing = 0.2;
  runAgainstReference(t, kSteps);
  t = adam();
  t.labelSmoothing = 0.1;
  runAgainstReference(t, kSteps);
  Reference smoothed(sgd(0.5)), plain(sgd(0.5));
  smoothed.o.labelSmoothing = 0.2;
  double differ = 0;
  for (int i = 0; i < 2; ++i) differ = std::max(differ, std::abs(smoothed.step() - plain.step()));
  EXPECT_GT(differ, 1e-2) << "the test cannot tell the smoothed loss from the plain one";
  // Class weights (PyTorch's weight=), alone and with smoothing (its weighted form).
  t = sgd(0.5);
  t.classWeights = {1.0, 2.5, 0.5};
  runAgainstReference(t, kSteps);
  t.labelSmoothing = 0.2;
  runAgainstReference(t, kSteps);
  Reference weighted(t), unweighted(t);
  unweighted.o.classWeights.clear();
  differ = 0;
  for (int i = 0; i < 2; ++i) differ = std::max(differ, std::abs(weighted.step() - unweighted.step()));
  EXPECT_GT(differ, 1e-2) << "the test cannot tell the weighted loss from the plain one";
  t.classWeights = {1.0, 2.0};
  std::string error;
  EXPECT_FALSE(compileStep(t, &error));
  EXPECT_NE(error.find("2 class weights for 3 classes"), std::string::npos) << error;
  t.classWeights = {1.0, -2.0, 1.0};
  EXPECT_EQ(training::checkOptions(t), "--class-weights: -2 is negative (each weight must be >= 0)");
  t = sgd(0.1);
  t.labelSmoothing = 1.5;
  EXPECT_EQ(training::checkOptions(t), "--label-smoothing 1.5: must be in [0, 1]");
  t.labelSmoothing = 0.1;
  t.loss = Training::Loss::Nll;
  EXPECT_EQ(training::checkOptions(t), "--label-smoothing applies to --loss cross-entropy (PyTorch's nll_loss has none)");
}

// Options that do not apply to the optimizer are refused by name.
TEST(Optimizer, RmsPropAndAdagradOptionsAreChecked) {
  Training t = rmsprop();
  t.lrDecay = 0.1;
  EXPECT_EQ(training::checkOptions(t), "--lr-decay and --initial-accumulator apply to adagrad, not rmsprop");
  t = rmsprop();
  t.alpha = -1;
  EXPECT_EQ(training::checkOptions(t), "--alpha -1: must be >= 0");
  t = rmsprop();
  t.nesterov = true;
  EXPECT_EQ(training::checkOptions(t), "--dampening and --nesterov apply to sgd only, not rmsprop");
  t.optimizer = Training::Optimizer::Adagrad;
  t.nesterov = false;
  t.centered = true;
  EXPECT_EQ(training::checkOptions(t), "--centered applies to rmsprop, not adagrad");
  t.centered = false;
  t.momentum = 0.9;
  EXPECT_EQ(training::checkOptions(t), "--momentum applies to sgd and rmsprop, not adagrad");
  t.momentum = 0;
  t.initialAccumulator = -1;
  EXPECT_EQ(training::checkOptions(t), "--initial-accumulator -1: must be >= 0");
  t.initialAccumulator = 0;
  EXPECT_EQ(training::checkOptions(t), "");
}

TEST(Optimizer, StepSchedule) {
  Training t = sgd(0.3);
  t.momentum = 0.5;
  t.lrSchedule = Training::LrSchedule::Step;
  t.lrStepSize = 2;
  t.lrGamma = 0.5;
  runAgainstReference(t, kSteps);  // lr 0.3, 0.3, 0.15, 0.15, 0.075, 0.075
  t = adam();
  t.lrSchedule = Training::LrSchedule::Step;
  t.lrStepSize = 5;  // steps 1..5 at lr, 6 at lr * gamma: floor((t-1)/S) exact at 5/5
  t.lrGamma = 0.1;
  runAgainstReference(t, kSteps);
}

TEST(Optimizer, CosineScheduleWithWarmup) {
  // Steps 1, 2 warm up (lr/2, lr), 3..5 decay, 6 and 7 are clamped at lr_min.
  Training t = adam();
  t.learningRate = 0.05;
  t.lrSchedule = Training::LrSchedule::Cosine;
  t.warmupSteps = 2;
  t.totalSteps = 5;
  t.lrMin = 0.002;
  Reference r(t);
  EXPECT_DOUBLE_EQ(r.lr(1), 0.025);
  EXPECT_DOUBLE_EQ(r.lr(2), 0.05);
  EXPECT_DOUBLE_EQ(r.lr(5), 0.002);
  runAgainstReference(t, 7);
  // No warm-up, SGD.
  t = sgd(0.4);
  t.lrSchedule = Training::LrSchedule::Cosine;
  t.totalSteps = 4;
  runAgainstReference(t, kSteps);
}

TEST(Optimizer, ClipGradNorm) {
  // Gradient norm here ~0.3-1: 0.05 clips every step, 100 never does.
  Training t = sgd(0.5);
  t.clipNorm = 0.05;
  RunSummary s = runAgainstReference(t, kSteps);
  ASSERT_EQ(s.clipCoefs.size(), (size_t)kSteps);
  for (double c : s.clipCoefs) EXPECT_LT(c, 0.5) << "the norm did not clip";
  t.clipNorm = 100;
  s = runAgainstReference(t, kSteps);
  for (double c : s.clipCoefs) EXPECT_EQ(c, 1.0);
  // With Adam and weight decay: clipping comes before the L2 term.
  t = adam();
  t.clipNorm = 0.05;
  t.weightDecay = 0.5;
  s = runAgainstReference(t, kSteps);
  for (double c : s.clipCoefs) EXPECT_LT(c, 0.5);
}

// The convention when nothing depends on t: no slots, no `step`.
TEST(Optimizer, PlainSgdHasNoStepState) {
  auto exe = compileStep(sgd(0.1));
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->inputNames(), (std::vector<std::string>{"x", "labels", "W1", "b1", "W2"}));
  Training m = sgd(0.1);
  m.momentum = 0.9;
  exe = compileStep(m);
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->inputNames(),
            (std::vector<std::string>{"x", "labels", "W1", "b1", "W2", "W1.momentum_buffer",
                                      "b1.momentum_buffer", "W2.momentum_buffer", "step"}));
}

TEST(Optimizer, OptionsAreChecked) {
  Training t = sgd(0.1);
  t.nesterov = true;
  EXPECT_EQ(training::checkOptions(t),
            "--nesterov requires a momentum > 0 and zero dampening (as torch.optim.SGD)");
  t.momentum = 0.9;
  EXPECT_EQ(training::checkOptions(t), "");
  t.dampening = 0.1;
  EXPECT_NE(training::checkOptions(t), "");
  t = sgd(-0.1);
  EXPECT_EQ(training::checkOptions(t), "--lr -0.1: must be >= 0");
  t = adam();
  t.weightDecay = -1;
  EXPECT_NE(training::checkOptions(t).find("--weight-decay"), std::string::npos);
  t = adam();
  t.momentum = 0.9;
  EXPECT_EQ(training::checkOptions(t), "--momentum applies to sgd and rmsprop, not adam and adamw");
  t.momentum = 0;
  t.dampening = 0.5;
  EXPECT_EQ(training::checkOptions(t), "--dampening and --nesterov apply to sgd only, not adam and adamw");
  t = adam();
  t.beta2 = 1;
  EXPECT_NE(training::checkOptions(t).find("--beta2"), std::string::npos);
  t = sgd(0.1);
  t.amsgrad = true;
  EXPECT_EQ(training::checkOptions(t), "--amsgrad applies to adam and adamw, not sgd");
  t = adam();
  t.lrSchedule = Training::LrSchedule::Cosine;
  t.warmupSteps = 10;
  t.totalSteps = 10;
  EXPECT_NE(training::checkOptions(t).find("must exceed --warmup-steps"), std::string::npos);
  // The compiler refuses them too, with the same reason.
  t = sgd(0.1);
  t.nesterov = true;
  std::string error;
  EXPECT_FALSE(compileStep(t, &error));
  EXPECT_NE(error.find("--nesterov requires"), std::string::npos) << error;
}

// ---- The loss (Training::loss) ----

// -mean(z[label]) of the model's logits z at `p`: nll on a model without LogSoftmax.
double nllOfLogits(const Params& p) {
  const Data& d = data();
  const auto &W1 = p.at("W1"), &b1 = p.at("b1"), &W2 = p.at("W2");
  double sum = 0;
  for (int64_t n = 0; n < kN; ++n) {
    const int64_t c = d.labels[n];
    for (int64_t j = 0; j < kH; ++j) {
      double h = b1[j];
      for (int64_t k = 0; k < kD; ++k) h += d.x[n * kD + k] * W1[j * kD + k];
      sum += h * W2[j * kC + c];
    }
  }
  return -sum / kN;
}

// The plan's own run: each step's loss and the parameters it started from.
struct Trajectory {
  std::vector<double> losses;
  std::vector<Params> params;
};

// `steps` steps of `t` on `model`, the state fed back by the convention (runAgainstReference).
Trajectory trajectory(const Training& t, const std::string& model, int steps) {
  Trajectory tr;
  std::string error;
  auto exe = compileStep(t, &error, model);
  EXPECT_TRUE(exe) << error;
  if (!exe) return tr;
  const auto& names = exe->inputNames();
  const Data& d = data();
  std::vector<Tensor> state;
  for (size_t i = 2; i < names.size(); ++i) {
    auto it = d.init.find(names[i]);
    state.push_back(it != d.init.end() ? f32Tensor(d.shapes.at(names[i]), it->second)
                                       : Tensor::alloc(DType::F32, exe->inputTypes()[i].shape));
  }
  const Tensor x = f32Tensor({kN, kD}, d.x);
  const Tensor labels = Tensor::fromVector<int64_t>({kN}, d.labels);
  for (int step = 1; step <= steps; ++step) {
    Params before;
    for (size_t i = 2; i < names.size(); ++i)
      if (d.init.count(names[i])) {
        const float* v = state[i - 2].data<float>();
        before[names[i]].assign(v, v + state[i - 2].numel());
      }
    std::vector<Tensor> in = {x, labels}, out;
    in.insert(in.end(), state.begin(), state.end());
    Status st = exe->run(in, &out);
    EXPECT_TRUE(st.isOk()) << st.message();
    if (!st.isOk()) return tr;
    tr.losses.push_back(out[0].data<float>()[0]);
    tr.params.push_back(std::move(before));
    for (size_t i = 2; i < names.size(); ++i) state[i - 2] = out[i - 1];
  }
  return tr;
}

// nll on LogSoftmax(z) is cross-entropy on z, loss and gradients (the LogSoftmax rule and
// NegativeLogLikelihoodLossGrad compose to softmax - onehot): the two plans follow the same
// trajectory, step after step, and each loss is the double reference's cross-entropy at the
// parameters the step started from. The tolerance is the CPU LogSoftmax kernel's: its output
// is off the double value by a per-row constant of 1.2e-6 to 3.4e-6 on this model (its
// log-sum-exp; SoftmaxCrossEntropyLoss's ref kernel, in double, is within 1e-7), so the nll
// loss is 1.6e-6 relative off at step 1. A wrong loss or gradient is 1e-2 or more off.
constexpr double kLogSoftmaxTolerance = 4e-6;

TEST(Loss, NllOnLogSoftmaxIsCrossEntropyOnLogits) {
  for (Training t : {sgd(0.5), adam()}) {
    SCOPED_TRACE(t.optimizer == Training::Optimizer::Sgd ? "sgd" : "adam");
    Training nll = t;
    nll.loss = Training::Loss::Nll;
    const Trajectory ce = trajectory(t, modelPath(), kSteps);
    const Trajectory lp = trajectory(nll, logSoftmaxModelPath(), kSteps);
    ASSERT_EQ(ce.losses.size(), (size_t)kSteps);
    ASSERT_EQ(lp.losses.size(), (size_t)kSteps);
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(lp.losses[s], ce.losses[s], kLogSoftmaxTolerance * std::abs(ce.losses[s]))
          << "step " << s + 1;
      Params unused;
      const double want = lossAndGrads(lp.params[s], &unused);
      EXPECT_NEAR(lp.losses[s], want, kLogSoftmaxTolerance * std::abs(want)) << "step " << s + 1;
    }
    // It trained: the comparison is over moving parameters.
    EXPECT_LT(ce.losses.back(), ce.losses.front() - 0.05);
  }
}

// nll takes result 0 as log-probabilities as given (torch's NLLLoss): on plain logits it is
// -mean(z[label]), not the cross-entropy, and SGD pushes it down without bound.
TEST(Loss, NllOnLogitsIsNotCrossEntropy) {
  Training t = sgd(0.5);
  t.loss = Training::Loss::Nll;
  const Trajectory tr = trajectory(t, modelPath(), kSteps);
  ASSERT_EQ(tr.losses.size(), (size_t)kSteps);
  for (int s = 0; s < kSteps; ++s) {
    const double want = nllOfLogits(tr.params[s]);
    EXPECT_NEAR(tr.losses[s], want, 1e-6 * (1 + std::abs(want))) << "step " << s + 1;
    Params unused;
    const double ce = lossAndGrads(tr.params[s], &unused);
    EXPECT_GT(std::abs(tr.losses[s] - ce), 0.1) << "step " << s + 1 << ": nll " << tr.losses[s]
                                                << ", cross-entropy " << ce;
  }
  EXPECT_LT(tr.losses.back(), tr.losses.front() - 1.0);
}

// The error names what result 0 must be for the chosen loss.
TEST(Loss, ResultZeroMustBeRankTwo) {
  testing_onnx::Model m;
  m.input("x", {kN, kD}).floatInit("W", {kD}, std::vector<float>(kD, 0.5f)).output("y");
  m.node("MatMul", {"x", "W"}, {"y"}, "mv");
  const std::string path = testing_onnx::writeTemp(m, "loss_rank1");
  Training t = sgd(0.1);
  t.loss = Training::Loss::Nll;
  std::string error;
  EXPECT_FALSE(compileStep(t, &error, path));
  EXPECT_NE(error.find("result 0 must be the log-probabilities, f32 [N, C]"), std::string::npos)
      << error;
  t.loss = Training::Loss::CrossEntropy;
  EXPECT_FALSE(compileStep(t, &error, path));
  EXPECT_NE(error.find("result 0 must be the logits, f32 [N, C]"), std::string::npos) << error;
  std::remove(path.c_str());
}

}  // namespace
