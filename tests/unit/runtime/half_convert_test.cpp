// The F16C array conversions (runtime/cpu/avx2/HalfConvert.h) against runtime/Half.h's scalar
// ones, bit for bit: every f16 widened (NaNs: NaN of the same sign), and floats from every exponent range (subnormal results,
// ties, overflow to inf, NaNs with payloads) narrowed, at lengths that leave a scalar tail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/Half.h"
#include "runtime/cpu/avx2/HalfConvert.h"

namespace tandem {
namespace {

TEST(HalfConvert, EveryHalfWidensExactly) {
  if (!avx2::f16cAvailable()) GTEST_SKIP() << "this CPU (or TANDEM_MAX_CPU_ISA) has no F16C/AVX2";
  std::vector<uint16_t> h(65536 + 5);
  for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(i);
  std::vector<float> got(h.size());
  avx2::halfToFloatArray(h.data(), got.data(), int64_t(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    const float want = halfToFloat(h[i]);
    if (std::isnan(want)) {  // vcvtph2ps quiets a signaling NaN; still a NaN of the same sign
      ASSERT_TRUE(std::isnan(got[i]) && std::signbit(got[i]) == std::signbit(want)) << h[i];
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << "f16 bits 0x" << std::hex << h[i];
  }
}

TEST(HalfConvert, FloatsNarrowLikeTheScalarConversion) {
  if (!avx2::f16cAvailable()) GTEST_SKIP() << "this CPU (or TANDEM_MAX_CPU_ISA) has no F16C/AVX2";
  std::vector<float> x;
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {  // random bit patterns: every exponent, NaN payloads
    const uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, 4);
    x.push_back(f);
  }
  // Values near the f16 range's edges and exact ties between two f16s.
  for (float f : {65504.f, 65519.f, 65520.f, 1e9f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f,
                  1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, -0.f, 1.f / 3})
    x.insert(x.end(), {f, -f});
  for (size_t n : {x.size(), size_t(13)}) {  // 13: one vector and a scalar tail
    std::vector<uint16_t> got(n);
    avx2::floatToHalfArray(x.data(), got.data(), int64_t(n));
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], halfFromDouble(x[i])) << "float " << x[i] << " (element " << i << ")";
  }
}

}  // namespace
}  // namespace tandem
