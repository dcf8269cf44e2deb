// `tandem calibrate`: times Tandem's CPU kernels across sizes and writes the profile JSON that
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
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/ShapeInference.h"
#include "runtime/Backend.h"
#include "runtime/Device.h"
#include "runtime/Kernel.h"
#include "tools/tandem/Commands.h"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One op instance ready to run: the kernel, its operands and its result.
struct Bench {
  AttrMap attrs;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::unique_ptr<Kernel> kernel;
};

struct Operand {
  Shape shape;
  bool constant = false;  // weights: the kernel prepacks them once, as at plan load
};

// Deterministic values in [-1, 1): timing must not depend on denormals or NaNs.
void fill(Tensor* t, uint32_t seed) {
  float* p = t->data<float>();
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t->numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = (float)((s >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
  }
}

// The host side of a bench: deterministic host inputs for `operands`, and a kernel context
// with their types, the inferred result types and the constant inputs marked (`attrs` must
// outlive `ctx`).
Status benchContext(const std::string& opType, const std::vector<Operand>& operands,
                    const AttrMap* attrs, int threads, std::vector<Tensor>* hostInputs,
                    KernelContext* ctx) {
  std::vector<OperandInfo> infos;
  for (size_t i = 0; i < operands.size(); ++i) {
    hostInputs->push_back(Tensor::alloc(DType::F32, operands[i].shape));
    fill(&hostInputs->back(), (uint32_t)i + 1);
    OperandInfo oi;
    oi.dtype = DType::F32;
    oi.dims = operands[i].shape;
    infos.push_back(oi);
  }
  std::vector<ResultInfo> results;
  std::string err = inferResultTypes(opType, infos, *attrs, 1, &results);
  if (!err.empty()) return Status::error(opType + ": " + err);
  ctx->opType = opType;
  ctx->nodeName = "calibrate." + opType;
  ctx->attrs = attrs;
  ctx->threads = threads;
  for (size_t i = 0; i < operands.size(); ++i) {
    ctx->inputTypes.push_back(TensorType{DType::F32, operands[i].shape});
    ctx->constInputs.push_back(operands[i].constant ? &(*hostInputs)[i] : nullptr);
  }
  for (const ResultInfo& r : results) ctx->outputTypes.push_back(TensorType{r.dtype, r.dims});
  return Status::ok();
}

Status makeBench(const std::string& opType, const std::vector<Operand>& operands, AttrMap attrs,
                 int threads, Bench* b) {
  b->attrs = std::move(attrs);
  KernelContext ctx;
  TANDEM_RETURN_IF_ERROR(benchContext(opType, operands, &b->attrs, threads, &b->inputs, &ctx));
  for (const TensorType& t : ctx.outputTypes) b->outputs.push_back(Tensor::alloc(t.dtype, t.shape));
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

// The compute part of a run: the measured time minus the dispatch overhead the cost model adds
// on its own. The floor keeps timing noise at the smallest sizes from making a rate unbounded.
double netSeconds(double measured, double dispatch) {
  return std::max(measured - dispatch, 0.1 * measured);
}

struct ConvLayer {
  const char* name;
  Shape x, w;
  int64_t stride, pad;
};

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Writes `text` to `path` through a temporary in the same directory and a rename, so a reader
// never sees a partial profile.
Status writeAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string((long)getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::error(path + ": cannot write: " + std::strerror(errno));
    out << text;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::error(path + ": cannot write: " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::error(path + ": cannot write: " + why);
  }
  return Status::ok();
}

std::string fmtRate(double v, const char* unit) {
  char buf[64];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%8.2f G%s", v / 1e9, unit);
  else std::snprintf(buf, sizeof buf, "%8.2f M%s", v / 1e6, unit);
  return buf;
}

std::string fmtBytes(double b) {
  char buf[32];
  if (b >= 1 << 20) std::snprintf(buf, sizeof buf, "%.0f MB", b / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.0f KB", b / 1024);
  return buf;
}

std::string fmtMs(double sec) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", sec * 1e3);
  return buf;
}

// One line of the table: what, the measured figure, the median time of one run.
void row(const std::string& what, const std::string& value, const std::string& detail) {
  std::printf("  %-36s %s   (%s)\n", what.c_str(), value.c_str(), detail.c_str());
}

int calibrate(const CalibrateOptions& o);

// ---- GPU (cuda:0), when one is live ---------------------------------------------------------

// One op on the GPU: the kernel and device buffers of its operands and result.
struct GpuBench {
  AttrMap attrs;
  std::vector<Tensor> hostInputs;
  std::vector<Tensor> inputs, outputs;  // device views
  std::unique_ptr<Kernel> kernel;
};

Status makeGpuBench(DeviceBackend& gpu, const std::string& opType, const std::vector<Operand>& operands,
                    AttrMap attrs, GpuBench* b) {
  b->attrs = std::move(attrs);
  KernelContext ctx;
  TANDEM_RETURN_IF_ERROR(benchContext(opType, operands, &b->attrs, 1, &b->hostInputs, &ctx));
  for (const Tensor& h : b->hostInputs) {
    void* p = nullptr;
    TANDEM_RETURN_IF_ERROR(gpu.allocate(h.bytes(), "calibration input", &p));
    TANDEM_RETURN_IF_ERROR(gpu.copyFromHost(p, h.raw(), h.bytes()));
    b->inputs.push_back(Tensor::view(DType::F32, h.shape(), p));
  }
  for (const TensorType& t : ctx.outputTypes) {
    void* p = nullptr;
    TANDEM_RETURN_IF_ERROR(gpu.allocate(numElements(t.shape) * dtypeSize(t.dtype), "calibration output", &p));
    b->outputs.push_back(Tensor::view(t.dtype, t.shape, p));
  }
  TANDEM_RETURN_IF_ERROR(gpu.createKernel(ctx, &b->kernel));
  TANDEM_RETURN_IF_ERROR(gpu.finishLoad({b->kernel.get()}));
  return gpu.synchronize();
}

// Median seconds per launch: batches of `perBatch` launches, each batch timed to completion.
Status timeGpuBench(DeviceBackend& gpu, GpuBench& b, Clock::time_point deadline, int perBatch, double* out) {
  std::vector<const Tensor*> ins;
  std::vector<Tensor*> outs;
  for (const Tensor& t : b.inputs) ins.push_back(&t);
  for (Tensor& t : b.outputs) outs.push_back(&t);
  TANDEM_RETURN_IF_ERROR(gpu.launch(*b.kernel, ins, outs));
  TANDEM_RETURN_IF_ERROR(gpu.synchronize());
  std::vector<double> times;
  while (times.size() < 3 || (times.size() < 1000 && Clock::now() < deadline)) {
    auto t0 = Clock::now();
    for (int i = 0; i < perBatch; ++i) TANDEM_RETURN_IF_ERROR(gpu.launch(*b.kernel, ins, outs));
    TANDEM_RETURN_IF_ERROR(gpu.synchronize());
    times.push_back(secondsSince(t0) / perBatch);
  }
  *out = median(times);
  return Status::ok();
}

// Measures cuda:0 like the CPU: launch overhead (back-to-back launches of a one-element Relu),
// GEMM, conv and elementwise throughput, and H2D/D2H bandwidth from pinned and pageable memory.
// Adds "cuda:0" to `devices` and the cpu <-> cuda:0 links; a GPU that is not there is a note.
Status calibrateGpu(double seconds, const std::vector<ConvLayer>& convs, json* devices, json* links) {
  std::unique_ptr<DeviceBackend> gpu;
  Status avail = createCudaBackend(0, BackendOptions{}, &gpu);
  if (!avail) {
    std::printf("cuda:0 not calibrated: %s\n", avail.message().c_str());
    return Status::ok();
  }
  const std::vector<int64_t> gemmSizes = {64, 256, 512, 1024, 2048, 4096};
  std::vector<double> ewBytes;
  for (double b = 4096; b <= 256.0 * 1024 * 1024; b *= 4) ewBytes.push_back(b);
  const size_t steps = 1 + gemmSizes.size() + convs.size() + ewBytes.size() + 2;
  const auto start = Clock::now();
  size_t step = 0;
  auto nextDeadline = [&] {
    ++step;
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds * step / steps));
  };
  std::printf("calibrating cuda:0, about %.0f s\n", seconds);
  json dev;
  dev["kind"] = "cuda";
  double launch = 0;
  {
    GpuBench b;
    Status st = makeGpuBench(*gpu, "Relu", {Operand{Shape{1}}}, {}, &b);
    if (st) st = timeGpuBench(*gpu, b, nextDeadline(), 1000, &launch);
    if (!st) return st.withContext("cuda:0 launch overhead");
    dev["dispatch_overhead_s"] = launch;
    char v[32];
    std::snprintf(v, sizeof v, "%8.2f us", launch * 1e6);
    row("cuda:0 launch overhead", v, "Relu on 1 element, back to back");
  }
  dev["gemm"] = json::array();
  for (int64_t s : gemmSizes) {
    GpuBench b;
    double t = 0;
    Status st = makeGpuBench(*gpu, "Gemm", {Operand{Shape{s, s}}, Operand{Shape{s, s}, true}}, {}, &b);
    if (st) st = timeGpuBench(*gpu, b, nextDeadline(), s <= 512 ? 100 : 10, &t);
    if (!st) return st.withContext("cuda:0 gemm " + std::to_string(s));
    double rate = 2.0 * s * s * s / netSeconds(t, launch);
    dev["gemm"].push_back({{"size", s}, {"flops_per_s", rate}});
    row("cuda:0 gemm " + std::to_string(s) + "^3", fmtRate(rate, "FLOP/s"), fmtMs(t));
  }
  dev["conv"] = json::array();
  for (const ConvLayer& c : convs) {
    AttrMap a;
    int64_t k = c.w[2];
    a.set("kernel_shape", Attr::ofInts({k, k}));
    a.set("strides", Attr::ofInts({c.stride, c.stride}));
    a.set("pads", Attr::ofInts({c.pad, c.pad, c.pad, c.pad}));
    GpuBench b;
    double t = 0;
    Status st = makeGpuBench(*gpu, "Conv", {Operand{c.x}, Operand{c.w, true}, Operand{Shape{c.w[0]}, true}}, a, &b);
    if (st) st = timeGpuBench(*gpu, b, nextDeadline(), 20, &t);
    if (!st) return st.withContext(std::string("cuda:0 conv ") + c.name);
    const Shape& y = b.outputs[0].shape();
    double outElems = (double)numElements(y);
    double flops = 2.0 * outElems * c.w[1] * c.w[2] * c.w[3] + outElems;
    double rate = flops / netSeconds(t, launch);
    dev["conv"].push_back({{"flops", flops}, {"flops_per_s", rate}, {"layer", c.name}});
    row(std::string("cuda:0 conv ") + c.name, fmtRate(rate, "FLOP/s"), fmtMs(t));
  }
  dev["elementwise"] = json::array();
  for (double bytes : ewBytes) {
    int64_t n = std::max<int64_t>(1, (int64_t)(bytes / 12));
    GpuBench b;
    double t = 0;
    Status st = makeGpuBench(*gpu, "Add", {Operand{Shape{n}}, Operand{Shape{n}}}, {}, &b);
    if (st) st = timeGpuBench(*gpu, b, nextDeadline(), 20, &t);
    if (!st) return st.withContext("cuda:0 elementwise " + fmtBytes(bytes));
    double moved = 12.0 * n;
    double rate = moved / netSeconds(t, launch);
    dev["elementwise"].push_back({{"bytes", moved}, {"bytes_per_s", rate}});
    row("cuda:0 add " + fmtBytes(moved), fmtRate(rate, "B/s"), fmtMs(t));
  }
  // Links: 64 MB copies from pinned and from pageable host memory, and a 4-byte copy for latency.
  const size_t bytes = 64u << 20;
  void *pinned = nullptr, *dbuf = nullptr;
  TANDEM_RETURN_IF_ERROR(gpu->allocateHost(bytes, &pinned));
  TANDEM_RETURN_IF_ERROR(gpu->allocate(bytes, "calibration copy buffer", &dbuf));
  std::vector<char> pageable(bytes, 1);
  auto timeCopy = [&](bool h2d, void* host, size_t n, Clock::time_point deadline, double* out) -> Status {
    std::vector<double> times;
    while (times.size() < 3 || (times.size() < 1000 && Clock::now() < deadline)) {
      auto t0 = Clock::now();
      TANDEM_RETURN_IF_ERROR(h2d ? gpu->copyFromHost(dbuf, host, n) : gpu->copyToHost(host, dbuf, n));
      TANDEM_RETURN_IF_ERROR(gpu->synchronize());
      times.push_back(secondsSince(t0));
    }
    *out = median(times);
    return Status::ok();
  };
  for (bool h2d : {true, false}) {
    auto deadline = nextDeadline();
    auto third = [&](int i) { return Clock::now() + (deadline - Clock::now()) * i / 3; };
    double tPinned = 0, tPageable = 0, tSmall = 0;
    TANDEM_RETURN_IF_ERROR(timeCopy(h2d, pinned, bytes, third(1), &tPinned));
    TANDEM_RETURN_IF_ERROR(timeCopy(h2d, pageable.data(), bytes, third(2), &tPageable));
    TANDEM_RETURN_IF_ERROR(timeCopy(h2d, pinned, 4, deadline, &tSmall));
    std::string from = h2d ? "cpu" : "cuda:0", to = h2d ? "cuda:0" : "cpu";
    links->push_back({{"from", from}, {"to", to}, {"latency_s", tSmall},
                      {"bytes_per_s", bytes / std::max(tPinned - tSmall, 1e-9)},
                      {"pageable_bytes_per_s", bytes / std::max(tPageable - tSmall, 1e-9)}});
    row(std::string(h2d ? "H2D" : "D2H") + " 64 MB pinned / pageable",
        fmtRate(bytes / tPinned, "B/s") + " / " + fmtRate(bytes / tPageable, "B/s"), "latency " + fmtMs(tSmall));
  }
  gpu->deallocate(dbuf);
  gpu->deallocateHost(pinned);
  (*devices)["cuda:0"] = dev;
  return Status::ok();
}

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

int calibrate(const CalibrateOptions& o) {
  if (o.output.empty()) {
    std::fprintf(stderr, "tandem calibrate: usage error: no output file (-o PROFILE.json)\n");
    return kExitUsage;
  }
  if (!(o.seconds > 0) || o.threads < 0) {
    std::fprintf(stderr, "tandem calibrate: usage error: --seconds must be > 0 and --threads "
                         ">= 0\n");
    return kExitUsage;
  }
  // Fail before measuring, not after ten seconds of it, when the profile cannot be written.
  {
    std::string probe = o.output + ".tmp." + std::to_string((long)getpid());
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    if (!out) {
      std::fprintf(stderr, "tandem calibrate: %s: cannot write: %s\n", o.output.c_str(),
                   std::strerror(errno));
      return kExitError;
    }
    out.close();
    std::remove(probe.c_str());
  }
  // The runtime's default (defaultThreads: the idle cores), so the tables describe the thread
  // count plans will run with; on a busy machine that avoids measuring OpenMP barriers waiting
  // for descheduled threads (milliseconds per "dispatch").
  std::string fewerThreads;
  const int threads = o.threads > 0 ? o.threads : defaultThreads(&fewerThreads);
  if (!fewerThreads.empty()) std::fprintf(stderr, "tandem calibrate: note: %s\n", fewerThreads.c_str());
  omp_set_num_threads(threads);

  std::string cpuModel = "unknown";
  for (const DeviceInfo& d : discoverDevices())
    if (d.name == "cpu")
      for (const auto& [k, v] : d.properties)
        if (k == "model") cpuModel = v;

  // The measurements, in order; each gets an equal share of the budget, measured against one
  // wall clock so that kernel creation and allocation come out of the same budget.
  const std::vector<int64_t> gemmSizes = {64, 128, 256, 512, 768, 1024};
  const std::vector<ConvLayer> convs = {
      {"mnist 1->8 5x5 28x28", {1, 1, 28, 28}, {8, 1, 5, 5}, 1, 2},
      {"mnist 8->16 5x5 14x14", {1, 8, 14, 14}, {16, 8, 5, 5}, 1, 2},
      {"64->64 3x3 14x14", {1, 64, 14, 14}, {64, 64, 3, 3}, 1, 1},
      {"128->128 3x3 14x14", {1, 128, 14, 14}, {128, 128, 3, 3}, 1, 1},
      {"resnet 64->64 3x3 56x56", {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1},
      {"resnet 512->512 3x3 7x7 batch 4", {4, 512, 7, 7}, {512, 512, 3, 3}, 1, 1},
      {"resnet 64->64 3x3 56x56 batch 8", {8, 64, 56, 56}, {64, 64, 3, 3}, 1, 1},
  };
  std::vector<double> ewBytes;
  for (double b = 4096; b <= 64.0 * 1024 * 1024; b *= 4) ewBytes.push_back(b);
  const size_t steps = 1 + gemmSizes.size() + convs.size() + ewBytes.size() + 1;
  const auto start = Clock::now();
  size_t step = 0;
  auto nextDeadline = [&] {
    ++step;
    return start + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(o.seconds * step / steps));
  };
  auto failed = [](const std::string& what, const Status& st) {
    std::fprintf(stderr, "tandem calibrate: %s: %s\n", what.c_str(), st.message().c_str());
    return kExitError;
  };

  std::printf("calibrating cpu (%s) with %d thread%s, about %.0f s\n", cpuModel.c_str(), threads,
              threads == 1 ? "" : "s", o.seconds);
  // Other work on the cores skews every figure: an OpenMP region that needs a core another
  // process holds waits for a scheduler time slice (milliseconds), so say so up front.
  double load = -1;
  if (std::ifstream la("/proc/loadavg"); !(la >> load)) load = -1;
  if (load >= 0.5 && load + threads > availableCores() + 0.5)
    std::fprintf(stderr, "tandem calibrate: warning: the machine is busy (load average %.2f on %d "
                         "cores); with %d thread%s the figures will be pessimistic\n",
                 load, availableCores(), threads, threads == 1 ? "" : "s");
  json dev;
  dev["kind"] = "cpu";
  dev["threads"] = threads;

  // 1. Dispatch overhead: a kernel whose work is nothing.
  double dispatch = 0;
  {
    Bench b;
    Status st = makeBench("Relu", {Operand{Shape{1}}}, {}, threads, &b);
    if (st) st = timeBench(b, nextDeadline(), 50, 100000, &dispatch);
    if (!st) return failed("dispatch overhead (Relu)", st);
    dev["dispatch_overhead_s"] = dispatch;
    char v[32];
    std::snprintf(v, sizeof v, "%8.2f us", dispatch * 1e6);
    row("dispatch overhead", v, "Relu on 1 element");
  }

  // 2. GEMM throughput: Y[s,s] = A[s,s] * B[s,s], B constant.
  dev["gemm"] = json::array();
  for (int64_t s : gemmSizes) {
    Bench b;
    double t = 0;
    Status st =
        makeBench("Gemm", {Operand{Shape{s, s}}, Operand{Shape{s, s}, true}}, {}, threads, &b);
    if (st) st = timeBench(b, nextDeadline(), 3, 10000, &t);
    if (!st) return failed("gemm " + std::to_string(s), st);
    double flops = 2.0 * s * s * s;
    double rate = flops / netSeconds(t, dispatch);
    dev["gemm"].push_back({{"size", s}, {"flops_per_s", rate}});
    row("gemm " + std::to_string(s) + "^3", fmtRate(rate, "FLOP/s"), fmtMs(t));
  }

  // 3. Conv throughput: MNIST- and ResNet-like layers with bias, as after BatchNorm folding.
  dev["conv"] = json::array();
  for (const ConvLayer& c : convs) {
    AttrMap a;
    int64_t k = c.w[2];
    a.set("kernel_shape", Attr::ofInts({k, k}));
    a.set("strides", Attr::ofInts({c.stride, c.stride}));
    a.set("pads", Attr::ofInts({c.pad, c.pad, c.pad, c.pad}));
    Bench b;
    double t = 0;
    Status st = makeBench(
        "Conv", {Operand{c.x}, Operand{c.w, true}, Operand{Shape{c.w[0]}, true}}, a, threads, &b);
    if (st) st = timeBench(b, nextDeadline(), 3, 10000, &t);
    if (!st) return failed(std::string("conv ") + c.name, st);
    // The same count as OpWork: 2 FLOPs per MAC plus the bias add.
    const Shape& y = b.outputs[0].shape();
    double outElems = (double)numElements(y);
    double flops = 2.0 * outElems * c.w[1] * c.w[2] * c.w[3] + outElems;
    double rate = flops / netSeconds(t, dispatch);
    dev["conv"].push_back({{"flops", flops}, {"flops_per_s", rate}, {"layer", c.name}});
    row(std::string("conv ") + c.name, fmtRate(rate, "FLOP/s"), fmtMs(t));
  }

  // 4. Elementwise bandwidth: C = A + B over f32, 12 bytes moved per element.
  dev["elementwise"] = json::array();
  for (double bytes : ewBytes) {
    int64_t n = std::max<int64_t>(1, (int64_t)(bytes / 12));
    Bench b;
    double t = 0;
    Status st = makeBench("Add", {Operand{Shape{n}}, Operand{Shape{n}}}, {}, threads, &b);
    if (st) st = timeBench(b, nextDeadline(), 3, 100000, &t);
    if (!st) return failed("elementwise " + fmtBytes(bytes), st);
    double moved = 12.0 * n;
    double rate = moved / netSeconds(t, dispatch);
    dev["elementwise"].push_back({{"bytes", moved}, {"bytes_per_s", rate}});
    row("add " + fmtBytes(moved), fmtRate(rate, "B/s"), fmtMs(t));
  }

  // 5. Host memcpy, the copy between two CPU devices of one machine (cpu, cpu:1).
  json links = json::array();
  {
    const size_t bytes = 64u << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    auto deadline = nextDeadline();
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
    row("memcpy 64 MB (cpu <-> cpu:1)", fmtRate(rate, "B/s"), fmtMs(median(times)));
  }

  json profile;
  profile["schema"] = "tandem-calibration/1";
  profile["created"] = utcNow();
  profile["host"] = cpuModel;
  profile["tool"] = "tandem calibrate";
  profile["seconds"] = secondsSince(start);
  if (load >= 0) profile["load_average"] = load;  // at the start, for whoever reads the figures
  json devices = {{"cpu", dev}};
  {
    Status st = calibrateGpu(o.seconds, convs, &devices, &links);
    if (!st) return failed("calibrating cuda:0", st);
  }
  profile["devices"] = devices;
  profile["links"] = links;
  Status st = writeAtomically(o.output, profile.dump(2) + "\n");
  if (!st) {
    std::fprintf(stderr, "tandem calibrate: %s\n", st.message().c_str());
    return kExitError;
  }
  std::printf("wrote %s (%.1f s)\n", o.output.c_str(), secondsSince(start));
  return kExitOk;
}

}  // namespace

}  // namespace tandem::cli
