// Int8 activations times 4-bit weights (DequantGemmInt8.h): the dot-product layout, A's
// quantization, and the AVX-512 VNNI and AVX2 tiles.
#include "runtime/cpu/avx2/DequantGemmInt8.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "runtime/cpu/avx2/IsaCap.h"

namespace tandem {
namespace avx2 {

bool PackedDotB::pack(const PackedQuantB& src, std::string* why) {
  if (src.rows() < 1 || src.cols() < 1) {
    *why = "B is empty (PackedQuantB::pack first)";
    return false;
  }
  K_ = src.rows();
  N_ = src.cols();
  bs_ = src.blockSize();
  pbs_ = (bs_ + 7) / 8 * 8;
  eight_ = !src.nibbles();
  const int64_t P = panels(), nb = blocks();
  q_.assign(P * nb * pbs_ * (eight_ ? 16 : 8), 0);
  scale_.resize(P * nb * 16);
  zp_.resize(P * nb * 16);
  for (int64_t p = 0; p < P; ++p) {
    const int8_t* rows = src.panel(p);
    // The stored value of row k, column j: 4 bits d + 8 (0-15), or 8 bits d + 128 (0-255);
    // rows past K read as d = 0.
    auto value = [&](int64_t k, int64_t j) -> uint8_t {
      if (eight_) return k >= K_ ? 128 : uint8_t(int(rows[k * 16 + j]) + 128);
      if (k >= K_) return 8;
      const uint8_t byte = uint8_t(rows[(k / 2) * 16 + j]);
      return k % 2 == 0 ? byte & 15 : byte >> 4;
    };
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t k0 = b * bs_, k1 = std::min(K_, k0 + bs_);
      uint8_t* dst = q_.data() + (p * nb + b) * pbs_ * (eight_ ? 16 : 8);
      const uint8_t zero = eight_ ? 128 : 8;
      if (eight_) {
        for (int64_t g = 0; g < pbs_ / 4; ++g)
          for (int64_t j = 0; j < 16; ++j)
            for (int64_t i = 0; i < 4; ++i) {
              const int64_t k = k0 + 4 * g + i;
              dst[g * 64 + 4 * j + i] = k < k1 ? value(k, j) : zero;
            }
      } else {
        for (int64_t g = 0; g < pbs_ / 8; ++g)
          for (int64_t j = 0; j < 16; ++j)
            for (int64_t i = 0; i < 4; ++i) {
              const int64_t lo = k0 + 8 * g + i, hi = lo + 4;
              dst[g * 64 + 4 * j + i] = uint8_t((lo < k1 ? value(lo, j) : zero) | (hi < k1 ? value(hi, j) : zero) << 4);
            }
      }
      std::memcpy(&scale_[(p * nb + b) * 16], src.scale(p, b), 16 * sizeof(float));
      // PackedQuantB keeps zp - c (8 bits) or zp - c + 8 (4 bits); the 8-bit values here are
      // d + 128.
      const float* z = src.residualZeroPoint(p, b);
      for (int64_t j = 0; j < 16; ++j) zp_[(p * nb + b) * 16 + j] = z[j] + (eight_ ? 128.f : 0.f);
    }
  }
  return true;
}

namespace {

bool vnni512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vnni") && cpuIsaCap() >= CpuIsaCap::Avx512;
  return ok;
}

bool avx2fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         cpuIsaCap() >= CpuIsaCap::Avx2;
  return ok;
}

#define I8_TARGET512 __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma")))
#define I8_TARGET256 __attribute__((target("avx2,fma")))

inline int32_t load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One tile: rows [0, MR) of the quantized A (rows aLd bytes apart; their scales and sums nb
// apart) times panels [p0, p0 + P) of B into y (MR rows of P * 16 floats), block by block: the
// int32 sums of a_q times the stored values (4 bits; 8 bits as 16 x the high nibble's sum plus
// the low one's), less the zero point as they read it times the block's sum of a_q, scaled by
// s_a * s_b.
template <int MR, int P, bool Eight>
I8_TARGET512 void tile512(const PackedDotB& B, int64_t p0, const int8_t* aq, int64_t aLd,
                          const float* sa, const float* sumA, float* y) {
  const int64_t nb = B.blocks(), pbs = B.paddedBlock(), groups = pbs / (Eight ? 4 : 8);
  const __m512i mask = _mm512_set1_epi8(15);
  __m512 out[MR][P];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) out[m][p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i acc[MR][P], accHi[MR][P];
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) acc[m][p] = accHi[m][p] = _mm512_setzero_si512();
    const uint8_t* w[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) w[p] = B.block(p0 + p, b);
    const int8_t* a = aq + b * pbs;
    for (int64_t g = 0; g < groups; ++g) {
      __m512i lo[P], hi[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const __m512i v = _mm512_loadu_si512(w[p] + g * 64);
        lo[p] = _mm512_and_si512(v, mask);
        hi[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
      }
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        if constexpr (Eight) {
          const __m512i a0 = _mm512_set1_epi32(load4(a + m * aLd + g * 4));
#pragma GCC unroll 8
          for (int p = 0; p < P; ++p) {
            acc[m][p] = _mm512_dpbusd_epi32(acc[m][p], lo[p], a0);
            accHi[m][p] = _mm512_dpbusd_epi32(accHi[m][p], hi[p], a0);
          }
        } else {
          const __m512i a0 = _mm512_set1_epi32(load4(a + m * aLd + g * 8));
          const __m512i a1 = _mm512_set1_epi32(load4(a + m * aLd + g * 8 + 4));
#pragma GCC unroll 8
          for (int p = 0; p < P; ++p) {
            acc[m][p] = _mm512_dpbusd_epi32(acc[m][p], lo[p], a0);
            acc[m][p] = _mm512_dpbusd_epi32(acc[m][p], hi[p], a1);
          }
        }
      }
    }
    // Zero-masked with every lane: the unmasked conversion's undefined pass-through makes GCC 12
    // warn (-Wmaybe-uninitialized), as in DequantGemm.cpp.
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const __m512 s = _mm512_loadu_ps(B.scale(p0 + p, b)), z = _mm512_loadu_ps(B.zeroPoint(p0 + p, b));
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        const __m512i dot = Eight ? _mm512_add_epi32(acc[m][p], _mm512_maskz_slli_epi32(0xFFFF, accHi[m][p], 4)) : acc[m][p];
        const __m512 t = _mm512_fnmadd_ps(z, _mm512_set1_ps(sumA[m * nb + b]), _mm512_maskz_cvtepi32_ps(0xFFFF, dot));
        out[m][p] = _mm512_fmadd_ps(_mm512_mul_ps(s, _mm512_set1_ps(sa[m * nb + b])), t, out[m][p]);
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(y + m * P * 16 + p * 16, out[m][p]);
}

// The same with AVX2: each panel as two halves of 8 columns; a_q * u4 pairs summed in int16 by
// vpmaddubsw (at most 2 * 15 * 127 per pair; in 4 bits the two nibble halves added: 7620, no
// saturation), then in int32 by vpmaddwd. The f32 sums stay in y between blocks.
template <int MR, int P, bool Eight>
I8_TARGET256 void tile256(const PackedDotB& B, int64_t p0, const int8_t* aq, int64_t aLd,
                          const float* sa, const float* sumA, float* y) {
  const int64_t nb = B.blocks(), pbs = B.paddedBlock(), groups = pbs / (Eight ? 4 : 8);
  const __m256i mask = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  for (int m = 0; m < MR; ++m)
    for (int j = 0; j < P * 16; ++j) y[m * P * 16 + j] = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    __m256i acc[MR][2 * P];
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m)
#pragma GCC unroll 8
      for (int h = 0; h < 2 * P; ++h) acc[m][h] = _mm256_setzero_si256();
    const int8_t* a = aq + b * pbs;
    for (int64_t g = 0; g < groups; ++g) {
      __m256i lo[2 * P], hi[2 * P];
#pragma GCC unroll 8
      for (int h = 0; h < 2 * P; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B.block(p0 + h / 2, b) + g * 64 + (h % 2) * 32));
        lo[h] = _mm256_and_si256(v, mask);
        hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
      }
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        if constexpr (Eight) {
          const __m256i a0 = _mm256_set1_epi32(load4(a + m * aLd + g * 4));
#pragma GCC unroll 8
          for (int h = 0; h < 2 * P; ++h) {
            const __m256i l = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[h], a0), ones);
            const __m256i u = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[h], a0), ones);
            acc[m][h] = _mm256_add_epi32(acc[m][h], _mm256_add_epi32(l, _mm256_slli_epi32(u, 4)));
          }
        } else {
          const __m256i a0 = _mm256_set1_epi32(load4(a + m * aLd + g * 8));
          const __m256i a1 = _mm256_set1_epi32(load4(a + m * aLd + g * 8 + 4));
#pragma GCC unroll 8
          for (int h = 0; h < 2 * P; ++h) {
            const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], a0), _mm256_maddubs_epi16(hi[h], a1));
            acc[m][h] = _mm256_add_epi32(acc[m][h], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int h = 0; h < 2 * P; ++h) {
      const float* sp = B.scale(p0 + h / 2, b) + (h % 2) * 8;
      const float* zp = B.zeroPoint(p0 + h / 2, b) + (h % 2) * 8;
      const __m256 s = _mm256_loadu_ps(sp), z = _mm256_loadu_ps(zp);
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        float* o = y + m * P * 16 + h * 8;
        const __m256 t = _mm256_fnmadd_ps(z, _mm256_set1_ps(sumA[m * nb + b]), _mm256_cvtepi32_ps(acc[m][h]));
        _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_mul_ps(s, _mm256_set1_ps(sa[m * nb + b])), t, _mm256_loadu_ps(o)));
      }
    }
  }
}

using TileFn = void (*)(const PackedDotB&, int64_t, const int8_t*, int64_t, const float*, const float*, float*);

// Panels per tile by rows: independent accumulator chains for the dot products' latency, within
// the registers (AVX-512: 32, AVX2: 16; 8 bits take a second set of accumulators on AVX-512).
template <int MR, bool Eight>
TileFn tileOf(int* p) {
  if (vnni512()) {
    if (*p >= 4 && MR <= (Eight ? 1 : 2)) return *p = 4, TileFn(tile512<MR, 4, Eight>);
    if (*p >= 2 && (!Eight || MR <= 2)) return *p = 2, TileFn(tile512<MR, 2, Eight>);
    return *p = 1, TileFn(tile512<MR, 1, Eight>);
  }
  if (*p >= 2 && MR == 1) return *p = 2, TileFn(tile256<MR, 2, Eight>);
  return *p = 1, TileFn(tile256<MR, 1, Eight>);
}

template <bool Eight>
TileFn tileFor(int mr, int* p) {
  switch (mr) {
    case 1: return tileOf<1, Eight>(p);
    case 2: return tileOf<2, Eight>(p);
    case 3: return tileOf<3, Eight>(p);
    default: return tileOf<4, Eight>(p);
  }
}

// Panels [pb, pe) for every row, in chunks of up to 4 rows.
void int8Path(int64_t M, const int8_t* aq, int64_t aLd, const float* sa, const float* sumA,
              const PackedDotB& B, float* C, int64_t ldc, const float* bias, int64_t pb, int64_t pe) {
  alignas(64) float y[4 * 4 * 16];
  const int64_t N = B.cols(), nb = B.blocks();
  for (int64_t r = 0; r < M; r += 4) {
    const int mr = (int)std::min<int64_t>(4, M - r);
    for (int64_t p = pb; p < pe;) {
      int np = (int)std::min<int64_t>(4, pe - p);
      (B.eightBit() ? tileFor<true>(mr, &np) : tileFor<false>(mr, &np))(B, p, aq + r * aLd, aLd, sa + r * nb, sumA + r * nb, y);
      const int64_t n0 = p * 16, cols = std::min(N, (p + np) * 16) - n0;
      for (int i = 0; i < mr; ++i) {
        float* c = C + (r + i) * ldc + n0;
        const float* t = y + i * np * 16;
        for (int64_t j = 0; j < cols; ++j) c[j] = t[j] + (bias ? bias[n0 + j] : 0.f);
      }
      p += np;
    }
  }
}

// One block of a row: s = max |a| / 127, q = a * (1 / s) rounded to nearest, ties to even (the
// MXCSR default of vcvtps2dq and cvtss2si), within [-127, 127]; zeros from n to `padded`.
I8_TARGET256 void quantizeBlock(const float* a, int64_t n, int8_t* q, int64_t padded, float* scale,
                                float* sum) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vmax = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(a + k), absMask));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float amax = 0.f;
  for (float v : lanes) amax = std::max(amax, v);
  for (; k < n; ++k) amax = std::max(amax, std::fabs(a[k]));
  const float s = amax / 127.f, inv = s != 0.f ? 1.f / s : 0.f;
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  __m256i vsum = _mm256_setzero_si256();
  alignas(32) int32_t r[8];
  for (k = 0; k + 8 <= n; k += 8) {
    const __m256i v = _mm256_min_epi32(hi, _mm256_max_epi32(lo, _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(a + k), vinv))));
    vsum = _mm256_add_epi32(vsum, v);
    _mm256_store_si256(reinterpret_cast<__m256i*>(r), v);
    for (int i = 0; i < 8; ++i) q[k + i] = (int8_t)r[i];
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(r), vsum);
  int32_t total = r[0] + r[1] + r[2] + r[3] + r[4] + r[5] + r[6] + r[7];
  for (; k < n; ++k) {
    const int32_t v = std::clamp(_mm_cvtss_si32(_mm_set_ss(a[k] * inv)), -127, 127);
    q[k] = (int8_t)v;
    total += v;
  }
  for (k = n; k < padded; ++k) q[k] = 0;
  *scale = s;
  *sum = (float)total;
}

}  // namespace

bool int8DotAvailable() { return vnni512() || avx2fma(); }

const char* int8DotIsa() { return vnni512() ? "avx512_vnni" : "avx2"; }

void quantizeRowsInt8(int64_t M, const float* A, int64_t lda, int64_t K, int64_t blockSize,
                      int64_t paddedBlock, int8_t* aq, float* scale, float* sum) {
  const int64_t nb = (K + blockSize - 1) / blockSize;
#pragma omp parallel for schedule(static) if (M * K >= (int64_t{1} << 16))
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < nb; ++b)
      quantizeBlock(A + m * lda + b * blockSize, std::min(blockSize, K - b * blockSize),
                    aq + (m * nb + b) * paddedBlock, paddedBlock, &scale[m * nb + b], &sum[m * nb + b]);
}

void dequantGemmInt8(int64_t M, const float* A, int64_t lda, const PackedDotB& B, float* C,
                     int64_t ldc, const float* bias, int threads) {
  if (M <= 0) return;
  const int64_t K = B.rows(), nb = B.blocks(), pbs = B.paddedBlock(), P = B.panels();
  static thread_local std::vector<int8_t> aq;
  static thread_local std::vector<float> sa, sumA;
  aq.resize(M * nb * pbs);
  sa.resize(M * nb);
  sumA.resize(M * nb);
  quantizeRowsInt8(M, A, lda, K, B.blockSize(), pbs, aq.data(), sa.data(), sumA.data());
  const int8_t* q = aq.data();
  const float *s = sa.data(), *sums = sumA.data();
  const int64_t aLd = nb * pbs;
  const int n = (int)std::max<int64_t>(1, std::min<int64_t>(threads, P));
  if (n <= 1) {
    int8Path(M, q, aLd, s, sums, B, C, ldc, bias, 0, P);
    return;
  }
#pragma omp parallel num_threads(n)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int8Path(M, q, aLd, s, sums, B, C, ldc, bias, P * t / nt, P * (t + 1) / nt);
  }
}

}  // namespace avx2
}  // namespace tandem
