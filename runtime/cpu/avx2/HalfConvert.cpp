// f16 <-> f32 arrays with F16C: 8 elements per instruction, the tail through runtime/Half.h.
#include "runtime/cpu/avx2/HalfConvert.h"

#include <immintrin.h>

#include "runtime/Half.h"
#include "runtime/cpu/avx2/Sgemm.h"

#define TANDEM_F16C __attribute__((target("avx2,f16c")))

namespace tandem {
namespace avx2 {

bool f16cAvailable() {
  static const bool ok = available() && __builtin_cpu_supports("f16c");  // AVX2 + FMA + the cap
  return ok;
}

TANDEM_F16C void halfToFloatArray(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = halfToFloat(x[i]);
}

TANDEM_F16C void floatToHalfArray(const float* x, uint16_t* y, int64_t n) {
  const __m128i quiet = _mm_set1_epi16(0x7E00), sign = _mm_set1_epi16(int16_t(0x8000));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // vcvtps2ph keeps a NaN's top payload bits; the scalar conversion gives sign | 0x7E00.
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
    h = _mm_blendv_epi8(h, _mm_or_si128(_mm_and_si128(h, sign), quiet), nan16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = halfFromDouble(x[i]);
}

}  // namespace avx2
}  // namespace tandem
