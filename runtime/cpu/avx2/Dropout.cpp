// AVX2 Dropout mask and scaling (Dropout.h).
#include "runtime/cpu/avx2/Dropout.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "runtime/cpu/avx2/VecExp.h"

namespace tandem {
namespace avx2 {
namespace {

// hi and lo words of m * b per 32-bit lane (m the same in every lane).
TANDEM_AVX2 inline void mulHiLo(__m256i m, __m256i b, __m256i* hi, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(m, b);                      // lanes 0, 2, 4, 6
  const __m256i odd = _mm256_mul_epu32(m, _mm256_srli_epi64(b, 32));  // lanes 1, 3, 5, 7
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// The four Philox words of blocks first .. first + 7, in element order: out[4 * b + j] is word
// j of block first + b (DropoutMask::words).
TANDEM_AVX2 void philox8(const DropoutMask& m, uint64_t first, uint32_t* out) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  // Block first + b: low and high words (the high word carries when the low one wraps).
  const __m256i low = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)first), lane);
  // -1 where the low word wrapped (low < first's low word, unsigned: compared with the sign
  // bit flipped).
  const __m256i firstLow = _mm256_xor_si256(_mm256_set1_epi32((int)(uint32_t)first), _mm256_set1_epi32(INT32_MIN));
  const __m256i carry = _mm256_cmpgt_epi32(firstLow, _mm256_xor_si256(low, _mm256_set1_epi32(INT32_MIN)));
  __m256i c0 = low;
  __m256i c1 = _mm256_sub_epi32(_mm256_set1_epi32((int)(uint32_t)(first >> 32)), carry);  // carry is -1
  __m256i c2 = _mm256_set1_epi32((int)m.stream), c3 = _mm256_set1_epi32((int)m.step);
  const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
  uint32_t k0 = (uint32_t)m.seed, k1 = (uint32_t)(m.seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    __m256i hi0, lo0, hi1, lo1;
    mulHiLo(m0, c0, &hi0, &lo0);
    mulHiLo(m1, c2, &hi1, &lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
    c3 = lo0;
  }
  // 4 x 8 (word, block) -> element order: unpack pairs, then 128-bit lanes.
  const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
  const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  // u0: blocks 0 and 4, u1: 1 and 5, u2: 2 and 6, u3: 3 and 7 (low and high 128 bits).
  auto* o = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(u0, u1, 0x20));
  _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
  _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
  _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
}

TANDEM_AVX2 void dropoutGroups(const DropoutMask& m, float scale, int64_t n, int64_t g0, int64_t g1,
                               const float* x, float* y, bool* mask) {
  const __m256i bias = _mm256_set1_epi32(INT32_MIN);
  const __m256i threshold = _mm256_xor_si256(_mm256_set1_epi32((int)m.threshold), bias);
  const __m256 vscale = _mm256_set1_ps(scale);
  alignas(32) uint32_t w[32];
  for (int64_t g = g0; g < g1; ++g) {
    philox8(m, (uint64_t)g * 8, w);
    const int64_t first = g * 32, count = std::min<int64_t>(32, n - first);
    if (count < 32) {  // the tail, element by element
      for (int64_t e = 0; e < count; ++e) {
        const bool keep = w[e] >= m.threshold;
        y[first + e] = keep ? x[first + e] * scale : 0.f;
        if (mask) mask[first + e] = keep;
      }
      continue;
    }
    for (int v = 0; v < 4; ++v) {
      const __m256i word = _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(w) + v), bias);
      // keep: word >= threshold (unsigned), i.e. not threshold > word.
      const __m256 drop = _mm256_castsi256_ps(_mm256_cmpgt_epi32(threshold, word));
      const float* xs = x + first + 8 * v;
      _mm256_storeu_ps(y + first + 8 * v, _mm256_andnot_ps(drop, _mm256_mul_ps(_mm256_loadu_ps(xs), vscale)));
      if (mask) {
        const int bits = ~_mm256_movemask_ps(drop);
        for (int e = 0; e < 8; ++e) mask[first + 8 * v + e] = (bits >> e) & 1;
      }
    }
  }
}

}  // namespace

void dropoutF32(const DropoutMask& m, float scale, int64_t n, int threads, const float* x, float* y,
                bool* mask) {
  const int64_t groups = (n + 31) / 32;
  if (threads <= 1 || n <= 65536) {
    dropoutGroups(m, scale, n, 0, groups, x, y, mask);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    const int64_t per = (groups + T - 1) / T;
    const int64_t g0 = std::min<int64_t>(groups, t * per), g1 = std::min<int64_t>(groups, g0 + per);
    dropoutGroups(m, scale, n, g0, g1, x, y, mask);
  }
}

}  // namespace avx2
}  // namespace tandem
