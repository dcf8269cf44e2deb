// The `tandem` subcommands. Errors print one "tandem: error: ..." block and return 1.
#include "tools/tandem/Commands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "llvm/Support/raw_ostream.h"
#include "compiler/placement/DeviceSpec.h"
#include "runtime/Device.h"
#include "runtime/FileIO.h"
#include "runtime/Trace.h"
#include "runtime/WeightsFile.h"
#include "tools/driver/Driver.h"
#include "tools/driver/RunReport.h"
#include "tools/driver/TensorFiles.h"

namespace tandem::cli {

namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "tandem: error: %s\n", msg.c_str());
  return kExitError;
}
int usage(const std::string& msg) {
  std::fprintf(stderr, "tandem: usage error: %s\n", msg.c_str());
  return kExitUsage;
}
bool endsWith(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Turns the shared flags into compiler options; returns "" or a usage error message.
std::string toCompileOptions(const CommonCompileFlags& f, CompileOptions* c) {
  for (const std::string& d : f.dims) {
    auto eq = d.find('=');
    if (eq == std::string::npos || eq == 0) return "--dim expects NAME=VALUE, got '" + d + "'";
    try {
      size_t used = 0;
      long long v = std::stoll(d.substr(eq + 1), &used);
      if (used != d.size() - eq - 1 || v < 0) throw std::invalid_argument("");
      c->dimBindings[d.substr(0, eq)] = v;
    } catch (...) {
      return "--dim expects a non-negative integer value, got '" + d + "'";
    }
  }
  for (const std::string& p : f.pins) {
    auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0) return "--pin expects NODE=DEVICE, got '" + p + "'";
    std::string dev = canonicalDeviceName(p.substr(eq + 1));
    if (dev.empty()) return "--pin: unknown device '" + p.substr(eq + 1) + "'";
    c->pins.push_back({p.substr(0, eq), dev});
  }
  c->strictPlacement = f.strictPlacement;
  c->fuse = !f.noFuse;
  c->qdqFusion = !f.noQdqFusion;
  c->f16PerOpRounding = f.f16Rounding == "per-op";
  c->int8Activations = f.int8Activations == "all"    ? CompileOptions::Int8Activations::All
                       : f.int8Activations == "none" ? CompileOptions::Int8Activations::None
                                                     : CompileOptions::Int8Activations::Model;
  c->verifyEachPass = f.verifyEachPass;
  if (!f.target.empty()) {
    DeviceSet set;
    Status st = DeviceSet::parse(f.target, &set);
    if (!st.isOk()) return "--target: " + st.message();
    c->devices = std::move(set);
  }
  c->profilePath = f.profile;
  std::optional<placement::PlacementPolicy> policy = placement::parsePolicy(f.placement);
  if (!policy) return "--placement: unknown policy '" + f.placement + "'";
  c->placementPolicy = *policy;
  return "";
}

void printNotes(const CompileResult& r) {
  for (const std::string& n : r.notes) std::fprintf(stderr, "tandem: note: %s\n", n.c_str());
}

void printStepTimes(const CommonCompileFlags& f, const CompileResult& r) {
  if (!f.timePasses) return;
  double total = 0;
  for (const auto& [step, s] : r.stepSeconds) total += s;
  for (const auto& [step, s] : r.stepSeconds)
    std::fprintf(stderr, "tandem: time: %-24s %9.3f s  %5.1f%%\n", step.c_str(), s,
                 total > 0 ? 100 * s / total : 0.0);
  std::fprintf(stderr, "tandem: time: %-24s %9.3f s\n", "total", total);
}

void printPlacementLog(const CommonCompileFlags& f, const CompileResult& r) {
  if (!f.logPlacementSet) return;
  if (f.logPlacement == "json") std::cout << r.placementLogJson << "\n";
  else if (f.logPlacement == "dot") std::cout << r.placementLogDot;
  else std::cout << r.placementLogText;
  std::cout.flush();
}

// A compiled, loaded model plus the inputs that remain after specialisation. compiled.plan has
// moved into exe.
struct Loaded {
  std::unique_ptr<Executable> exe;
  CompileResult compiled;
};

// ONNX path: given inputs that reach a shape operand (Reshape's shape, Slice's starts, Range's bounds)
// are folded into the plan as constants; the rest stay run-time inputs and bind input shapes.
Status loadOnnx(const std::string& path, const std::vector<Tensor>& given,
                const CommonCompileFlags& flags, const CompileOptions& base, const LoadOptions& lo,
                Loaded* out, std::vector<Tensor>* remainingInputs) {
  ImportOptions io;
  CompileOptions co = base;
  std::vector<std::string> folded;
  TANDEM_RETURN_IF_ERROR(specializeOnnxInputs(path, given, &io, &co, remainingInputs, &folded));
  for (const std::string& n : folded)
    std::fprintf(stderr, "tandem: note: input '%s' is a constant of the plan (it reaches a shape operand)\n",
                 n.c_str());
  std::string irText;
  llvm::raw_string_ostream irStream(irText);
  if (flags.printIrAfterAll) co.printIrAfterAll = &irStream;
  Status st = compileOnnxFile(path, io, co, &out->compiled);
  if (flags.printIrAfterAll) std::cerr << irStream.str();
  if (!st.isOk()) return st;
  printNotes(out->compiled);
  printStepTimes(flags, out->compiled);
  // The plan moves into the executable: its constants are then held once, not twice.
  return Executable::load(std::move(out->compiled.plan), lo, &out->exe).withContext(path);
}

}  // namespace

void addCommonCompileFlags(CLI::App* cmd, CommonCompileFlags& f) {
  cmd->add_option("--dim", f.dims, "Bind a symbolic dim: NAME=VALUE (e.g. N=32); others bind to 1");
  cmd->add_option("--pin", f.pins, "Pin an op to a device: NODE=DEVICE (soft unless --strict-placement)");
  cmd->add_flag("--strict-placement", f.strictPlacement, "Unsatisfiable pins are errors");
  cmd->add_flag("--no-fuse", f.noFuse, "Skip the fuse pass: one kernel per op");
  cmd->add_flag("--no-qdq-fusion", f.noQdqFusion,
                "Keep convolutions and matrix products written in QDQ form (DequantizeLinear -> "
                "Conv/MatMul/Gemm -> QuantizeLinear) as written, in f32, and fold weight-only "
                "quantized weights (DequantizeLinear of constants -> MatMul/Gemm) to f32; by "
                "default, on CPU-only targets, each runs as one int8 QLinearConv or QLinearMatMul, "
                "or a DequantizeMatMul on weights kept 8-bit or 4-bit, where this CPU has a fast "
                "kernel for it");
  cmd->add_option("--int8-activations", f.int8Activations,
                  "Weight-only quantized matrix products (MatMulNBits, or DequantizeLinear of "
                  "constant weights -> MatMul/Gemm) may quantize "
                  "their activations to int8 per row and block (ONNX Runtime's accuracy level 4: "
                  "faster; each activation rounded to a 127th of its block's largest): 'model' where the "
                  "model says so (MatMulNBits accuracy_level 4), 'all' every one (ONNX Runtime's "
                  "default for QDQ weights), 'none' never (f32 activations)")
      ->check(CLI::IsMember({"model", "all", "none"}));
  cmd->add_option("--f16-rounding", f.f16Rounding,
                  "f16/bf16 models, ops without a 16-bit CPU kernel (computed in f32): 'islands' "
                  "keeps f32 between such ops and rounds where values leave them (as ONNX Runtime "
                  "does; faster, more accurate); 'per-op' rounds every op's result to 16 bits "
                  "(ONNX's semantics exactly)")
      ->check(CLI::IsMember({"islands", "per-op"}))
      ->capture_default_str();
  cmd->add_option("--target", f.target,
                  "Devices to place on, with models: e.g. cpu,cuda:0=h100 (GPUs: a100, a100-pcie, "
                  "h100, h100-pcie, h200; CPUs: live (default), xeon-8480, epyc-9654; cpu,cpu:1 "
                  "splits this CPU). Default: the live devices");
  cmd->add_option("--profile", f.profile, "Cost-model profile JSON written by 'tandem calibrate'");
  cmd->add_option("--placement", f.placement,
                  "Placement policy: cost (minimum estimated time), greedy (TensorFlow: GPU "
                  "whenever it has a kernel), ort (ONNX Runtime EP order), cpu, gpu")
      ->check(CLI::IsMember({"cost", "greedy", "ort", "cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--log-placement",
         [&f](const std::string& v) {
           f.logPlacementSet = true;
           f.logPlacement = v.empty() ? "text" : v;
         },
         "Print the placement log: text (default), json or dot (Graphviz)")
      ->expected(0, 1)
      ->check(CLI::IsMember({"", "text", "json", "dot"}));
  cmd->add_flag("--print-ir-after-all", f.printIrAfterAll, "Print the IR after every pass (stderr)");
  cmd->add_flag("--verify-each-pass", f.verifyEachPass,
                "Verify the IR after every pass (default: once, before the plan is emitted)");
  cmd->add_flag("--time-passes", f.timePasses,
                "Print the wall time of the import, each pass and the plan's emission (stderr)");
}

int runDevices(const DevicesOptions& o) {
  std::vector<DeviceInfo> devs = discoverDevices();
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (auto& d : devs) {
      nlohmann::json props = nlohmann::json::object();
      for (auto& [k, v] : d.properties) props[k] = v;
      j.push_back({{"name", d.name}, {"kind", d.kind}, {"properties", props}});
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  for (auto& d : devs) {
    std::cout << d.name << " (" << d.kind << ")\n";
    for (auto& [k, v] : d.properties) std::cout << "  " << std::left << std::setw(14) << k << v << "\n";
  }
  for (auto& n : discoveryNotes()) std::cout << "note: " << n << "\n";
  return kExitOk;
}

int runKernels(const KernelsOptions& o) {
  const auto& defs = KernelRegistry::global().all();
  std::vector<const KernelDef*> rows;
  for (auto& d : defs)
    if (o.op.empty() || d.opType == o.op) rows.push_back(&d);
  if (rows.empty()) return fail("no kernel registered for op '" + o.op + "'");
  std::stable_sort(rows.begin(), rows.end(), [](const KernelDef* a, const KernelDef* b) {
    return a->opType < b->opType;
  });
  std::cout << std::left << std::setw(22) << "op" << std::setw(8) << "device" << std::setw(8)
            << "impl" << std::setw(10) << "priority" << "dtypes\n";
  for (auto* d : rows)
    std::cout << std::left << std::setw(22) << d->opType << std::setw(8) << d->deviceKind
              << std::setw(8) << d->impl << std::setw(10) << d->priority << d->dtypesText << "\n";
  std::set<std::string> ops;
  for (auto* d : rows) ops.insert(d->opType);
  std::cout << rows.size() << " kernels for " << ops.size() << " ops\n";
  return kExitOk;
}

int runCompile(const CompileOptionsCli& o) {
  CompileOptions co;
  std::string err = toCompileOptions(o.common, &co);
  if (!err.empty()) return usage(err);
  if (endsWith(o.model, ".tplan")) return usage("compile takes an ONNX model, not a plan");
  std::string irText;
  llvm::raw_string_ostream irStream(irText);
  if (o.common.printIrAfterAll) co.printIrAfterAll = &irStream;
  CompileResult r;
  Status st = compileOnnxFile(o.model, ImportOptions{}, co, &r);
  if (o.common.printIrAfterAll) std::cerr << irStream.str();
  if (!st.isOk()) return fail(st.message());
  printNotes(r);
  printPlacementLog(o.common, r);
  printStepTimes(o.common, r);
  if (!o.weights.empty()) {
    ExternalizeStats ws;
    st = externalizeConstants(&r.plan, o.weights, o.output, &ws);
    if (!st.isOk()) return fail(st.message());
    std::fprintf(stderr, "tandem: weights %s: %d constants (%lld bytes) referenced, %d new blobs (%lld bytes) "
                 "appended, file %lld bytes\n", o.weights.c_str(), ws.constants, (long long)ws.constantBytes,
                 ws.newBlobs, (long long)ws.newBytes, (long long)ws.fileBytes);
  }
  std::string bytes;
  if (!r.plan.SerializeToString(&bytes)) return fail("cannot serialise the plan");
  st = writeFileAtomic(o.output, bytes);
  if (!st.isOk()) return fail(st.message());
  int64_t peak = 0, unplanned = 0;
  for (auto& a : r.plan.arenas()) peak += a.bytes(), unplanned += a.unplanned_bytes();
  std::fprintf(stderr, "tandem: wrote %s (%zu bytes): %d steps, %d values, arena peak %lld bytes (%lld without reuse)\n",
               o.output.c_str(), bytes.size(), r.plan.steps_size(), r.plan.values_size(), (long long)peak,
               (long long)unplanned);
  // Per device: kernels before and after fusion (copies excluded), arena peak vs the sum of
  // all intermediates.
  for (auto& a : r.plan.arenas()) {
    const std::string& d = a.device();
    auto count = [&](const std::map<std::string, int64_t>& m) {
      auto it = m.find(d);
      return (long long)(it == m.end() ? 0 : it->second);
    };
    std::fprintf(stderr, "tandem: %s: %lld kernels before fusion, %lld after; arena peak %lld bytes of %lld bytes of intermediates\n",
                 d.c_str(), count(r.kernelsBeforeFusion), count(r.kernelsAfterFusion), (long long)a.bytes(),
                 (long long)a.unplanned_bytes());
  }
  return kExitOk;
}

// `tandem run DIR`: a model directory in the ONNX backend-test layout runs DIR/model.onnx, and
// --inputs / --expect default to DIR/test_data_set_0 where it holds input_0.pb / output_0.pb
// (with --random neither: random inputs, nothing to compare with). "" and `o` unchanged when `o.model` is no directory.
std::string resolveModelDir(RunOptionsCli* o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(o->model, ec)) return "";
  const fs::path dir(o->model);
  if (!fs::is_regular_file(dir / "model.onnx", ec))
    return o->model + ": a directory without model.onnx (give MODEL.onnx, MODEL.tplan or a model "
                      "directory in the ONNX test layout)";
  o->model = (dir / "model.onnx").string();
  const fs::path set = dir / "test_data_set_0";
  std::string defaulted;
  if (o->run.inputs.empty() && !o->run.random && fs::is_regular_file(set / "input_0.pb", ec)) {
    o->run.inputs = set.string();
    defaulted = "--inputs";
  }
  if (o->run.expect.empty() && !o->run.random && fs::is_regular_file(set / "output_0.pb", ec)) {
    o->run.expect = set.string();
    defaulted += std::string(defaulted.empty() ? "" : " and ") + "--expect";
  }
  if (!defaulted.empty())
    std::fprintf(stderr, "tandem: note: %s: running model.onnx with %s %s\n", dir.string().c_str(),
                 defaulted.c_str(), set.string().c_str());
  return "";
}

int runRun(const RunOptionsCli& options) {
  RunOptionsCli o = options;
  if (std::string e = resolveModelDir(&o); !e.empty()) return fail(e);
  CompileOptions co;
  std::string err = toCompileOptions(o.common, &co);
  if (!err.empty()) return usage(err);
  const RunFlags& f = o.run;
  if (!f.inputs.empty() && f.random) return usage("--inputs and --random exclude each other");
  bool isPlan = endsWith(o.model, ".tplan");
  if (isPlan && (!o.common.dims.empty() || !o.common.pins.empty()))
    return usage("--dim and --pin apply when compiling an ONNX model, not to a .tplan");

  std::vector<Tensor> given;
  if (!f.inputs.empty()) {
    Status st = readTensorDir(f.inputs, "input", &given, nullptr);
    if (!st.isOk()) return fail(st.message());
  }
  Loaded m;
  std::vector<Tensor> inputs;
  LoadOptions lo = loadOptionsFor(f.threads, f.gpuMemoryFraction, f.winograd, f.tuning);
  RunReportOptions report = reportOptionsFor(f, "tandem", o.model);
  if (isPlan) {
    const auto start = std::chrono::steady_clock::now();
    Status st = Executable::loadFile(o.model, lo, &m.exe);
    report.loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!st.isOk()) return fail(st.message());
    inputs = given;
  } else {
    Status st = loadOnnx(o.model, given, o.common, co, lo, &m, &inputs);
    if (!st.isOk()) return fail(st.message());
    printPlacementLog(o.common, m.compiled);
  }
  for (const std::string& n : m.exe->notes()) std::fprintf(stderr, "tandem: note: %s\n", n.c_str());
  if (!f.inputs.empty()) {
    // What the plan reads per run: a benchmark whose inputs were all folded measures nothing.
    std::string in;
    for (size_t i = 0; i < m.exe->inputNames().size(); ++i)
      in += (i ? ", " : "") + m.exe->inputNames()[i] + " " +
            std::string(dtypeName(m.exe->inputTypes()[i].dtype)) + shapeToString(m.exe->inputTypes()[i].shape);
    // With --json, stdout is the one JSON object: the line goes to stderr, as a note.
    if (f.json) std::fprintf(stderr, "tandem: note: run-time inputs: %s\n", in.empty() ? "none" : in.c_str());
    else std::printf("run-time inputs: %s\n", in.empty() ? "none" : in.c_str());
  }
  int measured = 0;
  for (const StepTuning& t : m.exe->tuning()) measured += t.source == StepTuning::Source::Measured;
  if (measured) {
    std::fprintf(stderr, "tandem: note: measured the kernel variants of %d steps (kept in %s; "
                 "--tuning off uses the built-in choice)\n", measured, defaultTimingCachePath().c_str());
  }
  return runAndReport(*m.exe, std::move(inputs), report);
}

int runBench(const BenchOptions& o) {
  using Clock = std::chrono::steady_clock;
  int status = kExitOk;
  // The trace file is created first: an unwritable path fails before the runs, not after.
  AtomicFile traceFile;
  Trace trace;
  const bool tracing = !o.trace.empty();
  if (tracing) {
    Status st = traceFile.open(o.trace);
    if (!st.isOk()) return fail(st.message());
  }
  for (const std::string& dir : o.dirs) {
    for (int k = 0; k < 16; ++k) {
      if (!o.dataSets.empty() && std::find(o.dataSets.begin(), o.dataSets.end(), k) == o.dataSets.end())
        continue;
      std::string ds = dir + "/test_data_set_" + std::to_string(k);
      std::ifstream probe(ds + "/input_0.pb");
      if (!probe) {
        if (k == 0) status = fail(ds + ": no input_0.pb");
        break;
      }
      std::vector<Tensor> given, expected;
      Status st = readTensorDir(ds, "input", &given, nullptr);
      if (st.isOk()) st = readTensorDir(ds, "output", &expected, nullptr);
      if (!st.isOk()) { status = fail(st.message()); continue; }
      for (int threads : o.threads) {
        Loaded m;
        std::vector<Tensor> inputs, outputs;
        CommonCompileFlags flags;
        st = loadOnnx(dir + "/model.onnx", given, flags, CompileOptions{},
                      loadOptionsFor(threads, o.gpuMemoryFraction, o.winograd, o.tuning), &m, &inputs);
        if (!st.isOk()) { status = fail(st.message()); continue; }
        RunStats stats;
        for (int i = 0; i < o.warmup && st.isOk(); ++i) st = m.exe->run(inputs, &outputs, &stats);
        std::vector<double> times;
        auto start = Clock::now();
        while (st.isOk() && ((int)times.size() < o.minRuns ||
                             std::chrono::duration<double>(Clock::now() - start).count() < o.minSec)) {
          st = m.exe->run(inputs, &outputs, &stats, /*profile=*/tracing);
          if (st.isOk() && tracing && times.size() < kBenchTracedRuns)
            trace.addRun(stats, dir + " data set " + std::to_string(k) + " threads " +
                                    std::to_string(threads) + " run " + std::to_string(times.size()));
          times.push_back(stats.seconds);
        }
        if (!st.isOk()) { status = fail(st.message()); continue; }
        double maxErr = 0;
        for (size_t i = 0; i < outputs.size() && i < expected.size(); ++i)
          maxErr = std::max(maxErr, compareTensors(outputs[i], expected[i], 0, 0).maxAbsError);
        nlohmann::json j = {{"runtime", "tandem"},
                            {"model", dir},
                            {"data_set", k},
                            {"batch", given[0].rank() ? given[0].dim(0) : 1},
                            {"threads", threads},
                            {"tuning", tuningModeName(m.exe->tuningMode())},
                            {"median_ms", median(times) * 1e3},
                            {"min_ms", *std::min_element(times.begin(), times.end()) * 1e3},
                            {"runs", times.size()},
                            {"max_abs_err", maxErr}};
        if (tracing) j["trace"] = o.trace;
        std::cout << j.dump() << std::endl;
      }
    }
  }
  if (tracing) {
    std::string text = trace.json();
    Status st = traceFile.write(text.data(), text.size());
    if (st.isOk()) st = traceFile.commit();
    if (!st.isOk()) status = fail(st.message());
  }
  return status;
}

namespace {

// "N=1,32" -> {"N=1", "N=32"}; "" on a malformed spec (usage error).
std::vector<std::string> expandDim(const std::string& spec) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) return {};
  std::vector<std::string> out;
  std::stringstream vals(spec.substr(eq + 1));
  std::string v;
  while (std::getline(vals, v, ',')) out.push_back(spec.substr(0, eq + 1) + v);
  return out;
}

std::string msText(double s) {
  char buf[32];
  if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  return buf;
}

}  // namespace

int runTune(const TuneOptions& o) {
  // 1. Every combination of the --dim values (N=1,32 x S=64,128 ...).
  std::vector<std::vector<std::string>> combos = {{}};
  for (const std::string& d : o.dims) {
    std::vector<std::string> vals = expandDim(d);
    if (vals.empty()) return usage("--dim expects NAME=V1,V2,..., got '" + d + "'");
    std::vector<std::vector<std::string>> next;
    for (auto& c : combos)
      for (auto& v : vals) {
        next.push_back(c);
        next.back().push_back(v);
      }
    combos = std::move(next);
  }
  std::string cache = defaultTimingCachePath();
  std::printf("kernel timing cache: %s\n", cache.empty() ? "(none: no HOME)" : cache.c_str());
  int status = kExitOk;
  // 2. Per model, binding and thread count: compile, load measuring, print each step's choice.
  for (const std::string& model : o.models) {
    std::string path = endsWith(model, ".onnx") ? model : model + "/model.onnx";
    for (const auto& combo : combos) {
      CommonCompileFlags flags;
      flags.dims = combo;
      CompileOptions co;
      std::string err = toCompileOptions(flags, &co);
      if (!err.empty()) return usage(err);
      for (int threads : o.threads) {
        Loaded m;
        std::vector<Tensor> inputs;
        LoadOptions lo = loadOptionsFor(threads, 0, o.winograd, "measure");
        Status st = loadOnnx(path, {}, flags, co, lo, &m, &inputs);
        if (!st.isOk()) {
          status = fail(st.message());
          continue;
        }
        std::string bind;
        for (const std::string& b : combo) bind += " " + b;
        int measured = 0;
        for (const StepTuning& t : m.exe->tuning()) measured += t.source == StepTuning::Source::Measured;
        std::printf("%s%s threads %d (isa %s): %zu steps with kernel variants, %d measured now\n",
                    path.c_str(), bind.c_str(), m.exe->threads(), cpuEffectiveIsa().c_str(),
                    m.exe->tuning().size(), measured);
        for (const std::string& n : m.exe->notes()) std::fprintf(stderr, "tandem: note: %s\n", n.c_str());
        for (const StepTuning& t : m.exe->tuning()) {
          std::string line;
          for (const std::string& c : t.candidates) {
            auto s = t.timings.seconds.find(c);
            line += "  " + c + " " + (s != t.timings.seconds.end() ? msText(s->second) : "n/a");
          }
          const char* src = t.source == StepTuning::Source::Measured ? "measured"
                            : t.source == StepTuning::Source::Cache  ? "cached"
                                                                     : "heuristic";
          std::printf("  %-40s%s  -> %s (%s%s) %s\n", t.step.c_str(), line.c_str(),
                      t.choice.empty() ? "heuristic" : t.choice.c_str(), src,
                      t.weightsCold ? ", weights cold" : "", t.impl.c_str());
        }
        // 3. Every CPU step's time in the plan as it runs (caches warm from the step before, the
        //    chosen variants), for the placer: most steps have no variants to measure above.
        //    One warm-up run, then the median of >= 5 profiled runs, more while under 1 s.
        std::vector<std::vector<double>> perStep;
        std::vector<Tensor> outputs;
        if (inputs.empty()) {
          std::mt19937 rng(7);
          for (const TensorType& t : m.exe->inputTypes()) inputs.push_back(randomTensor(t, rng));
        }
        st = m.exe->run(inputs, &outputs);
        auto start = std::chrono::steady_clock::now();
        for (int r = 0; st.isOk() && (r < 5 || (r < 25 && std::chrono::duration<double>(
                                                              std::chrono::steady_clock::now() - start)
                                                                  .count() < 1.0));
             ++r) {
          RunStats stats;
          st = m.exe->run(inputs, &outputs, &stats, /*profile=*/true);
          if (perStep.empty()) perStep.resize(stats.steps.size());
          for (size_t i = 0; st.isOk() && i < stats.steps.size() && i < perStep.size(); ++i)
            perStep[i].push_back(stats.steps[i].seconds);
        }
        std::vector<double> medians;
        for (std::vector<double>& v : perStep) {
          std::sort(v.begin(), v.end());
          medians.push_back(v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2]
                                                         : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
        }
        int recorded = 0;
        if (st.isOk()) st = m.exe->recordStepTimes(medians, &recorded);
        if (!st.isOk()) {
          status = fail(path + bind + ": timing the plan's steps: " + st.message());
          continue;
        }
        std::printf("  step times of the plan (median of %zu profiled runs): %d op keys recorded "
                    "for the placer\n",
                    perStep.empty() ? (size_t)0 : perStep[0].size(), recorded);
      }
    }
  }
  return status;
}

}  // namespace tandem::cli
