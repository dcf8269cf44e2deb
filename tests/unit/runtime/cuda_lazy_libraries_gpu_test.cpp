// On a GPU: a device whose cuBLASLt or cuDNN cannot be loaded is refused by createCudaBackend with
// the library's name, and shown by discovery with the library "unavailable" and a note; once the
// cause is gone the same process creates the backend. Skips (label gpu) without a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/Backend.h"
#include "runtime/Device.h"
#include "runtime/cuda/LazyLibraries.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(LazyLibrariesGpu, AMissingLibraryFailsTheBackendByName) {
  setenv("TANDEM_CUBLASLT_LIBRARY", "/nonexistent/libcublasLt.so.13", 1);
  setenv("TANDEM_CUDNN_LIBRARY", "/nonexistent/libcudnn.so.9", 1);
  std::unique_ptr<DeviceBackend> b;
  Status st = createCudaBackend(0, BackendOptions{}, &b);
  if (!st.isOk() && st.message().rfind("no CUDA", 0) == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", st.message().c_str());
    GTEST_SKIP() << st.message();
  }
  ASSERT_FALSE(st.isOk());
  EXPECT_TRUE(contains(st.message(), "cannot load cuBLASLt (/nonexistent/libcublasLt.so.13")) << st.message();
  EXPECT_TRUE(contains(st.message(), "TANDEM_CUBLASLT_LIBRARY")) << st.message();

  // Discovery still lists the device, says cuDNN is unavailable and why.
  bool sawCuda = false;
  for (const DeviceInfo& d : discoverDevices()) {
    if (d.kind != "cuda") continue;
    sawCuda = true;
    for (auto& p : d.properties) {
      if (p.first == "cudnn") { EXPECT_EQ(p.second, "unavailable"); }
    }
  }
  EXPECT_TRUE(sawCuda);
  bool noted = false;
  for (const std::string& n : discoveryNotes()) noted |= contains(n, "cannot load cuDNN (/nonexistent/libcudnn.so.9");
  EXPECT_TRUE(noted);

  unsetenv("TANDEM_CUBLASLT_LIBRARY");
  unsetenv("TANDEM_CUDNN_LIBRARY");
  st = createCudaBackend(0, BackendOptions{}, &b);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_TRUE(cudaLibraryLoaded(CudaLibrary::CublasLt));
  EXPECT_TRUE(cudaLibraryLoaded(CudaLibrary::Cudnn));
  EXPECT_TRUE(cudaLibraryLoaded(CudaLibrary::Nvrtc));
}

}  // namespace
