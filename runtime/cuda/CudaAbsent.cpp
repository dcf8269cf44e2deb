// The CUDA backend's entry points in a CPU-only build (no toolkit, or TANDEM_ENABLE_CUDA=OFF):
// no kernels, no devices, and the reason wherever one is asked for.
#include "runtime/Backend.h"

namespace tandem {

bool cudaBackendBuilt() { return false; }

void registerCudaKernels(KernelRegistry&) {}

Status createCudaBackend(int, const BackendOptions&, std::unique_ptr<DeviceBackend>*) {
  return Status::error("this build has no CUDA backend");
}

std::vector<DeviceInfo> discoverCudaDevices(std::string* note) {
  *note = "cuda: backend not built into this binary (CPU-only build); plans run on the CPU";
  return {};
}

}  // namespace tandem
