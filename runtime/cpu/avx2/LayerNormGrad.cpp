// LayerNormalizationGrad over f32 rows (runtime/cpu/avx2/Rows.h): AVX2 + FMA where available(),
// the same arithmetic in scalar loops otherwise.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/avx2/Rows.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/avx2/VecExp.h"

namespace tandem {
namespace avx2 {
namespace {

// Rows a block: each block's dscale and dbias partial sums are f32 over its rows, then added
// in block order in f64, so the result does not depend on the thread count.
constexpr int64_t kRowsPerBlock = 32;

TANDEM_AVX2 double sumLanes(__m256 v) {
  __m256d d = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

// One row: *A = sum of g = dy * scale and *B = sum of g * (x - mean) (f32 lanes, f64 total).
TANDEM_AVX2 void rowSumsAvx2(const float* x, const float* dy, const float* scale, int64_t n, float mean, double* A,
                             double* B) {
  const __m256 vm = _mm256_set1_ps(mean);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 g0 = _mm256_mul_ps(_mm256_loadu_ps(dy + i), _mm256_loadu_ps(scale + i));
    const __m256 g1 = _mm256_mul_ps(_mm256_loadu_ps(dy + i + 8), _mm256_loadu_ps(scale + i + 8));
    a0 = _mm256_add_ps(a0, g0);
    a1 = _mm256_add_ps(a1, g1);
    b0 = _mm256_fmadd_ps(g0, _mm256_sub_ps(_mm256_loadu_ps(x + i), vm), b0);
    b1 = _mm256_fmadd_ps(g1, _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm), b1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dy + i), _mm256_loadu_ps(scale + i));
    a0 = _mm256_add_ps(a0, g);
    b0 = _mm256_fmadd_ps(g, _mm256_sub_ps(_mm256_loadu_ps(x + i), vm), b0);
  }
  double ta = 0, tb = 0;
  for (; i < n; ++i) {
    const float g = dy[i] * scale[i];
    ta += g;
    tb += double(g) * (x[i] - mean);
  }
  *A = sumLanes(_mm256_add_ps(a0, a1)) + ta;
  *B = sumLanes(_mm256_add_ps(b0, b1)) + tb;
}

// One row's dx = g * a + (x - mean) * b + e, and ps += dy * (x - mean) * rstd, pb += dy.
TANDEM_AVX2 void rowOutAvx2(const float* x, const float* dy, const float* scale, int64_t n, float mean, float rstd,
                            float a, float b, float e, float* dx, float* ps, float* pb) {
  const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd), va = _mm256_set1_ps(a),
               vb = _mm256_set1_ps(b), ve = _mm256_set1_ps(e);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_loadu_ps(dy + i);
    const __m256 xc = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
    const __m256 g = _mm256_mul_ps(d, _mm256_loadu_ps(scale + i));
    _mm256_storeu_ps(dx + i, _mm256_fmadd_ps(g, va, _mm256_fmadd_ps(xc, vb, ve)));
    _mm256_storeu_ps(ps + i, _mm256_fmadd_ps(d, _mm256_mul_ps(xc, vr), _mm256_loadu_ps(ps + i)));
    _mm256_storeu_ps(pb + i, _mm256_add_ps(_mm256_loadu_ps(pb + i), d));
  }
  for (; i < n; ++i) {
    const float xc = x[i] - mean;
    dx[i] = std::fma(dy[i] * scale[i], a, std::fma(xc, b, e));
    ps[i] = std::fma(dy[i], xc * rstd, ps[i]);
    pb[i] += dy[i];
  }
}

void rowSums(const float* x, const float* dy, const float* scale, int64_t n, float mean, double* A, double* B) {
  double a = 0, b = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i] * scale[i];
    a += g;
    b += double(g) * (x[i] - mean);
  }
  *A = a;
  *B = b;
}

void rowOut(const float* x, const float* dy, const float* scale, int64_t n, float mean, float rstd, float a, float b,
            float e, float* dx, float* ps, float* pb) {
  for (int64_t i = 0; i < n; ++i) {
    const float xc = x[i] - mean;
    dx[i] = std::fma(dy[i] * scale[i], a, std::fma(xc, b, e));
    ps[i] = std::fma(dy[i], xc * rstd, ps[i]);
    pb[i] += dy[i];
  }
}

void meanAndSquaresScalar(const float* x, int64_t n, double* mean, double* squares) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  const double m = s / double(n);
  double q = 0;
  for (int64_t i = 0; i < n; ++i) q += (x[i] - m) * (x[i] - m);
  *mean = m;
  *squares = q;
}

}  // namespace

void layerNormGrad(int64_t rows, int64_t n, const float* x, const float* dy, const float* scale, double eps,
                   float* dx, double* dscale, double* dbias, int threads) {
  std::fill(dscale, dscale + n, 0.0);
  std::fill(dbias, dbias + n, 0.0);
  if (rows <= 0 || n <= 0) return;
  const bool fast = available();
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const int nt = rows * n >= (1 << 16) ? std::max(1, threads) : 1;
  std::vector<float> partial((size_t)(blocks * 2 * n), 0.f);  // per block: dscale, then dbias
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float* ps = partial.data() + blk * 2 * n;
    float* pb = ps + n;
    for (int64_t r = blk * kRowsPerBlock; r < std::min(rows, (blk + 1) * kRowsPerBlock); ++r) {
      const float* xr = x + r * n;
      const float* dyr = dy + r * n;
      double mean, squares, A, B;
      if (fast) meanAndSquares(xr, n, &mean, &squares);
      else meanAndSquaresScalar(xr, n, &mean, &squares);
      const double rstd = 1.0 / std::sqrt(squares / double(n) + eps);
      const float m = float(mean);
      if (fast) rowSumsAvx2(xr, dyr, scale, n, m, &A, &B);
      else rowSums(xr, dyr, scale, n, m, &A, &B);
      // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), xhat = (x - mean) * rstd:
      // g * rstd + (x - mean) * (-rstd^3 B / n) - rstd A / n.
      const float a = float(rstd), b = float(-rstd * rstd * rstd * B / double(n)), e = float(-rstd * A / double(n));
      if (fast) rowOutAvx2(xr, dyr, scale, n, m, float(rstd), a, b, e, dx + r * n, ps, pb);
      else rowOut(xr, dyr, scale, n, m, float(rstd), a, b, e, dx + r * n, ps, pb);
    }
  }
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float* ps = partial.data() + blk * 2 * n;
    for (int64_t i = 0; i < n; ++i) {
      dscale[i] += ps[i];
      dbias[i] += ps[n + i];
    }
  }
}

}  // namespace avx2
}  // namespace tandem
