// The on-demand loader of cuBLASLt, cuDNN and NVRTC (runtime/cuda/LazyLibraries.h), no GPU
// needed: the stubs forward to the real library once it is loaded; a library that cannot be
// loaded makes its stubs return its "not initialized" code and the loader's message names it,
// the file and the remedy; a retry after the cause is gone succeeds. Each library is loaded only
// when first called.
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "runtime/cuda/CudaCommon.h"
#include "runtime/cuda/LazyLibraries.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

bool mapped(const std::string& stem) {
  std::ifstream in("/proc/self/maps");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str().find("/" + stem) != std::string::npos;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(LazyLibraries, SonamesCarryTheHeadersMajorVersions) {
  EXPECT_EQ(cudaLibrarySoname(CudaLibrary::CublasLt), "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_EQ(cudaLibrarySoname(CudaLibrary::Cudnn), "libcudnn.so." + std::to_string(CUDNN_MAJOR));
  EXPECT_EQ(cudaLibrarySoname(CudaLibrary::Nvrtc), "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000));
}

TEST(LazyLibraries, NvrtcStubsLoadOnlyNvrtc) {
  ASSERT_FALSE(mapped("libnvrtc.so"));
  int major = -1, minor = -1;
  ASSERT_EQ(nvrtcVersion(&major, &minor), NVRTC_SUCCESS);
  EXPECT_EQ(major, CUDART_VERSION / 1000);
  EXPECT_GE(minor, 0);
  EXPECT_LT(minor, 100);
  EXPECT_EQ(nvrtcVersionText(), std::to_string(major) + "." + std::to_string(minor));
  EXPECT_TRUE(cudaLibraryLoaded(CudaLibrary::Nvrtc));
  EXPECT_TRUE(mapped("libnvrtc.so"));
  EXPECT_FALSE(mapped("libcublasLt.so")) << "calling NVRTC loaded cuBLASLt too";
  EXPECT_EQ(std::string(nvrtcGetErrorString(NVRTC_ERROR_INVALID_INPUT)), "NVRTC_ERROR_INVALID_INPUT");
}

TEST(LazyLibraries, NvrtcCubinStubs) {
  // A real architecture (sm_90) gives a cubin: an ELF image.
  nvrtcProgram prog;
  ASSERT_EQ(nvrtcCreateProgram(&prog, "extern \"C\" __global__ void k(float* p) { p[0] = 1.f; }", "k.cu", 0,
                               nullptr, nullptr),
            NVRTC_SUCCESS);
  const char* opts[] = {"--gpu-architecture=sm_90"};
  ASSERT_EQ(nvrtcCompileProgram(prog, 1, opts), NVRTC_SUCCESS);
  size_t size = 0;
  ASSERT_EQ(nvrtcGetCUBINSize(prog, &size), NVRTC_SUCCESS);
  ASSERT_GT(size, 64u);
  std::string cubin(size, '\0');
  ASSERT_EQ(nvrtcGetCUBIN(prog, &cubin[0]), NVRTC_SUCCESS);
  EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(nvrtcDestroyProgram(&prog), NVRTC_SUCCESS);
}

TEST(LazyLibraries, AMissingCublasLtIsNamedAndItsStubsFailCleanly) {
  if (cudaLibraryLoaded(CudaLibrary::CublasLt)) GTEST_SKIP() << "cuBLASLt was loaded by an earlier test";
  setenv("TANDEM_CUBLASLT_LIBRARY", "/nonexistent/libcublasLt.so.13", 1);
  Status st = loadCudaLibrary(CudaLibrary::CublasLt);
  ASSERT_FALSE(st.isOk());
  EXPECT_TRUE(contains(st.message(), "cannot load cuBLASLt (/nonexistent/libcublasLt.so.13: cannot open shared object file"))
      << st.message();
  EXPECT_TRUE(contains(st.message(), "named by TANDEM_CUBLASLT_LIBRARY")) << st.message();
  EXPECT_TRUE(contains(st.message(), "LD_LIBRARY_PATH")) << st.message();
  // The stubs answer with cuBLASLt's own codes, and check() turns that into the loader's message.
  cublasLtHandle_t h = nullptr;
  EXPECT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasLtGetVersion(), 0u);
  Status checked = check(cublasLtCreate(&h), "cublasLtCreate");
  EXPECT_EQ(checked.message(), "cublasLtCreate: " + st.message());
  EXPECT_FALSE(mapped("libcublasLt.so"));

  // The cause removed, the next call loads it: failures are not cached.
  unsetenv("TANDEM_CUBLASLT_LIBRARY");
  st = loadCudaLibrary(CudaLibrary::CublasLt);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(cublasLtGetVersion() / 10000, (size_t)CUBLAS_VER_MAJOR);
  EXPECT_EQ(std::string(cublasLtGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED)), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_FALSE(std::string(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE)).empty());
  EXPECT_TRUE(mapped("libcublasLt.so"));
}

TEST(LazyLibraries, AFileThatIsNotTheLibraryIsRefused) {
  if (cudaLibraryLoaded(CudaLibrary::Cudnn)) GTEST_SKIP() << "cuDNN was loaded by an earlier test";
  // NVRTC loads fine but has no cudnnGetVersion: taking it for cuDNN would crash at a call.
  setenv("TANDEM_CUDNN_LIBRARY", cudaLibrarySoname(CudaLibrary::Nvrtc).c_str(), 1);
  Status st = loadCudaLibrary(CudaLibrary::Cudnn);
  ASSERT_FALSE(st.isOk());
  EXPECT_TRUE(contains(st.message(), "cannot load cuDNN (" + cudaLibrarySoname(CudaLibrary::Nvrtc) +
                                         " has no cudnnGetVersion: it is not cuDNN)"))
      << st.message();
  cudnnHandle_t h = nullptr;
  EXPECT_EQ(cudnnCreate(&h), CUDNN_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cudnnGetVersion(), 0u);

  unsetenv("TANDEM_CUDNN_LIBRARY");
  ASSERT_TRUE(loadCudaLibrary(CudaLibrary::Cudnn).isOk());
  EXPECT_EQ(cudnnGetVersion() / 10000, (size_t)CUDNN_MAJOR);
  EXPECT_EQ(std::string(cudnnGetErrorString(CUDNN_STATUS_SUCCESS)), "CUDNN_STATUS_SUCCESS");
}

}  // namespace
