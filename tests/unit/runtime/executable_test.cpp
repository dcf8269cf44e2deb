// Executor tests on hand-built plans: results, input checks, malformed plans, device checks.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/Backend.h"
#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"
#include "plan_test_util.h"

using namespace tandem;

namespace {

// y = Relu(x + b), x: f32[2,3] input, b: f32[3] constant. Arena: x@0, t@64, y@0 would alias x
// while x is read, so the plan puts y at 128.
plan::Plan addReluPlan() {
  plan::Plan p;
  p.set_version(kPlanVersion);
  addValue(p, "x", plan::Value::INPUT, {2, 3}, 0);
  plan::Value* b = addValue(p, "b", plan::Value::CONSTANT, {3});
  b->mutable_constant()->set_dtype((int)DType::F32);
  b->mutable_constant()->add_dims(3);
  float bv[3] = {-1.f, 0.f, 1.f};
  b->mutable_constant()->set_raw(std::string((const char*)bv, sizeof bv));
  addValue(p, "t", plan::Value::INTERMEDIATE, {2, 3}, 64);
  addValue(p, "y", plan::Value::INTERMEDIATE, {2, 3}, 128);
  plan::Step* add = p.add_steps();
  add->set_op_type("Add");
  add->set_name("add");
  add->set_device("cpu");
  add->add_inputs(0);
  add->add_inputs(1);
  add->add_outputs(2);
  plan::Step* relu = p.add_steps();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->set_device("cpu");
  relu->add_inputs(2);
  relu->add_outputs(3);
  p.add_inputs(0);
  p.add_outputs(3);
  plan::Arena* a = p.add_arenas();
  a->set_device("cpu");
  a->set_bytes(192);
  return p;
}

Tensor input23() { return Tensor::fromVector<float>({2, 3}, {0.5f, -2.f, 3.f, 2.f, 0.f, -4.f}); }

}  // namespace

TEST(Executable, RunsAPlanAndReusesIt) {
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(addReluPlan(), LoadOptions{1}, &exe).isOk());
  ASSERT_EQ(exe->inputNames(), std::vector<std::string>{"x"});
  ASSERT_EQ(exe->outputTypes()[0].shape, (Shape{2, 3}));
  for (int run = 0; run < 2; ++run) {
    std::vector<Tensor> out;
    RunStats stats;
    Status st = exe->run({input23()}, &out, &stats, /*profile=*/true);
    ASSERT_TRUE(st.isOk()) << st.message();
    ASSERT_EQ(out.size(), 1u);
    const float* y = out[0].data<float>();
    float want[6] = {0.f, 0.f, 4.f, 1.f, 0.f, 0.f};
    for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
    ASSERT_EQ(stats.steps.size(), 2u);
    EXPECT_EQ(stats.steps[1].opType, "Relu");
    EXPECT_GT(stats.seconds, 0);
  }
}

TEST(Executable, OutputsAreOwnedCopiesNotArenaViews) {
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(addReluPlan(), LoadOptions{1}, &exe).isOk());
  std::vector<Tensor> first, second;
  ASSERT_TRUE(exe->run({input23()}, &first).isOk());
  ASSERT_TRUE(exe->run({Tensor::fromVector<float>({2, 3}, {9, 9, 9, 9, 9, 9})}, &second).isOk());
  EXPECT_FLOAT_EQ(first[0].data<float>()[2], 4.f);  // not overwritten by the second run
  EXPECT_FLOAT_EQ(second[0].data<float>()[2], 10.f);
}

TEST(Executable, RejectsWrongInputDtypeAndShape) {
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(addReluPlan(), LoadOptions{1}, &exe).isOk());
  std::vector<Tensor> out;
  Status st = exe->run({Tensor::fromVector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})}, &out);
  EXPECT_EQ(st.message(), "input 'x': expected f32[2,3], got i64[2,3]");
  st = exe->run({Tensor::fromVector<float>({3, 2}, {1, 2, 3, 4, 5, 6})}, &out);
  EXPECT_EQ(st.message(), "input 'x': expected f32[2,3], got f32[3,2]");
  st = exe->run({}, &out);
  EXPECT_EQ(st.message(), "expected 1 inputs, got 0");
}

TEST(Executable, RejectsMalformedPlans) {
  std::unique_ptr<Executable> exe;
  plan::Plan p = addReluPlan();
  p.mutable_steps(1)->set_inputs(0, 42);
  Status st = Executable::load(p, LoadOptions{1}, &exe);
  EXPECT_NE(st.message().find("plan step 1 (Relu 'relu'): input 0 refers to value id 42"), std::string::npos)
      << st.message();

  p = addReluPlan();
  p.set_version(7);
  EXPECT_NE(Executable::load(p, LoadOptions{1}, &exe).message().find("plan version 7 was written by a newer tandem"),
            std::string::npos);
  p.set_version(1);
  EXPECT_EQ(Executable::load(p, LoadOptions{1}, &exe).message(),
            "plan version 1 was written by an older tandem; recompile the model");

  p = addReluPlan();
  p.mutable_values(3)->set_arena_offset(180);  // 24 bytes at 180 overrun the 192-byte arena
  st = Executable::load(p, LoadOptions{1}, &exe);
  EXPECT_NE(st.message().find("value 'y': arena slot"), std::string::npos) << st.message();

  p = addReluPlan();
  p.mutable_values(1)->mutable_constant()->set_raw("abc");
  st = Executable::load(p, LoadOptions{1}, &exe);
  EXPECT_NE(st.message().find("value 'b': has 3 bytes, expected 12"), std::string::npos) << st.message();

  p = addReluPlan();
  p.mutable_steps(0)->set_op_type("NoSuchOp");
  st = Executable::load(p, LoadOptions{1}, &exe);
  EXPECT_NE(st.message().find("plan step 0 (NoSuchOp 'add'): unknown op type 'NoSuchOp'"), std::string::npos)
      << st.message();
}

TEST(Executable, RefusesDevicesThatAreNotPresent) {
  std::unique_ptr<Executable> exe;
  plan::Plan p = addReluPlan();
  p.mutable_steps(1)->set_device("tpu:0");
  Status st = Executable::load(p, LoadOptions{1}, &exe);
  EXPECT_NE(st.message().find("placed on 'tpu:0', which is not present"), std::string::npos)
      << st.message();
  p = addReluPlan();
  p.mutable_steps(1)->set_device("cuda:0");
  LoadOptions strict{1};
  strict.deviceFallback = false;
  st = Executable::load(p, strict, &exe);
  EXPECT_NE(st.message().find("placed on 'cuda:0', which is not present"), std::string::npos)
      << st.message();
}

TEST(Executable, GpuStepsFallBackToTheCpuWithOneNote) {
  // relu on cuda:0 with its own arena, fed by a copy: the plan a GPU target produces.
  plan::Plan p = addReluPlan();
  p.mutable_values(3)->set_device("cuda:0");
  p.mutable_values(3)->set_arena_offset(0);
  p.mutable_steps(1)->set_device("cuda:0");
  plan::Arena* a = p.add_arenas();
  a->set_device("cuda:0");
  a->set_bytes(64);
  // Where a GPU is live this plan is not a fallback (and reads a CPU value on the GPU without a
  // copy, which load refuses): the fallback is what this test is about.
  std::unique_ptr<DeviceBackend> gpu;
  Status why = createCudaBackend(0, BackendOptions{}, &gpu);
  if (why.isOk()) GTEST_SKIP() << "a CUDA device is present";
  gpu.reset();
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(p, LoadOptions{1}, &exe);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_EQ(exe->notes().size(), 1u);
  // The reason is the backend's: not built, no driver, or no device.
  EXPECT_EQ(exe->notes()[0], "cuda:0 is not available (" + why.message() + "): its steps run on the CPU");
  if (!cudaBackendBuilt())
    EXPECT_EQ(exe->notes()[0],
              "cuda:0 is not available (this build has no CUDA backend): its steps run on the CPU");
  else
    EXPECT_TRUE(why.message().rfind("no CUDA driver: cudaGetDeviceCount: ", 0) == 0 ||
                why.message().rfind("no CUDA device", 0) == 0)
        << why.message();
  std::vector<Tensor> out;
  ASSERT_TRUE(exe->run({input23()}, &out).isOk());
  EXPECT_FLOAT_EQ(out[0].data<float>()[2], 4.f);
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 0.f);
}

TEST(Executable, GraphOutputMayBeAConstantOrAnInput) {
  plan::Plan p = addReluPlan();
  p.add_outputs(1);  // the constant b
  p.add_outputs(0);  // the input x
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(p, LoadOptions{1}, &exe).isOk());
  std::vector<Tensor> out;
  ASSERT_TRUE(exe->run({input23()}, &out).isOk());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FLOAT_EQ(out[1].data<float>()[2], 1.f);
  EXPECT_FLOAT_EQ(out[2].data<float>()[1], -2.f);
}

// Constants a kernel prepacked at creation and that nothing else reads are dropped after load
// (Kernel::consumesConstant): MatMul's weights go, the bias an Add reads each run stays, and a
// constant that is also a graph output stays. The results are those of the weights as given.
TEST(Executable, DropsConstantsOnlyPrepackingKernelsRead) {
  for (bool wIsOutput : {false, true}) {
    plan::Plan p;
    p.set_version(kPlanVersion);
    addValue(p, "x", plan::Value::INPUT, {4, 8}, 0);
    addConstant(p, "w", {8, 16}, 3, 1.f);
    addConstant(p, "b", {16}, 4, 1.f);
    addValue(p, "y", plan::Value::INTERMEDIATE, {4, 16}, 128);
    addValue(p, "z", plan::Value::INTERMEDIATE, {4, 16}, 384);
    p.add_inputs(0);
    addStep(p, "MatMul", "cpu", {0, 1}, {3});
    addStep(p, "Add", "cpu", {3, 2}, {4});
    p.add_outputs(4);
    if (wIsOutput) p.add_outputs(1);
    plan::Arena* a = p.add_arenas();
    a->set_device("cpu");
    a->set_bytes(640);
    std::unique_ptr<Executable> exe;
    Status st = Executable::load(p, LoadOptions{1}, &exe);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_EQ(exe->constantBytes(), wIsOutput ? (8 * 16 + 16) * 4 : 16 * 4) << "w output " << wIsOutput;
    Tensor x = Tensor::alloc(DType::F32, {4, 8});
    for (int i = 0; i < 32; ++i) x.data<float>()[i] = 0.25f * (i % 7) - 0.5f;
    std::vector<Tensor> out;
    ASSERT_TRUE(exe->run({x}, &out).isOk());
    const std::string& wb = p.values(1).constant().raw();
    const std::string& bb = p.values(2).constant().raw();
    const float* w = reinterpret_cast<const float*>(wb.data());
    const float* b = reinterpret_cast<const float*>(bb.data());
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 16; ++j) {
        double acc = b[j];
        for (int k = 0; k < 8; ++k) acc += double(x.data<float>()[i * 8 + k]) * w[k * 16 + j];
        EXPECT_NEAR(out[0].data<float>()[i * 16 + j], acc, 1e-5) << i << ", " << j;
      }
    if (wIsOutput) {
      EXPECT_EQ(std::memcmp(out[1].raw(), w, 8 * 16 * 4), 0);
    }
  }
}

// A host input only host steps read is read in place from the caller's 64-byte aligned buffer
// (Executable::run, inputReadInPlace): a step planned in place over it writes the arena, never
// the caller's bytes; an unaligned buffer is copied as before. The plan puts Add's result t at
// x's offset (x's last use), so a run that wrote through the input would change the caller's
// tensor and, the next run, its own result.
TEST(Executable, InputReadInPlaceIsNeverWritten) {
  plan::Plan p = addReluPlan();
  p.mutable_values(2)->set_arena_offset(0);  // t over x
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(p, LoadOptions{1}, &exe).isOk());
  const float want[6] = {0.f, 0.f, 4.f, 1.f, 0.f, 0.f};
  Tensor aligned = input23();
  ASSERT_EQ(reinterpret_cast<uintptr_t>(aligned.raw()) % 64, 0u);
  // An unaligned view of the same values: 4 bytes into a larger buffer.
  Tensor backing = Tensor::alloc(DType::F32, {7});
  Tensor unaligned = Tensor::view(DType::F32, {2, 3}, backing.data<float>() + 1);
  std::memcpy(unaligned.raw(), aligned.raw(), aligned.bytes());
  for (Tensor* in : {&aligned, &unaligned, &aligned}) {
    std::vector<Tensor> out;
    ASSERT_TRUE(exe->run({*in}, &out).isOk());
    for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out[0].data<float>()[i], want[i]) << i;
    for (int i = 0; i < 6; ++i)
      EXPECT_FLOAT_EQ(in->data<float>()[i], input23().data<float>()[i]) << "input changed at " << i;
  }
  // Another input after those: the slot is the caller's buffer for one run only.
  std::vector<Tensor> out;
  ASSERT_TRUE(exe->run({Tensor::fromVector<float>({2, 3}, {9, 9, 9, 9, 9, 9})}, &out).isOk());
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 8.f);
  EXPECT_FLOAT_EQ(out[0].data<float>()[2], 10.f);
}
