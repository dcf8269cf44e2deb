// Concurrent Executable::run on compiled models (../shared/models, skipped when absent): 8
// threads x 200 runs with mixed inputs match the single-threaded outputs bit for bit, and two
// loads of one plan give bit-identical outputs at each intra-op thread count.
#include <gtest/gtest.h>

#include <string>

#include "../runtime/concurrent_runs_util.h"
#include "shared_models_util.h"
#include "runtime/Executable.h"

namespace tandem {
namespace {

class ConcurrentCompiledRuns : public ::testing::TestWithParam<const char*> {};

TEST_P(ConcurrentCompiledRuns, EightThreadsMatchTheSingleThreadedRunsBitForBit) {
  plan::Plan p;
  std::string why;
  if (!compileSharedModel(GetParam(), "cpu", 4, &p, &why)) {
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
  if (!compileSharedModel(GetParam(), "cpu", 4, &p, &why)) {
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
