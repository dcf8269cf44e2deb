// The CUDA capability table (the kernels the CUDA backend provides, issue 4: cuBLAS/cuBLASLt,
// cuDNN, NVRTC) used when the backend is not built, and the registry lookup otherwise.
#include "compiler/placement/KernelCapabilities.h"

#include <algorithm>
#include <set>

#include "compiler/ShapeInference.h"
#include "runtime/Kernel.h"

namespace tandem {

namespace {

bool registryHasKind(const std::string& kind) {
  for (const KernelDef& d : KernelRegistry::global().all())
    if (d.deviceKind == kind) return true;
  return false;
}

// f32 compute on the GPU: every op of the tandem op list. Integer and bool tensors on the GPU
// only through the data-movement, comparison and shape ops (indices, masks, shapes).
const std::set<std::string>& cudaIndexOps() {
  static const std::set<std::string> s = {
      "Identity", "Dropout", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
      "Concat", "Split", "Slice", "Gather", "Shape", "Constant", "ConstantOfShape", "Cast",
      "Expand", "Where", "Equal", "Less", "Greater", "Pad", "Tile", "ArgMax", "Add", "Sub",
      "Mul", "Min", "Max"};
  return s;
}

bool cudaTableSupports(const std::string& opType, const std::vector<DType>& dts) {
  if (!isKnownOp(opType)) return false;
  bool allF32 = std::all_of(dts.begin(), dts.end(), [](DType d) { return d == DType::F32; });
  if (allF32) return true;
  if (!cudaIndexOps().count(opType)) return false;
  return std::all_of(dts.begin(), dts.end(), [](DType d) {
    return d == DType::F32 || d == DType::I32 || d == DType::I64 || d == DType::Bool;
  });
}

}  // namespace

bool isCapabilityTableOnly(const std::string& deviceKind) {
  return deviceKind == "cuda" && !registryHasKind("cuda");
}

bool deviceKindSupports(const std::string& deviceKind, const std::string& opType,
                        const std::vector<DType>& inputDTypes) {
  if (isCapabilityTableOnly(deviceKind)) return cudaTableSupports(opType, inputDTypes);
  return KernelRegistry::global().supports(opType, deviceKind, inputDTypes);
}

}  // namespace tandem
