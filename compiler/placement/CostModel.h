// The cost model (DESIGN §2 CostModel): seconds for an op on a device and for a transfer over a
// link, from device specs (a roofline) corrected by a measured calibration profile.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/placement/DeviceSpec.h"
#include "compiler/placement/OpWork.h"
#include "runtime/Status.h"
#include "runtime/TimingCache.h"

namespace tandem {

/// A measured curve y(x), points sorted by x (strictly increasing, all positive). at() is
/// linear in ln(x) between neighbouring points ("log-linear": throughput curves are smooth in
/// the logarithm of the problem size) and clamps to the first/last point outside the range.
struct MeasuredCurve {
  std::vector<std::pair<double, double>> points;
  bool empty() const { return points.empty(); }
  double at(double x) const;
};

/// The measured tables of one device. An empty curve or a negative overhead means "not
/// measured": the roofline figure is used for that part.
struct DeviceCalibration {
  int threads = 0;                  // threads the CPU was measured with (informational)
  double dispatchOverheadSec = -1;  // replaces DeviceSpec::dispatchOverheadSec when >= 0
  MeasuredCurve gemm;               // x: cube-equivalent size s (m = n = k = s), y: FLOP/s
  MeasuredCurve conv;               // x: FLOPs of the convolution, y: FLOP/s
  MeasuredCurve elementwise;        // x: bytes moved (read + written), y: bytes/s
};

/// Time of one op on one device, and where the figure came from (for the placement log).
struct OpCost {
  double seconds = 0;      // overheadSec + max(computeSec, memorySec); on a GPU with an
                           // enqueue cost max(overheadSec, computeSec, memorySec); 0 if free
  double overheadSec = 0;  // CPU dispatch, or the GPU's enqueue (else launch) cost
  double computeSec = 0;   // FLOPs / FLOP/s (peak or measured)
  double memorySec = 0;    // bytes / bytes/s (peak or measured)
  Precision precision = Precision::F32;
  /// "free" (metadata op), "roofline" (spec figures only), "calibrated" (a measured table
  /// gave the compute or memory rate), "measured" (the runtime timed this very kernel:
  /// OpWork::measuredCpuSeconds is computeSec and seconds, the dispatch being part of it).
  const char* source = "roofline";
  bool computeBound() const { return computeSec >= memorySec; }
};

struct CostOptions {
  /// Run f32 GEMM/conv on TF32 tensor cores where the device has them (cuBLAS/cuDNN math mode).
  /// Off by default: f32 results then match the CPU's to f32 rounding.
  bool allowTf32 = false;
  /// Host memory assumed by transferTime() calls that do not say.
  HostMemory hostMemory = HostMemory::Pinned;
};

/// Op time = overhead + max(compute, memory): a roofline (Williams, Waterman & Patterson 2009)
/// in which compute and memory traffic overlap fully, so the slower of the two sets the time,
/// plus the fixed dispatch/launch cost that dominates small ops (why batch-1 work stays on the
/// CPU). Full overlap is optimistic for ops near the ridge point; the calibration tables absorb
/// that error on measured devices.
///
///   compute = flops / rate, rate = the measured GEMM curve at s = cbrt(flops/2) for Gemm/MatMul,
///             the measured conv curve at flops for Conv/ConvTranspose, else
///             DeviceSpec::peakFlops(precision)
///   memory  = bytes / bw,   bw = the measured elementwise curve at bytes, else
///             DeviceSpec::memoryBandwidthBytesPerSec; except the op's weights
///             (OpWork::constantBytes) on a CPU with a known last-level cache: when the plan's
///             weights and the op's other bytes fit in it (OpWork::planConstantBytes + bytes -
///             constantBytes <= lastLevelCacheBytes) they stay cached between runs and come at
///             the curve's rate or DeviceSpec::cacheBandwidthBytesPerSec, otherwise from DRAM
///             (the curve's largest size, or memoryBandwidthBytesPerSec)
///   precision: F64 for f64 ops; F16 for f16 GEMM/conv (tensor cores); TF32 for f32 GEMM/conv
///             when allowTf32; else F32 (integer ops use the F32 rate). The measured GEMM and
///             conv curves were taken in f32, so they apply to F32 arithmetic only.
///
/// On a GPU with DeviceSpec::enqueueSec > 0 (the built-in specs: 3 µs) and no calibrated
/// dispatch overhead, op time = max(enqueueSec, compute, memory) instead: kernels on one stream
/// are enqueued asynchronously, so the host queues the next kernel while the GPU runs the
/// current one and the launch latency (dispatchOverheadSec, 5 µs) hides behind execution; what
/// stays is the host's own enqueue cost, which sets the pace of a chain of kernels shorter than
/// it (N tiny kernels cost N x enqueueSec, not 0). The full launch latency is paid where the
/// GPU's queue runs dry: after a host wait (crossing time below). The first kernel of a run
/// also starts on an empty queue; that launch (minus one enqueue) is not charged, which
/// favours the GPU by ~2 µs per run.
///
/// Transfer time = latency + bytes / bandwidth of the directed link (H2D, D2H, P2P, or host
/// memcpy between two CPU devices), pinned or pageable host memory; 0 on the same device.
///
/// Crossing time (a value made on one device and read by an op on another during a run) =
/// transfer time, plus, from a GPU to a CPU, the host's wait for the GPU:
///   syncLatencySec + dispatchOverheadSec of the GPU (built-in: 5 µs + 5 µs).
/// The executor runs CPU steps on the host thread and enqueues GPU kernels asynchronously, so
/// in an uninterrupted stream a kernel's launch overlaps the GPU's earlier work. A host op that
/// reads a GPU value must block until the GPU has drained its queue up to that value
/// (cudaEventSynchronize): the thread wakes syncLatencySec after the GPU signals, the GPU then
/// idles while the host computes, and the first kernel enqueued afterwards starts a full launch
/// later on an empty GPU. None of that is in the D2H copy's latency, and the op costs above are
/// summed as if every device waited for every other, so without it a split that saves a few
/// microseconds of launches per small op looks cheaper than it is. Host-to-GPU crossings need
/// no host wait (the copy is enqueued after the host op, the GPU waits on its event): transfer
/// time only. Graph inputs cross at the run's start: transfer time only. A graph output
/// returned from a GPU (read by no op) makes the host wait for the GPU at the run's end:
/// transfer time + syncLatencySec (returnTime); a run on CPUs alone never waits for a GPU.
///
/// Calibration profile (JSON, written by `tandem calibrate`, read by loadProfile):
///   {
///     "schema": "tandem-calibration/1",                          required, exactly this
///     "created": "2026-11-21T21:24:39Z", "host": "AMD EPYC",      optional, informational,
///     "tool": "tandem calibrate", "seconds": 10.1, "load_average": 0.3    as are these
///     "devices": {                                                required (may be empty)
///       "cpu": {                       any device spelling; devices not in the set: ignored
///         "threads": 2,                                           optional integer
///         "dispatch_overhead_s": 1.2e-6,                          optional, >= 0
///         "gemm": [{"size": 64, "flops_per_s": 2.1e10}, ...],     optional, >= 1 point
///         "conv": [{"flops": 3.1e5, "flops_per_s": 9e9, "layer": "..."}, ...],    optional
///         "elementwise": [{"bytes": 4096, "bytes_per_s": 8e9}, ...]              optional
///       }
///     },
///     "links": [                                                  optional
///       {"from": "cpu", "to": "cuda:0", "latency_s": 6e-6, "bytes_per_s": 5.1e10,
///        "pageable_bytes_per_s": 2.4e10}                          pageable optional
///     ]
///   }
/// All numbers in seconds, bytes, FLOPs and per-second rates; every x and y must be positive
/// and a curve's x values distinct (points may come in any order). Unknown keys are ignored.
/// A link entry replaces the link's latency and pinned bandwidth; without
/// "pageable_bytes_per_s" the pageable rate keeps its ratio to the pinned one.
class CostModel {
 public:
  explicit CostModel(DeviceSet devices, CostOptions options = {});

  /// Reads a calibration profile and applies it to the devices and links of this set (a
  /// profile may be loaded over another; later entries replace earlier ones per device and per
  /// link). Nothing is applied when the profile has an error. Errors:
  /// "profile.json: cannot read: No such file or directory",
  /// "profile.json: not JSON: ... at byte 120",
  /// "profile.json: /devices/cpu/gemm/2/flops_per_s: expected a positive number".
  Status loadProfile(const std::string& path);
  /// The same for JSON text; `sourceName` prefixes the messages.
  Status loadProfileText(const std::string& jsonText, const std::string& sourceName);
  /// Remarks from loading (devices or links of the profile not in this set, thread-count
  /// mismatches); empty when all applied cleanly.
  const std::vector<std::string>& profileNotes() const { return notes_; }

  const DeviceSet& devices() const { return devices_; }
  const CostOptions& options() const { return options_; }
  /// The calibration of device `i`, nullptr when none was loaded.
  const DeviceCalibration* calibration(size_t device) const;

  /// Reads the runtime's kernel timing cache (runtime/TimingCache.h; "" = its default path)
  /// for measuredCpuSeconds(). A missing file is no error; an unusable one is a profileNotes()
  /// line. Not called when TANDEM_TUNING=off.
  void loadKernelTimings(const std::string& path);
  /// The time the runtime measured for this op's kernel on this machine (kernelOpTimingKey of
  /// `op`, tried with the intra-op thread counts a run would use: defaultThreads(), all
  /// cores, 1), or -1 when the cache has none. opCost() uses it, when set in OpWork, for the
  /// live CPU (model "x86-64") instead of the roofline: source "measured", no overhead added
  /// (the runtime's time is of the whole launch). `tandem tune` records every CPU step of the
  /// plans it loads, a fused step under its head op (runtime/Tuning.h stepOpTimingKey).
  double measuredCpuSeconds(const KernelContext& op) const;

  /// The arithmetic `w` runs in on `device` (see the class comment).
  Precision precisionFor(const OpWork& w, size_t device) const;
  /// Time of an op on device index `device` (0 <= device < devices().size()).
  OpCost opCost(const OpWork& w, size_t device) const;
  double opTime(const OpWork& w, size_t device) const { return opCost(w, device).seconds; }

  /// Seconds to move `bytes` from device `from` to device `to` (indices); 0 when from == to.
  double transferTime(size_t from, size_t to, double bytes, HostMemory m) const;
  double transferTime(size_t from, size_t to, double bytes) const {
    return transferTime(from, to, bytes, options_.hostMemory);
  }
  /// Seconds for a value of `bytes` made on device `from` to be read by an op on `to` within a
  /// run (class comment: transferTime plus the host's wait when `from` is a GPU and `to` a
  /// CPU); 0 when from == to.
  double crossingTime(size_t from, size_t to, double bytes, HostMemory m) const;
  /// Seconds for a value of `bytes` made on `from` and only returned by the run to `to` (class
  /// comment: transferTime plus, from a GPU to a CPU, the host's wait syncLatencySec); 0 when
  /// from == to.
  double returnTime(size_t from, size_t to, double bytes, HostMemory m) const;
  /// By device name (any accepted spelling); +infinity when either device is not in the set.
  double transferTime(const std::string& from, const std::string& to, double bytes,
                      HostMemory m) const;

 private:
  DeviceSet devices_;
  CostOptions options_;
  std::vector<DeviceCalibration> cal_;  // per device
  std::vector<bool> hasCal_;
  std::vector<std::string> notes_;
  TimingCache kernelTimings_;
  TimingHost host_;
  std::vector<int> timingThreads_;
};

/// The cost model a compile uses: the devices of DeviceSet::live() when `targetList` is empty,
/// else of DeviceSet::parse(targetList) (`--target`), then the calibration profile at
/// `profilePath` when it is not empty (`--profile`). Errors are those of parse and loadProfile.
Status buildCostModel(const std::string& targetList, const std::string& profilePath,
                      CostOptions options, std::unique_ptr<CostModel>* out);
/// The same from a parsed set (CompileOptions::devices).
Status buildCostModel(DeviceSet devices, const std::string& profilePath, CostOptions options,
                      std::unique_ptr<CostModel>* out);

}  // namespace tandem
