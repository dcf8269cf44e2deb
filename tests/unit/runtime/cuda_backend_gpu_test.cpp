// The CUDA backend on a real device (ctest label gpu): backends made and destroyed one after
// another keep working (a teardown leaves no error behind for the next launch to report), and
// cuBLASLt runs on operands only 4- or 64-byte aligned (arena slots, matrices inside a batch).
// Every result is compared with the CPU kernel. Without a GPU every test prints why and skips.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "runtime/Backend.h"
#include "runtime/Kernel.h"
#include "gpu_test_util.h"

using namespace tandem;

namespace {

Tensor randomF32(Shape s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  Tensor t = Tensor::alloc(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

struct Case {
  std::string op;
  AttrMap attrs;
  std::vector<Tensor> inputs;
  Shape out;
};

KernelContext contextFor(const Case& c) {
  KernelContext ctx;
  ctx.opType = c.op;
  ctx.nodeName = c.op;
  ctx.attrs = &c.attrs;
  for (const Tensor& t : c.inputs) {
    ctx.inputTypes.push_back({t.dtype(), t.shape()});
    ctx.constInputs.push_back(nullptr);
  }
  ctx.outputTypes = {{DType::F32, c.out}};
  return ctx;
}

// Runs `c` on `gpu` with every operand `misalign` bytes past a 256-byte boundary of one device
// block, and on the CPU; the largest |gpu - cpu| / (1 + |cpu|).
double runAndCompare(DeviceBackend& gpu, const Case& c, size_t misalign) {
  KernelContext ctx = contextFor(c);
  std::unique_ptr<Kernel> cpuK, k;
  Status st = KernelRegistry::global().create("cpu", ctx, &cpuK);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!st.isOk()) return 1e9;
  Tensor cpuOut = Tensor::alloc(DType::F32, c.out);
  std::vector<const Tensor*> cin;
  for (const Tensor& t : c.inputs) cin.push_back(&t);
  EXPECT_TRUE(cpuK->run(cin, {&cpuOut}).isOk());

  st = gpu.createKernel(ctx, &k);
  EXPECT_TRUE(st.isOk()) << c.op << ": " << st.message();
  if (!st.isOk()) return 1e9;
  st = gpu.finishLoad({k.get()});
  EXPECT_TRUE(st.isOk()) << st.message();
  auto slot = [&](size_t bytes) { return (bytes + 255) / 256 * 256 + 256; };
  size_t total = slot(cpuOut.bytes());
  for (const Tensor& t : c.inputs) total += slot(t.bytes());
  void* block = nullptr;
  EXPECT_TRUE(gpu.allocate(total, "test operands", &block).isOk());
  uint8_t* cursor = static_cast<uint8_t*>(block);
  std::vector<Tensor> din;
  for (const Tensor& t : c.inputs) {
    din.push_back(Tensor::view(t.dtype(), t.shape(), cursor + misalign));
    EXPECT_TRUE(gpu.copyFromHost(cursor + misalign, t.raw(), t.bytes()).isOk());
    cursor += slot(t.bytes());
  }
  Tensor dout = Tensor::view(DType::F32, c.out, cursor + misalign);
  EXPECT_TRUE(gpu.synchronize().isOk());
  std::vector<const Tensor*> gin;
  for (Tensor& t : din) gin.push_back(&t);
  st = gpu.launch(*k, gin, {&dout});
  EXPECT_TRUE(st.isOk()) << c.op << " misaligned by " << misalign << ": " << st.message();
  st = gpu.synchronize();
  EXPECT_TRUE(st.isOk()) << c.op << " misaligned by " << misalign << ": " << st.message();
  Tensor host = Tensor::alloc(DType::F32, c.out);
  EXPECT_TRUE(gpu.copyToHost(host.raw(), dout.raw(), host.bytes()).isOk());
  EXPECT_TRUE(gpu.synchronize().isOk());
  k.reset();
  gpu.deallocate(block);
  double worst = 0;
  for (int64_t i = 0; i < host.numel(); ++i) {
    double g = host.data<float>()[i], r = cpuOut.data<float>()[i];
    worst = std::max(worst, std::isnan(g) ? 1e9 : std::fabs(g - r) / (1 + std::fabs(r)));
  }
  return worst;
}

// A teardown that synchronised an already destroyed stream left "invalid resource handle" in
// cudart's per-thread error slot, and the next launch of any backend reported it as its own.
TEST(CudaBackend, BackendsMadeOneAfterAnotherKeepWorking) {
  REQUIRE_GPU();
  Case relu{"Relu", {}, {randomF32({1000}, 1)}, {1000}};
  Case mm{"MatMul", {}, {randomF32({31, 47}, 2), randomF32({47, 29}, 3)}, {31, 29}};
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("backend " + std::to_string(round));
    std::unique_ptr<DeviceBackend> gpu;
    Status st = createCudaBackend(0, BackendOptions{}, &gpu);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_LE(runAndCompare(*gpu, relu, 0), 0.0);
    EXPECT_LE(runAndCompare(*gpu, mm, 0), 1e-4);
    gpu.reset();
    cudaError_t left = cudaPeekAtLastError();
    EXPECT_EQ(left, cudaSuccess) << "the teardown left " << cudaGetErrorName(left);
  }
}

// Arena slots are 64-byte aligned and per-matrix pointers of a broadcast batch element aligned;
// cuBLASLt's default preference (256) would pick algorithms that need more.
TEST(CudaBackend, MatMulOnOperandsOnly4Or64ByteAligned) {
  REQUIRE_GPU();
  std::unique_ptr<DeviceBackend> gpu;
  ASSERT_TRUE(createCudaBackend(0, BackendOptions{}, &gpu).isOk());
  std::vector<Case> cases = {
      {"MatMul", {}, {randomF32({64, 128}, 4), randomF32({128, 96}, 5)}, {64, 96}},
      {"MatMul", {}, {randomF32({3, 7, 5}, 6), randomF32({3, 5, 6}, 7)}, {3, 7, 6}},        // odd strides
      {"MatMul", {}, {randomF32({7, 5}, 8), randomF32({4, 5, 6}, 9)}, {4, 7, 6}},           // A shared
      {"MatMul", {}, {randomF32({2, 1, 7, 5}, 10), randomF32({1, 3, 5, 6}, 11)}, {2, 3, 7, 6}},
      {"Gemm", {}, {randomF32({33, 65}, 12), randomF32({65, 17}, 13), randomF32({17}, 14)}, {33, 17}},
  };
  for (size_t misalign : {size_t(0), size_t(4), size_t(64)})
    for (const Case& c : cases) {
      SCOPED_TRACE(c.op + " " + shapeToString(c.inputs[0].shape()) + " x " + shapeToString(c.inputs[1].shape()) +
                   ", operands " + std::to_string(misalign) + " bytes past 256");
      EXPECT_LE(runAndCompare(*gpu, c, misalign), 1e-4);
    }
}

}  // namespace
