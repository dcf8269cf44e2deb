// Per-channel affine (+ ReLU) over plain, channels-last and channel-blocked activations.
#include "runtime/cpu/avx2/ChannelAffine.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

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
