// A fake asynchronous GPU for tests (no GPU needed): its queues run work only when the host
// waits, and then in the worst order the waits allow (device-to-host first, compute last), so a
// missing event or a missing wait gives wrong numbers instead of a race on real hardware. Its
// kernels are the CPU's (its memory is host memory).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/Backend.h"
#include "runtime/Kernel.h"

namespace tandem::testing_fake {

struct FakeEvent : Event {
  int queue = -1;      // -1: never recorded (already "happened")
  size_t position = 0; // done when that queue has run this many operations
};

class FakeGpu : public DeviceBackend {
 public:
  explicit FakeGpu(std::string name) : name_(std::move(name)) {}
  ~FakeGpu() override {
    for (void* p : owned_) std::free(p);
  }
  const std::string& device() const override { return name_; }
  const std::string& kind() const override { return kind_; }
  bool isHost() const override { return false; }
  Status allocate(size_t bytes, const std::string&, void** out) override {
    *out = std::calloc(1, bytes + 1);
    owned_.push_back(*out);
    peak_ += bytes;
    return Status::ok();
  }
  void deallocate(void*) override {}
  size_t peakBytes() const override { return peak_; }
  Status allocateHost(size_t bytes, void** out) override { return allocate(bytes, "", out); }
  void deallocateHost(void*) override {}
  Status copyFromHost(void* dst, const void* src, size_t n) override { return enqueue(Queue::HostToDevice, copy(dst, src, n)); }
  Status copyToHost(void* dst, const void* src, size_t n) override {
    if (++copiesToHost == failCopyToHostAt) return Status::error("fake gpu: copy to host refused");
    return enqueue(Queue::DeviceToHost, copy(dst, src, n));
  }
  Status copyOnDevice(Queue q, void* dst, const void* src, size_t n) override { return enqueue(q, copy(dst, src, n)); }
  Status createKernel(KernelContext ctx, std::unique_ptr<Kernel>* out) override {
    return KernelRegistry::global().create("cpu", ctx, out);  // host memory: CPU kernels compute
  }
  Status finishLoad(const std::vector<Kernel*>&) override { return Status::ok(); }
  Status launch(Kernel& k, const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    ++launches;
    return enqueue(Queue::Compute, [&k, in, out] { k.run(in, out); return true; });
  }
  Status createEvent(std::unique_ptr<Event>* out) override {
    *out = std::make_unique<FakeEvent>();
    return Status::ok();
  }
  Status recordEvent(Queue q, Event& e) override {
    auto& fe = static_cast<FakeEvent&>(e);
    fe.queue = (int)q;
    fe.position = enqueued_[(int)q];
    ++records;
    return Status::ok();
  }
  Status waitEvent(Queue q, Event& e) override {
    auto* fe = dynamic_cast<FakeEvent*>(&e);
    if (!fe || fe->queue < 0) return Status::ok();
    FakeGpu* owner = this;  // every fake event in these tests comes from this device
    int eq = fe->queue;
    size_t pos = fe->position;
    ++waits;
    return enqueue(q, [owner, eq, pos] { return owner->done_[eq] >= pos; });
  }
  Status hostWait(Event& e) override {
    auto& fe = static_cast<FakeEvent&>(e);
    ++hostWaits;
    while (fe.queue >= 0 && done_[fe.queue] < fe.position)
      if (!step()) return Status::error("fake gpu: deadlock waiting for an event");
    return Status::ok();
  }
  Status synchronize() override {
    while (step()) {}
    for (int q = 0; q < 3; ++q)
      if (!queues_[q].empty()) return Status::error("fake gpu: deadlock (a queue waits for an event never reached)");
    return Status::ok();
  }
  int launches = 0, records = 0, waits = 0, hostWaits = 0;
  int copiesToHost = 0, failCopyToHostAt = -1;  // the failCopyToHostAt-th copyToHost fails
  int pauseMicros = 0;                  // each enqueue sleeps this long (concurrency tests)
  std::atomic<bool> overlapped{false};  // two host threads were in enqueue at once
  /// Operations enqueued and not yet run: 0 when the device is idle.
  size_t pending() const { return queues_[0].size() + queues_[1].size() + queues_[2].size(); }

 private:
  using Op = std::function<bool()>;  // returns false while it must wait
  static Op copy(void* dst, const void* src, size_t n) {
    return [=] { std::memcpy(dst, src, n); return true; };
  }
  Status enqueue(Queue q, Op op) {
    // Host threads overlapping in the device's queues: flagged, and made likely by a pause.
    if (++entered_ > 1) overlapped = true;
    if (pauseMicros) std::this_thread::sleep_for(std::chrono::microseconds(pauseMicros));
    --entered_;
    queues_[(int)q].push_back(std::move(op));
    ++enqueued_[(int)q];
    return Status::ok();
  }
  // Runs one operation, trying device-to-host first and compute last; false if none can run.
  bool step() {
    for (int q : {2, 1, 0}) {
      if (queues_[q].empty()) continue;
      if (!queues_[q].front()()) continue;
      queues_[q].pop_front();
      ++done_[q];
      return true;
    }
    return false;
  }
  std::string name_, kind_ = "cuda";
  std::deque<Op> queues_[3];
  std::atomic<int> entered_{0};
  size_t enqueued_[3] = {0, 0, 0}, done_[3] = {0, 0, 0};
  std::vector<void*> owned_;
  size_t peak_ = 0;
};

/// A LoadOptions::backendFactory that makes a FakeGpu for every non-host device and, when
/// `made` is not null, points *made at the last one.
inline std::function<Status(const std::string&, std::unique_ptr<DeviceBackend>*)> fakeGpuFactory(
    FakeGpu** made = nullptr) {
  return [made](const std::string& dev, std::unique_ptr<DeviceBackend>* out) {
    auto g = std::make_unique<FakeGpu>(dev);
    if (made) *made = g.get();
    *out = std::move(g);
    return Status::ok();
  };
}

}  // namespace tandem::testing_fake
