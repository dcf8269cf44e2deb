// `tandem calibrate`: times Tandem's CPU kernels across sizes (and cuda:0's, through
// tools/driver/KernelCalibration, when a GPU is live) and writes the profile JSON that
// CostModel::loadProfile reads (schema in compiler/placement/CostModel.h).
#include "tools/tandem/Calibrate.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/Backend.h"
#include "runtime/Device.h"
#include "runtime/Kernel.h"
#include "tools/driver/KernelCalibration.h"
#include "tools/driver/TensorFiles.h"
#include "tools/tandem/Commands.h"

namespace tandem::cli {
namespace {

using namespace tandem::calib;
using nlohmann::json;

// One op instance ready to run: the kernel, its operands and its result.
struct Bench {
  AttrMap attrs;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::unique_ptr<Kernel> kernel;
};

// `variant` "" is the built-in choice; *variants (optional) receives those the op offers.
Status makeBench(const std::string& opType, const std::vector<Operand>& operands, AttrMap attrs,
                 int threads, Bench* b, const std::string& variant = "",
                 std::vector<std::string>* variants = nullptr) {
  b->attrs = std::move(attrs);
  KernelContext ctx;
  TANDEM_RETURN_IF_ERROR(benchContext(opType, operands, &b->attrs, threads, &b->inputs, &ctx));
  for (const TensorType& t : ctx.outputTypes) b->outputs.push_back(Tensor::alloc(t.dtype, t.shape));
  if (variants) *variants = KernelRegistry::global().variants("cpu", ctx);
  ctx.variant = variant;
  return KernelRegistry::global().create("cpu", ctx, &b->kernel);
}

// Runs the bench once untimed, then at least `minRuns` timed runs and more until `deadline`
// (or `maxRuns`); returns the median seconds of one run.
Status timeBench(Bench& b, Clock::time_point deadline, int minRuns, int maxRuns, double* median_) {
  std::vector<const Tensor*> ins;
  std::vector<Tensor*> outs;
  for (const Tensor& t : b.inputs) ins.push_back(&t);
  for (Tensor& t : b.outputs) outs.push_back(&t);
  TANDEM_RETURN_IF_ERROR(b.kernel->run(ins, outs));  // warm-up: first-touch, caches, JIT
  std::vector<double> times;
  while ((int)times.size() < minRuns || ((int)times.size() < maxRuns && Clock::now() < deadline)) {
    auto t0 = Clock::now();
    TANDEM_RETURN_IF_ERROR(b.kernel->run(ins, outs));
    times.push_back(secondsSince(t0));
  }
  *median_ = median(times);
  return Status::ok();
}

// Times every kernel variant the op offers (a plan load measures them and keeps the fastest,
// runtime/Tuning.h), the deadline shared between them, and returns the fastest median; the
// built-in choice when the op has no variants. *impl gets the fastest kernel's implName().
Status timeFastest(const std::string& opType, const std::vector<Operand>& operands,
                   const AttrMap& attrs, int threads, Clock::time_point deadline, double* best,
                   std::string* impl) {
  std::vector<std::string> variants;
  {
    Bench probe;
    TANDEM_RETURN_IF_ERROR(makeBench(opType, operands, attrs, threads, &probe, "", &variants));
  }
  if (variants.empty()) variants.push_back("");
  *best = -1;
  for (size_t i = 0; i < variants.size(); ++i) {
    auto share = Clock::now() + (deadline - Clock::now()) / (int)(variants.size() - i);
    Bench b;
    double t = 0;
    Status st = makeBench(opType, operands, attrs, threads, &b, variants[i]);
    if (st) st = timeBench(b, share, 3, 10000, &t);
    if (!st) continue;  // a variant this shape refuses; the plan load would skip it too
    if (*best < 0 || t < *best) *best = t, *impl = b.kernel->implName();
  }
  if (*best < 0) return Status::error("no kernel variant of " + opType + " could run");
  return Status::ok();
}

int calibrate(const CalibrateOptions& o);

}  // namespace

int runCalibrate(const CalibrateOptions& o) {
  // oneDNN reports failures by exception (dnnl::error) and allocation can throw; neither may
  // escape a command.
  try {
    return calibrate(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem calibrate: %s\n", e.what());
    return kExitError;
  }
}

namespace {

// Usage errors, and an output that cannot be written: found before measuring, not after ten
// seconds of it. kExitOk when the options are good.
int checkOptions(const CalibrateOptions& o) {
  if (o.output.empty()) {
    std::fprintf(stderr, "tandem calibrate: usage error: no output file (-o PROFILE.json)\n");
    return kExitUsage;
  }
  if (!(o.seconds > 0) || o.threads < 0) {
    std::fprintf(stderr, "tandem calibrate: usage error: --seconds must be > 0 and --threads "
                         ">= 0\n");
    return kExitUsage;
  }
  std::string probe = o.output + ".tmp." + std::to_string((long)getpid());
  std::ofstream out(probe, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::fprintf(stderr, "tandem calibrate: %s: cannot write: %s\n", o.output.c_str(),
                 std::strerror(errno));
    return kExitError;
  }
  out.close();
  std::remove(probe.c_str());
  return kExitOk;
}

std::string cpuModelName() {
  std::string cpuModel = "unknown";
  for (const DeviceInfo& d : discoverDevices())
    if (d.name == "cpu")
      for (const auto& [k, v] : d.properties)
        if (k == "model") cpuModel = v;
  return cpuModel;
}

// The measurements, in order; each gets an equal share of the budget, measured against one
// wall clock so that kernel creation and allocation come out of the same budget.
struct Budget {
  Clock::time_point start;
  double seconds;
  size_t steps;
  size_t step = 0;
  Clock::time_point next() {
    ++step;
    return start + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(seconds * step / steps));
  }
};

// 1. Dispatch overhead: the median time of tiny instances of five kinds of kernel, run the way
//    a plan runs its steps: one after another, each once per round, with other work between
//    rounds (a 4 MB sweep that evicts the L1 and L2 caches, as a plan's larger steps do). A
//    bare Relu on one element timed in a tight loop (~0.1 us) misses what a step pays per call
//    in a plan: a oneDNN primitive's argument maps and stream, its code and state fetched
//    again (~0.5-1 us on a Zen 5 EPYC). Errors name the kernel.
Status measureDispatch(int threads, Clock::time_point deadline, double* dispatch) {
  AttrMap pool;
  pool.set("kernel_shape", Attr::ofInts({2, 2}));
  struct Tiny {
    const char* op;
    std::vector<Operand> operands;
    AttrMap attrs;
  };
  std::vector<Tiny> tiny = {{"Relu", {Operand{Shape{1}}}, {}},
                            {"Add", {Operand{Shape{1}}, Operand{Shape{1}}}, {}},
                            {"Softmax", {Operand{Shape{1, 10}}}, {}},
                            {"MaxPool", {Operand{Shape{1, 1, 2, 2}}}, pool},
                            {"Gemm", {Operand{Shape{1, 1}}, Operand{Shape{1, 1}, true}}, {}}};
  std::vector<Bench> benches(tiny.size());
  std::vector<std::vector<const Tensor*>> ins(tiny.size());
  std::vector<std::vector<Tensor*>> outs(tiny.size());
  auto what = [&](size_t i) { return std::string("dispatch overhead (") + tiny[i].op + ")"; };
  for (size_t i = 0; i < tiny.size(); ++i) {
    Status st = makeBench(tiny[i].op, tiny[i].operands, tiny[i].attrs, threads, &benches[i]);
    if (!st) return st.withContext(what(i));
    for (const Tensor& t : benches[i].inputs) ins[i].push_back(&t);
    for (Tensor& t : benches[i].outputs) outs[i].push_back(&t);
  }
  std::vector<float> sweep((4u << 20) / sizeof(float), 0.f);
  std::vector<double> each;
  for (int round = 0; round < 10000 && (round < 50 || Clock::now() < deadline); ++round) {
    for (size_t j = 0; j < sweep.size(); j += 16) sweep[j] += 1.f;
    for (size_t i = 0; i < tiny.size(); ++i) {
      auto t0 = Clock::now();
      Status st = benches[i].kernel->run(ins[i], outs[i]);
      if (!st) return st.withContext(what(i));
      if (round > 0) each.push_back(secondsSince(t0));  // round 0: first-touch
    }
  }
  volatile float sink = sweep[sweep.size() / 2];
  (void)sink;
  *dispatch = median(each);
  char v[32];
  std::snprintf(v, sizeof v, "%8.2f us", *dispatch * 1e6);
  printRow("dispatch overhead", v, "Relu, Add, Softmax, MaxPool, Gemm on 1-10 elements, in turn");
  return Status::ok();
}

// 2. GEMM throughput: Y[s,s] = A[s,s] * B[s,s], B constant; the fastest variant, as a tuned
//    plan runs it. Appends {size, flops_per_s} rows to `rows`.
Status measureGemm(const std::vector<int64_t>& sizes, int threads, double dispatch, Budget& budget,
                   json* rows) {
  for (int64_t s : sizes) {
    double t = 0;
    std::string impl;
    Status st = timeFastest("Gemm", {Operand{Shape{s, s}}, Operand{Shape{s, s}, true}}, {},
                            threads, budget.next(), &t, &impl);
    if (!st) return st.withContext("gemm " + std::to_string(s));
    double flops = 2.0 * s * s * s;
    double rate = flops / netSeconds(t, dispatch);
    rows->push_back({{"size", s}, {"flops_per_s", rate}});
    printRow("gemm " + std::to_string(s) + "^3", fmtRate(rate, "FLOP/s"), fmtMs(t) + ", " + impl);
  }
  return Status::ok();
}

// 3. Conv throughput: MNIST- and ResNet-like layers with bias, as after BatchNorm folding, the
//    way a plan runs a convolution between convolutions: activations in the host's blocked
//    layout (input_layouts / output_layouts "blocked", runtime/cpu/dnnl/DnnlCommon.h; nChw16c
//    on AVX-512), so no reorder of the source or result is timed, and the fastest variant.
//    Plain NCHW buffers would time two reorders per call as well.
Status measureConv(const std::vector<ConvLayer>& convs, int threads, double dispatch,
                   Budget& budget, json* rows) {
  for (const ConvLayer& c : convs) {
    AttrMap a = convAttrs(c);
    a.set("input_layouts", Attr::ofStrings({"blocked", "", ""}));
    a.set("output_layouts", Attr::ofStrings({"blocked"}));
    double t = 0;
    std::string impl;
    Status st = timeFastest("Conv", {Operand{c.x}, Operand{c.w, true}, Operand{Shape{c.w[0]}, true}},
                            a, threads, budget.next(), &t, &impl);
    if (!st) return st.withContext(std::string("conv ") + c.name);
    Shape y = {c.x[0], c.w[0], (c.x[2] + 2 * c.pad - c.w[2]) / c.stride + 1,
               (c.x[3] + 2 * c.pad - c.w[3]) / c.stride + 1};
    double flops = convFlops(c, y);
    double rate = flops / netSeconds(t, dispatch);
    rows->push_back({{"flops", flops}, {"flops_per_s", rate}, {"layer", c.name}});
    printRow(std::string("conv ") + c.name, fmtRate(rate, "FLOP/s"), fmtMs(t) + ", " + impl);
  }
  return Status::ok();
}

// 4. Elementwise bandwidth: C = A + B over f32, 12 bytes moved per element.
Status measureElementwise(const std::vector<double>& sizes, int threads, double dispatch,
                          Budget& budget, json* rows) {
  for (double bytes : sizes) {
    int64_t n = std::max<int64_t>(1, (int64_t)(bytes / 12));
    Bench b;
    double t = 0;
    Status st = makeBench("Add", {Operand{Shape{n}}, Operand{Shape{n}}}, {}, threads, &b);
    if (st) st = timeBench(b, budget.next(), 3, 100000, &t);
    if (!st) return st.withContext("elementwise " + fmtBytes(bytes));
    double moved = 12.0 * n;
    double rate = moved / netSeconds(t, dispatch);
    rows->push_back({{"bytes", moved}, {"bytes_per_s", rate}});
    printRow("add " + fmtBytes(moved), fmtRate(rate, "B/s"), fmtMs(t));
  }
  return Status::ok();
}

// 5. Host memcpy, the copy between two CPU devices of one machine (cpu, cpu:1): the two links.
json measureHostCopy(double dispatch, Clock::time_point deadline) {
  json links = json::array();
  const size_t bytes = 64u << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::memcpy(dst.data(), src.data(), bytes);  // warm-up: first touch of dst
  std::vector<double> times;
  volatile char sink = 0;  // reading dst keeps the copies from being optimised away
  while (times.size() < 3 || (times.size() < 1000 && Clock::now() < deadline)) {
    auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    times.push_back(secondsSince(t0));
    sink = sink + dst[(times.size() * 4099) % bytes];
  }
  double rate = bytes / median(times);
  for (const char* dir : {"cpu>cpu:1", "cpu:1>cpu"}) {
    std::string d = dir;
    links.push_back({{"from", d.substr(0, d.find('>'))},
                     {"to", d.substr(d.find('>') + 1)},
                     {"latency_s", dispatch},
                     {"bytes_per_s", rate},
                     {"pageable_bytes_per_s", rate}});
  }
  printRow("memcpy 64 MB (cpu <-> cpu:1)", fmtRate(rate, "B/s"), fmtMs(median(times)));
  return links;
}

// Other work on the cores skews every figure: an OpenMP region that needs a core another
// process holds waits for a scheduler time slice (milliseconds), so say so up front. Returns
// the load average, or -1 where it cannot be read.
double warnIfBusy(int threads) {
  double load = -1;
  if (std::ifstream la("/proc/loadavg"); !(la >> load)) load = -1;
  if (load >= 0.5 && load + threads > availableCores() + 0.5)
    std::fprintf(stderr, "tandem calibrate: warning: the machine is busy (load average %.2f on %d "
                         "cores); with %d thread%s the figures will be pessimistic\n",
                 load, availableCores(), threads, threads == 1 ? "" : "s");
  return load;
}

// Measures the CPU (steps 1-5), then the GPU where there is one, and writes the profile.
int calibrate(const CalibrateOptions& o) {
  if (int rc = checkOptions(o); rc != kExitOk) return rc;
  // The runtime's default (defaultThreads: the idle cores), so the tables describe the thread
  // count plans will run with; on a busy machine that avoids measuring OpenMP barriers waiting
  // for descheduled threads (milliseconds per "dispatch").
  std::string fewerThreads;
  const int threads = o.threads > 0 ? o.threads : defaultThreads(&fewerThreads);
  if (!fewerThreads.empty()) std::fprintf(stderr, "tandem calibrate: note: %s\n", fewerThreads.c_str());
  omp_set_num_threads(threads);
  const std::string cpuModel = cpuModelName();

  const std::vector<int64_t> gemmSizes = {64, 128, 256, 512, 768, 1024};
  const std::vector<ConvLayer>& convs = convLayers();
  std::vector<double> ewBytes;
  for (double b = 4096; b <= 64.0 * 1024 * 1024; b *= 4) ewBytes.push_back(b);
  Budget budget{Clock::now(), o.seconds, 1 + gemmSizes.size() + convs.size() + ewBytes.size() + 1};
  auto failed = [](const Status& st) {
    std::fprintf(stderr, "tandem calibrate: %s\n", st.message().c_str());
    return kExitError;
  };

  std::printf("calibrating cpu (%s) with %d thread%s, about %.0f s\n", cpuModel.c_str(), threads,
              threads == 1 ? "" : "s", o.seconds);
  const double load = warnIfBusy(threads);
  json dev;
  dev["kind"] = "cpu";
  dev["threads"] = threads;
  double dispatch = 0;
  if (Status st = measureDispatch(threads, budget.next(), &dispatch); !st) return failed(st);
  dev["dispatch_overhead_s"] = dispatch;
  dev["gemm"] = json::array();
  if (Status st = measureGemm(gemmSizes, threads, dispatch, budget, &dev["gemm"]); !st) return failed(st);
  dev["conv"] = json::array();
  if (Status st = measureConv(convs, threads, dispatch, budget, &dev["conv"]); !st) return failed(st);
  dev["elementwise"] = json::array();
  if (Status st = measureElementwise(ewBytes, threads, dispatch, budget, &dev["elementwise"]); !st)
    return failed(st);
  json links = measureHostCopy(dispatch, budget.next());

  json profile;
  profile["schema"] = "tandem-calibration/1";
  profile["created"] = utcNow();
  profile["host"] = cpuModel;
  profile["tool"] = "tandem calibrate";
  profile["seconds"] = secondsSince(budget.start);
  if (load >= 0) profile["load_average"] = load;  // at the start, for whoever reads the figures
  json devices = {{"cpu", dev}};
  {
    std::string unavailable;
    Status st = calibrateGpu(o.seconds, &devices, &links, &unavailable);
    if (!st) return failed(st.withContext("calibrating cuda:0"));
    if (!unavailable.empty()) std::printf("cuda:0 not calibrated: %s\n", unavailable.c_str());
  }
  profile["devices"] = devices;
  profile["links"] = links;
  Status st = writeFileAtomic(o.output, profile.dump(2) + "\n");
  if (!st) return failed(st);
  std::printf("wrote %s (%.1f s)\n", o.output.c_str(), secondsSince(budget.start));
  return kExitOk;
}

}  // namespace

}  // namespace tandem::cli
