// One fused element-wise chain on cuda:0 vs the device's copy bandwidth: y = Sigmoid(Relu(x * a + b))
// over 64 Mi floats (256 MiB), compiled with --placement gpu through the normal pipeline. Fused,
// the chain is one kernel that reads x once and writes y once, so its bytes moved per second can
// at best match cudaMemcpy device-to-device (also read N + write N), measured in the same process.
// Both are timed the same way, host wall clock from the enqueue to the end of a synchronise (the
// executor's profiled step: launch + kernel + one round trip), so the ratio compares like with
// like; the copy's cudaEvent time is printed too, to show the round trip's share. Medians of
// `runs` after a warm-up. If the compiler does not fuse the chain, it says so: the number is then
// the sum of the chain's kernels, not one kernel's.
//
// Compile here, run there (a GPU machine without a compiler, scripts/gpu-kit.sh):
//   gpu_elementwise_bandwidth [runs] [elements]          compile in-process for the live GPU, run
//   gpu_elementwise_bandwidth --write-plans DIR [elements]  compile for cpu,cuda:0=h100 (no GPU
//                                                         needed): DIR/chain.tplan, manifest.txt
//   gpu_elementwise_bandwidth_run --plans DIR [runs] [--json F]   the same timing from that plan;
//                                                         this build links no MLIR
// --json F also writes the results as JSON (ratio = copy time / chain time, both enqueue + sync).
// Without a GPU the timing prints why and exits 0. Defaults: 20 runs, 67108864 elements.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "GpuBench.h"
#include "runtime/Backend.h"
#ifndef TANDEM_BENCH_RUNTIME_ONLY
#include "GpuBenchCompile.h"
#endif

using namespace tandem;

namespace {

struct CopyTimes {
  double hostSync = -1;  // enqueue to end of cudaStreamSynchronize, as a profiled step
  double events = -1;    // between two cudaEvents around the copy
};

// Medians over `runs` cudaMemcpyAsync of `bytes` device to device on a fresh stream, after one
// warm-up. Returns false (and prints why) on a CUDA error.
bool memcpyTimes(size_t bytes, int runs, CopyTimes* out) {
  void *a = nullptr, *b = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cudaStream_t s = nullptr;
  std::vector<double> host, ev;
  cudaError_t e = cudaMalloc(&a, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
  if (e == cudaSuccess) e = cudaMemset(a, 0, bytes);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreate(&e0);
  if (e == cudaSuccess) e = cudaEventCreate(&e1);
  if (e == cudaSuccess) e = cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  for (int i = 0; i < runs && e == cudaSuccess; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    host.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    float ms = 0;
    if (e == cudaSuccess) e = cudaEventRecord(e0, s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
    if (e == cudaSuccess) e = cudaEventRecord(e1, s);
    if (e == cudaSuccess) e = cudaEventSynchronize(e1);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, e0, e1);
    ev.push_back(ms * 1e-3);
  }
  if (e != cudaSuccess) std::fprintf(stderr, "gpu_elementwise_bandwidth: cudaMemcpy D2D: %s\n", cudaGetErrorString(e));
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (s) cudaStreamDestroy(s);
  cudaFree(a);
  cudaFree(b);
  if (e != cudaSuccess) return false;
  std::sort(host.begin(), host.end());
  std::sort(ev.begin(), ev.end());
  out->hostSync = host[host.size() / 2];
  out->events = ev[ev.size() / 2];
  return true;
}

#ifndef TANDEM_BENCH_RUNTIME_ONLY
void buildChain(GraphBuilder& g, int64_t elements) {
  Value x = g.input("x", DType::F32, {elements});
  Value y = g.sigmoid(g.relu(g.add(g.mul(x, g.scalar(0.5f)), g.scalar(0.25f))));
  g.output(y, "y");
}

// --write-plans: the chain for cpu,cuda:0=h100 (it has no constant worth a weights file; the
// scalars stay in the plan).
int writePlans(const std::string& dir, int64_t elements) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "gpu_elementwise_bandwidth: %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  GraphBuilder g;
  buildChain(g, elements);
  int kernels = 0;
  std::string err = gpubench::writeGraphPlan(g, dir, "chain.tplan", "chain.weights", &kernels);
  if (err.empty())
    err = gpubench::writeText(dir + "/manifest.txt",
                              "# gpu_elementwise_bandwidth --write-plans, target " + std::string(gpubench::kPlanTarget) +
                                  "\nchain elements=" + std::to_string(elements) + " plan=chain.tplan kernels=" +
                                  std::to_string(kernels) + "\n");
  if (!err.empty()) {
    std::fprintf(stderr, "gpu_elementwise_bandwidth: %s\n", err.c_str());
    return 1;
  }
  std::printf("gpu_elementwise_bandwidth: wrote %s (%lld elements, %d kernel%s on cuda:0; target %s)\n", dir.c_str(),
              (long long)elements, kernels, kernels == 1 ? "" : "s", gpubench::kPlanTarget);
  return 0;
}
#endif

int usage(const std::string& why) {
  std::fprintf(stderr, "gpu_elementwise_bandwidth: %s\nusage: gpu_elementwise_bandwidth [runs] [elements] | "
               "--write-plans DIR [elements] | --plans DIR [runs] [--json FILE]\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20;
  int64_t elements = (int64_t)1 << 26;
  std::string writeDir, plansDir, jsonPath;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--write-plans" || a == "--plans" || a == "--json") && i + 1 < argc)
      (a == "--write-plans" ? writeDir : a == "--plans" ? plansDir : jsonPath) = argv[++i];
    else if (!a.empty() && a[0] != '-')
      positional.push_back(a);
    else
      return usage("unknown or incomplete option " + a);
  }
  // --write-plans takes [elements]; the others [runs] [elements].
  if (!writeDir.empty() && !positional.empty()) elements = std::atoll(positional[0].c_str());
  if (writeDir.empty() && positional.size() > 0) runs = std::max(1, std::atoi(positional[0].c_str()));
  if (writeDir.empty() && positional.size() > 1) elements = std::atoll(positional[1].c_str());
  if (elements < 1) return usage("elements must be positive");
#ifdef TANDEM_BENCH_RUNTIME_ONLY
  if (!writeDir.empty()) return usage("this runtime-only build cannot compile: use gpu_elementwise_bandwidth --write-plans");
  if (plansDir.empty()) return usage("this runtime-only build needs --plans DIR");
#else
  if (!writeDir.empty()) return writePlans(writeDir, elements);
#endif
  // Read before the GPU probe, so a bad directory is reported on any machine.
  gpubench::ManifestEntry planned;
  if (!plansDir.empty()) {
    std::vector<gpubench::ManifestEntry> manifest;
    std::string err = gpubench::readManifest(plansDir, &manifest);
    if (err.empty() && manifest.empty()) err = plansDir + "/manifest.txt lists no plan";
    if (!err.empty()) {
      std::fprintf(stderr, "gpu_elementwise_bandwidth: %s\n", err.c_str());
      return 1;
    }
    planned = manifest[0];
    elements = planned.num("elements");
  }
  std::unique_ptr<DeviceBackend> probe;
  Status gpu = createCudaBackend(0, BackendOptions{}, &probe);
  probe.reset();
  if (!gpu.isOk()) {
    std::printf("gpu_elementwise_bandwidth: skipped: no CUDA device (%s)\n", gpu.message().c_str());
    return 0;
  }
  double bytes = 2.0 * elements * sizeof(float);  // x read once, y written once
  CopyTimes copy;
  if (!memcpyTimes((size_t)elements * sizeof(float), runs, &copy)) return 1;
  std::unique_ptr<Executable> exe;
  int kernels = 0;
  std::string err;
#ifndef TANDEM_BENCH_RUNTIME_ONLY
  if (plansDir.empty()) {
    GraphBuilder g;
    buildChain(g, elements);
    err = gpubench::compileOnGpu(g, &exe, &kernels);
  } else
#endif
  {
    kernels = (int)planned.num("kernels");
    err = gpubench::loadOnGpu(plansDir + "/" + planned.get("plan"), &exe);
  }
  Tensor x = Tensor::alloc(DType::F32, {elements});
  for (int64_t i = 0; i < elements; ++i) x.data<float>()[i] = (float)(i % 1001) / 500.f - 1.f;
  double chain = 0, whole = 0;
  if (err.empty()) err = gpubench::medianRunSeconds(*exe, {x}, 2, 5, &whole);  // warm-up as well
  if (err.empty()) err = gpubench::medianProfiledGpuSeconds(*exe, {x}, runs, &chain);
  if (!err.empty()) {
    std::fprintf(stderr, "gpu_elementwise_bandwidth: %s\n", err.c_str());
    return 1;
  }
  std::printf("y = Sigmoid(Relu(x * 0.5 + 0.25)), %lld floats (%.0f MiB read + %.0f MiB written) on cuda:0\n",
              (long long)elements, bytes / 2 / (1 << 20), bytes / 2 / (1 << 20));
  std::printf("  kernels for the chain:          %d (%s)\n", kernels,
              kernels == 1 ? "fused: one kernel, read N + write N"
                           : "NOT fused: the time below is the sum of these kernels, each reading and writing the tensor");
  std::printf("  cudaMemcpy D2D, cudaEvents:     %9.3f ms  %8.1f GB/s (read + write)\n", copy.events * 1e3,
              bytes / copy.events * 1e-9);
  std::printf("  cudaMemcpy D2D, enqueue + sync: %9.3f ms  %8.1f GB/s\n", copy.hostSync * 1e3,
              bytes / copy.hostSync * 1e-9);
  std::printf("  chain, enqueue + sync:          %9.3f ms  %8.1f GB/s  = %.2f of the copy's (same timing)\n",
              chain * 1e3, bytes / chain * 1e-9, copy.hostSync / chain);
  std::printf("  whole run with upload of x and download of y: %.3f ms\n", whole * 1e3);
  if (!jsonPath.empty()) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "{\"elements\": %lld, \"kernels\": %d, \"source\": \"%s\", \"copy_events_ms\": %.6f, "
                  "\"copy_sync_ms\": %.6f, \"chain_sync_ms\": %.6f, \"whole_run_ms\": %.6f, "
                  "\"copy_gbps\": %.2f, \"chain_gbps\": %.2f, \"vs_d2d\": %.4f}\n",
                  (long long)elements, kernels, plansDir.empty() ? "in-process" : "plans", copy.events * 1e3,
                  copy.hostSync * 1e3, chain * 1e3, whole * 1e3, bytes / copy.hostSync * 1e-9, bytes / chain * 1e-9,
                  copy.hostSync / chain);
    err = gpubench::writeText(jsonPath, buf);
    if (!err.empty()) {
      std::fprintf(stderr, "gpu_elementwise_bandwidth: %s\n", err.c_str());
      return 1;
    }
  }
  return 0;
}
