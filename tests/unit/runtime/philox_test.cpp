// Tests of Philox4x32-10 (runtime/Philox.h) against Random123's known-answer vectors, and of the
// dropout mask drawn from it: thresholds, independence of the blocks' order, the AVX2 kernel.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/Philox.h"
#include "runtime/cpu/avx2/Dropout.h"
#include "runtime/cpu/avx2/Sgemm.h"

namespace tandem {
namespace {

using Words = std::array<uint32_t, 4>;

// Random123 v1.14 tests/kat_vectors, "philox4x32 10" lines: counter, key, expected output.
TEST(Philox, KnownAnswerVectors) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Words{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (Words{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (Words{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(DropoutMask, ThresholdsAndCounterLayout) {
  EXPECT_EQ(DropoutMask::thresholdFor(0), 0u);
  EXPECT_EQ(DropoutMask::thresholdFor(0.5), 0x80000000u);
  EXPECT_EQ(DropoutMask::thresholdFor(0.25), 0x40000000u);
  // Block b of seed s, stream t, step p is philox(counter {b lo, b hi, t, p}, key {s lo, s hi}).
  DropoutMask m;
  m.seed = 0x0000000500000003ull;
  m.stream = 9;
  m.step = 2;
  const uint64_t block = 0x100000001ull;
  EXPECT_EQ(m.words(block), philox4x32_10({1, 1, 9, 2}, {3, 5}));
  // Ratio 0 keeps everything; element i reads word i % 4 of block i / 4.
  const Words w = m.words(block);
  for (uint32_t j = 0; j < 4; ++j) {
    EXPECT_TRUE(m.keep(4 * block + j));
    m.threshold = w[j];
    EXPECT_TRUE(m.keep(4 * block + j)) << "a word equal to the threshold is kept";
    m.threshold = w[j] + 1;
    if (w[j] != 0xffffffffu) {
      EXPECT_FALSE(m.keep(4 * block + j));
    }
    m.threshold = 0;
  }
}

TEST(DropoutMask, FractionKeptIsOneMinusRatio) {
  DropoutMask m;
  m.seed = 1234;
  m.threshold = DropoutMask::thresholdFor(0.3);
  int64_t kept = 0;
  const int64_t n = 400000;
  for (int64_t i = 0; i < n; ++i) kept += m.keep(i);
  // 280000 expected; the standard deviation is sqrt(n * 0.3 * 0.7) ~ 290.
  EXPECT_NEAR((double)kept, 0.7 * n, 5 * 290.0);
}

// The AVX2 kernel draws DropoutMask::keep bit for bit and scales the kept elements: sizes with
// and without a tail, one and two threads (the threaded split above 65536 elements), in place.
TEST(DropoutMask, Avx2KernelIsTheScalarMask) {
  if (!avx2::available()) GTEST_SKIP() << "no AVX2 (or TANDEM_MAX_CPU_ISA caps below it)";
  DropoutMask m;
  m.seed = 0x0123456789abcdefull;
  m.stream = 99;
  m.step = 3;
  m.threshold = DropoutMask::thresholdFor(0.3);
  for (int64_t n : {int64_t(1), int64_t(31), int64_t(32), int64_t(1000), int64_t(70001)})
    for (int threads : {1, 2}) {
      SCOPED_TRACE("n " + std::to_string(n) + ", threads " + std::to_string(threads));
      std::vector<float> x((size_t)n), y((size_t)n);
      for (int64_t i = 0; i < n; ++i) x[i] = 1.f + (float)(i % 7);
      std::vector<char> mask((size_t)n, 2);
      avx2::dropoutF32(m, 2.f, n, threads, x.data(), y.data(), reinterpret_cast<bool*>(mask.data()));
      int64_t wrong = 0, kept = 0;
      for (int64_t i = 0; i < n; ++i) {
        const bool keep = m.keep((uint64_t)i);
        kept += keep;
        wrong += mask[i] != (keep ? 1 : 0) || y[i] != (keep ? 2.f * x[i] : 0.f);
      }
      EXPECT_EQ(wrong, 0);
      if (n > 1000) EXPECT_NEAR((double)kept / (double)n, 0.7, 0.01);
      std::vector<float> z = x;  // in place, no mask
      avx2::dropoutF32(m, 2.f, n, threads, z.data(), z.data(), nullptr);
      EXPECT_EQ(z, y);
    }
}

}  // namespace
}  // namespace tandem
