// The logging-efficiency exercise: 1000 steps of h = tanh(h @ W) on the GPU, with the squared
// norm of h taken every step, either fetched to the CPU every step (a CPU step consumes each
// norm: the host waits for the GPU 1000 times) or fetched once at the end (the GPU runs ahead).
// Prints both times and the ratio. Without a GPU it says why, checks that both plans load and
// run on the CPU fallback (10 steps, n = 64), and exits 0.
// Usage: gpu_fetch_every_step [steps] [n]   (defaults 1000 and 256)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "runtime/Backend.h"
#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"

using namespace tandem;

namespace {

struct Builder {
  plan::Plan p;
  int value(const std::string& name, std::vector<int64_t> dims, const std::string& dev, int64_t off,
            plan::Value::Kind kind = plan::Value::INTERMEDIATE) {
    plan::Value* v = p.add_values();
    v->set_id(p.values_size() - 1);
    v->set_name(name);
    v->set_dtype((int)DType::F32);
    for (int64_t d : dims) v->add_dims(d);
    v->set_device(dev);
    v->set_kind(kind);
    v->set_arena_offset(off);
    v->set_bytes(numElements(dims) * 4);
    return v->id();
  }
  void step(const std::string& op, const std::string& dev, std::vector<int> in, int out) {
    plan::Step* s = p.add_steps();
    s->set_op_type(op);
    s->set_device(dev);
    for (int i : in) s->add_inputs(i);
    s->add_outputs(out);
  }
};

// everyStep: each norm is copied to the CPU and added to a running sum there.
plan::Plan chain(int steps, int64_t n, bool everyStep) {
  Builder b;
  b.p.set_version(kPlanVersion);
  const std::string g = "cuda:0";
  int64_t mat = n * n * 4, slot = (mat + 255) / 256 * 256;
  int x = b.value("x", {n, n}, "cpu", 0, plan::Value::INPUT);
  int w = b.value("w", {n, n}, "", 0, plan::Value::CONSTANT);
  plan::TensorData* c = b.p.mutable_values(w)->mutable_constant();
  c->set_dtype((int)DType::F32);
  c->add_dims(n);
  c->add_dims(n);
  std::string raw(mat, '\0');
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.f, 1.f / std::sqrt((float)n));
  for (int64_t i = 0; i < n * n; ++i) reinterpret_cast<float*>(&raw[0])[i] = d(rng);
  c->set_raw(raw);
  // GPU arena: h slots A/B, product, square, norm. CPU arena: x, norm copies, running sums.
  int h = b.value("h0", {n, n}, g, 0);
  b.step("Copy", g, {x}, h);
  int sum = -1;
  for (int i = 1; i <= steps; ++i) {
    int64_t hs = (i % 2) ? slot : 0;
    int prod = b.value("p" + std::to_string(i), {n, n}, g, 2 * slot);
    b.step("MatMul", g, {h, w}, prod);
    int hn = b.value("h" + std::to_string(i), {n, n}, g, hs);
    b.step("Tanh", g, {prod}, hn);
    h = hn;
    if (!everyStep && i != steps) continue;
    int sq = b.value("sq" + std::to_string(i), {n, n}, g, 3 * slot);
    b.step("Mul", g, {h, h}, sq);
    int nrm = b.value("norm" + std::to_string(i), {1}, g, 4 * slot);
    b.step("ReduceSum", g, {sq}, nrm);
    // The first norm starts the running sum, so it gets a slot the later copies do not reuse.
    int host = b.value("norm_cpu" + std::to_string(i), {1}, "cpu", sum < 0 ? slot + 768 : slot);
    b.step("Copy", "cpu", {nrm}, host);
    if (sum < 0) {
      sum = host;
      continue;
    }
    int next = b.value("sum" + std::to_string(i), {1}, "cpu", slot + 256 * (1 + i % 2));
    b.step("Add", "cpu", {sum, host}, next);
    sum = next;
  }
  b.p.add_inputs(x);
  b.p.add_outputs(sum);
  for (auto [dev, bytes] : {std::pair<std::string, int64_t>{"cpu", slot + 1024}, {g, 4 * slot + 256}}) {
    plan::Arena* a = b.p.add_arenas();
    a->set_device(dev);
    a->set_bytes(bytes);
  }
  return b.p;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 1000;
  int64_t n = argc > 2 ? std::atoll(argv[2]) : 256;
  std::unique_ptr<DeviceBackend> probe;
  Status gpu = createCudaBackend(0, BackendOptions{}, &probe);
  probe.reset();
  if (!gpu.isOk()) {
    std::printf("no CUDA device (%s): nothing to measure; checking the plans on the CPU fallback\n",
                gpu.message().c_str());
    steps = std::min(steps, 10);
    n = std::min<int64_t>(n, 64);
  }
  Tensor x = Tensor::alloc(DType::F32, {n, n});
  for (int64_t i = 0; i < n * n; ++i) x.data<float>()[i] = (float)((i * 37) % 17) / 17.f - 0.5f;
  double t[2];
  float last[2];
  for (int every : {1, 0}) {
    std::unique_ptr<Executable> exe;
    LoadOptions lo;
    lo.deviceFallback = !gpu.isOk();
    Status st = Executable::load(chain(steps, n, every), lo, &exe);
    if (!st.isOk()) {
      std::fprintf(stderr, "gpu_fetch_every_step: %s\n", st.message().c_str());
      return 1;
    }
    std::vector<Tensor> out;
    exe->run({x}, &out);  // warm-up
    std::vector<double> runs;
    for (int r = 0; r < 5; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      st = exe->run({x}, &out);
      if (!st.isOk()) {
        std::fprintf(stderr, "gpu_fetch_every_step: %s\n", st.message().c_str());
        return 1;
      }
      runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(runs.begin(), runs.end());
    t[every] = runs[runs.size() / 2];
    last[every] = out[0].data<float>()[0];
  }
  std::printf("%d steps of tanh(h @ W), n = %lld, on %s\n", steps, (long long)n,
              gpu.isOk() ? "cuda:0" : "the CPU (fallback)");
  std::printf("  norm fetched every step: %9.3f ms (sum of norms %.6g)\n", t[1] * 1e3, last[1]);
  std::printf("  norm fetched once:       %9.3f ms (last norm %.6g)\n", t[0] * 1e3, last[0]);
  std::printf("  every step / once:       %9.2fx\n", t[1] / t[0]);
  return 0;
}
