// f32 GEMM against 8-bit or 4-bit weights kept so (DequantGemm.h): packing, the AVX-512F and
// AVX2 register tiles and panel dequantization (DequantGemmBody.inc), and the driver.
#include "runtime/cpu/avx2/DequantGemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <string>

#include "runtime/cpu/avx2/Activation.h"
#include "runtime/cpu/avx2/IsaCap.h"

namespace tandem {
namespace avx2 {

bool PackedQuantB::pack(const QuantBSource& s, std::string* why) {
  if (s.K < 1 || s.N < 1 || !s.q || !s.scale || s.blockSize < 0) {
    *why = "B must be a non-empty K x N matrix with scales, and block_size >= 0";
    return false;
  }
  const int64_t K = s.K, N = s.N;
  const int64_t bs = s.blockSize > 0 ? std::min(s.blockSize, K) : K;
  const int64_t nb = (K + bs - 1) / bs;
  const bool perTensor = s.scaleCount == 1 && s.blockSize == 0;
  if (!perTensor && s.scaleCount != nb * N) {
    *why = "expected " + std::to_string(s.blockSize > 0 ? nb * N : N) + " scales (" +
           (s.blockSize > 0 ? "one per block of " + std::to_string(s.blockSize) + " rows and column"
                            : std::string("one, or one per column")) +
           "), got " + std::to_string(s.scaleCount);
    return false;
  }
  K_ = K;
  N_ = N;
  bs_ = bs;
  residual_ = false;
  nibbles_ = false;
  const int64_t P = panels();
  std::vector<int8_t> d(P * 16 * K, 0);  // d = q - c, row-major within each panel
  scale_.assign(P * nb * 16, 0.f);
  zp_.assign(P * nb * 16, 0.f);
  auto qAt = [&](int64_t k, int64_t n) -> int32_t {
    return s.isUnsigned ? int32_t(static_cast<const uint8_t*>(s.q)[k * N + n])
                        : int32_t(static_cast<const int8_t*>(s.q)[k * N + n]);
  };
  auto zpAt = [&](int64_t i) -> int32_t {
    if (!s.zeroPoint) return 0;
    return s.isUnsigned ? int32_t(static_cast<const uint8_t*>(s.zeroPoint)[i])
                        : int32_t(static_cast<const int8_t*>(s.zeroPoint)[i]);
  };
  // The range of q per block and column: 4 bits hold every block and column spanning at most
  // 16 values, where no pair of rows straddles two blocks.
  std::vector<int32_t> lo(nb * N, 255), hi(nb * N, -128);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t at = (k / bs) * N + n;
      lo[at] = std::min(lo[at], qAt(k, n));
      hi[at] = std::max(hi[at], qAt(k, n));
    }
  nibbles_ = nb == 1 || bs % 2 == 0;
  for (int64_t at = 0; at < nb * N && nibbles_; ++at) nibbles_ = hi[at] - lo[at] <= 15;
  // c: the zero point where every q - zp fits the storage (int8, or [-8, 7]), else the value
  // nearest it that makes every q - c fit; the rest of the zero point (zp - c) is the residual.
  const int32_t dLo = nibbles_ ? -8 : -128, dHi = nibbles_ ? 7 : 127;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t k0 = b * bs, k1 = std::min(K, k0 + bs);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t i = perTensor ? 0 : b * N + n;
      const int32_t zp = zpAt(i);
      const int32_t c = std::clamp(zp, hi[b * N + n] - dHi, lo[b * N + n] - dLo);
      int8_t* dst = d.data() + (n / 16) * 16 * K + n % 16;
      for (int64_t k = k0; k < k1; ++k) dst[k * 16] = int8_t(qAt(k, n) - c);
      const int64_t at = ((n / 16) * nb + b) * 16 + n % 16;
      // Nibbles hold d + 8 (0-15), read as they are: the 8 joins the residual zero point.
      const int32_t residual = zp - c + (nibbles_ ? 8 : 0);
      scale_[at] = s.scale[i];
      zp_[at] = float(residual);
      residual_ = residual_ || residual != 0;
    }
  }
  if (!nibbles_) {
    q_ = std::move(d);
    return true;
  }
  const int64_t pairs = (K + 1) / 2;
  q_.assign(P * 16 * pairs, 0);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t r = 0; r < pairs; ++r)
      for (int64_t j = 0; j < 16; ++j) {
        const int64_t k = 2 * r;
        const int low = d[(p * K + k) * 16 + j] + 8;
        const int high = (k + 1 < K ? d[(p * K + k + 1) * 16 + j] : 0) + 8;
        q_[(p * pairs + r) * 16 + j] = int8_t(uint8_t(low | (high << 4)));
      }
  return true;
}

int64_t PackedQuantB::bytes() const {
  return (int64_t)q_.size() + (int64_t)(scale_.size() + zp_.size()) * 4;
}

namespace {

bool avx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") &&
                         cpuIsaCap() >= CpuIsaCap::Avx512;
  return ok;
}

}  // namespace

#define DG_TARGET __attribute__((target("avx512f,avx2,fma")))
namespace isa512 {
using V = __m512;
constexpr int VL = 16;
DG_TARGET static inline V vzero() { return _mm512_setzero_ps(); }
DG_TARGET static inline V vload(const float* p) { return _mm512_loadu_ps(p); }
DG_TARGET static inline void vstore(float* p, V v) { _mm512_storeu_ps(p, v); }
DG_TARGET static inline V vbcast(const float* p) { return _mm512_set1_ps(*p); }
DG_TARGET static inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
DG_TARGET static inline V vfnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
DG_TARGET static inline V vmul(V a, V b) { return _mm512_mul_ps(a, b); }
DG_TARGET static inline V vsub(V a, V b) { return _mm512_sub_ps(a, b); }
// Zero-masked with every lane: the unmasked intrinsics' undefined pass-through makes GCC 12 warn
// (-Wmaybe-uninitialized), as GroupedConv.cpp's vmax.
DG_TARGET static inline V vcvt8(const int8_t* p) {
  const __m512i i = _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm512_maskz_cvtepi32_ps(0xFFFF, i);
}
DG_TARGET static inline void vnibbles(const int8_t* p, V* lo, V* hi) {
  const __m512i u = _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  *lo = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_and_si512(u, _mm512_set1_epi32(15)));
  *hi = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, u, 4));
}
#include "runtime/cpu/avx2/DequantGemmBody.inc"
}  // namespace isa512
#undef DG_TARGET

#define DG_TARGET __attribute__((target("avx2,fma")))
namespace isa256 {
using V = __m256;
constexpr int VL = 8;
DG_TARGET static inline V vzero() { return _mm256_setzero_ps(); }
DG_TARGET static inline V vload(const float* p) { return _mm256_loadu_ps(p); }
DG_TARGET static inline void vstore(float* p, V v) { _mm256_storeu_ps(p, v); }
DG_TARGET static inline V vbcast(const float* p) { return _mm256_broadcast_ss(p); }
DG_TARGET static inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
DG_TARGET static inline V vfnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
DG_TARGET static inline V vmul(V a, V b) { return _mm256_mul_ps(a, b); }
DG_TARGET static inline V vsub(V a, V b) { return _mm256_sub_ps(a, b); }
DG_TARGET static inline V vcvt8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
DG_TARGET static inline void vnibbles(const int8_t* p, V* lo, V* hi) {
  const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  *lo = _mm256_cvtepi32_ps(_mm256_and_si256(u, _mm256_set1_epi32(15)));
  *hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(u, 4));
}
#include "runtime/cpu/avx2/DequantGemmBody.inc"
}  // namespace isa256
#undef DG_TARGET

namespace {

using TileFn = void (*)(const PackedQuantB&, int64_t, const float*, int64_t, const float*, int64_t,
                        float*);

// Accumulators per tile: MR rows x P panels x (16 / VL) vectors = 8, so that eight FMA chains
// are in flight (two FMA pipes, four cycles each) with room left for the widened weights and
// A's broadcasts: AVX2 (16 registers) MR x P = 4, AVX-512 (32) MR x P = 8.
int maxPanels(int mr) {
  const int budget = avx512() ? 8 : 4;
  return std::max(1, budget / mr);
}

// The tile of MR rows and the most panels up to *p (a power of two) that it has; *p becomes
// that count.
template <int MR, bool Nib>
TileFn tileOf(int* p) {
  if (avx512()) {
    if constexpr (MR == 1)
      if (*p >= 8) return *p = 8, TileFn(isa512::registerTile<MR, 8, Nib>);
    if constexpr (MR <= 2)
      if (*p >= 4) return *p = 4, TileFn(isa512::registerTile<MR, 4, Nib>);
    if (*p >= 2) return *p = 2, TileFn(isa512::registerTile<MR, 2, Nib>);
    return *p = 1, TileFn(isa512::registerTile<MR, 1, Nib>);
  }
  if constexpr (MR == 1)
    if (*p >= 4) return *p = 4, TileFn(isa256::registerTile<MR, 4, Nib>);
  if constexpr (MR <= 2)
    if (*p >= 2) return *p = 2, TileFn(isa256::registerTile<MR, 2, Nib>);
  return *p = 1, TileFn(isa256::registerTile<MR, 1, Nib>);
}

template <bool Nib>
TileFn tileFor(int mr, int* p) {
  switch (mr) {
    case 1: return tileOf<1, Nib>(p);
    case 2: return tileOf<2, Nib>(p);
    case 3: return tileOf<3, Nib>(p);
    default: return tileOf<4, Nib>(p);
  }
}

// Rows of a tile (ld floats apart; columns [n0, n0 + cols) of C) through the epilogue into C.
void finishTile(const float* y, int64_t ld, int64_t rows, int64_t n0, int64_t cols, float* C,
                int64_t ldc, const GemmEpilogue& ep) {
  for (int64_t r = 0; r < rows; ++r) {
    float* c = C + r * ldc + n0;
    const float* t = y + r * ld;
    for (int64_t j = 0; j < cols; ++j) {
      float v = t[j];
      if (ep.bias) v += ep.bias[n0 + j];
      if (ep.accumulate) v += c[j];
      if (ep.relu) v = std::max(v, 0.f);
      c[j] = v;
    }
    if (ep.activationCount > 0) applyActivations(ep.activations, ep.activationCount, c, cols);
  }
}

// The register path over panels [pb, pe): panel groups outer (a group's weights stay in L1/L2
// while every row chunk passes), chunks of up to 4 rows inner.
void registerPath(int64_t M, const float* A, int64_t lda, const PackedQuantB& B, float* C,
                  int64_t ldc, const GemmEpilogue& ep, int64_t pb, int64_t pe, const float* sumA) {
  alignas(64) float y[4 * 8 * 16];
  const int64_t N = B.cols(), nb = B.blocks();
  const int64_t group = maxPanels(1);
  for (int64_t g = pb; g < pe; g += group) {
    const int64_t ge = std::min(pe, g + group);
    for (int64_t r = 0; r < M; r += 4) {
      const int mr = (int)std::min<int64_t>(4, M - r);
      for (int64_t p = g; p < ge;) {
        int np = (int)std::min<int64_t>(maxPanels(mr), ge - p);
        (B.nibbles() ? tileFor<true>(mr, &np) : tileFor<false>(mr, &np))(B, p, A + r * lda, lda, sumA ? sumA + r * nb : nullptr, nb, y);
        const int64_t n0 = p * 16, cols = std::min(N, (p + np) * 16) - n0;
        finishTile(y, np * 16, mr, n0, cols, C + r * ldc, ldc, ep);
        p += np;
      }
    }
  }
}

// The panel path over rows [r0, r1) and panels [pb, pe): groups of panels dequantized into an
// f32 packing (up to 256 KiB, in L2) that Sgemm.h's micro-kernels then multiply.
void panelPath(int64_t r0, int64_t r1, const float* A, int64_t lda, const PackedQuantB& B,
               float* C, int64_t ldc, const GemmEpilogue& ep, int64_t pb, int64_t pe) {
  static thread_local PackedB scratch;
  const int64_t K = B.rows(), N = B.cols();
  const int64_t group = std::clamp<int64_t>(256 * 1024 / (K * 64), 1, 8);
  for (int64_t p = pb; p < pe; p += group) {
    const int64_t g = std::min(group, pe - p), n0 = p * 16;
    const int64_t cols = std::min(N, (p + g) * 16) - n0;
    float* dst = scratch.allocate(K, cols);
    for (int64_t i = 0; i < scratch.panels(); ++i) {
      const int64_t width = std::min<int64_t>(16, scratch.paddedCols() - 16 * i);
      float* panel = dst + i * 16 * K;
      if (width == 16 && avx512()) isa512::dequantizePanel(B, p + i, panel, width, width);
      else isa256::dequantizePanel(B, p + i, panel, width, width);
    }
    GemmEpilogue e = ep;
    if (e.bias) e.bias += n0;
    sgemm(r1 - r0, A + r0 * lda, lda, scratch, C + r0 * ldc + n0, ldc, e, 0, scratch.panels());
  }
}

}  // namespace

int64_t dequantGemmRegisterRows() { return 16; }

void dequantizeColumns(const PackedQuantB& B, int64_t p0, int64_t count, float* dst, int64_t ld,
                       int threads) {
  const int n = (int)std::max<int64_t>(1, std::min<int64_t>(threads, count));
#pragma omp parallel for num_threads(n) schedule(static) if (n > 1)
  for (int64_t i = 0; i < count; ++i) {
    if (avx512()) isa512::dequantizePanel(B, p0 + i, dst + i * 16, ld, 16);
    else isa256::dequantizePanel(B, p0 + i, dst + i * 16, ld, 16);
  }
}

const char* dequantGemmIsa() { return avx512() ? "avx512" : "avx2"; }

void dequantGemm(int64_t M, const float* A, int64_t lda, const PackedQuantB& B, float* C,
                 int64_t ldc, const GemmEpilogue& ep, int threads, DequantGemmPath path) {
  if (M <= 0) return;
  const int64_t P = B.panels();
  if (path == DequantGemmPath::Auto)
    path = M <= dequantGemmRegisterRows() ? DequantGemmPath::Registers : DequantGemmPath::Panels;
  if (path == DequantGemmPath::Registers) {
    // Row sums of A per block, for the residual zero points' term.
    static thread_local std::vector<float> sums;
    const float* sumA = nullptr;
    if (B.hasResidualZeroPoint()) {
      const int64_t K = B.rows(), bs = B.blockSize(), nb = B.blocks();
      sums.assign(M * nb, 0.f);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) sums[m * nb + k / bs] += A[m * lda + k];
      sumA = sums.data();
    }
    const int n = (int)std::min<int64_t>(threads, P);
    if (n <= 1) {
      registerPath(M, A, lda, B, C, ldc, ep, 0, P, sumA);
      return;
    }
#pragma omp parallel num_threads(n)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      registerPath(M, A, lda, B, C, ldc, ep, P * t / nt, P * (t + 1) / nt, sumA);
    }
    return;
  }
  if (threads <= 1) {
    panelPath(0, M, A, lda, B, C, ldc, ep, 0, P);
    return;
  }
  // As sgemmParallel: split the panels when there are enough, else the rows in multiples of 6.
  const bool byPanels = P >= 2 * threads;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (byPanels) {
      panelPath(0, M, A, lda, B, C, ldc, ep, P * t / nt, P * (t + 1) / nt);
    } else {
      const int64_t blocks = (M + 5) / 6;
      const int64_t b = std::min(M, blocks * t / nt * 6), e = std::min(M, blocks * (t + 1) / nt * 6);
      if (e > b) panelPath(b, e, A, lda, B, C, ldc, ep, 0, P);
    }
  }
}

}  // namespace avx2
}  // namespace tandem
