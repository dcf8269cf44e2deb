// The CUDA backend's device-free decisions (runtime/cuda/Choices.h), no GPU needed: cuBLASLt
// operand alignment, the cuDNN workspace cap and algorithm choice, error texts.
#include <gtest/gtest.h>

#include "runtime/cuda/Choices.h"

using namespace tandem::cuda;

namespace {

TEST(CudaChoices, PointerAlignmentIsTheLargestPowerOfTwoDividingTheAddress) {
  EXPECT_EQ(pointerAlignment(0x7f0000001004), 4u);   // a broadcast matrix one float in
  EXPECT_EQ(pointerAlignment(0x7f0000001040), 64u);  // an arena slot (64-byte plan alignment)
  EXPECT_EQ(pointerAlignment(0x7f0000001002), 2u);
  EXPECT_EQ(pointerAlignment(0x7f0000001001), 1u);
  EXPECT_EQ(pointerAlignment(0x7f0000010000), 256u);  // cudaMalloc's alignment and more: capped
  EXPECT_EQ(pointerAlignment(0x7f0000001080), 128u);
  EXPECT_EQ(pointerAlignment(0), 256u);
  EXPECT_EQ(pointerAlignment(0x7f0000001040, 16), 16u);
}

TEST(CudaChoices, BatchAlignmentCoversEveryMatrixOfTheBatch) {
  uintptr_t base = 0x7f0000010000;  // 256-aligned
  // [M,K] = [3,6] floats: matrices 72 bytes apart, so the second is only 8-byte aligned.
  EXPECT_EQ(batchAlignment(base, 3 * 6 * 4, 4), 8u);
  EXPECT_EQ(batchAlignment(base, 3 * 6 * 4, 1), 256u);  // one matrix: the stride is never used
  EXPECT_EQ(batchAlignment(base, 0, 8), 256u);          // shared (broadcast) operand, stride 0
  EXPECT_EQ(batchAlignment(base + 4, 0, 8), 4u);
  EXPECT_EQ(batchAlignment(base + 64, 64 * 4, 3), 64u);
}

TEST(CudaChoices, CudnnWorkspaceCapFollowsTheArena) {
  EXPECT_EQ(kMaxCudnnWorkspaceBytes, size_t(256) << 20);
  EXPECT_EQ(cudnnWorkspaceCap(0), size_t(256) << 20);           // growing arena
  EXPECT_EQ(cudnnWorkspaceCap(size_t(1) << 30), size_t(128) << 20);  // fixed 1 GiB: 1/8
  EXPECT_EQ(cudnnWorkspaceCap(size_t(40) << 30), size_t(256) << 20); // fixed 40 GiB: 256 MiB
}

TEST(CudaChoices, FirstAlgorithmThatFitsTheCapIsChosen) {
  size_t MiB = size_t(1) << 20;
  // cuDNN's ranking: fastest first. The fastest wants 600 MiB, the second failed, the third fits.
  std::vector<AlgoCandidate> ranked = {{true, 600 * MiB}, {false, 0}, {true, 20 * MiB}, {true, 0}};
  EXPECT_EQ(firstAlgoWithin(ranked, 256 * MiB), 2);
  EXPECT_EQ(firstAlgoWithin(ranked, 1024 * MiB), 0);
  EXPECT_EQ(firstAlgoWithin(ranked, 1 * MiB), 3);
  EXPECT_EQ(firstAlgoWithin(ranked, 20 * MiB), 2);  // the cap is inclusive
  EXPECT_EQ(firstAlgoWithin({{true, 600 * MiB}, {false, 0}}, 256 * MiB), -1);
  EXPECT_EQ(firstAlgoWithin({}, 256 * MiB), -1);
}

TEST(CudaChoices, CublasStatusHasItsNameNotANumber) {
  std::string t = cublasStatusText("cublasLtMatmul", CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(t.rfind("cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED", 0), 0u) << t;
  EXPECT_EQ(t.find("status 15"), std::string::npos) << t;
  t = cublasStatusText("cublasLtCreate", CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_NE(t.find("CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos) << t;
}

TEST(CudaChoices, VersionText) {
  EXPECT_EQ(cudaVersionText(12080), "12.8");
  EXPECT_EQ(cudaVersionText(13000), "13.0");
  EXPECT_EQ(cudaVersionText(12040), "12.4");
  EXPECT_EQ(cudaVersionText(0), "none");
}

TEST(CudaChoices, DeviceCountProblemSaysWhichProblem) {
  // A driver older than the runtime: the versions, not "no driver".
  std::string t = deviceCountProblemText(cudaErrorInsufficientDriver, 0, 12040, 13000, nullptr);
  EXPECT_EQ(t.rfind("the CUDA driver is too old for this runtime: driver 12.4, runtime 13.0", 0), 0u) << t;
  // No driver at all (cudaDriverGetVersion gives 0): the runtime reports the same error code.
  t = deviceCountProblemText(cudaErrorInsufficientDriver, 0, 0, 13000, nullptr);
  EXPECT_EQ(t.rfind("no CUDA driver: cudaGetDeviceCount: ", 0), 0u) << t;
  t = deviceCountProblemText(cudaErrorNoDevice, 0, 13000, 13000, nullptr);
  EXPECT_EQ(t.rfind("no CUDA device: cudaGetDeviceCount: ", 0), 0u) << t;
  EXPECT_EQ(deviceCountProblemText(cudaSuccess, 0, 13000, 13000, "7"), "no CUDA device (CUDA_VISIBLE_DEVICES=7)");
  EXPECT_EQ(deviceCountProblemText(cudaSuccess, 0, 13000, 13000, nullptr), "no CUDA device");
  EXPECT_EQ(deviceCountProblemText(cudaSuccess, 2, 13000, 13000, nullptr), "");
}

}  // namespace
