// Running a loaded Executable and reporting it, shared by `tandem run` and `tandem-run run`
// (no MLIR): warm-up and timed runs, output checks against reference files, text or JSON.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "runtime/Executable.h"
#include "runtime/Tensor.h"

namespace CLI { class App; }

namespace tandem {

/// The run flags `tandem run` and `tandem-run run` share (addRunFlags defines them).
struct RunFlags {
  std::string inputs;             // --inputs DIR (input_0.pb, ...)
  bool random = false;            // --random (the default when no --inputs)
  std::string expect;             // --expect DIR (output_0.pb, ...)
  std::string saveOutputs;        // --save-outputs DIR (output_0.pb, ... written)
  double atol = -1, rtol = -1;    // < 0: the output dtype's default (defaultTolerance)
  int iterations = 1;
  int warmup = -1;                // -1: 1 when iterations > 1, else 0
  int threads = 0;                // 0: defaultThreads()
  bool stepTimes = false;
  bool json = false;
  double gpuMemoryFraction = 0;   // 0: GPU arenas grow on demand
  std::string winograd = "auto";  // auto | 2x2 | off
  std::string tuning;             // "" ($TANDEM_TUNING, else measure) | measure | cached | off
  std::string trace;              // --trace FILE.json: the timed runs, profiled, as a Chrome trace
};
/// The --expect tolerances of an output of `dtype` where the user gave none: atol 1e-4, rtol
/// 1e-3, loosened for the 16-bit floats to a few units in the last place (f16: atol 1e-3,
/// rtol 1e-2; bf16: atol 1e-2, rtol 5e-2), since a model computed in f32 and rounded to 16 bits
/// at its outputs differs from a reference by a step or two there.
void defaultTolerance(DType dtype, double* atol, double* rtol);
/// Help texts of --winograd and --tuning (also used by `tandem bench` and `tandem tune`).
extern const char* const kWinogradHelp;
extern const char* const kTuningHelp;
/// Adds the RunFlags options to `cmd` with their checks (usage errors: --iterations 0,
/// --inputs with --random, a fraction outside (0, 1], an unknown --winograd or --tuning).
void addRunFlags(CLI::App* cmd, RunFlags& flags);
/// The most intra-op threads a command accepts: the host's hardware threads (the larger of
/// std::thread::hardware_concurrency and the cores this process may run on). More is a usage
/// error naming this maximum (libgomp faults creating 100000 threads).
int maxThreads();
/// CLI11 check for a thread count in [0, maxThreads()] (0 = auto).
CLI::Validator threadCountCheck();
/// CLI11 check for a fraction in (0, 1]; NaN and 0 are usage errors.
CLI::Validator fractionCheck();
/// LoadOptions for threads, GPU memory fraction, Winograd policy ("auto", "2x2", "off") and
/// kernel tuning mode ("" = $TANDEM_TUNING or measure, "measure", "cached", "off").
LoadOptions loadOptionsFor(int threads, double gpuMemoryFraction, const std::string& winograd,
                           const std::string& tuning = "");

struct RunReportOptions {
  std::string tool = "tandem";  // prefix of error lines: "<tool>: error: ..."
  std::string label;            // the model or plan, as the user named it (messages, JSON)
  std::string inputsLabel;      // where the inputs came from ("" = random, generated here)
  std::string expectDir;        // output_0.pb, ... to compare with; "" = no check
  std::string saveOutputsDir;   // write output_0.pb, ... here; "" = not written
  double atol = -1, rtol = -1;  // < 0: the output dtype's default (defaultTolerance)
  int iterations = 1;           // timed runs, >= 1
  int warmup = -1;              // untimed runs first; -1: 1 when iterations > 1, else 0
  bool threadsAuto = true;      // LoadOptions::threads was 0 (said in the text report)
  bool stepTimes = false;       // `iterations` extra, untimed, profiled runs: per-step medians
  std::string tracePath;        // "" or a Chrome trace file (runtime/Trace.h) of the timed runs,
                                // which are then profiled (synchronised after every step)
  bool json = false;            // one JSON object on stdout instead of the text report
  double loadSeconds = -1;      // Executable::loadFile wall time (plan and weights read, devices
                                // bound, constants uploaded, NVRTC compile or cache read); < 0: not timed
};

/// Runs `exe` warmup + iterations times on `inputs` (plan order; empty: random inputs of the
/// declared types, seed 42), compares the last outputs with opts.expectDir if given, and prints
/// the report to stdout: text (outputs with checksum and errors, latency median/min/p90, peak
/// memory, step times (with opts.stepTimes: after the timed runs, opts.iterations more, profiled
/// ones, each step at its median over them; medianSteps), PASS/FAIL, the load time when
/// opts.loadSeconds >= 0) or, with opts.json, one object
/// (with "trace": path when opts.tracePath is set; the trace file is opened before the first run,
/// so an unwritable path fails before any run, and committed after the last):
///   {"tool", "model", "inputs", "threads", "iterations", "warmup", ["load_ms"],
///    "latency_ms": {"median", "min", "p90", "max", "mean"}, "runs_ms": [...],
///    "devices": [{"name", "peak_bytes"}], "outputs": [{"name", "dtype", "shape", "checksum",
///    ["max_abs_err", "max_rel_err", "pass", "reason"]}], "pass": bool or null,
///    "step_runs": N, "steps": [{"name", "op_type", "device", "impl", "ms", ["sub_steps": [{"name",
///    "op_type", "impl", "ms"}]]}] (with stepTimes; sub_steps: a DynamicRegion's eager ops),
///    "notes": [...]}
/// In the text report a DynamicRegion's line is followed by its eager ops summed per op type,
/// the slowest first.
/// Errors go to stderr as "<tool>: error: ..." (a failed run, unreadable reference files, a
/// reference count that differs from the outputs). Returns the exit code: 0 ok (and PASS when
/// checked), 1 error or FAIL.
int runAndReport(Executable& exe, std::vector<Tensor> inputs, const RunReportOptions& opts);
/// Each step of the profiled `runs` (RunStats::steps, one plan's, so the same steps in each) at
/// its median over them: the step as timed in the run whose time for it is the median (the upper
/// middle one of an even count, as quantile(v, 0.5)), so its sub-steps are that run's and add up
/// to it. Empty for no runs; runs whose step counts differ give the first run's steps.
std::vector<StepTiming> medianSteps(const std::vector<RunStats>& runs);
/// RunReportOptions from the flags, for `tool` running `label`.
RunReportOptions reportOptionsFor(const RunFlags& flags, const std::string& tool, const std::string& label);

/// The q-quantile (0..1) of `v` by nearest rank (q = 0.5 gives the upper median of an even
/// count; use median() for the mean of the middle two). `v` must not be empty.
double quantile(std::vector<double> v, double q);
/// The median of `v` (mean of the middle two for an even count); 0 for an empty `v`.
double median(std::vector<double> v);

}  // namespace tandem
