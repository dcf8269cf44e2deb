// The CPU backend: host memory, kernels from the "cpu" registry entries, and one in-order queue
// that is either the calling thread or a worker thread of its own (createCpuBackend).
#include <omp.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/Backend.h"

namespace tandem {

namespace {

// A host event: `recorded` counts the records made (by the thread that drives the plan, the only
// writer), `reached` how many of them the recording queue has passed. A wait captures the
// current record count and blocks until `reached` gets there, as cudaStreamWaitEvent waits for
// the most recent record.
class CpuEvent : public Event {
 public:
  uint64_t record() { return ++recorded_; }
  uint64_t lastRecord() const { return recorded_; }
  void reach(uint64_t n) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (n > reached_) reached_ = n;
    }
    cv_.notify_all();
  }
  void waitFor(uint64_t n) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return reached_ >= n; });
  }

 private:
  uint64_t recorded_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t reached_ = 0;
};

// The worker queue: tasks run in submission order on one thread whose OpenMP pool has its own
// size (OpenMP's thread count is per host thread). A failed kernel makes the queue skip the
// kernels after it until synchronize() reports the error; event tasks still run, so no other
// queue waits forever.
class WorkerQueue {
 public:
  explicit WorkerQueue(int threads) : threads_(threads), thread_([this] { loop(); }) {}
  ~WorkerQueue() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // `kernel`: skipped after a failure; otherwise always run.
  void submit(std::function<Status()> task, bool kernel) {
    {
      std::lock_guard<std::mutex> l(mu_);
      tasks_.push_back({std::move(task), kernel});
    }
    cv_.notify_all();
  }
  Status drain() {
    std::unique_lock<std::mutex> l(mu_);
    idle_.wait(l, [&] { return tasks_.empty() && !busy_; });
    Status st = error_;
    error_ = Status::ok();
    return st;
  }

 private:
  struct Task {
    std::function<Status()> fn;
    bool kernel;
  };
  void loop() {
    if (threads_ > 0) omp_set_num_threads(threads_);
    for (;;) {
      Task t;
      bool skip;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        t = std::move(tasks_.front());
        tasks_.pop_front();
        busy_ = true;
        skip = t.kernel && !error_.isOk();
      }
      Status st = skip ? Status::ok() : t.fn();
      {
        std::lock_guard<std::mutex> l(mu_);
        if (!st.isOk() && error_.isOk()) error_ = st;
        busy_ = false;
      }
      idle_.notify_all();
    }
  }
  int threads_;
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<Task> tasks_;
  bool busy_ = false, stop_ = false;
  Status error_;
  std::thread thread_;
};

class CpuBackend : public DeviceBackend {
 public:
  CpuBackend(std::string device, int threads, int workerThreads)
      : device_(std::move(device)), threads_(threads) {
    if (workerThreads > 0) worker_ = std::make_unique<WorkerQueue>(workerThreads);
  }
  ~CpuBackend() override {
    worker_.reset();  // queued work first, then the memory it used
    for (auto& p : live_) std::free(p.first);
  }

  const std::string& device() const override { return device_; }
  const std::string& kind() const override { return kind_; }
  bool isHost() const override { return true; }

  Status allocate(size_t bytes, const std::string& forWhat, void** out) override {
    size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p)
      return Status::error("out of memory on " + device_ + ": " + forWhat + " asked for " +
                           std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded);
    std::lock_guard<std::mutex> l(mu_);
    live_[p] = bytes;
    inUse_ += bytes;
    peak_ = std::max(peak_, inUse_);
    *out = p;
    return Status::ok();
  }
  void deallocate(void* p) override {
    if (!p) return;
    std::lock_guard<std::mutex> l(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return;
    inUse_ -= it->second;
    live_.erase(it);
    std::free(p);
  }
  size_t peakBytes() const override {
    std::lock_guard<std::mutex> l(mu_);
    return peak_;
  }
  Status allocateHost(size_t bytes, void** out) override { return allocate(bytes, "host buffer", out); }
  void deallocateHost(void* p) override { deallocate(p); }

  Status copyFromHost(void* dst, const void* src, size_t bytes) override {
    return run([=] {
      if (bytes && dst != src) std::memcpy(dst, src, bytes);
      return Status::ok();
    }, false);
  }
  Status copyToHost(void* dst, const void* src, size_t bytes) override {
    return copyFromHost(dst, src, bytes);
  }
  Status copyOnDevice(Queue, void* dst, const void* src, size_t bytes) override {
    return copyFromHost(dst, src, bytes);
  }

  Status createKernel(KernelContext ctx, std::unique_ptr<Kernel>* out) override {
    ctx.threads = threads_;
    return KernelRegistry::global().create("cpu", ctx, out);
  }
  Status finishLoad(const std::vector<Kernel*>& kernels) override {
    for (Kernel* k : kernels) TANDEM_RETURN_IF_ERROR(k->prepare());
    return Status::ok();
  }
  Status launch(Kernel& k, const std::vector<const Tensor*>& inputs,
                const std::vector<Tensor*>& outputs) override {
    if (!worker_) return k.run(inputs, outputs);
    return run([&k, inputs, outputs] { return k.run(inputs, outputs); }, true);
  }

  Status createEvent(std::unique_ptr<Event>* out) override {
    *out = std::make_unique<CpuEvent>();
    return Status::ok();
  }
  Status recordEvent(Queue, Event& e) override {
    auto* ce = dynamic_cast<CpuEvent*>(&e);
    if (!ce) return Status::error(device_ + ": recordEvent with another backend's event");
    uint64_t n = ce->record();
    return run([ce, n] {
      ce->reach(n);
      return Status::ok();
    }, false);
  }
  Status waitEvent(Queue, Event& e) override {
    // Another family's event (a GPU's): the executor waits for it on the host (Backend.h).
    auto* ce = dynamic_cast<CpuEvent*>(&e);
    if (!ce) return Status::ok();
    uint64_t n = ce->lastRecord();
    return run([ce, n] {
      ce->waitFor(n);
      return Status::ok();
    }, false);
  }
  Status hostWait(Event& e) override {
    if (auto* ce = dynamic_cast<CpuEvent*>(&e)) ce->waitFor(ce->lastRecord());
    return Status::ok();
  }
  Status synchronize() override { return worker_ ? worker_->drain() : Status::ok(); }

 private:
  std::string device_, kind_ = "cpu";
  // On the worker queue when there is one, else now on the calling thread.
  Status run(std::function<Status()> task, bool kernel) {
    if (!worker_) return task();
    worker_->submit(std::move(task), kernel);
    return Status::ok();
  }

  int threads_;
  std::unique_ptr<WorkerQueue> worker_;
  mutable std::mutex mu_;
  std::map<void*, size_t> live_;
  size_t inUse_ = 0, peak_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBackend> createCpuBackend(const std::string& device, int threads,
                                                int workerThreads) {
  return std::make_unique<CpuBackend>(device, threads, workerThreads);
}

}  // namespace tandem
