// verifyPlanSteps (runtime/PlanVerify.h) on small hand-made plans: valid ones pass, and each
// defect is refused with the step named and the reason stated; Executable::load refuses the
// same plans before allocating anything. Compiled models: tests/unit/tools/plan_verify_models_test.
#include "runtime/PlanVerify.h"

#include <gtest/gtest.h>

#include <cstring>

#include "fused_attrs_util.h"
#include "plan_test_util.h"
#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"

namespace tandem {
namespace {

std::string verifyError(const plan::Plan& p) {
  Status st = verifyPlanSteps(p);
  return st.isOk() ? "ok" : st.message();
}

void addArena(plan::Plan& p, int64_t bytes) {
  plan::Arena* a = p.add_arenas();
  a->set_device("cpu");
  a->set_bytes(bytes);
}

// y = MatMul(x, w) with x: f32[2,3] (input), w: f32[3,4] (constant), y: f32[2,4].
plan::Plan matMulPlan() {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {2, 3}, 0);
  addConstant(p, "w", {3, 4}, 1, 1.f);
  addValue(p, "y", plan::Value::INTERMEDIATE, {2, 4}, 64);
  addStep(p, "MatMul", "cpu", {0, 1}, {2});
  p.add_inputs(0);
  p.add_outputs(2);
  addArena(p, 128);
  return p;
}

// r = Reshape(x, s) where s = Shape(x) is an intermediate: inference cannot know r's dims.
plan::Plan reshapeByShapePlan(std::vector<int64_t> rDims) {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {2, 3}, 0);
  plan::Value* s = addValue(p, "s", plan::Value::INTERMEDIATE, {2}, 64);
  s->set_dtype((int)DType::I64);
  addValue(p, "r", plan::Value::INTERMEDIATE, rDims, 128);
  addStep(p, "Shape", "cpu", {0}, {1});
  addStep(p, "Reshape", "cpu", {0, 1}, {2});
  p.add_inputs(0);
  p.add_outputs(2);
  addArena(p, 256);
  return p;
}

// y = Relu(x + b) as one fused elementwise step, x, b, y: f32[2,3].
plan::Plan fusedAddReluPlan() {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {2, 3}, 0);
  addConstant(p, "b", {2, 3}, 2, 1.f);
  addValue(p, "y", plan::Value::INTERMEDIATE, {2, 3}, 64);
  plan::Step* s = addFusedStep(p, "add_relu", "elementwise", {0, 1}, {2});
  plan::FusedBody* body = s->mutable_fused_body();
  addMember(body, "Add", {0, 1});
  addMember(body, "Relu", {-2});
  body->add_results(1);
  p.add_inputs(0);
  p.add_outputs(2);
  addArena(p, 128);
  return p;
}

TEST(PlanVerify, ValidHandMadePlansPass) {
  EXPECT_EQ(verifyError(matMulPlan()), "ok");
  EXPECT_EQ(verifyError(reshapeByShapePlan({3, 2})), "ok");
  EXPECT_EQ(verifyError(reshapeByShapePlan({1, 6})), "ok");
  EXPECT_EQ(verifyError(fusedAddReluPlan()), "ok");
  EXPECT_EQ(verifyError(twoHostDevicePlan({2, 8}, 1.f, kPlanVersion)), "ok");
}

TEST(PlanVerify, DeclaredResultMustBeTheInferredOne) {
  plan::Plan p = matMulPlan();
  p.mutable_values(2)->set_dims(1, 5);
  EXPECT_EQ(verifyError(p), "plan step 0 (MatMul 'MatMul1'): result 0 (value 'y') is declared "
                            "f32[2,5] but its operands and attributes give f32[2,4]");
  p = matMulPlan();
  p.mutable_values(2)->set_dtype((int)DType::F64);
  EXPECT_NE(verifyError(p).find("is declared f64[2,4] but its operands and attributes give f32[2,4]"),
            std::string::npos);
}

TEST(PlanVerify, OperandCountAndDTypesFollowTheOpsRules) {
  plan::Plan p = matMulPlan();
  p.mutable_steps(0)->add_inputs(1);
  EXPECT_EQ(verifyError(p), "plan step 0 (MatMul 'MatMul1'): MatMul expects 2 inputs, got 3");
  p = matMulPlan();
  p.mutable_values(1)->set_dtype((int)DType::I64);  // the constant's bytes are the loader's
  EXPECT_EQ(verifyError(p), "plan step 0 (MatMul 'MatMul1'): input 1: value 'w': constant data does "
                            "not match its declared type");
  p = matMulPlan();
  p.mutable_values(0)->set_dtype((int)DType::I64);
  EXPECT_EQ(verifyError(p), "plan step 0 (MatMul 'MatMul1'): input 1 (B) has dtype f32 but input 0 "
                            "(A) has i64");
  // Gather's indices are i32 or i64: the constant w as indices is refused.
  p = matMulPlan();
  p.mutable_steps(0)->set_op_type("Gather");
  EXPECT_EQ(verifyError(p), "plan step 0 (Gather 'MatMul1'): input 1 (indices) has dtype f32 but "
                            "must be one of i32, i64");
}

// A reshape keeps its input's element count even where a shape operand is not constant.
TEST(PlanVerify, ReshapeByARunTimeShapeKeepsTheElementCount) {
  EXPECT_EQ(verifyError(reshapeByShapePlan({3, 3})),
            "plan step 1 (Reshape 'Reshape2'): result 0 (value 'r') f32[3,3] has 9 elements but "
            "input 0 f32[2,3] has 6");
  // The rank is known from s's length, so a rank-3 result is refused by inference itself.
  EXPECT_NE(verifyError(reshapeByShapePlan({1, 2, 3})).find("is declared f32[1,2,3] but"),
            std::string::npos);
}

TEST(PlanVerify, IdsResolveAndEachIntermediateHasOneEarlierWriter) {
  plan::Plan p = reshapeByShapePlan({3, 2});
  p.mutable_steps(1)->set_outputs(0, 1);  // the Reshape writes s, which Shape wrote
  EXPECT_EQ(verifyError(p), "plan step 1 (Reshape 'Reshape2'): output 0 writes value 's', which "
                            "plan step 0 writes");
  p = reshapeByShapePlan({3, 2});
  p.mutable_steps()->SwapElements(0, 1);
  EXPECT_EQ(verifyError(p), "plan step 0 (Reshape 'Reshape2'): input 1 reads value 's', which no "
                            "earlier step writes");
  p = matMulPlan();
  p.mutable_steps(0)->set_inputs(1, -7);
  EXPECT_EQ(verifyError(p), "plan step 0 (MatMul 'MatMul1'): input 1 refers to value id -7, which "
                            "does not exist");
  p = matMulPlan();
  p.mutable_steps(0)->set_outputs(0, 0);
  EXPECT_EQ(verifyError(p), "plan step 0 (MatMul 'MatMul1'): output 0 writes value 'x', which is "
                            "not an intermediate");
}

TEST(PlanVerify, CopyKeepsItsType) {
  plan::Plan p = twoHostDevicePlan({2, 8}, 1.f, kPlanVersion);
  p.mutable_values(2)->set_dims(1, 4);  // r1: f32[2,4] from r: f32[2,8]
  EXPECT_EQ(verifyError(p), "plan step 1 (Copy 'Copy2'): copies value 'r' f32[2,8] to value 'r1' "
                            "f32[2,4]; a copy keeps the type");
  p = twoHostDevicePlan({2, 8}, 1.f, kPlanVersion);
  p.mutable_steps(1)->add_inputs(0);
  EXPECT_NE(verifyError(p).find("a copy has one present input and one output, not 2 and 1"),
            std::string::npos);
}

TEST(PlanVerify, FusedMembersAreVerifiedLikeSteps) {
  plan::Plan p = fusedAddReluPlan();
  plan::FusedBody* body = p.mutable_steps(0)->mutable_fused_body();
  body->mutable_members(0)->mutable_inputs(1)->set_member(1);  // Add reads the Relu after it
  EXPECT_EQ(verifyError(p), "plan step 0 (Fused 'add_relu'): body member 0 (Add): input 1 reads "
                            "member 1, which is not an earlier one");
  p = fusedAddReluPlan();
  body = p.mutable_steps(0)->mutable_fused_body();
  for (int64_t d : {3, 2}) body->mutable_members(0)->mutable_shape()->add_dims(d);
  EXPECT_EQ(verifyError(p), "plan step 0 (Fused 'add_relu'): body member 0 (Add): its result is "
                            "declared f32[3,2] but its operands and attributes give f32[2,3]");
  p = fusedAddReluPlan();
  p.mutable_steps(0)->mutable_fused_body()->add_results(0);
  EXPECT_EQ(verifyError(p), "plan step 0 (Fused 'add_relu'): the body has 2 results for the step's "
                            "1 outputs");
  p = fusedAddReluPlan();
  p.mutable_steps(0)->mutable_fused_body()->mutable_members(1)->set_op_type("Fused");
  EXPECT_NE(verifyError(p).find("body member 1 (Fused): unknown op type 'Fused'"), std::string::npos);
  p = fusedAddReluPlan();
  p.mutable_steps(0)->clear_fused_body();
  EXPECT_EQ(verifyError(p), "plan step 0 (Fused 'add_relu'): a fused step has no body (Step.fused_body)");
}

TEST(PlanVerify, AttributesInRange) {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {2, 3}, 0);
  addValue(p, "y", plan::Value::INTERMEDIATE, {2, 3}, 64);
  plan::Step* s = addStep(p, "Softmax", "cpu", {0}, {1});
  attrToPlan("axis", Attr::ofInt(2), s->add_attrs());
  p.add_inputs(0);
  p.add_outputs(1);
  addArena(p, 128);
  EXPECT_EQ(verifyError(p), "plan step 0 (Softmax 'Softmax1'): attribute axis 2 is out of range "
                            "[-2, 1] for a rank-2 input");
  s->mutable_attrs(0)->set_i(-1);
  EXPECT_EQ(verifyError(p), "ok");
}

// Executable::load runs the verifier after binding values and before any arena or kernel.
TEST(PlanVerify, LoadRefusesAMalformedStepNamingIt) {
  plan::Plan p = matMulPlan();
  std::unique_ptr<Executable> exe;
  LoadOptions opts;
  opts.tuning = TuningMode::Off;
  ASSERT_TRUE(Executable::load(p, opts, &exe).isOk());
  p.mutable_values(1)->set_dims(0, 4);
  p.mutable_values(1)->mutable_constant()->set_dims(0, 4);
  p.mutable_values(1)->mutable_constant()->mutable_raw()->append(16, '\0');
  Status st = Executable::load(p, opts, &exe);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.message(), "plan step 0 (MatMul 'MatMul1'): input 0 (A) shape [2,3] and input 1 (B) "
                          "shape [4,4] have mismatched inner dims 3 vs 4");
}

}  // namespace
}  // namespace tandem
