// The AVX2 + FMA vector exp the CPU kernels share (runtime/cpu/avx2/Activation.cpp, Rows.cpp):
// Cephes' expf, range reduction by ln 2 in two parts, degree-6 polynomial, 2^n through the
// exponent bits; about 1 ulp. Internal to runtime/cpu/avx2 (its .cpp files only: every function
// here is compiled for AVX2 + FMA and must run only where avx2::available()).
#pragma once

#include <immintrin.h>

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

namespace tandem {
namespace avx2 {

// exp(x) for x clamped to [-87.3, 88.3], so 2^n stays a normal float (n in [-126, 127]) and the
// result is finite: exp(88.3) = 2.2e38, exp(-87.3) = 1.2e-38. A NaN becomes -87.3 here; the
// callers put NaN back.
TANDEM_AVX2 inline __m256 expClamped(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

}  // namespace avx2
}  // namespace tandem
