// The grouped direct convolution (runtime/cpu/avx2/GroupedConv.h) against a naive double loop,
// in each channel layout, over strides, dilations, pads, group widths and epilogues; and the
// Conv kernel's "grouped-direct" variant, chosen through the registry, against the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "dnnl_test_util.h"
#include "runtime/cpu/avx2/GroupedConv.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnltest {
namespace {

using avx2::ChannelLayout;

// Element (n, c, h, w) of an [N, C, H, W] tensor stored in `l`.
size_t at(ChannelLayout l, int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H,
          int64_t W) {
  if (l == ChannelLayout::Nhwc) return (size_t)(((n * H + h) * W + w) * C + c);
  const int64_t B = l == ChannelLayout::NChw8c ? 8 : 16;
  return (size_t)((((n * (C / B) + c / B) * H + h) * W + w) * B + c % B);
}

struct Case {
  ChannelLayout layout;
  int64_t N, C, K, G, H, W, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr;
  bool bias, accumulate, relu;
  int threads;
};

std::string name(const Case& c) {
  const char* l = c.layout == ChannelLayout::Nhwc ? "nhwc" : c.layout == ChannelLayout::NChw8c ? "nChw8c" : "nChw16c";
  return std::string(l) + " N" + std::to_string(c.N) + " C" + std::to_string(c.C) + " K" +
         std::to_string(c.K) + " G" + std::to_string(c.G) + " " + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " k" + std::to_string(c.KH) + "x" + std::to_string(c.KW) + " s" +
         std::to_string(c.sh) + "," + std::to_string(c.sw) + " d" + std::to_string(c.dh) + "," +
         std::to_string(c.dw) + " p" + std::to_string(c.pt) + std::to_string(c.pl) +
         std::to_string(c.pb) + std::to_string(c.pr) + (c.bias ? " bias" : "") +
         (c.accumulate ? " sum" : "") + (c.relu ? " relu" : "") + " t" + std::to_string(c.threads);
}

// Runs the case; false when the host cannot (no vector width for it).
bool check(const Case& c) {
  const int64_t OH = (c.H + c.pt + c.pb - (c.KH - 1) * c.dh - 1) / c.sh + 1;
  const int64_t OW = (c.W + c.pl + c.pr - (c.KW - 1) * c.dw - 1) / c.sw + 1;
  const int64_t cig = c.C / c.G, cog = c.K / c.G;
  std::vector<float> x = randomVec(c.N * c.C * c.H * c.W, 21),
                     w = randomVec(c.K * cig * c.KH * c.KW, 22, -0.3f, 0.3f),
                     b = randomVec(c.K, 23), y = randomVec(c.N * c.K * OH * OW, 24);
  std::vector<double> want(y.begin(), y.end());
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t g = k / cog;
          double acc = c.bias ? b[k] : 0.0;
          for (int64_t ic = 0; ic < cig; ++ic)
            for (int64_t i = 0; i < c.KH; ++i)
              for (int64_t j = 0; j < c.KW; ++j) {
                const int64_t ih = oh * c.sh - c.pt + i * c.dh, iw = ow * c.sw - c.pl + j * c.dw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                acc += (double)x[at(c.layout, n, g * cig + ic, ih, iw, c.C, c.H, c.W)] *
                       w[((k * cig + ic) * c.KH + i) * c.KW + j];
              }
          const size_t o = at(c.layout, n, k, oh, ow, c.K, OH, OW);
          if (c.accumulate) acc += y[o];
          if (c.relu) acc = std::max(acc, 0.0);
          want[o] = acc;
        }
  avx2::GroupedConvShape s;
  s.N = c.N; s.C = c.C; s.H = c.H; s.W = c.W; s.K = c.K; s.OH = OH; s.OW = OW; s.G = c.G;
  s.KH = c.KH; s.KW = c.KW; s.strideH = c.sh; s.strideW = c.sw; s.dilationH = c.dh;
  s.dilationW = c.dw; s.padTop = c.pt; s.padLeft = c.pl;
  avx2::GroupedConv gc;
  std::string why;
  if (!gc.prepare(s, c.layout, w.data(), c.bias ? b.data() : nullptr, &why)) return false;
  gc.run(x.data(), y.data(), c.accumulate, c.relu, c.threads);
  int bad = 0;
  for (size_t i = 0; i < y.size() && bad < 5; ++i)
    if (!(std::fabs(y[i] - want[i]) <= 1e-4 * std::max(1.0, std::fabs(want[i])))) {
      ADD_FAILURE() << name(c) << " [" << i << "]: got " << y[i] << ", want " << want[i];
      ++bad;
    }
  return true;
}

TEST(GroupedConv, MatchesNaiveConvolution) {
  if (!avx2::available()) GTEST_SKIP() << "this CPU has no AVX2/FMA";
  // Group widths of 1, 2 and 3 vectors of 8 (AVX2) or 16 (AVX-512), odd widths with partial
  // pixel tiles, every pad side, strides, dilations, a 1x1 and a 5x3 filter, the epilogues,
  // and threads splitting the rows, or rows and ranges of groups where rows are few (the
  // 9-row, 8-row and 7-row cases on 2-3 threads: 2, 2 and 3 group ranges per row).
  int ran = 0;
  for (ChannelLayout l : {ChannelLayout::Nhwc, ChannelLayout::NChw8c, ChannelLayout::NChw16c}) {
    const std::vector<Case> cases = {
        {l, 2, 32, 32, 2, 13, 29, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false, true, 1},
        {l, 1, 64, 64, 4, 9, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, true, 2},
        {l, 1, 48, 96, 3, 7, 31, 3, 3, 1, 1, 1, 1, 0, 2, 1, 0, false, false, false, 1},
        {l, 2, 32, 64, 2, 11, 11, 5, 3, 1, 2, 2, 1, 3, 1, 2, 1, true, true, false, 3},
        {l, 1, 64, 32, 2, 6, 40, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true, false, false, 1},
        {l, 1, 16, 16, 2, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, true, 1},
        {l, 1, 32, 32, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, true, false, true, 1},
        {l, 1, 80, 80, 5, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, true, 2},
    };
    for (const Case& c : cases) ran += check(c) ? 1 : 0;
  }
  // Every group width of 16 or 32 output channels runs on any AVX2 host (8 wide at least).
  EXPECT_GE(ran, 16);
}

TEST(GroupedConv, RefusesWhatItCannotRun) {
  if (!avx2::available()) GTEST_SKIP() << "this CPU has no AVX2/FMA";
  avx2::GroupedConvShape s;
  s.N = 1; s.C = 12; s.K = 12; s.G = 3; s.H = s.W = 8; s.OH = s.OW = 6; s.KH = s.KW = 3;
  std::string why;
  EXPECT_EQ(avx2::groupedConvVectorWidth(s, ChannelLayout::Nhwc, &why), 0);  // 4 per group
  EXPECT_NE(why.find("multiple of 8"), std::string::npos) << why;
  s.C = s.K = 24;  // 8 per group, but nChw16c's block does not divide 24
  EXPECT_EQ(avx2::groupedConvVectorWidth(s, ChannelLayout::NChw16c, &why), 0);
  EXPECT_EQ(avx2::groupedConvVectorWidth(s, ChannelLayout::NChw8c, &why), 8);
  s.padTop = -1;
  EXPECT_EQ(avx2::groupedConvVectorWidth(s, ChannelLayout::Nhwc, &why), 0);
}

// Through the registry: the Conv kernel offers "grouped-direct" for a grouped Conv with
// constant weights between values in the host layout (never for a dense one, nor for plain
// activations), and that variant matches the reference kernel, alone and fused with a ReLU.
OpCase groupedCase(bool hostLayout, int64_t group) {
  OpCase c;
  c.op = "Conv";
  c.attrs.set("group", Attr::ofInt(group));
  c.attrs.set("strides", Attr::ofInts({2, 2}));
  c.attrs.set("pads", Attr::ofInts({1, 1, 1, 1}));
  c.inputs = {randomTensor({2, 32, 15, 14}, 41), randomTensor({32, 32 / group, 3, 3}, 42),
              randomTensor({32}, 43)};
  c.constant = {false, true, true};
  c.outputs = {{2, 32, 8, 7}};
  if (hostLayout) setHostLayouts(&c);
  return c;
}

bool offered(const OpCase& c) { return convOffers(c, "grouped-direct"); }

TEST(GroupedConv, ConvVariantMatchesReference) {
  if (!avx2::available()) GTEST_SKIP() << "this CPU has no AVX2/FMA";
  KernelRegistry ref;
  registerCpuReferenceKernels(ref);
  OpCase c = groupedCase(true, 2);
  ASSERT_TRUE(offered(c)) << "host layout " << dnnlcpu::activationLayoutName();
  EXPECT_FALSE(offered(groupedCase(false, 2)));  // plain activations: oneDNN's
  EXPECT_FALSE(offered(groupedCase(true, 1)));   // dense: oneDNN's brgconv / jit
  OpCase variableW = c;
  variableW.constant = {false, false, true};     // weights fed per run (training)
  EXPECT_FALSE(offered(variableW));

  // The reference on plain tensors.
  OpCase plain = groupedCase(false, 2);
  std::unique_ptr<Kernel> rk;
  ASSERT_TRUE(ref.create("cpu", plain.context(), &rk).isOk());
  Tensor want = Tensor::alloc(DType::F32, plain.outputs[0]);
  std::vector<const Tensor*> in = {&plain.inputs[0], &plain.inputs[1], &plain.inputs[2]};
  ASSERT_TRUE(rk->run(in, {&want}).isOk());

  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "fused with Relu" : "alone");
    OpCase g = c;
    g.inputs[0] = relayout(plain.inputs[0], true);
    KernelContext ctx = g.context();
    ctx.variant = "grouped-direct";
    std::unique_ptr<Kernel> k;
    createConvFused(ctx, relu, -1, &k);
    ASSERT_TRUE(k);
    EXPECT_NE(k->implName().find(":grouped_conv_direct"), std::string::npos) << k->implName();
    Tensor y = Tensor::alloc(DType::F32, g.outputs[0]);
    std::vector<const Tensor*> gin = {&g.inputs[0], &g.inputs[1], &g.inputs[2]};
    ASSERT_TRUE(k->run(gin, {&y}).isOk());
    std::vector<double> w = toDouble(want);
    if (relu)
      for (double& v : w) v = std::max(v, 0.0);
    expectClose(relayout(y, false), w, 1e-4);
  }
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
