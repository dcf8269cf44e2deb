// Tests of the reference quantized products: MatMulInteger, QLinearMatMul (zero points per
// tensor, row or column; requantization ties and saturation) and QLinearMatMulBias (B before it), ConvInteger (padding reads the
// zero point) and QLinearConv (per-channel weight scales, i32 bias, i8 output).
#include "runtime/cpu/ref/DynamicQuantize.h"
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

TEST(RefMatMulInteger, ZeroPointsPerTensorAndPerColumn) {
  // (A - 10) = [[0,10],[20,30]], B - [1,2] per column = [[0,0],[2,2]].
  expectValues<int32_t>(run1("MatMulInteger", {},
                             {u8({2, 2}, {10, 20, 30, 40}), u8({2, 2}, {1, 2, 3, 4}), u8({}, {10}),
                              u8({2}, {1, 2})},
                             DType::I32, {2, 2}),
                        {2, 2}, {20, 20, 60, 60});
  // i8 extremes accumulate exactly in i32: -128 * -128 + 127 * -128 = 128.
  expectValues<int32_t>(run1("MatMulInteger", {}, {i8({1, 2}, {-128, 127}), i8({2, 1}, {-128, -128})},
                             DType::I32, {1, 1}),
                        {1, 1}, {128});
}

TEST(RefQLinearMatMul, RoundsHalfToEvenBeforeTheZeroPointAndSaturates) {
  // acc = [5, 1000] times 0.5 * 1 / 1 = [2.5, 500]: 2.5 rounds to 2, plus the zero point 1 is 3
  // (rounding after adding it would give 4); 500 + 1 saturates to 255.
  OpCall c{"QLinearMatMul",
           {},
           {u8({1, 2}, {2, 3}), f32({}, {0.5f}), u8({}, {0}), u8({2, 2}, {1, 200, 1, 200}),
            f32({}, {1}), u8({}, {0}), f32({}, {1}), u8({}, {1})},
           {{DType::U8, {1, 2}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<uint8_t>(outs[0], {1, 2}, {3, 255});
  // i8 output saturates at -128; a per-row a_scale of the wrong length is an error.
  expectValues<int8_t>(run1("QLinearMatMul", {},
                            {i8({1, 1}, {-100}), f32({}, {1}), i8({}, {0}), i8({1, 1}, {100}),
                             f32({}, {1}), i8({}, {0}), f32({}, {2}), i8({}, {-3})},
                            DType::I8, {1, 1}),
                       {1, 1}, {-128});
  c.inputs[1] = f32({3}, {1, 1, 1});
  EXPECT_NE(errorOf(c).find("a_scale (per row of a) must have 1 element, got [3]"), std::string::npos)
      << errorOf(c);
}

TEST(RefQLinearMatMulBias, AddsBPerColumnBeforeTheRequantization) {
  // acc = [5, 1000]; B = [1, -999]: (6, 1) * 0.5 = (3, 0.5), rounded half to even (3, 0), plus
  // the zero point 1: [4, 1]. (Without B: [3, 255].)
  OpCall c{"QLinearMatMulBias",
           {},
           {u8({1, 2}, {2, 3}), f32({}, {0.5f}), u8({}, {0}), u8({2, 2}, {1, 200, 1, 200}),
            f32({}, {1}), u8({}, {0}), f32({}, {1}), u8({}, {1}), i32({2}, {1, -999})},
           {{DType::U8, {1, 2}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<uint8_t>(outs[0], {1, 2}, {4, 1});
  // B of the wrong length, or missing, is an error.
  c.inputs[8] = i32({3}, {0, 0, 0});
  EXPECT_NE(errorOf(c).find("B must have 2 elements (one per column of b), got [3]"), std::string::npos)
      << errorOf(c);
  c.inputs.pop_back();
  EXPECT_NE(errorOf(c).find("expects 9 inputs"), std::string::npos) << errorOf(c);
}

TEST(RefDynamicQuantizeMatMul, QuantizesAThenScalesTheI32ProductInF32) {
  // A = [[0, 2.04], [-0.51, 1.02]]: range [-0.51, 2.04], scale 2.55 / 255 = 0.01, zero point
  // round(0.51 / 0.01) = 51; A_q - 51 = round(A / 0.01) = [[0, 204], [-51, 102]].
  // B - zp = [[1, -1], [2, 0]] (zp 3): acc = [[408, 0], [153, 51]], then
  // float(acc) * float(0.01 * [0.5, 0.25]) + bias [1, -1].
  OpCall c{"DynamicQuantizeMatMul",
           {},
           {f32({2, 2}, {0.f, 2.04f, -0.51f, 1.02f}), u8({2, 2}, {4, 2, 5, 3}), f32({2}, {0.5f, 0.25f}),
            u8({}, {3}), f32({2}, {1.f, -1.f})},
           {{DType::F32, {2, 2}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  const float scale = (2.04f - -0.51f) / 255.f;
  const float m0 = scale * 0.5f, m1 = scale * 0.25f;
  expectValues<float>(outs[0], {2, 2},
                      {408.f * m0 + 1.f, 0.f * m1 - 1.f, 153.f * m0 + 1.f, 51.f * m1 - 1.f});
  // An all-zero A: scale 0, every product 0, Y the bias.
  c.inputs[0] = f32({2, 2}, {0, 0, 0, 0});
  outs.clear();
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<float>(outs[0], {2, 2}, {1.f, -1.f, 1.f, -1.f});
}

TEST(RefDynamicQuantize, VectorLoopIsTheSpecFormula) {
  // runtime/cpu/ref/DynamicQuantize.h's SSE2 loop against saturate(nearbyint(double(x / s)) + zp)
  // over random values, exact ties (x / s = k + 0.5), huge and NaN quotients and every tail.
  std::vector<float> x;
  for (int i = 0; i < 1000; ++i) x.push_back(float(i % 97) * 0.37f - 11.f + float(i) * 1e-3f);
  for (int k = -20; k <= 20; ++k) x.push_back((float(k) + 0.5f) * 0.125f);
  x.insert(x.end(), {1e30f, -1e30f, std::nanf(""), 0.f, -0.f, 3e-39f});
  for (int64_t n : {int64_t(1), int64_t(15), int64_t(17), int64_t(x.size())}) {
    DynamicQuantization d = dynamicQuantization(x.data(), n);
    for (float scale : {d.scale, 0.125f}) {
      d.scale = scale;
      std::vector<uint8_t> y(n);
      dynamicQuantize(x.data(), n, d, y.data());
      for (int64_t k = 0; k < n; ++k) {
        double r = std::nearbyint(double(x[k] / scale)) + d.zeroPoint;
        if (std::isnan(r)) r = d.zeroPoint;
        const uint8_t want = uint8_t(std::min(255.0, std::max(0.0, r)));
        ASSERT_EQ(int(y[k]), int(want)) << "n " << n << " x " << x[k] << " scale " << scale;
      }
    }
  }
}

TEST(RefQLinearMatMul, ANanRequantizationGivesTheZeroPoint) {
  // y_scale 0 makes the multiplier inf: 0 * inf is NaN, 6 * inf is inf. The NaN element is the
  // zero point (converting NaN to an integer is undefined; fuzz_plan found it under UBSan), the
  // inf one saturates. A NaN a_scale gives the zero point everywhere.
  OpCall c{"QLinearMatMul",
           {},
           {u8({1, 2}, {0, 3}), f32({}, {1}), u8({}, {0}), u8({2, 2}, {0, 1, 0, 1}), f32({}, {1}),
            u8({}, {0}), f32({}, {0}), u8({}, {7})},
           {{DType::U8, {1, 2}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<uint8_t>(outs[0], {1, 2}, {7, 255});
  c.inputs[1] = f32({}, {std::nanf("")});
  outs.clear();
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<uint8_t>(outs[0], {1, 2}, {7, 7});
}

TEST(RefConvInteger, PaddingContributesZeroAfterTheShift) {
  // x - 1 = [[1,2,3],[4,5,6],[7,8,9]], a 2x2 box of ones, pads 1: each output is the sum of the
  // shifted inputs under the window; the pads add nothing (not 0 - x_zero_point).
  expectValues<int32_t>(run1("ConvInteger", attrs({{"pads", Attr::ofInts({1, 1, 1, 1})}}),
                             {u8({1, 1, 3, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 10}),
                              u8({1, 1, 2, 2}, {1, 1, 1, 1}), u8({}, {1})},
                             DType::I32, {1, 1, 4, 4}),
                        {1, 1, 4, 4}, {1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9});
}

TEST(RefQLinearConv, PerChannelScaleAndBias) {
  // x - 10 = [0,10,20,30], x_scale 0.5; channel 0: w 1, scale 1, bias 3 -> (x + 3) * 0.5 =
  // [1.5, 6.5, 11.5, 16.5] -> [2, 6, 12, 16] (ties to even); channel 1: w -2, scale 0.25 ->
  // -2x * 0.125 = [0, -2.5, -5, -7.5] -> [0, -2, -5, -8].
  expectValues<int8_t>(run1("QLinearConv", {},
                            {u8({1, 1, 2, 2}, {10, 20, 30, 40}), f32({}, {0.5f}), u8({}, {10}),
                             i8({2, 1, 1, 1}, {1, -2}), f32({2}, {1, 0.25f}), i8({2}, {0, 0}),
                             f32({}, {1}), i8({}, {0}), i32({2}, {3, 0})},
                            DType::I8, {1, 2, 2, 2}),
                       {1, 2, 2, 2}, {2, 6, 12, 16, 0, -2, -5, -8});
}

}  // namespace
}  // namespace tandem
