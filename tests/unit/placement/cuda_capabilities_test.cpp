// The placer's view of CUDA and the CUDA kernel registry agree: with the backend built, every
// (op, dtypes) the table accepts has a registered "cuda" def and nothing else does; without it,
// feasibility comes from the same table. Either way every table op is a tandem op.
#include <gtest/gtest.h>

#include <set>

#include "compiler/ShapeInference.h"
#include "compiler/placement/KernelCapabilities.h"
#include "runtime/Backend.h"
#include "runtime/Kernel.h"
#include "runtime/cuda/CudaKernelTable.h"

using namespace tandem;

namespace {

// Dtype lists to probe: every op with 1..3 inputs of the common dtypes, uniform and mixed.
std::vector<std::vector<DType>> probes() {
  const std::vector<DType> ts = {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::U8};
  std::vector<std::vector<DType>> r;
  for (DType a : ts) {
    r.push_back({a});
    for (DType b : ts) {
      r.push_back({a, b});
      for (DType c : {DType::F32, DType::I64, DType::Bool}) r.push_back({a, b, c});
    }
    r.push_back({a, a, a, a, a});
    r.push_back({a, DType::I64, DType::I64, DType::I64, DType::I64});
  }
  return r;
}

TEST(CudaCapabilities, TableOpsAreTandemOps) {
  for (const std::string& op : cudaKernelOps()) EXPECT_TRUE(isKnownOp(op)) << op;
}

TEST(CudaCapabilities, PlacerAndRegistryAgreeOnEveryOpAndDtype) {
  std::set<std::string> ops(knownOps().begin(), knownOps().end());
  for (const KernelDef& d : KernelRegistry::global().all()) ops.insert(d.opType);
  int checked = 0, accepted = 0;
  for (const std::string& op : ops)
    for (const auto& dts : probes()) {
      bool table = isKnownOp(op) && cudaKernelAccepts(op, dts);
      bool placer = deviceKindSupports("cuda", op, dts);
      EXPECT_EQ(placer, table) << op << " on " << dts.size() << " inputs starting " << dtypeName(dts[0]);
      if (cudaBackendBuilt()) {
        bool registry = KernelRegistry::global().supports(op, "cuda", dts);
        EXPECT_EQ(registry, table) << op << " on " << dts.size() << " inputs starting " << dtypeName(dts[0]);
      }
      ++checked;
      accepted += table;
    }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(checked, accepted);
  EXPECT_EQ(isCapabilityTableOnly("cuda"), !cudaBackendBuilt());
}

TEST(CudaCapabilities, EveryRegisteredCudaDefIsInTheTable) {
  std::set<std::string> table(cudaKernelOps().begin(), cudaKernelOps().end()), registered;
  for (const KernelDef& d : KernelRegistry::global().all())
    if (d.deviceKind == "cuda") registered.insert(d.opType);
  if (cudaBackendBuilt()) EXPECT_EQ(registered, table);
  else EXPECT_TRUE(registered.empty());
}

TEST(CudaCapabilities, HostOnlyOpsStayOnTheCpu) {
  // Ops whose values are known at load (shapes, constants) have no CUDA kernel.
  for (const char* op : {"Shape", "Constant", "ConstantOfShape"})
    EXPECT_FALSE(deviceKindSupports("cuda", op, {DType::F32})) << op;
  EXPECT_TRUE(deviceKindSupports("cuda", "Conv", {DType::F32, DType::F32, DType::F32}));
  EXPECT_FALSE(deviceKindSupports("cuda", "Conv", {DType::F64, DType::F64}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Gather", {DType::F32, DType::I64}));
  EXPECT_TRUE(deviceKindSupports("cuda", "Where", {DType::Bool, DType::I64, DType::I64}));
  EXPECT_FALSE(deviceKindSupports("cuda", "Where", {DType::F32, DType::I64, DType::I64}));
}

}  // namespace
