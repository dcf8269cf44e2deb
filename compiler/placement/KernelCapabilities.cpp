// Feasibility for the placer: the kernel registry answers, from the kernels of the backends built
// into this binary or the capabilities of those that are not (KernelRegistry::addCapability).
#include "compiler/placement/KernelCapabilities.h"

namespace tandem {

bool isCapabilityTableOnly(const std::string& deviceKind) {
  return KernelRegistry::global().capabilityOnly(deviceKind);
}

bool deviceKindSupports(const std::string& deviceKind, const std::string& opType,
                        const std::vector<DType>& inputDTypes) {
  return KernelRegistry::global().supports(opType, deviceKind, inputDTypes);
}

std::string deviceKindRejects(const std::string& deviceKind, const KernelContext& ctx) {
  return KernelRegistry::global().rejects(deviceKind, ctx);
}

}  // namespace tandem
