// The CUDA backend: discovery through the runtime API (static cudart, no libcuda link), the
// per-device caching arena, three streams per device (compute, H2D, D2H), events, and kernels.

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "runtime/Backend.h"
#include "runtime/cuda/Choices.h"
#include "runtime/cuda/CudaCommon.h"
#include "runtime/cuda/LazyLibraries.h"

namespace tandem {
namespace cuda {

std::string errorText(const char* call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
}
Status check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status::ok();
  cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
  return Status::error(errorText(call, e));
}
// A library that could not be loaded answers every call with its "not initialized" code; the
// loader's message says why (LazyLibraries.h).
Status check(cublasStatus_t e, const char* call) {
  if (e == CUBLAS_STATUS_SUCCESS) return Status::ok();
  if (!cudaLibraryLoaded(CudaLibrary::CublasLt)) {
    Status why = loadCudaLibrary(CudaLibrary::CublasLt);
    if (!why.isOk()) return why.withContext(call);
  }
  return Status::error(cublasStatusText(call, e));
}
Status check(cudnnStatus_t e, const char* call) {
  if (e == CUDNN_STATUS_SUCCESS) return Status::ok();
  if (!cudaLibraryLoaded(CudaLibrary::Cudnn)) {
    Status why = loadCudaLibrary(CudaLibrary::Cudnn);
    if (!why.isOk()) return why.withContext(call);
  }
  return Status::error(std::string(call) + ": " + cudnnGetErrorString(e));
}

std::string opLabel(const KernelContext& ctx) {
  return (ctx.nodeName.empty() ? std::string("op") : "op '" + ctx.nodeName + "'") + " (" + ctx.opType + ")";
}

namespace {

class CudaSegments : public SegmentAllocator {
 public:
  explicit CudaSegments(int ordinal) : ordinal_(ordinal) {}
  Status reserve(size_t bytes, void** out) override {
    cudaSetDevice(ordinal_);
    return check(cudaMalloc(out, bytes), "cudaMalloc");
  }
  void release(void* p) override {
    cudaSetDevice(ordinal_);
    cudaFree(p);
  }

 private:
  int ordinal_;
};

// One arena per device for the whole process, so plans loaded one after another reuse memory.
// The first backend created on a device fixes its mode (grow, or a preallocated fraction).
struct DeviceArena {
  std::unique_ptr<CudaSegments> segments;
  std::unique_ptr<CachingArena> arena;
};

Status deviceArena(int ordinal, double fraction, CachingArena** out) {
  static std::mutex mu;
  static std::map<int, DeviceArena>* arenas = new std::map<int, DeviceArena>();  // never destroyed:
  // freeing device memory during static destruction races the CUDA runtime's own teardown.
  std::lock_guard<std::mutex> l(mu);
  auto it = arenas->find(ordinal);
  if (it == arenas->end()) {
    DeviceArena a;
    a.segments = std::make_unique<CudaSegments>(ordinal);
    size_t pre = 0;
    if (fraction > 0) {
      size_t freeB = 0, totalB = 0;
      TANDEM_CUDA_RETURN(cudaMemGetInfo(&freeB, &totalB));
      pre = (size_t)(fraction * (double)totalB);
      pre = pre / CachingArena::kAlignment * CachingArena::kAlignment;
    }
    a.arena = std::make_unique<CachingArena>("cuda:" + std::to_string(ordinal), a.segments.get(), pre);
    if (!a.arena->initStatus().isOk())
      return a.arena->initStatus().withContext("preallocating --gpu-memory-fraction " +
                                               std::to_string(fraction) + " of cuda:" + std::to_string(ordinal));
    it = arenas->emplace(ordinal, std::move(a)).first;
  }
  *out = it->second.arena.get();
  return Status::ok();
}

class CudaEvent : public Event {
 public:
  cudaEvent_t e = nullptr;
  ~CudaEvent() override {
    if (e) cudaEventDestroy(e);
  }
};

// Counts what one backend (one plan on one device) holds, for the peak reported after a run.
class CudaBackend : public DeviceBackend {
 public:
  CudaBackend(int ordinal, CachingArena* arena) : device_("cuda:" + std::to_string(ordinal)) {
    ctx_.ordinal = ordinal;
    ctx_.device = device_;
    ctx_.arena = arena;
  }
  ~CudaBackend() override {
    // 1. Drain the streams, 2. give back every block (the plan's and the context's own) while
    // the streams that used them still exist, 3. the library handles, then the streams, and
    // the context no longer names them. Nothing here may leave an error in cudart's per-thread
    // last-error slot: the next launch of any backend on this thread would report it.
    cudaSetDevice(ctx_.ordinal);
    for (cudaStream_t s : {ctx_.compute, ctx_.h2d, ctx_.d2h})
      if (s) cudaStreamSynchronize(s);
    for (auto& p : live_) ctx_.arena->free(p.first);
    live_.clear();
    ctx_.releaseAll();
    ctx_.program.unload();
    if (ctx_.dnn) cudnnDestroy(ctx_.dnn);
    if (ctx_.lt) cublasLtDestroy(ctx_.lt);
    ctx_.dnn = nullptr;
    ctx_.lt = nullptr;
    for (cudaStream_t* s : {&ctx_.compute, &ctx_.h2d, &ctx_.d2h}) {
      if (*s) cudaStreamDestroy(*s);
      *s = nullptr;
    }
    cudaGetLastError();
  }

  Status init() {
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    TANDEM_CUDA_RETURN(cudaDeviceGetAttribute(&ctx_.ccMajor, cudaDevAttrComputeCapabilityMajor, ctx_.ordinal));
    TANDEM_CUDA_RETURN(cudaDeviceGetAttribute(&ctx_.ccMinor, cudaDevAttrComputeCapabilityMinor, ctx_.ordinal));
    TANDEM_CUDA_RETURN(cudaDeviceGetAttribute(&ctx_.smCount, cudaDevAttrMultiProcessorCount, ctx_.ordinal));
    TANDEM_CUDA_RETURN(cudaStreamCreateWithFlags(&ctx_.compute, cudaStreamNonBlocking));
    TANDEM_CUDA_RETURN(cudaStreamCreateWithFlags(&ctx_.h2d, cudaStreamNonBlocking));
    TANDEM_CUDA_RETURN(cudaStreamCreateWithFlags(&ctx_.d2h, cudaStreamNonBlocking));
    TANDEM_CUDA_RETURN(cublasLtCreate(&ctx_.lt));
    TANDEM_CUDA_RETURN(cudnnCreate(&ctx_.dnn));
    TANDEM_CUDA_RETURN(cudnnSetStream(ctx_.dnn, ctx_.compute));
    return Status::ok();
  }

  const std::string& device() const override { return device_; }
  const std::string& kind() const override { return kind_; }
  bool isHost() const override { return false; }

  Status allocate(size_t bytes, const std::string& forWhat, void** out) override {
    TANDEM_RETURN_IF_ERROR(ctx_.arena->allocate(bytes, forWhat, out));
    std::lock_guard<std::mutex> l(mu_);
    live_[*out] = bytes;
    inUse_ += bytes;
    peak_ = std::max(peak_, inUse_);
    return Status::ok();
  }
  void deallocate(void* p) override {
    if (!p) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = live_.find(p);
      if (it == live_.end()) return;
      inUse_ -= it->second;
      live_.erase(it);
    }
    ctx_.arena->free(p);
  }
  size_t peakBytes() const override {
    std::lock_guard<std::mutex> l(mu_);
    return peak_ + ctxBytes();
  }
  Status allocateHost(size_t bytes, void** out) override {
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    return check(cudaHostAlloc(out, std::max<size_t>(bytes, 1), cudaHostAllocPortable), "cudaHostAlloc")
        .withContext("pinned host staging of " + std::to_string(bytes) + " bytes for " + device_);
  }
  void deallocateHost(void* p) override {
    if (p) cudaFreeHost(p);
  }

  Status copyFromHost(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return Status::ok();
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_.h2d), "cudaMemcpyAsync(H2D)");
  }
  Status copyToHost(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return Status::ok();
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.d2h), "cudaMemcpyAsync(D2H)");
  }
  Status copyOnDevice(Queue q, void* dst, const void* src, size_t bytes) override {
    if (!bytes || dst == src) return Status::ok();
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    // cudaMemcpyDefault: unified addressing finds the source device (peer copy between GPUs).
    return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream(q)), "cudaMemcpyAsync(D2D)");
  }

  Status createKernel(KernelContext ctx, std::unique_ptr<Kernel>* out) override {
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    ctx.cuda = &ctx_;
    return KernelRegistry::global().create("cuda", ctx, out);
  }
  Status finishLoad(const std::vector<Kernel*>& kernels) override {
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    TANDEM_RETURN_IF_ERROR(ctx_.program.compileAndLoad(ctx_.ccMajor, ctx_.ccMinor).withContext(device_));
    // A later load on the same backend (calibration loads one op at a time) may need more.
    if (ctx_.workspaceBytes > workspaceHeld_) {
      TANDEM_CUDA_RETURN(cudaStreamSynchronize(ctx_.compute));
      if (ctx_.workspace) ctx_.release(ctx_.workspace);
      ctx_.workspace = nullptr;
      TANDEM_RETURN_IF_ERROR(ctx_.allocate(ctx_.workspaceBytes, "the plan's cuBLASLt/cuDNN workspace", &ctx_.workspace));
      workspaceHeld_ = ctx_.workspaceBytes;
    }
    for (Kernel* k : kernels) TANDEM_RETURN_IF_ERROR(k->prepare());
    // Parameter uploads of kernel creation ran on the compute stream; finish them now.
    return check(cudaStreamSynchronize(ctx_.compute), "cudaStreamSynchronize");
  }
  Status launch(Kernel& k, const std::vector<const Tensor*>& inputs,
                const std::vector<Tensor*>& outputs) override {
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    // An error some earlier call left in the last-error slot is not this kernel's: clear it
    // (a sticky one, a faulted context, shows again in the launch or the next synchronise).
    cudaGetLastError();
    TANDEM_RETURN_IF_ERROR(k.run(inputs, outputs));
    // Library calls (cuBLASLt, cuDNN) launch kernels whose launch errors land only here.
    return check(cudaGetLastError(), "kernel launch");
  }

  Status createEvent(std::unique_ptr<Event>* out) override {
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    auto e = std::make_unique<CudaEvent>();
    TANDEM_CUDA_RETURN(cudaEventCreateWithFlags(&e->e, cudaEventDisableTiming));
    *out = std::move(e);
    return Status::ok();
  }
  Status recordEvent(Queue q, Event& e) override {
    return check(cudaEventRecord(static_cast<CudaEvent&>(e).e, stream(q)), "cudaEventRecord");
  }
  Status waitEvent(Queue q, Event& e) override {
    // A host backend's event is not waited for here: the executor blocks the host on the CPU
    // backend's hostWait() before it issues this queue's next work (runtime/Backend.h).
    auto* ce = dynamic_cast<CudaEvent*>(&e);
    if (!ce) return Status::ok();
    return check(cudaStreamWaitEvent(stream(q), ce->e, 0), "cudaStreamWaitEvent");
  }
  Status hostWait(Event& e) override {
    auto* ce = dynamic_cast<CudaEvent*>(&e);
    if (!ce) return Status::ok();
    return check(cudaEventSynchronize(ce->e), "cudaEventSynchronize");
  }
  Status synchronize() override {
    TANDEM_CUDA_RETURN(cudaSetDevice(ctx_.ordinal));
    for (cudaStream_t s : {ctx_.compute, ctx_.h2d, ctx_.d2h})
      TANDEM_RETURN_IF_ERROR(check(cudaStreamSynchronize(s), "cudaStreamSynchronize").withContext(device_));
    return Status::ok();
  }

 private:
  cudaStream_t stream(Queue q) const {
    return q == Queue::Compute ? ctx_.compute : q == Queue::HostToDevice ? ctx_.h2d : ctx_.d2h;
  }
  size_t ctxBytes() const { return ctx_.ownedBytes(); }

  std::string device_, kind_ = "cuda";
  DeviceContext ctx_;
  mutable std::mutex mu_;
  std::map<void*, size_t> live_;
  size_t inUse_ = 0, peak_ = 0;
  size_t workspaceHeld_ = 0;
};

// Why no CUDA device can be used, or "" when at least one can. Sets *count.
std::string deviceCountProblem(int* count) {
  *count = 0;  // cudaGetDeviceCount leaves it unwritten when there is no driver
  cudaError_t e = cudaGetDeviceCount(count);
  int driver = 0, runtime = 0;
  if (e != cudaSuccess) {
    cudaGetLastError();
    *count = 0;
    cudaDriverGetVersion(&driver);  // 0 when no driver is installed
    cudaRuntimeGetVersion(&runtime);
    cudaGetLastError();
  }
  return deviceCountProblemText(e, *count, driver, runtime, std::getenv("CUDA_VISIBLE_DEVICES"));
}

}  // namespace

Status DeviceContext::allocate(size_t bytes, const std::string& forWhat, void** out) {
  if (!arena) return Status::error(forWhat + ": no CUDA device memory in this context (created without a device)");
  TANDEM_RETURN_IF_ERROR(arena->allocate(bytes, forWhat, out));
  owned_.push_back({*out, bytes});
  ownedBytes_ += bytes;
  return Status::ok();
}

Status DeviceContext::upload(const void* host, size_t bytes, const std::string& forWhat, void** out) {
  TANDEM_RETURN_IF_ERROR(allocate(bytes, forWhat, out));
  if (!bytes) return Status::ok();
  // Synchronous: load time only, and `host` may be a temporary.
  TANDEM_CUDA_RETURN(cudaMemcpyAsync(*out, host, bytes, cudaMemcpyHostToDevice, compute));
  return check(cudaStreamSynchronize(compute), "cudaStreamSynchronize").withContext(forWhat);
}

void DeviceContext::release(void* p) {
  auto it = std::find_if(owned_.begin(), owned_.end(), [&](const std::pair<void*, size_t>& o) { return o.first == p; });
  if (it == owned_.end()) return;
  ownedBytes_ -= it->second;
  owned_.erase(it);
  arena->free(p);
}

void DeviceContext::releaseAll() {
  if (compute) cudaStreamSynchronize(compute);
  for (auto& o : owned_) arena->free(o.first);
  owned_.clear();
  ownedBytes_ = 0;
  workspace = nullptr;
}

DeviceContext::~DeviceContext() { releaseAll(); }

}  // namespace cuda

bool cudaBackendBuilt() { return true; }

Status createCudaBackend(int ordinal, const BackendOptions& options, std::unique_ptr<DeviceBackend>* out) {
  int count = 0;
  std::string problem = cuda::deviceCountProblem(&count);
  if (!problem.empty()) return Status::error(problem);
  if (ordinal < 0 || ordinal >= count)
    return Status::error("no device cuda:" + std::to_string(ordinal) + " (" + std::to_string(count) +
                         " visible)");
  if (options.memoryFraction < 0 || options.memoryFraction > 1)
    return Status::error("--gpu-memory-fraction must be in (0, 1], got " + std::to_string(options.memoryFraction));
  // The math libraries are opened here, when a device is first used, not at process start
  // (LazyLibraries.h); a missing one fails the backend with its name and the remedy.
  for (cuda::CudaLibrary lib : {cuda::CudaLibrary::CublasLt, cuda::CudaLibrary::Cudnn, cuda::CudaLibrary::Nvrtc})
    TANDEM_RETURN_IF_ERROR(cuda::loadCudaLibrary(lib));
  TANDEM_RETURN_IF_ERROR(cuda::check(cudaSetDevice(ordinal), "cudaSetDevice"));
  CachingArena* arena = nullptr;
  TANDEM_RETURN_IF_ERROR(cuda::deviceArena(ordinal, options.memoryFraction, &arena));
  auto b = std::make_unique<cuda::CudaBackend>(ordinal, arena);
  TANDEM_RETURN_IF_ERROR(b->init().withContext("cuda:" + std::to_string(ordinal)));
  *out = std::move(b);
  return Status::ok();
}

std::vector<DeviceInfo> discoverCudaDevices(std::string* note) {
  std::vector<DeviceInfo> out;
  int count = 0;
  std::string problem = cuda::deviceCountProblem(&count);
  if (!problem.empty()) {
    *note = "cuda: " + problem + "; plans run on the CPU";
    return out;
  }
  // A device is there: open cuDNN and NVRTC for their versions. One that cannot be opened is
  // reported (property and note), not fatal: the CPU still runs, and createCudaBackend will
  // refuse the device with the same message.
  auto libraryVersion = [&](cuda::CudaLibrary lib, auto version) -> std::string {
    Status st = cuda::loadCudaLibrary(lib);
    if (st.isOk()) return version();
    *note += (note->empty() ? "cuda: " : "; ") + st.message();
    return "unavailable";
  };
  std::string cudnn = libraryVersion(cuda::CudaLibrary::Cudnn, [] { return std::to_string(cudnnGetVersion()); });
  std::string nvrtc = libraryVersion(cuda::CudaLibrary::Nvrtc, [] { return cuda::nvrtcVersionText(); });
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    auto attr = [&](cudaDeviceAttr a) {
      int v = 0;
      cudaDeviceGetAttribute(&v, a, d);
      return std::to_string(v);
    };
    DeviceInfo info;
    info.name = "cuda:" + std::to_string(d);
    info.kind = "cuda";
    info.properties = {
        {"model", p.name},
        {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
        {"sms", std::to_string(p.multiProcessorCount)},
        {"memory_bytes", std::to_string((unsigned long long)p.totalGlobalMem)},
        {"clock_khz", attr(cudaDevAttrClockRate)},
        {"memory_clock_khz", attr(cudaDevAttrMemoryClockRate)},
        {"memory_bus_bits", attr(cudaDevAttrGlobalMemoryBusWidth)},
        {"driver", cuda::cudaVersionText(driver)},
        {"runtime", cuda::cudaVersionText(runtime)},
        {"cudnn", cudnn},
        {"nvrtc", nvrtc},
    };
    if (vis) info.properties.push_back({"cuda_visible_devices", vis});
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace tandem
