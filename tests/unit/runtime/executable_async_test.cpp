// The executor's GPU path (streams, events, staging) against a fake asynchronous device that
// needs no GPU: its queues run work only when the host waits, and then in the worst order the
// waits allow (device-to-host first, compute last), so a missing event or a missing wait gives
// wrong numbers here instead of a race on real hardware.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <thread>

#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"
#include "tests/unit/runtime/fake_gpu.h"

using namespace tandem;
using tandem::testing_fake::FakeGpu;
using tandem::testing_fake::fakeGpuFactory;

namespace {

plan::Value* value(plan::Plan& p, const std::string& name, plan::Value::Kind kind, const std::string& dev, int64_t off) {
  plan::Value* v = p.add_values();
  v->set_id(p.values_size() - 1);
  v->set_name(name);
  v->set_dtype((int)DType::F32);
  v->add_dims(256);
  v->set_device(dev);
  v->set_kind(kind);
  v->set_arena_offset(off);
  v->set_bytes(1024);
  return v;
}

void step(plan::Plan& p, const std::string& op, const std::string& dev, std::vector<int> in, int out) {
  plan::Step* s = p.add_steps();
  s->set_op_type(op);
  s->set_name(op + std::to_string(p.steps_size()));
  s->set_device(dev);
  for (int i : in) s->add_inputs(i);
  s->add_outputs(out);
}

// x (cpu) -> copy to cuda:0 -> Relu -> Exp (cuda:0) -> copy to cpu -> Add(r, x) on the cpu.
// Graph outputs: y (cpu) and e (still on cuda:0, copied back at the end). The GPU arena reuses
// x_gpu's slot for e, so the Exp must wait for nobody but the Relu, and the second run's upload
// must not overwrite data the first run still reads.
plan::Plan crossingPlan() {
  plan::Plan p;
  p.set_version(kPlanVersion);
  value(p, "x", plan::Value::INPUT, "cpu", 0);            // 0
  value(p, "x_gpu", plan::Value::INTERMEDIATE, "cuda:0", 0);    // 1
  value(p, "r_gpu", plan::Value::INTERMEDIATE, "cuda:0", 1024); // 2
  value(p, "e_gpu", plan::Value::INTERMEDIATE, "cuda:0", 0);    // 3 (reuses x_gpu's slot)
  value(p, "e", plan::Value::INTERMEDIATE, "cpu", 1024);        // 4
  value(p, "y", plan::Value::INTERMEDIATE, "cpu", 2048);        // 5
  step(p, "Copy", "cuda:0", {0}, 1);
  step(p, "Relu", "cuda:0", {1}, 2);
  step(p, "Exp", "cuda:0", {2}, 3);
  step(p, "Copy", "cpu", {3}, 4);
  step(p, "Add", "cpu", {4, 0}, 5);
  p.add_inputs(0);
  p.add_outputs(5);
  p.add_outputs(2);
  for (auto [dev, bytes] : {std::pair<const char*, int>{"cpu", 3072}, {"cuda:0", 2048}}) {
    plan::Arena* a = p.add_arenas();
    a->set_device(dev);
    a->set_bytes(bytes);
  }
  return p;
}

TEST(ExecutableAsync, CrossDeviceResultsAreRightUnderTheWorstQueueOrder) {
  FakeGpu* gpu = nullptr;
  LoadOptions lo;
  lo.threads = 1;
  lo.backendFactory = fakeGpuFactory(&gpu);
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(crossingPlan(), lo, &exe);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_NE(gpu, nullptr);
  EXPECT_TRUE(exe->notes().empty());
  // Copies run on the link's queue, not as kernels.
  std::vector<std::string> impls = exe->stepImpls();
  ASSERT_EQ(impls.size(), 5u);
  EXPECT_EQ(impls[0], "copy-h2d");
  EXPECT_EQ(impls[3], "copy-d2h");
  for (int run = 0; run < 3; ++run) {
    Tensor x = Tensor::alloc(DType::F32, {256});
    for (int i = 0; i < 256; ++i) x.data<float>()[i] = (float)((i * 7 + run * 13) % 11) - 5.f;
    std::vector<Tensor> out;
    st = exe->run({x}, &out);
    ASSERT_TRUE(st.isOk()) << st.message();
    ASSERT_EQ(out.size(), 2u);
    for (int i = 0; i < 256; ++i) {
      float v = x.data<float>()[i], r = std::max(v, 0.f);
      ASSERT_FLOAT_EQ(out[0].data<float>()[i], std::exp(r) + v) << "run " << run << " element " << i;
      ASSERT_FLOAT_EQ(out[1].data<float>()[i], r) << "run " << run << " element " << i;
    }
  }
  // Two kernels per run on the device; the host waits only for the copy the CPU Add reads.
  EXPECT_EQ(gpu->launches, 6);
  EXPECT_EQ(gpu->hostWaits, 3);
  EXPECT_GT(gpu->waits, 0);
}

TEST(ExecutableAsync, ProfilingStillGivesRightResults) {
  LoadOptions lo;
  lo.threads = 1;
  lo.backendFactory = fakeGpuFactory();
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(crossingPlan(), lo, &exe).isOk());
  Tensor x = Tensor::alloc(DType::F32, {256});
  for (int i = 0; i < 256; ++i) x.data<float>()[i] = (float)(i % 5) - 2.f;
  std::vector<Tensor> out;
  RunStats stats;
  ASSERT_TRUE(exe->run({x}, &out, &stats, true).isOk());
  ASSERT_EQ(stats.steps.size(), 5u);
  EXPECT_EQ(stats.steps[1].device, "cuda:0");
  EXPECT_FLOAT_EQ(out[0].data<float>()[3], std::exp(1.f) + 1.f);
  // The streams a trace (runtime/Trace.h) puts each step on: the upload on the GPU's h2d queue,
  // the download on its d2h queue, kernels on compute; operand types with them.
  const char* const lanes[5] = {"cuda:0/h2d", "cuda:0/compute", "cuda:0/compute", "cuda:0/d2h", "cpu/compute"};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(stats.steps[i].streamDevice + "/" + stats.steps[i].queue, lanes[i]) << i;
    ASSERT_EQ(stats.steps[i].outputs.size(), 1u);
    EXPECT_EQ(stats.steps[i].outputs[0].shape, Shape{256});
    EXPECT_GE(stats.steps[i].start, i ? stats.steps[i - 1].start + stats.steps[i - 1].seconds : 0.0);
  }
  EXPECT_EQ(stats.steps[4].inputs.size(), 2u);
}

// Runs of a GPU plan share its queues, events and staging: concurrent callers take turns
// (Executable.h). The fake device is not thread-safe itself, so overlapping runs would corrupt
// its queues or mix up their inputs' staging and give wrong numbers here.
TEST(ExecutableAsync, ConcurrentCallersOfAGpuPlanTakeTurns) {
  FakeGpu* gpu = nullptr;
  LoadOptions lo;
  lo.threads = 1;
  lo.backendFactory = fakeGpuFactory(&gpu);
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(crossingPlan(), lo, &exe).isOk());
  gpu->pauseMicros = 20;
  std::atomic<int> wrong{0}, failed{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      while (!go) std::this_thread::yield();
      for (int run = 0; run < 25; ++run) {
        Tensor x = Tensor::alloc(DType::F32, {256});
        for (int i = 0; i < 256; ++i) x.data<float>()[i] = (float)((i * 7 + t * 5 + run * 13) % 11) - 5.f;
        std::vector<Tensor> out;
        if (!exe->run({x}, &out).isOk()) {
          failed++;
          continue;
        }
        for (int i = 0; i < 256; ++i) {
          float v = x.data<float>()[i], r = std::max(v, 0.f);
          // Within float rounding of the formula (the kernel's exp is not std::exp).
          float want = std::exp(r) + v;
          if (std::fabs(out[0].data<float>()[i] - want) > 1e-5f * std::max(1.f, std::fabs(want)) ||
              out[1].data<float>()[i] != r) {
            wrong++;
            break;
          }
        }
      }
    });
  go = true;
  for (std::thread& th : threads) th.join();
  EXPECT_FALSE(gpu->overlapped);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(gpu->launches, 2 * 100);
  EXPECT_EQ(gpu->pending(), 0u);
}

TEST(ExecutableAsync, AFailingDeviceIsTheFallbackNoteOrAnError) {
  plan::Plan p = crossingPlan();
  LoadOptions lo;
  lo.threads = 1;
  lo.backendFactory = [](const std::string&, std::unique_ptr<DeviceBackend>*) {
    return Status::error("no CUDA driver: test");
  };
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(p, lo, &exe).isOk());
  ASSERT_EQ(exe->notes().size(), 1u);
  EXPECT_EQ(exe->notes()[0], "cuda:0 is not available (no CUDA driver: test): its steps run on the CPU");
  Tensor x = Tensor::alloc(DType::F32, {256});
  x.data<float>()[0] = 2.f;
  std::vector<Tensor> out;
  ASSERT_TRUE(exe->run({x}, &out).isOk());
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], std::exp(2.f) + 2.f);
  lo.deviceFallback = false;
  Status st = Executable::load(p, lo, &exe);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("placed on 'cuda:0', which is not present (no CUDA driver: test"), std::string::npos)
      << st.message();
}

// A graph output on the GPU whose last writer is an upload step (H2D queue) that no kernel
// reads: its copy back must wait for the H2D queue, not only for the compute queue. Here the
// second upload reuses the slot the Relu read, so it waits for the Relu; once the compute queue
// drains, the worst order copies the output back before the upload unless the D2H waits for it.
TEST(ExecutableAsync, AnOutputWrittenByAnUploadStepIsCopiedBackAfterTheUpload) {
  plan::Plan p;
  p.set_version(kPlanVersion);
  value(p, "x", plan::Value::INPUT, "cpu", 0);                   // 0
  value(p, "x_gpu", plan::Value::INTERMEDIATE, "cuda:0", 0);     // 1
  value(p, "r_gpu", plan::Value::INTERMEDIATE, "cuda:0", 1024);  // 2
  value(p, "x2", plan::Value::INPUT, "cpu", 1024);               // 3
  value(p, "x2_gpu", plan::Value::INTERMEDIATE, "cuda:0", 0);    // 4 (x_gpu's slot, free after the Relu)
  step(p, "Copy", "cuda:0", {0}, 1);
  step(p, "Relu", "cuda:0", {1}, 2);
  step(p, "Copy", "cuda:0", {3}, 4);
  p.add_inputs(0);
  p.add_inputs(3);
  p.add_outputs(2);
  p.add_outputs(4);
  for (auto [dev, bytes] : {std::pair<const char*, int>{"cpu", 2048}, {"cuda:0", 2048}}) {
    plan::Arena* a = p.add_arenas();
    a->set_device(dev);
    a->set_bytes(bytes);
  }
  LoadOptions lo;
  lo.threads = 1;
  lo.backendFactory = fakeGpuFactory();
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(p, lo, &exe);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int run = 0; run < 3; ++run) {
    Tensor x = Tensor::alloc(DType::F32, {256}), x2 = Tensor::alloc(DType::F32, {256});
    for (int i = 0; i < 256; ++i) {
      x.data<float>()[i] = (float)(i + 1000 * run) - 100.f;
      x2.data<float>()[i] = (float)(3 * i + 7 * run + 1);
    }
    std::vector<Tensor> out;
    st = exe->run({x, x2}, &out);
    ASSERT_TRUE(st.isOk()) << st.message();
    ASSERT_EQ(out.size(), 2u);
    for (int i = 0; i < 256; ++i) {
      ASSERT_EQ(out[0].data<float>()[i], std::max(x.data<float>()[i], 0.f)) << "run " << run << " element " << i;
      ASSERT_EQ(out[1].data<float>()[i], x2.data<float>()[i]) << "run " << run << " element " << i;
    }
  }
}

// A run that fails after it enqueued device work still leaves every device idle, so the next
// run cannot refill staging or arena slots under a copy in flight; and the next run is right.
TEST(ExecutableAsync, AFailedRunLeavesTheDeviceIdle) {
  FakeGpu* gpu = nullptr;
  LoadOptions lo;
  lo.threads = 1;
  lo.backendFactory = fakeGpuFactory(&gpu);
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(crossingPlan(), lo, &exe).isOk());
  Tensor x = Tensor::alloc(DType::F32, {256});
  for (int i = 0; i < 256; ++i) x.data<float>()[i] = (float)(i % 9) - 4.f;
  std::vector<Tensor> out;
  // The run's copies to the host: the Copy step (1), then the GPU output r_gpu (2).
  gpu->copiesToHost = 0;
  gpu->failCopyToHostAt = 2;
  Status st = exe->run({x}, &out);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("copy to host refused"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("output 'r_gpu'"), std::string::npos) << st.message();
  EXPECT_EQ(gpu->pending(), 0u) << "the failed run returned with device work in flight";
  // A failing step: the same.
  gpu->copiesToHost = 0;
  gpu->failCopyToHostAt = 1;
  st = exe->run({x}, &out);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("Copy4"), std::string::npos) << st.message();
  EXPECT_EQ(gpu->pending(), 0u);
  gpu->failCopyToHostAt = -1;
  st = exe->run({x}, &out);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int i = 0; i < 256; ++i) {
    float v = x.data<float>()[i], r = std::max(v, 0.f);
    ASSERT_FLOAT_EQ(out[0].data<float>()[i], std::exp(r) + v) << i;
    ASSERT_FLOAT_EQ(out[1].data<float>()[i], r) << i;
  }
}


// A training step's shape on the GPU: x (cpu) uploaded, acc += x into a variable on cuda:0
// (in place, or copied back after the run), y = Relu(x) downloaded as the graph output.
plan::Plan accumulatePlan(bool inPlace) {
  plan::Plan p;
  p.set_version(kPlanVersion);
  value(p, "x", plan::Value::INPUT, "cpu", 0);                      // 0
  value(p, "x_gpu", plan::Value::INTERMEDIATE, "cuda:0", 0);        // 1
  plan::Value* acc = value(p, "acc", plan::Value::VARIABLE, "cuda:0", 0);  // 2
  plan::TensorData* init = acc->mutable_constant();
  init->set_dtype((int)DType::F32);
  init->add_dims(256);
  init->set_raw(std::string(1024, '\0'));
  acc->set_update(3);
  plan::Value* next = value(p, "acc_new", plan::Value::INTERMEDIATE, "cuda:0", 1024);  // 3
  if (inPlace) next->set_aliases_variable(2);
  value(p, "y_gpu", plan::Value::INTERMEDIATE, "cuda:0", 2048);     // 4
  value(p, "y", plan::Value::INTERMEDIATE, "cpu", 1024);            // 5
  step(p, "Copy", "cuda:0", {0}, 1);
  step(p, "Add", "cuda:0", {2, 1}, 3);
  step(p, "Relu", "cuda:0", {1}, 4);
  step(p, "Copy", "cpu", {4}, 5);
  p.add_inputs(0);
  p.add_outputs(5);
  for (auto [dev, bytes] : {std::pair<const char*, int>{"cpu", 2048}, {"cuda:0", 3072}}) {
    plan::Arena* a = p.add_arenas();
    a->set_device(dev);
    a->set_bytes(bytes);
  }
  return p;
}

LoadOptions fakeGpuOptions(FakeGpu** gpu) {
  LoadOptions lo;
  lo.threads = 1;
  lo.backendFactory = fakeGpuFactory(gpu);
  return lo;
}

float inputValue(int run, int i) { return (float)((i * 5 + run * 3) % 13) - 6.f; }

// enqueue() leaves the device working (nothing runs on the fake until the host waits), copies
// no output back, and the variable still sees every run in order under the worst queue order;
// the caller's input buffer is free once enqueue() returns.
TEST(ExecutableAsync, EnqueuedRunsReturnBeforeTheDeviceAndStayInOrder) {
  for (bool inPlace : {true, false}) {
    SCOPED_TRACE(inPlace ? "update in place" : "update copied back");
    FakeGpu* gpu = nullptr;
    std::unique_ptr<Executable> exe;
    Status st = Executable::load(accumulatePlan(inPlace), fakeGpuOptions(&gpu), &exe);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_TRUE(exe->isAsynchronous());
    std::vector<float> sum(256, 0.f);
    Tensor x = Tensor::alloc(DType::F32, {256});
    for (int run = 0; run < 4; ++run) {
      for (int i = 0; i < 256; ++i) {
        x.data<float>()[i] = inputValue(run, i);
        sum[i] += inputValue(run, i);
      }
      st = exe->enqueue({x});
      ASSERT_TRUE(st.isOk()) << st.message();
      EXPECT_GT(gpu->pending(), 0u) << "run " << run << ": enqueue() waited for the device";
      std::fill(x.data<float>(), x.data<float>() + 256, 1000.f);  // the buffer is the caller's again
    }
    EXPECT_EQ(gpu->copiesToHost, 0) << "an enqueued run copied its output back";
    EXPECT_EQ(gpu->launches, 8);
    Tensor acc;
    ASSERT_TRUE(exe->readVariable("acc", &acc).isOk());
    EXPECT_EQ(gpu->pending(), 0u);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(acc.data<float>()[i], sum[i]) << i;
    // A run after enqueued ones: ordered after them, with its output.
    for (int i = 0; i < 256; ++i) x.data<float>()[i] = inputValue(9, i);
    ASSERT_TRUE(exe->enqueue({x}).isOk());
    std::vector<Tensor> out;
    st = exe->run({x}, &out);
    ASSERT_TRUE(st.isOk()) << st.message();
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(exe->readVariable("acc", &acc).isOk());
    for (int i = 0; i < 256; ++i) {
      ASSERT_EQ(out[0].data<float>()[i], std::max(inputValue(9, i), 0.f)) << i;
      ASSERT_EQ(acc.data<float>()[i], sum[i] + 2 * inputValue(9, i)) << i;
    }
    // writeVariable and synchronize wait for an enqueued run too.
    ASSERT_TRUE(exe->enqueue({x}).isOk());
    ASSERT_TRUE(exe->writeVariable("acc", Tensor::alloc(DType::F32, {256})).isOk());
    ASSERT_TRUE(exe->readVariable("acc", &acc).isOk());
    EXPECT_EQ(acc.data<float>()[7], 0.f);
    ASSERT_TRUE(exe->enqueue({x}).isOk());
    ASSERT_TRUE(exe->synchronize().isOk());
    EXPECT_EQ(gpu->pending(), 0u);
    // Bad inputs issue nothing.
    st = exe->enqueue({Tensor::alloc(DType::F32, {255})});
    ASSERT_FALSE(st.isOk());
    EXPECT_NE(st.message().find("input 'x': expected f32[256], got f32[255]"), std::string::npos) << st.message();
  }
}

// allocateInput: pinned host memory the upload reads directly; enqueue() returns once that
// upload is done, so the caller can refill the buffer at once (a Prefetcher's next batch).
TEST(ExecutableAsync, APinnedInputIsUploadedStraightFromTheCallersBuffer) {
  FakeGpu* gpu = nullptr;
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(accumulatePlan(true), fakeGpuOptions(&gpu), &exe).isOk());
  Tensor x;
  Status st = exe->allocateInput(0, &x);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(x.dtype(), DType::F32);
  EXPECT_EQ(x.shape(), Shape{256});
  std::vector<float> sum(256, 0.f);
  for (int run = 0; run < 3; ++run) {
    for (int i = 0; i < 256; ++i) {
      x.data<float>()[i] = inputValue(run, i);
      sum[i] += inputValue(run, i);
    }
    ASSERT_TRUE(exe->enqueue({x}).isOk());
    std::fill(x.data<float>(), x.data<float>() + 256, -1000.f);
  }
  // A view into the buffer counts too (a Prefetcher's short last batch).
  for (int i = 0; i < 256; ++i) x.data<float>()[i] = inputValue(5, i);
  std::vector<Tensor> out;
  ASSERT_TRUE(exe->run({Tensor::view(DType::F32, {256}, x.raw())}, &out).isOk());
  Tensor acc;
  ASSERT_TRUE(exe->readVariable("acc", &acc).isOk());
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(acc.data<float>()[i], sum[i] + inputValue(5, i)) << i;
    ASSERT_EQ(out[0].data<float>()[i], std::max(inputValue(5, i), 0.f)) << i;
  }
  st = exe->allocateInput(1, &x);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("no input 1"), std::string::npos) << st.message();
}

// A plan with host steps (here the CPU fallback of cuda:0) is not asynchronous: enqueue() runs
// it to completion.
TEST(ExecutableAsync, EnqueueOnAHostPlanRunsToCompletion) {
  LoadOptions lo;
  lo.threads = 1;
  lo.backendFactory = [](const std::string&, std::unique_ptr<DeviceBackend>*) {
    return Status::error("no CUDA driver: test");
  };
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(accumulatePlan(true), lo, &exe).isOk());
  EXPECT_FALSE(exe->isAsynchronous());
  Tensor x;
  ASSERT_TRUE(exe->allocateInput(0, &x).isOk());  // ordinary memory: nothing to pin for
  for (int i = 0; i < 256; ++i) x.data<float>()[i] = inputValue(1, i);
  ASSERT_TRUE(exe->enqueue({x}).isOk());
  ASSERT_TRUE(exe->enqueue({x}).isOk());
  Tensor acc;
  ASSERT_TRUE(exe->readVariable("acc", &acc).isOk());
  for (int i = 0; i < 256; ++i) ASSERT_EQ(acc.data<float>()[i], 2 * inputValue(1, i)) << i;
}

}  // namespace
