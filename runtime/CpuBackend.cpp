// The CPU backend: host memory and synchronous queues (a call returns when its work is done, so
// CPU events have always happened); kernels from the "cpu" registry entries.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/Backend.h"

namespace tandem {

namespace {

class CpuEvent : public Event {};

class CpuBackend : public DeviceBackend {
 public:
  CpuBackend(std::string device, int threads) : device_(std::move(device)), threads_(threads) {}
  ~CpuBackend() override {
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
    if (bytes && dst != src) std::memcpy(dst, src, bytes);
    return Status::ok();
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
    return k.run(inputs, outputs);
  }

  Status createEvent(std::unique_ptr<Event>* out) override {
    *out = std::make_unique<CpuEvent>();
    return Status::ok();
  }
  Status recordEvent(Queue, Event&) override { return Status::ok(); }
  Status waitEvent(Queue, Event&) override { return Status::ok(); }
  Status hostWait(Event&) override { return Status::ok(); }
  Status synchronize() override { return Status::ok(); }

 private:
  std::string device_, kind_ = "cpu";
  int threads_;
  mutable std::mutex mu_;
  std::map<void*, size_t> live_;
  size_t inUse_ = 0, peak_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBackend> createCpuBackend(const std::string& device, int threads) {
  return std::make_unique<CpuBackend>(device, threads);
}

}  // namespace tandem
