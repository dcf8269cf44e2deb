// Feasibility for the placer: can device kind K run op T on these dtypes? The runtime's kernel
// registry answers for the backends built into this binary; for a backend that is not built
// (CUDA on a machine without the toolkit) a capability table answers, so plans can be made for
// hardware that is not present (DESIGN §2 DeviceSet, §6 "kernel capability tables").
#pragma once
#include <string>
#include <vector>

#include "runtime/DType.h"

namespace tandem {

/// True when `deviceKind` ("cpu", "cuda") has a kernel for `opType` (ONNX name) on
/// `inputDTypes` (present inputs, ONNX order). Built backends answer from
/// KernelRegistry::global(); the CUDA table applies only while no "cuda" kernel is registered.
bool deviceKindSupports(const std::string& deviceKind, const std::string& opType,
                        const std::vector<DType>& inputDTypes);

/// True when the answer for `deviceKind` comes from a capability table (backend not built).
bool isCapabilityTableOnly(const std::string& deviceKind);

}  // namespace tandem
