// Runs a loaded Executable: warm-up, timed runs, optional profiled runs, output checks, and
// the text or JSON report (RunReport.h).
#include "tools/driver/RunReport.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include <sys/stat.h>

#include "frontend/OnnxTensor.h"
#include "runtime/Device.h"
#include "runtime/FileIO.h"
#include "runtime/Trace.h"
#include "runtime/Tuning.h"
#include "tools/driver/TensorFiles.h"

namespace tandem {

const char* const kWinogradHelp =
    "CPU 3x3 stride-1 convolutions (AVX2 hosts): auto = Winograd F(4x4,3x3) or F(2x2,3x3) by "
    "shape (F(4x4) rounds 5-7x more than a plain f32 loop), 2x2 = F(2x2,3x3) only (rounding "
    "at direct convolution's level), off = oneDNN's direct convolution";

const char* const kTuningHelp =
    "CPU kernel choice where a step has several implementations (oneDNN or Winograd for 3x3 "
    "convolutions, oneDNN or Tandem's direct kernel for grouped convolutions, oneDNN or the AVX2 "
    "packed GEMM for 1x1 convolutions and Gemm/MatMul, oneDNN's convolution or its matmul for "
    "1x1 convolutions between plain values, oneDNN's deconvolution or one convolution over the "
    "output phases for ConvTranspose): measure = time them at load "
    "and keep the fastest, cached in $TANDEM_TUNING_CACHE or ~/.cache/tandem/kernel-timings.json "
    "(default); cached = the cache's choice, built-in on a miss, never measure; off = the "
    "built-in choice. Default: $TANDEM_TUNING, else measure";

void addRunFlags(CLI::App* cmd, RunFlags& f) {
  auto* inputsOpt = cmd->add_option("--inputs", f.inputs,
                                    "Directory with input_0.pb, input_1.pb, ... (ONNX TensorProto)");
  cmd->add_flag("--random", f.random, "Use random inputs (uniform [0,1) floats, ints in [0,10)); the default without --inputs")
      ->excludes(inputsOpt);
  cmd->add_option("--expect", f.expect,
                  "Directory with output_0.pb, ...: report max abs/rel error and PASS/FAIL (exit 1 on FAIL)");
  cmd->add_option("--save-outputs", f.saveOutputs,
                  "Write the outputs to DIR/output_0.pb, ... (ONNX TensorProto; DIR is created), e.g. "
                  "reference outputs for another runtime");
  cmd->add_option("--atol", f.atol,
                  "Absolute tolerance for --expect (default: 1e-4; 1e-3 for f16 outputs, 1e-2 for bf16)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--rtol", f.rtol,
                  "Relative tolerance for --expect (default: 1e-3; 1e-2 for f16 outputs, 5e-2 for bf16)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--iterations", f.iterations, "Timed runs (median, min and p90 latency reported)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--warmup", f.warmup, "Untimed runs before timing (default: 1 when --iterations > 1, else 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--threads", f.threads, "Intra-op threads (0 = auto: the cores not busy with other processes)")
      ->check(threadCountCheck())->capture_default_str();
  cmd->add_flag("--step-times", f.stepTimes,
                "Per-step times (device, kernel): each step's median over as many extra, untimed, "
                "profiled runs as --iterations; a dynamic region's eager ops (from the run of its "
                "median) follow its line, summed per op type");
  cmd->add_option("--gpu-memory-fraction", f.gpuMemoryFraction,
                  "Preallocate this fraction of each GPU's memory (0 < F <= 1); default: grow on demand")
      ->check(fractionCheck());
  cmd->add_option("--winograd", f.winograd, kWinogradHelp)
      ->check(CLI::IsMember({"auto", "2x2", "off"}))->capture_default_str();
  cmd->add_option("--tuning", f.tuning, kTuningHelp)
      ->check(CLI::IsMember({"measure", "cached", "off"}));
  cmd->add_option("--trace", f.trace,
                  "Write the timed runs as a Chrome trace (FILE.json, for ui.perfetto.dev or "
                  "chrome://tracing): a lane per device stream, an event per step and copy. Traced "
                  "runs synchronise after every step, so their latency includes that");
  cmd->add_flag("--json", f.json,
                "Print one JSON object (latency median/min/p90, outputs and their errors, devices "
                "and peak bytes, step times) instead of the text report");
}

int maxThreads() {
  return std::max<int>({1, (int)std::thread::hardware_concurrency(), availableCores()});
}

CLI::Validator threadCountCheck() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        long long v = 0;
        size_t used = 0;
        try {
          v = std::stoll(s, &used);
        } catch (...) {
          used = 0;
        }
        if (used != s.size() || v < 0) return "thread count '" + s + "' is not an integer >= 0";
        if (v > maxThreads())
          return "thread count " + s + " is more than this host's " + std::to_string(maxThreads()) +
                 " hardware threads (the maximum)";
        return "";
      },
      "0..HOST_THREADS");
}

CLI::Validator fractionCheck() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = NAN;
        size_t used = 0;
        try {
          v = std::stod(s, &used);
        } catch (...) {
          used = 0;
        }
        // Written so that NaN fails: it compares false with everything.
        if (used != s.size() || !(v > 0 && v <= 1))
          return "fraction '" + s + "' is not in (0, 1]";
        return "";
      },
      "(0,1]");
}

LoadOptions loadOptionsFor(int threads, double gpuMemoryFraction, const std::string& winograd,
                           const std::string& tuning) {
  LoadOptions lo;
  // "" leaves TuningMode::Default ($TANDEM_TUNING); the CLI admits only the three names.
  if (!tuning.empty()) parseTuningMode(tuning, &lo.tuning);
  lo.threads = threads;
  lo.gpuMemoryFraction = gpuMemoryFraction;
  // The CLI admits only these three spellings (addRunFlags).
  lo.winograd = winograd == "off"   ? WinogradPolicy::Off
                : winograd == "2x2" ? WinogradPolicy::Tile2x2
                                    : WinogradPolicy::Auto;
  return lo;
}

void defaultTolerance(DType dtype, double* atol, double* rtol) {
  *atol = dtype == DType::F16 ? 1e-3 : dtype == DType::BF16 ? 1e-2 : 1e-4;
  *rtol = dtype == DType::F16 ? 1e-2 : dtype == DType::BF16 ? 5e-2 : 1e-3;
}

RunReportOptions reportOptionsFor(const RunFlags& f, const std::string& tool, const std::string& label) {
  RunReportOptions r;
  r.tool = tool;
  r.label = label;
  r.inputsLabel = f.inputs;
  r.expectDir = f.expect;
  r.saveOutputsDir = f.saveOutputs;
  r.atol = f.atol;
  r.rtol = f.rtol;
  r.iterations = f.iterations;
  r.warmup = f.warmup;
  r.threadsAuto = f.threads == 0;
  r.stepTimes = f.stepTimes;
  r.tracePath = f.trace;
  r.json = f.json;
  return r;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = (size_t)std::ceil(q * v.size());
  return v[std::min(v.size() - 1, rank ? rank - 1 : 0)];
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

// JSON has no NaN or infinity: an error that is not finite is written as null.
nlohmann::json number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

// A DynamicRegion's eager ops (StepTiming::subSteps) under its step-times line, summed per op
// type, the slowest first: count, time, share of the region, kernels; the ten slowest types.
void printRegionOps(const StepTiming& s) {
  struct Sum {
    int count = 0;
    double seconds = 0;
    std::set<std::string> impls;
  };
  std::map<std::string, Sum> byType;
  for (const SubStepTiming& sub : s.subSteps) {
    Sum& t = byType[sub.opType];
    ++t.count;
    t.seconds += sub.seconds;
    t.impls.insert(sub.impl);
  }
  std::vector<std::pair<std::string, Sum>> rows(byType.begin(), byType.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  const size_t shown = std::min<size_t>(rows.size(), 10);
  for (size_t i = 0; i < shown; ++i) {
    const auto& [type, t] = rows[i];
    std::string impls;
    for (const std::string& k : t.impls) impls += (impls.empty() ? "" : ", ") + k;
    std::printf("    %5d x %-20s %9.3f ms %5.1f%%  %s\n", t.count, type.c_str(), t.seconds * 1e3,
                s.seconds > 0 ? 100 * t.seconds / s.seconds : 0.0, impls.c_str());
  }
  if (rows.size() > shown) std::printf("    ... %zu more op types\n", rows.size() - shown);
}

}  // namespace

std::vector<StepTiming> medianSteps(const std::vector<RunStats>& runs) {
  if (runs.empty()) return {};
  const size_t steps = runs.front().steps.size();
  for (const RunStats& r : runs)
    if (r.steps.size() != steps) return runs.front().steps;  // a plan's steps are fixed
  std::vector<StepTiming> out;
  out.reserve(steps);
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < steps; ++i) {
    for (size_t r = 0; r < runs.size(); ++r) order[r] = r;
    // The upper middle of an even count, by nearest rank, as quantile(v, 0.5): a run's own
    // sample, so the step's sub-steps (from that run) add up to its time.
    std::nth_element(order.begin(), order.begin() + runs.size() / 2, order.end(),
                     [&](size_t a, size_t b) { return runs[a].steps[i].seconds < runs[b].steps[i].seconds; });
    out.push_back(runs[order[runs.size() / 2]].steps[i]);
  }
  return out;
}

int runAndReport(Executable& exe, std::vector<Tensor> inputs, const RunReportOptions& o) {
  auto fail = [&](const std::string& msg) {
    std::fprintf(stderr, "%s: error: %s\n", o.tool.c_str(), msg.c_str());
    return 1;
  };
  std::string inputsLabel = o.inputsLabel;
  if (inputs.empty() && !exe.inputTypes().empty()) {
    std::mt19937 rng(42);
    for (const TensorType& t : exe.inputTypes()) inputs.push_back(randomTensor(t, rng));
    inputsLabel = "random (seed 42)";
    if (!o.json) std::cout << "inputs: random (seed 42)\n";
  }
  const int warmup = o.warmup >= 0 ? o.warmup : (o.iterations > 1 ? 1 : 0);
  std::vector<Tensor> outputs;
  std::vector<double> times;
  RunStats stats;
  // The trace file is created first: an unwritable path fails before the runs, not after.
  AtomicFile traceFile;
  Trace trace;
  if (!o.tracePath.empty()) {
    Status st = traceFile.open(o.tracePath);
    if (!st.isOk()) return fail(st.message());
  }
  for (int i = 0; i < warmup + o.iterations; ++i) {
    const bool traced = i >= warmup && !o.tracePath.empty();
    Status st = exe.run(inputs, &outputs, &stats, traced);
    if (!st.isOk()) return fail(o.label + ": " + st.message());
    if (i >= warmup) times.push_back(stats.seconds);
    if (traced) trace.addRun(stats, "run " + std::to_string(i - warmup));
  }
  if (!o.tracePath.empty()) {
    std::string text = trace.json();
    Status st = traceFile.write(text.data(), text.size());
    if (st.isOk()) st = traceFile.commit();
    if (!st.isOk()) return fail(st.message());
  }
  // Profiling synchronises after every step; its runs are extra so the timed ones stay clean.
  // As many as the timed runs, each step reported at its median over them (one profiled run
  // is a single sample per step, too noisy to compare steps of a small model).
  std::vector<StepTiming> profiledSteps;
  int profiledRuns = 0;
  if (o.stepTimes) {
    std::vector<RunStats> runs(o.iterations);
    for (RunStats& r : runs) {
      std::vector<Tensor> ignored;
      Status st = exe.run(inputs, &ignored, &r, /*profile=*/true);
      if (!st.isOk()) return fail(o.label + ": " + st.message());
    }
    profiledSteps = medianSteps(runs);
    profiledRuns = o.iterations;
  }
  std::vector<Tensor> expected;
  if (!o.expectDir.empty()) {
    Status st = readTensorDir(o.expectDir, "output", &expected, nullptr);
    if (!st.isOk()) return fail(st.message());
    if (expected.size() != outputs.size())
      return fail(o.expectDir + ": has " + std::to_string(expected.size()) + " outputs, the model " +
                  std::to_string(outputs.size()));
  }

  if (!o.saveOutputsDir.empty()) {
    ::mkdir(o.saveOutputsDir.c_str(), 0755);  // an existing directory is fine; writes say the rest
    for (size_t i = 0; i < outputs.size(); ++i) {
      Status st = writeTensorFile(o.saveOutputsDir + "/output_" + std::to_string(i) + ".pb", outputs[i],
                                  exe.outputNames()[i]);
      if (!st.isOk()) return fail(st.message());
    }
  }

  bool allPass = true;
  const auto& names = exe.outputNames();
  nlohmann::json jOutputs = nlohmann::json::array();
  std::string text;
  char buf[512];
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    nlohmann::json jo = {{"name", names[i]}, {"dtype", dtypeName(t.dtype())}, {"shape", t.shape()},
                         {"checksum", number(checksum(t))}};
    std::snprintf(buf, sizeof buf, "output %zu '%s': %s%s checksum %.6g", i, names[i].c_str(),
                  dtypeName(t.dtype()), shapeToString(t.shape()).c_str(), checksum(t));
    text += buf;
    if (!expected.empty()) {
      double atol, rtol;
      defaultTolerance(t.dtype(), &atol, &rtol);
      if (o.atol >= 0) atol = o.atol;
      if (o.rtol >= 0) rtol = o.rtol;
      Comparison c = compareTensors(t, expected[i], atol, rtol);
      allPass &= c.pass;
      jo["max_abs_err"] = number(c.maxAbsError);
      jo["max_rel_err"] = number(c.maxRelError);
      jo["pass"] = c.pass;
      if (!c.pass) jo["reason"] = c.reason;
      std::snprintf(buf, sizeof buf, "  max_abs_err %.3g max_rel_err %.3g  %s", c.maxAbsError,
                    c.maxRelError, c.pass ? "PASS" : ("FAIL (" + c.reason + ")").c_str());
      text += buf;
    }
    text += "\n";
    jOutputs.push_back(jo);
  }
  const double med = median(times) * 1e3, mn = *std::min_element(times.begin(), times.end()) * 1e3;
  const double p90 = quantile(times, 0.9) * 1e3, mx = *std::max_element(times.begin(), times.end()) * 1e3;
  double mean = 0;
  for (double t : times) mean += t * 1e3 / times.size();

  if (o.json) {
    nlohmann::json j;
    j["tool"] = o.tool;
    j["model"] = o.label;
    j["inputs"] = inputsLabel;
    j["threads"] = exe.threads();
    j["iterations"] = o.iterations;
    j["warmup"] = warmup;
    if (o.loadSeconds >= 0) j["load_ms"] = o.loadSeconds * 1e3;
    if (!o.tracePath.empty()) j["trace"] = o.tracePath;
    j["latency_ms"] = {{"median", med}, {"min", mn}, {"p90", p90}, {"max", mx}, {"mean", mean}};
    j["runs_ms"] = nlohmann::json::array();
    for (double t : times) j["runs_ms"].push_back(t * 1e3);
    j["devices"] = nlohmann::json::array();
    for (auto& [dev, bytes] : exe.peakBytes()) j["devices"].push_back({{"name", dev}, {"peak_bytes", bytes}});
    j["outputs"] = jOutputs;
    j["pass"] = expected.empty() ? nlohmann::json() : nlohmann::json(allPass);
    if (o.stepTimes) {
      j["step_runs"] = profiledRuns;
      j["steps"] = nlohmann::json::array();
      for (const StepTiming& s : profiledSteps) {
        nlohmann::json step = {{"name", s.name}, {"op_type", s.opType}, {"device", s.device},
                               {"impl", s.impl}, {"ms", s.seconds * 1e3}};
        if (!s.subSteps.empty()) {
          step["sub_steps"] = nlohmann::json::array();
          for (const SubStepTiming& sub : s.subSteps)
            step["sub_steps"].push_back({{"name", sub.name}, {"op_type", sub.opType},
                                         {"impl", sub.impl}, {"ms", sub.seconds * 1e3}});
        }
        j["steps"].push_back(std::move(step));
      }
    }
    j["notes"] = exe.notes();
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cout << text;
    std::printf("latency: median %.3f ms, min %.3f ms, p90 %.3f ms over %zu runs (%d warm-up, threads %d%s)\n",
                med, mn, p90, times.size(), warmup, exe.threads(), o.threadsAuto ? ", auto" : "");
    if (o.loadSeconds >= 0) std::printf("load: %.3f ms\n", o.loadSeconds * 1e3);
    if (!o.tracePath.empty())
      std::printf("trace: %s (%zu runs, profiled: synchronised after every step)\n",
                  o.tracePath.c_str(), trace.runs());
    std::string peak;
    for (auto& [dev, bytes] : exe.peakBytes())
      peak += (peak.empty() ? "" : ", ") + dev + " " + std::to_string(bytes) + " bytes";
    std::printf("peak memory: %s\n", peak.c_str());
    if (o.stepTimes) {
      if (profiledRuns == 1)
        std::printf("step times (one extra, profiled run):\n");
      else
        std::printf("step times (median of %d extra, profiled runs):\n", profiledRuns);
      for (const StepTiming& s : profiledSteps) {
        std::printf("  %-28s %-20s %-8s %-40s %9.3f ms\n", s.name.c_str(), s.opType.c_str(),
                    s.device.c_str(), s.impl.c_str(), s.seconds * 1e3);
        printRegionOps(s);
      }
    }
    if (!expected.empty()) std::printf("%s\n", allPass ? "PASS" : "FAIL");
    std::fflush(stdout);
  }
  return allPass ? 0 : 1;
}

}  // namespace tandem
