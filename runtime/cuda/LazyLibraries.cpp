// Finding, opening and version-checking cuBLASLt, cuDNN and NVRTC at first use (dlopen).
#include "runtime/cuda/LazyLibraries.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn_version.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace tandem {
namespace cuda {

namespace {

struct LibraryInfo {
  const char* name;      // for messages
  const char* stem;      // "libcublasLt"
  int major;             // of the headers
  const char* envVar;
  const char* buildDir;  // where CMake found it; "" when unknown
  const char* package;   // what to install
};

#ifndef TANDEM_CUDA_LIBRARY_DIR
#define TANDEM_CUDA_LIBRARY_DIR ""
#endif
#ifndef TANDEM_CUDNN_LIBRARY_DIR
#define TANDEM_CUDNN_LIBRARY_DIR ""
#endif

const LibraryInfo& info(CudaLibrary which) {
  // NVRTC has no version macro of its own; its soname follows the toolkit's major version.
  static const LibraryInfo table[] = {
      {"cuBLASLt", "libcublasLt", CUBLAS_VER_MAJOR, "TANDEM_CUBLASLT_LIBRARY", TANDEM_CUDA_LIBRARY_DIR,
       "the CUDA toolkit or the libcublas package"},
      {"cuDNN", "libcudnn", CUDNN_MAJOR, "TANDEM_CUDNN_LIBRARY", TANDEM_CUDNN_LIBRARY_DIR,
       "NVIDIA's cudnn package for this CUDA version"},
      {"NVRTC", "libnvrtc", CUDART_VERSION / 1000, "TANDEM_NVRTC_LIBRARY", TANDEM_CUDA_LIBRARY_DIR,
       "the CUDA toolkit or the cuda-nvrtc package"},
  };
  return table[(int)which];
}

// The major version of a freshly opened library from its own version query, or -1 when the
// file lacks the query (then it is not the library it was named as).
const char* versionSymbol(CudaLibrary which) {
  switch (which) {
    case CudaLibrary::CublasLt: return "cublasLtGetVersion";
    case CudaLibrary::Cudnn: return "cudnnGetVersion";
    case CudaLibrary::Nvrtc: return "nvrtcVersion";
  }
  return "";
}

int loadedMajor(CudaLibrary which, void* handle) {
  void* query = dlsym(handle, versionSymbol(which));
  if (!query) return -1;
  if (which == CudaLibrary::Nvrtc) {
    int major = -1, minor = 0;
    return reinterpret_cast<int (*)(int*, int*)>(query)(&major, &minor) == 0 ? major : -1;
  }
  // cuBLASLt and cuDNN 9 both count major * 10000 + minor * 100 + patch.
  return (int)(reinterpret_cast<size_t (*)()>(query)() / 10000);
}

struct Loaded {
  std::mutex mu;
  std::atomic<void*> handle[3] = {nullptr, nullptr, nullptr};
};

Loaded& loaded() {
  static Loaded* l = new Loaded();  // never destroyed: stubs may run during static destruction
  return *l;
}

std::string remedy(CudaLibrary which) {
  const LibraryInfo& i = info(which);
  return std::string("; the CUDA backend needs it: install ") + i.name + " " + std::to_string(i.major) +
         " (" + i.package + ") or add its directory to LD_LIBRARY_PATH, or set " + i.envVar +
         " to the file";
}

}  // namespace

const char* cudaLibraryName(CudaLibrary which) { return info(which).name; }

std::string cudaLibrarySoname(CudaLibrary which) {
  return std::string(info(which).stem) + ".so." + std::to_string(info(which).major);
}

const char* cudaLibraryEnvVar(CudaLibrary which) { return info(which).envVar; }

bool cudaLibraryLoaded(CudaLibrary which) {
  return loaded().handle[(int)which].load(std::memory_order_acquire) != nullptr;
}

Status loadCudaLibrary(CudaLibrary which) {
  Loaded& l = loaded();
  if (l.handle[(int)which].load(std::memory_order_acquire)) return Status::ok();
  std::lock_guard<std::mutex> lock(l.mu);
  if (l.handle[(int)which].load(std::memory_order_relaxed)) return Status::ok();

  const LibraryInfo& i = info(which);
  std::vector<std::string> candidates;
  const char* env = std::getenv(i.envVar);
  if (env && *env) {
    candidates.push_back(env);  // the user's choice is the only one: no silent substitute
  } else {
    std::string soname = cudaLibrarySoname(which);
    candidates.push_back(soname);
    if (*i.buildDir) candidates.push_back(std::string(i.buildDir) + "/" + soname);
    candidates.push_back(std::string(i.stem) + ".so");
  }
  std::string firstError;
  for (const std::string& file : candidates) {
    // RTLD_NOW: a library missing a dependency fails here, with dlerror's text, rather than
    // aborting the process at the first call. RTLD_LOCAL: its symbols stay out of the global
    // scope, where they would meet our stubs of the same names.
    void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      if (firstError.empty()) {
        const char* e = dlerror();
        firstError = e ? e : file + ": dlopen failed";
      }
      continue;
    }
    // A different major version has a different ABI: refuse it rather than crash in a call.
    int major = loadedMajor(which, h);
    if (major != i.major) {
      if (firstError.empty())
        firstError = major < 0 ? file + " has no " + versionSymbol(which) + ": it is not " + i.name
                               : file + " is " + i.name + " " + std::to_string(major) +
                                     ", this build needs " + std::to_string(i.major);
      dlclose(h);
      continue;
    }
    l.handle[(int)which].store(h, std::memory_order_release);
    return Status::ok();
  }
  return Status::error(std::string("cannot load ") + i.name + " (" + firstError + ")" +
                       (env && *env ? std::string(" named by ") + i.envVar : std::string()) +
                       remedy(which));
}

void* cudaLibrarySymbol(CudaLibrary which, const char* symbol) {
  if (!loadCudaLibrary(which).isOk()) return nullptr;
  return dlsym(loaded().handle[(int)which].load(std::memory_order_acquire), symbol);
}

}  // namespace cuda
}  // namespace tandem
