// Tests of the reference pooling kernels: MaxPool (pads, strides, ceil_mode, dilations, auto_pad,
// Indices with both storage orders), AveragePool (count_include_pad, ceil_mode, auto_pad),
// GlobalAveragePool and GlobalMaxPool; MaxPoolGrad (autodiff).
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

Tensor x3x3() { return f32({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8}); }

TEST(RefMaxPool, Basic2D) {
  expectValues<float>(run1("MaxPool", attrs({{"kernel_shape", Attr::ofInts({2, 2})}}), {x3x3()},
                           DType::F32, {1, 1, 2, 2}),
                      {1, 1, 2, 2}, {4, 5, 7, 8});
}

TEST(RefMaxPool, PadsStridesAndIndices) {
  OpCall c{"MaxPool",
           attrs({{"kernel_shape", Attr::ofInts({3, 3})},
                  {"pads", Attr::ofInts({1, 1, 1, 1})},
                  {"strides", Attr::ofInts({2, 2})}}),
           {x3x3()},
           {{DType::F32, {1, 1, 2, 2}}, {DType::I64, {1, 1, 2, 2}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<float>(outs[0], {1, 1, 2, 2}, {4, 5, 7, 8});
  expectValues<int64_t>(outs[1], {1, 1, 2, 2}, {4, 5, 7, 8});
}

TEST(RefMaxPool, CeilModeAndDilations) {
  Tensor x = f32({1, 1, 5}, {1, 5, 2, 4, 3});
  AttrMap k2s2 = attrs({{"kernel_shape", Attr::ofInts({2})}, {"strides", Attr::ofInts({2})}});
  expectValues<float>(run1("MaxPool", k2s2, {x}, DType::F32, {1, 1, 2}), {1, 1, 2}, {5, 4});
  AttrMap ceil = k2s2;
  ceil.set("ceil_mode", Attr::ofInt(1));
  expectValues<float>(run1("MaxPool", ceil, {x}, DType::F32, {1, 1, 3}), {1, 1, 3}, {5, 4, 3});
  expectValues<float>(
      run1("MaxPool",
           attrs({{"kernel_shape", Attr::ofInts({2})}, {"dilations", Attr::ofInts({2})}}),
           {f32({1, 1, 4}, {1, 3, 2, 0})}, DType::F32, {1, 1, 2}),
      {1, 1, 2}, {2, 3});
}

TEST(RefMaxPoolGrad, OverlappingWindowsAddAndTiesGoToTheFirst) {
  // 1-D, kernel 3 stride 1 over [1, 9, 2, 2, 0]: windows {1,9,2} {9,2,2} {2,2,0} take 9, 9 and
  // the first 2 (index 2): dX[1] = dy0 + dy1, dX[2] = dy2.
  AttrMap k3 = attrs({{"kernel_shape", Attr::ofInts({3})}});
  expectValues<float>(run1("MaxPoolGrad", k3,
                           {f32({1, 1, 5}, {1, 9, 2, 2, 0}), f32({1, 1, 3}, {10, 20, 40})},
                           DType::F32, {1, 1, 5}),
                      {1, 1, 5}, {0, 30, 40, 0, 0});
  // 2-D with padding and stride, two channels: each channel's dY goes to its own maxima.
  AttrMap p = attrs({{"kernel_shape", Attr::ofInts({3, 3})},
                     {"pads", Attr::ofInts({1, 1, 1, 1})},
                     {"strides", Attr::ofInts({2, 2})}});
  Tensor x = f32({1, 2, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  expectValues<float>(
      run1("MaxPoolGrad", p, {x, f32({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}, DType::F32,
           {1, 2, 3, 3}),
      {1, 2, 3, 3}, {0, 0, 0, 0, 1, 2, 0, 3, 4, 5, 6, 0, 7, 8, 0, 0, 0, 0});
}

TEST(RefMaxPool, AutoPad) {
  Tensor x = f32({1, 1, 4}, {1, 2, 3, 4});
  expectValues<float>(
      run1("MaxPool",
           attrs({{"kernel_shape", Attr::ofInts({2})}, {"auto_pad", Attr::ofString("SAME_UPPER")}}),
           {x}, DType::F32, {1, 1, 4}),
      {1, 1, 4}, {2, 3, 4, 4});
  expectValues<float>(
      run1("MaxPool",
           attrs({{"kernel_shape", Attr::ofInts({2})}, {"auto_pad", Attr::ofString("SAME_LOWER")}}),
           {x}, DType::F32, {1, 1, 4}),
      {1, 1, 4}, {1, 2, 3, 4});
}

TEST(RefMaxPool, IndicesIncludeBatchAndChannelOffsets) {
  OpCall c{"MaxPool",
           attrs({{"kernel_shape", Attr::ofInts({1, 2})}}),
           {f32({2, 2, 1, 2}, {1, 2, 4, 3, 5, 6, 8, 7})},
           {{DType::F32, {2, 2, 1, 1}}, {DType::I64, {2, 2, 1, 1}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<float>(outs[0], {2, 2, 1, 1}, {2, 4, 6, 8});
  expectValues<int64_t>(outs[1], {2, 2, 1, 1}, {1, 2, 5, 6});
}

TEST(RefMaxPool, StorageOrderColumnMajor) {
  Tensor x = f32({1, 1, 2, 3}, {1, 2, 3, 4, 9, 6});
  for (int64_t order : {0, 1}) {
    OpCall c{"MaxPool",
             attrs({{"kernel_shape", Attr::ofInts({2, 2})}, {"storage_order", Attr::ofInt(order)}}),
             {x},
             {{DType::F32, {1, 1, 1, 2}}, {DType::I64, {1, 1, 1, 2}}}};
    std::vector<Tensor> outs;
    ASSERT_TRUE(c.run(&outs).isOk());
    expectValues<float>(outs[0], {1, 1, 1, 2}, {9, 9});
    // The 9 sits at (h=1, w=1): row-major 1*3+1 = 4, column-major 1 + 1*2 = 3.
    expectValues<int64_t>(outs[1], {1, 1, 1, 2},
                          order ? std::vector<int64_t>{3, 3} : std::vector<int64_t>{4, 4});
  }
}

TEST(RefMaxPool, TiesTakeTheFirstAndIntegers) {
  OpCall c{"MaxPool",
           attrs({{"kernel_shape", Attr::ofInts({2})}}),
           {f32({1, 1, 2}, {3, 3})},
           {{DType::F32, {1, 1, 1}}, {DType::I64, {1, 1, 1}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<int64_t>(outs[1], {1, 1, 1}, {0});
  expectValues<uint8_t>(run1("MaxPool", attrs({{"kernel_shape", Attr::ofInts({2})}}),
                             {u8({1, 1, 3}, {7, 250, 3})}, DType::U8, {1, 1, 2}),
                        {1, 1, 2}, {250, 250});
}

TEST(RefAveragePool, Basic2D) {
  expectValues<float>(run1("AveragePool", attrs({{"kernel_shape", Attr::ofInts({2, 2})}}), {x3x3()},
                           DType::F32, {1, 1, 2, 2}),
                      {1, 1, 2, 2}, {2, 3, 5, 6});
}

TEST(RefAveragePool, CountIncludePad) {
  AttrMap a = attrs({{"kernel_shape", Attr::ofInts({3, 3})}, {"pads", Attr::ofInts({1, 1, 1, 1})}});
  expectValues<float>(run1("AveragePool", a, {x3x3()}, DType::F32, {1, 1, 3, 3}), {1, 1, 3, 3},
                      {2, 2.5f, 3, 3.5f, 4, 4.5f, 5, 5.5f, 6});
  a.set("count_include_pad", Attr::ofInt(1));
  expectValues<float>(
      run1("AveragePool", a, {x3x3()}, DType::F32, {1, 1, 3, 3}), {1, 1, 3, 3},
      {8 / 9.f, 15 / 9.f, 12 / 9.f, 21 / 9.f, 4, 27 / 9.f, 20 / 9.f, 33 / 9.f, 24 / 9.f});
}

TEST(RefAveragePool, CeilModeCountsOnlyRealElements) {
  AttrMap a = attrs({{"kernel_shape", Attr::ofInts({2})},
                     {"strides", Attr::ofInts({2})},
                     {"ceil_mode", Attr::ofInt(1)}});
  Tensor x = f32({1, 1, 5}, {1, 2, 3, 4, 5});
  expectValues<float>(run1("AveragePool", a, {x}, DType::F32, {1, 1, 3}), {1, 1, 3},
                      {1.5f, 3.5f, 5});
  a.set("count_include_pad", Attr::ofInt(1));
  expectValues<float>(run1("AveragePool", a, {x}, DType::F32, {1, 1, 3}), {1, 1, 3},
                      {1.5f, 3.5f, 5});
}

TEST(RefAveragePool, SameUpperWithAndWithoutPadCount) {
  Tensor x = f64({1, 1, 4}, {1, 2, 3, 4});
  AttrMap a =
      attrs({{"kernel_shape", Attr::ofInts({3})}, {"auto_pad", Attr::ofString("SAME_UPPER")}});
  expectValues<double>(run1("AveragePool", a, {x}, DType::F64, {1, 1, 4}), {1, 1, 4},
                       {1.5, 2, 3, 3.5});
  a.set("count_include_pad", Attr::ofInt(1));
  expectValues<double>(run1("AveragePool", a, {x}, DType::F64, {1, 1, 4}), {1, 1, 4},
                       {1, 2, 3, 7.0 / 3});
}

TEST(RefGlobalPool, AverageAndMax) {
  Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  expectValues<float>(run1("GlobalAveragePool", {}, {x}, DType::F32, {1, 2, 1, 1}), {1, 2, 1, 1},
                      {2.5f, 6.5f});
  expectValues<float>(run1("GlobalMaxPool", {}, {x}, DType::F32, {1, 2, 1, 1}), {1, 2, 1, 1},
                      {4, 8});
  expectValues<double>(
      run1("GlobalMaxPool", {}, {f64({2, 1, 3}, {-1, -5, -2, 0, 9, 1})}, DType::F64, {2, 1, 1}),
      {2, 1, 1}, {-1, 9});
}

TEST(RefPool, MissingKernelShapeFails) {
  OpCall c{"MaxPool", {}, {x3x3()}, {{DType::F32, {1, 1, 2, 2}}}};
  EXPECT_NE(errorOf(c).find("kernel_shape is required"), std::string::npos);
}

}  // namespace
}  // namespace tandem
