// The CPU backend's queues (runtime/Backend.h createCpuBackend): inline (the calling thread) and
// worker (a thread of its own, like a CUDA stream): ordering through events across two host
// backends, errors reported by synchronize() with the kernels after them skipped, and no wait
// that hangs after a failure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/Backend.h"

using namespace tandem;

namespace {

// Sleeps, then writes `value` to `*slot` (or fails): slow enough that a missing wait shows.
class WriteKernel : public Kernel {
 public:
  WriteKernel(std::atomic<int>* slot, int value, bool fail = false, int sleepMs = 20)
      : slot_(slot), value_(value), fail_(fail), sleepMs_(sleepMs) {}
  Status run(const std::vector<const Tensor*>&, const std::vector<Tensor*>&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs_));
    if (fail_) return Status::error("write " + std::to_string(value_) + " failed");
    slot_->store(value_);
    ++runs;
    return Status::ok();
  }
  std::string implName() const override { return "test:write"; }
  int runs = 0;

 private:
  std::atomic<int>* slot_;
  int value_;
  bool fail_;
  int sleepMs_;
};

// Records what `*slot` held when it ran.
class ReadKernel : public Kernel {
 public:
  explicit ReadKernel(std::atomic<int>* slot) : slot_(slot) {}
  Status run(const std::vector<const Tensor*>&, const std::vector<Tensor*>&) override {
    seen = slot_->load();
    ++runs;
    return Status::ok();
  }
  std::string implName() const override { return "test:read"; }
  int seen = -1, runs = 0;

 private:
  std::atomic<int>* slot_;
};

}  // namespace

TEST(CpuBackend, InlineQueueRunsOnTheCallingThreadAndItsEventsHaveHappened) {
  auto cpu = createCpuBackend("cpu", 1);
  std::atomic<int> slot{0};
  WriteKernel w(&slot, 7, false, 0);
  ASSERT_TRUE(cpu->launch(w, {}, {}).isOk());
  EXPECT_EQ(slot.load(), 7);  // done when launch returned
  std::unique_ptr<Event> e;
  ASSERT_TRUE(cpu->createEvent(&e).isOk());
  ASSERT_TRUE(cpu->recordEvent(Queue::Compute, *e).isOk());
  EXPECT_TRUE(cpu->hostWait(*e).isOk());  // returns at once: nothing can be pending
  EXPECT_TRUE(cpu->synchronize().isOk());
}

TEST(CpuBackend, WorkerQueueReturnsBeforeTheWorkIsDoneAndSynchronizeWaits) {
  auto cpu = createCpuBackend("cpu:1", 1, 1);
  std::atomic<int> slot{0};
  WriteKernel w(&slot, 5, false, 50);
  ASSERT_TRUE(cpu->launch(w, {}, {}).isOk());
  EXPECT_EQ(slot.load(), 0);  // still sleeping on the worker thread
  ASSERT_TRUE(cpu->synchronize().isOk());
  EXPECT_EQ(slot.load(), 5);
}

TEST(CpuBackend, AnEventOrdersTwoWorkerQueues) {
  auto a = createCpuBackend("cpu", 1, 1);
  auto b = createCpuBackend("cpu:1", 1, 1);
  for (int round = 1; round <= 3; ++round) {  // events are reused across runs, as plans do
    std::atomic<int> slot{0};
    WriteKernel w(&slot, round, false, 30);
    ReadKernel r(&slot);
    std::unique_ptr<Event> e;
    ASSERT_TRUE(a->createEvent(&e).isOk());
    ASSERT_TRUE(a->launch(w, {}, {}).isOk());
    ASSERT_TRUE(a->recordEvent(Queue::Compute, *e).isOk());
    ASSERT_TRUE(b->waitEvent(Queue::Compute, *e).isOk());
    ASSERT_TRUE(b->launch(r, {}, {}).isOk());
    ASSERT_TRUE(b->synchronize().isOk());
    ASSERT_TRUE(a->synchronize().isOk());
    EXPECT_EQ(r.seen, round) << "the reader ran before the writer it waited for";
  }
}

TEST(CpuBackend, HostWaitBlocksUntilTheRecordedPointIsReached) {
  auto a = createCpuBackend("cpu", 1, 1);
  std::atomic<int> slot{0};
  WriteKernel w(&slot, 9, false, 40);
  std::unique_ptr<Event> e;
  ASSERT_TRUE(a->createEvent(&e).isOk());
  ASSERT_TRUE(a->launch(w, {}, {}).isOk());
  ASSERT_TRUE(a->recordEvent(Queue::Compute, *e).isOk());
  ASSERT_TRUE(a->hostWait(*e).isOk());
  EXPECT_EQ(slot.load(), 9);
  EXPECT_TRUE(a->synchronize().isOk());
}

TEST(CpuBackend, AFailedKernelIsReportedOnceAndTheKernelsAfterItAreSkipped) {
  auto a = createCpuBackend("cpu", 1, 1);
  auto b = createCpuBackend("cpu:1", 1, 1);
  std::atomic<int> slot{0};
  WriteKernel bad(&slot, 1, true, 10);
  WriteKernel after(&slot, 2, false, 0);
  ReadKernel r(&slot);
  std::unique_ptr<Event> e;
  ASSERT_TRUE(a->createEvent(&e).isOk());
  ASSERT_TRUE(a->launch(bad, {}, {}).isOk());
  ASSERT_TRUE(a->launch(after, {}, {}).isOk());
  ASSERT_TRUE(a->recordEvent(Queue::Compute, *e).isOk());
  // The other queue's wait is released even though the work before the event failed.
  ASSERT_TRUE(b->waitEvent(Queue::Compute, *e).isOk());
  ASSERT_TRUE(b->launch(r, {}, {}).isOk());
  EXPECT_TRUE(b->synchronize().isOk());
  EXPECT_EQ(r.runs, 1);
  Status st = a->synchronize();
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("write 1 failed"), std::string::npos) << st.message();
  EXPECT_EQ(after.runs, 0);
  EXPECT_EQ(slot.load(), 0);
  // Reported once: the queue works again afterwards.
  ASSERT_TRUE(a->launch(after, {}, {}).isOk());
  EXPECT_TRUE(a->synchronize().isOk());
  EXPECT_EQ(slot.load(), 2);
}

TEST(CpuBackend, WorkerQueueCopiesRunInOrderWithItsKernels) {
  auto a = createCpuBackend("cpu", 1, 1);
  std::atomic<int> slot{0};
  WriteKernel w(&slot, 3, false, 30);
  int src = 42, dst = 0;
  ASSERT_TRUE(a->launch(w, {}, {}).isOk());
  ASSERT_TRUE(a->copyOnDevice(Queue::Compute, &dst, &src, sizeof src).isOk());
  ASSERT_TRUE(a->synchronize().isOk());
  EXPECT_EQ(dst, 42);
  EXPECT_EQ(slot.load(), 3);
}
