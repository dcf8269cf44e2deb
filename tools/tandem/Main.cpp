// `tandem`: devices, kernels, compile, run, bench, train. Thin: parsing here, work in the driver.
// Exit codes: 0 ok, 1 model or runtime error, 2 usage error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "tools/tandem/Calibrate.h"
#include "tools/tandem/Commands.h"
#include "tools/tandem/Train.h"

int main(int argc, char** argv) {
  using namespace tandem::cli;
  CLI::App app{"Tandem: compile ONNX models and C++ graphs into placed, memory-planned plans and "
               "run them (CPU via oneDNN, NVIDIA GPUs via cuBLASLt/cuDNN/NVRTC)."};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every command");

  DevicesOptions devices;
  CLI::App* devicesCmd = app.add_subcommand("devices", "List the live devices and their properties");
  devicesCmd->add_flag("--json", devices.json, "Print JSON instead of a table");

  KernelsOptions kernels;
  CLI::App* kernelsCmd = app.add_subcommand("kernels", "Print the kernel registry as a table");
  kernelsCmd->add_option("--op", kernels.op, "Only this op type (e.g. Conv)");

  CompileOptionsCli compile;
  CLI::App* compileCmd = app.add_subcommand(
      "compile", "Compile an ONNX model into a plan file (.tplan)");
  compileCmd->add_option("model", compile.model, "ONNX model file")->required();
  compileCmd->add_option("-o,--output", compile.output, "Plan file to write")->required();
  compileCmd->add_option("--weights", compile.weights,
                         "Store the constants in this weights file, shared by plans of one model "
                         "(content-addressed: a blob it holds is not written again); the plan "
                         "refers to it relative to the plan's own directory");
  addCommonCompileFlags(compileCmd, compile.common);

  RunOptionsCli run;
  CLI::App* runCmd = app.add_subcommand(
      "run", "Run an ONNX model or a plan on inputs, check outputs, time it");
  runCmd->add_option("model", run.model,
                     "MODEL.onnx, MODEL.tplan, or a model directory in the ONNX test layout (DIR/model.onnx; "
                     "--inputs and --expect then default to DIR/test_data_set_0, unless --random)")
      ->required();
  tandem::addRunFlags(runCmd, run.run);
  addCommonCompileFlags(runCmd, run.common);

  BenchOptions bench;
  CLI::App* benchCmd = app.add_subcommand(
      "bench", "Time models in the ONNX test layout (DIR/model.onnx + DIR/test_data_set_K/)");
  benchCmd->add_option("dirs", bench.dirs, "Model directories")->required();
  benchCmd->add_option("--threads", bench.threads, "Thread counts to time")->delimiter(',')
      ->check(tandem::threadCountCheck())->capture_default_str();
  benchCmd->add_option("--min-runs", bench.minRuns, "Timed runs at least")->capture_default_str();
  benchCmd->add_option("--min-sec", bench.minSec, "Timed seconds at least")->capture_default_str();
  benchCmd->add_option("--warmup", bench.warmup, "Untimed runs first")->capture_default_str();
  benchCmd->add_option("--data-sets", bench.dataSets, "Only these test_data_set indices")->delimiter(',');
  benchCmd->add_option("--gpu-memory-fraction", bench.gpuMemoryFraction,
                       "Preallocate this fraction of each GPU's memory (0 < F <= 1); default: grow on demand")
      ->check(tandem::fractionCheck());
  benchCmd->add_option("--winograd", bench.winograd, tandem::kWinogradHelp)
      ->check(CLI::IsMember({"auto", "2x2", "off"}))->capture_default_str();
  benchCmd->add_option("--tuning", bench.tuning, tandem::kTuningHelp)
      ->check(CLI::IsMember({"measure", "cached", "off"}));
  benchCmd->add_option("--trace", bench.trace,
                       "Write a Chrome trace (FILE.json, for ui.perfetto.dev or chrome://tracing) of "
                       "the first " + std::to_string(tandem::cli::kBenchTracedRuns) +
                       " timed runs of each model, data set and thread count; the timed runs then "
                       "synchronise after every step, so their times include that");

  TuneOptions tune;
  CLI::App* tuneCmd = app.add_subcommand(
      "tune", "Measure the CPU kernel variants of models ahead of runs (fills the kernel timing "
              "cache) and print each step's times and choice");
  tuneCmd->add_option("models", tune.models, "Model directories (DIR/model.onnx) or .onnx files")
      ->required();
  tuneCmd->add_option("--dim", tune.dims, "Symbolic dim values, one load each: NAME=V1,V2 (e.g. N=1,32)");
  tuneCmd->add_option("--threads", tune.threads, "Thread counts (intra-op), one load each")
      ->delimiter(',')->check(CLI::PositiveNumber & tandem::threadCountCheck())->capture_default_str();
  tuneCmd->add_option("--winograd", tune.winograd, tandem::kWinogradHelp)
      ->check(CLI::IsMember({"auto", "2x2", "off"}))->capture_default_str();

  TrainOptionsCli train;
  CLI::App* trainCmd = app.add_subcommand(
      "train", "Train an ONNX classifier (Fashion-MNIST or ONNX data sets) and write the trained model");
  addTrainFlags(trainCmd, train);

  CalibrateOptions calibrate;
  CLI::App* calibrateCmd = app.add_subcommand(
      "calibrate", "Measure the live CPU (GEMM, conv, elementwise, dispatch) and write a cost-model profile");
  calibrateCmd->add_option("-o,--output", calibrate.output, "Profile JSON to write")->required();
  calibrateCmd->add_option("--seconds", calibrate.seconds, "Measurement budget in seconds")
      ->check(CLI::PositiveNumber)->capture_default_str();
  calibrateCmd->add_option("--threads", calibrate.threads, "Threads (0 = auto: the cores not busy with other processes, as tandem run)")
      ->check(tandem::threadCountCheck())->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tandem: usage error: %s\nRun 'tandem --help' or 'tandem COMMAND --help'.\n",
                 e.what());
    return 2;
  }
  // Allocation (Tensor::alloc: "out of memory allocating N bytes for ..."), oneDNN
  // (dnnl::error) and the standard library report failures by exception; none may escape a
  // command as an abort. Any output file is still a temporary then, removed by its destructor.
  try {
    if (*devicesCmd) return runDevices(devices);
    if (*kernelsCmd) return runKernels(kernels);
    if (*compileCmd) return runCompile(compile);
    if (*runCmd) return runRun(run);
    if (*benchCmd) return runBench(bench);
    if (*calibrateCmd) return runCalibrate(calibrate);
    if (*tuneCmd) return runTune(tune);
    if (*trainCmd) return runTrain(train);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tandem: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
