// Shared weights files: keys, content addressing (a blob stored once), plans that load from
// them, and the errors for a missing, truncated or corrupt file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"
#include "runtime/WeightsFile.h"
#include "plan_test_util.h"

using namespace tandem;

namespace {

constexpr int kN = 128;  // 512-byte constant: large enough to leave the plan

// y = Relu(x + b), x: f32[2,kN] input, b: f32[kN] constant with b[i] = scale * (i - 64).
plan::Plan addReluPlan(float scale) {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {2, kN}, 0);
  plan::Value* b = addValue(p, "b", plan::Value::CONSTANT, {kN}, 0);
  b->mutable_constant()->set_dtype((int)DType::F32);
  b->mutable_constant()->add_dims(kN);
  std::vector<float> bv(kN);
  for (int i = 0; i < kN; ++i) bv[i] = scale * (i - 64);
  b->mutable_constant()->set_raw(std::string((const char*)bv.data(), bv.size() * 4));
  plan::Value* small = addValue(p, "small", plan::Value::CONSTANT, {2}, 0);  // stays in the plan
  small->mutable_constant()->set_dtype((int)DType::F32);
  small->mutable_constant()->add_dims(2);
  small->mutable_constant()->set_raw(std::string(8, '\0'));
  addValue(p, "t", plan::Value::INTERMEDIATE, {2, kN}, 1024);
  addValue(p, "y", plan::Value::INTERMEDIATE, {2, kN}, 2048);
  for (auto [op, in0, in1, out] : {std::tuple{"Add", 0, 1, 3}, std::tuple{"Relu", 3, -2, 4}}) {
    plan::Step* s = p.add_steps();
    s->set_op_type(op);
    s->set_name(op);
    s->set_device("cpu");
    s->add_inputs(in0);
    if (in1 >= 0) s->add_inputs(in1);
    s->add_outputs(out);
  }
  p.add_inputs(0);
  p.add_outputs(4);
  plan::Arena* a = p.add_arenas();
  a->set_device("cpu");
  a->set_bytes(3072);
  return p;
}

int64_t fileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? (int64_t)st.st_size : -1;
}

void writePlan(const plan::Plan& p, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  ASSERT_TRUE(p.SerializeToOstream(&out));
}

struct WeightsFile : ::testing::Test {
  std::string dir;
  void SetUp() override {
    char tmpl[] = "/tmp/weights_file_test.XXXXXX";
    dir = mkdtemp(tmpl);
    mkdir((dir + "/plans").c_str(), 0755);
  }
  void TearDown() override { std::system(("rm -rf " + dir).c_str()); }
};

}  // namespace

TEST(WeightsFileKey, IsSha256OfDtypeRankDimsAndBytes) {
  // Expected values: Python hashlib.sha256(struct.pack('<ii', 1, 0) + b'abc') and
  // hashlib.sha256(struct.pack('<iiqq', 1, 2, 2, 3) + struct.pack('<6f', 0, 1, 2, 3, 4, 5)).
  EXPECT_EQ(constantKey(1, {}, "abc", 3), "22a5c7045bc36a32e64f063ff4e7946d8a663238bf27e4f5b32713d987ec51ac");
  float v[6] = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(constantKey(1, {2, 3}, v, sizeof v), "fd5a669755c5fc6cc5d1c6b8a5d7408a9e9856caf31d67295ac273cbd475da10");
  // Same bytes, other shape: another key.
  EXPECT_NE(constantKey(1, {3, 2}, v, sizeof v), constantKey(1, {2, 3}, v, sizeof v));
}

TEST_F(WeightsFile, StoresEachBlobOnceAndPlansLoadFromIt) {
  const std::string weights = dir + "/model.weights", planPath = dir + "/plans/a.tplan";
  plan::Plan a = addReluPlan(0.5f);
  ExternalizeStats st;
  ASSERT_TRUE(externalizeConstants(&a, weights, planPath, &st).isOk());
  EXPECT_EQ(st.constants, 1);  // "small" (8 bytes) stays in the plan
  EXPECT_EQ(st.newBlobs, 1);
  EXPECT_EQ(st.newBytes, kN * 4);
  const plan::Value& b = a.values(1);
  ASSERT_TRUE(b.has_external());
  EXPECT_EQ(b.external().file(), "../model.weights");
  EXPECT_EQ(b.external().offset() % 64, 0);
  EXPECT_EQ(b.external().bytes(), kN * 4);
  EXPECT_TRUE(b.constant().raw().empty());
  EXPECT_FALSE(a.values(2).has_external());
  EXPECT_EQ(a.values(2).constant().raw().size(), 8u);
  const int64_t size1 = fileSize(weights);
  EXPECT_EQ(size1, st.fileBytes);

  // The same model again (another plan of it): nothing new, the file is not touched.
  plan::Plan a2 = addReluPlan(0.5f);
  ASSERT_TRUE(externalizeConstants(&a2, weights, dir + "/plans/a2.tplan", &st).isOk());
  EXPECT_EQ(st.newBlobs, 0);
  EXPECT_EQ(fileSize(weights), size1);
  EXPECT_EQ(a2.values(1).external().offset(), b.external().offset());

  // Another constant: appended after the first, which keeps its offset.
  plan::Plan c = addReluPlan(-1.f);
  ASSERT_TRUE(externalizeConstants(&c, weights, dir + "/plans/c.tplan", &st).isOk());
  EXPECT_EQ(st.newBlobs, 1);
  EXPECT_GT(c.values(1).external().offset(), b.external().offset());
  EXPECT_EQ(c.values(1).external().offset() % 64, 0);

  // Both plans run from the file: y = relu(x + b).
  writePlan(a, planPath);
  writePlan(c, dir + "/plans/c.tplan");
  std::vector<float> x(2 * kN, 1.f);
  for (auto [path, scale] : {std::pair{planPath, 0.5f}, std::pair{dir + "/plans/c.tplan", -1.f}}) {
    std::unique_ptr<Executable> exe;
    Status s = Executable::loadFile(path, LoadOptions{1}, &exe);
    ASSERT_TRUE(s.isOk()) << s.message();
    std::vector<Tensor> out;
    ASSERT_TRUE(exe->run({Tensor::fromVector<float>({2, kN}, x)}, &out).isOk());
    for (int i = 0; i < kN; ++i)
      ASSERT_FLOAT_EQ(out[0].data<float>()[kN + i], std::max(0.f, 1.f + scale * (i - 64))) << i;
  }
  // Without its path, a plan with references cannot be loaded, and says why.
  std::unique_ptr<Executable> exe;
  Status s = Executable::load(a, LoadOptions{1}, &exe);
  EXPECT_NE(s.message().find("value 'b': its data is in the weights file '../model.weights'"), std::string::npos)
      << s.message();
}

TEST_F(WeightsFile, MissingTruncatedOrCorruptFilesAreErrorsNamingFileAndValue) {
  const std::string weights = dir + "/model.weights", planPath = dir + "/plans/a.tplan";
  plan::Plan a = addReluPlan(0.5f);
  ExternalizeStats st;
  ASSERT_TRUE(externalizeConstants(&a, weights, planPath, &st).isOk());
  writePlan(a, planPath);
  const int64_t off = a.values(1).external().offset();
  std::unique_ptr<Executable> exe;

  // One flipped byte inside the blob.
  {
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(off + 7);
    f.put('\x5a');
  }
  Status s = Executable::loadFile(planPath, LoadOptions{1}, &exe);
  EXPECT_NE(s.message().find("model.weights: value 'b': content does not match its SHA-256"), std::string::npos)
      << s.message();

  // Cut inside the blob: its range is outside the file (the header still reads).
  ASSERT_EQ(truncate(weights.c_str(), off + 100), 0);
  s = Executable::loadFile(planPath, LoadOptions{1}, &exe);
  EXPECT_NE(s.message().find("value 'b': bytes [" + std::to_string(off) + ", +512) are outside the file"),
            std::string::npos) << s.message();
  // A writer refuses to extend a damaged file rather than losing what other plans refer to.
  plan::Plan c = addReluPlan(2.f);
  s = externalizeConstants(&c, weights, planPath, &st);
  EXPECT_NE(s.message().find("model.weights: weights file index is outside the file"), std::string::npos)
      << s.message();

  // Not a weights file at all.
  { std::ofstream(weights, std::ios::trunc) << "hello"; }
  s = Executable::loadFile(planPath, LoadOptions{1}, &exe);
  EXPECT_NE(s.message().find("model.weights: not a Tandem weights file"), std::string::npos) << s.message();

  // Gone.
  std::remove(weights.c_str());
  s = Executable::loadFile(planPath, LoadOptions{1}, &exe);
  EXPECT_NE(s.message().find("plans/a.tplan: " + dir + "/plans/../model.weights: cannot open weights file (No such "
                             "file or directory), needed by value 'b'"),
            std::string::npos) << s.message();
}
