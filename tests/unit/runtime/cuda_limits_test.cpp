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

Status createOn(DeviceContext& dc, const std::string& op, const AttrMap& attrs, std::vector<TensorType> in,
                std::vector<TensorType> out, std::unique_ptr<Kernel>* k) {
  KernelContext ctx;
  ctx.opType = op;
  ctx.nodeName = "n1";
  ctx.attrs = &attrs;
  ctx.inputTypes = std::move(in);
  ctx.outputTypes = std::move(out);
  ctx.constInputs.assign(ctx.inputTypes.size(), nullptr);
  ctx.cuda = &dc;
  return KernelRegistry::global().create("cuda", ctx, k);
}

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }

// 2 * 32768 * 32769 = 2^31 + 65536 elements: past what cuDNN's int sizes describe.
const Shape kBig4d = {1, 2, 32768, 32769};

TEST(CudaLimits, BatchNormOf2To31ElementsUsesTheGeneratedKernel) {
  DeviceContext dc;
  AttrMap attrs;
  TensorType c = f32({2});
  std::unique_ptr<Kernel> k;
  Status st = createOn(dc, "BatchNormalization", attrs, {f32(kBig4d), c, c, c, c}, {f32(kBig4d)}, &k);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(k->implName(), "nvrtc");
  // Below the limit the 4-D case stays with cuDNN.
  k.reset();
  st = createOn(dc, "BatchNormalization", attrs, {f32({1, 2, 8, 8}), c, c, c, c}, {f32({1, 2, 8, 8})}, &k);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(k->implName(), "cudnn");
}

TEST(CudaLimits, PoolingOf2To31ElementsIsALoadError) {
  DeviceContext dc;
  AttrMap attrs;
  attrs.set("kernel_shape", Attr::ofInts({1, 1}));
  std::unique_ptr<Kernel> k;
  Status st = createOn(dc, "MaxPool", attrs, {f32(kBig4d)}, {f32(kBig4d)}, &k);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("op 'n1' (MaxPool): [1,2,32768,32769] has 2147549184 elements; cuDNN pooling"),
            std::string::npos)
      << st.message();
}

TEST(CudaLimits, PoolingWithAnEmptyOutputDoesNothing) {
  DeviceContext dc;
  AttrMap attrs;
  attrs.set("kernel_shape", Attr::ofInts({3, 3}));
  for (Shape x : {Shape{0, 3, 8, 8}, Shape{2, 0, 8, 8}}) {
    Shape y = x;
    y[2] = y[3] = 6;
    std::unique_ptr<Kernel> k;
    Status st = createOn(dc, "MaxPool", attrs, {f32(x)}, {f32(y)}, &k);
    ASSERT_TRUE(st.isOk()) << shapeToString(x) << ": " << st.message();
    EXPECT_EQ(k->implName(), "none (empty output)");
    Tensor in = Tensor::view(DType::F32, x, nullptr), out = Tensor::view(DType::F32, y, nullptr);
    EXPECT_TRUE(k->run({&in}, {&out}).isOk());
  }
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(createOn(dc, "GlobalAveragePool", AttrMap(), {f32({0, 4, 5, 5})}, {f32({0, 4, 1, 1})}, &k).isOk());
  EXPECT_EQ(k->implName(), "none (empty output)");
}

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
