// oneDNN 2.6 int8 kernels of the quantized products: QLinearConv-10, ConvInteger-10 (N-D,
// groups, strides, dilations, pads), QLinearMatMul-10, Tandem's QLinearMatMulBias (its i32 bias
// per column) and MatMulInteger-10 (2-D and batched),
// as the variant "dnnl" next to the reference kernels (variant "ref", runtime/cpu/ref/
// QuantizedMath.cpp), and the same integer arithmetic carried out exactly in f32 where oneDNN's
// int8 products would not be exact or cannot take the operands: variants "dnnl-f32" (oneDNN's
// f32 convolution / matmul) and "avx2-f32" (Tandem's packed AVX2 GEMM); see Arith below. The
// loader measures those that apply and keeps the fastest (runtime/Tuning.h).
//
// Outputs are bit-identical to the reference by construction, but for the one case below:
//  - oneDNN computes only the exact integer part: u8/s8 activations times s8 weights, s32
//    accumulation, the activation's zero point through set_zero_points(DNNL_ARG_SRC) (padding
//    contributes 0 after the shift, as in ONNX), s32 destination, no output scales. The weight
//    zero point is subtracted once at load (W - w_zero_point must fit s8: u8 weights with zero
//    point 128 do, s8 weights with zero point 0 do).
//  - The requantization (bias, acc * multiplier, round half to even, + y_zero_point, saturate)
//    is Tandem's own loop below, the reference's arithmetic step for step. oneDNN's own output
//    scales would round the f32 product acc * scale (the reference's double product is exact)
//    and adds the destination zero point before rounding, which differs on ties with an odd
//    zero point; measured here: see tests/unit/runtime/dnnl_quantized_test.cpp.
//  - Where oneDNN might not be exact the variant is refused and the reference runs: on ISAs
//    without VNNI oneDNN multiplies through vpmaddubsw, whose s16 pair sums saturate, and
//    halves s8-source weights (jcp.wei_adj_scale 0.5), so there only u8 activations with
//    |W - w_zero_point| <= 64 are taken (255 * 128 < 32767); and since some oneDNN paths pass
//    s32 accumulators through f32, ConvInteger and MatMulInteger (whose s32 Y is the result)
//    are taken only while 255 * max_channel sum |W - w_zero_point| <= 2^24.
//    Measured with oneDNN 2.6 on u8 255 x s8 127 over K = 1199 (exact sum 38797485): with
//    ONEDNN_MAX_CPU_ISA=AVX2 jit_uni_int8_1x1:avx2 gave 19659692 and gemm:jit 19659691 (the s16
//    saturation); on avx512_core_vnni brgconv_1x1 and brg matmul were exact past 2^24, but the
//    other implementations were not checked, so the bound stays for the Integer ops.
//  - DynamicQuantizeMatMul (Y f32) quantizes A into the workspace per run (DynamicQuantize.h),
//    runs the u8 x s8 product without a source zero point and subtracts zp * (column sum of
//    W - w_zero_point) in its own f32 loop: the reference's bits while the product is exact,
//    and, like the QLinear ops, taken past 2^24 (its Cast to f32 rounds there anyway).
//  - QLinearConv and QLinearMatMul are taken past that bound (deep layers of real int8 models,
//    K = 4608 in ResNet's last stage, reach it; the reference is about 100x slower there): an
//    accumulator above 2^24 may reach the requantization rounded to f32, a relative error of
//    at most 2^-24, the size of the error the reference's own f32 multiplier has. y then
//    differs from the reference by one unit where acc * multiplier lies that close to a
//    rounding tie, and never by more (ONNX Runtime's MLAS converts its accumulators to f32
//    before requantizing, always). Tested: QLinearAccumulatorsPast2To24StayOnOneDnnWithinOneUnit.
//
// Measured (dnnl_quantized_test's DISABLED_TimingNote, 1 OpenMP thread, shared 2-core AMD EPYC
// with avx512_core_vnni, median of 21): QLinearConv u8 [1,64,28,28] x [64,64,3,3] pad 1, ref
// 40.9 ms, dnnl (jit_int8:avx512_core_vnni + requantize) 0.23 ms; capped to AVX2 ref 20.3 ms,
// dnnl (jit_uni_int8:avx2) 0.38 ms.
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>

#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"
#include "runtime/cpu/ref/DynamicQuantize.h"

#include <omp.h>

namespace tandem {
namespace dnnlcpu {
namespace {

constexpr const char* kVariantDnnl = "dnnl";
constexpr const char* kVariantF32 = "dnnl-f32";
constexpr const char* kVariantAvx2F32 = "avx2-f32";
constexpr const char* kVariantRef = "ref";
constexpr int64_t kExactF32 = int64_t(1) << 24;

bool quantized(DType t) { return t == DType::U8 || t == DType::I8; }

dnnl::memory::data_type dnnlType(DType t) {
  switch (t) {
    case DType::U8: return dnnl::memory::data_type::u8;
    case DType::I8: return dnnl::memory::data_type::s8;
    default: return dnnl::memory::data_type::s32;
  }
}

/// Element k of a u8/i8/i32 tensor.
int32_t intAt(const Tensor& t, int64_t k) {
  switch (t.dtype()) {
    case DType::U8: return t.data<uint8_t>()[k];
    case DType::I8: return t.data<int8_t>()[k];
    case DType::I32: return t.data<int32_t>()[k];
    default: return 0;
  }
}

/// Operand positions of the four ops (npos: the op has none).
constexpr size_t kNone = size_t(-1);
struct Operands {
  bool conv = false, qlinear = false;
  bool dynamic = false;  // DynamicQuantizeMatMul: x f32, quantized per run; y f32
  size_t x = 0, xScale = kNone, xZp = kNone, w = 1, wScale = kNone, wZp = kNone;
  size_t yScale = kNone, yZp = kNone, bias = kNone;
};

Operands operandsOf(const std::string& op) {
  Operands o;
  o.conv = op == "QLinearConv" || op == "ConvInteger";
  o.qlinear = op == "QLinearConv" || op == "QLinearMatMul" || op == "QLinearMatMulBias";
  o.dynamic = op == "DynamicQuantizeMatMul";
  if (o.qlinear) {
    o.xScale = 1, o.xZp = 2, o.w = 3, o.wScale = 4, o.wZp = 5, o.yScale = 6, o.yZp = 7;
    if (op != "QLinearMatMul") o.bias = 8;
  } else if (o.dynamic) {
    o.wScale = 2, o.wZp = 3, o.bias = 4;
  } else {
    o.xZp = 2, o.wZp = 3;
  }
  return o;
}

bool present(const KernelContext& ctx, size_t i) {
  return i != kNone && i < ctx.inputTypes.size() && ctx.inputTypes[i].present();
}
const Tensor* constAt(const KernelContext& ctx, size_t i) {
  return i != kNone && i < ctx.constInputs.size() ? ctx.constInputs[i] : nullptr;
}
int64_t numelOf(const KernelContext& ctx, size_t i) {
  int64_t n = 1;
  for (int64_t d : ctx.inputTypes[i].shape) n *= d;
  return n;
}

/// True when oneDNN's int8 products run on VNNI (vpdpbusd: exact s32 accumulation) here.
bool hostHasVnni() {
  cpuEngine();  // applies TANDEM_MAX_CPU_ISA first
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx: return true;
    default: return false;
  }
}

/// How the kernel forms the integer products. kInt8: oneDNN's u8/s8 x s8 -> s32 primitives
/// (exact on VNNI; see the header for the non-VNNI limits). kF32: (x - x_zero_point) and
/// (W - w_zero_point) as f32 through oneDNN's f32 primitives, exact because every product and
/// every partial sum is an integer of magnitude <= 2^24 (checked at load from W, |x - zp| <=
/// 255); where a column's sum could pass 2^24 the weights are split W' = 16 * hi + lo and both
/// halves run as one product of twice the output channels. Any x86-64 host, any zero points
/// (also a run-time x zero point).
/// kF32Avx2: kF32's products through Tandem's packed AVX2 GEMM (runtime/cpu/avx2/Sgemm.h;
/// matrix products whose B is one matrix, AVX2 + FMA hosts), oneDNN's gemm:jit being half as
/// fast on AVX2 (measured at [128, 256] x [256, 1024]: 0.53 vs 1.04 ms, 1 thread). Where a
/// column's sum could pass 2^24, B's rows are cut into chunks that stay within it, each an
/// exact product, summed in s32 (no split of W: the work stays that of one product).
enum class Arith { kInt8, kF32, kF32Avx2 };

const char* variantOf(Arith a) {
  return a == Arith::kInt8 ? kVariantDnnl : a == Arith::kF32 ? kVariantF32 : kVariantAvx2F32;
}

/// What a dnnl kernel needs, derived at load time from static shapes and constants.
struct QuantPlan {
  Operands o;
  Arith arith = Arith::kInt8;
  DType xType = DType::U8, yType = DType::I32;
  int32_t xZp = 0;
  bool xZpPerRun = false;   // kF32: a scalar x zero point that is not a constant, read per run
  bool split = false;       // kF32: W' = 16 * hi + lo (hi the first of each channel pair)
  std::vector<int64_t> kChunks;  // kF32Avx2: rows of B [kChunks[i], kChunks[i + 1]), one
                                 // exact product each, summed in s32 (2 entries: one product)
  int64_t channels = 0;     // conv: M (output channels); matmul: N (columns)
  std::vector<int16_t> w;   // W - w_zero_point, in ONNX layout
  ConvGeometry g;           // conv
  dims aDims, bDims, yDims; // matmul, all of one rank >= 2
  int64_t rows = 0;         // matmul: M (rows of one product)
  std::vector<int32_t> colSum;  // dynamic kInt8: sum over k of W - zp, per column
};

/// The split of W' (|W'| <= 255) into 16 * hi + lo, lo in [-8, 7], hi in [-16, 16].
inline int32_t splitHi(int32_t v) { return (v + 8) >> 4; }
inline int32_t splitLo(int32_t v) { return v - 16 * splitHi(v); }

/// Fills `p`, or returns false with the reason the dnnl variant does not apply (the reference
/// kernel then runs the op).
bool planQuant(const KernelContext& ctx, Arith arith, QuantPlan* p, std::string* why) {
  const Operands o = operandsOf(ctx.opType);
  p->o = o;
  p->arith = arith;
  const bool f32 = arith != Arith::kInt8;
  const size_t need = o.qlinear ? 8 : o.dynamic ? 3 : 2;
  if (ctx.inputTypes.size() < need || ctx.outputTypes.empty()) {
    *why = "expects " + std::to_string(need) + " inputs";
    return false;
  }
  if (hasEmptyTensor(ctx)) {
    *why = "zero-size tensor";
    return false;
  }
  p->xType = ctx.inputTypes[o.x].dtype;
  const DType wType = ctx.inputTypes[o.w].dtype;
  p->yType = ctx.outputTypes[0].dtype;
  if (o.dynamic) {  // A f32, quantized to u8 per run; Y f32
    if (p->xType != DType::F32 || p->yType != DType::F32 || !quantized(wType)) {
      *why = "A and Y must be f32, B u8 or i8";
      return false;
    }
    p->xType = DType::U8;
  } else if (!quantized(p->xType) || !quantized(wType)) {
    *why = "x and w must be u8 or i8";
    return false;
  } else if (o.qlinear ? (!quantized(p->yType) || ctx.inputTypes[o.yZp].dtype != p->yType)
                       : p->yType != DType::I32) {
    *why = "y must be i32 (Integer ops) or u8/i8 with y_zero_point's dtype (QLinear ops)";
    return false;
  }
  const Shape& xs = ctx.inputTypes[o.x].shape;
  const Shape& ws = ctx.inputTypes[o.w].shape;
  const Shape& ys = ctx.outputTypes[0].shape;
  // Geometry.
  if (o.conv) {
    KernelContext sub;
    sub.opType = ctx.opType;
    sub.attrs = ctx.attrs;
    sub.inputTypes = {ctx.inputTypes[o.x], ctx.inputTypes[o.w]};
    sub.outputTypes = {ctx.outputTypes[0]};
    sub.constInputs = {nullptr, nullptr};
    if (!forwardConvGeometry(sub, &p->g, why)) return false;
    p->channels = ws[0];
  } else {
    if (xs.size() < 2 || ws.size() < 2 || ys.size() != std::max(xs.size(), ws.size())) {
      *why = "a and b must have rank >= 2 (vectors stay with the reference)";
      return false;
    }
    const size_t r = ys.size();
    p->aDims = dims(r, 1);
    p->bDims = dims(r, 1);
    std::copy(xs.begin(), xs.end(), p->aDims.end() - xs.size());
    std::copy(ws.begin(), ws.end(), p->bDims.end() - ws.size());
    p->yDims = dims(ys.begin(), ys.end());
    p->rows = p->aDims[r - 2];
    p->channels = p->bDims[r - 1];
    if (p->aDims[r - 1] != p->bDims[r - 2] || p->yDims[r - 2] != p->rows ||
        p->yDims[r - 1] != p->channels) {
      *why = "inner dimensions or output shape disagree";
      return false;
    }
    for (size_t i = 0; i + 2 < r; ++i) {
      const int64_t a = p->aDims[i], b = p->bDims[i], y = p->yDims[i];
      if (y != std::max(a, b) || (a != b && a != 1 && b != 1)) {
        *why = "batch dimensions do not broadcast to the output";
        return false;
      }
    }
  }
  if (arith == Arith::kF32Avx2) {
    if (o.conv || !avx2::available()) {
      *why = o.conv ? "a convolution (the packed GEMM takes matrix products)"
                    : "this CPU has no AVX2 + FMA (or TANDEM_MAX_CPU_ISA caps it)";
      return false;
    }
    for (size_t i = 0; i + 2 < p->bDims.size(); ++i)
      if (p->bDims[i] != 1) {
        *why = "B is batched (the packed GEMM takes one B matrix)";
        return false;
      }
  }
  // Scales, zero points and bias: static element counts (values are read per run except the
  // zero points oneDNN and the prepacking need).
  auto countIs = [&](size_t i, int64_t n1, int64_t n2, const char* what) {
    if (!present(ctx, i)) return true;
    const int64_t n = numelOf(ctx, i);
    if (n == n1 || n == n2) return true;
    *why = std::string(what) + " has " + std::to_string(n) + " elements";
    return false;
  };
  if (o.qlinear) {
    if (!countIs(o.xScale, 1, o.conv ? 1 : p->rows, "x_scale") ||
        !countIs(o.wScale, 1, p->channels, "w_scale") || !countIs(o.yScale, 1, 1, "y_scale") ||
        !countIs(o.yZp, 1, 1, "y_zero_point"))
      return false;
    for (size_t i : {o.xScale, o.wScale, o.yScale})
      if (ctx.inputTypes[i].dtype != DType::F32) {
        *why = "scales must be f32";
        return false;
      }
  }
  if (o.dynamic && (!countIs(o.wScale, 1, p->channels, "b_scale") ||
                    ctx.inputTypes[o.wScale].dtype != DType::F32)) {
    if (why->empty()) *why = "b_scale must be f32";
    return false;
  }
  const DType biasType = o.dynamic ? DType::F32 : DType::I32;
  if (present(ctx, o.bias) &&
      (ctx.inputTypes[o.bias].dtype != biasType || numelOf(ctx, o.bias) != p->channels)) {
    *why = std::string("the bias must be ") + dtypeName(biasType) +
           " with one value per output channel";
    return false;
  }
  if (present(ctx, o.xZp)) {
    const Tensor* z = constAt(ctx, o.xZp);
    if (z && z->numel() == 1 && z->dtype() == p->xType) {
      p->xZp = intAt(*z, 0);
    } else if (f32 && !z && numelOf(ctx, o.xZp) == 1 && ctx.inputTypes[o.xZp].dtype == p->xType) {
      p->xZpPerRun = true;
    } else {
      *why = f32 ? "x_zero_point must be a scalar of x's dtype"
                 : "x_zero_point must be a constant scalar of x's dtype (oneDNN takes one "
                   "common source zero point, fixed at creation)";
      return false;
    }
  }
  // Weights: constant, shifted by their zero point once.
  const Tensor* W = constAt(ctx, o.w);
  if (!W) {
    *why = "w must be a constant (prepacked once, shifted by its zero point)";
    return false;
  }
  const Tensor* wz = present(ctx, o.wZp) ? constAt(ctx, o.wZp) : nullptr;
  if (present(ctx, o.wZp) && (!wz || (wz->numel() != 1 && wz->numel() != p->channels))) {
    *why = "w_zero_point must be a constant scalar or one per output channel";
    return false;
  }
  const int64_t total = W->numel();
  const int64_t inner = o.conv ? total / p->channels : p->channels;  // conv: per m; mm: column
  p->w.resize(total);
  int32_t maxAbs = 0;
  for (int64_t k = 0; k < total; ++k) {
    const int64_t ch = o.conv ? k / inner : k % inner;
    const int32_t v = intAt(*W, k) - (wz ? intAt(*wz, wz->numel() == 1 ? 0 : ch) : 0);
    if (!f32 && (v < -128 || v > 127)) {
      *why = "W - w_zero_point leaves the s8 range (" + std::to_string(v) + ")";
      return false;
    }
    p->w[k] = int16_t(v);
    maxAbs = std::max(maxAbs, std::abs(v));
  }
  // The largest sum of |part(W')| one accumulator reads: an output channel's weights (conv),
  // a column of one matrix (matmul, batched weights matrix by matrix).
  auto bound = [&](int32_t (*part)(int32_t)) {
    const int64_t K = o.conv ? 0 : p->bDims[p->bDims.size() - 2];
    std::vector<int64_t> sum(o.conv ? p->channels : total / K, 0);
    for (int64_t k = 0; k < total; ++k)
      sum[o.conv ? k / inner : (k / (K * inner)) * inner + k % inner] += std::abs(part(p->w[k]));
    return *std::max_element(sum.begin(), sum.end());
  };
  const int64_t whole = bound([](int32_t v) { return v; });
  if (o.dynamic && !f32) {  // the x zero point's share, subtracted per run: zp * column sum
    p->colSum.assign(p->channels, 0);
    for (int64_t k = 0; k < total; ++k) p->colSum[k % p->channels] += p->w[k];
  }
  if (o.dynamic && ctx.inputTypes[o.w].shape.size() != 2) {
    *why = "B must be a matrix";
    return false;
  }
  if (arith == Arith::kF32Avx2) {  // B's rows in chunks whose column sums stay within bounds
    const int64_t K = p->bDims[p->bDims.size() - 2], N = p->channels;
    std::vector<int64_t> col(N, 0);
    p->kChunks = {0};
    for (int64_t k = 0; k < K; ++k) {
      bool fits = true;
      for (int64_t n = 0; n < N && fits; ++n)
        fits = 255 * (col[n] + std::abs(int32_t(p->w[k * N + n]))) <= kExactF32;
      if (!fits) {
        p->kChunks.push_back(k);
        std::fill(col.begin(), col.end(), 0);
      }
      for (int64_t n = 0; n < N; ++n) col[n] += std::abs(int32_t(p->w[k * N + n]));
    }
    p->kChunks.push_back(K);
    return true;
  }
  if (f32) {  // |x - zp| <= 255: every partial sum of an accumulator is at most 255 * bound
    if (255 * whole <= kExactF32) return true;
    p->split = true;
    if (255 * std::max(bound(splitHi), bound(splitLo)) <= kExactF32) return true;
    *why = "accumulators may exceed 2^24 even with W split in two (255 x max sum |W - zp| = " +
           std::to_string(255 * whole) + ")";
    return false;
  }
  if (!o.qlinear && !o.dynamic && 255 * whole > kExactF32) {
    *why = "accumulators may exceed 2^24 (255 x max sum |W - zp| = " + std::to_string(255 * whole) +
           "), where oneDNN's f32 post-processing would round them";
    return false;
  }
  if (!hostHasVnni() && (p->xType != DType::U8 || maxAbs > 64)) {
    *why = "without VNNI oneDNN's u8 x s8 products saturate in s16 and s8 sources are halved: "
           "only u8 x with |W - zp| <= 64 is exact here";
    return false;
  }
  return true;
}

/// round half to even of |r| <= 2^51 in the default rounding mode, without a libm call: adding
/// 1.5 * 2^52 leaves no fraction bits, so the addition itself rounds (ties to the even
/// integer, the constant being even). Equal to std::nearbyint there (the reference's).
inline double roundHalfEven(double r) {
  constexpr double kMagic = 6755399441055744.0;
  return (r + kMagic) - kMagic;
}

/// The reference's storeRequantized: saturate(round(r) + zp), branch-free (selects and min/max,
/// so a loop of them vectorises and unpredictable saturation costs no mispredicted branches).
/// r is clamped to +-2^30 first (outside it saturates either way); a NaN r (from a NaN or
/// infinite multiplier) gives the zero point, saturated, as the reference's saturateRound does.
template <typename T>
inline T requantize(double r, double zp) {
  constexpr double lo = std::is_same<T, uint8_t>::value ? 0.0 : -128.0;
  constexpr double hi = std::is_same<T, uint8_t>::value ? 255.0 : 127.0;
  r = std::isnan(r) ? 0.0 : r;
  r = std::min(1073741824.0, std::max(-1073741824.0, r));
  const double q = roundHalfEven(r) + zp;
  return T(int32_t(std::min(hi, std::max(lo, q))));
}

/// y[j] = requantize(double(acc[j]) * mu[j], zp) for j < n (mu[0] for all j unless kPerElement),
/// 8 at a time with SSE2 (every x86-64 CPU; two doubles a register): the same double operations
/// in the same order, so the same bytes; the packs saturate exactly as the clamp to [lo, hi]
/// does, the values being integral.
template <typename T, bool kPerElement>
void requantizeRun(const int32_t* acc, int64_t n, const double* mu, double zp, T* y) {
  int64_t j = 0;
#if defined(__SSE2__)
  const __m128d m1 = _mm_set1_pd(mu[0]), z = _mm_set1_pd(zp), magic = _mm_set1_pd(6755399441055744.0);
  const __m128d lo30 = _mm_set1_pd(-1073741824.0), hi30 = _mm_set1_pd(1073741824.0);
  const __m128d lo = _mm_set1_pd(-32768.0), hi = _mm_set1_pd(32767.0);  // packs saturate the rest
  for (; j + 8 <= n; j += 8) {
    __m128i q[4];
    for (int h = 0; h < 4; ++h) {
      const __m128d m = kPerElement ? _mm_loadu_pd(mu + j + 2 * h) : m1;
      __m128d r = _mm_mul_pd(_mm_cvtepi32_pd(_mm_loadl_epi64(
                                 reinterpret_cast<const __m128i*>(acc + j + 2 * h))), m);
      r = _mm_and_pd(r, _mm_cmpord_pd(r, r));  // NaN -> 0
      r = _mm_min_pd(_mm_max_pd(r, lo30), hi30);
      r = _mm_add_pd(_mm_sub_pd(_mm_add_pd(r, magic), magic), z);
      q[h] = _mm_cvttpd_epi32(_mm_min_pd(_mm_max_pd(r, lo), hi));  // two int32, low half
    }
    const __m128i q01 = _mm_unpacklo_epi64(q[0], q[1]), q23 = _mm_unpacklo_epi64(q[2], q[3]);
    const __m128i w = _mm_packs_epi32(q01, q23);
    const __m128i b = std::is_same_v<T, uint8_t> ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + j), b);
  }
#endif
  for (; j < n; ++j) y[j] = requantize<T>(double(acc[j]) * mu[kPerElement ? j : 0], zp);
}

/// The reference's multiplier s_a * s_b / s_y in f32 (runtime/cpu/ref/QuantizedMath.cpp).
double multiplier(double sa, double sb, double sy) {
  return double(float(float(sa) * float(sb)) / float(sy));
}

/// Values of a small operand (scale, zero point, bias) as doubles; empty when absent.
void readValues(const Tensor* t, std::vector<double>* v) {
  v->clear();
  if (!t) return;
  for (int64_t i = 0; i < t->numel(); ++i)
    v->push_back(t->dtype() == DType::F32 ? double(t->data<float>()[i]) : double(intAt(*t, i)));
}
double at(const std::vector<double>& v, int64_t i) {
  return v.empty() ? 0.0 : v.size() == 1 ? v[0] : v[i];
}

class QuantKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx, QuantPlan plan) {
    p_ = std::move(plan);
    const Operands& o = p_.o;
    const bool f32 = p_.arith != Arith::kInt8;
    packedGemm_ = p_.arith == Arith::kF32Avx2;
    op_ = ctx.opType;
    dnnl::engine& eng = cpuEngine();
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dt xdt = f32 ? dt::f32 : dnnlType(p_.xType), wdt = f32 ? dt::f32 : dt::s8;
    const dt accdt = f32 ? dt::f32 : dt::s32;
    dnnl::primitive_attr attr = baseAttr();
    if (!f32 && p_.xZp != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {p_.xZp});
    dnnl::memory::desc chosenDst, accMd, srcMd, productPlain;
    if (o.conv) {
      const ConvGeometry& g = p_.g;
      static const tag channelsLast[] = {tag::nwc, tag::nhwc, tag::ndhwc};
      const tag cl = channelsLast[g.spatial - 1];
      dims wDims = g.weightsDims, dDims = g.dstDims;  // split: hi and lo channels per group
      if (p_.split) (g.group > 1 ? wDims[1] : wDims[0]) *= 2, dDims[1] *= 2;
      groupChannels_ = p_.channels / g.group;
      srcMd = dnnl::memory::desc(g.srcDims, xdt, plainStrides(g.srcDims));
      const dnnl::memory::desc dstMd(dDims, accdt, cl);
      auto convDesc = [&](const dnnl::memory::desc& dst) {
        return dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
            dnnl::memory::desc(g.srcDims, xdt, tag::any), dnnl::memory::desc(wDims, wdt, tag::any),
            dnnl::memory::desc(), dst, g.strides, g.dilations, g.padL, g.padR);
      };
      dnnl::convolution_forward::primitive_desc pd(convDesc(dstMd), attr, eng);
      // f32 grouped convolutions have no channels-last kernel in oneDNN 2.6: their own layout,
      // reordered to channels last after the product.
      if (f32 && isReferenceImpl(pd))
        pd = dnnl::convolution_forward::primitive_desc(
            convDesc(dnnl::memory::desc(dDims, accdt, tag::any)), attr, eng);
      productPlain = dstMd;
      TANDEM_RETURN_IF_ERROR(adopt(pd, srcMd, pd.src_desc(), wDims, wdt, pd.weights_desc()));
      prim_ = dnnl::convolution_forward(pd);
      chosenDst = pd.dst_desc();
      accMd = dnnl::memory::desc(g.dstDims, dt::s32, cl);
      // The caller's Y of ConvInteger: s32 NC...; QLinear* requantize from the nhwc result.
      if (!o.qlinear)
        dst_.init(dnnl::memory::desc(g.dstDims, dt::s32, plainStrides(g.dstDims)), accMd,
                  /*isInput=*/false, &ws_);
      outer_ = g.dstDims[0];
      spatial_ = 1;
      for (size_t i = 2; i < g.dstDims.size(); ++i) spatial_ *= g.dstDims[i];
    } else {
      dims bDims = p_.bDims, yDims = p_.yDims;
      if (p_.split) bDims.back() *= 2, yDims.back() *= 2;
      groupChannels_ = p_.channels;
      srcMd = dnnl::memory::desc(p_.aDims, xdt, plainStrides(p_.aDims));
      const dnnl::memory::desc dstMd(yDims, accdt, plainStrides(yDims));
      if (packedGemm_) {  // rows of A (all batches) times the one B, in chunks of its rows
        const int64_t cols = bDims.back();
        const std::vector<float> wf = weightsF32();
        packed_.resize(p_.kChunks.size() - 1);
        for (size_t c = 0; c + 1 < p_.kChunks.size(); ++c)
          if (!packed_[c].pack(wf.data() + p_.kChunks[c] * cols, p_.kChunks[c + 1] - p_.kChunks[c],
                               cols, cols, 1))
            return Status::error(op_ + ": variant avx2-f32 cannot pack B");
        impl_ = "avx2:sgemm_packed";
        if (packed_.size() > 1) impl_ += " x" + std::to_string(packed_.size()) + " K-chunks";
      } else {
        dnnl::matmul::desc d(srcMd, dnnl::memory::desc(bDims, wdt, tag::any), dstMd);
        dnnl::matmul::primitive_desc pd(d, attr, eng);
        TANDEM_RETURN_IF_ERROR(adopt(pd, srcMd, srcMd, bDims, wdt, pd.weights_desc()));
        prim_ = dnnl::matmul(pd);
      }
      chosenDst = productPlain = dstMd;
      accMd = dnnl::memory::desc(p_.yDims, dt::s32, plainStrides(p_.yDims));
      if (!o.qlinear && !o.dynamic) dst_.init(accMd, accMd, false, &ws_);
      outer_ = 1;
      for (size_t i = 0; i + 1 < p_.yDims.size(); ++i) outer_ *= p_.yDims[i];
    }
    const bool ownAcc = o.qlinear || o.dynamic;  // else Y (through dst_) is the accumulator
    if (ownAcc) accOffset_ = ws_.add(accMd.get_size());
    if (f32) {  // x as f32 in; f32 products out, turned into the s32 accumulators
      xCount_ = srcMd.get_size() / sizeof(float);
      xOffset_ = ws_.add(srcMd.get_size());
      productOffset_ = ws_.add(productPlain.get_size());
      if (!packedGemm_) product_.init(productPlain, chosenDst, /*isInput=*/false, &ws_);
    } else if (ownAcc) {
      acc_ = dnnl::memory(chosenDst, eng, DNNL_MEMORY_NONE);
    }
    if (o.dynamic) {
      xCount_ = 1;
      for (int64_t d : ctx.inputTypes[o.x].shape) xCount_ *= d;
      quantOffset_ = ws_.add(size_t(xCount_));  // A quantized, u8
    }
    std::vector<int16_t>().swap(p_.w);  // prepacked: the shifted copy is not read again
    if (!packedGemm_) {
      args_.add(DNNL_ARG_SRC, src_.inner());
      args_.add(DNNL_ARG_WEIGHTS, weights_);
      args_.add(DNNL_ARG_DST, f32 ? product_.inner() : ownAcc ? acc_ : dst_.inner());
    }
    // Load-time copies of the small operands (a tensor given to run() wins).
    for (size_t i : {o.xScale, o.wScale, o.yScale, o.yZp, o.bias})
      if (const Tensor* t = constAt(ctx, i)) saved_[i] = Tensor::copyOf(*t);
    impl_ += f32 ? (p_.split ? " f32-exact (W split)" : " f32-exact") : "";
    impl_ += o.qlinear ? " +requantize" : o.dynamic ? " +dynamic-quantize" : "";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun(op_.c_str(), [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      const bool f32 = p_.arith != Arith::kInt8, ownAcc = p_.o.qlinear || p_.o.dynamic;
      scratch_.bindBuffers(ws);
      DynamicQuantization dq;
      const void* x = in[p_.o.x]->raw();
      DType xType = p_.xType;
      int32_t xZp = p_.xZp;
      if (p_.o.dynamic) {  // DynamicQuantizeLinear of A into the workspace, oneDNN's source
        const float* a = in[p_.o.x]->data<float>();
        uint8_t* q = reinterpret_cast<uint8_t*>(ws + quantOffset_);
        dq = dynamicQuantization(a, xCount_);
        dynamicQuantize(a, xCount_, dq, q);
        x = q;
        xZp = dq.zeroPoint;
      } else if (p_.xZpPerRun) {
        xZp = intAt(*in[p_.o.xZp], 0);
      }
      if (f32) {
        float* xf = reinterpret_cast<float*>(ws + xOffset_);
        widen(x, xType, xCount_, xZp, xf);
        x = xf;
      }
      if (!ownAcc) dst_.bindBuffers(out[0]->raw(), ws);
      int32_t* acc = static_cast<int32_t*>(ownAcc ? ws + accOffset_ : dst_.inner().get_data_handle());
      float* product = reinterpret_cast<float*>(ws + productOffset_);
      if (packedGemm_) {
        const float* a = static_cast<const float*>(x);
        const int64_t K = p_.kChunks.back();
        for (size_t c = 0; c < packed_.size(); ++c) {
          avx2::sgemmParallel(outer_, a + p_.kChunks[c], K, packed_[c], product, p_.channels,
                              avx2::GemmEpilogue{}, omp_get_max_threads());
          if (c + 1 < packed_.size()) toIntegers(product, acc, /*add=*/c > 0);
        }
        if (packed_.size() > 1) {  // the last chunk below, added
          toIntegers(product, acc, /*add=*/true);
          product = nullptr;
        }
      } else {
        src_.bindBuffers(x, ws);
        src_.toInner();
        if (f32) product_.bindBuffers(product, ws);
        else if (ownAcc) acc_.set_data_handle(acc);
        args_.execute(prim_);
        if (f32) product_.toUser();
      }
      if (f32 && product) toIntegers(product, acc, /*add=*/false);
      if (p_.o.dynamic) return scaleAll(in, acc, f32 ? 0 : dq.zeroPoint, dq.scale, out[0]);
      if (!p_.o.qlinear) {
        dst_.toUser();
        return Status::ok();
      }
      return requantizeAll(in, acc, out[0]);
    });
  }

 private:
  static dims plainStrides(const dims& d) {
    dims s(d.size());
    int64_t st = 1;
    for (int i = (int)d.size() - 1; i >= 0; --i) {
      s[i] = st;
      st *= d[i];
    }
    return s;
  }

  /// Records pd's implementation, binds the source (`plain` as the caller gives it after
  /// widening, `chosen` the primitive's) and prepacks W' (f32: the hi/lo halves where split).
  template <typename PD>
  Status adopt(const PD& pd, const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen,
               const dims& wDims, dnnl::memory::data_type wdt, const dnnl::memory::desc& packed) {
    if (isReferenceImpl(pd))
      return Status::error(op_ + ": variant " + variantName() + " does not apply (oneDNN has only " +
                           pd.impl_info_str() + " here)");
    setImpl(pd);
    src_.init(plain, chosen, /*isInput=*/true, &ws_);
    scratch_.init(pd, &ws_, &args_);
    dnnl::engine& eng = cpuEngine();
    const dnnl::memory::desc from(wDims, wdt, plainStrides(wDims));
    std::vector<int8_t> w8;
    std::vector<float> wf;
    void* data;
    if (p_.arith == Arith::kInt8) {
      w8.assign(p_.w.begin(), p_.w.end());
      data = w8.data();
    } else {
      wf = weightsF32();
      data = wf.data();
    }
    dnnl::memory src(from, eng, data);
    weights_ = dnnl::memory(packed, eng);
    dnnl::reorder(src, weights_).execute(cpuStream(), src, weights_);
    cpuStream().wait();
    return Status::ok();
  }

  /// W' as f32 in the layout of the product's weights: ONNX's, or where split the hi/lo
  /// halves, channel c's hi at c + group * groupChannels_ (its group's first half), lo after.
  std::vector<float> weightsF32() const {
    if (!p_.split) return std::vector<float>(p_.w.begin(), p_.w.end());
    const int64_t C = p_.channels, Cg = groupChannels_, total = int64_t(p_.w.size());
    const int64_t inner = p_.o.conv ? total / C : C;
    std::vector<float> wf(2 * total, 0.f);
    for (int64_t k = 0; k < total; ++k) {
      const int32_t v = p_.w[k];
      if (p_.o.conv) {  // [M, ...] -> [2M, ...]
        const int64_t m = k / inner, hi = m + (m / Cg) * Cg;
        wf[hi * inner + k % inner] = float(splitHi(v));
        wf[(hi + Cg) * inner + k % inner] = float(splitLo(v));
      } else {  // [..., K, N] -> [..., K, 2N]
        const int64_t row = k / C, n = k % C;
        wf[row * 2 * C + n] = float(splitHi(v));
        wf[row * 2 * C + C + n] = float(splitLo(v));
      }
    }
    return wf;
  }

  std::string variantName() const {
    return variantOf(p_.arith);
  }

  /// xf[i] = x[i] - zp as f32 (x u8 or i8: exact).
  static void widen(const void* x, DType t, int64_t n, int32_t zp, float* xf) {
    if (t == DType::U8) {
      const uint8_t* u = static_cast<const uint8_t*>(x);
      for (int64_t i = 0; i < n; ++i) xf[i] = float(int32_t(u[i]) - zp);
    } else {
      const int8_t* s = static_cast<const int8_t*>(x);
      for (int64_t i = 0; i < n; ++i) xf[i] = float(int32_t(s[i]) - zp);
    }
  }

  /// The f32 products (integral, |v| <= 2^24) as the s32 accumulators, rows of `channels`
  /// (conv: channels last), or added to them (`add`: a later chunk of K); where split,
  /// acc = 16 * hi + lo from the doubled channels.
  void toIntegers(const float* f, int32_t* acc, bool add) const {
    const int64_t C = p_.channels, rows = p_.o.conv ? outer_ * spatial_ : outer_;
    if (!p_.split) {
      const int64_t n = rows * C;
      if (add) {
#pragma omp parallel for if (n > 262144)
        for (int64_t i = 0; i < n; ++i) acc[i] += int32_t(f[i]);
      } else {
#pragma omp parallel for if (n > 262144)
        for (int64_t i = 0; i < n; ++i) acc[i] = int32_t(f[i]);
      }
      return;
    }
    const int64_t Cg = groupChannels_;
#pragma omp parallel for if (rows * C > 131072)
    for (int64_t r = 0; r < rows; ++r) {
      const float* fr = f + r * 2 * C;
      int32_t* a = acc + r * C;
      for (int64_t g0 = 0; g0 < C; g0 += Cg) {
        const float* hi = fr + 2 * g0;
        for (int64_t j = 0; j < Cg; ++j) a[g0 + j] = 16 * int32_t(hi[j]) + int32_t(hi[Cg + j]);
      }
    }
  }

  const Tensor* operand(const std::vector<const Tensor*>& in, size_t i) const {
    if (i == kNone) return nullptr;
    if (i < in.size() && in[i]) return in[i];
    auto s = saved_.find(i);
    return s == saved_.end() ? nullptr : &s->second;
  }

  /// DynamicQuantizeMatMul's Y = float(acc - zp * colSum[n]) * float(a_scale * b_scale[n])
  /// (+ bias[n]): the unfused graph's Cast and Muls (and bias Add), in f32 as they are.
  /// zp: the x zero point still in acc (kInt8; kF32 subtracted it from x).
  Status scaleAll(const std::vector<const Tensor*>& in, const int32_t* acc, int32_t zp,
                  float aScale, Tensor* y) {
    std::vector<double> ws, bias;
    readValues(operand(in, p_.o.wScale), &ws);
    readValues(operand(in, p_.o.bias), &bias);
    const int64_t C = p_.channels, rows = outer_;
    std::vector<float> mult(C), b(C, 0.f);
    std::vector<uint32_t> shift(C);
    for (int64_t n = 0; n < C; ++n) {
      mult[n] = aScale * float(at(ws, n));
      if (!bias.empty()) b[n] = float(bias[n]);
      shift[n] = zp ? uint32_t(zp * p_.colSum[n]) : 0u;  // i32, wrapping
    }
    float* Y = y->data<float>();
#pragma omp parallel for if (rows * C > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t* a = acc + r * C;
      float* yr = Y + r * C;
      for (int64_t n = 0; n < C; ++n) yr[n] = float(int32_t(uint32_t(a[n]) - shift[n])) * mult[n];
      if (!bias.empty())
        for (int64_t n = 0; n < C; ++n) yr[n] += b[n];
    }
    return Status::ok();
  }

  Status requantizeAll(const std::vector<const Tensor*>& in, const int32_t* acc, Tensor* y) {
    std::vector<double> xs, ws, ys, yzp, bias;
    readValues(operand(in, p_.o.xScale), &xs);
    readValues(operand(in, p_.o.wScale), &ws);
    readValues(operand(in, p_.o.yScale), &ys);
    readValues(operand(in, p_.o.yZp), &yzp);
    readValues(operand(in, p_.o.bias), &bias);
    const double zp = at(yzp, 0);
    if (y->dtype() == DType::U8) store<uint8_t>(acc, xs, ws, ys, zp, bias, y->data<uint8_t>());
    else store<int8_t>(acc, xs, ws, ys, zp, bias, y->data<int8_t>());
    return Status::ok();
  }

  template <typename T>
  void store(const int32_t* acc, const std::vector<double>& xs, const std::vector<double>& ws,
             const std::vector<double>& ys, double zp, const std::vector<double>& bias, T* y) {
    const int64_t C = p_.channels;
    if (p_.o.conv) {
      // acc: [N, spatial, M] (channels last); y: [N, M, spatial].
      std::vector<double> mult(C);
      std::vector<int32_t> b(C, 0);
      for (int64_t m = 0; m < C; ++m) {
        mult[m] = multiplier(at(xs, 0), at(ws, m), at(ys, 0));
        if (!bias.empty()) b[m] = int32_t(bias[m]);
      }
      // In tiles of kTile positions: one tile's accumulators (kTile x C) stay in cache while
      // each channel gathers its column of them into `col`, which then requantizes in one
      // contiguous, vectorisable loop. (Channel by channel over all positions re-read the whole
      // accumulator C times, with a branch per clamp: 6.5 ms of a 0.4 ms convolution at
      // [1, 64, 112, 112].)
      constexpr int64_t kTile = 64;
      const int64_t P = spatial_, N = outer_, tiles = (P + kTile - 1) / kTile;
#pragma omp parallel for collapse(2) if (N * C * P > 65536)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t q0 = t * kTile, len = std::min(P - q0, kTile);
          const int32_t* a = acc + (n * P + q0) * C;
          alignas(64) int32_t col[kTile];
          for (int64_t m = 0; m < C; ++m) {
            T* dst = y + (n * C + m) * P + q0;
            const double mu = mult[m];
            const uint32_t bm = uint32_t(b[m]);
            for (int64_t j = 0; j < len; ++j) col[j] = int32_t(uint32_t(a[j * C + m]) + bm);
            requantizeRun<T, false>(col, len, &mu, zp, dst);
          }
        }
      return;
    }
    // acc and y: [batch..., M, N]; the multiplier by row (x_scale per row) and column.
    const int64_t rows = outer_, M = p_.rows;
    const int64_t mRows = xs.size() > 1 ? M : 1;
    std::vector<double> mult(mRows * C);
    for (int64_t m = 0; m < mRows; ++m)
      for (int64_t n = 0; n < C; ++n) mult[m * C + n] = multiplier(at(xs, m), at(ws, n), at(ys, 0));
    std::vector<uint32_t> b(C, 0);  // QLinearMatMulBias's B, added in i32 (wrapping)
    for (int64_t n = 0; n < C && !bias.empty(); ++n) b[n] = uint32_t(int32_t(bias[n]));
    // Row by row: the biased accumulators into `row`, then one vectorised requantization.
    constexpr int64_t kChunk = 256;
#pragma omp parallel for if (rows * C > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      const double* mu = mult.data() + (mRows > 1 ? (r % M) * C : 0);
      const int32_t* a = acc + r * C;
      alignas(64) int32_t row[kChunk];
      for (int64_t n0 = 0; n0 < C; n0 += kChunk) {
        const int64_t len = std::min(C - n0, kChunk);
        for (int64_t j = 0; j < len; ++j) row[j] = int32_t(uint32_t(a[n0 + j]) + b[n0 + j]);
        requantizeRun<T, true>(row, len, mu + n0, zp, y + r * C + n0);
      }
    }
  }

  QuantPlan p_;
  std::string op_;
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  Operand src_, dst_;
  Operand product_;                // kF32: the f32 products, reordered to channels last
  bool packedGemm_ = false;        // kF32Avx2: packed_ instead of prim_
  std::vector<avx2::PackedB> packed_;  // one per chunk of B's rows (QuantPlan::kChunks)
  dnnl::memory weights_, acc_;     // acc_: kInt8's s32 result
  size_t accOffset_ = 0, quantOffset_ = 0, xOffset_ = 0, productOffset_ = 0;
  int64_t xCount_ = 0;         // elements of x (A)
  int64_t groupChannels_ = 0;  // output channels of one group (matmul: all)
  int64_t outer_ = 1, spatial_ = 1;
  ExecArgs args_;
  std::map<size_t, Tensor> saved_;
};

bool applies(const KernelContext& ctx, Arith arith) {
  QuantPlan plan;
  std::string why;
  return planQuant(ctx, arith, &plan, &why);
}

/// Variant "dnnl" builds kInt8, "dnnl-f32" kF32, "avx2-f32" kF32Avx2; none: the first of
/// those that applies, in the order kInt8, kF32Avx2, kF32.
Status createQuant(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  if (ctx.variant == kVariantRef)
    return Status::error(ctx.opType + ": variant ref is the reference kernel's (the next "
                         "registry entry builds it)");
  Arith arith;
  if (ctx.variant == kVariantDnnl) arith = Arith::kInt8;
  else if (ctx.variant == kVariantF32) arith = Arith::kF32;
  else if (ctx.variant == kVariantAvx2F32) arith = Arith::kF32Avx2;
  else if (ctx.variant.empty())
    arith = applies(ctx, Arith::kInt8) ? Arith::kInt8
            : applies(ctx, Arith::kF32Avx2) ? Arith::kF32Avx2 : Arith::kF32;
  else
    return Status::error(ctx.opType + ": unknown variant '" + ctx.variant + "'");
  QuantPlan plan;
  std::string why;
  if (!planQuant(ctx, arith, &plan, &why))
    return Status::error(ctx.opType + ": variant " + variantOf(arith) + " does not apply (" +
                         why + ")");
  return guardDnnl(ctx, [&] {
    auto k = std::make_unique<QuantKernel>();
    TANDEM_RETURN_IF_ERROR(k->init(ctx, std::move(plan)));
    *out = std::move(k);
    return Status::ok();
  });
}

}  // namespace

void registerDnnlQuantizedKernels(KernelRegistry& r) {
  for (const char* op : {"ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul",
                         "QLinearMatMulBias", "DynamicQuantizeMatMul"}) {
    const Operands o = operandsOf(op);
    KernelDef d = makeDef(
        op,
        [](const KernelContext& ctx) {
          return applies(ctx, Arith::kInt8) || applies(ctx, Arith::kF32) ||
                 applies(ctx, Arith::kF32Avx2);
        },
        createQuant);
    const size_t ix = o.x, iw = o.w;
    const bool dynamic = o.dynamic;
    d.accepts = [ix, iw, dynamic](const std::vector<DType>& in) {
      return in.size() > std::max(ix, iw) && (dynamic ? in[ix] == DType::F32 : quantized(in[ix])) &&
             quantized(in[iw]);
    };
    d.dtypesText = dynamic ? "A f32; B u8,i8 (constant)" : "x u8,i8; w u8,i8 (constant)";
    // Where the dnnl def applies, the reference (the next def) runs the op too: all measured.
    d.variants = [](const KernelContext& ctx) {
      std::vector<std::string> v;
      if (applies(ctx, Arith::kInt8)) v.push_back(kVariantDnnl);
      if (applies(ctx, Arith::kF32)) v.push_back(kVariantF32);
      if (applies(ctx, Arith::kF32Avx2)) v.push_back(kVariantAvx2F32);
      v.push_back(kVariantRef);
      return v;
    };
    r.add(std::move(d));
  }
}

}  // namespace dnnlcpu
}  // namespace tandem
