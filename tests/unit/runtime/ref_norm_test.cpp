// Tests of the reference normalisation kernels: BatchNormalization (inference and training
// mode), LayerNormalization (axes, optional B, Mean/InvStdDev outputs), MeanVarianceNormalization,
// Softmax, LogSoftmax, InstanceNormalization.
#include <cmath>

#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

TEST(RefBatchNorm, InferenceFormula) {
  Tensor x = f32({1, 2, 1, 2}, {1, 3, 2, 4});
  Tensor y = run1("BatchNormalization", attrs({{"epsilon", Attr::ofFloat(0)}}),
                  {x, f32({2}, {1, 2}), f32({2}, {0, 1}), f32({2}, {2, 3}), f32({2}, {1, 4})},
                  DType::F32, {1, 2, 1, 2});
  expectValues<float>(y, {1, 2, 1, 2}, {-1, 1, 0, 2});
}

TEST(RefBatchNorm, EpsilonAndMixedParameterDtypes) {
  // f64 data with f32 parameters (T1/T2 may differ from T); var + eps = 0.25 + 0.75 = 1.
  Tensor y =
      run1("BatchNormalization", attrs({{"epsilon", Attr::ofFloat(0.75f)}}),
           {f64({2, 1}, {1, 5}), f32({1}, {3}), f32({1}, {1}), f32({1}, {1}), f32({1}, {0.25f})},
           DType::F64, {2, 1});
  expectValues<double>(y, {2, 1}, {1, 13});
}

TEST(RefBatchNorm, TrainingModeUsesBatchStatistics) {
  OpCall c{"BatchNormalization",
           attrs({{"epsilon", Attr::ofFloat(0)}, {"training_mode", Attr::ofInt(1)}}),
           {f32({2, 1}, {1, 3}), f32({1}, {1}), f32({1}, {0}), f32({1}, {0}), f32({1}, {1})},
           {{DType::F32, {2, 1}}, {DType::F32, {1}}, {DType::F32, {1}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<float>(outs[0], {2, 1}, {-1, 1});
  expectValues<float>(outs[1], {1}, {0.2f});  // 0 * 0.9 + 2 * 0.1
  expectValues<float>(outs[2], {1}, {1});     // 1 * 0.9 + 1 * 0.1
}

TEST(RefLayerNorm, LastAxisWithScaleAndBias) {
  const double inv = 1 / std::sqrt(1 + 1e-5);
  Tensor y =
      run1("LayerNormalization", {},
           {f32({2, 2}, {1, 3, 2, 2}), f32({2}, {2, 3}), f32({2}, {1, 0})}, DType::F32, {2, 2});
  expectValues<float>(y, {2, 2}, {float(-2 * inv + 1), float(3 * inv), 1, 0});
}

TEST(RefLayerNorm, AxisZeroWithoutBiasAndStatsOutputs) {
  OpCall c{"LayerNormalization",
           attrs({{"axis", Attr::ofInt(0)}, {"epsilon", Attr::ofFloat(0)}}),
           {f64({2, 2}, {1, 3, 2, 2}), f64({2, 2}, {1, 1, 1, 2})},
           {{DType::F64, {2, 2}}, {DType::F64, {1, 1}}, {DType::F64, {1, 1}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  // mean 2, variance (1 + 1 + 0 + 0) / 4 = 0.5.
  const double inv = 1 / std::sqrt(0.5);
  expectValues<double>(outs[0], {2, 2}, {-inv, inv, 0, 0}, 1e-12);
  expectValues<double>(outs[1], {1, 1}, {2}, 1e-12);
  expectValues<double>(outs[2], {1, 1}, {inv}, 1e-12);
}

TEST(RefLayerNorm, MiddleAxisWithF32Stats) {
  // Rows of 4 over axes [1, 2] of a [2, 2, 2]: each batch normalised separately.
  OpCall c{"LayerNormalization",
           attrs({{"axis", Attr::ofInt(-2)}, {"epsilon", Attr::ofFloat(0)}}),
           {f32({2, 2, 2}, {1, 1, 3, 3, 0, 0, 0, 4}), f32({2, 2}, {1, 1, 1, 1})},
           {{DType::F32, {2, 2, 2}}, {DType::F32, {2, 1, 1}}, {DType::F32, {2, 1, 1}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  // Batch 1: mean 1, var (1+1+1+9)/4 = 3.
  const float s3 = float(1 / std::sqrt(3.0));
  expectValues<float>(outs[0], {2, 2, 2}, {-1, -1, 1, 1, -s3, -s3, -s3, 3 * s3});
  expectValues<float>(outs[1], {2, 1, 1}, {2, 1});
  expectValues<float>(outs[2], {2, 1, 1}, {1, s3});
}

TEST(RefSoftmax, DefaultLastAxis) {
  expectValues<float>(run1("Softmax", {}, {f32({1, 3}, {1, 2, 3})}, DType::F32, {1, 3}), {1, 3},
                      {0.09003057f, 0.24472847f, 0.66524096f});
}

TEST(RefSoftmax, LargeValuesAreStable) {
  expectValues<float>(run1("Softmax", {}, {f32({2}, {1000, 1000})}, DType::F32, {2}), {2},
                      {0.5f, 0.5f});
  expectValues<double>(run1("LogSoftmax", {}, {f64({2}, {1000, 0})}, DType::F64, {2}), {2},
                       {0, -1000});
}

TEST(RefSoftmax, AxisZeroAndNegativeAxis) {
  Tensor x = f32({2, 2}, {0, 1, 0, 3});
  const float a = 1 / (1 + std::exp(2.0f));  // exp(1) / (exp(1) + exp(3))
  expectValues<float>(run1("Softmax", attrs({{"axis", Attr::ofInt(0)}}), {x}, DType::F32, {2, 2}),
                      {2, 2}, {0.5f, a, 0.5f, 1 - a});
  expectValues<float>(run1("Softmax", attrs({{"axis", Attr::ofInt(-2)}}), {x}, DType::F32, {2, 2}),
                      {2, 2}, {0.5f, a, 0.5f, 1 - a});
}

TEST(RefLogSoftmax, Values) {
  expectValues<float>(run1("LogSoftmax", {}, {f32({3}, {1, 2, 3})}, DType::F32, {3}), {3},
                      {-2.40760596f, -1.40760596f, -0.40760596f});
}

TEST(RefSoftmax, BadAxisFails) {
  OpCall c{"Softmax",
           attrs({{"axis", Attr::ofInt(2)}}),
           {f32({2, 2}, {0, 0, 0, 0})},
           {{DType::F32, {2, 2}}}};
  EXPECT_NE(errorOf(c).find("axis out of range"), std::string::npos);
}

// Over axes [0, 2, 3] (the default) each channel is normalised to mean 0 and deviation 1.
TEST(RefMvn, ChannelsToZeroMeanUnitDeviation) {
  Tensor x = f32({1, 2, 1, 2}, {1, 3, 10, 30});
  expectValues<float>(run1("MeanVarianceNormalization", {}, {x}, DType::F32, {1, 2, 1, 2}), {1, 2, 1, 2},
                      {-1, 1, -1, 1}, 1e-6f);
  expectValues<float>(run1("MeanVarianceNormalization", attrs({{"axes", Attr::ofInts({1})}}), {x},
                           DType::F32, {1, 2, 1, 2}),
                      {1, 2, 1, 2}, {-1, -1, 1, 1}, 1e-6f);
}

// InstanceNormalization over channels split across two threads, each channel's plane longer
// than the 8 summation lanes and not a multiple of them, against a plain two-pass loop.
TEST(RefInstanceNorm, ThreadedChannelsMatchTwoPassLoop) {
  const int64_t N = 2, C = 24, S = 61 * 67;
  std::vector<float> xv(N * C * S), sc(C), bi(C);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float((i * 7919) % 1000) / 100.f + float(i % 24);
  for (int64_t c = 0; c < C; ++c) sc[c] = 0.5f + 0.1f * c, bi[c] = 0.25f * c - 1;
  OpCall call{"InstanceNormalization", attrs({{"epsilon", Attr::ofFloat(1e-3f)}}),
              {f32({N, C, 61, 67}, xv), f32({C}, sc), f32({C}, bi)}, {{DType::F32, {N, C, 61, 67}}}};
  call.threads = 2;
  std::vector<Tensor> outs;
  ASSERT_TRUE(call.run(&outs).isOk());
  std::vector<float> want(xv.size());
  for (int64_t nc = 0; nc < N * C; ++nc) {
    double mean = 0, var = 0;
    for (int64_t s = 0; s < S; ++s) mean += xv[nc * S + s];
    mean /= S;
    for (int64_t s = 0; s < S; ++s) var += (xv[nc * S + s] - mean) * (xv[nc * S + s] - mean);
    var /= S;
    const int64_t c = nc % C;
    for (int64_t s = 0; s < S; ++s)
      want[nc * S + s] = float((xv[nc * S + s] - mean) / std::sqrt(var + 1e-3) * sc[c] + bi[c]);
  }
  expectValues<float>(outs[0], {N, C, 61, 67}, want, 1e-5);
}

// GroupNormalization-21: 3 groups of 2 channels, planes of 37 (vector loop tails), batch 2, two
// threads, against a plain two-pass loop per (n, group) in double.
TEST(RefGroupNorm, GroupsOfChannelsMatchTwoPassLoop) {
  const int64_t N = 2, C = 6, G = 3, S = 37, Cg = C / G;
  std::vector<float> xv(N * C * S), sc(C), bi(C);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float((i * 7919) % 1000) / 100.f + float(i % 5);
  for (int64_t c = 0; c < C; ++c) sc[c] = 0.5f + 0.1f * c, bi[c] = 0.25f * c - 1;
  OpCall call{"GroupNormalization",
              attrs({{"num_groups", Attr::ofInt(G)}, {"epsilon", Attr::ofFloat(1e-3f)}}),
              {f32({N, C, S}, xv), f32({C}, sc), f32({C}, bi)}, {{DType::F32, {N, C, S}}}};
  call.threads = 2;
  std::vector<Tensor> outs;
  ASSERT_TRUE(call.run(&outs).isOk());
  std::vector<float> want(xv.size());
  const int64_t block = Cg * S;
  for (int64_t ng = 0; ng < N * G; ++ng) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < block; ++i) mean += xv[ng * block + i];
    mean /= block;
    for (int64_t i = 0; i < block; ++i) var += (xv[ng * block + i] - mean) * (xv[ng * block + i] - mean);
    var /= block;
    for (int64_t i = 0; i < block; ++i) {
      const int64_t c = (ng % G) * Cg + i / S;
      want[ng * block + i] = float((xv[ng * block + i] - mean) / std::sqrt(var + 1e-3) * sc[c] + bi[c]);
    }
  }
  expectValues<float>(outs[0], {N, C, S}, want, 1e-5);
  // num_groups must divide C.
  OpCall bad = call;
  bad.attrs = attrs({{"num_groups", Attr::ofInt(4)}});
  EXPECT_FALSE(bad.run(&outs).isOk());
}

}  // namespace
}  // namespace tandem
