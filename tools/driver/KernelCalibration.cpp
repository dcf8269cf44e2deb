// Kernel timing helpers and the GPU calibration, shared by `tandem calibrate` and
// `tandem-run calibrate` (runtime only: no MLIR, no compiler).
#include "tools/driver/KernelCalibration.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>

#include "compiler/ShapeInference.h"
#include "runtime/Backend.h"
#include "tools/driver/RunReport.h"  // median

namespace tandem::calib {

using nlohmann::json;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const std::vector<ConvLayer>& convLayers() {
  static const std::vector<ConvLayer> layers = {
      {"mnist 1->8 5x5 28x28", {1, 1, 28, 28}, {8, 1, 5, 5}, 1, 2},
      {"mnist 8->16 5x5 14x14", {1, 8, 14, 14}, {16, 8, 5, 5}, 1, 2},
      {"64->64 3x3 14x14", {1, 64, 14, 14}, {64, 64, 3, 3}, 1, 1},
      {"128->128 3x3 14x14", {1, 128, 14, 14}, {128, 128, 3, 3}, 1, 1},
      {"resnet 64->64 3x3 56x56", {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1},
      {"resnet 512->512 3x3 7x7 batch 4", {4, 512, 7, 7}, {512, 512, 3, 3}, 1, 1},
      {"resnet 64->64 3x3 56x56 batch 8", {8, 64, 56, 56}, {64, 64, 3, 3}, 1, 1},
  };
  return layers;
}

AttrMap convAttrs(const ConvLayer& c) {
  AttrMap a;
  int64_t k = c.w[2];
  a.set("kernel_shape", Attr::ofInts({k, k}));
  a.set("strides", Attr::ofInts({c.stride, c.stride}));
  a.set("pads", Attr::ofInts({c.pad, c.pad, c.pad, c.pad}));
  return a;
}

double convFlops(const ConvLayer& c, const Shape& y) {
  double outElems = (double)numElements(y);
  return 2.0 * outElems * c.w[1] * c.w[2] * c.w[3] + outElems;
}

namespace {

// Deterministic values in [-1, 1): timing must not depend on denormals or NaNs.
void fill(Tensor* t, uint32_t seed) {
  float* p = t->data<float>();
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t->numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = (float)((s >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
  }
}

}  // namespace

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

double netSeconds(double measured, double dispatch) {
  return std::max(measured - dispatch, 0.5 * measured);
}

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
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

void printRow(const std::string& what, const std::string& value, const std::string& detail) {
  std::printf("  %-36s %s   (%s)\n", what.c_str(), value.c_str(), detail.c_str());
}

namespace {

// One op on the GPU: the kernel and device buffers of its operands and result, given back when
// the bench ends (the GEMM and elementwise sweeps would otherwise hold ~1 GB to the end).
struct GpuBench {
  AttrMap attrs;
  std::vector<Tensor> hostInputs;
  std::vector<Tensor> inputs, outputs;  // device views
  std::unique_ptr<Kernel> kernel;
  DeviceBackend* gpu = nullptr;
  ~GpuBench() {
    if (!gpu) return;
    kernel.reset();
    for (auto* list : {&inputs, &outputs})
      for (Tensor& t : *list) gpu->deallocate(t.raw());
  }
};

Status makeGpuBench(DeviceBackend& gpu, const std::string& opType, const std::vector<Operand>& operands,
                    AttrMap attrs, GpuBench* b) {
  b->attrs = std::move(attrs);
  b->gpu = &gpu;
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

}  // namespace

Status calibrateGpu(double seconds, json* devices, json* links, std::string* unavailable) {
  unavailable->clear();
  std::unique_ptr<DeviceBackend> gpu;
  Status avail = createCudaBackend(0, BackendOptions{}, &gpu);
  if (!avail) {
    *unavailable = avail.message();
    return Status::ok();
  }
  const std::vector<ConvLayer>& convs = convLayers();
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
    printRow("cuda:0 launch overhead", v, "Relu on 1 element, back to back");
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
    printRow("cuda:0 gemm " + std::to_string(s) + "^3", fmtRate(rate, "FLOP/s"), fmtMs(t));
  }
  dev["conv"] = json::array();
  for (const ConvLayer& c : convs) {
    AttrMap a = convAttrs(c);
    GpuBench b;
    double t = 0;
    Status st = makeGpuBench(*gpu, "Conv", {Operand{c.x}, Operand{c.w, true}, Operand{Shape{c.w[0]}, true}}, a, &b);
    if (st) st = timeGpuBench(*gpu, b, nextDeadline(), 20, &t);
    if (!st) return st.withContext(std::string("cuda:0 conv ") + c.name);
    double flops = convFlops(c, b.outputs[0].shape());
    double rate = flops / netSeconds(t, launch);
    dev["conv"].push_back({{"flops", flops}, {"flops_per_s", rate}, {"layer", c.name}});
    printRow(std::string("cuda:0 conv ") + c.name, fmtRate(rate, "FLOP/s"), fmtMs(t));
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
    printRow("cuda:0 add " + fmtBytes(moved), fmtRate(rate, "B/s"), fmtMs(t));
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
    printRow(std::string(h2d ? "H2D" : "D2H") + " 64 MB pinned / pageable",
             fmtRate(bytes / tPinned, "B/s") + " / " + fmtRate(bytes / tPageable, "B/s"), "latency " + fmtMs(tSmall));
  }
  gpu->deallocate(dbuf);
  gpu->deallocateHost(pinned);
  (*devices)["cuda:0"] = dev;
  return Status::ok();
}

}  // namespace tandem::calib
