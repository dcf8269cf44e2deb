// The CUDA backend's device-free decisions (runtime/cuda/Choices.h).
#include "runtime/cuda/Choices.h"

#include <algorithm>

namespace tandem {
namespace cuda {

size_t pointerAlignment(uintptr_t address, size_t cap) {
  if (address == 0) return cap;
  size_t low = (size_t)(address & (~address + 1));  // lowest set bit
  return std::min(low, cap);
}

size_t batchAlignment(uintptr_t base, int64_t strideBytes, int64_t count, size_t cap) {
  size_t a = pointerAlignment(base, cap);
  if (count > 1 && strideBytes != 0)
    a = std::min(a, pointerAlignment((uintptr_t)(strideBytes < 0 ? -strideBytes : strideBytes), cap));
  return a;
}

size_t cudnnWorkspaceCap(size_t arenaLimitBytes) {
  if (arenaLimitBytes == 0) return kMaxCudnnWorkspaceBytes;
  return std::min(kMaxCudnnWorkspaceBytes, arenaLimitBytes / kCudnnWorkspaceArenaDivisor);
}

int firstAlgoWithin(const std::vector<AlgoCandidate>& ranked, size_t capBytes) {
  for (size_t i = 0; i < ranked.size(); ++i)
    if (ranked[i].ok && ranked[i].memory <= capBytes) return (int)i;
  return -1;
}

std::string cublasStatusText(const char* call, cublasStatus_t status) {
  const char* name = cublasLtGetStatusName(status);
  const char* text = cublasLtGetStatusString(status);
  std::string s = std::string(call) + ": ";
  s += name ? name : "cuBLAS status " + std::to_string((int)status);
  if (text && *text) s += std::string(" (") + text + ")";
  return s;
}

std::string cudaVersionText(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string deviceCountProblemText(cudaError_t e, int count, int driverVersion, int runtimeVersion,
                                   const char* visibleDevices) {
  std::string vis = visibleDevices ? " (CUDA_VISIBLE_DEVICES=" + std::string(visibleDevices) + ")" : "";
  if (e == cudaSuccess) return count > 0 ? "" : "no CUDA device" + vis;
  std::string why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
  if (e == cudaErrorNoDevice) return "no CUDA device" + vis + ": " + why;
  // The runtime says "insufficient driver" both when there is no driver at all and when the
  // installed one predates this runtime; only the second is worth an upgrade hint.
  if (e == cudaErrorInsufficientDriver && driverVersion > 0)
    return "the CUDA driver is too old for this runtime: driver " + cudaVersionText(driverVersion) +
           ", runtime " + cudaVersionText(runtimeVersion) + " (" + why + ")";
  return "no CUDA driver: " + why;
}

}  // namespace cuda
}  // namespace tandem
