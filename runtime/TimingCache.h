// The kernel timing cache: measured times of the variants of a CPU step's kernel (Conv: oneDNN
// or Winograd; Gemm/MatMul: oneDNN or the AVX2 packed GEMM), kept per host in one JSON file.
// MLIR-free (runtime/core) so the compiler can read the same file with the same keys.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/Kernel.h"
#include "runtime/Status.h"

namespace tandem {

/// The cache file: $TANDEM_TUNING_CACHE when set, else $XDG_CACHE_HOME/tandem/kernel-timings.json,
/// else $HOME/.cache/tandem/kernel-timings.json; "" when neither XDG_CACHE_HOME nor HOME is set.
std::string defaultTimingCachePath();

/// The id of the CPU kernels this binary runs: 16 hex digits of a SHA-1 over the sources of
/// runtime/cpu (and oneDNN's version), computed at build time. Two builds whose kernels differ
/// in any byte have different ids, so a changed kernel is measured anew.
std::string kernelSourcesId();

/// What makes times from two processes comparable: the CPU model ("model name" of
/// /proc/cpuinfo), the ISA oneDNN runs (after TANDEM_MAX_CPU_ISA, which also caps Tandem's
/// AVX2 kernels), e.g. {"AMD EPYC 7B13", "avx512_core_bf16"}, and the kernels' sources
/// (kernelSourcesId(), filled in by default).
struct TimingHost {
  std::string cpuModel;
  std::string isa;
  std::string kernels = kernelSourcesId();
};

/// The cache key of one step: host, intra-op threads, op type, every attribute (tensor
/// attributes by dtype, shape and a hash of their bytes), input dtypes/shapes with the constant
/// ones marked "c" and output dtypes/shapes. Node names are not part of it, so steps of the
/// same shape share one entry. Deterministic: attributes are in name order, floats in %.9g.
/// E.g. "cpu=AMD EPYC|isa=avx2|kernels=0123456789abcdef|threads=1|op=Gemm|attrs={transB:1}|
/// in=f32[2,8],f32[4,8]c|out=f32[2,4]". Entries of other kernel ids stay in the file, unused.
std::string kernelTimingKey(const TimingHost& host, const KernelContext& ctx);

/// The key of an op as the placer sees it, before fusion and layout assignment: the host part
/// of kernelTimingKey, then the op (for a "Fused" step, its anchor Conv/Gemm/MatMul) without
/// the step-level layout attributes (input_layouts, output_layouts). `ctx.threads` is the
/// thread count. The runtime records each tuned step's time under it, the cost model reads it.
std::string kernelOpTimingKey(const TimingHost& host, const KernelContext& ctx);

/// True when TANDEM_TUNING=off: no timing cache is read or written (runtime or compiler).
bool timingCacheOffByEnvironment();

/// What is known of one key.
struct KernelTimings {
  std::map<std::string, double> seconds;      // variant -> median seconds of one run
  std::map<std::string, std::string> impls;   // variant -> Kernel::implName()
  std::map<std::string, std::string> failed;  // variant -> why it could not be created
  /// True when every candidate has a time or a failure.
  bool covers(const std::vector<std::string>& candidates) const;
  /// The candidate with the least time; "" when none has one.
  std::string fastest(const std::vector<std::string>& candidates) const;
};

/// The measured time of one op (kernelOpTimingKey): the chosen variant of the step that ran it,
/// epilogue included for a fused step.
struct OpTiming {
  double seconds = 0;
  std::string variant;
  bool operator==(const OpTiming& o) const { return seconds == o.seconds && variant == o.variant; }
};

/// The file's entries in memory. Format: {"format": "tandem-kernel-timings", "version": 1,
/// "entries": {KEY: {"seconds": {VARIANT: S}, "impls": {...}, "failed": {...}}},
/// "ops": {OPKEY: {"seconds": S, "variant": V}}} ("ops" optional).
class TimingCache {
 public:
  /// Reads `path`. A missing file is an empty cache. A file that cannot be parsed or is not
  /// this format is ignored (empty cache) with *note saying so; it is replaced on save().
  void load(const std::string& path, std::string* note);
  /// Null when the key is absent.
  const KernelTimings* find(const std::string& key) const;
  /// Adds or replaces an entry; save() writes it.
  void put(const std::string& key, KernelTimings t);
  /// The same for op timings (kernelOpTimingKey).
  const OpTiming* findOp(const std::string& key) const;
  void putOp(const std::string& key, OpTiming t);
  /// Whether some op timing is of this op type: lets a caller skip building keys (a string
  /// of the whole instance) for ops the cache cannot hold.
  bool hasOpType(const std::string& opType) const { return opTypes_.count(opType) > 0; }
  bool changed() const { return !added_.empty() || !addedOps_.empty(); }
  size_t size() const { return entries_.size(); }
  /// Writes the entries put() since load() merged into what `path` holds now (another process
  /// may have added keys meanwhile), creating its directory: a temporary file in the same
  /// directory, then rename, so a reader never sees a partial file. Errors name the path.
  Status save(const std::string& path) const;

 private:
  std::map<std::string, KernelTimings> entries_;
  std::set<std::string> added_;
  std::map<std::string, OpTiming> ops_;
  std::set<std::string> addedOps_;
  std::set<std::string> opTypes_;  // the "op=" field of the keys of ops_
  void noteOpType(const std::string& key);
};

}  // namespace tandem
