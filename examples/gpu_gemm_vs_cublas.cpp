// Tandem's GEMM on cuda:0 vs bare cuBLAS, FP32 without TF32 on both sides (Tandem's cuBLASLt
// MatMul computes in CUBLAS_COMPUTE_32F; cublasSgemm runs with CUBLAS_DEFAULT_MATH), for n x n x n
// with n in {256, 1024, 4096}. Prints GFLOP/s (2 n^3 per product) and Tandem / cuBLAS.
//
// cuBLAS: `reps` cublasSgemm calls back to back on one stream, timed with cudaEvents.
// Tandem: a graph y = x @ W @ W ... (W a constant, uploaded once at load) compiled with
// --placement gpu; per product = (run time with 1 + reps MatMuls - run time with 1) / reps, so
// the input upload, output download and the run's one synchronisation cancel and the MatMuls run
// back to back on the compute stream as the cuBLAS loop does. Also shown: the profiled step time
// of one MatMul (a device synchronisation after the step: launch + kernel + round trip).
// Without a GPU it prints why and exits 0.
// Usage: gpu_gemm_vs_cublas [reps]   (default 20)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "GpuBench.h"

using namespace tandem;

namespace {

#define CHECK_CUDA(expr)                                                                       \
  do {                                                                                         \
    cudaError_t e_ = (expr);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "gpu_gemm_vs_cublas: %s: %s\n", #expr, cudaGetErrorString(e_));     \
      return -1;                                                                               \
    }                                                                                          \
  } while (0)
#define CHECK_CUBLAS(expr)                                                                     \
  do {                                                                                         \
    cublasStatus_t s_ = (expr);                                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      std::fprintf(stderr, "gpu_gemm_vs_cublas: %s: cuBLAS status %d\n", #expr, (int)s_);      \
      return -1;                                                                               \
    }                                                                                          \
  } while (0)

// Seconds per cublasSgemm of n x n x n (median of 5 timed batches of `reps`), or -1 on error.
double cublasSeconds(int n, int reps) {
  size_t bytes = (size_t)n * n * sizeof(float);
  float *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK_CUDA(cudaMalloc((void**)&a, bytes));
  CHECK_CUDA(cudaMalloc((void**)&b, bytes));
  CHECK_CUDA(cudaMalloc((void**)&c, bytes));
  std::vector<float> host((size_t)n * n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& v : host) v = d(rng);
  CHECK_CUDA(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b, host.data(), bytes, cudaMemcpyHostToDevice));
  cublasHandle_t h = nullptr;
  CHECK_CUBLAS(cublasCreate(&h));
  CHECK_CUBLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // FP32 FMA, no TF32
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUBLAS(cublasSetStream(h, stream));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  const float one = 1, zero = 0;
  for (int i = 0; i < 3; ++i)  // warm-up: heuristics, kernel loads, clocks
    CHECK_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
  std::vector<double> t;
  for (int batch = 0; batch < 5; ++batch) {
    CHECK_CUDA(cudaEventRecord(e0, stream));
    for (int i = 0; i < reps; ++i)
      CHECK_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n));
    CHECK_CUDA(cudaEventRecord(e1, stream));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e-3 / reps);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cublasDestroy(h);
  cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return t[t.size() / 2];
}

// y = x @ W applied `count` times; W is scaled so values stay O(1).
std::string buildChain(int64_t n, int count, std::unique_ptr<Executable>* exe, int* kernels) {
  GraphBuilder g;
  Value x = g.input("x", DType::F32, {n, n});
  Tensor w = Tensor::alloc(DType::F32, {n, n});
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1.f / std::sqrt((float)n), 1.f / std::sqrt((float)n));
  for (int64_t i = 0; i < n * n; ++i) w.data<float>()[i] = d(rng);
  Value wc = g.constant(w);
  Value y = x;
  for (int i = 0; i < count; ++i) y = g.matMul(y, wc);
  g.output(y, "y");
  return gpubench::compileOnGpu(g, exe, kernels);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  std::unique_ptr<DeviceBackend> probe;
  Status gpu = createCudaBackend(0, BackendOptions{}, &probe);
  probe.reset();
  if (!gpu.isOk()) {
    std::printf("gpu_gemm_vs_cublas: skipped: no CUDA device (%s)\n", gpu.message().c_str());
    return 0;
  }
  std::printf("FP32 n x n x n GEMM on cuda:0, no TF32 on either side; Tandem per MatMul from %d extra "
              "MatMuls in one run (transfers cancel)\n", reps);
  std::printf("%6s | %10s %10s | %10s %10s | %10s %12s | %s\n", "n", "cublas ms", "GFLOP/s", "tandem ms",
              "GFLOP/s", "ratio", "step ms", "(ratio = tandem time / cublas time; step = profiled, with sync)");
  for (int64_t n : {256, 1024, 4096}) {
    double flops = 2.0 * n * n * n;
    double cb = cublasSeconds((int)n, reps);
    if (cb < 0) return 1;
    std::unique_ptr<Executable> one, many;
    int k1 = 0, k2 = 0;
    std::string err = buildChain(n, 1, &one, &k1);
    if (err.empty()) err = buildChain(n, 1 + reps, &many, &k2);
    Tensor x = Tensor::alloc(DType::F32, {n, n});
    for (int64_t i = 0; i < n * n; ++i) x.data<float>()[i] = (float)((i * 37) % 17) / 17.f - 0.5f;
    double t1 = 0, t2 = 0, step = 0;
    if (err.empty()) err = gpubench::medianRunSeconds(*one, {x}, 3, 15, &t1);
    if (err.empty()) err = gpubench::medianRunSeconds(*many, {x}, 3, 15, &t2);
    if (err.empty()) err = gpubench::medianProfiledGpuSeconds(*one, {x}, 7, &step);
    if (!err.empty()) {
      std::fprintf(stderr, "gpu_gemm_vs_cublas: n=%lld: %s\n", (long long)n, err.c_str());
      return 1;
    }
    if (k2 - k1 != reps)
      std::printf("note: n=%lld: %d kernels on cuda:0 for %d MatMuls (expected one each)\n", (long long)n,
                  k2, 1 + reps);
    double td = (t2 - t1) / reps;
    std::printf("%6lld | %10.4f %10.0f | %10.4f %10.0f | %10.2f %12.4f |\n", (long long)n, cb * 1e3,
                flops / cb * 1e-9, td * 1e3, td > 0 ? flops / td * 1e-9 : NAN, td / cb, step * 1e3);
  }
  return 0;
}
