// NVRTC: the plan's generated kernels gathered into one program, compiled once to PTX, cached on
// disk by a hash of (source, options, architecture, NVRTC version), loaded with the runtime API
// (cudaLibraryLoadData / cudaLibraryGetKernel, CUDA 12+). Compilation needs no GPU.
#pragma once
#include <cuda_runtime_api.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/Status.h"

namespace tandem {
namespace cuda {

/// The NVRTC version as "major.minor", or "" when NVRTC cannot be queried.
std::string nvrtcVersionText();

/// Hex key of a compiled program: a 128-bit FNV-1a hash of each part with separators.
std::string nvrtcCacheKey(const std::string& source, const std::vector<std::string>& options,
                          const std::string& arch, const std::string& nvrtcVersion);

/// Cache directory: $TANDEM_NVRTC_CACHE, else $XDG_CACHE_HOME/tandem/nvrtc, else
/// ~/.cache/tandem/nvrtc. "" when none can be determined (no caching).
std::string nvrtcCacheDir();

/// Compiles `source` for virtual architecture `arch` ("compute_90") to PTX. With a non-empty
/// `cacheDir`, a cached PTX for the same key is used instead (*cacheHit = true) and a fresh
/// result is stored there (written to a temporary, then renamed). Errors carry NVRTC's log, or
/// say why NVRTC cannot be loaded (it is opened here on first use: LazyLibraries.h).
Status compileToPtx(const std::string& source, const std::vector<std::string>& options,
                    const std::string& arch, const std::string& cacheDir, std::string* ptx,
                    bool* cacheHit);

/// The newest virtual architecture NVRTC can target that is <= sm_<major><minor> ("compute_90").
std::string ptxArchFor(int major, int minor);

/// The options every Tandem program is compiled with.
const std::vector<std::string>& nvrtcOptions();

/// The generated kernels of one plan on one device. Kernel factories add sources at load time
/// (identical names are shared: a name fully determines its source); compile() builds them all
/// in one NVRTC program; function() then returns a launchable handle.
class GeneratedProgram {
 public:
  /// Adds `source` (one or more __global__ functions, `name` among them, extern "C").
  /// Returns an error when the same name was added with a different source.
  Status add(const std::string& name, const std::string& source);
  bool empty() const { return sources_.empty(); }
  /// The whole translation unit: the prelude, then every added source in name order.
  std::string translationUnit() const;
  /// Compiles (or takes from the cache) and loads the program on the current device; again
  /// only when kernels were added since the last load (earlier handles stay valid).
  Status compileAndLoad(int ccMajor, int ccMinor);
  /// The kernel `name`; only after compileAndLoad().
  Status function(const std::string& name, cudaKernel_t* out) const;
  bool lastCompileWasCacheHit() const { return cacheHit_; }
  ~GeneratedProgram();

 private:
  std::map<std::string, std::string> sources_;
  cudaLibrary_t library_ = nullptr;            // the latest load: has every added kernel
  std::vector<cudaLibrary_t> older_;           // earlier loads, kept while kernels use them
  size_t loadedCount_ = 0;                     // sources_.size() at the latest load
  bool cacheHit_ = false;
};

/// Common device-side definitions every generated kernel may use (index math, dtype aliases).
const std::string& generatedPrelude();

}  // namespace cuda
}  // namespace tandem
