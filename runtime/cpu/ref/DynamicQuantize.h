// DynamicQuantizeLinear-11's arithmetic, shared by its reference kernel (Quantize.cpp) and the
// kernels of Tandem's DynamicQuantizeMatMul (QuantizedMath.cpp, runtime/cpu/dnnl): the range
// [min(0, min x), max(0, max x)] maps onto [0, 255] in f32 as the spec's function body computes
// it, and each x rounds half to even, plus the zero point, saturated.
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tandem {

struct DynamicQuantization {
  float scale = 0;        // (max - min) / 255; 0 when x is all zeros (then every y is 0)
  uint8_t zeroPoint = 0;  // saturate(round(0 - min / scale))
};

/// The scale and zero point of x[0, n) (a NaN element is skipped by the min and max, as
/// std::min/std::max skip it in the second operand; minps/maxps do the same with x first).
inline DynamicQuantization dynamicQuantization(const float* x, int64_t n) {
  float lo = 0, hi = 0;
  int64_t k = 0;
#if defined(__SSE2__)
  __m128 vlo = _mm_setzero_ps(), vhi = _mm_setzero_ps();
  for (; k + 4 <= n; k += 4) {
    const __m128 v = _mm_loadu_ps(x + k);
    vlo = _mm_min_ps(v, vlo);  // v NaN: vlo
    vhi = _mm_max_ps(v, vhi);
  }
  alignas(16) float l[4], h[4];
  _mm_store_ps(l, vlo);
  _mm_store_ps(h, vhi);
  for (int i = 0; i < 4; ++i) {
    lo = std::min(lo, l[i]);
    hi = std::max(hi, h[i]);
  }
#endif
  for (; k < n; ++k) {
    lo = std::min(lo, x[k]);
    hi = std::max(hi, x[k]);
  }
  DynamicQuantization d;
  d.scale = (hi - lo) / 255.f;
  if (d.scale != 0) {
    const double r = std::nearbyint(double(0.f - lo / d.scale));  // NaN (an infinite x): 0
    d.zeroPoint = uint8_t(r > 0 ? std::min(r, 255.0) : 0.0);
  }
  return d;
}

/// y[k] = saturate(round_half_even(x[k] / scale) + zero point) for k < n; a NaN quotient gives
/// the zero point. In f32, exactly the double arithmetic of the spec: the quotient is an f32,
/// clamped to +-2^22 (beyond, y saturates either way), where adding and subtracting 1.5 * 2^23
/// rounds it half to even; the zero point and the clamp to [0, 255] are exact. Four at a time
/// with SSE2.
inline void dynamicQuantize(const float* x, int64_t n, DynamicQuantization d, uint8_t* y) {
  if (d.scale == 0) {
    std::fill(y, y + n, d.zeroPoint);
    return;
  }
  constexpr float kMagic = 12582912.f, kClamp = 4194304.f;
  const float zp = d.zeroPoint;
  int64_t k = 0;
#if defined(__SSE2__)
  const __m128 s = _mm_set1_ps(d.scale), magic = _mm_set1_ps(kMagic), z = _mm_set1_ps(zp);
  const __m128 lo = _mm_set1_ps(-kClamp), hi = _mm_set1_ps(kClamp);
  const __m128 zero = _mm_setzero_ps(), top = _mm_set1_ps(255.f);
  for (; k + 16 <= n; k += 16) {
    __m128i q[4];
    for (int h = 0; h < 4; ++h) {
      __m128 r = _mm_div_ps(_mm_loadu_ps(x + k + 4 * h), s);
      r = _mm_and_ps(r, _mm_cmpord_ps(r, r));  // NaN -> 0
      r = _mm_min_ps(_mm_max_ps(r, lo), hi);
      r = _mm_add_ps(_mm_sub_ps(_mm_add_ps(r, magic), magic), z);
      q[h] = _mm_cvttps_epi32(_mm_min_ps(_mm_max_ps(r, zero), top));
    }
    const __m128i w = _mm_packs_epi32(q[0], q[1]), v = _mm_packs_epi32(q[2], q[3]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + k), _mm_packus_epi16(w, v));
  }
#endif
  for (; k < n; ++k) {
    float r = x[k] / d.scale;
    r = r == r ? r : 0.f;
    r = std::min(kClamp, std::max(-kClamp, r));
    const float q = ((r + kMagic) - kMagic) + zp;
    y[k] = uint8_t(int32_t(std::min(255.f, std::max(0.f, q))));
  }
}

}  // namespace tandem
