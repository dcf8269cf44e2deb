// Feasibility for the placer: can device kind K run op T on these dtypes? The runtime's kernel
// registry answers for the backends built into this binary; for a backend that is not built
// (CUDA on a machine without the toolkit) a capability table answers, so plans can be made for
// hardware that is not present (DESIGN §2 DeviceSet, §6 "kernel capability tables").
#pragma once
#include <string>
#include <vector>

#include "runtime/DType.h"
#include "runtime/Kernel.h"

namespace tandem {

/// True when `deviceKind` ("cpu", "cuda") has a kernel for `opType` (ONNX name) on
/// `inputDTypes` (present inputs, ONNX order). Built backends answer from
/// KernelRegistry::global(); the CUDA table applies only while no "cuda" kernel is registered.
bool deviceKindSupports(const std::string& deviceKind, const std::string& opType,
                        const std::vector<DType>& inputDTypes);

/// True when the answer for `deviceKind` comes from a capability table (backend not built).
bool isCapabilityTableOnly(const std::string& deviceKind);

/// Why `deviceKind` cannot run this op instance although it has a kernel for its dtypes, or ""
/// when it can. `ctx` carries the op type, attributes and static operand types; a non-null
/// constInputs[i] marks input i as a constant (its value is not read). The CUDA limits mirrored
/// here are the ones its kernels refuse at load (runtime/cuda/Pool.cpp, Normalization.cpp,
/// Tensor.cpp, Indexing.cpp, Elementwise.cpp, Reduction.cpp): pools whose output cuDNN's
/// symmetric-pad floor rounding does not reproduce (ceil_mode, asymmetric pads), dilated pools,
/// MaxPool's Indices output, training-mode BatchNormalization, Dropout's mask output, non-constant
/// Pad/Slice/Clip/reduction parameters, LayerNormalization with a broadcast Scale or B. A plan
/// that put such an op on the GPU would fail to load; the placer keeps it on the CPU instead.
std::string deviceKindRejects(const std::string& deviceKind, const KernelContext& ctx);

}  // namespace tandem
