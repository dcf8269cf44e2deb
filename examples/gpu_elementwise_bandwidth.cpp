// A chain of elementwise ops on cuda:0 vs the device's copy bandwidth: y = Sigmoid(Relu(x * a + b))
// over 64 Mi floats (256 MiB), compiled with --placement gpu through the normal pipeline, so the
// number of kernels printed is whatever the compiler emits (one per op until a fuse pass fuses on
// CUDA). Effective bandwidth = (bytes of x + bytes of y) / time of the chain; a fused chain can at
// best match cudaMemcpy device-to-device, measured here in the same process (read + write bytes
// / time, cudaEvents). Chain time, two ways: per chain from a run with 1 + reps chains minus a run
// with 1 (input upload and output download cancel), and the profiled sum of the chain's kernel
// steps (each step followed by a device synchronisation). Without a GPU it prints why, exits 0.
// Usage: gpu_elementwise_bandwidth [reps] [elements]   (defaults 10 and 67108864)
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "GpuBench.h"

using namespace tandem;

namespace {

// Seconds per cudaMemcpy of `bytes` device to device (median of 10 after a warm-up), or -1.
double memcpySeconds(size_t bytes) {
  void *a = nullptr, *b = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  std::vector<double> t;
  cudaError_t e = cudaMalloc(&a, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
  if (e == cudaSuccess) e = cudaMemset(a, 0, bytes);
  if (e == cudaSuccess) e = cudaEventCreate(&e0);
  if (e == cudaSuccess) e = cudaEventCreate(&e1);
  if (e == cudaSuccess) e = cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  for (int i = 0; i < 10 && e == cudaSuccess; ++i) {
    float ms = 0;
    e = cudaEventRecord(e0);
    if (e == cudaSuccess) e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    if (e == cudaSuccess) e = cudaEventRecord(e1);
    if (e == cudaSuccess) e = cudaEventSynchronize(e1);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms * 1e-3);
  }
  if (e != cudaSuccess) std::fprintf(stderr, "gpu_elementwise_bandwidth: cudaMemcpy D2D: %s\n", cudaGetErrorString(e));
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  if (e != cudaSuccess) return -1;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string buildChain(int64_t elements, int count, std::unique_ptr<Executable>* exe, int* kernels) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {elements});
  Value a = g.scalar(0.5f), b = g.scalar(0.25f);
  Value y = x;
  for (int i = 0; i < count; ++i) y = g.sigmoid(g.relu(g.add(g.mul(y, a), b)));
  g.output(y, "y");
  return gpubench::compileOnGpu(g, exe, kernels);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  int64_t elements = argc > 2 ? std::atoll(argv[2]) : (int64_t)1 << 26;
  std::unique_ptr<DeviceBackend> probe;
  Status gpu = createCudaBackend(0, BackendOptions{}, &probe);
  probe.reset();
  if (!gpu.isOk()) {
    std::printf("gpu_elementwise_bandwidth: skipped: no CUDA device (%s)\n", gpu.message().c_str());
    return 0;
  }
  double bytes = 2.0 * elements * sizeof(float);  // x read once, y written once
  double copy = memcpySeconds((size_t)elements * sizeof(float));
  if (copy < 0) return 1;
  std::unique_ptr<Executable> one, many;
  int k1 = 0, k2 = 0;
  std::string err = buildChain(elements, 1, &one, &k1);
  if (err.empty()) err = buildChain(elements, 1 + reps, &many, &k2);
  Tensor x = Tensor::alloc(DType::F32, {elements});
  for (int64_t i = 0; i < elements; ++i) x.data<float>()[i] = (float)(i % 1001) / 500.f - 1.f;
  double t1 = 0, t2 = 0, prof = 0;
  if (err.empty()) err = gpubench::medianRunSeconds(*one, {x}, 2, 9, &t1);
  if (err.empty()) err = gpubench::medianRunSeconds(*many, {x}, 2, 9, &t2);
  if (err.empty()) err = gpubench::medianProfiledGpuSeconds(*one, {x}, 5, &prof);
  if (!err.empty()) {
    std::fprintf(stderr, "gpu_elementwise_bandwidth: %s\n", err.c_str());
    return 1;
  }
  double chain = (t2 - t1) / reps;
  std::printf("y = Sigmoid(Relu(x * 0.5 + 0.25)), %lld floats (%.0f MiB in + %.0f MiB out) on cuda:0\n",
              (long long)elements, bytes / 2 / (1 << 20), bytes / 2 / (1 << 20));
  std::printf("  kernels per chain:            %d (%s)\n", k1,
              k1 == 1 ? "fused" : "not fused: each op reads and writes the whole tensor");
  std::printf("  cudaMemcpy D2D:               %9.3f ms  %8.1f GB/s (read + write)\n", copy * 1e3,
              bytes / copy * 1e-9);
  std::printf("  chain, back to back:          %9.3f ms  %8.1f GB/s effective  (%.2f of copy bandwidth)\n",
              chain * 1e3, bytes / chain * 1e-9, copy / chain);
  std::printf("  chain, profiled steps (sync): %9.3f ms  %8.1f GB/s effective  (%.2f of copy bandwidth)\n",
              prof * 1e3, bytes / prof * 1e-9, copy / prof);
  std::printf("  whole run with upload + download of x and y: %.3f ms\n", t1 * 1e3);
  return 0;
}
