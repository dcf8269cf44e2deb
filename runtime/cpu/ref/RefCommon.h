// Internal helpers shared by the reference CPU kernels: kernel wrapper, registration, dtype
// dispatch, axis normalisation, strided/broadcast index iteration. Not a public header.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/Kernel.h"

namespace tandem {
namespace ref {

using Inputs = std::vector<const Tensor*>;
using Outputs = std::vector<Tensor*>;
using RunFn = std::function<Status(const Inputs&, const Outputs&)>;
using AcceptsFn = std::function<bool(const std::vector<DType>&)>;

/// A reference kernel is a closure over what its factory computed from the KernelContext.
/// Closures hold no per-run state, so one kernel may run concurrently from several threads.
/// Where a kernel's run function takes its shape operands' values from
/// (Kernel::readsShapeOperandsAtRun): AtRun when it resolves them from its inputs on every run
/// (ConstOperands::resolve/get, which prefer the run's operand) and derives nothing from their
/// load-time values.
enum class ShapeValues { AtCreation, AtRun };

class RefKernel final : public Kernel {
 public:
  explicit RefKernel(RunFn fn, ShapeValues shapeValues = ShapeValues::AtCreation)
      : fn_(std::move(fn)), shapeValues_(shapeValues) {}
  Status run(const Inputs& inputs, const Outputs& outputs) override { return fn_(inputs, outputs); }
  std::string implName() const override { return "ref"; }
  bool readsShapeOperandsAtRun() const override { return shapeValues_ == ShapeValues::AtRun; }

 private:
  RunFn fn_;
  ShapeValues shapeValues_;
};

inline Status makeKernel(std::unique_ptr<Kernel>* out, RunFn fn,
                         ShapeValues shapeValues = ShapeValues::AtCreation) {
  *out = std::make_unique<RefKernel>(std::move(fn), shapeValues);
  return Status::ok();
}

/// Who reports an error: kept by run() closures, which outlive the KernelContext.
struct OpName {
  std::string opType, nodeName;
  OpName(const KernelContext& ctx) : opType(ctx.opType), nodeName(ctx.nodeName) {}  // NOLINT
};

/// "Conv 'conv1': <msg>" (node name omitted when empty).
/// saturate(round(q) + zp) into the integer type T: q rounded half to even (std::nearbyint in
/// the default rounding mode) before the zero point is added, which matters for ties when zp
/// is odd (QuantizeLinear, ONNX Runtime's requantization). A NaN (a zero or NaN scale, a NaN
/// input) gives the zero point, saturated: converting NaN to an integer is undefined in C++.
template <typename T>
T saturateRound(double q, double zp = 0) {
  double r = std::nearbyint(q) + zp;
  if (std::isnan(r)) r = std::isnan(zp) ? 0.0 : zp;
  const double lo = double(std::numeric_limits<T>::min()), hi = double(std::numeric_limits<T>::max());
  return T(r < lo ? lo : r > hi ? hi : r);
}

inline Status opError(const OpName& op, const std::string& msg) {
  std::string p = op.opType;
  if (!op.nodeName.empty()) p += " '" + op.nodeName + "'";
  return Status::error(p + ": " + msg);
}

/// Input i of a run, or nullptr when absent (past the end or skipped).
inline const Tensor* inputAt(const Inputs& in, size_t i) { return i < in.size() ? in[i] : nullptr; }
inline Tensor* outputAt(const Outputs& out, size_t i) { return i < out.size() ? out[i] : nullptr; }
inline bool inputPresent(const KernelContext& ctx, size_t i) {
  return i < ctx.inputTypes.size() && ctx.inputTypes[i].present();
}
inline bool outputRequested(const KernelContext& ctx, size_t i) {
  return i < ctx.outputTypes.size() && ctx.outputTypes[i].present();
}
/// The constant value of input i known at load time, or nullptr.
inline const Tensor* constInputAt(const KernelContext& ctx, size_t i) {
  return i < ctx.constInputs.size() ? ctx.constInputs[i] : nullptr;
}

/// Load-time copies of an op's small constant operands (shape operands such as Slice's starts),
/// so that run() also works when the executor hands nullptr for an input it treats as folded.
/// A tensor given to run() always wins over the copy.
class ConstOperands {
 public:
  ConstOperands() = default;
  /// Copies ctx.constInputs[i] for i >= firstIndex (input 0 is data, never copied).
  explicit ConstOperands(const KernelContext& ctx, size_t firstIndex = 1) {
    saved_.resize(ctx.constInputs.size());
    for (size_t i = firstIndex; i < ctx.constInputs.size(); ++i)
      if (ctx.constInputs[i]) saved_[i] = Tensor::copyOf(*ctx.constInputs[i]);
  }
  const Tensor* get(const Inputs& in, size_t i) const {
    if (const Tensor* t = i < in.size() ? in[i] : nullptr) return t;
    return i < saved_.size() && saved_[i].defined() ? &saved_[i] : nullptr;
  }
  /// `in` with each missing operand replaced by its load-time copy.
  Inputs resolve(const Inputs& in) const {
    Inputs r(std::max(in.size(), saved_.size()), nullptr);
    for (size_t i = 0; i < r.size(); ++i) r[i] = get(in, i);
    return r;
  }

 private:
  std::vector<Tensor> saved_;
};

// ---- dtype sets and dispatch -------------------------------------------------------------

// Functions rather than globals so registration is safe during static initialisation.
const std::vector<DType>& floatTypes();    // f32, f64
const std::vector<DType>& signedTypes();   // f32, f64, i32, i64, i8
const std::vector<DType>& numericTypes();  // f32, f64, i32, i64, u8, i8
const std::vector<DType>& allTypes();      // numericTypes() + bool + u16, i16, u32, u64
/// numericTypes() + u16, i16, u32, u64: the ops whose kernels dispatch with dispatchWide.
const std::vector<DType>& wideNumericTypes();
const std::vector<DType>& indexTypes();    // i32, i64
const std::vector<DType>& unsignedTypes(); // u8, u16, u32, u64

bool contains(const std::vector<DType>& set, DType t);
/// accepts: every present input has the same dtype, which is in `types`.
AcceptsFn acceptsAllSame(std::vector<DType> types);
/// "f32,f64,i32".
std::string dtypesToText(const std::vector<DType>& set);

/// Calls f(T{}) for float/double only; false for any other dtype.
template <typename F>
bool dispatchFloat(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return true;
    case DType::F64: f(double{}); return true;
    default: return false;
  }
}
/// Calls f(T{}) for the numeric dtypes (not bool).
template <typename F>
bool dispatchNumeric(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return true;
    case DType::F64: f(double{}); return true;
    case DType::I32: f(int32_t{}); return true;
    case DType::I64: f(int64_t{}); return true;
    case DType::U8: f(uint8_t{}); return true;
    case DType::I8: f(int8_t{}); return true;
    default: return false;
  }
}
/// Calls f(T{}) for the unsigned integer dtypes.
template <typename F>
bool dispatchUnsigned(DType t, F&& f) {
  switch (t) {
    case DType::U8: f(uint8_t{}); return true;
    case DType::U16: f(uint16_t{}); return true;
    case DType::U32: f(uint32_t{}); return true;
    case DType::U64: f(uint64_t{}); return true;
    default: return false;
  }
}
/// Calls f(T{}) for wideNumericTypes(): the numeric dtypes and the 16-bit and wide unsigned
/// integers that few models use (kept apart so most kernels are not instantiated for them).
template <typename F>
bool dispatchWide(DType t, F&& f) {
  switch (t) {
    case DType::U16: f(uint16_t{}); return true;
    case DType::I16: f(int16_t{}); return true;
    case DType::U32: f(uint32_t{}); return true;
    case DType::U64: f(uint64_t{}); return true;
    default: return dispatchNumeric(t, f);
  }
}
/// Calls f(T{}) for signed numeric dtypes (not u8, not bool).
template <typename F>
bool dispatchSigned(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return true;
    case DType::F64: f(double{}); return true;
    case DType::I32: f(int32_t{}); return true;
    case DType::I64: f(int64_t{}); return true;
    case DType::I8: f(int8_t{}); return true;
    default: return false;
  }
}
/// Calls f(T{}) for an unsigned integer type of the element's byte size: data movement ops
/// copy bits and need no arithmetic, so one instantiation per size covers every dtype.
template <typename F>
bool dispatchBySize(DType t, F&& f) {
  switch (dtypeSize(t)) {
    case 1: f(uint8_t{}); return true;
    case 2: f(uint16_t{}); return true;
    case 4: f(uint32_t{}); return true;
    case 8: f(uint64_t{}); return true;
    default: return false;
  }
}

/// Accumulator type: f32 sums accumulate in f64 so the reference stays close to exact; integer
/// sums in i64 (wrapping back to the element type gives the same bits as wrapping arithmetic).
template <typename T>
using AccOf = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <typename T>
inline bool isNaN(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

// ---- registration --------------------------------------------------------------------------

/// Adds a "cpu"/"ref" def (priority 0) for `op` accepting inputs whose first dtype is in `types`.
void addRef(KernelRegistry& r, const std::string& op, const std::vector<DType>& types,
            KernelFactory create);
/// Same, with a custom accepts predicate and display text. Every def's factory first checks that
/// input 0 (except for Constant) and output 0 are present and that output 0 has the dtype of
/// input 0 (except for ops that define their own output dtype).
void addRef(KernelRegistry& r, const std::string& op, AcceptsFn accepts, std::string dtypesText,
            KernelFactory create);

void registerElementwiseKernels(KernelRegistry& r);  // Elementwise.cpp
void registerMathKernels(KernelRegistry& r);         // Math.cpp
void registerConvKernels(KernelRegistry& r);         // Conv.cpp
void registerPoolKernels(KernelRegistry& r);         // Pool.cpp
void registerNormKernels(KernelRegistry& r);         // Normalization.cpp
void registerReductionKernels(KernelRegistry& r);    // Reduction.cpp
void registerTensorKernels(KernelRegistry& r);       // Tensor.cpp
void registerIndexingKernels(KernelRegistry& r);     // Indexing.cpp
void registerEmbeddingBagKernels(KernelRegistry& r); // EmbeddingBag.cpp
void registerSelectionKernels(KernelRegistry& r);    // Selection.cpp
void registerImageKernels(KernelRegistry& r);        // Image.cpp
void registerEinsumKernels(KernelRegistry& r);       // Einsum.cpp
void registerLossKernels(KernelRegistry& r);         // Loss.cpp
void registerOptimizerKernels(KernelRegistry& r);    // Optimizer.cpp
void registerGenerateKernels(KernelRegistry& r);     // Generate.cpp
void registerQuantizeKernels(KernelRegistry& r);     // Quantize.cpp
void registerQuantizedMathKernels(KernelRegistry& r);  // QuantizedMath.cpp
void registerDequantizeMatMulKernels(KernelRegistry& r);  // DequantizeMatMul.cpp
void registerRecurrentKernels(KernelRegistry& r);    // Recurrent.cpp
void registerSignalKernels(KernelRegistry& r);       // Signal.cpp
void registerAttentionKernels(KernelRegistry& r);    // Attention.cpp
void registerFusedKernels(KernelRegistry& r);        // Fused.cpp: "Fused" (unfused composite, element-wise loop)

// ---- shapes, axes, index iteration ---------------------------------------------------------

/// Maps a possibly negative axis into [0, rank); false when out of range.
bool normalizeAxis(int64_t axis, int64_t rank, int64_t* out);
/// Row-major element strides of `s`.
std::vector<int64_t> rowMajorStrides(const Shape& s);
/// Element strides of `in` read as if broadcast to `out` (ONNX multidirectional broadcasting:
/// shapes aligned right, stride 0 where `in` has a 1 or lacks the dim). `in` must broadcast.
std::vector<int64_t> broadcastStrides(const Shape& in, const Shape& out);
/// True when `in` broadcasts to `out` (unidirectionally).
bool broadcastsTo(const Shape& in, const Shape& out);
/// Error unless output `output` has exactly the shape of input 0 (elementwise-in-place ops).
Status checkSameShape(const KernelContext& ctx, size_t output = 0);
/// Product of s[begin, end).
int64_t product(const Shape& s, size_t begin, size_t end);

/// Integer operand values (i32 or i64 tensor) as int64; error names the op and the operand.
Status readInts(const OpName& op, const Tensor* t, const char* what, std::vector<int64_t>* out);
/// Element `i` of a numeric tensor as double (for scalar operands such as Clip's min).
double elementAsDouble(const Tensor& t, int64_t i);

/// Runs f(begin, end) over [0, total) split into up to `threads` contiguous ranges on OpenMP
/// threads, each at least `grain` long (fewer ranges, or one on the caller's thread, for small
/// totals). For memory-bound loops (copies, fills, casts) of data-dependent ops in a dynamic
/// region, which one core cannot stream at the memory's speed.
template <typename F>
void parallelRanges(int threads, int64_t total, int64_t grain, F&& f) {
  if (total <= 0) return;
  const int64_t parts = std::min<int64_t>(std::max(1, threads), total / std::max<int64_t>(1, grain));
  if (parts <= 1) {
    f(int64_t{0}, total);
    return;
  }
#pragma omp parallel for num_threads((int)parts) schedule(static)
  for (int64_t p = 0; p < parts; ++p) f(total * p / parts, total * (p + 1) / parts);
}

/// Elements per range of a parallelRanges copy, fill or cast: 64K (256 KB of f32).
constexpr int64_t kStreamGrain = 1 << 16;

/// y[idx] = x[sum_d map[d][idx_d] * stride_d], or `fill` when some map[d][idx_d] is -1. Row by
/// row of the last dim (threaded over rows): the outer dims' offset once per row, the longest
/// run of the last dim's map that reads consecutive elements (a pad's interior, a tile's copy)
/// as one copy, the rest element by element. Pad, Tile and nearest Resize are such gathers.
template <typename T>
void gatherByDimMaps(const Tensor& x, Tensor& y, const std::vector<std::vector<int64_t>>& map,
                     T fill, int threads) {
  const size_t r = map.size();
  const int64_t total = y.numel();
  if (total == 0) return;
  const T* X = x.data<T>();
  T* Y = y.data<T>();
  if (r == 0) {
    Y[0] = X[0];
    return;
  }
  const std::vector<int64_t> st = rowMajorStrides(x.shape());
  const Shape& ys = y.shape();
  const std::vector<int64_t>& last = map[r - 1];
  const int64_t W = ys[r - 1], rows = total / W;  // x is row-major: the last dim's stride is 1
  int64_t c0 = 0, c1 = 0;  // [c0, c1): last[o] = last[c0] + (o - c0) >= 0, the longest such run
  for (int64_t o = 0; o < W;) {
    int64_t e = o + 1;
    if (last[o] >= 0)
      while (e < W && last[e] == last[e - 1] + 1) ++e;
    if (last[o] >= 0 && e - o > c1 - c0) c0 = o, c1 = e;
    o = e;
  }
  parallelRanges(threads, rows, std::max<int64_t>(1, kStreamGrain / W), [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(r - 1);
    for (int64_t row = b, d = int64_t(r) - 2; d >= 0; --d) {  // row -> outer multi-index
      idx[d] = row % ys[d];
      row /= ys[d];
    }
    for (int64_t row = b; row < e; ++row) {
      T* yr = Y + row * W;
      int64_t off = 0;
      bool inside = true;
      for (size_t d = 0; d + 1 < r; ++d) {
        const int64_t s = map[d][idx[d]];
        inside &= s >= 0;
        off += s * st[d];
      }
      if (!inside) {
        std::fill(yr, yr + W, fill);
      } else {
        const T* xr = X + off;
        auto at = [&](int64_t o) { return last[o] < 0 ? fill : xr[last[o]]; };
        for (int64_t o = 0; o < c0; ++o) yr[o] = at(o);
        if (c1 > c0) std::copy(xr + last[c0], xr + last[c0] + (c1 - c0), yr + c0);
        for (int64_t o = c1; o < W; ++o) yr[o] = at(o);
      }
      for (int64_t d = int64_t(r) - 2; d >= 0 && ++idx[d] == ys[d]; --d) idx[d] = 0;
    }
  });
}

/// Visits the elements of `shape` in row-major order a run at a time: f(outIndex, offs, n,
/// steps) for the n elements outIndex .. outIndex + n - 1, whose offsets into operand j are
/// offs[j] + k * steps[j] (k < n). offs[j] is base[j] + sum_d idx[d] * strides[j][d]. Dims are
/// coalesced first, innermost outward: unit dims dropped, and a dim merged into the one inside
/// it where every operand steps over it as over that many of the inner one (contiguous runs, a
/// broadcast over several trailing dims), so runs are as long as the strides allow (Mamba's
/// Where over [1, 32, 32, 128, 16] with its mask broadcast over the last two: 2,048 elements a
/// run, not 16).
template <size_t N, typename F>
void forEachStridedRun(const Shape& shape, const std::array<const int64_t*, N>& strides,
                       const std::array<int64_t, N>& base, F&& f) {
  const int64_t total = numElements(shape);
  if (total == 0) return;
  Shape dims;                                // innermost first
  std::vector<std::array<int64_t, N>> step;  // per merged dim, per operand
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> sd;
    for (size_t j = 0; j < N; ++j) sd[j] = strides[j][d];
    if (!dims.empty()) {
      bool merge = true;
      for (size_t j = 0; j < N && merge; ++j) merge = sd[j] == step.back()[j] * dims.back();
      if (merge) {
        dims.back() *= shape[d];
        continue;
      }
    }
    dims.push_back(shape[d]);
    step.push_back(sd);
  }
  if (dims.empty()) {  // rank 0, or every dim 1
    f(int64_t{0}, base, int64_t{1}, std::array<int64_t, N>{});
    return;
  }
  const size_t r = dims.size();
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> off = base;
  const int64_t inner = dims[0];
  for (int64_t linear = 0; linear < total; linear += inner) {
    f(linear, off, inner, step[0]);
    for (size_t d = 1; d < r; ++d) {
      for (size_t j = 0; j < N; ++j) off[j] += step[d][j];
      if (++idx[d] < dims[d]) break;
      for (size_t j = 0; j < N; ++j) off[j] -= step[d][j] * dims[d];
      idx[d] = 0;
    }
  }
}

/// Visits every element of `shape` in row-major order. f(outIndex, offs): offs[j] is
/// base[j] + sum_d idx[d] * strides[j][d], an element offset into operand j. Operands may
/// read with stride 0 (broadcast), permuted strides (transpose) or negative strides (slices).
/// Runs of coalesced dims as forEachStridedRun.
template <size_t N, typename F>
void forEachStrided(const Shape& shape, const std::array<const int64_t*, N>& strides,
                    const std::array<int64_t, N>& base, F&& f) {
  forEachStridedRun<N>(shape, strides, base,
                       [&](int64_t linear, std::array<int64_t, N> o, int64_t n, const std::array<int64_t, N>& st) {
                         for (int64_t i = 0; i < n; ++i) {
                           f(linear + i, o);
                           for (size_t j = 0; j < N; ++j) o[j] += st[j];
                         }
                       });
}

/// Visits every multi-index of `shape` in row-major order: f(linear, idx) with idx of rank size.
template <typename F>
void forEachIndex(const Shape& shape, F&& f) {
  const int64_t total = numElements(shape);
  if (total == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t linear = 0; linear < total; ++linear) {
    f(linear, (const int64_t*)idx.data());
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

/// Spatial padding of a windowed op (Conv, pools) per ONNX auto_pad: the begin pads, given the
/// actual output extent. NOTSET uses `pads` (length 2*spatial, begins then ends, default 0).
/// Errors name the attribute.
Status windowBeginPads(const KernelContext& ctx, const Shape& inSpatial, const Shape& outSpatial,
                       const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                       const std::vector<int64_t>& dilations, std::vector<int64_t>* beginPads,
                       std::vector<int64_t>* endPads);

/// Tap table of a windowed op. For each kernel tap kk (row-major over `kernel`) and each
/// position p of `iter` (row-major), entry [kk * numel(iter) + p] is the row-major offset in
/// `bounds` of the coordinate iter_d * strides_d - pads_d + k_d * dilations_d, or -1 when that
/// falls outside `bounds`. Conv/pools iterate outputs and bound by the input; ConvTranspose
/// iterates inputs and bounds by the output. Built once at kernel creation (static shapes).
/// Offsets are 32-bit to halve the table; error when `bounds` has 2^31 elements or more.
using WindowTable = std::vector<int32_t>;
Status windowTable(const OpName& op, const Shape& iter, const Shape& bounds,
                   const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                   const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
                   WindowTable* table);

/// Per-dim first element, step and count of a slice, clamped as ONNX Slice-13 specifies; `in`
/// holds data, starts, ends and optional axes, steps (Indexing.cpp; shared with CUDA Slice).
Status slicePlan(const OpName& op, const Shape& xs, const Inputs& in, std::vector<int64_t>* start,
                 std::vector<int64_t>* step, Shape* count);

/// One axis of Resize-13, sampled separably: output j is the sum over taps t of
/// T(w[j*taps + t]) * in[idx[j*taps + t]] (taps 1 nearest, 2 linear, 4 cubic; zero weights
/// skipped), or the extrapolation value when outside[j] (tf_crop_and_resize).
struct ResizeAxis {
  int64_t in = 0, out = 0, taps = 1;
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<uint8_t> outside;
  bool identity() const;
};

/// Resize-13's passes (Image.cpp; shared with the CUDA kernel so both take the same taps): one
/// ResizeAxis per axis that changes, with its dim in `axisDim`, in the order the passes run (the
/// order that touches the fewest elements; axis order when a crop box leaves the input). Reads
/// mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside,
/// antialias; scales (input 2: f32, or f64 beside sizes for keep_aspect_ratio_policy) and roi
/// (input 1, tf_crop_and_resize only) must be constants. Errors name the attribute or operand.
Status resizePlan(const KernelContext& ctx, std::vector<ResizeAxis>* axes, std::vector<size_t>* axisDim);

/// Reads an INTS attribute of exactly `n` values, or `dflt` repeated when absent.
Status intsAttr(const KernelContext& ctx, const char* name, size_t n, int64_t dflt,
                std::vector<int64_t>* out);

}  // namespace ref
}  // namespace tandem
