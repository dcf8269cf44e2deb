// The ops and dtypes the CUDA backend has kernels for: one table, read by the kernel registration
// (runtime/cuda/Register.cpp) and by the placer when the backend is not built
// (compiler/placement/KernelCapabilities.cpp), so both give the same answer. No CUDA headers here.
#pragma once
#include <string>
#include <vector>

#include "runtime/DType.h"

namespace tandem {

/// Ops with a CUDA kernel, sorted.
const std::vector<std::string>& cudaKernelOps();
/// Whether the CUDA backend runs `opType` on inputs of these dtypes (present inputs, ONNX
/// order). False for ops not in cudaKernelOps().
bool cudaKernelAccepts(const std::string& opType, const std::vector<DType>& inputDTypes);
/// The table's dtype rule for `tandem kernels`, e.g. "f32" or "f32,i32,i64 (all the same)".
std::string cudaKernelDTypesText(const std::string& opType);

}  // namespace tandem
