// `tandem calibrate`: measure the live CPU with Tandem's own kernels and write a calibration
// profile (schema: compiler/placement/CostModel.h) that `--profile FILE` loads.
#pragma once
#include <string>

namespace tandem::cli {

struct CalibrateOptions {
  std::string output;    // profile JSON to write (atomically: a temporary, then rename)
  double seconds = 10;   // wall-clock budget for the measurements (setup adds ~1-2 s)
  int threads = 0;       // intra-op threads for the kernels; 0 = every available core
};

/// Measures, on the live CPU with the kernels KernelRegistry::global() creates for device kind
/// "cpu" (oneDNN where it has them):
///   - dispatch overhead: the median time of a Relu on one element;
///   - GEMM throughput (FLOP/s) for m = n = k in {64, 128, 256, 512, 768, 1024} (constant B, as
///     weights are);
///   - conv throughput (FLOP/s) for MNIST- and ResNet-like layers from 0.3 MFLOP to 1.9 GFLOP;
///   - elementwise bandwidth (bytes/s) of an f32 Add moving 4 KB ... 64 MB (read + written);
///   - a host-memcpy link cpu <-> cpu:1 (64 MB memcpy), used by two-CPU target sets;
///   - when cuda:0 is live (CUDA backend built, driver and device present), the same figures for
///     it with its own kernels (launch overhead from back-to-back launches; GEMM up to 4096^3;
///     elementwise up to 256 MB) and the cpu <-> cuda:0 links: latency (4-byte copy) and 64 MB
///     bandwidth from pinned and from pageable host memory, each direction. It gets the same
///     time budget again; without a GPU one line says why and the profile has the CPU only.
/// Each figure is the median of repeated runs (at least 3, as many as the time budget allows),
/// minus the dispatch overhead, which the cost model adds separately. Prints a table and writes
/// the profile. Returns the exit code: 0 ok, 1 when a kernel or the output file fails (message
/// on stderr), 2 for bad options (seconds <= 0, threads < 0, empty output).
int runCalibrate(const CalibrateOptions& options);

}  // namespace tandem::cli
