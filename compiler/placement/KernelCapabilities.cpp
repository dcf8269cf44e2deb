// Feasibility for the placer: the kernel registry, or, for cuda when the backend is not built
// into this binary, the CUDA backend's own op table (runtime/cuda/CudaKernelTable.h).
#include "compiler/placement/KernelCapabilities.h"


#include "compiler/ShapeInference.h"
#include "runtime/Kernel.h"
#include "runtime/cpu/ref/RefCommon.h"
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

namespace {

std::string cudaConfigUnsupported(const KernelContext& ctx) {
  const std::string& op = ctx.opType;
  const AttrMap& attrs = *ctx.attrs;
  auto present = [&](size_t i) { return i < ctx.inputTypes.size() && ctx.inputTypes[i].present(); };
  auto constant = [&](size_t i) { return i < ctx.constInputs.size() && ctx.constInputs[i]; };
  if (op == "MaxPool" || op == "AveragePool") {
    if (ctx.inputTypes.empty() || ctx.outputTypes.empty()) return "";
    const Shape& xs = ctx.inputTypes[0].shape;
    const Shape& ys = ctx.outputTypes[0].shape;
    if (xs.size() < 3 || xs.size() > 5 || ys.size() != xs.size())
      return "the CUDA kernel pools 1-D to 3-D inputs";
    if (ctx.outputTypes.size() > 1 && ctx.outputTypes[1].present())
      return "the CUDA kernel has no MaxPool Indices output";
    size_t ns = xs.size() - 2;
    Shape inSp(xs.begin() + 2, xs.end()), outSp(ys.begin() + 2, ys.end());
    std::vector<int64_t> window, strides, dil, pb, pe;
    if (!ref::intsAttr(ctx, "kernel_shape", ns, 1, &window) ||
        !ref::intsAttr(ctx, "strides", ns, 1, &strides) ||
        !ref::intsAttr(ctx, "dilations", ns, 1, &dil))
      return "";  // malformed attributes: the shape functions have said so already
    for (int64_t d : dil)
      if (d != 1) return "the CUDA kernel has no dilated pooling";
    if (!ref::windowBeginPads(ctx, inSp, outSp, window, strides, dil, &pb, &pe)) return "";
    // cuDNN pools with the begin pads on both sides and floor rounding.
    for (size_t d = 0; d < ns; ++d)
      if (strides[d] <= 0 || (inSp[d] + 2 * pb[d] - window[d]) / strides[d] + 1 != outSp[d])
        return "cuDNN's symmetric-pad, floor-rounded pooling does not give this output "
               "(ceil_mode or asymmetric pads)";
    return "";
  }
  if (op == "BatchNormalization" && attrs.getInt("training_mode", 0) != 0)
    return "the CUDA kernel is inference-only (training_mode=1)";
  if (op == "Dropout" && ctx.outputTypes.size() > 1 && ctx.outputTypes[1].present())
    return "the CUDA Dropout has no mask output";
  if (op == "Pad" || op == "Slice" || op == "Clip" || op.rfind("Reduce", 0) == 0) {
    for (size_t i = 1; i < ctx.inputTypes.size(); ++i)
      if (present(i) && !constant(i))
        return "the CUDA kernel needs input " + std::to_string(i) + " to be a constant";
    return "";
  }
  if (op == "LayerNormalization" && !ctx.inputTypes.empty()) {
    const Shape& xs = ctx.inputTypes[0].shape;
    int64_t axis = attrs.getInt("axis", -1);
    if (axis < 0) axis += (int64_t)xs.size();
    if (axis < 0 || axis > (int64_t)xs.size()) return "";
    Shape norm(xs.begin() + axis, xs.end());
    for (size_t i = 1; i < 3; ++i)
      if (present(i) && ctx.inputTypes[i].shape != norm)
        return "the CUDA kernel needs Scale and B of the normalized shape (no broadcast)";
    return "";
  }
  return "";
}

}  // namespace

std::string deviceKindRejects(const std::string& deviceKind, const KernelContext& ctx) {
  return deviceKind == "cuda" ? cudaConfigUnsupported(ctx) : "";
}

}  // namespace tandem
