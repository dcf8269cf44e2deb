// The plan verifier (runtime/PlanVerify.h) refuses nothing the compiler makes: every model of
// ../shared/models (skipped when absent) compiled for the CPU, for a CPU + H100 target (copies,
// CUDA fusion kinds; by cost and with every op it can take on the GPU) and for two host devices
// verifies; and a real plan with one step's result
// corrupted is refused naming that step.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "runtime/PlanVerify.h"
#include "shared_models_util.h"

namespace tandem {
namespace {

class VerifyCompiledModel : public ::testing::TestWithParam<const char*> {};

TEST_P(VerifyCompiledModel, EveryTargetsPlanVerifies) {
  using placement::PlacementPolicy;
  // The cost model decides how much of a model the H100 gets; --placement=gpu puts every op
  // with a CUDA kernel there, so copies are sure to be among the steps verified.
  const std::pair<const char*, PlacementPolicy> targets[] = {
      {"cpu", PlacementPolicy::Cost},
      {"cpu,cuda:0=h100", PlacementPolicy::Cost},
      {"cpu,cuda:0=h100", PlacementPolicy::Gpu},
      {"cpu,cpu:1", PlacementPolicy::Cost}};
  int gpuCopies = 0;  // Copy steps verified in the --placement=gpu plans
  for (const auto& [target, policy] : targets) {
    for (int64_t batch : {1, 4}) {
      plan::Plan p;
      std::string why;
      if (!compileSharedModel(GetParam(), target, batch, &p, &why, policy)) {
        if (why.find("absent") != std::string::npos) GTEST_SKIP() << why;
        FAIL() << why;
      }
      ASSERT_GT(p.steps_size(), 0);
      int copies = 0, fused = 0, gpu = 0;
      for (const plan::Step& s : p.steps()) {
        copies += s.op_type() == "Copy";
        fused += s.op_type() == "Fused";
        gpu += s.device() == "cuda:0";
      }
      if (policy == PlacementPolicy::Gpu) gpuCopies += copies;
      std::printf("%s %s%s batch %lld: %d steps, %d copies, %d fused, %d on cuda:0\n", GetParam(),
                  target, policy == PlacementPolicy::Gpu ? " (gpu policy)" : "", (long long)batch,
                  p.steps_size(), copies, fused, gpu);
      Status st = verifyPlanSteps(p);
      EXPECT_TRUE(st.isOk()) << target << " batch " << batch << ": " << st.message();
    }
  }
  EXPECT_GT(gpuCopies, 0);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, VerifyCompiledModel,
                         ::testing::Values("mlp", "mnist_cnn", "mnist_cnn_bn_keepbn", "resnet18",
                                           "gpt_like"));

// One corrupted result among resnet18's ~30 steps: the verifier names that step, no other.
TEST(VerifyCompiledModel, ACorruptedStepOfARealPlanIsNamed) {
  plan::Plan p;
  std::string why;
  if (!compileSharedModel("resnet18", "cpu", 1, &p, &why)) {
    if (why.find("absent") != std::string::npos) GTEST_SKIP() << why;
    FAIL() << why;
  }
  int last = p.steps_size() - 1;
  const plan::Step& s = p.steps(last);
  plan::Value* out = p.mutable_values(s.outputs(0));
  ASSERT_GE(out->dims_size(), 1);
  out->set_dims(out->dims_size() - 1, out->dims(out->dims_size() - 1) + 1);
  Status st = verifyPlanSteps(p);
  ASSERT_FALSE(st.isOk());
  std::string label = "plan step " + std::to_string(last) + " (" + s.op_type();
  EXPECT_EQ(st.message().rfind(label, 0), 0u) << st.message();
  EXPECT_NE(st.message().find("is declared"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tandem
