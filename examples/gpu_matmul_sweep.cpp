// CPU vs GPU matmul sweep (n = 64 .. 8192): measured time of an n x n x n MatMul on the CPU, on
// the GPU alone (kernel only) and on the GPU with the input copied in and the result copied out,
// each next to what the cost model predicts, to show where the GPU starts to pay. Without a GPU
// it prints why and the predictions for an H100.
// Usage: gpu_matmul_sweep [max_n] [max_cpu_n]   (defaults 8192 and 4096)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "compiler/placement/CostModel.h"
#include "compiler/placement/OpWork.h"
#include "runtime/Backend.h"
#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"

using namespace tandem;
using Clock = std::chrono::steady_clock;

namespace {

// y = x @ w on `dev`; x is a graph input on the CPU, w a constant (uploaded once at load).
// On a GPU the plan copies x in and y out, as insert-transfers would.
plan::Plan matmulPlan(int64_t n, const std::string& dev) {
  plan::Plan p;
  p.set_version(kPlanVersion);
  int64_t bytes = n * n * 4, slot = (bytes + 255) / 256 * 256;
  auto value = [&](const std::string& name, plan::Value::Kind kind, const std::string& d, int64_t off) {
    plan::Value* v = p.add_values();
    v->set_id(p.values_size() - 1);
    v->set_name(name);
    v->set_dtype((int)DType::F32);
    v->add_dims(n);
    v->add_dims(n);
    v->set_device(d);
    v->set_kind(kind);
    v->set_arena_offset(off);
    v->set_bytes(bytes);
    return v;
  };
  auto step = [&](const std::string& op, const std::string& d, std::vector<int> in, int out) {
    plan::Step* s = p.add_steps();
    s->set_op_type(op);
    s->set_device(d);
    for (int i : in) s->add_inputs(i);
    s->add_outputs(out);
  };
  value("x", plan::Value::INPUT, "cpu", 0);
  plan::Value* w = value("w", plan::Value::CONSTANT, "", 0);
  w->mutable_constant()->set_dtype((int)DType::F32);
  w->mutable_constant()->add_dims(n);
  w->mutable_constant()->add_dims(n);
  std::string raw(bytes, '\0');
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < n * n; ++i) reinterpret_cast<float*>(&raw[0])[i] = dist(rng);
  w->mutable_constant()->set_raw(raw);
  if (dev == "cpu") {
    value("y", plan::Value::INTERMEDIATE, "cpu", slot);
    step("MatMul", "cpu", {0, 1}, 2);
    p.add_outputs(2);
    p.add_arenas()->set_device("cpu"), p.mutable_arenas(0)->set_bytes(2 * slot);
  } else {
    value("x_dev", plan::Value::INTERMEDIATE, dev, 0);
    value("y_dev", plan::Value::INTERMEDIATE, dev, slot);
    value("y", plan::Value::INTERMEDIATE, "cpu", slot);
    step("Copy", dev, {0}, 2);
    step("MatMul", dev, {2, 1}, 3);
    step("Copy", "cpu", {3}, 4);
    p.add_outputs(4);
    p.add_arenas()->set_device("cpu"), p.mutable_arenas(0)->set_bytes(2 * slot);
    p.add_arenas()->set_device(dev), p.mutable_arenas(1)->set_bytes(2 * slot);
  }
  p.add_inputs(0);
  return p;
}

// Median seconds of runs of `f` (at least 3 and 0.5 s, at most 20 runs), after one warm-up.
template <typename F>
double medianSeconds(F&& f) {
  f();
  std::vector<double> t;
  auto start = Clock::now();
  while (t.size() < 3 || (t.size() < 20 && std::chrono::duration<double>(Clock::now() - start).count() < 0.5)) {
    auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t maxN = argc > 1 ? std::atoll(argv[1]) : 8192, maxCpuN = argc > 2 ? std::atoll(argv[2]) : 4096;
  std::unique_ptr<DeviceBackend> probe;
  Status gpuStatus = createCudaBackend(0, BackendOptions{}, &probe);
  probe.reset();
  std::unique_ptr<CostModel> cm;
  Status st = buildCostModel(gpuStatus.isOk() ? "" : "cpu,cuda:0=h100", "", CostOptions{}, &cm);
  if (!st.isOk()) {
    std::fprintf(stderr, "gpu_matmul_sweep: %s\n", st.message().c_str());
    return 1;
  }
  if (!gpuStatus.isOk())
    std::printf("no CUDA device (%s): measuring the CPU only; GPU predictions are for an H100\n",
                gpuStatus.message().c_str());
  int cpu = cm->devices().indexOf("cpu"), gpu = cm->devices().indexOf("cuda:0");
  if (gpu < 0) {
    std::printf("the cost model has no cuda:0 (DeviceSet::live() found no GPU spec); predictions for the CPU only\n");
  }
  std::printf("%6s | %12s %12s | %12s %12s | %12s %12s | %s\n", "n", "cpu ms", "cpu pred", "gpu ms",
              "gpu pred", "gpu+copy ms", "+copy pred", "faster");
  for (int64_t n = 64; n <= maxN; n *= 2) {
    TensorType t{DType::F32, {n, n}};
    OpWork w = estimateOpWork("MatMul", {t, t}, {t}, AttrMap{});
    double bytes = (double)n * n * 4;
    double predCpu = cm->opTime(w, cpu);
    double predGpu = gpu >= 0 ? cm->opTime(w, gpu) : NAN;
    double predCopy = gpu >= 0 ? predGpu + cm->transferTime(cpu, gpu, bytes) + cm->transferTime(gpu, cpu, bytes) : NAN;
    Tensor x = Tensor::alloc(DType::F32, {n, n});
    std::vector<Tensor> out;
    double cpuSec = NAN, gpuSec = NAN, gpuCopySec = NAN;
    if (n <= maxCpuN) {
      std::unique_ptr<Executable> exe;
      st = Executable::load(matmulPlan(n, "cpu"), LoadOptions{}, &exe);
      if (st.isOk()) cpuSec = medianSeconds([&] { exe->run({x}, &out); });
    }
    if (gpuStatus.isOk()) {
      std::unique_ptr<Executable> exe;
      st = Executable::load(matmulPlan(n, "cuda:0"), LoadOptions{}, &exe);
      if (!st.isOk()) {
        std::fprintf(stderr, "gpu_matmul_sweep: n=%lld: %s\n", (long long)n, st.message().c_str());
        return 1;
      }
      gpuCopySec = medianSeconds([&] { exe->run({x}, &out); });
      // Kernel only: the step time of a profiled run (the profile synchronises each step).
      std::vector<double> k;
      for (int i = 0; i < 7; ++i) {
        RunStats s;
        exe->run({x}, &out, &s, true);
        k.push_back(s.steps[1].seconds);
      }
      std::sort(k.begin(), k.end());
      gpuSec = k[k.size() / 2];
    }
    const char* faster = std::isnan(gpuCopySec) || std::isnan(cpuSec) ? "-" : gpuCopySec < cpuSec ? "gpu" : "cpu";
    std::printf("%6lld | %12.4f %12.4f | %12.4f %12.4f | %12.4f %12.4f | %s\n", (long long)n, cpuSec * 1e3,
                predCpu * 1e3, gpuSec * 1e3, predGpu * 1e3, gpuCopySec * 1e3, predCopy * 1e3, faster);
  }
  return 0;
}
