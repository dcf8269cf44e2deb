// Built-in device specs (NVIDIA datasheets), the live CPU's spec, target-list parsing and links.
#include "compiler/placement/DeviceSpec.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/Device.h"

namespace tandem {

const char* deviceKindName(DeviceKind k) { return k == DeviceKind::Cpu ? "cpu" : "cuda"; }

const char* precisionName(Precision p) {
  switch (p) {
    case Precision::F32: return "f32";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
    case Precision::F16: return "f16";
    case Precision::F64: return "f64";
  }
  return "?";
}

const char* linkKindName(Link::Kind k) {
  switch (k) {
    case Link::Kind::HostToDevice: return "h2d";
    case Link::Kind::DeviceToHost: return "d2h";
    case Link::Kind::PeerToPeer: return "p2p";
    case Link::Kind::HostToHost: return "h2h";
  }
  return "?";
}

double DeviceSpec::peakFlops(Precision p) const {
  switch (p) {
    case Precision::F32: return peakF32FlopsPerSec;
    case Precision::TF32: return peakTf32FlopsPerSec > 0 ? peakTf32FlopsPerSec : peakF32FlopsPerSec;
    case Precision::BF16:
    case Precision::F16: return peakBf16FlopsPerSec > 0 ? peakBf16FlopsPerSec : peakF32FlopsPerSec;
    case Precision::F64:
      return peakF64FlopsPerSec > 0 ? peakF64FlopsPerSec : peakF32FlopsPerSec / 2;
  }
  return peakF32FlopsPerSec;
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Host and peer interconnects. Bandwidths are per direction and *achievable*, since a plan's
// copies see what cudaMemcpyAsync delivers, not the signalling rate.
struct Interconnect {
  const char* name;
  double latencySec;
  double bytesPerSec;
};
// PCIe Gen4 x16: 16 GT/s x 16 lanes x 128b/130b = 31.5 GB/s per direction raw; pinned copies
// reach about 25 GB/s (CUDA bandwidthTest on A100 PCIe/SXM hosts). A100 uses Gen4 (NVIDIA A100
// datasheet: "PCIe Gen4 64 GB/s", i.e. both directions together).
constexpr Interconnect kPcieGen4{"pcie-gen4-x16", 5e-6, 25e9};
// PCIe Gen5 x16: 32 GT/s -> 63 GB/s per direction raw ("PCIe Gen5 128 GB/s" both directions in
// the H100 and H200 datasheets); pinned copies reach about 55 GB/s.
constexpr Interconnect kPcieGen5{"pcie-gen5-x16", 5e-6, 55e9};
// NVLink 3 (A100 SXM): 12 links x 25 GB/s = 300 GB/s per direction ("600 GB/s" both ways, A100
// datasheet). NVLink 4 (H100/H200 SXM): 18 links x 25 GB/s = 450 GB/s per direction ("900 GB/s",
// H100 and H200 datasheets). We assume 87% of that is achievable, the same efficiency as the
// Gen5 figure above; `tandem calibrate` on a GPU host replaces both.
constexpr Interconnect kNvlink3{"nvlink3", 3e-6, 0.87 * 300e9};
constexpr Interconnect kNvlink4{"nvlink4", 3e-6, 0.87 * 450e9};

// A CUDA kernel launch as the host sees it (cudaLaunchKernel plus the GPU picking it up):
// ~5 µs is the usual figure for back-to-back launches without CUDA graphs.
constexpr double kGpuLaunchSec = 5e-6;
// A host thread blocked on a GPU event (cudaEventSynchronize, the default spin-then-yield
// schedule) resumes a few microseconds after the GPU signals it: the event write crosses PCIe
// and the driver's poll or wake-up follows. ~5 µs assumed, the order of a small copy's latency
// on the same link; `tandem calibrate` does not measure it yet.
constexpr double kGpuSyncSec = 5e-6;
// The host's cost of enqueueing one kernel on a stream the GPU is still working through:
// cuLaunchKernel returns after ~2 µs on current drivers (back-to-back empty kernels run at
// ~400-500k/s from one thread) plus the executor's own ~1 µs per step (kCpuDispatchSec: argument
// binding, the event bookkeeping). It bounds how fast a chain of tiny kernels can go; a kernel
// longer than it hides the launch entirely.
constexpr double kGpuEnqueueSec = 3e-6;
// The CPU executor's per-step dispatch (kernel->run call, argument binding, OpenMP fork).
constexpr double kCpuDispatchSec = 1e-6;

struct GpuModel {
  const char* key;
  std::vector<const char*> aliases;
  const char* description;
  // Dense peaks: the datasheets print tensor-core rates "with sparsity", which are twice the
  // dense rate; we store half of those figures.
  double f32, tf32, bf16, f64;
  double bandwidth;
  double capacity;
  const Interconnect* host;
  const Interconnect* peer;  // nullptr: no NVLink (an H100/A100 PCIe bridge is optional)
};

// Datasheet figures:
//  - NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf):
//    FP64 9.7 TF, FP32 19.5 TF, TF32 156 TF, BF16 312 TF (dense); 80GB HBM2e at 2,039 GB/s
//    (SXM) and 1,935 GB/s (PCIe); NVLink 600 GB/s (SXM), PCIe Gen4.
//  - NVIDIA H100 Tensor Core GPU datasheet (h100-datasheet-2287922): SXM: FP64 34 TF, FP32
//    67 TF, TF32 989 TF*, BF16 1,979 TF*, 80GB HBM3 at 3.35 TB/s, NVLink 900 GB/s, PCIe Gen5;
//    PCIe: FP64 26 TF, FP32 51 TF, TF32 756 TF*, BF16 1,513 TF*, 80GB HBM2e at 2 TB/s
//    (* with sparsity).
//  - NVIDIA H200 Tensor Core GPU datasheet: SXM: FP64 34 TF, FP32 67 TF, TF32 989 TF*, BF16
//    1,979 TF*, 141GB HBM3e at 4.8 TB/s, NVLink 900 GB/s, PCIe Gen5.
// Capacities: the datasheets' "80GB"/"141GB" read as GiB, which is what nvidia-smi reports for
// the 80GB parts (81920 MiB on A100); the CUDA context later takes a few hundred MiB of it.
const std::vector<GpuModel>& gpuModels() {
  static const std::vector<GpuModel> models = {
      {"a100-sxm", {"a100", "a100-sxm4", "a100-80gb", "a100-sxm4-80gb"}, "NVIDIA A100 SXM4 80GB",
       19.5e12, 156e12, 312e12, 9.7e12, 2039e9, 80 * kGiB, &kPcieGen4, &kNvlink3},
      {"a100-pcie", {"a100-pcie-80gb"}, "NVIDIA A100 PCIe 80GB",
       19.5e12, 156e12, 312e12, 9.7e12, 1935e9, 80 * kGiB, &kPcieGen4, nullptr},
      {"h100-sxm", {"h100", "h100-sxm5", "h100-80gb", "h100-sxm5-80gb"}, "NVIDIA H100 SXM5 80GB",
       67e12, 989e12 / 2, 1979e12 / 2, 34e12, 3.35e12, 80 * kGiB, &kPcieGen5, &kNvlink4},
      {"h100-pcie", {"h100-pcie-80gb"}, "NVIDIA H100 PCIe 80GB",
       51e12, 756e12 / 2, 1513e12 / 2, 26e12, 2.0e12, 80 * kGiB, &kPcieGen5, nullptr},
      {"h200-sxm", {"h200", "h200-141gb"}, "NVIDIA H200 SXM 141GB",
       67e12, 989e12 / 2, 1979e12 / 2, 34e12, 4.8e12, 141 * kGiB, &kPcieGen5, &kNvlink4},
  };
  return models;
}

// Built-in CPU models, for cross-compiling to a host that is not this machine (e.g. the CPU
// beside an H100) and for machine-independent placement tests. One entry is one socket.
struct CpuModel {
  const char* key;
  std::vector<const char*> aliases;
  const char* description;
  int cores;
  int lanes;              // f32 SIMD lanes per FMA unit
  int flopsPerLaneCycle;  // FMA units x 2
  double frequencyHz;     // sustained all-core frequency under vector load
  double bandwidth;       // achievable DRAM bytes/s
  double capacity;        // bytes
  double dispatchSec;     // per-step dispatch incl. an OpenMP fork/join across all cores
};

// Figures (one socket):
//  - Intel Xeon Platinum 8480+ (Sapphire Rapids; the DGX H100 has two 8480C): 56 cores, two
//    AVX-512 FMA units per core, 2.0 GHz base (taken as the sustained AVX-512 all-core clock),
//    8 channels DDR5-4800 = 307 GB/s peak (Intel ARK); we assume 80% of it, what STREAM triad
//    typically reaches.
//  - AMD EPYC 9654 (Genoa): 96 cores, AVX-512 executed on two 256-bit FMA pipes (8 f32 lanes x
//    2 units), 2.4 GHz base, 12 channels DDR5-4800 = 461 GB/s peak (AMD datasheet); 80% assumed.
// Dispatch: an OpenMP parallel region across 56-96 threads costs a few microseconds (EPCC
// syncbench orders of magnitude); 3 us assumed, where this machine's live CPU uses 1 us.
// Capacity: 1 TiB per socket (the DGX H100's 2 TB in two sockets).
const std::vector<CpuModel>& cpuModels() {
  static const std::vector<CpuModel> models = {
      {"xeon-8480", {"xeon-8480+", "xeon-8480c", "spr-56c"},
       "Intel Xeon Platinum 8480+ (56 cores, avx512+fma, 2.00 GHz)", 56, 16, 4, 2.0e9,
       0.8 * 307.2e9, 1024 * kGiB, 3e-6},
      {"epyc-9654", {"genoa-96c"}, "AMD EPYC 9654 (96 cores, avx512 on 256-bit pipes, 2.40 GHz)",
       96, 8, 4, 2.4e9, 0.8 * 460.8e9, 1024 * kGiB, 3e-6},
  };
  return models;
}

std::string lower(std::string s) {
  for (char& c : s) c = (char)std::tolower((unsigned char)c);
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Max frequency in Hz, or 0 with *source explaining why not.
double cpuFrequencyHz(std::string* source) {
  {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
    double khz = 0;
    if (f >> khz && khz > 0) {
      *source = "cpufreq cpuinfo_max_freq";
      return khz * 1e3;
    }
  }
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    auto p = line.find(':');
    if (p == std::string::npos) break;
    double mhz = std::atof(line.c_str() + p + 1);
    if (mhz > 0) {
      // The current frequency, not the maximum: with turbo the peak is somewhat higher.
      *source = "/proc/cpuinfo cpu MHz (current, not max)";
      return mhz * 1e6;
    }
    break;
  }
  return 0;
}

// The largest data or unified cache of cpu0 (sysfs cache/index*/{level,type,size}, sizes like
// "32768K"), in bytes; 0 when sysfs does not say.
int64_t lastLevelCacheBytes() {
  int bestLevel = 0;
  int64_t best = 0;
  for (int i = 0; i < 16; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lv(dir + "level"), ty(dir + "type"), sz(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(lv >> level) || !(ty >> type) || !(sz >> size) || type == "Instruction") continue;
    int64_t bytes = std::atoll(size.c_str());
    char unit = size.empty() ? 0 : size.back();
    if (unit == 'K') bytes <<= 10;
    else if (unit == 'M') bytes <<= 20;
    else if (unit == 'G') bytes <<= 30;
    if (bytes > 0 && level >= bestLevel) bestLevel = level, best = bytes;
  }
  return best;
}

std::string formatGHz(double hz) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GHz", hz / 1e9);
  return buf;
}

}  // namespace

std::vector<std::string> knownGpuModels() {
  std::vector<std::string> keys;
  for (const GpuModel& m : gpuModels()) keys.push_back(m.key);
  return keys;
}

std::string knownGpuModelsText() {
  // The canonical keys and each one's short alias; the longer aliases are accepted silently.
  std::string s;
  for (const GpuModel& m : gpuModels()) {
    if (!s.empty()) s += ", ";
    s += m.key;
    if (!m.aliases.empty() && std::strchr(m.aliases[0], '-') == nullptr)
      s += std::string(" (") + m.aliases[0] + ")";
  }
  return s;
}

Status builtinGpuSpec(const std::string& modelOrAlias, const std::string& deviceName,
                      DeviceSpec* out) {
  std::string want = lower(trim(modelOrAlias));
  for (const GpuModel& m : gpuModels()) {
    bool match = want == m.key;
    for (const char* a : m.aliases) match = match || want == a;
    if (!match) continue;
    DeviceSpec s;
    s.name = deviceName;
    s.kind = DeviceKind::Cuda;
    s.model = m.key;
    s.description = m.description;
    s.peakF32FlopsPerSec = m.f32;
    s.peakTf32FlopsPerSec = m.tf32;
    s.peakBf16FlopsPerSec = m.bf16;
    s.peakF64FlopsPerSec = m.f64;
    s.memoryBandwidthBytesPerSec = m.bandwidth;
    s.memoryCapacityBytes = (int64_t)m.capacity;
    s.dispatchOverheadSec = kGpuLaunchSec;
    s.syncLatencySec = kGpuSyncSec;
    s.enqueueSec = kGpuEnqueueSec;
    s.hostLinkName = m.host->name;
    s.hostLinkLatencySec = m.host->latencySec;
    s.h2dPinnedBytesPerSec = m.host->bytesPerSec;
    s.d2hPinnedBytesPerSec = m.host->bytesPerSec;
    s.pageableFactor = 0.5;
    if (m.peer) {
      s.peerLinkName = m.peer->name;
      s.peerLinkLatencySec = m.peer->latencySec;
      s.peerBytesPerSec = m.peer->bytesPerSec;
    }
    *out = std::move(s);
    return Status::ok();
  }
  return Status::error("unknown GPU model '" + modelOrAlias + "' (known: " + knownGpuModelsText() +
                       ")");
}

std::string knownCpuModelsText() {
  std::string s = "live (this machine)";
  for (const CpuModel& m : cpuModels()) s += std::string(", ") + m.key;
  return s;
}

Status builtinCpuSpec(const std::string& modelOrAlias, const std::string& deviceName,
                      DeviceSpec* out) {
  std::string want = lower(trim(modelOrAlias));
  for (const CpuModel& m : cpuModels()) {
    bool match = want == m.key;
    for (const char* a : m.aliases) match = match || want == a;
    if (!match) continue;
    DeviceSpec s;
    s.name = deviceName;
    s.kind = DeviceKind::Cpu;
    s.model = m.key;
    s.description = m.description;
    s.cores = m.cores;
    s.simdF32Lanes = m.lanes;
    s.frequencyHz = m.frequencyHz;
    s.peakF32FlopsPerSec = (double)m.cores * m.lanes * m.flopsPerLaneCycle * m.frequencyHz;
    s.peakF64FlopsPerSec = s.peakF32FlopsPerSec / 2;
    s.memoryBandwidthBytesPerSec = m.bandwidth;
    s.memoryCapacityBytes = (int64_t)m.capacity;
    s.dispatchOverheadSec = m.dispatchSec;
    *out = std::move(s);
    return Status::ok();
  }
  return Status::error("unknown CPU model '" + modelOrAlias + "' (known: " + knownCpuModelsText() +
                       ")");
}

DeviceSpec liveCpuSpec(const std::string& deviceName, int shareCount) {
  shareCount = std::max(1, shareCount);
  DeviceSpec s;
  s.name = deviceName;
  s.kind = DeviceKind::Cpu;
  s.model = "x86-64";
  const int total = availableCores();
  s.cores = std::max(1, total / shareCount);
  if (total < shareCount)
    s.notes.push_back("only " + std::to_string(total) + " cores for " + std::to_string(shareCount) +
                      " CPU devices: each is given 1 and they oversubscribe the machine");
  // OMP_NUM_THREADS fixes the runtime's intra-op threads (runtime/Device.h defaultThreads):
  // a plan run with fewer threads than cores gets only their share of the FLOPs and bandwidth.
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) {
    int n = std::atoi(omp);
    if (n > 0 && n < s.cores) {
      s.cores = n;
      s.notes.push_back("OMP_NUM_THREADS=" + std::to_string(n) + ": priced for " +
                        std::to_string(n) + " thread" + (n == 1 ? "" : "s"));
    }
  }

  // FLOPs per lane per cycle: two FMA units x 2 FLOPs = 4; without FMA, one add port and one
  // multiply port issuing together = 2.
  int flopsPerLaneCycle = 2;
  std::string isa;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) s.simdF32Lanes = 16, isa = "avx512f";
  else if (__builtin_cpu_supports("avx2")) s.simdF32Lanes = 8, isa = "avx2";
  else s.simdF32Lanes = 4, isa = "sse";
  if (__builtin_cpu_supports("fma")) flopsPerLaneCycle = 4, isa += "+fma";
  if (s.simdF32Lanes == 16)
    s.notes.push_back("assumes two AVX-512 FMA units per core (some Xeon Silver/Bronze parts "
                      "have one)");
#else
  s.model = "cpu";
  s.simdF32Lanes = 4;  // 128-bit vectors (NEON) as the portable guess
  flopsPerLaneCycle = 4;
  isa = "128-bit simd (assumed)";
  s.notes.push_back("not an x86 CPU: assumed 128-bit SIMD with FMA");
#endif
  std::string freqSource;
  s.frequencyHz = cpuFrequencyHz(&freqSource);
  if (s.frequencyHz <= 0) {
    s.frequencyHz = 2.5e9;
    s.notes.push_back("CPU frequency unknown (no cpufreq, no cpu MHz in /proc/cpuinfo): assumed "
                      "2.5 GHz");
  } else if (freqSource.find("current") != std::string::npos) {
    s.notes.push_back("frequency from " + freqSource);
  }
  s.peakF32FlopsPerSec = (double)s.cores * s.simdF32Lanes * flopsPerLaneCycle * s.frequencyHz;
  s.peakF64FlopsPerSec = s.peakF32FlopsPerSec / 2;  // half the lanes

  // Without a measurement we take 10 GB/s per core: what one core of a current server streams
  // from DRAM (a whole socket saturates higher, a single desktop core streams more).
  s.memoryBandwidthBytesPerSec = 10e9 * s.cores;
  s.notes.push_back("memory bandwidth uncalibrated: 10 GB/s per core assumed (run tandem "
                    "calibrate)");
  // The last-level cache: a core reads its L3 at up to 32 bytes per cycle (AMD Zen 2-4: one
  // 32 B/cycle path per core; measured on a Zen 4 EPYC, 1 thread: a 784x512 f32 Gemm's 1.6 MB
  // of weights at 32 B/cycle, an Add over 4 MB at 40; Intel server parts reach less, which
  // `tandem calibrate`'s elementwise curve corrects).
  s.lastLevelCacheBytes = lastLevelCacheBytes();
  if (s.lastLevelCacheBytes > 0) s.cacheBandwidthBytesPerSec = 32.0 * s.frequencyHz * s.cores;
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  s.memoryCapacityBytes = pages > 0 && pageSize > 0 ? (int64_t)pages * pageSize / shareCount : 0;
  s.dispatchOverheadSec = kCpuDispatchSec;

  std::string cpuModel = "x86-64 CPU";
  for (const DeviceInfo& d : discoverDevices())
    if (d.kind == "cpu")
      for (const auto& [k, v] : d.properties)
        if (k == "model" && v != "unknown") cpuModel = v;
  s.description = cpuModel + " (" + std::to_string(s.cores) + " cores, " + isa + ", " +
                  formatGHz(s.frequencyHz) + ")";
  return s;
}

// ---- DeviceSet ----

Status DeviceSet::parse(const std::string& targetList, DeviceSet* out) {
  std::vector<std::string> entries;
  {
    std::stringstream ss(targetList);
    std::string e;
    while (std::getline(ss, e, ',')) entries.push_back(trim(e));
    if (!targetList.empty() && targetList.back() == ',') entries.push_back("");
  }
  if (trim(targetList).empty())
    return Status::error("empty target list (expected e.g. cpu,cuda:0=h100)");

  struct Parsed {
    std::string name, model, entry;
  };
  std::vector<Parsed> parsed;
  int cpuCount = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    if (e.empty())
      return Status::error("target list '" + targetList + "': entry " + std::to_string(i + 1) +
                           " is empty");
    std::string rawName = e, model;
    if (auto eq = e.find('='); eq != std::string::npos) {
      rawName = trim(e.substr(0, eq));
      model = trim(e.substr(eq + 1));
      if (model.empty())
        return Status::error("target entry '" + e + "': missing model after '=' (known GPUs: " +
                             knownGpuModelsText() + "; CPUs: " + knownCpuModelsText() + ")");
    }
    std::string name = canonicalDeviceName(rawName);
    if (name.empty())
      return Status::error("target entry '" + e + "': '" + rawName +
                           "' is not a device (expected cpu, cpu:N, cuda:N or gpu:N)");
    for (const Parsed& p : parsed)
      if (p.name == name)
        return Status::error("target entry '" + e + "' repeats device '" + name +
                             "' (given as '" + p.entry + "')");
    bool isCpu = name.rfind("cpu", 0) == 0;
    if (isCpu && lower(model) == "live") model.clear();
    if (!isCpu && model.empty())
      return Status::error("target entry '" + e + "': a CUDA device needs a model, e.g. " + name +
                           "=h100 (known: " + knownGpuModelsText() + ")");
    cpuCount += isCpu && model.empty();  // live CPUs split this machine's cores
    parsed.push_back({name, model, e});
  }
  bool anyCpu = false;
  for (const Parsed& p : parsed) anyCpu |= p.name.rfind("cpu", 0) == 0;
  if (!anyCpu)
    return Status::error("target list '" + targetList + "' has no CPU device: add 'cpu' (graph "
                         "inputs and outputs live in host memory)");

  std::vector<DeviceSpec> specs;
  for (const Parsed& p : parsed) {
    bool isCpu = p.name.rfind("cpu", 0) == 0;
    if (isCpu && p.model.empty()) {
      specs.push_back(liveCpuSpec(p.name, cpuCount));
      continue;
    }
    DeviceSpec s;
    Status st = isCpu ? builtinCpuSpec(p.model, p.name, &s) : builtinGpuSpec(p.model, p.name, &s);
    if (!st) return st.withContext("target entry '" + p.entry + "'");
    specs.push_back(std::move(s));
  }
  return fromSpecs(std::move(specs), out);
}

DeviceSet DeviceSet::live() {
  std::vector<DeviceSpec> specs;
  for (const DeviceInfo& d : discoverDevices()) {
    if (d.kind == "cpu") specs.push_back(liveCpuSpec(d.name, 1));
    if (d.kind != "cuda") continue;
    // A live GPU gets the built-in spec of its model; an unknown model the A100's (the most
    // conservative table entry), said in the spec's notes. Calibration replaces either.
    std::string model;
    for (const auto& [k, v] : d.properties)
      if (k == "model") model = v;
    std::string lower;
    for (char c : model) lower += (char)std::tolower((unsigned char)c);
    bool pcie = lower.find("pcie") != std::string::npos;
    std::string alias = lower.find("h200") != std::string::npos   ? "h200"
                        : lower.find("h100") != std::string::npos ? (pcie ? "h100-pcie" : "h100")
                        : lower.find("a100") != std::string::npos ? (pcie ? "a100-pcie" : "a100")
                                                                  : "";
    DeviceSpec g;
    if (!builtinGpuSpec(alias.empty() ? "a100" : alias, d.name, &g)) continue;
    if (alias.empty())
      g.notes.push_back("no built-in spec for '" + model + "': the A100 table is assumed (run tandem calibrate)");
    specs.push_back(std::move(g));
  }
  DeviceSet set;
  // Discovery always reports the CPU, so this cannot fail; fall back to a bare CPU regardless.
  if (!fromSpecs(specs, &set)) fromSpecs({liveCpuSpec("cpu", 1)}, &set);
  return set;
}

Status DeviceSet::fromSpecs(std::vector<DeviceSpec> specs, DeviceSet* out) {
  if (specs.empty()) return Status::error("a device set needs at least one device");
  for (size_t i = 0; i < specs.size(); ++i) {
    const DeviceSpec& s = specs[i];
    std::string canon = canonicalDeviceName(s.name);
    if (canon.empty() || canon != s.name)
      return Status::error("device spec '" + s.name + "': not a canonical device name (cpu, "
                           "cpu:N, cuda:N)");
    if (!(s.peakF32FlopsPerSec > 0) || !(s.memoryBandwidthBytesPerSec > 0) ||
        s.dispatchOverheadSec < 0)
      return Status::error("device spec '" + s.name + "': peak FLOP/s and memory bandwidth must "
                           "be positive, dispatch overhead non-negative");
    if (s.isGpu() && (!(s.h2dPinnedBytesPerSec > 0) || !(s.d2hPinnedBytesPerSec > 0)))
      return Status::error("device spec '" + s.name + "': a GPU needs positive H2D and D2H "
                           "bandwidths");
    for (size_t j = 0; j < i; ++j)
      if (specs[j].name == s.name)
        return Status::error("device '" + s.name + "' appears twice in the device set");
  }
  DeviceSet set;
  set.devices_ = std::move(specs);
  set.deriveLinks();
  *out = std::move(set);
  return Status::ok();
}

void DeviceSet::deriveLinks() {
  const size_t n = devices_.size();
  links_.assign(n * n, Link{});
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const DeviceSpec& a = devices_[i];
      const DeviceSpec& b = devices_[j];
      Link& l = links_[i * n + j];
      l.from = a.name;
      l.to = b.name;
      if (!a.isGpu() && !b.isGpu()) {
        // Two CPU devices share DRAM: a copy reads and writes every byte.
        l.kind = Link::Kind::HostToHost;
        l.medium = "host-memcpy";
        l.latencySec = std::max(a.dispatchOverheadSec, b.dispatchOverheadSec);
        l.pinnedBytesPerSec =
            std::min(a.memoryBandwidthBytesPerSec, b.memoryBandwidthBytesPerSec) / 2;
        l.pageableBytesPerSec = l.pinnedBytesPerSec;
      } else if (!a.isGpu()) {
        l.kind = Link::Kind::HostToDevice;
        l.medium = b.hostLinkName;
        l.latencySec = b.hostLinkLatencySec;
        l.pinnedBytesPerSec = b.h2dPinnedBytesPerSec;
        l.pageableBytesPerSec = b.h2dPinnedBytesPerSec * b.pageableFactor;
      } else if (!b.isGpu()) {
        l.kind = Link::Kind::DeviceToHost;
        l.medium = a.hostLinkName;
        l.latencySec = a.hostLinkLatencySec;
        l.pinnedBytesPerSec = a.d2hPinnedBytesPerSec;
        l.pageableBytesPerSec = a.d2hPinnedBytesPerSec * a.pageableFactor;
      } else if (!a.peerLinkName.empty() && a.peerLinkName == b.peerLinkName) {
        l.kind = Link::Kind::PeerToPeer;
        l.medium = a.peerLinkName;
        l.latencySec = std::max(a.peerLinkLatencySec, b.peerLinkLatencySec);
        l.pinnedBytesPerSec = std::min(a.peerBytesPerSec, b.peerBytesPerSec);
        l.pageableBytesPerSec = l.pinnedBytesPerSec;
      } else {
        // No common NVLink: D2H into a pinned host buffer, then H2D, pipelined in chunks, so the
        // slower leg sets the rate and both latencies add.
        l.kind = Link::Kind::PeerToPeer;
        l.medium = "pcie-via-host";
        l.latencySec = a.hostLinkLatencySec + b.hostLinkLatencySec;
        l.pinnedBytesPerSec = std::min(a.d2hPinnedBytesPerSec, b.h2dPinnedBytesPerSec);
        l.pageableBytesPerSec = l.pinnedBytesPerSec;
      }
    }
  }
}

int DeviceSet::indexOf(const std::string& name) const {
  std::string canon = canonicalDeviceName(name);
  if (canon.empty()) return -1;
  for (size_t i = 0; i < devices_.size(); ++i)
    if (devices_[i].name == canon) return (int)i;
  return -1;
}

const DeviceSpec* DeviceSet::find(const std::string& name) const {
  int i = indexOf(name);
  return i < 0 ? nullptr : &devices_[i];
}

int DeviceSet::hostIndex() const {
  for (size_t i = 0; i < devices_.size(); ++i)
    if (!devices_[i].isGpu()) return (int)i;
  return -1;
}

const Link* DeviceSet::link(size_t from, size_t to) const {
  if (from == to || from >= devices_.size() || to >= devices_.size()) return nullptr;
  return &links_[from * devices_.size() + to];
}

Link* DeviceSet::mutableLink(size_t from, size_t to) {
  if (from == to || from >= devices_.size() || to >= devices_.size()) return nullptr;
  return &links_[from * devices_.size() + to];
}

const Link* DeviceSet::link(const std::string& from, const std::string& to) const {
  int a = indexOf(from), b = indexOf(to);
  return a < 0 || b < 0 ? nullptr : link((size_t)a, (size_t)b);
}

std::vector<const Link*> DeviceSet::links() const {
  std::vector<const Link*> out;
  for (size_t i = 0; i < devices_.size(); ++i)
    for (size_t j = 0; j < devices_.size(); ++j)
      if (i != j) out.push_back(&links_[i * devices_.size() + j]);
  return out;
}

std::string DeviceSet::toString() const {
  std::string s;
  for (const DeviceSpec& d : devices_) {
    if (!s.empty()) s += ",";
    s += d.name;
    if (d.isGpu() || d.model != "x86-64") s += "=" + d.model;
  }
  return s;
}

}  // namespace tandem
