// The `tandem` subcommands: options structs and entry points (each returns the exit code).
#pragma once
#include <string>
#include <vector>

#include "tools/driver/RunReport.h"

namespace CLI { class App; }

namespace tandem::cli {

constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2;

/// Flags shared by compile and run (how an ONNX model is compiled).
struct CommonCompileFlags {
  std::vector<std::string> dims;      // NAME=VALUE symbolic dim bindings
  std::vector<std::string> pins;      // NODE=DEVICE
  std::string target;                 // cpu,cuda:0=h100
  std::string profile;                // calibration profile JSON
  std::string placement = "cost";     // cost, greedy, ort, cpu, gpu
  bool strictPlacement = false;
  bool noFuse = false;  // --no-fuse: one kernel per op
  bool noQdqFusion = false;  // --no-qdq-fusion: QDQ convolutions stay f32
  std::string f16Rounding = "islands";  // --f16-rounding islands|per-op
  std::string int8Activations = "model";  // --int8-activations model|all|none
  std::string logPlacement;           // "", "text", "json", "dot"
  bool logPlacementSet = false;
  bool printIrAfterAll = false;
  bool timePasses = false;  // --time-passes: wall time of import, each pass, emit
  bool verifyEachPass = false;  // --verify-each-pass
};
void addCommonCompileFlags(CLI::App* cmd, CommonCompileFlags& f);

struct DevicesOptions { bool json = false; };
struct KernelsOptions { std::string op; };
struct CompileOptionsCli {
  std::string model, output;
  std::string weights;  // --weights FILE: constants go to this shared weights file

  CommonCompileFlags common;
};
struct RunOptionsCli {
  std::string model;
  RunFlags run;  // tools/driver/RunReport.h, shared with tandem-run
  CommonCompileFlags common;
};
struct BenchOptions {
  std::vector<std::string> dirs;
  std::vector<int> threads = {1, 2};
  int minRuns = 20;
  double minSec = 3;
  int warmup = 5;
  std::vector<int> dataSets;
  double gpuMemoryFraction = 0;
  std::string winograd = "auto";
  std::string tuning;
  std::string trace;  // --trace FILE.json: timed runs profiled, the first kBenchTracedRuns of
                      // each (model, data set, threads) written as a Chrome trace
};
constexpr int kBenchTracedRuns = 20;
/// `tandem tune`: fills the kernel timing cache for models ahead of runs.
struct TuneOptions {
  std::vector<std::string> models;  // model directories (DIR/model.onnx) or .onnx files
  std::vector<std::string> dims;    // NAME=V1,V2,...: one load per value (cartesian product)
  std::vector<int> threads = {1};
  std::string winograd = "auto";
};

int runDevices(const DevicesOptions& o);
int runKernels(const KernelsOptions& o);
int runCompile(const CompileOptionsCli& o);
int runRun(const RunOptionsCli& o);
int runBench(const BenchOptions& o);
int runTune(const TuneOptions& o);

}  // namespace tandem::cli
