// Kernel choice by measurement at plan load: where a CPU step's kernel has several variants
// (KernelDef::variants), each is timed on the step's own buffers and the fastest is kept; the
// times persist in the kernel timing cache (runtime/TimingCache.h) for later loads.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/Backend.h"
#include "runtime/Kernel.h"
#include "runtime/TimingCache.h"

namespace tandem {

/// LoadOptions::tuning.
///   Measure: a step with variants takes the fastest of the cache's times; on a miss each
///            variant is created and timed (1 warm-up, then the median of >= 3 runs, more while
///            under 30 ms), and the times are written to the cache. Before each timed run the
///            caches are left as the rest of a plan larger than L2 would leave them
///            (setPlanBytes): the step's inputs warm, its weights displaced.
///   Cached:  the cache's choice; a miss keeps the built-in heuristic, nothing is measured.
///   Off:     the built-in heuristic, no cache read or written.
///   Default: $TANDEM_TUNING ("measure", "cached" or "off"), Measure when unset.
/// With more than one thread (KernelContext::threads), a step whose inputs and outputs total at
/// most 1 MiB also has each candidate on one thread, named VARIANT@1t ("default@1t" where the
/// def has no variants, whose two-thread form is then "default"): created with
/// KernelContext::threads 1 under one OpenMP thread and run with one (implName() + " @1
/// thread"), the plan's count restored after each run. Fork and join cost more than a small
/// op gains from the other threads. Loop, If, Scan and DynamicRegion steps are not timed so
/// (scratch values would decide their trip counts and shapes).
/// oneDNN is always a candidate, so a measured plan is never slower than oneDNN alone (up to
/// the measurement's noise). LoadOptions::winograd restricts the candidates: Off removes the
/// Winograd variants (Tandem's and oneDNN's), Tile2x2 removes the F(4x4) ones, "winograd4x4" and
/// "winograd-dnnl" (they round 5-7x more: runtime/cpu/avx2/Winograd.h).
enum class TuningMode { Default, Measure, Cached, Off };

/// "measure", "cached", "off" (Default: "default").
const char* tuningModeName(TuningMode m);
/// Parses those names; false for anything else.
bool parseTuningMode(const std::string& s, TuningMode* out);

/// How one step's kernel was chosen (Executable::tuning()).
struct StepTuning {
  enum class Source { Measured, Cache, Heuristic };
  std::string step;                        // the step's label, e.g. "step 3 'conv1' (Conv)"
  std::string opType;
  std::string key;                         // kernelTimingKey()
  std::vector<std::string> candidates;     // variants allowed here, in the def's order
  KernelTimings timings;                   // what is known of them (seconds, impls, failures)
  std::string choice;                      // the variant built; "" = the heuristic's
  Source source = Source::Heuristic;
  std::string impl;                        // implName() of the kernel built
  bool weightsCold = false;                // measured now, each run after the caches were
                                           // displaced (KernelTuner::setPlanBytes)
};

/// The key under which the placer looks up a CPU step's time (compiler/placement/CostModel.h,
/// measuredCpuSeconds): kernelOpTimingKey of the step's op or, for a "Fused" step, of its body's
/// first op, the group's head (the Conv/Gemm/MatMul of an epilogue, the first op of an
/// element-wise loop or row group), which then stands for the whole group: the placer prices
/// the members it expects fused into a measured head at nothing more (passes/Place.cpp).
/// `step.threads` is the thread count. "" when a fused body cannot be decoded.
std::string stepOpTimingKey(const TimingHost& host, const KernelContext& step);

/// The variants (KernelDef::variants) of the def that would create `ctx`'s kernel on
/// `deviceKind`, less those `winograd` rules out (LoadOptions::winograd above); fewer than two:
/// nothing to choose.
std::vector<std::string> tuningCandidates(const std::string& deviceKind, const KernelContext& ctx,
                                          WinogradPolicy winograd);

/// One plan load's tuning: reads the cache once, chooses or measures per step, writes it back.
class KernelTuner {
 public:
  /// `mode` must not be Default (resolve it first); `cachePath` "" = defaultTimingCachePath().
  /// Notes (a cache ignored or not written) go to `notes`.
  KernelTuner(TuningMode mode, const std::string& cachePath, WinogradPolicy winograd,
              std::vector<std::string>* notes);

  /// Creates the kernel of a CPU step through `backend`. With variants to choose from, picks or
  /// measures as the mode says. Measuring runs each variant on `ins`/`outs` (the step's arena
  /// views and constants): inputs that are not constants are overwritten with values in
  /// [-1, 1], outputs with the results, so call it before any run. Errors: those of the
  /// backend when no candidate can be created.
  Status create(DeviceBackend& backend, const KernelContext& ctx, const std::string& label,
                const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs,
                std::unique_ptr<Kernel>* out);

  /// The bytes one run of the plan touches on the host (its host arena and constants). Where
  /// that exceeds a core's L2 cache, the rest of the plan displaces a step's weights between
  /// two of its runs, and a kernel that keeps large packed weights (oneDNN's Winograd holds
  /// 1.8-4x the filter) reads them from L3 or memory. So measuring a step with at least 64 KiB
  /// of constants then first reads 64 MiB of a buffer of its own (on the plan's OpenMP
  /// threads, beyond the last-level cache of most CPUs), then the step's non-constant inputs,
  /// which their producer has just written, before each timed run. Timed with the weights hot
  /// instead, oneDNN's Winograd ran diffusion_unet's 3x3 convolutions at 0.15-0.20 ms and won,
  /// then took 0.22-0.45 ms in the plan, slower than the direct kernel (AMD EPYC Zen 5). The
  /// buffer lives while the tuner does (the plan's load). 0 (the default): nothing is evicted.
  void setPlanBytes(int64_t bytes) { planBytes_ = bytes; }

  /// Writes the cache when this load measured anything; a failure is a note, not an error.
  void finish();

  const std::vector<StepTuning>& report() const { return report_; }

 private:
  Status measure(DeviceBackend& backend, const KernelContext& ctx,
                 const std::vector<std::string>& variants, const std::vector<const Tensor*>& ins,
                 const std::vector<Tensor*>& outs, KernelTimings* t,
                 std::map<std::string, std::unique_ptr<Kernel>>* built, bool* weightsCold);
  /// Keeps the chosen variant's time under the op's key (stepOpTimingKey) for the placer when
  /// it was measured now or the key has no time yet: a time taken in a whole-plan run
  /// (Executable::recordStepTimes, `tandem tune`) is not replaced by a cache hit's.
  void recordOpTime(const KernelContext& ctx, const StepTuning& r);

  TuningMode mode_;
  std::string path_;
  WinogradPolicy winograd_;
  std::vector<std::string>* notes_;
  TimingHost host_;
  TimingCache cache_;
  bool loaded_ = false;
  std::vector<StepTuning> report_;
  int64_t planBytes_ = 0;
  std::vector<char> evictBuffer_;  // allocated at the first eviction, freed with the tuner
};

}  // namespace tandem
