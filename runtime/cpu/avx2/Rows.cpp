// AVX2 + FMA row kernels: softmax, log-softmax and layer normalisation of one f32 row.
#include "runtime/cpu/avx2/Rows.h"

#include <immintrin.h>

#include <cmath>
#include <limits>
#include <vector>
#include <algorithm>

#include "runtime/cpu/avx2/VecExp.h"

namespace tandem {
namespace avx2 {
namespace {

/// Lanes [0, left) of a masked load or store (left in [1, 8]).
TANDEM_AVX2 inline __m256i tailMask(int64_t left) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(left)), lane);
}

TANDEM_AVX2 inline float horizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

TANDEM_AVX2 inline double horizontalSum(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

/// acc += the 8 lanes of v, widened to double.
TANDEM_AVX2 inline __m256d addWide(__m256d acc, __m256 v) {
  acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

/// exp(z) where z >= -87.3, else 0 (the vector exp clamps there: -inf would give 1.2e-38).
TANDEM_AVX2 inline __m256 expOrZero(__m256 z) {
  return _mm256_and_ps(expClamped(z), _mm256_cmp_ps(z, _mm256_set1_ps(-87.3f), _CMP_GE_OQ));
}

}  // namespace

TANDEM_AVX2 bool softmaxRow(const float* x, float* y, int64_t n, bool log) {
  // The maximum, and whether any element is NaN (max_ps would skip it).
  const float inf = std::numeric_limits<float>::infinity();
  __m256 vmax = _mm256_set1_ps(-inf), unordered = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    vmax = _mm256_max_ps(vmax, v);
  }
  float m = horizontalMax(vmax);
  bool nan = _mm256_movemask_ps(unordered) != 0;
  for (; i < n; ++i) {
    nan |= std::isnan(x[i]);
    m = x[i] > m ? x[i] : m;
  }
  if (nan || !std::isfinite(m)) return false;
  // exp(x - m), stored (softmax) and summed in double.
  const __m256 vm = _mm256_set1_ps(m);
  __m256d sum = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = expOrZero(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    if (!log) _mm256_storeu_ps(y + i, e);
    sum = addWide(sum, e);
  }
  if (i < n) {
    const __m256i mask = tailMask(n - i);
    const __m256 e = _mm256_and_ps(expOrZero(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), vm)),
                                   _mm256_castsi256_ps(mask));
    if (!log) _mm256_maskstore_ps(y + i, mask, e);
    sum = addWide(sum, e);
  }
  const double s = horizontalSum(sum);  // >= 1: the maximum's own term is exp(0)
  if (!log) {
    const __m256 inv = _mm256_set1_ps(float(1.0 / s));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
    for (; i < n; ++i) y[i] *= float(1.0 / s);
    return true;
  }
  const float lse = float(double(m) + std::log(s));
  const __m256 vl = _mm256_set1_ps(lse);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_loadu_ps(x + i), vl));
  for (; i < n; ++i) y[i] = x[i] - lse;
  return true;
}

TANDEM_AVX2 void scaledExpRow(const float* x, float* y, int64_t n, float scale) {
  const __m256 k = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = _mm256_mul_ps(expOrZero(v), k);
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(e, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));  // NaN stays
  }
  for (; i < n; ++i) y[i] = std::isnan(x[i]) ? x[i] : x[i] < -87.3f ? 0.f : scale * std::exp(x[i]);
}

/// The squared deviations of the 8 lanes of v from vmean, added to acc (double).
TANDEM_AVX2 inline __m256d addSquares(__m256d acc, __m256 v, __m256d vmean) {
  const __m256d lo = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vmean);
  const __m256d hi = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vmean);
  return _mm256_fmadd_pd(lo, lo, _mm256_fmadd_pd(hi, hi, acc));
}

// Four accumulators a pass: one chain of dependent adds held both passes at the add latency,
// 0.5 ns an element (GroupNorm's 8 x 4096 took 0.017 ms).
TANDEM_AVX2 void meanAndSquares(const float* x, int64_t n, double* mean, double* squares) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = addWide(a0, _mm256_loadu_ps(x + i));
    a1 = addWide(a1, _mm256_loadu_ps(x + i + 8));
    a2 = addWide(a2, _mm256_loadu_ps(x + i + 16));
    a3 = addWide(a3, _mm256_loadu_ps(x + i + 24));
  }
  for (; i + 8 <= n; i += 8) a0 = addWide(a0, _mm256_loadu_ps(x + i));
  double total = horizontalSum(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
  for (; i < n; ++i) total += x[i];
  const double m = total / double(n);
  const __m256d vmean = _mm256_set1_pd(m);
  a0 = a1 = a2 = a3 = _mm256_setzero_pd();
  for (i = 0; i + 32 <= n; i += 32) {
    a0 = addSquares(a0, _mm256_loadu_ps(x + i), vmean);
    a1 = addSquares(a1, _mm256_loadu_ps(x + i + 8), vmean);
    a2 = addSquares(a2, _mm256_loadu_ps(x + i + 16), vmean);
    a3 = addSquares(a3, _mm256_loadu_ps(x + i + 24), vmean);
  }
  for (; i + 8 <= n; i += 8) a0 = addSquares(a0, _mm256_loadu_ps(x + i), vmean);
  double sq = horizontalSum(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
  for (; i < n; ++i) sq += (x[i] - m) * (x[i] - m);
  *mean = m;
  *squares = sq;
}

TANDEM_AVX2 void layerNormRow(const float* x, float* y, int64_t n, const float* scale,
                              const float* bias, double epsilon) {
  double mean, var;
  meanAndSquares(x, n, &mean, &var);
  const float inv = float(1.0 / std::sqrt(var / double(n) + epsilon));
  const float meanF = float(mean);
  const __m256 vm = _mm256_set1_ps(meanF), vinv = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vinv);
    const __m256 b = bias ? _mm256_loadu_ps(bias + i) : _mm256_setzero_ps();
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(t, _mm256_loadu_ps(scale + i), b));
  }
  for (; i < n; ++i) y[i] = (x[i] - meanF) * inv * scale[i] + (bias ? bias[i] : 0.f);
}

TANDEM_AVX2 void affineRow(const float* x, float* y, int64_t n, double k, double b) {
  const __m256d vk = _mm256_set1_pd(k), vb = _mm256_set1_pd(b);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    // double(x) * k + b rounded once to f32, as the scalar loop: mul then add, not fused.
    const __m128 lo = _mm256_cvtpd_ps(
        _mm256_add_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vk), vb));
    const __m128 hi = _mm256_cvtpd_ps(
        _mm256_add_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vk), vb));
    _mm256_storeu_ps(y + i, _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1));
  }
  for (; i < n; ++i) y[i] = float(double(x[i]) * k + b);
}

namespace {

/// Sum (square = false) or sum of squares of x[0, n) in double.
TANDEM_AVX2 double sumRow(const float* x, int64_t n, bool square) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 u = _mm256_loadu_ps(x + i), v = _mm256_loadu_ps(x + i + 8);
    if (square) {
      // Squared in double, as the scalar fold: (double)x * (double)x.
      const __m256d u0 = _mm256_cvtps_pd(_mm256_castps256_ps128(u)), u1 = _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1));
      const __m256d v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), v1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      a0 = _mm256_add_pd(a0, _mm256_add_pd(_mm256_mul_pd(u0, u0), _mm256_mul_pd(u1, u1)));
      a1 = _mm256_add_pd(a1, _mm256_add_pd(_mm256_mul_pd(v0, v0), _mm256_mul_pd(v1, v1)));
    } else {
      a0 = addWide(a0, u);
      a1 = addWide(a1, v);
    }
  }
  double s = horizontalSum(_mm256_add_pd(a0, a1));
  for (; i < n; ++i) s += square ? double(x[i]) * double(x[i]) : double(x[i]);
  return s;
}

/// Max (max = true) or min of x[0, n), n >= 1; NaN when any element is NaN.
TANDEM_AVX2 float extremeRow(const float* x, int64_t n, bool max) {
  const float init = max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  __m256 a = _mm256_set1_ps(init), nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    a = max ? _mm256_max_ps(a, v) : _mm256_min_ps(a, v);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  float r;
  if (max) {
    r = horizontalMax(a);
  } else {
    __m128 m = _mm_min_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    r = _mm_cvtss_f32(_mm_min_ss(m, _mm_shuffle_ps(m, m, 1)));
  }
  bool anyNaN = _mm256_movemask_ps(nan) != 0;
  for (; i < n; ++i) {
    if (std::isnan(x[i])) anyNaN = true;
    else if (max ? x[i] > r : x[i] < r) r = x[i];
  }
  return anyNaN ? std::numeric_limits<float>::quiet_NaN() : r;
}

}  // namespace

TANDEM_AVX2 void foldAxis(const float* x, int64_t outer, int64_t count, int64_t inner, Fold fold, double* out) {
  const bool sum = fold == Fold::Sum || fold == Fold::SumSquare, square = fold == Fold::SumSquare;
  const bool max = fold == Fold::Max;
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o)
      out[o] = sum ? sumRow(x + o * count, count, square) : double(extremeRow(x + o * count, count, max));
    return;
  }
  // count rows of inner elements folded into one, row after row (contiguous reads; the
  // accumulator row, inner doubles or floats, stays in cache).
  const float init = max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  std::vector<float> ext(sum ? 0 : (size_t)inner);
  for (int64_t o = 0; o < outer; ++o) {
    const float* base = x + o * count * inner;
    double* y = out + o * inner;
    if (sum) {
      std::fill(y, y + inner, 0.0);
      for (int64_t c = 0; c < count; ++c) {
        const float* row = base + c * inner;
        int64_t i = 0;
        for (; i + 8 <= inner; i += 8) {
          const __m256 v = _mm256_loadu_ps(row + i);
          __m256d v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), v1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
          if (square) {
            v0 = _mm256_mul_pd(v0, v0);
            v1 = _mm256_mul_pd(v1, v1);
          }
          _mm256_storeu_pd(y + i, _mm256_add_pd(_mm256_loadu_pd(y + i), v0));
          _mm256_storeu_pd(y + i + 4, _mm256_add_pd(_mm256_loadu_pd(y + i + 4), v1));
        }
        for (; i < inner; ++i) y[i] += square ? double(row[i]) * double(row[i]) : double(row[i]);
      }
      continue;
    }
    // Max / Min: an element replaces the accumulator when it is larger (smaller) or NaN; a
    // NaN accumulator then stays (no comparison with it holds).
    float* a = ext.data();
    std::fill(a, a + inner, init);
    for (int64_t c = 0; c < count; ++c) {
      const float* row = base + c * inner;
      int64_t i = 0;
      for (; i + 8 <= inner; i += 8) {
        const __m256 v = _mm256_loadu_ps(row + i), cur = _mm256_loadu_ps(a + i);
        const __m256 better = max ? _mm256_cmp_ps(v, cur, _CMP_GT_OQ) : _mm256_cmp_ps(v, cur, _CMP_LT_OQ);
        const __m256 take = _mm256_or_ps(better, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm256_storeu_ps(a + i, _mm256_blendv_ps(cur, v, take));
      }
      for (; i < inner; ++i)
        if ((max ? row[i] > a[i] : row[i] < a[i]) || std::isnan(row[i])) a[i] = row[i];
    }
    for (int64_t i = 0; i < inner; ++i) y[i] = double(a[i]);
  }
}

}  // namespace avx2
}  // namespace tandem
