// What the cost model knows of devices and of the links between them (DESIGN §2: DeviceSpec,
// DeviceSet, Link): built-in specs from NVIDIA datasheets, a CPU spec derived from this machine,
// and target lists such as "cpu,cuda:0=h100,cuda:1=h100" for hardware that is not present.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/Status.h"

namespace tandem {

/// Device kinds; the name of each is the `deviceKind` string of the kernel registry.
enum class DeviceKind { Cpu, Cuda };
/// "cpu" or "cuda".
const char* deviceKindName(DeviceKind k);

/// The arithmetic an op runs in, which selects the peak FLOP/s. TF32 and BF16/F16 are the
/// tensor-core rates of GPUs; a device without them (a CPU) falls back to its F32 rate.
enum class Precision { F32, TF32, BF16, F16, F64 };
const char* precisionName(Precision p);

/// Where the host side of a host<->device copy lives. Pageable memory is staged by the driver
/// through a pinned bounce buffer, which roughly halves the bandwidth.
enum class HostMemory { Pinned, Pageable };

/// What the cost model knows of one device. All rates are dense (no structured sparsity),
/// peak (datasheet or derived), and per device: FLOP/s, bytes/s, bytes, seconds.
struct DeviceSpec {
  std::string name;         // canonical device name: "cpu", "cpu:1", "cuda:0"
  DeviceKind kind = DeviceKind::Cpu;
  std::string model;        // canonical model key: "x86-64", "h100-sxm", "a100-sxm", ...
  std::string description;  // "NVIDIA H100 SXM5 80GB", "AMD EPYC (2 cores, avx2+fma, 2.45 GHz)"

  double peakF32FlopsPerSec = 0;   // non-tensor FP32 (FMA = 2 FLOPs)
  double peakTf32FlopsPerSec = 0;  // tensor-core TF32, dense; 0 when the device has none
  double peakBf16FlopsPerSec = 0;  // tensor-core BF16 (= FP16 on A100/H100/H200), dense; 0: none
  double peakF64FlopsPerSec = 0;   // non-tensor FP64
  double memoryBandwidthBytesPerSec = 0;  // DRAM/HBM bandwidth
  int64_t memoryCapacityBytes = 0;        // what the placer may fill on this device
  /// Fixed cost of running one op: the CPU executor's dispatch, or a CUDA kernel launch's
  /// latency (host call to the kernel starting on an idle GPU).
  double dispatchOverheadSec = 0;
  /// GPU only (0 for CPUs), seconds: the host's own cost of enqueueing one kernel (the
  /// executor's step plus cuLaunchKernel). Within a stream launches overlap the GPU's earlier
  /// work, so a kernel costs max(this, its execution), not the launch latency (CostModel.h).
  double enqueueSec = 0;
  /// GPU only (0 for CPUs), seconds: how long after this GPU finishes the work a host thread
  /// waits for (cudaEventSynchronize on the event of a value the host reads mid-run) that
  /// thread runs again. A GPU-to-host crossing costs this plus one launch (CostModel.h).
  double syncLatencySec = 0;

  // CPU only (0 for GPUs): how peakF32FlopsPerSec was derived.
  int cores = 0;
  int simdF32Lanes = 0;     // 16 AVX-512, 8 AVX2, 4 SSE/NEON
  double frequencyHz = 0;
  /// CPU only, 0 = unknown: the last-level cache one core sees (the live CPU's from sysfs,
  /// e.g. 32 MiB of L3 per Zen 4 CCX) and the rate the cores read it at. Traffic that stays
  /// there (weights that fit with the plan's working set, activations between steps) is
  /// priced at that rate rather than DRAM's (CostModel.h).
  int64_t lastLevelCacheBytes = 0;
  double cacheBandwidthBytesPerSec = 0;

  // Interconnect of a GPU (unused for CPUs). Bandwidths are per direction, achievable.
  std::string hostLinkName;          // "pcie-gen4-x16", "pcie-gen5-x16"
  double hostLinkLatencySec = 0;     // one cudaMemcpyAsync of a few bytes
  double h2dPinnedBytesPerSec = 0;   // host -> device from pinned host memory
  double d2hPinnedBytesPerSec = 0;   // device -> host into pinned host memory
  double pageableFactor = 0.5;       // pageable bandwidth = pinned x this factor
  std::string peerLinkName;          // "nvlink3", "nvlink4"; empty: no NVLink
  double peerLinkLatencySec = 0;
  double peerBytesPerSec = 0;        // per direction

  /// Human-readable caveats about how the spec was obtained ("frequency unknown: assumed
  /// 2.5 GHz"); the placement log repeats them.
  std::vector<std::string> notes;

  /// Peak FLOP/s for `p`; TF32/BF16/F16 fall back to F32 where the device has no tensor rate.
  double peakFlops(Precision p) const;
  bool isGpu() const { return kind == DeviceKind::Cuda; }
};

/// A directed transfer path. A DeviceSet holds one Link per ordered pair of distinct devices,
/// so H2D and D2H (and each P2P direction) carry their own figures.
struct Link {
  enum class Kind { HostToDevice, DeviceToHost, PeerToPeer, HostToHost };
  std::string from, to;  // canonical device names
  Kind kind = Kind::HostToHost;
  /// "pcie-gen5-x16", "nvlink4", "pcie-via-host" (GPU peers without NVLink: D2H then H2D
  /// through pinned host buffers, pipelined), "host-memcpy" (two CPU devices).
  std::string medium;
  double latencySec = 0;
  double pinnedBytesPerSec = 0;    // also the rate of links with no host memory involved
  double pageableBytesPerSec = 0;  // equals pinnedBytesPerSec where host memory is not involved

  double bytesPerSec(HostMemory m) const {
    return m == HostMemory::Pinned ? pinnedBytesPerSec : pageableBytesPerSec;
  }
};
const char* linkKindName(Link::Kind k);  // "h2d", "d2h", "p2p", "h2h"

/// The built-in GPU models ("a100-sxm", "a100-pcie", "h100-sxm", "h100-pcie", "h200-sxm").
std::vector<std::string> knownGpuModels();
/// "a100-sxm (a100), a100-pcie, h100-sxm (h100), h100-pcie, h200-sxm (h200)" for messages.
/// Also accepted: "a100-sxm4", "h100-sxm5", "a100-80gb", ... (case-insensitive).
std::string knownGpuModelsText();
/// The built-in spec of a GPU model or alias (case-insensitive), named `deviceName`.
/// Error: "unknown GPU model 'v100' (known: ...)".
Status builtinGpuSpec(const std::string& modelOrAlias, const std::string& deviceName,
                      DeviceSpec* out);

/// The built-in CPU models for cross-compiling ("xeon-8480", "epyc-9654"): one socket each,
/// from vendor figures (see DeviceSpec.cpp). "live (this machine), xeon-8480, epyc-9654".
std::string knownCpuModelsText();
/// The built-in spec of a CPU model or alias (case-insensitive), named `deviceName`.
/// Error: "unknown CPU model 'm1' (known: live (this machine), xeon-8480, epyc-9654)".
Status builtinCpuSpec(const std::string& modelOrAlias, const std::string& deviceName,
                      DeviceSpec* out);

/// The CPU of this machine as a spec: `cores` (sched_getaffinity) / `shareCount` cores, SIMD
/// width from cpuid (__builtin_cpu_supports: AVX-512F 16 lanes, AVX2 8, else SSE 4), 2 FLOPs
/// per FMA and 2 FMA units (without FMA: one add and one mul port, also 2 FLOPs per lane), at
/// the maximum frequency from /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq, else
/// /proc/cpuinfo "cpu MHz", else an assumed 2.5 GHz (noted). Memory bandwidth is an
/// uncalibrated 10 GB/s per core (noted; `tandem calibrate` measures it). Capacity is the
/// physical memory / shareCount. Dispatch overhead 1 µs. `shareCount` > 1 splits the machine
/// into that many equal CPU devices (tests of multi-device plans without a GPU).
DeviceSpec liveCpuSpec(const std::string& deviceName, int shareCount = 1);

/// The devices a compile targets and the links between them.
class DeviceSet {
 public:
  /// Parses a target list: comma-separated entries NAME or NAME=MODEL. NAME is any spelling
  /// runtime/Device.h canonicalDeviceName accepts (cpu, CPU:0, cpu:1, cuda:0, gpu:1,
  /// /device:GPU:0); CUDA devices need a MODEL (knownGpuModelsText()). A CPU device without a
  /// model (or "=live") is this machine, k such entries splitting its cores k ways ("cpu,cpu:1");
  /// with a built-in CPU model (knownCpuModelsText(), e.g. "cpu=xeon-8480") it is that socket,
  /// for plans made for another host and for placement results that do not depend on this
  /// machine.
  /// At least one CPU device is required (graph inputs and outputs live in host memory).
  /// Links: every CPU<->GPU pair over the GPU's PCIe link (H2D and D2H), GPU<->GPU over NVLink
  /// when both models have the same NVLink generation else via the host, CPU<->CPU by memcpy.
  /// Errors name the entry: "target entry 'cuda:0=v100': unknown GPU model 'v100' (known: ...)".
  static Status parse(const std::string& targetList, DeviceSet* out);
  /// The live devices from discovery (runtime/Device.h): the CPU only in this build.
  static DeviceSet live();
  /// A set from explicit specs (tests, calibrated specs); links are derived as in parse().
  static Status fromSpecs(std::vector<DeviceSpec> specs, DeviceSet* out);

  const std::vector<DeviceSpec>& devices() const { return devices_; }
  size_t size() const { return devices_.size(); }
  const DeviceSpec& device(size_t i) const { return devices_[i]; }
  /// Index of a device by any accepted spelling, -1 if absent.
  int indexOf(const std::string& name) const;
  const DeviceSpec* find(const std::string& name) const;
  /// Index of the first CPU device (the host of every GPU link); -1 only for an empty set.
  int hostIndex() const;
  /// The directed link from -> to (indices), nullptr when from == to.
  const Link* link(size_t from, size_t to) const;
  Link* mutableLink(size_t from, size_t to);
  const Link* link(const std::string& from, const std::string& to) const;
  /// Every link, in (from, to) index order.
  std::vector<const Link*> links() const;
  /// The canonical target list: "cpu,cuda:0=h100-sxm".
  std::string toString() const;

 private:
  void deriveLinks();
  std::vector<DeviceSpec> devices_;
  std::vector<Link> links_;  // n*n, row = from; diagonal entries unused
};

}  // namespace tandem
