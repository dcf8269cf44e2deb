// Device discovery: the CPU through the OS and oneDNN, CUDA devices through the CUDA backend.
#include "runtime/Device.h"

#include "runtime/Backend.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {

int availableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  }
  return "unknown";
}

static const char* isaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

std::string cpuEffectiveIsa() {
  dnnlcpu::applyCpuIsaCap();
  return isaName(dnnl::get_effective_cpu_isa());
}

std::vector<DeviceInfo> discoverDevices() {
  DeviceInfo cpu;
  cpu.name = "cpu";
  cpu.kind = "cpu";
  const dnnl_version_t* v = dnnl_version();
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  dnnlcpu::applyCpuIsaCap();  // the ISA shown is the one the kernels will use
  cpu.properties = {
      {"model", cpuModelName()},
      {"cores", std::to_string(availableCores())},
      {"isa", isaName(dnnl::get_effective_cpu_isa())},
      {"memory_bytes", std::to_string((long long)pages * pageSize)},
      {"onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                     std::to_string(v->patch)},
      {"threading", "OpenMP"},
  };
  std::vector<DeviceInfo> all = {cpu};
  std::string note;
  for (DeviceInfo& d : discoverCudaDevices(&note)) all.push_back(std::move(d));
  return all;
}

std::vector<std::string> discoveryNotes() {
  std::string note;
  discoverCudaDevices(&note);
  if (note.empty()) return {};
  return {note};
}

int defaultThreads(std::string* why, int samples) {
  if (why) why->clear();
  const int cores = availableCores();
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  if (cores <= 1) return 1;
  double sum = 0;
  int got = 0;
  for (int i = 0; i < samples; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::ifstream in("/proc/stat");
    std::string key;
    long value = 0;
    while (in >> key) {
      if (key == "procs_running") {
        if (in >> value) sum += (double)value, ++got;
        break;
      }
      in.ignore(1 << 20, '\n');
    }
  }
  if (got == 0) return cores;  // no /proc/stat: assume the machine is ours
  // procs_running counts this thread too.
  double busy = std::max(0.0, sum / got - 1.0);
  int threads = std::max(1, std::min(cores, cores - (int)std::lround(busy)));
  if (threads < cores && why) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%.1f of %d cores busy with other processes: running with %d thread%s "
                  "(--threads sets the count)",
                  busy, cores, threads, threads == 1 ? "" : "s");
    *why = buf;
  }
  return threads;
}

std::string canonicalDeviceName(const std::string& raw) {
  std::string s;
  for (char c : raw) s += (char)std::tolower((unsigned char)c);
  if (s.rfind("/device:", 0) == 0) s = s.substr(8);
  else if (!s.empty() && s[0] == '/') s = s.substr(1);
  std::string kind = s, index;
  auto colon = s.find(':');
  if (colon != std::string::npos) {
    kind = s.substr(0, colon);
    index = s.substr(colon + 1);
    if (index.empty() || !std::all_of(index.begin(), index.end(), ::isdigit)) return "";
  }
  if (kind == "gpu") kind = "cuda";
  if (kind != "cpu" && kind != "cuda") return "";
  if (index.empty()) index = "0";
  if (index.size() > 6) return "";
  index = std::to_string(std::stoi(index));  // "01" -> "1"
  if (kind == "cpu") return index == "0" ? "cpu" : "cpu:" + index;
  return "cuda:" + index;
}

}  // namespace tandem
