// One fused element-wise chain on cuda:0 vs the device's copy bandwidth: y = Sigmoid(Relu(x * a + b))
// over 64 Mi floats (256 MiB), compiled with --placement gpu through the normal pipeline. Fused,
// the chain is one kernel that reads x once and writes y once, so its bytes moved per second can
// at best match cudaMemcpy device-to-device (also read N + write N), measured in the same process.
// Both are timed the same way, host wall clock from the enqueue to the end of a synchronise (the
// executor's profiled step: launch + kernel + one round trip), so the ratio compares like with
// like; the copy's cudaEvent time is printed too, to show the round trip's share. Medians of
// `runs` after a warm-up. If the compiler does not fuse the chain, it says so: the number is then
// the sum of the chain's kernels, not one kernel's. Without a GPU it prints why and exits 0.
// Usage: gpu_elementwise_bandwidth [runs] [elements]   (defaults 20 and 67108864)
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "GpuBench.h"

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

std::string buildChain(int64_t elements, std::unique_ptr<Executable>* exe, int* kernels) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {elements});
  Value y = g.sigmoid(g.relu(g.add(g.mul(x, g.scalar(0.5f)), g.scalar(0.25f))));
  g.output(y, "y");
  return gpubench::compileOnGpu(g, exe, kernels);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  int64_t elements = argc > 2 ? std::atoll(argv[2]) : (int64_t)1 << 26;
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
  std::string err = buildChain(elements, &exe, &kernels);
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
  return 0;
}
