// IEEE 754 binary16 (ONNX FLOAT16) <-> float/double conversions for the kernels that move f16
// data (Cast, CastLike) and the tools that compare it; no arithmetic is done in f16.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tandem {

/// The value of the f16 with bits `h` (exact: every f16 is a float).
inline float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  const uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0x1F) {  // inf, or NaN with its payload
    const uint32_t bits = sign | 0x7F800000u | (man << 13);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  // Normal: (1024 + man) * 2^(exp - 25); subnormal (exp 0): man * 2^-24.
  const float mag = exp ? std::ldexp(float(1024 + man), int(exp) - 25) : std::ldexp(float(man), -24);
  return sign ? -mag : mag;
}

/// The f16 nearest to `v`, ties to even (as numpy's astype(float16) rounds from float or
/// double, once); beyond the f16 range +-inf, NaN a quiet NaN of the same sign.
inline uint16_t halfFromDouble(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (std::isnan(v)) return sign | 0x7E00;
  if (a >= 65520.0) return sign | 0x7C00;  // 65520 = 65504 + half an ulp rounds up to inf
  if (a < 6.103515625e-05) {               // below 2^-14: subnormal, in units of 2^-24
    return sign | uint16_t(std::nearbyint(std::ldexp(a, 24)));  // 1024 encodes 2^-14 correctly
  }
  int e;
  const double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int exp = e - 1;                     // a = (2f) * 2^exp, 2f in [1, 2)
  uint32_t man = uint32_t(std::nearbyint((2 * f - 1) * 1024));
  if (man == 1024) {
    man = 0;
    ++exp;
  }
  if (exp > 15) return sign | 0x7C00;
  return sign | uint16_t((exp + 15) << 10) | uint16_t(man);
}

}  // namespace tandem
