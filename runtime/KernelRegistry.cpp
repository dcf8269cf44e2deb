// The process-wide kernel registry: every built-in backend registers here on first use.
#include "runtime/DynamicRegion.h"
#include "runtime/Kernel.h"

namespace tandem {

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    registerCpuDnnlKernels(*reg);
    registerCpuReferenceKernels(*reg);
    registerCudaKernels(*reg);
    registerControlFlowKernels(*reg);
    registerDynamicRegionKernel(*reg);
    return reg;
  }();
  return *r;
}

}  // namespace tandem
