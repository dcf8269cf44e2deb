// What every CUDA kernel file shares: the per-device context (streams, library handles, the
// plan's generated-kernel program, the arena) and error helpers. Host code only: no nvcc needed.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "runtime/CachingArena.h"
#include "runtime/Kernel.h"
#include "runtime/cuda/Nvrtc.h"

namespace tandem {
namespace cuda {

/// "cudaMalloc: out of memory (cudaErrorMemoryAllocation)".
std::string errorText(const char* call, cudaError_t e);
Status check(cudaError_t e, const char* call);
Status check(cublasStatus_t e, const char* call);
Status check(cudnnStatus_t e, const char* call);

#define TANDEM_CUDA_RETURN(expr) TANDEM_RETURN_IF_ERROR(::tandem::cuda::check((expr), #expr))

/// The state a CUDA kernel uses at load and run time. Owned by the device's backend; one per
/// loaded plan and device. Streams are non-blocking; kernels enqueue on `compute`.
class DeviceContext {
 public:
  int ordinal = 0;
  std::string device;           // "cuda:0"
  int ccMajor = 0, ccMinor = 0; // compute capability
  int smCount = 0;
  cudaStream_t compute = nullptr, h2d = nullptr, d2h = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  CachingArena* arena = nullptr;  // the device's arena, shared by every plan on the device
  GeneratedProgram program;       // all generated kernels of the plan, compiled once at load

  /// Scratch shared by the plan's cuBLASLt and cuDNN calls (they run one after another on the
  /// compute stream, so one buffer serves all). Kernels reserve their need at creation; the
  /// backend allocates the largest in finishLoad(); kernels read `workspace` when they run.
  void reserveWorkspace(size_t bytes) { workspaceBytes = std::max(workspaceBytes, bytes); }
  size_t workspaceBytes = 0;
  void* workspace = nullptr;

  /// Device memory for the lifetime of the plan (workspaces, uploaded parameters); freed when
  /// the context is destroyed. `forWhat` names the step for the out-of-memory error.
  Status allocate(size_t bytes, const std::string& forWhat, void** out);
  /// Uploads host bytes at load time (synchronously on the compute stream); returns the device copy.
  Status upload(const void* host, size_t bytes, const std::string& forWhat, void** out);
  /// Frees a block from allocate()/upload() early (the caller has synchronised its users).
  void release(void* p);
  /// Synchronises the compute stream (when there is one) and frees every block from
  /// allocate()/upload(). The backend calls it before it destroys its streams; the destructor
  /// calls it again (then a no-op) for contexts made without a backend.
  void releaseAll();
  /// Bytes held through allocate()/upload().
  size_t ownedBytes() const { return ownedBytes_; }
  ~DeviceContext();

 private:
  std::vector<std::pair<void*, size_t>> owned_;
  size_t ownedBytes_ = 0;
};

/// "step 'conv1' (Conv)" style prefix for messages from CUDA kernels.
std::string opLabel(const KernelContext& ctx);

/// Registration helpers: one per kernel file, called by registerCudaKernels (Register.cpp).
void registerElementwiseKernels(KernelRegistry& r);  // Elementwise.cpp (NVRTC)
void registerMathKernels(KernelRegistry& r);         // Math.cpp (cuBLASLt)
void registerConvKernels(KernelRegistry& r);         // Conv.cpp (cuDNN)
void registerPoolKernels(KernelRegistry& r);         // Pool.cpp (cuDNN; MaxPoolGrad NVRTC)
void registerLossKernels(KernelRegistry& r);         // Loss.cpp (NVRTC)
void registerImageKernels(KernelRegistry& r);        // Image.cpp (NVRTC: Resize)
void registerGenerateKernels(KernelRegistry& r);     // Generate.cpp (NVRTC: CumSum)
void registerSelectionKernels(KernelRegistry& r);    // Selection.cpp (NVRTC: GatherElements, TopK)
void registerNormKernels(KernelRegistry& r);         // Normalization.cpp (cuDNN, NVRTC)
void registerReductionKernels(KernelRegistry& r);    // Reduction.cpp (NVRTC)
void registerTensorKernels(KernelRegistry& r);       // Tensor.cpp (NVRTC, copies)
void registerIndexingKernels(KernelRegistry& r);     // Indexing.cpp (NVRTC)
void registerFusedKernels(KernelRegistry& r);        // Fused.cpp (tandem.fused: cuBLASLt, NVRTC)
void registerRecurrentKernels(KernelRegistry& r);    // Recurrent.cpp (cuDNN: RNN, GRU, LSTM)

/// Adds a "cuda" def for `op` whose accepted dtypes are exactly the table's
/// (runtime/cuda/CudaKernelTable.h), so the placer's table and the registry cannot disagree.
/// Output 0 is required unless `output0Optional` (the recurrent ops: Y may be left out).
void addCuda(KernelRegistry& r, const std::string& op, const std::string& impl, KernelFactory create,
             bool output0Optional = false);

}  // namespace cuda
}  // namespace tandem
