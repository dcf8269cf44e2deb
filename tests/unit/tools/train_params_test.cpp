// `tandem train --params REGEX` and `--freeze REGEX` (TrainOptions::paramPatterns,
// freezePatterns; CompileOptions::Training::frozenNames): what trains is what the patterns say,
// a frozen initializer is written back as it was, bit for bit, the rest train as they would
// without it (the first step's head update is the default run's), the step plan leaves out the
// backward pass where no gradient is needed, and a pattern that is no regex, matches nothing, or
// freezes every parameter is a clear error before any training.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "frontend/OnnxTensor.h"
#include "runtime/FileIO.h"
#include "tests/unit/onnx_model_builder.h"
#include "tools/driver/Driver.h"
#include "tools/driver/Train.h"

using namespace tandem;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kF = 8, kH = 12, kC = 3, kSamples = 32;
const std::vector<std::string> kNames = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                         "fc3.weight", "fc3.bias"};

// x [N, 8] -> fc1 (12) -> Relu -> fc2 (12) -> Relu -> fc3 (3): logits; Gemm with transB, as
// torch.onnx writes nn.Linear.
std::string writeMlp() {
  testing_onnx::Model m;
  m.input("x", {-1, kF}, onnx::TensorProto::FLOAT, {"N"});
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-0.4f, 0.4f);
  auto linear = [&](const std::string& name, const std::string& in, const std::string& out,
                    int64_t inF, int64_t outF) {
    std::vector<float> w((size_t)(inF * outF)), b((size_t)outF);
    for (float& e : w) e = u(rng);
    for (float& e : b) e = u(rng);
    m.floatInit(name + ".weight", {outF, inF}, w);
    m.floatInit(name + ".bias", {outF}, b);
    testing_onnx::intAttr(m.node("Gemm", {in, name + ".weight", name + ".bias"}, {out}, name), "transB", 1);
  };
  linear("fc1", "x", "h1", kF, kH);
  m.node("Relu", {"h1"}, {"r1"}, "relu1");
  linear("fc2", "r1", "h2", kH, kH);
  m.node("Relu", {"h2"}, {"r2"}, "relu2");
  linear("fc3", "r2", "logits", kH, kC);
  m.output("logits");
  return testing_onnx::writeTemp(m, "train_params_mlp");
}

// DIR/{train,test}/test_data_set_0: kSamples samples uniform in [-1, 1), labels i % kC.
void writeData(const std::string& dir) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> xs(kSamples * kF);
  for (float& v : xs) v = u(rng);
  std::vector<int64_t> labels(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) labels[i] = i % kC;
  for (const char* split : {"train", "test"}) {
    const std::string ds = dir + "/" + split + "/test_data_set_0";
    fs::create_directories(ds);
    ASSERT_TRUE(writeTensorFile(ds + "/input_0.pb", Tensor::fromVector<float>({kSamples, kF}, xs), "x").isOk());
    ASSERT_TRUE(writeTensorFile(ds + "/input_1.pb", Tensor::fromVector<int64_t>({kSamples}, labels), "y").isOk());
  }
}

struct Fixture : ::testing::Test {
  testing_onnx::RemovedAtExit model{writeMlp()};
  std::string dir = fs::temp_directory_path() / ("tandem_train_params_" + std::to_string(getpid()));
  void SetUp() override { writeData(dir); }
  void TearDown() override { fs::remove_all(dir); }

  // One SGD step (lr 0.1, momentum 0.9, weight decay 0.01) of batch 16.
  TrainOptions options() const {
    TrainOptions o;
    o.model = model.path;
    o.dataFormat = "onnx";
    o.dataDir = dir;
    o.batch = 16;
    o.maxSteps = 1;
    o.threads = 1;
    o.progress = false;
    o.training.optimizer = CompileOptions::Training::Optimizer::Sgd;
    o.training.learningRate = 0.1;
    o.training.momentum = 0.9;
    o.training.weightDecay = 0.01;
    o.output = dir + "/trained.onnx";
    return o;
  }
  // Trains with `o`; the log's text, and the written model's initializers by name.
  std::map<std::string, Tensor> train(const TrainOptions& o, std::string* logText = nullptr) {
    const std::string logPath = dir + "/log.txt";
    std::FILE* log = std::fopen(logPath.c_str(), "w");
    EXPECT_NE(log, nullptr);
    Status st = trainModel(o, log, nullptr);
    std::fclose(log);
    EXPECT_TRUE(st.isOk()) << st.message();
    if (logText) EXPECT_TRUE(readInputFile(logPath, logText).isOk());
    return initializers(o.output);
  }
  static std::map<std::string, Tensor> initializers(const std::string& path) {
    std::string bytes;
    EXPECT_TRUE(readInputFile(path, &bytes).isOk()) << path;
    onnx::ModelProto m;
    EXPECT_TRUE(m.ParseFromString(bytes));
    std::map<std::string, Tensor> out;
    for (const auto& t : m.graph().initializer()) EXPECT_TRUE(tensorFromProto(t, &out[t.name()]).isOk());
    return out;
  }
};

bool sameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

double maxDiff(const Tensor& a, const Tensor& b) {
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, (double)std::fabs(a.data<float>()[i] - b.data<float>()[i]));
  return d;
}

// The step plan's op types for training options `t`, one kernel per op (no fusion).
std::vector<std::string> stepOps(const std::string& model, const CompileOptions::Training& t) {
  CompileOptions co;
  co.fuse = false;
  co.training = t;
  co.training->residentState = true;
  co.inputShapes["x"] = {16, kF};
  CompileResult r;
  Status st = compileOnnxFile(model, ImportOptions{}, co, &r);
  EXPECT_TRUE(st.isOk()) << st.message();
  std::vector<std::string> ops;
  for (const plan::Step& s : r.plan.steps()) ops.push_back(s.op_type());
  return ops;
}

TEST_F(Fixture, FrozenInitializersStayAndTheRestTrainAsWithoutThem) {
  const std::map<std::string, Tensor> initial = initializers(model.path);
  const std::map<std::string, Tensor> all = train(options());
  for (const std::string& n : kNames) EXPECT_FALSE(sameBits(all.at(n), initial.at(n))) << n;

  TrainOptions o = options();
  o.freezePatterns = {"^fc1\\.", "fc2"};
  std::string text;
  const std::map<std::string, Tensor> frozen = train(o, &text);
  EXPECT_NE(text.find("note: --freeze: 4 f32 initializer(s) stay as they are: fc1.weight, fc1.bias, "
                      "fc2.weight, fc2.bias\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("do not train"), std::string::npos) << text;
  for (const std::string& n : kNames) {
    SCOPED_TRACE(n);
    if (n.rfind("fc3", 0) == 0) {
      // The head's first update does not depend on whether the layers below it train.
      EXPECT_FALSE(sameBits(frozen.at(n), initial.at(n)));
      EXPECT_LE(maxDiff(frozen.at(n), all.at(n)), 1e-6 * (1 + maxDiff(all.at(n), initial.at(n))));
    } else {
      EXPECT_TRUE(sameBits(frozen.at(n), initial.at(n)));
    }
  }

  // --params names them itself: fc3.weight alone trains; its update is the same again.
  o = options();
  o.paramPatterns = {"^fc3\\.weight$"};
  const std::map<std::string, Tensor> head = train(o, &text);
  EXPECT_EQ(text.find("do not train"), std::string::npos) << text;
  for (const std::string& n : kNames) EXPECT_EQ(sameBits(head.at(n), initial.at(n)), n != "fc3.weight") << n;
  EXPECT_LE(maxDiff(head.at("fc3.weight"), all.at("fc3.weight")), 1e-6);

  // --params and --freeze together: the frozen ones leave the named set.
  o = options();
  o.paramPatterns = {"fc3"};
  o.freezePatterns = {"bias"};
  const std::map<std::string, Tensor> both = train(o);
  for (const std::string& n : kNames) EXPECT_EQ(sameBits(both.at(n), initial.at(n)), n != "fc3.weight") << n;
}

// With the layers below the head frozen, the step computes the head's gradients and nothing
// before them: no product for fc1's or fc2's weights, and none carrying a gradient down to them.
TEST_F(Fixture, TheBackwardPassStopsAtTheFrozenLayers) {
  CompileOptions::Training t = options().training;
  const std::vector<std::string> full = stepOps(model.path, t);
  t.frozenNames = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  const std::vector<std::string> head = stepOps(model.path, t);
  auto products = [](const std::vector<std::string>& ops) {
    int64_t n = 0;
    for (const std::string& op : ops) n += op.find("Gemm") != std::string::npos || op.find("MatMul") != std::string::npos;
    return n;
  };
  // Forward 3; backward: every weight's gradient (3) and dX of fc3 and fc2 (2), against fc3's
  // weight gradient alone.
  EXPECT_EQ(products(full), 3 + 3 + 2) << ::testing::PrintToString(full);
  EXPECT_EQ(products(head), 3 + 1) << ::testing::PrintToString(head);
  EXPECT_LT(head.size(), full.size());
}

TEST_F(Fixture, BadPatternsAreClearErrorsBeforeTraining) {
  struct Case {
    std::vector<std::string> params, freeze;
    bool allParams;
    std::string error;
  };
  const Case cases[] = {
      {{}, {"fc4"}, false,
       "--freeze 'fc4' matches no f32 initializer of the model (6 of them: fc1.weight, fc1.bias, fc2.weight, "
       "fc2.bias, fc3.weight, fc3.bias)"},
      {{"fc1", "head"}, {}, false, "--params 'head' matches no f32 initializer"},
      {{}, {"fc(1"}, false, "--freeze 'fc(1': not a regular expression"},
      {{}, {"."}, false, "training: every one of the model's 6 parameter(s) is frozen; nothing is left to train"},
      {{"fc1"}, {"fc1"}, false, "every one of the model's 2 parameter(s) is frozen"},
      {{"fc1"}, {}, true, "--params names the parameters itself: not with --all-params"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error);
    TrainOptions o = options();
    o.paramPatterns = c.params;
    o.freezePatterns = c.freeze;
    o.training.allFloatConstants = c.allParams;
    Status st = trainModel(o, nullptr, nullptr);
    ASSERT_FALSE(st.isOk());
    EXPECT_NE(st.message().find(c.error), std::string::npos) << st.message();
    EXPECT_FALSE(fs::exists(o.output));
  }
}

}  // namespace
