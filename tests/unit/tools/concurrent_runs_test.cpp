// Concurrent Executable::run on compiled models (../shared/models, skipped when absent): 8
// threads x 200 runs with mixed inputs match the single-threaded outputs bit for bit, and two
// loads of one plan give bit-identical outputs at each intra-op thread count.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "../runtime/concurrent_runs_util.h"
#include "compiler/Compiler.h"
#include "frontend/OnnxImporter.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/Executable.h"

namespace tandem {
namespace {

const std::string kShared = std::string(TANDEM_SOURCE_DIR) + "/../shared/models/";

// Compiles ../shared/models/<name>/model.onnx for the CPU, symbolic dims bound to 4 (a batch of
// 4); false with the reason in *why when the model is absent or does not compile.
bool compileModel(const std::string& name, plan::Plan* out, std::string* why) {
  std::string path = kShared + name + "/model.onnx";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *why = path + " is absent";
    return false;
  }
  mlir::MLIRContext ctx;
  loadTandemDialects(&ctx);
  auto module = importOnnxFile(&ctx, path, {}, why);
  if (!module) return false;
  CompileOptions opts;
  opts.defaultDim = 4;
  if (Status st = setTargetDevices(&opts, "cpu"); !st.isOk()) {
    *why = st.message();
    return false;
  }
  CompileResult res;
  if (mlir::failed(compileModule(*module, opts, &res))) {
    *why = "compile failed";
    return false;
  }
  *out = res.plan;
  return true;
}

class ConcurrentCompiledRuns : public ::testing::TestWithParam<const char*> {};

TEST_P(ConcurrentCompiledRuns, EightThreadsMatchTheSingleThreadedRunsBitForBit) {
  plan::Plan p;
  std::string why;
  if (!compileModel(GetParam(), &p, &why)) {
    if (why.find("absent") != std::string::npos) GTEST_SKIP() << why;
    FAIL() << why;
  }
  auto exe = loadUntuned(p, 1);
  ASSERT_TRUE(exe);
  std::vector<std::vector<Tensor>> sets;
  for (uint32_t s = 0; s < 8; ++s) sets.push_back(seededInputs(*exe, 7 + s));
  // Inputs that differ give outputs that differ, so a run reading another's arena shows.
  std::vector<Tensor> a, b;
  ASSERT_TRUE(exe->run(sets[0], &a).isOk());
  ASSERT_TRUE(exe->run(sets[1], &b).isOk());
  ASSERT_FALSE(sameBits(a, b));
  StressResult res = stressRuns(*exe, sets, 8, 200);
  EXPECT_EQ(res.firstError, "");
  EXPECT_EQ(res.runs, 8 * 200);
  EXPECT_EQ(res.mismatches, 0);
}

TEST_P(ConcurrentCompiledRuns, SamePlanInputsAndThreadsGiveIdenticalOutputs) {
  plan::Plan p;
  std::string why;
  if (!compileModel(GetParam(), &p, &why)) {
    if (why.find("absent") != std::string::npos) GTEST_SKIP() << why;
    FAIL() << why;
  }
  for (int threads : {1, kTeamThreads}) {
    auto first = loadUntuned(p, threads), second = loadUntuned(p, threads);
    ASSERT_TRUE(first && second);
    std::vector<Tensor> in = seededInputs(*first, 3), x, y, z;
    ASSERT_TRUE(first->run(in, &x).isOk());
    ASSERT_TRUE(first->run(in, &y).isOk());
    ASSERT_TRUE(second->run(in, &z).isOk());
    EXPECT_TRUE(sameBits(x, y)) << threads << " threads";
    EXPECT_TRUE(sameBits(x, z)) << threads << " threads";
    // With runs in flight at once too (each caller with its own OpenMP team).
    StressResult res = stressRuns(*first, {in, seededInputs(*first, 4)}, 2, 10);
    EXPECT_EQ(res.firstError, "");
    EXPECT_EQ(res.mismatches, 0) << threads << " threads";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ConcurrentCompiledRuns,
                         ::testing::Values("mnist_cnn", "mlp"));

}  // namespace
}  // namespace tandem
