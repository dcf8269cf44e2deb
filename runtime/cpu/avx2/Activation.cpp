// AVX2 + FMA activations from one vector exp (Cephes' expf: range reduction by ln 2 in two
// parts, degree-6 polynomial, 2^n through the exponent bits).
#include "runtime/cpu/avx2/Activation.h"

#include <immintrin.h>

#include "runtime/cpu/avx2/VecExp.h"

namespace tandem {
namespace avx2 {
namespace {

// x / (1 + exp(-z)): the gate of GELU (z = 2u), swish (z = alpha x), and the logistic (x = 1).
TANDEM_AVX2 inline __m256 gated(__m256 x, __m256 z) {
  const __m256 one = _mm256_set1_ps(1.f);
  return _mm256_div_ps(x, _mm256_add_ps(one, expClamped(_mm256_sub_ps(_mm256_setzero_ps(), z))));
}

TANDEM_AVX2 inline __m256 tanhV(__m256 x) {
  const __m256 signMask = _mm256_set1_ps(-0.f);
  const __m256 ax = _mm256_andnot_ps(signMask, x);
  // |x| >= 0.625: 1 - 2 / (exp(2|x|) + 1), then x's sign.
  const __m256 one = _mm256_set1_ps(1.f);
  __m256 big = _mm256_sub_ps(
      one, _mm256_div_ps(_mm256_set1_ps(2.f),
                         _mm256_add_ps(expClamped(_mm256_add_ps(ax, ax)), one)));
  big = _mm256_or_ps(big, _mm256_and_ps(x, signMask));
  // |x| < 0.625: x + x^3 P(x^2) (Cephes tanhf).
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

TANDEM_AVX2 inline __m256 apply(const ActivationStep& s, __m256 x) {
  __m256 y;
  switch (s.kind) {
    case Activation::Tanh:
      y = tanhV(x);
      break;
    case Activation::GeluTanh: {
      // 2 sqrt(2/pi) (x + 0.044715 x^3) = x (c1 + c3 x^2)
      const __m256 x2 = _mm256_mul_ps(x, x);
      const __m256 z = _mm256_mul_ps(
          x, _mm256_fmadd_ps(x2, _mm256_set1_ps(2.f * 0.7978845608028654f * 0.044715f),
                             _mm256_set1_ps(2.f * 0.7978845608028654f)));
      y = gated(x, z);
      break;
    }
    case Activation::Logistic:
      y = gated(_mm256_set1_ps(1.f), x);
      break;
    case Activation::Swish:
    default:
      y = gated(x, _mm256_mul_ps(x, _mm256_set1_ps(s.alpha)));
      break;
  }
  // NaN stays NaN (the clamps above turned it into a number).
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// The last 1-7 elements of a row through a lane mask: the same arithmetic as the full vectors.
TANDEM_AVX2 inline __m256i tailMask(int64_t left) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), lane);
}

TANDEM_AVX2 inline __m256 applyAll(const ActivationStep* steps, int count, __m256 v) {
  for (int s = 0; s < count; ++s) v = apply(steps[s], v);
  return v;
}

}  // namespace

TANDEM_AVX2 void applyActivations(const ActivationStep* steps, int count, float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, applyAll(steps, count, _mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i mask = tailMask(n - i);
    _mm256_maskstore_ps(x + i, mask, applyAll(steps, count, _mm256_maskload_ps(x + i, mask)));
  }
}

TANDEM_AVX2 void applyActivationsTile(const ActivationStep* steps, int count, float* x,
                                      int64_t rows, int64_t cols, int64_t rowStride,
                                      int64_t blockStride) {
  const int64_t full = cols / 8;
  const __m256i mask = tailMask(cols % 8);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * rowStride;
    for (int64_t b = 0; b < full; ++b) {
      float* p = row + b * blockStride;
      _mm256_storeu_ps(p, applyAll(steps, count, _mm256_loadu_ps(p)));
    }
    if (cols % 8) {
      float* p = row + full * blockStride;
      _mm256_maskstore_ps(p, mask, applyAll(steps, count, _mm256_maskload_ps(p, mask)));
    }
  }
}

}  // namespace avx2
}  // namespace tandem
