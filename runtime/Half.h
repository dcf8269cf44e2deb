// IEEE 754 binary16 (ONNX FLOAT16) and bfloat16 (ONNX BFLOAT16) <-> float/double conversions
// for the kernels that move 16-bit float data (Cast, CastLike) and the tools that compare it; no
// arithmetic is done in f16 or bf16.
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

/// The value of the bf16 with bits `b` (exact: a bf16 is the high half of an f32; NaN payloads,
/// infinities and subnormals carry over bit for bit).
inline float bfloat16ToFloat(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// The bf16 nearest to the float `v`, ties to even (ONNX's and PyTorch's rounding); values
/// beyond the largest bf16 (3.3895e38) plus half an ulp round to +-inf; subnormals round like
/// normals (bf16 has f32's exponent range); a NaN stays a NaN of the same sign with the top of
/// its payload and the quiet bit set (truncation alone could turn a NaN with only low payload
/// bits into inf).
inline uint16_t bfloat16FromFloat(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (std::isnan(v)) return uint16_t((bits >> 16) | 0x0040);
  // Adding 0x7FFF plus the kept lsb rounds to nearest-even; a carry into the exponent is the
  // correct result (the next binade, or inf from the largest finite).
  const uint32_t lsb = (bits >> 16) & 1;
  return uint16_t((bits + 0x7FFFu + lsb) >> 16);
}

/// The bf16 nearest to the double `v`, rounded once (through float would round twice), ties to
/// even; beyond the bf16 range +-inf, NaN as bfloat16FromFloat.
inline uint16_t bfloat16FromDouble(double v) {
  if (std::isnan(v)) return bfloat16FromFloat(float(v));
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  // Largest bf16 (2 - 2^-7) * 2^127 plus half an ulp (2^119) rounds up to inf.
  if (a >= std::ldexp(2.0 - std::ldexp(1.0, -8), 127)) return sign | 0x7F80;
  if (a < std::ldexp(1.0, -126)) {  // subnormal, in units of 2^-133; 128 encodes 2^-126
    return sign | uint16_t(std::nearbyint(std::ldexp(a, 133)));
  }
  int e;
  const double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int exp = e - 1;
  uint32_t man = uint32_t(std::nearbyint((2 * f - 1) * 128));
  if (man == 128) {
    man = 0;
    ++exp;
  }
  if (exp > 127) return sign | 0x7F80;
  return sign | uint16_t((exp + 127) << 7) | uint16_t(man);
}

/// The float value of a 16-bit float's bits `h` of dtype f16 (`bf16` false) or bf16.
inline float narrowToFloat(uint16_t h, bool bf16) { return bf16 ? bfloat16ToFloat(h) : halfToFloat(h); }
/// The nearest 16-bit float to `v`, once rounded to nearest-even: f16 (`bf16` false) or bf16.
inline uint16_t narrowFromDouble(double v, bool bf16) {
  return bf16 ? bfloat16FromDouble(v) : halfFromDouble(v);
}

}  // namespace tandem
