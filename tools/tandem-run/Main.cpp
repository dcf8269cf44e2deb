// `tandem-run`: runs compiled plans (.tplan) and calibrates the GPU with the runtime alone (no
// MLIR, no LLVM, no compiler), for machines that only run what `tandem compile` made elsewhere.
// Exit codes as `tandem`: 0 ok, 1 plan or runtime error (or FAIL), 2 usage error.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>

#include "runtime/Device.h"
#include "runtime/Executable.h"
#include "tools/driver/KernelCalibration.h"
#include "tools/driver/RunReport.h"
#include "tools/driver/TensorFiles.h"

namespace tandem {
namespace {

constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2;

int fail(const std::string& msg) {
  std::fprintf(stderr, "tandem-run: error: %s\n", msg.c_str());
  return kExitError;
}

int runPlan(const std::string& plan, const RunFlags& f) {
  std::vector<Tensor> inputs;
  if (!f.inputs.empty()) {
    Status st = readTensorDir(f.inputs, "input", &inputs, nullptr);
    if (!st.isOk()) return fail(st.message());
  }
  std::unique_ptr<Executable> exe;
  const auto start = std::chrono::steady_clock::now();
  Status st = Executable::loadFile(plan, loadOptionsFor(f.threads, f.gpuMemoryFraction, f.winograd, f.tuning), &exe);
  const double loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!st.isOk()) return fail(st.message());
  for (const std::string& n : exe->notes()) std::fprintf(stderr, "tandem-run: note: %s\n", n.c_str());
  RunReportOptions report = reportOptionsFor(f, "tandem-run", plan);
  report.loadSeconds = loadSeconds;
  return runAndReport(*exe, std::move(inputs), report);
}

struct CalibrateFlags {
  std::string output;
  double seconds = 10;
};

// The GPU half of `tandem calibrate` (the CPU half times the compiler's view of CPU kernels and
// stays with `tandem`): a profile with cuda:0 and the cpu <-> cuda:0 links, which
// `tandem compile --profile` reads on the machine that compiles.
int calibrate(const CalibrateFlags& f) {
  // Fail before measuring, not after it, when the profile cannot be written.
  {
    std::string probe = f.output + ".tmp." + std::to_string((long)getpid());
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    if (!out) return fail(f.output + ": cannot write: " + std::strerror(errno));
    out.close();
    std::remove(probe.c_str());
  }
  nlohmann::json devices = nlohmann::json::object(), links = nlohmann::json::array();
  std::string unavailable;
  const auto start = calib::Clock::now();
  Status st = calib::calibrateGpu(f.seconds, &devices, &links, &unavailable);
  if (!st.isOk()) return fail("calibrating cuda:0: " + st.message());
  if (!unavailable.empty())
    return fail("no GPU to calibrate: " + unavailable +
                " (tandem-run calibrate measures cuda:0; 'tandem calibrate' measures the CPU)");
  std::string host = "unknown";
  for (const DeviceInfo& d : discoverDevices())
    for (const auto& [k, v] : d.properties)
      if (d.name == "cpu" && k == "model") host = v;
  nlohmann::json profile;
  profile["schema"] = "tandem-calibration/1";
  profile["created"] = calib::utcNow();
  profile["host"] = host;
  profile["tool"] = "tandem-run calibrate";
  profile["seconds"] = calib::secondsSince(start);
  profile["devices"] = devices;
  profile["links"] = links;
  st = writeFileAtomic(f.output, profile.dump(2) + "\n");
  if (!st.isOk()) return fail(st.message());
  std::printf("wrote %s (%.1f s)\n", f.output.c_str(), calib::secondsSince(start));
  return kExitOk;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  CLI::App app{"tandem-run: run compiled Tandem plans (.tplan from 'tandem compile') and calibrate "
               "the GPU, with the runtime alone (no compiler, no MLIR/LLVM)."};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every command");

  std::string plan;
  RunFlags run;
  CLI::App* runCmd = app.add_subcommand(
      "run", "Run a plan on inputs, check outputs against references, time it");
  runCmd->add_option("plan", plan, "PLAN.tplan (its weights file, if any, is found next to it)")
      ->required();
  addRunFlags(runCmd, run);

  CalibrateFlags cal;
  CLI::App* calCmd = app.add_subcommand(
      "calibrate", "Measure cuda:0 (launch overhead, GEMM, conv, elementwise, cpu <-> cuda:0 "
                   "copies) and write a cost-model profile for 'tandem compile --profile'");
  calCmd->add_option("-o,--output", cal.output, "Profile JSON to write")->required();
  calCmd->add_option("--seconds", cal.seconds, "Measurement budget in seconds")
      ->check(CLI::PositiveNumber)->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tandem-run: usage error: %s\nRun 'tandem-run --help' or "
                         "'tandem-run COMMAND --help'.\n", e.what());
    return kExitUsage;
  }
  // oneDNN reports failures by exception (dnnl::error) and allocation can throw; neither may
  // escape a command.
  try {
    if (*runCmd) return runPlan(plan, run);
    if (*calCmd) return calibrate(cal);
  } catch (const std::bad_alloc&) {
    return fail("out of memory");
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return kExitUsage;
}
