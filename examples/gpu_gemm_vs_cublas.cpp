// Tandem's GEMM on cuda:0 vs bare cuBLAS and bare cuBLASLt, FP32 without TF32 on every side
// (Tandem's cuBLASLt MatMul computes in CUBLAS_COMPUTE_32F; cublasSgemm runs with
// CUBLAS_DEFAULT_MATH; the bare cuBLASLt call uses CUBLAS_COMPUTE_32F, the heuristic's first
// algorithm and the same 32 MiB workspace as Tandem), for n x n x n with n in {256, 1024, 4096}.
// Prints GFLOP/s (2 n^3 per product) and Tandem's throughput as a fraction of each peer's.
//
// Peers: `reps` calls back to back on one stream, timed with cudaEvents (median of 5 batches).
// Tandem: a graph y = x @ W @ W ... (W a constant, uploaded once at load) compiled with
// --placement gpu; per product = (run time with 1 + reps MatMuls - run time with 1) / reps, so
// the input upload, output download and the run's one synchronisation cancel and the MatMuls run
// back to back on the compute stream as the peers' loops do. Also shown: the profiled step time
// of one MatMul (a device synchronisation after the step: launch + kernel + round trip). Every
// side multiplies the same deterministic matrices (GpuBench.h's patternValue).
//
// Compile here, run there (a GPU machine without a compiler, scripts/gpu-kit.sh):
//   gpu_gemm_vs_cublas [reps]                      compile in-process for the live GPU and run
//   gpu_gemm_vs_cublas --write-plans DIR [reps]    compile for cpu,cuda:0=h100 (no GPU needed):
//                                                  DIR/gemm-n*-x*.tplan, gemm.weights, manifest.txt
//   gpu_gemm_vs_cublas_run --plans DIR [--json F]  the same timing from those plans; this build
//                                                  (TANDEM_BENCH_RUNTIME_ONLY) links no MLIR
// --json F also writes the results as JSON (ratios = Tandem throughput / peer throughput).
// Without a GPU the timing prints why and exits 0. Default reps 20.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "GpuBench.h"
#include "runtime/Backend.h"
#ifndef TANDEM_BENCH_RUNTIME_ONLY
#include "GpuBenchCompile.h"
#endif

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
  for (size_t i = 0; i < host.size(); ++i) host[i] = gpubench::patternValue((int64_t)i, 6.f / n);
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


#define CHECK_CUBLASLT(expr)                                                                   \
  do {                                                                                         \
    cublasStatus_t s_ = (expr);                                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      std::fprintf(stderr, "gpu_gemm_vs_cublas: %s: cuBLASLt status %d\n", #expr, (int)s_);    \
      return -1;                                                                               \
    }                                                                                          \
  } while (0)

// Seconds per cublasLtMatmul of n x n x n as Tandem's MatMul kernel calls it (runtime/cuda/
// Math.cpp: CUBLAS_COMPUTE_32F, the heuristic's first algorithm for 256-byte aligned operands,
// a 32 MiB workspace), median of 5 timed batches of `reps`; -1 on error.
double cublasLtSeconds(int n, int reps) {
  size_t bytes = (size_t)n * n * sizeof(float), wsBytes = 32u << 20;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  void* ws = nullptr;
  CHECK_CUDA(cudaMalloc((void**)&a, bytes));
  CHECK_CUDA(cudaMalloc((void**)&b, bytes));
  CHECK_CUDA(cudaMalloc((void**)&c, bytes));
  CHECK_CUDA(cudaMalloc(&ws, wsBytes));
  std::vector<float> host((size_t)n * n);
  for (size_t i = 0; i < host.size(); ++i) host[i] = gpubench::patternValue((int64_t)i, 6.f / n);
  CHECK_CUDA(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b, host.data(), bytes, cudaMemcpyHostToDevice));
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;  // n x n, column-major, ld n: A, B, C and D alike
  cublasLtMatmulPreference_t pref = nullptr;
  CHECK_CUBLASLT(cublasLtCreate(&lt));
  CHECK_CUBLASLT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CHECK_CUBLASLT(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, n, n, n));
  CHECK_CUBLASLT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsBytes,
                                                      sizeof wsBytes));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  CHECK_CUBLASLT(cublasLtMatmulAlgoGetHeuristic(lt, desc, layout, layout, layout, layout, pref, 1, &heuristic,
                                                &found));
  if (found == 0) {
    std::fprintf(stderr, "gpu_gemm_vs_cublas: cuBLASLt has no algorithm for %d x %d x %d\n", n, n, n);
    return -1;
  }
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  const float one = 1, zero = 0;
  auto matmul = [&] {
    return cublasLtMatmul(lt, desc, &one, a, layout, b, layout, &zero, c, layout, c, layout, &heuristic.algo, ws,
                          wsBytes, stream);
  };
  for (int i = 0; i < 3; ++i) CHECK_CUBLASLT(matmul());  // warm-up: kernel loads, clocks
  std::vector<double> t;
  for (int batch = 0; batch < 5; ++batch) {
    CHECK_CUDA(cudaEventRecord(e0, stream));
    for (int i = 0; i < reps; ++i) CHECK_CUBLASLT(matmul());
    CHECK_CUDA(cudaEventRecord(e1, stream));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e-3 / reps);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(lt);
  cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(ws);
  return t[t.size() / 2];
}

const int64_t kSizes[] = {256, 1024, 4096};

// The input x of every Tandem run: n x n of the pattern, unscaled.
Tensor inputFor(int64_t n) {
  Tensor x = Tensor::alloc(DType::F32, {n, n});
  for (int64_t i = 0; i < n * n; ++i) x.data<float>()[i] = gpubench::patternValue(i);
  return x;
}

// Tandem's two executables for one n: 1 MatMul and 1 + reps MatMuls, with their kernel counts.
struct Chains {
  std::unique_ptr<Executable> one, many;
  int kernelsOne = 0, kernelsMany = 0;
};

#ifndef TANDEM_BENCH_RUNTIME_ONLY
// y = x @ W applied `count` times; W (n x n of the pattern, scale 6 / n) keeps values O(1).
void buildChain(GraphBuilder& g, int64_t n, int count) {
  Value x = g.input("x", DType::F32, {n, n});
  Tensor w = Tensor::alloc(DType::F32, {n, n});
  for (int64_t i = 0; i < n * n; ++i) w.data<float>()[i] = gpubench::patternValue(i, 6.f / n);
  Value wc = g.constant(w);
  Value y = x;
  for (int i = 0; i < count; ++i) y = g.matMul(y, wc);
  g.output(y, "y");
}

std::string compileChains(int64_t n, int reps, Chains* c) {
  GraphBuilder g1, g2;
  buildChain(g1, n, 1);
  buildChain(g2, n, 1 + reps);
  std::string err = gpubench::compileOnGpu(g1, &c->one, &c->kernelsOne);
  return err.empty() ? gpubench::compileOnGpu(g2, &c->many, &c->kernelsMany) : err;
}

// --write-plans: both chains per n for cpu,cuda:0=h100, W once in gemm.weights.
int writePlans(const std::string& dir, int reps) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "gpu_gemm_vs_cublas: %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  std::string manifest = "# gpu_gemm_vs_cublas --write-plans, target " + std::string(gpubench::kPlanTarget) + "\n";
  for (int64_t n : kSizes) {
    std::string line = "gemm n=" + std::to_string(n) + " reps=" + std::to_string(reps);
    for (int count : {1, 1 + reps}) {
      GraphBuilder g;
      buildChain(g, n, count);
      std::string file = "gemm-n" + std::to_string(n) + "-x" + std::to_string(count) + ".tplan";
      int kernels = 0;
      std::string err = gpubench::writeGraphPlan(g, dir, file, "gemm.weights", &kernels);
      if (!err.empty()) {
        std::fprintf(stderr, "gpu_gemm_vs_cublas: n=%lld: %s\n", (long long)n, err.c_str());
        return 1;
      }
      const char* which = count == 1 ? "one" : "many";
      line += std::string(" ") + which + "=" + file + " kernels_" + which + "=" + std::to_string(kernels);
    }
    manifest += line + "\n";
  }
  std::string err = gpubench::writeText(dir + "/manifest.txt", manifest);
  if (!err.empty()) {
    std::fprintf(stderr, "gpu_gemm_vs_cublas: %s\n", err.c_str());
    return 1;
  }
  std::printf("gpu_gemm_vs_cublas: wrote %s (n = 256, 1024, 4096; reps %d; target %s)\n", dir.c_str(), reps,
              gpubench::kPlanTarget);
  return 0;
}
#endif

std::string loadChains(const std::string& dir, const gpubench::ManifestEntry& e, Chains* c) {
  c->kernelsOne = (int)e.num("kernels_one");
  c->kernelsMany = (int)e.num("kernels_many");
  std::string err = gpubench::loadOnGpu(dir + "/" + e.get("one"), &c->one);
  return err.empty() ? gpubench::loadOnGpu(dir + "/" + e.get("many"), &c->many) : err;
}

int usage(const char* why) {
  std::fprintf(stderr, "gpu_gemm_vs_cublas: %s\nusage: gpu_gemm_vs_cublas [reps] | --write-plans DIR [reps] | "
               "--plans DIR [--json FILE]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  std::string writeDir, plansDir, jsonPath;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--write-plans" || a == "--plans" || a == "--json") && i + 1 < argc)
      (a == "--write-plans" ? writeDir : a == "--plans" ? plansDir : jsonPath) = argv[++i];
    else if (!a.empty() && a[0] != '-')
      reps = std::max(1, std::atoi(a.c_str()));
    else
      return usage(("unknown or incomplete option " + a).c_str());
  }
#ifdef TANDEM_BENCH_RUNTIME_ONLY
  if (!writeDir.empty()) return usage("this runtime-only build cannot compile: use gpu_gemm_vs_cublas --write-plans");
  if (plansDir.empty()) return usage("this runtime-only build needs --plans DIR");
#else
  if (!writeDir.empty()) return writePlans(writeDir, reps);
#endif
  // Read before the GPU probe, so a bad directory is reported on any machine.
  std::vector<gpubench::ManifestEntry> manifest;
  if (!plansDir.empty()) {
    std::string err = gpubench::readManifest(plansDir, &manifest);
    if (!err.empty()) {
      std::fprintf(stderr, "gpu_gemm_vs_cublas: %s\n", err.c_str());
      return 1;
    }
    if (manifest.empty()) return usage("the manifest lists no plans");
    reps = (int)manifest[0].num("reps");
  }
  std::unique_ptr<DeviceBackend> probe;
  Status gpu = createCudaBackend(0, BackendOptions{}, &probe);
  probe.reset();
  if (!gpu.isOk()) {
    std::printf("gpu_gemm_vs_cublas: skipped: no CUDA device (%s)\n", gpu.message().c_str());
    return 0;
  }
  std::printf("FP32 n x n x n GEMM on cuda:0, no TF32 on any side; Tandem per MatMul from %d extra MatMuls in "
              "one run (transfers cancel); Tandem's plans %s\n", reps,
              plansDir.empty() ? "compiled in-process" : ("from " + plansDir).c_str());
  std::printf("%6s | %10s %8s | %10s %8s | %10s %8s | %8s %8s | %10s | %s\n", "n", "cublas ms", "GFLOP/s",
              "cublasLt", "GFLOP/s", "tandem ms", "GFLOP/s", "of cublas", "of Lt", "step ms",
              "(of = Tandem throughput / peer throughput; step = profiled, with sync)");
  std::string json = "{\"reps\": " + std::to_string(reps) + ", \"source\": \"" +
                     (plansDir.empty() ? std::string("in-process") : "plans") + "\", \"sizes\": [";
  std::vector<int64_t> sizes;
  if (manifest.empty()) sizes.assign(std::begin(kSizes), std::end(kSizes));
  for (const auto& e : manifest) sizes.push_back(e.num("n"));
  for (size_t k = 0; k < sizes.size(); ++k) {
    int64_t n = sizes[k];
    double flops = 2.0 * n * n * n;
    double cb = cublasSeconds((int)n, reps), lt = cublasLtSeconds((int)n, reps);
    if (cb < 0 || lt < 0) return 1;
    Chains c;
    std::string err;
#ifndef TANDEM_BENCH_RUNTIME_ONLY
    if (manifest.empty()) err = compileChains(n, reps, &c);
    else
#endif
      err = loadChains(plansDir, manifest[k], &c);
    Tensor x = inputFor(n);
    double t1 = 0, t2 = 0, step = 0;
    if (err.empty()) err = gpubench::medianRunSeconds(*c.one, {x}, 3, 15, &t1);
    if (err.empty()) err = gpubench::medianRunSeconds(*c.many, {x}, 3, 15, &t2);
    if (err.empty()) err = gpubench::medianProfiledGpuSeconds(*c.one, {x}, 7, &step);
    if (!err.empty()) {
      std::fprintf(stderr, "gpu_gemm_vs_cublas: n=%lld: %s\n", (long long)n, err.c_str());
      return 1;
    }
    if (c.kernelsMany - c.kernelsOne != reps)
      std::printf("note: n=%lld: %d kernels on cuda:0 for %d MatMuls (expected one each)\n", (long long)n,
                  c.kernelsMany, 1 + reps);
    double td = (t2 - t1) / reps;
    std::printf("%6lld | %10.4f %8.0f | %10.4f %8.0f | %10.4f %8.0f | %8.2f %8.2f | %10.4f |\n", (long long)n,
                cb * 1e3, flops / cb * 1e-9, lt * 1e3, flops / lt * 1e-9, td * 1e3,
                td > 0 ? flops / td * 1e-9 : NAN, td > 0 ? cb / td : NAN, td > 0 ? lt / td : NAN, step * 1e3);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"n\": %lld, \"cublas_ms\": %.6f, \"cublaslt_ms\": %.6f, \"tandem_ms\": %.6f, "
                  "\"step_ms\": %.6f, \"vs_cublas\": %.4f, \"vs_cublaslt\": %.4f, \"kernels\": %d}",
                  k ? ", " : "", (long long)n, cb * 1e3, lt * 1e3, td * 1e3, step * 1e3, td > 0 ? cb / td : 0.0,
                  td > 0 ? lt / td : 0.0, c.kernelsMany);
    json += buf;
  }
  json += "]}\n";
  if (!jsonPath.empty()) {
    std::string err = gpubench::writeText(jsonPath, json);
    if (!err.empty()) {
      std::fprintf(stderr, "gpu_gemm_vs_cublas: %s\n", err.c_str());
      return 1;
    }
  }
  return 0;
}
