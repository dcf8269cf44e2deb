// Tests of the reference Conv and ConvTranspose kernels: pads, strides, dilations, groups,
// auto_pad SAME_UPPER/SAME_LOWER/VALID, 1-D/2-D/3-D, bias, output_padding and output_shape.
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

Tensor x3x3() { return f32({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8}); }
Tensor ones(Shape s) { return f32(s, std::vector<float>(numElements(s), 1.0f)); }

TEST(RefConv, NoPadding) {
  expectValues<float>(run1("Conv", {}, {x3x3(), ones({1, 1, 2, 2})}, DType::F32, {1, 1, 2, 2}),
                      {1, 1, 2, 2}, {8, 12, 20, 24});
}

TEST(RefConv, SymmetricPadding) {
  Tensor y = run1("Conv", attrs({{"pads", Attr::ofInts({1, 1, 1, 1})}}),
                  {x3x3(), ones({1, 1, 3, 3})}, DType::F32, {1, 1, 3, 3});
  expectValues<float>(y, {1, 1, 3, 3}, {8, 15, 12, 21, 36, 27, 20, 33, 24});
}

TEST(RefConv, StridesAsymmetricPadsAndBias) {
  Tensor y = run1("Conv",
                  attrs({{"strides", Attr::ofInts({2, 2})},
                         {"pads", Attr::ofInts({0, 0, 1, 1})},
                         {"kernel_shape", Attr::ofInts({2, 2})}}),
                  {x3x3(), ones({1, 1, 2, 2}), f32({1}, {1})}, DType::F32, {1, 1, 2, 2});
  expectValues<float>(y, {1, 1, 2, 2}, {9, 8, 14, 9});
}

TEST(RefConv, Dilations1D) {
  Tensor y =
      run1("Conv", attrs({{"dilations", Attr::ofInts({2})}}),
           {f32({1, 1, 5}, {1, 2, 3, 4, 5}), f32({1, 1, 2}, {1, -1})}, DType::F32, {1, 1, 3});
  expectValues<float>(y, {1, 1, 3}, {-2, -2, -2});
}

TEST(RefConv, Groups) {
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  expectValues<float>(run1("Conv", attrs({{"group", Attr::ofInt(2)}}), {x, f32({2, 1, 1}, {2, 10})},
                           DType::F32, {1, 2, 2}),
                      {1, 2, 2}, {2, 4, 30, 40});
  // Two output channels per group: channels 0,1 read input 0, channels 2,3 read input 1.
  expectValues<float>(run1("Conv", attrs({{"group", Attr::ofInt(2)}}),
                           {x, f32({4, 1, 1}, {1, 2, 3, 4})}, DType::F32, {1, 4, 2}),
                      {1, 4, 2}, {1, 2, 2, 4, 9, 12, 12, 16});
}

TEST(RefConv, AutoPadSameUpperAndLower) {
  Tensor x = f32({1, 1, 4}, {1, 2, 3, 4});
  Tensor w = f32({1, 1, 2}, {1, 10});
  // One pixel of padding in total: at the end for SAME_UPPER, at the start for SAME_LOWER.
  expectValues<float>(run1("Conv", attrs({{"auto_pad", Attr::ofString("SAME_UPPER")}}), {x, w},
                           DType::F32, {1, 1, 4}),
                      {1, 1, 4}, {21, 32, 43, 4});
  expectValues<float>(run1("Conv", attrs({{"auto_pad", Attr::ofString("SAME_LOWER")}}), {x, w},
                           DType::F32, {1, 1, 4}),
                      {1, 1, 4}, {10, 21, 32, 43});
}

TEST(RefConv, AutoPadValidWithStride) {
  Tensor y =
      run1("Conv", attrs({{"auto_pad", Attr::ofString("VALID")}, {"strides", Attr::ofInts({2})}}),
           {f32({1, 1, 5}, {1, 2, 3, 4, 5}), ones({1, 1, 2})}, DType::F32, {1, 1, 2});
  expectValues<float>(y, {1, 1, 2}, {3, 7});
}

TEST(RefConv, ThreeD) {
  Tensor y =
      run1("Conv", {}, {f32({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), ones({1, 1, 2, 2, 2})},
           DType::F32, {1, 1, 1, 1, 1});
  expectValues<float>(y, {1, 1, 1, 1, 1}, {36});
}

TEST(RefConv, BatchAndChannelsInF64) {
  Tensor y = run1("Conv", {}, {f64({2, 2, 1, 1}, {1, 2, 3, 4}), f64({1, 2, 1, 1}, {1, 10})},
                  DType::F64, {2, 1, 1, 1});
  expectValues<double>(y, {2, 1, 1, 1}, {21, 43});
}

TEST(RefConv, ThreadedMatchesSingleThreaded) {
  std::vector<float> xv(2 * 3 * 9 * 9), wv(4 * 3 * 3 * 3);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float((i * 7) % 11) - 5;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = float((i * 3) % 5) - 2;
  AttrMap a = attrs({{"pads", Attr::ofInts({1, 1, 1, 1})}});
  OpCall c{"Conv", a, {f32({2, 3, 9, 9}, xv), f32({4, 3, 3, 3}, wv)}, {{DType::F32, {2, 4, 9, 9}}}};
  std::vector<Tensor> one, two;
  ASSERT_TRUE(c.run(&one).isOk());
  c.threads = 2;
  ASSERT_TRUE(c.run(&two).isOk());
  std::vector<float> expect(one[0].data<float>(), one[0].data<float>() + one[0].numel());
  expectValues<float>(two[0], {2, 4, 9, 9}, expect, 0);
  // Spot check one interior value by hand: n=0, m=0, (4,4).
  double s = 0;
  for (int c = 0; c < 3; ++c)
    for (int kh = 0; kh < 3; ++kh)
      for (int kw = 0; kw < 3; ++kw)
        s += xv[(c * 9 + 3 + kh) * 9 + 3 + kw] * wv[(c * 3 + kh) * 3 + kw];
  EXPECT_FLOAT_EQ(one[0].data<float>()[4 * 9 + 4], float(s));
}

TEST(RefConv, ChannelMismatchFails) {
  OpCall c{"Conv", {}, {ones({1, 2, 3, 3}), ones({1, 3, 1, 1})}, {{DType::F32, {1, 1, 3, 3}}}};
  EXPECT_NE(errorOf(c).find("does not fit X"), std::string::npos) << errorOf(c);
}

TEST(RefConvTranspose, Basic1D) {
  expectValues<float>(run1("ConvTranspose", {}, {f32({1, 1, 3}, {1, 2, 3}), ones({1, 1, 3})},
                           DType::F32, {1, 1, 5}),
                      {1, 1, 5}, {1, 3, 6, 5, 3});
}

TEST(RefConvTranspose, StridesPadsOutputPadding) {
  Tensor x = f32({1, 1, 2}, {1, 2});
  Tensor w = ones({1, 1, 3});
  expectValues<float>(
      run1("ConvTranspose", attrs({{"strides", Attr::ofInts({2})}}), {x, w}, DType::F32, {1, 1, 5}),
      {1, 1, 5}, {1, 1, 3, 2, 2});
  expectValues<float>(
      run1("ConvTranspose", attrs({{"strides", Attr::ofInts({2})}, {"pads", Attr::ofInts({1, 1})}}),
           {x, w}, DType::F32, {1, 1, 3}),
      {1, 1, 3}, {1, 3, 2});
  expectValues<float>(
      run1("ConvTranspose",
           attrs({{"strides", Attr::ofInts({2})}, {"output_padding", Attr::ofInts({1})}}),
           {x, w, f32({1}, {0.5f})}, DType::F32, {1, 1, 6}),
      {1, 1, 6}, {1.5f, 1.5f, 3.5f, 2.5f, 2.5f, 0.5f});
}

TEST(RefConvTranspose, OutputShapeAndAutoPad) {
  Tensor x = f32({1, 1, 2}, {1, 2});
  Tensor w = ones({1, 1, 3});
  // Natural extent 5, requested 4: one pixel of padding, taken at the start (NOTSET).
  expectValues<float>(
      run1("ConvTranspose",
           attrs({{"strides", Attr::ofInts({2})}, {"output_shape", Attr::ofInts({4})}}), {x, w},
           DType::F32, {1, 1, 4}),
      {1, 1, 4}, {1, 3, 2, 2});
  // SAME_UPPER: output = input * stride = 4, the odd pixel of padding cut at the end.
  expectValues<float>(
      run1("ConvTranspose",
           attrs({{"strides", Attr::ofInts({2})}, {"auto_pad", Attr::ofString("SAME_UPPER")}}),
           {x, w}, DType::F32, {1, 1, 4}),
      {1, 1, 4}, {1, 1, 3, 2});
  expectValues<float>(
      run1("ConvTranspose",
           attrs({{"strides", Attr::ofInts({2})}, {"auto_pad", Attr::ofString("SAME_LOWER")}}),
           {x, w}, DType::F32, {1, 1, 4}),
      {1, 1, 4}, {1, 3, 2, 2});
}

TEST(RefConvTranspose, GroupsAndChannels) {
  expectValues<float>(run1("ConvTranspose", attrs({{"group", Attr::ofInt(2)}}),
                           {f32({1, 2, 1}, {1, 2}), f32({2, 1, 1}, {3, 4})}, DType::F32, {1, 2, 1}),
                      {1, 2, 1}, {3, 8});
  expectValues<float>(run1("ConvTranspose", {}, {f32({1, 1, 1}, {2}), f32({1, 2, 2}, {1, 2, 3, 4})},
                           DType::F32, {1, 2, 2}),
                      {1, 2, 2}, {2, 4, 6, 8});
}

TEST(RefConvTranspose, TwoDAndDilations) {
  expectValues<float>(
      run1("ConvTranspose", {}, {f32({1, 1, 2, 2}, {1, 2, 3, 4}), ones({1, 1, 2, 2})}, DType::F32,
           {1, 1, 3, 3}),
      {1, 1, 3, 3}, {1, 3, 2, 4, 10, 6, 3, 7, 4});
  expectValues<double>(
      run1("ConvTranspose", attrs({{"dilations", Attr::ofInts({2})}}),
           {f64({1, 1, 2}, {1, 2}), f64({1, 1, 2}, {1, 1})}, DType::F64, {1, 1, 4}),
      {1, 1, 4}, {1, 2, 1, 2});
}

}  // namespace
}  // namespace tandem
