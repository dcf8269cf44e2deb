// Limits of the CUDA kernels that show without a GPU (kernels created on a context with no
// device, launch helpers called before they reach the driver): sizes cuDNN's int descriptors
// cannot hold, empty outputs, launch geometry the generated block reductions rely on.
#include <gtest/gtest.h>

#include "runtime/Kernel.h"
#include "runtime/cuda/CudaCommon.h"
#include "runtime/cuda/Generated.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

TEST(CudaLimits, BlockLaunchesNeedWholeWarps) {
  DeviceContext dc;  // no device: a launch that got past the checks would fail in the driver
  for (int threads : {0, 16, 48, 100, 2048}) {
    Status st = launchBlocks(dc, nullptr, 10, threads, nullptr);
    ASSERT_FALSE(st.isOk()) << threads;
    EXPECT_NE(st.message().find("a multiple of 32 up to 1024"), std::string::npos) << st.message();
  }
  // Nothing to do launches nothing (a zero-sized grid is a CUDA error): ok without a device.
  EXPECT_TRUE(launchBlocks(dc, nullptr, 0, 256, nullptr).isOk());
  EXPECT_TRUE(launchGridStride(dc, nullptr, 0, nullptr).isOk());
}

}  // namespace
