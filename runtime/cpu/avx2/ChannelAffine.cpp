// Per-channel affine (+ ReLU) over plain, channels-last and channel-blocked activations.
#include "runtime/cpu/avx2/ChannelAffine.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/avx2/Activation.h"
#include "runtime/cpu/avx2/Sgemm.h"

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

namespace tandem {
namespace avx2 {

namespace {

// y[i] = x[i] * a + b over one channel's run (plain layout).
TANDEM_AVX2 void runScalarAvx2(const float* x, float* y, int64_t n, float a, float b, bool relu) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b), z = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, vb);
    _mm256_storeu_ps(y + i, relu ? _mm256_max_ps(v, z) : v);
  }
  for (; i < n; ++i) {
    float v = std::fma(x[i], a, b);
    y[i] = relu ? std::max(v, 0.f) : v;
  }
}

// y[i] = x[i] * a[i % period] + b[i % period] for `count` vectors of `period` channels
// (channels-last: period C, count pixels; blocked: period 8 or 16, count S).
TANDEM_AVX2 void runVectorAvx2(const float* x, float* y, int64_t count, int64_t period,
                               const float* a, const float* b, bool relu) {
  const __m256 z = _mm256_setzero_ps();
  if (period == 8 || period == 16) {
    // The parameters stay in registers across the whole plane.
    const __m256 a0 = _mm256_loadu_ps(a), b0 = _mm256_loadu_ps(b);
    const __m256 a1 = period == 16 ? _mm256_loadu_ps(a + 8) : a0;
    const __m256 b1 = period == 16 ? _mm256_loadu_ps(b + 8) : b0;
    const int64_t n = count * period;
    for (int64_t i = 0; i < n; i += period) {
      __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), a0, b0);
      _mm256_storeu_ps(y + i, relu ? _mm256_max_ps(v, z) : v);
      if (period == 16) {
        __m256 w = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), a1, b1);
        _mm256_storeu_ps(y + i + 8, relu ? _mm256_max_ps(w, z) : w);
      }
    }
    return;
  }
  for (int64_t p = 0; p < count; ++p) {
    const float* xp = x + p * period;
    float* yp = y + p * period;
    int64_t c = 0;
    for (; c + 8 <= period; c += 8) {
      __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(xp + c), _mm256_loadu_ps(a + c),
                                 _mm256_loadu_ps(b + c));
      _mm256_storeu_ps(yp + c, relu ? _mm256_max_ps(v, z) : v);
    }
    for (; c < period; ++c) {
      float v = std::fma(xp[c], a[c], b[c]);
      yp[c] = relu ? std::max(v, 0.f) : v;
    }
  }
}

// y[p * yStride + c] = x[p * xStride + c] * a[c] + b[c] for `count` pixels of `period`
// channels (a channels-last input written into its slice of a wider output). Runs of 32
// channels keep their parameters in registers across the pixels.
TANDEM_AVX2 void runStridedAvx2(const float* x, int64_t xStride, float* y, int64_t yStride,
                                int64_t count, int64_t period, const float* a, const float* b,
                                bool relu) {
  const __m256 z = _mm256_setzero_ps();
  int64_t c0 = 0;
  for (; c0 + 32 <= period; c0 += 32) {
    __m256 va[4], vb[4];
    for (int j = 0; j < 4; ++j) {
      va[j] = _mm256_loadu_ps(a + c0 + 8 * j);
      vb[j] = _mm256_loadu_ps(b + c0 + 8 * j);
    }
    for (int64_t p = 0; p < count; ++p) {
      const float* xp = x + p * xStride + c0;
      float* yp = y + p * yStride + c0;
      for (int j = 0; j < 4; ++j) {
        __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(xp + 8 * j), va[j], vb[j]);
        _mm256_storeu_ps(yp + 8 * j, relu ? _mm256_max_ps(v, z) : v);
      }
    }
  }
  if (c0 == period) return;
  for (int64_t p = 0; p < count; ++p) {
    const float* xp = x + p * xStride;
    float* yp = y + p * yStride;
    int64_t c = c0;
    for (; c + 8 <= period; c += 8) {
      __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(xp + c), _mm256_loadu_ps(a + c),
                                 _mm256_loadu_ps(b + c));
      _mm256_storeu_ps(yp + c, relu ? _mm256_max_ps(v, z) : v);
    }
    for (; c < period; ++c) {
      float v = std::fma(xp[c], a[c], b[c]);
      yp[c] = relu ? std::max(v, 0.f) : v;
    }
  }
}

void runStrided(const float* x, int64_t xStride, float* y, int64_t yStride, int64_t count,
                int64_t period, const float* a, const float* b, bool relu) {
  for (int64_t p = 0; p < count; ++p)
    for (int64_t c = 0; c < period; ++c) {
      float v = std::fma(x[p * xStride + c], a[c], b[c]);
      y[p * yStride + c] = relu ? std::max(v, 0.f) : v;
    }
}

void runScalar(const float* x, float* y, int64_t n, float a, float b, bool relu) {
  for (int64_t i = 0; i < n; ++i) {
    float v = std::fma(x[i], a, b);
    y[i] = relu ? std::max(v, 0.f) : v;
  }
}

void runVector(const float* x, float* y, int64_t count, int64_t period, const float* a,
               const float* b, bool relu) {
  for (int64_t p = 0; p < count; ++p)
    for (int64_t c = 0; c < period; ++c) {
      float v = std::fma(x[p * period + c], a[c], b[c]);
      y[p * period + c] = relu ? std::max(v, 0.f) : v;
    }
}

}  // namespace

void channelAffine(ChannelLayout layout, int64_t N, int64_t C, int64_t S, const float* scale,
                   const float* shift, bool relu, const float* src, float* dst, int threads) {
  const bool fast = available();
  const int nt = std::max(1, threads);
  switch (layout) {
    case ChannelLayout::Plain: {
      // One run of S per (n, c).
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
      for (int64_t r = 0; r < N * C; ++r) {
        const int64_t c = r % C;
        if (fast) runScalarAvx2(src + r * S, dst + r * S, S, scale[c], shift[c], relu);
        else runScalar(src + r * S, dst + r * S, S, scale[c], shift[c], relu);
      }
      break;
    }
    case ChannelLayout::ChannelsLast: {
      // Chunks of pixels, each a vector of C channels.
      const int64_t pixels = N * S, chunk = std::max<int64_t>(1, 4096 / std::max<int64_t>(C, 1));
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
      for (int64_t p0 = 0; p0 < pixels; p0 += chunk) {
        const int64_t cnt = std::min(chunk, pixels - p0);
        if (fast) runVectorAvx2(src + p0 * C, dst + p0 * C, cnt, C, scale, shift, relu);
        else runVector(src + p0 * C, dst + p0 * C, cnt, C, scale, shift, relu);
      }
      break;
    }
    case ChannelLayout::Blocked8:
    case ChannelLayout::Blocked16: {
      // One plane of S vectors per (n, channel block).
      const int64_t X = layout == ChannelLayout::Blocked8 ? 8 : 16, CB = C / X;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
      for (int64_t r = 0; r < N * CB; ++r) {
        const int64_t cb = r % CB;
        const float* x = src + r * S * X;
        float* y = dst + r * S * X;
        if (fast) runVectorAvx2(x, y, S, X, scale + cb * X, shift + cb * X, relu);
        else runVector(x, y, S, X, scale + cb * X, shift + cb * X, relu);
      }
      break;
    }
  }
}

void concatChannelAffine(ChannelLayout layout, int64_t N, int64_t S,
                         const std::vector<const float*>& srcs,
                         const std::vector<int64_t>& channels, const float* scale,
                         const float* shift, bool relu, float* dst, int threads) {
  const bool fast = available();
  const int nt = std::max(1, threads);
  const int64_t k = (int64_t)srcs.size();
  std::vector<int64_t> offset(k + 1, 0);  // the first output channel of input i
  for (int64_t i = 0; i < k; ++i) offset[i + 1] = offset[i] + channels[i];
  const int64_t C = offset[k];
  if (layout == ChannelLayout::ChannelsLast) {
    // Chunks of pixels; per pixel, input i's C_i channels land at channel offset[i] of C.
    const int64_t pixels = N * S, chunk = std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1));
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t p0 = 0; p0 < pixels; p0 += chunk) {
      const int64_t end = std::min(pixels, p0 + chunk);
      for (int64_t i = 0; i < k; ++i) {
        const int64_t ci = channels[i];
        const float* x = srcs[i] + p0 * ci;
        float* y = dst + p0 * C + offset[i];
        if (fast) runStridedAvx2(x, ci, y, C, end - p0, ci, scale + offset[i], shift + offset[i], relu);
        else runStrided(x, ci, y, C, end - p0, ci, scale + offset[i], shift + offset[i], relu);
      }
    }
    return;
  }
  // Plain and blocked: each input is one contiguous run per image, of runs of `unit` channels
  // (1 plain, 8 or 16 blocked) that each cover S positions; row r of the output is (image,
  // unit of channels), and its input row is found by the unit's input.
  const int64_t unit = layout == ChannelLayout::Plain ? 1 : layout == ChannelLayout::Blocked8 ? 8 : 16;
  const int64_t units = C / unit;
  std::vector<int64_t> inputOf(units), localUnit(units);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t u = offset[i] / unit; u < offset[i + 1] / unit; ++u) {
      inputOf[u] = i;
      localUnit[u] = u - offset[i] / unit;
    }
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t r = 0; r < N * units; ++r) {
    const int64_t n = r / units, u = r % units, i = inputOf[u];
    const float* x = srcs[i] + (n * (channels[i] / unit) + localUnit[u]) * S * unit;
    float* y = dst + r * S * unit;
    const int64_t c = u * unit;
    if (unit == 1) {
      if (fast) runScalarAvx2(x, y, S, scale[c], shift[c], relu);
      else runScalar(x, y, S, scale[c], shift[c], relu);
    } else if (fast) {
      runVectorAvx2(x, y, S, unit, scale + c, shift + c, relu);
    } else {
      runVector(x, y, S, unit, scale + c, shift + c, relu);
    }
  }
}

namespace {

// groupNorm's moments: f32 sums over at most this many elements, then f64.
constexpr int64_t kMomentChunk = 4096;
// Below this many elements groupNorm runs on the calling thread (OpenMP's fork costs more).
constexpr int64_t kGroupNormParallelMin = 32768;

TANDEM_AVX2 double horizontalSumF64(__m256 v) {
  __m256d d = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                            _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  __m128d h = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

TANDEM_AVX2 void accumulateF64(double* acc, __m256 v) {
  _mm256_storeu_pd(acc, _mm256_add_pd(_mm256_loadu_pd(acc), _mm256_cvtps_pd(_mm256_castps256_ps128(v))));
  _mm256_storeu_pd(acc + 4, _mm256_add_pd(_mm256_loadu_pd(acc + 4),
                                          _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
}

// One channel's run of n elements (plain layout): *sum += the sum of d = x[i] - k, *sq += the
// sum of d * d.
TANDEM_AVX2 void runMomentsAvx2(const float* x, int64_t n, float k, double* sum, double* sq) {
  const __m256 vk = _mm256_set1_ps(k);
  double s = 0, q = 0;
  for (int64_t i0 = 0; i0 < n; i0 += kMomentChunk) {
    const int64_t e = std::min(n, i0 + kMomentChunk);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
    int64_t i = i0;
    for (; i + 16 <= e; i += 16) {
      __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vk);
      __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vk);
      s0 = _mm256_add_ps(s0, d0);
      q0 = _mm256_fmadd_ps(d0, d0, q0);
      s1 = _mm256_add_ps(s1, d1);
      q1 = _mm256_fmadd_ps(d1, d1, q1);
    }
    for (; i + 8 <= e; i += 8) {
      __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vk);
      s0 = _mm256_add_ps(s0, d);
      q0 = _mm256_fmadd_ps(d, d, q0);
    }
    float ts = 0, tq = 0;
    for (; i < e; ++i) {
      float d = x[i] - k;
      ts += d;
      tq += d * d;
    }
    s += horizontalSumF64(_mm256_add_ps(s0, s1)) + ts;
    q += horizontalSumF64(_mm256_add_ps(q0, q1)) + tq;
  }
  *sum += s;
  *sq += q;
}

void runMoments(const float* x, int64_t n, float k, double* sum, double* sq) {
  double s = 0, q = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = double(x[i]) - k;
    s += d;
    q += d * d;
  }
  *sum += s;
  *sq += q;
}

// `count` vectors of `period` lanes, one after another (channels-last pixels, or a blocked
// plane): lane c's sums of d = x - k[c] and d * d are added to sum[c] and sq[c].
TANDEM_AVX2 void laneMomentsAvx2(const float* x, int64_t count, int64_t period, const float* k,
                                 double* sum, double* sq) {
  const int64_t chunk = std::max<int64_t>(16, kMomentChunk / period);
  for (int64_t p0 = 0; p0 < count; p0 += chunk) {
    const int64_t e = std::min(count, p0 + chunk);
    int64_t c = 0;
    for (; c + 8 <= period; c += 8) {
      const __m256 vk = _mm256_loadu_ps(k + c);
      __m256 s0 = _mm256_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
      int64_t p = p0;
      for (; p + 2 <= e; p += 2) {
        __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + p * period + c), vk);
        __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + (p + 1) * period + c), vk);
        s0 = _mm256_add_ps(s0, d0);
        q0 = _mm256_fmadd_ps(d0, d0, q0);
        s1 = _mm256_add_ps(s1, d1);
        q1 = _mm256_fmadd_ps(d1, d1, q1);
      }
      if (p < e) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + p * period + c), vk);
        s0 = _mm256_add_ps(s0, d);
        q0 = _mm256_fmadd_ps(d, d, q0);
      }
      accumulateF64(sum + c, _mm256_add_ps(s0, s1));
      accumulateF64(sq + c, _mm256_add_ps(q0, q1));
    }
    for (; c < period; ++c) {
      float ts = 0, tq = 0;
      for (int64_t p = p0; p < e; ++p) {
        float d = x[p * period + c] - k[c];
        ts += d;
        tq += d * d;
      }
      sum[c] += ts;
      sq[c] += tq;
    }
  }
}

void laneMoments(const float* x, int64_t count, int64_t period, const float* k, double* sum,
                 double* sq) {
  for (int64_t p = 0; p < count; ++p)
    for (int64_t c = 0; c < period; ++c) {
      double d = double(x[p * period + c]) - k[c];
      sum[c] += d;
      sq[c] += d * d;
    }
}

// groupNorm's affine pass: y = (x - k) * a + b over one channel's run (plain layout), k the
// channel's shift: x - k is exact where x is near k, so a mean far from 0 costs no precision.
TANDEM_AVX2 void centeredRunAvx2(const float* x, float* y, int64_t n, float k, float a, float b) {
  const __m256 vk = _mm256_set1_ps(k), va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vk), va, vb));
  for (; i < n; ++i) y[i] = std::fma(x[i] - k, a, b);
}

void centeredRun(const float* x, float* y, int64_t n, float k, float a, float b) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(x[i] - k, a, b);
}

// The same over `count` vectors of `period` lanes, lane c with k[c], a[c], b[c].
TANDEM_AVX2 void centeredLanesAvx2(const float* x, float* y, int64_t count, int64_t period,
                                   const float* k, const float* a, const float* b) {
  if (period == 8 || period == 16) {
    // The parameters stay in registers across the plane.
    const __m256 k0 = _mm256_loadu_ps(k), a0 = _mm256_loadu_ps(a), b0 = _mm256_loadu_ps(b);
    const __m256 k1 = period == 16 ? _mm256_loadu_ps(k + 8) : k0;
    const __m256 a1 = period == 16 ? _mm256_loadu_ps(a + 8) : a0;
    const __m256 b1 = period == 16 ? _mm256_loadu_ps(b + 8) : b0;
    for (int64_t i = 0; i < count * period; i += period) {
      _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), k0), a0, b0));
      if (period == 16)
        _mm256_storeu_ps(y + i + 8,
                         _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), k1), a1, b1));
    }
    return;
  }
  for (int64_t p = 0; p < count; ++p) {
    const float* xp = x + p * period;
    float* yp = y + p * period;
    int64_t c = 0;
    for (; c + 8 <= period; c += 8)
      _mm256_storeu_ps(yp + c, _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(xp + c), _mm256_loadu_ps(k + c)),
                                               _mm256_loadu_ps(a + c), _mm256_loadu_ps(b + c)));
    for (; c < period; ++c) yp[c] = std::fma(xp[c] - k[c], a[c], b[c]);
  }
}

void centeredLanes(const float* x, float* y, int64_t count, int64_t period, const float* k,
                   const float* a, const float* b) {
  for (int64_t p = 0; p < count; ++p)
    for (int64_t c = 0; c < period; ++c)
      y[p * period + c] = std::fma(x[p * period + c] - k[c], a[c], b[c]);
}

// batchNormTrainingGrad's sums over one channel's run of n elements (plain layout): *sdy +=
// the sum of dy, *sdyx += the sum of dy * (x - k).
TANDEM_AVX2 void runGradSumsAvx2(const float* x, const float* dy, int64_t n, float k, double* sdy,
                                 double* sdyx) {
  const __m256 vk = _mm256_set1_ps(k);
  double s = 0, q = 0;
  for (int64_t i0 = 0; i0 < n; i0 += kMomentChunk) {
    const int64_t e = std::min(n, i0 + kMomentChunk);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, q0 = s0, q1 = s0;
    int64_t i = i0;
    for (; i + 16 <= e; i += 16) {
      const __m256 g0 = _mm256_loadu_ps(dy + i), g1 = _mm256_loadu_ps(dy + i + 8);
      s0 = _mm256_add_ps(s0, g0);
      q0 = _mm256_fmadd_ps(g0, _mm256_sub_ps(_mm256_loadu_ps(x + i), vk), q0);
      s1 = _mm256_add_ps(s1, g1);
      q1 = _mm256_fmadd_ps(g1, _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vk), q1);
    }
    for (; i + 8 <= e; i += 8) {
      const __m256 g = _mm256_loadu_ps(dy + i);
      s0 = _mm256_add_ps(s0, g);
      q0 = _mm256_fmadd_ps(g, _mm256_sub_ps(_mm256_loadu_ps(x + i), vk), q0);
    }
    float ts = 0, tq = 0;
    for (; i < e; ++i) {
      ts += dy[i];
      tq += dy[i] * (x[i] - k);
    }
    s += horizontalSumF64(_mm256_add_ps(s0, s1)) + ts;
    q += horizontalSumF64(_mm256_add_ps(q0, q1)) + tq;
  }
  *sdy += s;
  *sdyx += q;
}

void runGradSums(const float* x, const float* dy, int64_t n, float k, double* sdy, double* sdyx) {
  double s = 0, q = 0;
  for (int64_t i = 0; i < n; ++i) {
    s += dy[i];
    q += double(dy[i]) * (double(x[i]) - k);
  }
  *sdy += s;
  *sdyx += q;
}

// dx = a * dy + b * (x - k) + e over one channel's run (plain layout).
TANDEM_AVX2 void runGradOutAvx2(const float* x, const float* dy, float* dx, int64_t n, float k,
                                float a, float b, float e) {
  const __m256 vk = _mm256_set1_ps(k), va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b),
               ve = _mm256_set1_ps(e);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vk), vb, ve);
    _mm256_storeu_ps(dx + i, _mm256_fmadd_ps(_mm256_loadu_ps(dy + i), va, t));
  }
  for (; i < n; ++i) dx[i] = std::fma(dy[i], a, std::fma(x[i] - k, b, e));
}

void runGradOut(const float* x, const float* dy, float* dx, int64_t n, float k, float a, float b,
                float e) {
  for (int64_t i = 0; i < n; ++i) dx[i] = std::fma(dy[i], a, std::fma(x[i] - k, b, e));
}

void siluInPlace(float* y, int64_t n, bool fast) {
  if (fast) {
    const ActivationStep swish{Activation::Swish, 1.f};
    applyActivations(&swish, 1, y, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] / (1.f + std::exp(-y[i]));
}

}  // namespace

namespace {

// The per-(image, channel) moments groupNorm and batchNormTraining combine: k[n * C + c] is
// the channel's first element in image n, sum and sq the sums of x - k and (x - k)^2 over its
// S elements (f32 within kMomentChunk, f64 across), for `layout`'s storage.
struct ChannelMoments {
  std::vector<float> k;
  std::vector<double> sum, sq;
};

ChannelMoments channelMoments(ChannelLayout layout, int64_t N, int64_t C, int64_t S,
                              const float* src, int nt, bool fast) {
  const int64_t X = layout == ChannelLayout::Blocked8 ? 8 : layout == ChannelLayout::Blocked16 ? 16 : 1;
  const int64_t CB = C / X;
  // Where (n, c, s = 0) is stored.
  auto first = [&](int64_t n, int64_t c) -> int64_t {
    switch (layout) {
      case ChannelLayout::Plain: return (n * C + c) * S;
      case ChannelLayout::ChannelsLast: return n * S * C + c;
      default: return (n * CB + c / X) * S * X + c % X;
    }
  };
  ChannelMoments m;
  std::vector<float>& k = m.k;
  std::vector<double>& sum = m.sum;
  std::vector<double>& sq = m.sq;
  k.resize(N * C);
  sum.assign(N * C, 0.0);
  sq.assign(N * C, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) k[n * C + c] = src[first(n, c)];
  switch (layout) {
    case ChannelLayout::Plain: {
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
      for (int64_t r = 0; r < N * C; ++r) {
        if (fast) runMomentsAvx2(src + r * S, S, k[r], &sum[r], &sq[r]);
        else runMoments(src + r * S, S, k[r], &sum[r], &sq[r]);
      }
      break;
    }
    case ChannelLayout::ChannelsLast: {
      // Each image's pixels in `parts` ranges, each with its own f64 sums per channel.
      const int64_t parts = std::min<int64_t>(nt, S);
      std::vector<double> ps(N * parts * C, 0.0), pq(N * parts * C, 0.0);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
      for (int64_t u = 0; u < N * parts; ++u) {
        const int64_t n = u / parts, j = u % parts, p0 = S * j / parts, p1 = S * (j + 1) / parts;
        const float* x = src + (n * S + p0) * C;
        if (fast) laneMomentsAvx2(x, p1 - p0, C, &k[n * C], &ps[u * C], &pq[u * C]);
        else laneMoments(x, p1 - p0, C, &k[n * C], &ps[u * C], &pq[u * C]);
      }
      for (int64_t u = 0; u < N * parts; ++u)
        for (int64_t c = 0; c < C; ++c) {
          sum[(u / parts) * C + c] += ps[u * C + c];
          sq[(u / parts) * C + c] += pq[u * C + c];
        }
      break;
    }
    case ChannelLayout::Blocked8:
    case ChannelLayout::Blocked16: {
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
      for (int64_t r = 0; r < N * CB; ++r) {
        const int64_t c = (r / CB) * C + (r % CB) * X;
        if (fast) laneMomentsAvx2(src + r * S * X, S, X, &k[c], &sum[c], &sq[c]);
        else laneMoments(src + r * S * X, S, X, &k[c], &sum[c], &sq[c]);
      }
      break;
    }
  }
  return m;
}

// Per channel, its mean and population variance over the N images' moments (S elements each)
// by Chan et al.'s combination, in f64.
void batchStatistics(const ChannelMoments& m, int64_t N, int64_t C, int64_t S, double* mean,
                     double* var) {
  for (int64_t c = 0; c < C; ++c) {
    double mu = 0;
    for (int64_t n = 0; n < N; ++n) mu += m.k[n * C + c] + m.sum[n * C + c] / double(S);
    mu /= double(N);
    double m2 = 0;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t r = n * C + c;
      const double mc = m.k[r] + m.sum[r] / double(S);
      m2 += (m.sq[r] - m.sum[r] * m.sum[r] / double(S)) + double(S) * (mc - mu) * (mc - mu);
    }
    mean[c] = mu;
    var[c] = std::max(0.0, m2 / double(N * S));
  }
}

// y = (x - k) * a + b per (image, channel), the parameters indexed n * C + c, then SiLU.
void centeredAffine(ChannelLayout layout, int64_t N, int64_t C, int64_t S, const float* src,
                    float* dst, const float* k, const float* a, const float* b, bool silu, int nt,
                    bool fast) {
  const int64_t X = layout == ChannelLayout::Blocked8 ? 8 : layout == ChannelLayout::Blocked16 ? 16 : 1;
  const int64_t CB = C / X;
  switch (layout) {
    case ChannelLayout::Plain: {
      // Runs of at most kMomentChunk of one channel: SiLU reads each while it is in L1.
      const int64_t pieces = (S + kMomentChunk - 1) / kMomentChunk;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
      for (int64_t u = 0; u < N * C * pieces; ++u) {
        const int64_t r = u / pieces, s0 = (u % pieces) * kMomentChunk;
        const int64_t len = std::min(kMomentChunk, S - s0);
        const float* x = src + r * S + s0;
        float* y = dst + r * S + s0;
        if (fast) centeredRunAvx2(x, y, len, k[r], a[r], b[r]);
        else centeredRun(x, y, len, k[r], a[r], b[r]);
        if (silu) siluInPlace(y, len, fast);
      }
      break;
    }
    case ChannelLayout::ChannelsLast:
    case ChannelLayout::Blocked8:
    case ChannelLayout::Blocked16: {
      // Pieces of at most kMomentChunk floats of one image (channels-last: whole pixels) or
      // of one (image, channel block) plane.
      const int64_t period = layout == ChannelLayout::ChannelsLast ? C : X;
      const int64_t planes = layout == ChannelLayout::ChannelsLast ? N : N * CB;
      const int64_t pixels = std::max<int64_t>(1, kMomentChunk / period);
      const int64_t pieces = (S + pixels - 1) / pixels;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
      for (int64_t u = 0; u < planes * pieces; ++u) {
        const int64_t r = u / pieces, p0 = (u % pieces) * pixels;
        const int64_t cnt = std::min(pixels, S - p0);
        // The plane's parameters: image n's, from its channel block on.
        const int64_t c = layout == ChannelLayout::ChannelsLast ? r * C : (r / CB) * C + (r % CB) * X;
        const float* x = src + (r * S + p0) * period;
        float* y = dst + (r * S + p0) * period;
        if (fast) centeredLanesAvx2(x, y, cnt, period, &k[c], &a[c], &b[c]);
        else centeredLanes(x, y, cnt, period, &k[c], &a[c], &b[c]);
        if (silu) siluInPlace(y, cnt * period, fast);
      }
      break;
    }
  }
}

}  // namespace

void groupNorm(ChannelLayout layout, int64_t N, int64_t C, int64_t S, int64_t groups,
               const float* scale, const float* bias, float eps, bool silu, const float* src,
               float* dst, int threads) {
  if (N <= 0 || C <= 0 || S <= 0 || groups <= 0 || C % groups != 0) return;
  const bool fast = available();
  const int nt = N * C * S >= kGroupNormParallelMin ? std::max(1, threads) : 1;
  const ChannelMoments m = channelMoments(layout, N, C, S, src, nt, fast);
  // Chan et al.'s combination of the group's channels (each S elements), then per (n, c)
  // y = (x - k) * a + b: b = bias + (k - mean) * a, in f64.
  const int64_t Cg = C / groups;
  std::vector<float> a(N * C), b(N * C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = n * C + g * Cg;
      double mean = 0;
      for (int64_t c = c0; c < c0 + Cg; ++c) mean += m.k[c] + m.sum[c] / double(S);
      mean /= double(Cg);
      double m2 = 0;
      for (int64_t c = c0; c < c0 + Cg; ++c) {
        const double mc = m.k[c] + m.sum[c] / double(S);
        m2 += (m.sq[c] - m.sum[c] * m.sum[c] / double(S)) + double(S) * (mc - mean) * (mc - mean);
      }
      const double var = std::max(0.0, m2 / double(Cg * S));
      const double rstd = 1.0 / std::sqrt(var + double(eps));
      for (int64_t c = c0; c < c0 + Cg; ++c) {
        const double ac = double(scale[c - n * C]) * rstd;
        a[c] = float(ac);
        b[c] = float(double(bias[c - n * C]) + (double(m.k[c]) - mean) * ac);
      }
    }
  centeredAffine(layout, N, C, S, src, dst, m.k.data(), a.data(), b.data(), silu, nt, fast);
}

void batchNormTraining(ChannelLayout layout, int64_t N, int64_t C, int64_t S, const float* scale,
                       const float* bias, float eps, const float* src, float* dst, double* mean,
                       double* var, int threads) {
  if (N <= 0 || C <= 0 || S <= 0) return;
  const bool fast = available();
  const int nt = N * C * S >= kGroupNormParallelMin ? std::max(1, threads) : 1;
  const ChannelMoments m = channelMoments(layout, N, C, S, src, nt, fast);
  batchStatistics(m, N, C, S, mean, var);
  std::vector<float> a(N * C), b(N * C);
  for (int64_t c = 0; c < C; ++c) {
    const double ac = double(scale[c]) / std::sqrt(var[c] + double(eps));
    for (int64_t n = 0; n < N; ++n) {
      a[n * C + c] = float(ac);
      b[n * C + c] = float(double(bias[c]) + (double(m.k[n * C + c]) - mean[c]) * ac);
    }
  }
  centeredAffine(layout, N, C, S, src, dst, m.k.data(), a.data(), b.data(), false, nt, fast);
}

void batchNormTrainingGrad(int64_t N, int64_t C, int64_t S, const float* x, const float* dy,
                           const float* scale, float eps, float* dx, double* dscale,
                           double* dbias, int threads) {
  if (N <= 0 || C <= 0 || S <= 0) return;
  const bool fast = available();
  const int nt = N * C * S >= kGroupNormParallelMin ? std::max(1, threads) : 1;
  // 1. The batch statistics (batchNormTraining's).
  const ChannelMoments m = channelMoments(ChannelLayout::Plain, N, C, S, x, nt, fast);
  std::vector<double> mean(C), rstd(C);
  batchStatistics(m, N, C, S, mean.data(), rstd.data());
  for (double& r : rstd) r = 1.0 / std::sqrt(r + double(eps));
  // 2. Per (n, c): the sums of dy and of dy * (x - k).
  std::vector<double> sdy(N * C, 0.0), sdyx(N * C, 0.0);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t r = 0; r < N * C; ++r) {
    if (fast) runGradSumsAvx2(x + r * S, dy + r * S, S, m.k[r], &sdy[r], &sdyx[r]);
    else runGradSums(x + r * S, dy + r * S, S, m.k[r], &sdy[r], &sdyx[r]);
  }
  // 3. Per channel dbias = sum dy, dscale = rstd * sum dy * (x - mean); then per (n, c)
  //    dx = a dy + b (x - k) + e with a = scale rstd, b = -a rstd dscale / M and
  //    e = -a dbias / M + b (k - mean), which is a (dy - mean(dy) - xhat mean(dy xhat)).
  const double M = double(N * S);
  std::vector<float> a(C), b(C), e(N * C);
  for (int64_t c = 0; c < C; ++c) {
    double sumDy = 0, sumDyXc = 0;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t r = n * C + c;
      sumDy += sdy[r];
      sumDyXc += sdyx[r] + (double(m.k[r]) - mean[c]) * sdy[r];
    }
    dbias[c] = sumDy;
    dscale[c] = sumDyXc * rstd[c];
    const double ac = double(scale[c]) * rstd[c], bc = -ac * rstd[c] * dscale[c] / M;
    a[c] = float(ac);
    b[c] = float(bc);
    for (int64_t n = 0; n < N; ++n)
      e[n * C + c] = float(-ac * sumDy / M + bc * (double(m.k[n * C + c]) - mean[c]));
  }
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t r = 0; r < N * C; ++r) {
    const int64_t c = r % C;
    if (fast) runGradOutAvx2(x + r * S, dy + r * S, dx + r * S, S, m.k[r], a[c], b[c], e[r]);
    else runGradOut(x + r * S, dy + r * S, dx + r * S, S, m.k[r], a[c], b[c], e[r]);
  }
}

void foldBatchNorm(int64_t C, const float* gamma, const float* beta, const float* mean,
                   const float* var, float eps, float* scale, float* shift) {
  for (int64_t c = 0; c < C; ++c) {
    float s = gamma[c] / std::sqrt(var[c] + eps);
    scale[c] = s;
    shift[c] = beta[c] - mean[c] * s;
  }
}

}  // namespace avx2
}  // namespace tandem
