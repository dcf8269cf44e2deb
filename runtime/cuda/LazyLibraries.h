// cuBLASLt, cuDNN and NVRTC opened with dlopen when a CUDA device is first used, not at process
// start: the binary does not link them, so a CPU-only run never maps them (libcublasLt alone is
// 541 MB, libnvrtc 109 MB).
//
// Each library function Tandem calls is defined once, with C linkage and the header's exact
// signature, in CublasLtStubs.cpp / CudnnStubs.cpp / NvrtcStubs.cpp (TensorFlow's
// stream_executor *_stub.cc scheme): the first call resolves the real symbol with dlsym and
// caches it. Code calls cublasLtMatmul, cudnnConvolutionForward, nvrtcCompileProgram as usual.
// A stub whose library cannot be loaded returns the library's own failure code
// (CUBLAS_STATUS_NOT_INITIALIZED, CUDNN_STATUS_NOT_INITIALIZED, NVRTC_ERROR_INTERNAL_ERROR; 0
// for version queries) and never crashes; loadCudaLibrary() says why. The backend calls
// loadCudaLibrary() before the first library call so that the user sees that reason rather
// than a bare status code.
#pragma once
#include <atomic>
#include <string>

#include "runtime/Status.h"

namespace tandem {
namespace cuda {

enum class CudaLibrary { CublasLt, Cudnn, Nvrtc };

/// "cuBLASLt", "cuDNN", "NVRTC".
const char* cudaLibraryName(CudaLibrary which);

/// The file name tried first, "libcublasLt.so.13", "libcudnn.so.9", "libnvrtc.so.13": the major
/// version of the headers this binary was compiled against (CUBLAS_VER_MAJOR, CUDNN_MAJOR,
/// CUDART_VERSION / 1000 for NVRTC, which follows the toolkit's version).
std::string cudaLibrarySoname(CudaLibrary which);

/// The environment variable that names the library file instead of the search below:
/// TANDEM_CUBLASLT_LIBRARY, TANDEM_CUDNN_LIBRARY, TANDEM_NVRTC_LIBRARY.
const char* cudaLibraryEnvVar(CudaLibrary which);

/// Loads `which` (thread-safe). Search: the file named by cudaLibraryEnvVar() if set (and only
/// it); else the soname through the dynamic loader (LD_LIBRARY_PATH, ldconfig), then the soname
/// in the directory the build found the library in, then the unversioned "libX.so". A loaded
/// library whose major version differs from the headers' is refused (the ABI differs).
/// Success is cached for the process; a failure is retried on the next call (cheap: a missed
/// dlopen), so setting the variable or installing the library later takes effect.
/// Errors name the library, the file tried, dlerror()'s text and the remedy, e.g.
/// "cannot load cuBLASLt (libcublasLt.so.13: cannot open shared object file: No such file or
/// directory); the CUDA backend needs it: install cuBLASLt 13 (CUDA 13 toolkit or the libcublas
/// package) or add its directory to LD_LIBRARY_PATH, or set TANDEM_CUBLASLT_LIBRARY to the file".
Status loadCudaLibrary(CudaLibrary which);

/// Whether `which` is loaded now; never loads it.
bool cudaLibraryLoaded(CudaLibrary which);

/// The address of `symbol` in `which`, loading the library first; nullptr when the library cannot
/// be loaded or lacks the symbol (an older minor version).
void* cudaLibrarySymbol(CudaLibrary which, const char* symbol);

/// For the stubs: `slot` caches the resolved pointer (a failed resolution is retried next call).
template <typename Fn>
Fn lazyFunction(CudaLibrary which, const char* symbol, std::atomic<Fn>& slot) {
  Fn f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = reinterpret_cast<Fn>(cudaLibrarySymbol(which, symbol));
    if (f) slot.store(f, std::memory_order_release);
  }
  return f;
}

}  // namespace cuda
}  // namespace tandem

/// Defines NAME with C linkage: forwards ARGS to the library's NAME, or returns FAIL when the
/// library cannot be loaded. PARAMS repeats the header's parameter list; a mismatch is a compile
/// error (C functions cannot be overloaded), so the stubs cannot drift from the headers.
#define TANDEM_CUDA_STUB(LIB, FAIL, RET, NAME, PARAMS, ARGS)                               \
  extern "C" RET NAME PARAMS {                                                             \
    static std::atomic<decltype(&::NAME)> slot{nullptr};                                   \
    auto f = ::tandem::cuda::lazyFunction(::tandem::cuda::CudaLibrary::LIB, #NAME, slot);  \
    return f ? f ARGS : (FAIL);                                                            \
  }
