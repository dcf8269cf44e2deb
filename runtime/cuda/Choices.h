// The CUDA backend's decisions that need no device, as pure functions so they are unit-tested on
// machines without a GPU: operand alignment for cuBLASLt, the cuDNN workspace cap and algorithm
// choice, and the texts of library and driver errors.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem {
namespace cuda {

// ---- cuBLASLt operand alignment --------------------------------------------------------------

/// cuBLASLt's default alignment preference (bytes); an algorithm never needs more.
constexpr size_t kMaxOperandAlignment = 256;

/// The largest power of two (bytes) that divides `address`, at most `cap` (a power of two);
/// `cap` for address 0. 0x1004 -> 4, 0x1040 -> 64, 0x10000 -> 256.
size_t pointerAlignment(uintptr_t address, size_t cap = kMaxOperandAlignment);

/// Alignment of every matrix of a strided batch: base address `base`, `count` matrices
/// `strideBytes` apart (0: one matrix shared by the whole batch). The smaller of the base's and
/// the stride's alignment when more than one distinct matrix is addressed.
size_t batchAlignment(uintptr_t base, int64_t strideBytes, int64_t count,
                      size_t cap = kMaxOperandAlignment);

// ---- cuDNN workspace -------------------------------------------------------------------------

/// Most workspace one cuDNN call may ask for: 256 MiB, and at most 1/8 of a fixed arena
/// (--gpu-memory-fraction), so one convolution's scratch cannot crowd the plan's tensors out.
constexpr size_t kMaxCudnnWorkspaceBytes = size_t(256) << 20;
constexpr size_t kCudnnWorkspaceArenaDivisor = 8;

/// The workspace cap for a device arena whose limit is `arenaLimitBytes` (0: it grows on demand).
size_t cudnnWorkspaceCap(size_t arenaLimitBytes);

/// One entry of cuDNN's ranked algorithm list (cudnnConvolution*AlgoPerf_t): usable (status
/// CUDNN_STATUS_SUCCESS) and the workspace it needs in bytes.
struct AlgoCandidate {
  bool ok = false;
  size_t memory = 0;
};

/// Index of the first (best ranked) usable candidate whose workspace is at most `capBytes`, or
/// -1 when none fits.
int firstAlgoWithin(const std::vector<AlgoCandidate>& ranked, size_t capBytes);

// ---- Error texts -----------------------------------------------------------------------------

/// "cublasLtMatmul(...): CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not
/// supported)": cuBLASLt's own name and description of `status`.
std::string cublasStatusText(const char* call, cublasStatus_t status);

/// "12.8" for 12080 (cudaDriverGetVersion / cudaRuntimeGetVersion encoding); "none" for 0.
std::string cudaVersionText(int version);

/// Why no CUDA device can be used, from what cudaGetDeviceCount returned (`e`, `count`), the
/// driver and runtime versions (0 driver: none installed) and $CUDA_VISIBLE_DEVICES (may be
/// null); "" when at least one device is there. The messages start with "no CUDA driver",
/// "the CUDA driver is too old for this runtime: driver X.Y, runtime A.B" or "no CUDA device".
std::string deviceCountProblemText(cudaError_t e, int count, int driverVersion, int runtimeVersion,
                                   const char* visibleDevices);

}  // namespace cuda
}  // namespace tandem
