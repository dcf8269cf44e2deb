// The CUDA backend's entry points in a CPU-only build (no toolkit, or TANDEM_ENABLE_CUDA=OFF):
// no kernels, no devices, and the reason wherever one is asked for.
#include "runtime/Backend.h"
#include "runtime/cuda/CudaKernelTable.h"

namespace tandem {

bool cudaBackendBuilt() { return false; }

// No kernels, but what they would accept and refuse, so the placer can make plans for a GPU
// host from this one (the same table and rule as runtime/cuda/Register.cpp).
void registerCudaKernels(KernelRegistry& r) {
  for (const std::string& op : cudaKernelOps()) {
    KernelDef d;
    d.opType = op;
    d.deviceKind = "cuda";
    d.impl = "absent";
    d.accepts = [op](const std::vector<DType>& dts) { return cudaKernelAccepts(op, dts); };
    d.dtypesText = cudaKernelDTypesText(op);
    d.rejects = cudaKernelRejects;
    r.addCapability(std::move(d));
  }
}

Status createCudaBackend(int, const BackendOptions&, std::unique_ptr<DeviceBackend>*) {
  return Status::error("this build has no CUDA backend");
}

std::vector<DeviceInfo> discoverCudaDevices(std::string* note) {
  *note = "cuda: backend not built into this binary (CPU-only build); plans run on the CPU";
  return {};
}

}  // namespace tandem
