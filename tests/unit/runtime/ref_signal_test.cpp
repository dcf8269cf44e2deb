// Tests of the reference DFT and STFT kernels against hand-computed spectra: real and complex
// input, onesided, dft_length truncation and zero-padding, inverse, a non-default axis, STFT
// frames with and without a window; MelWeightMatrix's filters.
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

TEST(RefDFT, RealSignalFullOnesidedAndLength) {
  // fft([1,2,3,4]) = [10, -2+2i, -2, -2-2i].
  const Tensor x = f32({1, 4, 1}, {1, 2, 3, 4});
  expectValues<float>(run1("DFT", {}, {x}, DType::F32, {1, 4, 2}), {1, 4, 2},
                      {10, 0, -2, 2, -2, 0, -2, -2});
  expectValues<float>(run1("DFT", attrs({{"onesided", Attr::ofInt(1)}}), {x}, DType::F32, {1, 3, 2}),
                      {1, 3, 2}, {10, 0, -2, 2, -2, 0});
  // dft_length 2 truncates to [1,2]: [3, -1]; 8 zero-pads: bin 4 is 1-2+3-4 = -2, bin 2 is
  // 1 - 2i - 3 + 4i = -2 + 2i.
  expectValues<float>(run1("DFT", {}, {x, i64({}, {2})}, DType::F32, {1, 2, 2}, true), {1, 2, 2},
                      {3, 0, -1, 0});
  Tensor y8 = run1("DFT", {}, {x, i64({}, {8})}, DType::F32, {1, 8, 2}, true);
  ASSERT_TRUE(y8.defined());
  EXPECT_NEAR(y8.data<float>()[4], -2, 1e-5);
  EXPECT_NEAR(y8.data<float>()[5], 2, 1e-5);
  EXPECT_NEAR(y8.data<float>()[8], -2, 1e-5);
  EXPECT_NEAR(y8.data<float>()[9], 0, 1e-5);
}

TEST(RefDFT, InverseOfComplexAndAxis2) {
  expectValues<double>(run1("DFT", attrs({{"inverse", Attr::ofInt(1)}}),
                            {f64({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2})}, DType::F64, {1, 4, 2}),
                       {1, 4, 2}, {1, 0, 2, 0, 3, 0, 4, 0}, 1e-12);
  // [[1,2],[3,4]] along axis 2 (each row): [3, -1] and [7, -1].
  expectValues<float>(run1("DFT", attrs({{"axis", Attr::ofInt(2)}}), {f32({1, 2, 2, 1}, {1, 2, 3, 4})},
                           DType::F32, {1, 2, 2, 2}),
                      {1, 2, 2, 2}, {3, 0, -1, 0, 7, 0, -1, 0});
}

TEST(RefSTFT, FramesWithAndWithoutWindow) {
  // Frames [1,2] and [3,4] (step 2, length 2), 2 onesided bins each.
  const Tensor x = f32({1, 4, 1}, {1, 2, 3, 4});
  expectValues<float>(run1("STFT", {}, {x, i64({}, {2}), none(), i64({}, {2})}, DType::F32,
                           {1, 2, 2, 2}, true),
                      {1, 2, 2, 2}, {3, 0, -1, 0, 7, 0, -1, 0});
  // Window [1, 0.5]: frames [1, 1] and [3, 2].
  expectValues<float>(run1("STFT", {}, {x, i64({}, {2}), f32({2}, {1, 0.5f})}, DType::F32,
                           {1, 2, 2, 2}, true),
                      {1, 2, 2, 2}, {2, 0, 0, 0, 5, 0, 1, 0});
}

TEST(RefMelWeightMatrix, TriangularFilters) {
  // 3 mel bins, dft_length 16, 8 kHz, 0..4 kHz: the 5 mel points fall in spectrogram bins
  // 0, 0, 1, 3, 5; filter 0 has an empty rise (1 at its centre), filters 1 and 2 rise and fall.
  expectValues<float>(run1("MelWeightMatrix", {},
                           {i64({}, {3}), i64({}, {16}), i64({}, {8000}), f32({}, {0}), f32({}, {4000})},
                           DType::F32, {9, 3}, true),
                      {9, 3},
                      {1, 0, 0, 0, 1, 0, 0, 0.5f, 0.5f, 0, 0, 1, 0, 0, 0.5f, 0, 0, 0, 0, 0, 0,
                       0, 0, 0, 0, 0, 0});
}

}  // namespace
}  // namespace tandem
