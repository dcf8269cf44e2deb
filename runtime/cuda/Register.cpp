// Registration of the CUDA kernels: every def's dtypes and instance limits come from the op table
// and rule of runtime/cuda/CudaKernelTable.h, the ones a build without the backend registers as
// its capabilities (runtime/cuda/CudaAbsent.cpp).
#include "runtime/cuda/CudaCommon.h"
#include "runtime/cuda/CudaKernelTable.h"

namespace tandem {

void registerCudaKernels(KernelRegistry& r) {
  cuda::registerElementwiseKernels(r);
  cuda::registerMathKernels(r);
  cuda::registerConvKernels(r);
  cuda::registerPoolKernels(r);
  cuda::registerLossKernels(r);
  cuda::registerImageKernels(r);
  cuda::registerGenerateKernels(r);
  cuda::registerSelectionKernels(r);
  cuda::registerNormKernels(r);
  cuda::registerReductionKernels(r);
  cuda::registerTensorKernels(r);
  cuda::registerIndexingKernels(r);
  cuda::registerFusedKernels(r);
  cuda::registerRecurrentKernels(r);
}

namespace cuda {

void addCuda(KernelRegistry& r, const std::string& op, const std::string& impl, KernelFactory create,
             bool output0Optional) {
  KernelDef d;
  d.opType = op;
  d.deviceKind = "cuda";
  d.impl = impl;
  d.priority = 0;
  d.accepts = [op](const std::vector<DType>& dts) { return cudaKernelAccepts(op, dts); };
  d.dtypesText = cudaKernelDTypesText(op);
  d.rejects = cudaKernelRejects;  // also the placer's answer (runtime/cuda/KernelLimits.cpp)
  d.create = [create = std::move(create), output0Optional](const KernelContext& ctx,
                                                            std::unique_ptr<Kernel>* out) -> Status {
    if (!ctx.cuda) return Status::error("internal: a CUDA kernel was created without a CUDA device context");
    if (ctx.outputTypes.empty() || (!output0Optional && !ctx.outputTypes[0].present())) return Status::error(opLabel(ctx) + ": output 0 is required");
    if (ctx.inputTypes.empty() || !ctx.inputTypes[0].present()) return Status::error(opLabel(ctx) + ": input 0 is required");
    return create(ctx, out);
  };
  r.add(std::move(d));
}

}  // namespace cuda
}  // namespace tandem
