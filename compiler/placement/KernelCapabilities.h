// Feasibility for the placer: can device kind K run op T on these dtypes, and this instance? The
// runtime's kernel registry answers: the kernels of the backends built into this binary, or the
// capabilities a backend that is not built registers (CUDA on a machine without the toolkit), so
// plans can be made for hardware that is not present (DESIGN §2 DeviceSet).
#pragma once
#include <string>
#include <vector>

#include "runtime/DType.h"
#include "runtime/Kernel.h"

namespace tandem {

/// True when `deviceKind` ("cpu", "cuda") has a kernel for `opType` (ONNX name) on
/// `inputDTypes` (present inputs, ONNX order): KernelRegistry::global().supports.
bool deviceKindSupports(const std::string& deviceKind, const std::string& opType,
                        const std::vector<DType>& inputDTypes);

/// True when the answer for `deviceKind` comes from a capability table (backend not built).
bool isCapabilityTableOnly(const std::string& deviceKind);

/// Why `deviceKind` cannot run this op instance although it has a kernel for its dtypes, or ""
/// when it can: KernelRegistry::rejects, i.e. the kernels' own rule (KernelDef::rejects, for CUDA
/// runtime/cuda/KernelLimits.cpp), the one the loader applies. `ctx` carries the op type,
/// attributes and static operand types; a non-null constInputs[i] marks input i as a constant
/// (its value is not read). A plan that put such an op on the device would fail to load; the
/// placer keeps it elsewhere instead.
std::string deviceKindRejects(const std::string& deviceKind, const KernelContext& ctx);

}  // namespace tandem
