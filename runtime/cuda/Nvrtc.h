// NVRTC: the plan's generated kernels gathered into one program, compiled once to a CUBIN for the
// device's real architecture (PTX only where NVRTC cannot emit one), cached on disk by a hash of
// (source, options, architecture, NVRTC version), loaded with the runtime API
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

/// The cache file of a compile: "<dir>/<arch>-<key>.cubin" for a real architecture ("sm_90"),
/// "<dir>/<arch>-<key>.ptx" for a virtual one ("compute_90"); the key is nvrtcCacheKey() with
/// this NVRTC's version.
std::string nvrtcCacheFile(const std::string& cacheDir, const std::string& source,
                           const std::vector<std::string>& options, const std::string& arch);

/// Compiles `source` for `arch`: a real architecture ("sm_90") gives a CUBIN (an ELF image the
/// driver loads without JIT), a virtual one ("compute_90") PTX text. With a non-empty
/// `cacheDir`, the cached image of the same file name is used instead (*cacheHit = true) and a
/// fresh result is stored there (written to a temporary, then renamed). Errors carry NVRTC's log,
/// or say why NVRTC cannot be loaded (it is opened here on first use: LazyLibraries.h).
Status nvrtcCompile(const std::string& source, const std::vector<std::string>& options,
                    const std::string& arch, const std::string& cacheDir, std::string* image,
                    bool* cacheHit);

/// What to compile the generated kernels to for a device of compute capability major.minor,
/// given the real architectures NVRTC supports (nvrtcGetSupportedArchs: 90 = sm_90): the newest
/// one <= the device's. A CUBIN runs on devices of its major version and a minor >= its own, so
/// when that architecture has the device's major it is "sm_XX" (cubin); otherwise (a device
/// newer than this NVRTC) "compute_XX" PTX, which the driver JIT-compiles. With no supported
/// list, the device's own "sm_XX".
struct NvrtcTarget {
  std::string arch;  // "sm_90" or "compute_100"
  bool cubin = false;
};
NvrtcTarget nvrtcTargetFor(int major, int minor, const std::vector<int>& supportedArchs);
/// The same with this NVRTC's list.
NvrtcTarget nvrtcTargetFor(int major, int minor);

/// The newest virtual architecture NVRTC can target that is <= sm_<major><minor> ("compute_90"):
/// the PTX fallback when no CUBIN can be made or loaded.
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
  /// only when kernels were added since the last load (earlier handles stay valid). A CUBIN for
  /// nvrtcTargetFor(ccMajor, ccMinor); PTX when NVRTC cannot emit that CUBIN or the driver
  /// refuses it. The error, when both fail, names both attempts.
  Status compileAndLoad(int ccMajor, int ccMinor);
  /// The kernel `name`; only after compileAndLoad().
  Status function(const std::string& name, cudaKernel_t* out) const;
  bool lastCompileWasCacheHit() const { return cacheHit_; }
  /// The architecture of the latest load ("sm_90", or "compute_90" for PTX); "" before one.
  const std::string& loadedArch() const { return loadedArch_; }
  /// Unloads every loaded library (its kernels must have finished); later function() calls fail.
  void unload();
  ~GeneratedProgram();

 private:
  std::map<std::string, std::string> sources_;
  cudaLibrary_t library_ = nullptr;            // the latest load: has every added kernel
  std::vector<cudaLibrary_t> older_;           // earlier loads, kept while kernels use them
  size_t loadedCount_ = 0;                     // sources_.size() at the latest load
  bool cacheHit_ = false;
  std::string loadedArch_;
};

/// Common device-side definitions every generated kernel may use (index math, dtype aliases).
const std::string& generatedPrelude();

}  // namespace cuda
}  // namespace tandem
