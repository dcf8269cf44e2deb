// NVRTC compilation (CUBIN, PTX as the fallback), the on-disk cache and loading through
// cudaLibraryLoadData.
#include "runtime/cuda/Nvrtc.h"

#include "runtime/cuda/LazyLibraries.h"

#include <nvrtc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tandem {
namespace cuda {

const std::string& generatedPrelude() {
  // NVRTC has no standard headers: the few types and helpers kernels need are defined here.
  static const std::string s = R"(
typedef long long i64;
typedef unsigned long long u64;
typedef int i32;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef signed char i8;
#define TD_MAX_RANK 8
// Geometry of one launch over an iteration space of `rank` dims (row-major, `n` elements).
// Output element offset: obase + sum(idx_d * ostr_d); input k: ibase[k] + sum((idx_d % imod_d) *
// istr[k][d]); a broadcast dim has stride 0. aux: per-op extra (Pad begin pads, reduced dims).
struct TdGeo {
  i64 n;
  i32 rank;
  i32 contiguous;  // every operand is dense with the iteration shape: offsets are the index
  i64 dims[TD_MAX_RANK];
  i64 ostr[TD_MAX_RANK];
  i64 istr[3][TD_MAX_RANK];
  i64 imod[TD_MAX_RANK];
  i64 aux[TD_MAX_RANK];
  i64 obase;
  i64 ibase[3];
  float alpha, beta;
};
__device__ __forceinline__ float td_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float td_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float td_warp_min(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Block-wide reductions (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
#define TD_BLOCK_REDUCE(NAME, WARP, INIT)                                   \
  __device__ __forceinline__ float NAME(float v) {                          \
    __shared__ float sh[32];                                                \
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;                   \
    v = WARP(v);                                                            \
    __syncthreads();                                                        \
    if (lane == 0) sh[warp] = v;                                            \
    __syncthreads();                                                        \
    v = (lane < (blockDim.x >> 5)) ? sh[lane] : (INIT);                     \
    return WARP(v);                                                         \
  }
TD_BLOCK_REDUCE(td_block_sum, td_warp_sum, 0.0f)
TD_BLOCK_REDUCE(td_block_max, td_warp_max, -__int_as_float(0x7f800000))
TD_BLOCK_REDUCE(td_block_min, td_warp_min, __int_as_float(0x7f800000))
// Philox4x32-10 in place on the counter c: runtime/Philox.h's philox4x32_10, word for word, so
// a Dropout mask drawn here is the CPU kernel's.
__device__ __forceinline__ void td_philox4x32_10(u32 c[4], u32 k0, u32 k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const u32 hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
    const u32 hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
    const u32 c1 = c[1], c3 = c[3];
    c[0] = hi1 ^ c1 ^ k0;
    c[1] = lo1;
    c[2] = hi0 ^ c3 ^ k1;
    c[3] = lo0;
  }
}
)";
  return s;
}

const std::vector<std::string>& nvrtcOptions() {
  // No fast math: results must match the CPU kernels within FP32 rounding.
  static const std::vector<std::string> o = {"--std=c++17", "-default-device", "-lineinfo"};
  return o;
}

std::string nvrtcVersionText() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string nvrtcCacheKey(const std::string& source, const std::vector<std::string>& options,
                          const std::string& arch, const std::string& version) {
  // Two FNV-1a streams with different offsets make a 128-bit key; each part ends with a 0 byte
  // so ("ab","c") and ("a","bc") differ.
  uint64_t h1 = 1469598103934665603ull, h2 = 0x6c62272e07bb0142ull;
  auto feed = [&](const std::string& s) {
    for (unsigned char c : s) {
      h1 = (h1 ^ c) * 1099511628211ull;
      h2 = (h2 ^ c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
    }
    h1 = (h1 ^ 0xffu) * 1099511628211ull;
    h2 = (h2 ^ 0xffu) * 0x100000001b3ull;
  };
  feed(source);
  for (const std::string& o : options) feed(o);
  feed(arch);
  feed(version);
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
  return buf;
}

std::string nvrtcCacheDir() {
  if (const char* d = std::getenv("TANDEM_NVRTC_CACHE")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/tandem/nvrtc";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/tandem/nvrtc";
  return "";
}

namespace {

bool makeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string p = path.substr(0, i);
      if (mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  }
  return true;
}

Status nvrtcError(nvrtcResult r, const char* call) {
  return Status::error(std::string("NVRTC ") + call + ": " + nvrtcGetErrorString(r));
}

std::vector<int> supportedArchs() {
  std::vector<int> archs;
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
    archs.resize(n);
    if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) archs.clear();
  }
  return archs;
}

bool isCubinArch(const std::string& arch) { return arch.rfind("sm_", 0) == 0; }

bool readFile(const std::string& file, std::string* out) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return !out->empty();
}

}  // namespace

NvrtcTarget nvrtcTargetFor(int major, int minor, const std::vector<int>& supported) {
  int want = major * 10 + minor, best = 0;
  for (int a : supported)
    if (a <= want && a > best) best = a;
  if (best == 0) return {"sm_" + std::to_string(want), true};
  if (best / 10 == major) return {"sm_" + std::to_string(best), true};
  return {"compute_" + std::to_string(best), false};
}

NvrtcTarget nvrtcTargetFor(int major, int minor) { return nvrtcTargetFor(major, minor, supportedArchs()); }

std::string ptxArchFor(int major, int minor) {
  int want = major * 10 + minor, best = 0;
  for (int a : supportedArchs())
    if (a <= want && a > best) best = a;
  if (best == 0) best = want;
  return "compute_" + std::to_string(best);
}

std::string nvrtcCacheFile(const std::string& cacheDir, const std::string& source,
                           const std::vector<std::string>& options, const std::string& arch) {
  return cacheDir + "/" + arch + "-" + nvrtcCacheKey(source, options, arch, nvrtcVersionText()) +
         (isCubinArch(arch) ? ".cubin" : ".ptx");
}

Status nvrtcCompile(const std::string& source, const std::vector<std::string>& options,
                    const std::string& arch, const std::string& cacheDir, std::string* image,
                    bool* cacheHit) {
  *cacheHit = false;
  // Also for a cache hit: the key holds the version of the NVRTC that would compile.
  TANDEM_RETURN_IF_ERROR(loadCudaLibrary(CudaLibrary::Nvrtc));
  bool cubin = isCubinArch(arch);
  std::string file;
  if (!cacheDir.empty()) {
    file = nvrtcCacheFile(cacheDir, source, options, arch);
    if (readFile(file, image)) {
      *cacheHit = true;
      return Status::ok();
    }
  }
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), "tandem_generated.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return nvrtcError(r, "nvrtcCreateProgram");
  std::vector<std::string> opts = options;
  opts.push_back("--gpu-architecture=" + arch);
  std::vector<const char*> copts;
  for (const std::string& o : opts) copts.push_back(o.c_str());
  r = nvrtcCompileProgram(prog, (int)copts.size(), copts.data());
  if (r != NVRTC_SUCCESS) {
    size_t logSize = 0;
    nvrtcGetProgramLogSize(prog, &logSize);
    std::string log(logSize, '\0');
    if (logSize) nvrtcGetProgramLog(prog, &log[0]);
    nvrtcDestroyProgram(&prog);
    return Status::error("NVRTC could not compile the generated kernels for " + arch + " (" +
                         nvrtcGetErrorString(r) + "):\n" + log);
  }
  size_t size = 0;
  r = cubin ? nvrtcGetCUBINSize(prog, &size) : nvrtcGetPTXSize(prog, &size);
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    return nvrtcError(r, cubin ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize");
  }
  image->assign(size, '\0');
  if (size) r = cubin ? nvrtcGetCUBIN(prog, &(*image)[0]) : nvrtcGetPTX(prog, &(*image)[0]);
  nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) return nvrtcError(r, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX");
  if (image->empty()) return Status::error(std::string("NVRTC produced an empty ") + (cubin ? "CUBIN" : "PTX") + " for " + arch);
  // A failure to write the cache only costs the next load a compile; it is not an error.
  if (!file.empty() && makeDirs(cacheDir)) {
    std::string tmp = file + ".tmp" + std::to_string(getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(image->data(), (std::streamsize)image->size());
    }
    if (std::rename(tmp.c_str(), file.c_str()) != 0) std::remove(tmp.c_str());
  }
  return Status::ok();
}

Status GeneratedProgram::add(const std::string& name, const std::string& source) {
  auto it = sources_.find(name);
  if (it == sources_.end()) {
    sources_[name] = source;
    return Status::ok();
  }
  if (it->second != source)
    return Status::error("internal: generated kernel '" + name + "' was added with two different sources");
  return Status::ok();
}

std::string GeneratedProgram::translationUnit() const {
  std::string tu = generatedPrelude();
  for (auto& s : sources_) tu += "\n// ---- " + s.first + "\n" + s.second;
  return tu;
}

Status GeneratedProgram::compileAndLoad(int ccMajor, int ccMinor) {
  if (sources_.empty() || (library_ && loadedCount_ == sources_.size())) return Status::ok();
  if (library_) older_.push_back(library_);
  library_ = nullptr;
  std::string tu = translationUnit(), dir = nvrtcCacheDir();
  // Compiles for `arch` and loads the image; the error says which step failed.
  auto attempt = [&](const std::string& arch) -> Status {
    std::string image;
    TANDEM_RETURN_IF_ERROR(nvrtcCompile(tu, nvrtcOptions(), arch, dir, &image, &cacheHit_));
    cudaError_t e = cudaLibraryLoadData(&library_, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e != cudaSuccess) {
      cudaGetLastError();
      library_ = nullptr;
      return Status::error("cudaLibraryLoadData of the generated kernels (" + arch + "): " +
                           cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
    }
    loadedArch_ = arch;
    return Status::ok();
  };
  // A CUBIN needs neither the driver's PTX JIT nor a driver whose PTX ISA is as new as NVRTC's.
  NvrtcTarget target = nvrtcTargetFor(ccMajor, ccMinor);
  Status st = attempt(target.arch);
  if (!st.isOk() && target.cubin) {
    std::string ptxArch = ptxArchFor(ccMajor, ccMinor);
    Status ptx = attempt(ptxArch);
    if (!ptx.isOk())
      return Status::error("no loadable image of the generated kernels: " + st.message() + "\nPTX fallback: " +
                           ptx.message());
    st = ptx;
  }
  if (!st.isOk()) return st;
  loadedCount_ = sources_.size();
  return Status::ok();
}

Status GeneratedProgram::function(const std::string& name, cudaKernel_t* out) const {
  if (!library_) return Status::error("internal: generated kernel '" + name + "' used before the program was loaded");
  cudaError_t e = cudaLibraryGetKernel(out, library_, name.c_str());
  if (e != cudaSuccess)
    return Status::error("cudaLibraryGetKernel('" + name + "'): " + cudaGetErrorString(e));
  return Status::ok();
}

void GeneratedProgram::unload() {
  if (library_) cudaLibraryUnload(library_);
  for (cudaLibrary_t l : older_) cudaLibraryUnload(l);
  library_ = nullptr;
  older_.clear();
  loadedCount_ = 0;
  loadedArch_.clear();
}

GeneratedProgram::~GeneratedProgram() { unload(); }

}  // namespace cuda
}  // namespace tandem
