// Grouped direct convolution (runtime/cpu/avx2/GroupedConv.h).
#include "runtime/cpu/avx2/GroupedConv.h"

#include <immintrin.h>

#include <algorithm>

#include "runtime/cpu/avx2/IsaCap.h"
#include "runtime/cpu/avx2/Sgemm.h"

namespace tandem {
namespace avx2 {

namespace {

// Everything a row needs, in floats (strides) and elements (sizes).
struct GcArgs {
  const float* src = nullptr;
  float* dst = nullptr;
  const float* w = nullptr;       // packed, see GroupedConv::w_
  const float* bias = nullptr;    // K floats
  const int64_t* icOff = nullptr; // [G][Cig]
  int64_t N, H, W, OH, OW, G, Cig, Cog, KH, KW, sh, sw, dh, dw, pt, pl;
  int64_t inN, inH, inW;            // source strides of n, h, w
  int64_t outN, outH, outW;         // destination strides of n, h, w
  int64_t outB, outCB;              // destination channel block and its stride (nhwc: K, 0)
  bool accumulate = false, relu = false;
  int threads = 1;
  int64_t groupChunks = 1;          // each output row's groups are cut into this many work items
};

bool avx512Available() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") &&
                         cpuIsaCap() >= CpuIsaCap::Avx512;
  return ok;
}

int64_t blockOf(ChannelLayout l, int64_t channels) {
  return l == ChannelLayout::NChw8c ? 8 : l == ChannelLayout::NChw16c ? 16 : channels;
}

}  // namespace

#define GC_TARGET __attribute__((target("avx512f,avx2,fma")))
namespace isa512 {
using V = __m512;
constexpr int VL = 16;
GC_TARGET static inline V vzero() { return _mm512_setzero_ps(); }
GC_TARGET static inline V vload(const float* p) { return _mm512_loadu_ps(p); }
GC_TARGET static inline void vstore(float* p, V v) { _mm512_storeu_ps(p, v); }
GC_TARGET static inline V vbcast(const float* p) { return _mm512_set1_ps(*p); }
GC_TARGET static inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
GC_TARGET static inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
// Masked with every lane: _mm512_max_ps's undefined pass-through makes GCC 12 warn
// (-Wmaybe-uninitialized).
GC_TARGET static inline V vmax(V a, V b) { return _mm512_mask_max_ps(a, 0xFFFF, a, b); }
#include "runtime/cpu/avx2/GroupedConvBody.inc"
}  // namespace isa512
#undef GC_TARGET

#define GC_TARGET __attribute__((target("avx2,fma")))
namespace isa256 {
using V = __m256;
constexpr int VL = 8;
GC_TARGET static inline V vzero() { return _mm256_setzero_ps(); }
GC_TARGET static inline V vload(const float* p) { return _mm256_loadu_ps(p); }
GC_TARGET static inline void vstore(float* p, V v) { _mm256_storeu_ps(p, v); }
GC_TARGET static inline V vbcast(const float* p) { return _mm256_broadcast_ss(p); }
GC_TARGET static inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
GC_TARGET static inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
GC_TARGET static inline V vmax(V a, V b) { return _mm256_max_ps(a, b); }
#include "runtime/cpu/avx2/GroupedConvBody.inc"
}  // namespace isa256
#undef GC_TARGET

int groupedConvVectorWidth(const GroupedConvShape& s, ChannelLayout layout, std::string* why) {
  if (s.N < 1 || s.C < 1 || s.H < 1 || s.W < 1 || s.K < 1 || s.OH < 1 || s.OW < 1 || s.G < 1 ||
      s.KH < 1 || s.KW < 1 || s.strideH < 1 || s.strideW < 1 || s.dilationH < 1 ||
      s.dilationW < 1 || s.padTop < 0 || s.padLeft < 0 || s.C % s.G || s.K % s.G) {
    *why = "sizes, strides, dilations or pads out of range";
    return 0;
  }
  if (layout != ChannelLayout::Nhwc && (s.C % blockOf(layout, s.C) || s.K % blockOf(layout, s.K))) {
    *why = "channels not a multiple of the layout's block";
    return 0;
  }
  const int64_t cog = s.K / s.G;
  // A vector holds consecutive channels of one block: at most the block wide.
  const int64_t block = blockOf(layout, s.K);
  if (avx512Available() && cog % 16 == 0 && (layout == ChannelLayout::Nhwc || block % 16 == 0))
    return 16;
  if (available() && cog % 8 == 0 && (layout == ChannelLayout::Nhwc || block % 8 == 0)) return 8;
  *why = available() ? "a group's output channels (" + std::to_string(cog) +
                           ") are not a multiple of 8"
                     : "needs AVX2 + FMA";
  return 0;
}

bool GroupedConv::prepare(const GroupedConvShape& s, ChannelLayout layout, const float* weights,
                          const float* bias, std::string* why) {
  vl_ = groupedConvVectorWidth(s, layout, why);
  if (!vl_) return false;
  s_ = s;
  layout_ = layout;
  const int64_t cig = s.C / s.G, cog = s.K / s.G, vecs = cog / vl_, taps = s.KH * s.KW;
  w_.assign((size_t)(s.K * cig * taps), 0.f);
  for (int64_t g = 0; g < s.G; ++g)
    for (int64_t v = 0; v < vecs; ++v)
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t ic = 0; ic < cig; ++ic)
          for (int64_t l = 0; l < vl_; ++l) {
            const int64_t oc = g * cog + v * vl_ + l;
            w_[((((g * vecs + v) * taps + t) * cig + ic) * vl_) + l] =
                weights[(oc * cig + ic) * taps + t];
          }
  bias_.assign((size_t)s.K, 0.f);
  if (bias)
    for (int64_t k = 0; k < s.K; ++k) bias_[k] = bias[k];
  // A source channel's offset from its pixel: nhwc c; blocked (c / B) * H * W * B + c % B.
  const int64_t inB = blockOf(layout, s.C);
  const int64_t inCB = layout == ChannelLayout::Nhwc ? 0 : s.H * s.W * inB;
  icOff_.resize((size_t)s.C);
  for (int64_t c = 0; c < s.C; ++c) icOff_[c] = (c / inB) * inCB + c % inB;
  return true;
}

void GroupedConv::run(const float* src, float* dst, bool accumulate, bool relu,
                      int threads) const {
  const GroupedConvShape& s = s_;
  GcArgs a;
  a.src = src;
  a.dst = dst;
  a.w = w_.data();
  a.bias = bias_.data();
  a.icOff = icOff_.data();
  a.N = s.N;
  a.H = s.H;
  a.W = s.W;
  a.OH = s.OH;
  a.OW = s.OW;
  a.G = s.G;
  a.Cig = s.C / s.G;
  a.Cog = s.K / s.G;
  a.KH = s.KH;
  a.KW = s.KW;
  a.sh = s.strideH;
  a.sw = s.strideW;
  a.dh = s.dilationH;
  a.dw = s.dilationW;
  a.pt = s.padTop;
  a.pl = s.padLeft;
  const bool nhwc = layout_ == ChannelLayout::Nhwc;
  const int64_t inB = blockOf(layout_, s.C), outB = blockOf(layout_, s.K);
  a.inW = nhwc ? s.C : inB;
  a.inH = s.W * a.inW;
  a.inN = s.C * s.H * s.W;
  a.outB = outB;
  a.outW = nhwc ? s.K : outB;
  a.outH = s.OW * a.outW;
  a.outCB = nhwc ? 0 : s.OH * s.OW * outB;
  a.outN = s.K * s.OH * s.OW;
  a.accumulate = accumulate;
  a.relu = relu;
  a.threads = threads < 1 ? 1 : threads;
  // Rows alone are too few work items for an even split at batch 1 and a small image (RegNet's
  // last stage: 7 rows, 4 + 3 on 2 threads; 1.3-1.45x from the second thread): then each row's
  // groups are cut too, into enough items for 8 per thread.
  const int64_t rowItems = s.N * s.OH;
  if (a.threads > 1 && rowItems < 8 * a.threads)
    a.groupChunks = std::min<int64_t>(s.G, (8 * a.threads + rowItems - 1) / rowItems);
  // Two output vectors per tile where a group has an even number of them: each broadcast
  // source value then feeds two FMAs. Accumulators: AVX-512 (32 registers) 2 x 12 or 14;
  // AVX2 (16) 2 x 6 or 12.
  const bool two = (a.Cog / vl_) % 2 == 0;
  if (vl_ == 16) {
    if (two) isa512::rows<2, 12>(a);
    else isa512::rows<1, 14>(a);
  } else {
    if (two) isa256::rows<2, 6>(a);
    else isa256::rows<1, 12>(a);
  }
}

}  // namespace avx2
}  // namespace tandem
