// Device discovery: the live devices of this machine and their properties (DESIGN §2 Device).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tandem {

struct DeviceInfo {
  std::string name;  // "cpu", later "cuda:0"
  std::string kind;  // "cpu", "cuda"
  /// Ordered (key, value) properties for display: cores, isa, memory_bytes, ...
  std::vector<std::pair<std::string, std::string>> properties;
};

/// The devices present on this machine. The CPU is always present. Backends that are not built
/// in, or whose hardware is absent, add a note instead (see discoveryNotes()).
std::vector<DeviceInfo> discoverDevices();
/// One line per backend that found nothing, saying why ("cuda: not built into this binary").
std::vector<std::string> discoveryNotes();

/// Normalises a device name: "CPU:0", "/cpu:0", "cpu:0" -> "cpu"; "/device:GPU:1", "gpu:1",
/// "GPU:1" -> "cuda:1"; "cpu:1" stays "cpu:1". Returns "" for an unparsable name.
std::string canonicalDeviceName(const std::string& name);

/// The CPU's "model name" from /proc/cpuinfo, e.g. "AMD EPYC 7B13"; "unknown" without one.
std::string cpuModelName();
/// The instruction set oneDNN's kernels use after TANDEM_MAX_CPU_ISA, e.g. "avx2",
/// "avx512_core_bf16" (what `tandem devices` shows as isa).
std::string cpuEffectiveIsa();

/// Number of CPU cores this process may run on (sched_getaffinity), at least 1.
int availableCores();

/// The intra-op thread count to use when the user gave none: the cores not busy with other
/// processes right now, at least 1. OpenMP parallel regions (oneDNN's threading here) end in a
/// barrier that waits for every thread, so a thread that shares its core with another process
/// stalls every op for a scheduler time slice: measured on this 2-vCPU machine with two
/// compilers running, mnist_cnn at batch 32 took 124 ms with 2 threads and 15 ms with 1 (9 ms
/// with 2 threads when idle). Busy cores are estimated from /proc/stat's procs_running
/// (runnable tasks, this thread excluded), averaged over `samples` reads 1 ms apart. OMP_NUM_THREADS,
/// when set to a positive number, wins. `why` (optional) receives a one-line explanation when
/// the result is less than availableCores(), else is cleared.
int defaultThreads(std::string* why = nullptr, int samples = 10);

}  // namespace tandem
