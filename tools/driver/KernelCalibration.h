// The runtime-only half of calibration (no MLIR, no compiler): timing single kernels created by
// the kernel registry, and the GPU measurements shared by `tandem calibrate` and
// `tandem-run calibrate`. Profile schema: compiler/placement/CostModel.h.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/Kernel.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace tandem::calib {

using Clock = std::chrono::steady_clock;

/// Seconds from `t0` to now.
double secondsSince(Clock::time_point t0);

/// One operand of a benchmarked op: its f32 shape, and whether it is a constant (weights: the
/// kernel prepacks it once, as at plan load).
struct Operand {
  Shape shape;
  bool constant = false;
};

/// A convolution layer to time: NCHW input `x`, OIHW weights `w`, square stride and padding.
struct ConvLayer {
  const char* name;
  Shape x, w;
  int64_t stride, pad;
};
/// The calibration's conv layers: MNIST- and ResNet-like, 0.3 MFLOP to 1.9 GFLOP.
const std::vector<ConvLayer>& convLayers();
/// Conv attributes (kernel_shape, strides, pads) of `c`.
AttrMap convAttrs(const ConvLayer& c);
/// FLOPs of one run of `c` with output shape `y`, counted as OpWork does: 2 per MAC + the bias.
double convFlops(const ConvLayer& c, const Shape& y);

/// The host side of a bench: deterministic f32 inputs in [-1, 1) for `operands` (no denormals
/// or NaNs, so timing does not depend on values), and a kernel context with their types, the
/// inferred result types and the constant inputs marked. `attrs` must outlive `ctx`.
/// Errors: shape inference rejects the operands (names the op).
Status benchContext(const std::string& opType, const std::vector<Operand>& operands,
                    const AttrMap* attrs, int threads, std::vector<Tensor>* hostInputs,
                    KernelContext* ctx);

/// The compute part of a run: the measured time minus the dispatch overhead the cost model adds
/// on its own, floored at half the measurement. The overhead is measured with cold caches
/// (tiny kernels between sweeps of 4 MB) and the kernels warm, so on a host where dispatch
/// is slow a 64^3 GEMM (3 us warm, against 3.3 us of cold dispatch on a 2-vCPU Xeon VM) would
/// otherwise come out at several times the machine's peak. Seconds.
double netSeconds(double measured, double dispatch);

/// "   12.34 GFLOP/s" (G or M prefix), "64 MB" / "16 KB", "0.123 ms".
std::string fmtRate(double v, const char* unit);
std::string fmtBytes(double bytes);
std::string fmtMs(double seconds);
/// Prints one table line: what was measured, the figure, the median time of one run.
void printRow(const std::string& what, const std::string& value, const std::string& detail);
/// The current UTC time as "2026-11-23T21:00:00Z" (the profile's "created").
std::string utcNow();

/// Measures cuda:0 with its own kernels within about `seconds` of wall clock: launch overhead
/// (back-to-back launches of a one-element Relu), GEMM for m = n = k in 64 ... 4096, the
/// convLayers(), an f32 Add moving 4 KB ... 256 MB, and the cpu <-> cuda:0 links (4-byte copy
/// for latency; 64 MB from pinned and from pageable host memory, each direction). Each figure is
/// the median of batches of launches timed to completion, minus the launch overhead. Adds
/// "cuda:0" to `devices` and two entries to `links`, and prints a table.
/// When no GPU can be driven (no CUDA backend in this build, no driver, no device), returns ok
/// with `unavailable` set to the reason and adds nothing. Errors: a kernel or copy that fails.
Status calibrateGpu(double seconds, nlohmann::json* devices, nlohmann::json* links,
                    std::string* unavailable);

}  // namespace tandem::calib
