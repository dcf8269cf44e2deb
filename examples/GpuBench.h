// What the GPU benchmark examples share at run time, with the runtime alone (no MLIR: the
// examples' *_run builds include this and link tandem_runtime only): load a plan whose kernels are
// on cuda:0 without device fallback, time runs, read the plans directory's manifest, and the
// deterministic fill both sides of a comparison use. Compiling the graphs: GpuBenchCompile.h.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/Executable.h"

namespace gpubench {

/// Element i of a deterministic fill in [-0.5, 0.5): periodic (period 17), so a plan holding a
/// large constant of it packs to a few KB with xz (a GPU kit carries at most 60 MiB) while the
/// GEMM and element-wise kernels, whose time does not depend on the values, see a full tensor.
/// For an n x n matrix of it, the largest singular value is 0.16 n (measured at n = 256, 1024
/// and 4096), so `scale` = 6 / n keeps a chain of products O(1).
inline float patternValue(int64_t i, float scale = 1.f) {
  return ((float)((i * 37) % 17) / 17.f - 0.5f) * scale;
}

/// One line of DIR/manifest.txt (written by an example's --write-plans): a kind word, then
/// key=value fields, e.g. "gemm n=256 reps=20 one=gemm-n256-x1.tplan kernels_one=1 ...".
struct ManifestEntry {
  std::string kind;
  std::map<std::string, std::string> fields;
  std::string get(const std::string& key) const {
    auto it = fields.find(key);
    return it == fields.end() ? "" : it->second;
  }
  long long num(const std::string& key) const { return std::atoll(get(key).c_str()); }
};

/// Reads DIR/manifest.txt. Returns "" or the reason (missing file, a line without a kind).
inline std::string readManifest(const std::string& dir, std::vector<ManifestEntry>* out) {
  std::ifstream in(dir + "/manifest.txt");
  if (!in) return dir + "/manifest.txt: cannot read (made by the example's --write-plans DIR)";
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    ManifestEntry e;
    words >> e.kind;
    for (std::string w; words >> w;) {
      size_t eq = w.find('=');
      if (eq == std::string::npos) return dir + "/manifest.txt: '" + w + "' is not key=value";
      e.fields[w.substr(0, eq)] = w.substr(eq + 1);
    }
    out->push_back(e);
  }
  return "";
}

/// Loads a plan file (constants from its weights file) without device fallback: a benchmark
/// that silently ran on the CPU would be wrong. Returns "" or the reason.
inline std::string loadOnGpu(const std::string& path, std::unique_ptr<tandem::Executable>* exe) {
  tandem::LoadOptions lo;
  lo.deviceFallback = false;
  tandem::Status st = tandem::Executable::loadFile(path, lo, exe);
  return st.isOk() ? "" : "load " + path + ": " + st.message();
}

/// Median wall-clock seconds of `runs` runs of `exe` after `warmup` runs. Each run copies the
/// inputs in and the outputs out and synchronises once (Executable::run).
inline std::string medianRunSeconds(tandem::Executable& exe, const std::vector<tandem::Tensor>& inputs,
                                    int warmup, int runs, double* seconds) {
  std::vector<tandem::Tensor> out;
  std::vector<double> t;
  for (int i = 0; i < warmup + runs; ++i) {
    tandem::RunStats s;
    tandem::Status st = exe.run(inputs, &out, &s);
    if (!st.isOk()) return "run: " + st.message();
    if (i >= warmup) t.push_back(s.seconds);
  }
  std::sort(t.begin(), t.end());
  *seconds = t[t.size() / 2];
  return "";
}

/// Median over `runs` profiled runs of the summed time of the cuda:0 kernel steps (Copy steps
/// excluded). Profiling synchronises the device after every step, so each step's time is its
/// launch plus its kernel plus one host-device round trip.
inline std::string medianProfiledGpuSeconds(tandem::Executable& exe, const std::vector<tandem::Tensor>& inputs,
                                            int runs, double* seconds) {
  std::vector<tandem::Tensor> out;
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    tandem::RunStats s;
    tandem::Status st = exe.run(inputs, &out, &s, /*profile=*/true);
    if (!st.isOk()) return "profiled run: " + st.message();
    double sum = 0;
    for (const auto& step : s.steps)
      if (step.device == "cuda:0" && step.opType != "Copy") sum += step.seconds;
    t.push_back(sum);
  }
  std::sort(t.begin(), t.end());
  *seconds = t[t.size() / 2];
  return "";
}

/// Writes `text` to `path` (a small JSON result for scripts); returns "" or the reason.
inline std::string writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  return out ? "" : path + ": cannot write";
}

}  // namespace gpubench
