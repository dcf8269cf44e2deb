// Feasibility for the placer: the kernel registry, or, for cuda when the backend is not built
// into this binary, the CUDA backend's own op table (runtime/cuda/CudaKernelTable.h).
#include "compiler/placement/KernelCapabilities.h"


#include "compiler/ShapeInference.h"
#include "runtime/Kernel.h"
#include "runtime/cuda/CudaKernelTable.h"

namespace tandem {

namespace {

bool registryHasKind(const std::string& kind) {
  for (const KernelDef& d : KernelRegistry::global().all())
    if (d.deviceKind == kind) return true;
  return false;
}

}  // namespace

bool isCapabilityTableOnly(const std::string& deviceKind) {
  return deviceKind == "cuda" && !registryHasKind("cuda");
}

bool deviceKindSupports(const std::string& deviceKind, const std::string& opType,
                        const std::vector<DType>& inputDTypes) {
  if (isCapabilityTableOnly(deviceKind))
    return isKnownOp(opType) && cudaKernelAccepts(opType, inputDTypes);
  return KernelRegistry::global().supports(opType, deviceKind, inputDTypes);
}

}  // namespace tandem
