// The device backend interface (DESIGN §5): one virtual per capability; the executor drives every
// device (the CPU and each cuda:N) through it.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime/Device.h"
#include "runtime/Kernel.h"
#include "runtime/Status.h"

namespace tandem {

/// The in-order queues of a device. On CUDA each is a stream. On a CPU backend all three are one
/// queue: the calling thread (work is done when the call returns) or, when the plan has several
/// host devices, one worker thread of the backend's own (createCpuBackend).
enum class Queue { Compute = 0, HostToDevice = 1, DeviceToHost = 2 };

/// A marker recorded on a queue; another queue of the same family (host backends among
/// themselves, CUDA backends among themselves) or the host can wait for it. Across families the
/// executor blocks the host on the recording backend's hostWait() instead: a backend's
/// waitEvent() may ignore an event of another family.
class Event {
 public:
  virtual ~Event() = default;
};

/// How a device's memory is obtained (DESIGN §5).
struct BackendOptions {
  /// 0: the device arena grows on demand (TF's allow_growth). In (0, 1]: preallocate this
  /// fraction of the device's total memory at first use and never grow past it.
  double memoryFraction = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  /// Canonical device name ("cpu", "cuda:0") and registry device kind ("cpu", "cuda").
  virtual const std::string& device() const = 0;
  virtual const std::string& kind() const = 0;
  /// True when the device's memory is ordinary host memory (pointers usable by the CPU).
  virtual bool isHost() const = 0;

  // ---- Memory -------------------------------------------------------------------------------
  /// `bytes` of device memory, 256-byte aligned. `forWhat` names the user ("step 'conv1' (Conv)
  /// workspace", "arena") and appears in the out-of-memory error with the bytes asked for.
  virtual Status allocate(size_t bytes, const std::string& forWhat, void** out) = 0;
  virtual void deallocate(void* p) = 0;
  /// Most bytes held by live allocations of this backend at once since it was created.
  virtual size_t peakBytes() const = 0;
  /// Host memory the device can copy to/from asynchronously (pinned on CUDA); the CPU backend
  /// returns ordinary memory. Freed with deallocateHost().
  virtual Status allocateHost(size_t bytes, void** out) = 0;
  virtual void deallocateHost(void* p) = 0;

  // ---- Copies (asynchronous on their queue; the caller orders them with events) ---------------
  /// Host -> this device on Queue::HostToDevice. `src` must stay valid until the copy is done;
  /// pageable sources are staged through pinned buffers by copyFromPageable().
  virtual Status copyFromHost(void* dst, const void* src, size_t bytes) = 0;
  /// This device -> host on Queue::DeviceToHost; `dst` is valid after an event recorded after it.
  virtual Status copyToHost(void* dst, const void* src, size_t bytes) = 0;
  /// Within this device, or from another device of the same kind (peer), on `queue`.
  virtual Status copyOnDevice(Queue queue, void* dst, const void* src, size_t bytes) = 0;

  // ---- Kernels ------------------------------------------------------------------------------
  /// Creates the kernel for one step (KernelRegistry with this backend's kind); the context's
  /// device state is filled in by the backend.
  virtual Status createKernel(KernelContext ctx, std::unique_ptr<Kernel>* out) = 0;
  /// Called once after every kernel of a plan is created: CUDA compiles all generated kernels
  /// of the plan here in one NVRTC program. Then each kernel's prepare() runs.
  virtual Status finishLoad(const std::vector<Kernel*>& kernels) = 0;
  /// Enqueues one kernel on Queue::Compute (an inline CPU queue runs it before returning). An
  /// error of a queued kernel is reported by synchronize(), and the kernels queued after it on
  /// that backend are skipped.
  virtual Status launch(Kernel& k, const std::vector<const Tensor*>& inputs,
                        const std::vector<Tensor*>& outputs) = 0;

  // ---- Events -------------------------------------------------------------------------------
  virtual Status createEvent(std::unique_ptr<Event>* out) = 0;
  virtual Status recordEvent(Queue q, Event& e) = 0;
  /// Queue `q` of this device waits for `e` (which may come from another device) without
  /// blocking the host.
  virtual Status waitEvent(Queue q, Event& e) = 0;
  /// The host blocks until `e` has happened.
  virtual Status hostWait(Event& e) = 0;
  /// The host blocks until all queues of this device are idle; reports asynchronous errors.
  virtual Status synchronize() = 0;
};

/// The CPU backend for a host device ("cpu", "cpu:1"): malloc'd memory; kernels created for
/// `threads` intra-op threads. `workerThreads` 0: the queues are the calling thread (a call
/// returns when its work is done, so events have happened once recorded). `workerThreads` > 0:
/// one in-order queue on a thread of the backend's own whose OpenMP pool has that many threads,
/// like a CUDA stream, so several host devices run their steps at the same time; its events
/// are real (waited for on another host backend's queue or by the host).
std::unique_ptr<DeviceBackend> createCpuBackend(const std::string& device, int threads,
                                                int workerThreads = 0);

/// The CUDA backend for cuda:`ordinal` (an index among the visible devices, CUDA_VISIBLE_DEVICES
/// honoured). Fails with the reason when this build has no CUDA backend, there is no driver, or
/// no such device ("no CUDA driver: cudaGetDeviceCount: ..."); the message has no device prefix.
/// Then it opens cuBLASLt, cuDNN and NVRTC (dlopen, once per process: runtime/cuda/LazyLibraries.h)
/// and fails naming the one that cannot be loaded ("cannot load cuBLASLt (...); ...").
Status createCudaBackend(int ordinal, const BackendOptions& options,
                         std::unique_ptr<DeviceBackend>* out);

/// CUDA devices for discoverDevices(), or one note saying why there are none. With devices, it
/// opens cuDNN and NVRTC for their versions; one that cannot be loaded shows as "unavailable"
/// in the properties and the note says why.
std::vector<DeviceInfo> discoverCudaDevices(std::string* note);

/// Whether this binary was built with the CUDA backend.
bool cudaBackendBuilt();

}  // namespace tandem
