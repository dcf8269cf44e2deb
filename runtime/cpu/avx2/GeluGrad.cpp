// AVX2 + FMA GeluGrad (Gelu's backward, autodiff's GeluGrad op): dX = dY * Gelu'(X) in one
// pass, both forms, over OpenMP threads. See Activation.h for the formulas and accuracy.
#include <immintrin.h>

#include <algorithm>

#include "runtime/cpu/avx2/Activation.h"
#include "runtime/cpu/avx2/VecExp.h"

namespace tandem {
namespace avx2 {
namespace {

// erf(z), Eigen's generic_fast_erf_float: an odd degree-13 over an even degree-8 polynomial on
// z clamped to [-4, 4] (erf is +-1 in f32 beyond); 6.5e-8 absolute error.
TANDEM_AVX2 inline __m256 erfV(__m256 z) {
  z = _mm256_min_ps(_mm256_max_ps(z, _mm256_set1_ps(-4.f)), _mm256_set1_ps(4.f));
  const __m256 z2 = _mm256_mul_ps(z, z);
  __m256 p = _mm256_set1_ps(-2.72614225801306e-10f);
  p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(2.77068142495902e-08f));
  p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(-2.10102402082508e-06f));
  p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(-5.69250639462346e-05f));
  p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(-7.34990630326855e-04f));
  p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(-2.95459980854025e-03f));
  p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(-1.60960333262415e-02f));
  p = _mm256_mul_ps(p, z);
  __m256 q = _mm256_set1_ps(-1.45660718464996e-05f);
  q = _mm256_fmadd_ps(q, z2, _mm256_set1_ps(-2.13374055278905e-04f));
  q = _mm256_fmadd_ps(q, z2, _mm256_set1_ps(-1.68282697438203e-03f));
  q = _mm256_fmadd_ps(q, z2, _mm256_set1_ps(-7.37332916720468e-03f));
  q = _mm256_fmadd_ps(q, z2, _mm256_set1_ps(-1.42647390514189e-02f));
  return _mm256_div_ps(p, q);
}

// Gelu'(x) for either form.
template <bool kTanh>
TANDEM_AVX2 inline __m256 derivative(__m256 x) {
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-20.f)), _mm256_set1_ps(20.f));
  const __m256 x2 = _mm256_mul_ps(xc, xc);
  __m256 d;
  if (kTanh) {
    // 2u = x (c1 + c3 x^2), c1 = 2 sqrt(2/pi), c3 = c1 * 0.044715; d(2u)/dx = c1 + 3 c3 x^2.
    constexpr float c1 = 2.f * 0.7978845608028654f, c3 = c1 * 0.044715f;
    const __m256 one = _mm256_set1_ps(1.f);
    const __m256 twoU = _mm256_mul_ps(xc, _mm256_fmadd_ps(x2, _mm256_set1_ps(c3), _mm256_set1_ps(c1)));
    const __m256 e = expClamped(_mm256_sub_ps(_mm256_setzero_ps(), twoU));
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
    const __m256 slope = _mm256_fmadd_ps(x2, _mm256_set1_ps(3.f * c3), _mm256_set1_ps(c1));
    // s + x s (1 - s) slope, with 1 - s = e s: no cancellation where s is near 1 (x > 3).
    d = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(xc, s), _mm256_mul_ps(e, s)), slope, s);
  } else {
    // Phi(x) + x phi(x) = 0.5 + 0.5 erf(x / sqrt 2) + x exp(-x^2 / 2) / sqrt(2 pi)
    const __m256 half = _mm256_set1_ps(0.5f);
    const __m256 cdf = _mm256_fmadd_ps(half, erfV(_mm256_mul_ps(xc, _mm256_set1_ps(0.70710678118654752f))), half);
    const __m256 pdf = _mm256_mul_ps(expClamped(_mm256_mul_ps(x2, _mm256_set1_ps(-0.5f))),
                                     _mm256_set1_ps(0.39894228040143268f));
    d = _mm256_fmadd_ps(xc, pdf, cdf);
  }
  // NaN stays NaN (the clamps turned it into a number).
  return _mm256_blendv_ps(d, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

template <bool kTanh>
TANDEM_AVX2 void geluGradRange(const float* dy, const float* x, float* dx, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8)
    _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(dy + i), derivative<kTanh>(_mm256_loadu_ps(x + i))));
  if (i < end) {
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(end - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 d = derivative<kTanh>(_mm256_maskload_ps(x + i, mask));
    _mm256_maskstore_ps(dx + i, mask, _mm256_mul_ps(_mm256_maskload_ps(dy + i, mask), d));
  }
}

}  // namespace

void geluGrad(const float* dy, const float* x, float* dx, int64_t n, bool tanhForm, int threads) {
  if (n <= 0) return;
  constexpr int64_t kBlock = 16384;  // 64 KiB of each operand: a thread's share stays in L2
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int nt = n >= (1 << 16) ? (int)std::min<int64_t>(std::max(1, threads), blocks) : 1;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
    if (tanhForm) geluGradRange<true>(dy, x, dx, begin, end);
    else geluGradRange<false>(dy, x, dx, begin, end);
  }
}

}  // namespace avx2
}  // namespace tandem
