// The BatchNormalization kernel (plain and host layouts, alone, fused with its Relu, and with
// the channel Concat before it), the GroupNormalization / InstanceNormalization kernel (alone
// and with its SiLU), the oneDNN LayerNormalization, Softmax and LogSoftmax kernels against naive
// loops, and the autodiff BatchNormalizationGrad and LayerNormalizationGrad kernels against the
// reference (and the LayerNormalizationGrad reference against finite differences).
#include <cstring>

#include "dnnl_test_util.h"
#include "fused_attrs_util.h"

namespace tandem {
namespace dnnltest {
namespace {

// ---- BatchNormalization ----

void checkBatchNorm(const Shape& x, bool constParams, uint32_t seed) {
  const int64_t C = x[1];
  OpCase c;
  c.op = "BatchNormalization";
  c.attrs.set("epsilon", Attr::ofFloat(1e-3f));
  c.inputs = {randomTensor(x, seed), randomTensor({C}, seed + 1, 0.5f, 2.f),
              randomTensor({C}, seed + 2), randomTensor({C}, seed + 3),
              randomTensor({C}, seed + 4, 0.1f, 3.f)};
  c.constant = {false, constParams, constParams, constParams, constParams};
  c.outputs = {x};
  ASSERT_TRUE(dnnlSupports(c));
  Tensor y = runOnce(c);
  const int64_t N = x[0], S = numElements(x) / (N * C);
  const float *X = c.inputs[0].data<float>(), *sc = c.inputs[1].data<float>(),
              *b = c.inputs[2].data<float>(), *mean = c.inputs[3].data<float>(),
              *var = c.inputs[4].data<float>();
  std::vector<double> want(numElements(x));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t s = 0; s < S; ++s) {
        int64_t i = (n * C + ch) * S + s;
        want[i] = (X[i] - mean[ch]) / std::sqrt((double)var[ch] + 1e-3) * sc[ch] + b[ch];
      }
  expectClose(y, want);
}

TEST(DnnlBatchNorm, FourD) { checkBatchNorm({2, 16, 5, 7}, true, 1); }
TEST(DnnlBatchNorm, TwoDRuntimeParams) { checkBatchNorm({4, 10}, false, 2); }
TEST(DnnlBatchNorm, ThreeD) { checkBatchNorm({3, 6, 11}, true, 3); }

// The host activation layout on either side (the plan's input/output_layouts): the same values
// as the plain case, whichever side is blocked; with ReLU as a fused batchnorm-relu step.
void checkBatchNormLayouts(bool inBlocked, bool outBlocked, bool fusedRelu) {
  const Shape x = {2, 32, 5, 7};
  const int64_t C = x[1];
  OpCase c;
  c.op = fusedRelu ? "Fused" : "BatchNormalization";
  if (fusedRelu) {
    FusedStep f = fusedStep("batchnorm-relu", {"BatchNormalization", "Relu"}, {{0, 1, 2, 3, 4}, {-2}}, {1});
    f.setMemberAttr(0, "epsilon", Attr::ofFloat(1e-3f));
    c.attrs = f.attrs;
    c.body = f.body;
  } else {
    c.attrs.set("epsilon", Attr::ofFloat(1e-3f));
  }
  c.attrs.set("input_layouts", Attr::ofStrings({inBlocked ? "blocked" : "", "", "", "", ""}));
  c.attrs.set("output_layouts", Attr::ofStrings({outBlocked ? "blocked" : ""}));
  Tensor plainX = randomTensor(x, 11, -2.f, 2.f);
  c.inputs = {inBlocked ? relayout(plainX, true) : plainX, randomTensor({C}, 12, 0.5f, 2.f),
              randomTensor({C}, 13), randomTensor({C}, 14), randomTensor({C}, 15, 0.1f, 3.f)};
  c.constant = {false, true, true, true, true};
  c.outputs = {x};
  std::string impl;
  Tensor y = runOnce(c, &impl);
  ASSERT_TRUE(y.defined());
  EXPECT_EQ(impl.find("+relu") != std::string::npos, fusedRelu) << impl;
  EXPECT_EQ(impl.find("reorders[dst]") != std::string::npos, inBlocked != outBlocked) << impl;
  if (outBlocked) y = relayout(y, false);
  const float *X = plainX.data<float>(), *sc = c.inputs[1].data<float>(),
              *b = c.inputs[2].data<float>(), *mean = c.inputs[3].data<float>(),
              *var = c.inputs[4].data<float>();
  const int64_t S = 5 * 7;
  std::vector<double> want(numElements(x));
  int negatives = 0;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t s = 0; s < S; ++s) {
        int64_t i = (n * C + ch) * S + s;
        double v = (X[i] - mean[ch]) / std::sqrt((double)var[ch] + 1e-3) * sc[ch] + b[ch];
        negatives += v < 0;
        want[i] = fusedRelu ? std::max(v, 0.0) : v;
      }
  ASSERT_GT(negatives, 100);  // the ReLU has work to do
  expectClose(y, want);
}

TEST(DnnlBatchNorm, BlockedInAndOut) { checkBatchNormLayouts(true, true, false); }
TEST(DnnlBatchNorm, PlainInBlockedOut) { checkBatchNormLayouts(false, true, false); }
TEST(DnnlBatchNorm, BlockedInPlainOut) { checkBatchNormLayouts(true, false, false); }
TEST(DnnlBatchNorm, FusedReluPlain) { checkBatchNormLayouts(false, false, true); }
TEST(DnnlBatchNorm, FusedReluBlocked) { checkBatchNormLayouts(true, true, true); }
TEST(DnnlBatchNorm, FusedReluPlainInBlockedOut) { checkBatchNormLayouts(false, true, true); }

// Concat (channels) -> BatchNormalization -> Relu as one concat-batchnorm-relu step (DenseNet):
// the same values as concatenating then normalising, with every value in the host layout, every
// value plain, or a mix (the plain kernel behind reorders); the input channel counts differ and
// are multiples of 16, so each host layout (nChw8c, nChw16c, nhwc) keeps them unpadded.
void checkConcatBatchNormRelu(const std::vector<bool>& inBlocked, bool outBlocked,
                              bool constParams) {
  const std::vector<int64_t> channels = {16, 32, 16};
  const int64_t N = 2, H = 5, W = 3, S = H * W, C = 64;
  OpCase c;
  c.op = "Fused";
  FusedStep f = fusedStep("concat-batchnorm-relu", {"Concat", "BatchNormalization", "Relu"},
                          {{0, 1, 2}, {-2, 3, 4, 5, 6}, {-3}}, {2});
  f.setMemberAttr(0, "axis", Attr::ofInt(1));
  f.setMemberAttr(1, "epsilon", Attr::ofFloat(1e-3f));
  c.attrs = f.attrs;
  c.body = f.body;
  std::vector<std::string> inLayouts;
  std::vector<Tensor> plainX;
  for (size_t i = 0; i < channels.size(); ++i) {
    plainX.push_back(randomTensor({N, channels[i], H, W}, 20 + (uint32_t)i, -2.f, 2.f));
    c.inputs.push_back(inBlocked[i] ? relayout(plainX[i], true) : plainX[i]);
    c.constant.push_back(false);
    inLayouts.push_back(inBlocked[i] ? "blocked" : "");
  }
  c.inputs.push_back(randomTensor({C}, 30, 0.5f, 2.f));
  c.inputs.push_back(randomTensor({C}, 31));
  c.inputs.push_back(randomTensor({C}, 32));
  c.inputs.push_back(randomTensor({C}, 33, 0.1f, 3.f));
  for (int k = 0; k < 4; ++k) {
    c.constant.push_back(constParams);
    inLayouts.push_back("");
  }
  c.attrs.set("input_layouts", Attr::ofStrings(inLayouts));
  c.attrs.set("output_layouts", Attr::ofStrings({outBlocked ? "blocked" : ""}));
  c.outputs = {{N, C, H, W}};
  std::string impl;
  Tensor y = runOnce(c, &impl);
  ASSERT_TRUE(y.defined());
  EXPECT_NE(impl.find("concat+channel-affine+relu"), std::string::npos) << impl;
  if (outBlocked) y = relayout(y, false);
  const float *sc = c.inputs[3].data<float>(), *b = c.inputs[4].data<float>(),
              *mean = c.inputs[5].data<float>(), *var = c.inputs[6].data<float>();
  std::vector<double> want(N * C * S);
  int negatives = 0;
  for (int64_t n = 0; n < N; ++n) {
    int64_t ch = 0;
    for (size_t i = 0; i < channels.size(); ++i)
      for (int64_t ci = 0; ci < channels[i]; ++ci, ++ch)
        for (int64_t s = 0; s < S; ++s) {
          double x = plainX[i].data<float>()[(n * channels[i] + ci) * S + s];
          double v = (x - mean[ch]) / std::sqrt((double)var[ch] + 1e-3) * sc[ch] + b[ch];
          negatives += v < 0;
          want[(n * C + ch) * S + s] = std::max(v, 0.0);
        }
  }
  ASSERT_GT(negatives, 100);  // the ReLU has work to do
  expectClose(y, want);
}

TEST(DnnlConcatBatchNormRelu, AllBlocked) { checkConcatBatchNormRelu({true, true, true}, true, true); }
TEST(DnnlConcatBatchNormRelu, AllPlain) { checkConcatBatchNormRelu({false, false, false}, false, true); }
TEST(DnnlConcatBatchNormRelu, RuntimeParams) { checkConcatBatchNormRelu({true, true, true}, true, false); }
TEST(DnnlConcatBatchNormRelu, MixedLayouts) { checkConcatBatchNormRelu({false, true, true}, true, true); }
TEST(DnnlConcatBatchNormRelu, BlockedInPlainOut) { checkConcatBatchNormRelu({true, true, true}, false, true); }

// Training mode runs here in f32 (DnnlBatchNormTraining below); f64 falls back to the reference.
TEST(DnnlBatchNorm, TrainingModeF64FallsBack) {
  OpCase c;
  c.op = "BatchNormalization";
  c.attrs.set("training_mode", Attr::ofInt(1));
  c.inputs = {randomTensor({2, 3, 4}, 1), randomTensor({3}, 2), randomTensor({3}, 3),
              randomTensor({3}, 4), randomTensor({3}, 5, 0.1f, 1.f)};
  c.outputs = {{2, 3, 4}};
  EXPECT_TRUE(dnnlSupports(c));
  std::vector<double> v(24, 0.5);
  c.inputs[0] = Tensor::fromVector<double>({2, 3, 4}, v);
  EXPECT_FALSE(dnnlSupports(c));
}

// ---- LayerNormalization ----

void checkLayerNorm(const Shape& x, int64_t axis, bool withBias, uint32_t seed) {
  int64_t a = axis < 0 ? axis + (int64_t)x.size() : axis;
  Shape normShape(x.begin() + a, x.end());
  OpCase c;
  c.op = "LayerNormalization";
  c.attrs.set("axis", Attr::ofInt(axis));
  c.attrs.set("epsilon", Attr::ofFloat(1e-5f));
  c.inputs = {randomTensor(x, seed, -3.f, 3.f), randomTensor(normShape, seed + 1)};
  if (withBias) c.inputs.push_back(randomTensor(normShape, seed + 2));
  c.constant = {false, true, true};
  c.outputs = {x, {}, {}};
  c.outputAbsent = {false, true, true};
  ASSERT_TRUE(dnnlSupports(c));
  Tensor y = runOnce(c);
  const int64_t inner = numElements(normShape), outer = numElements(x) / inner;
  const float* X = c.inputs[0].data<float>();
  std::vector<double> want(numElements(x));
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += X[o * inner + i];
    mean /= inner;
    for (int64_t i = 0; i < inner; ++i) var += (X[o * inner + i] - mean) * (X[o * inner + i] - mean);
    var /= inner;
    for (int64_t i = 0; i < inner; ++i) {
      double v = (X[o * inner + i] - mean) / std::sqrt(var + 1e-5) * c.inputs[1].data<float>()[i];
      if (withBias) v += c.inputs[2].data<float>()[i];
      want[o * inner + i] = v;
    }
  }
  expectClose(y, want);
}

TEST(DnnlLayerNorm, LastAxis) { checkLayerNorm({2, 7, 64}, -1, true, 1); }
TEST(DnnlLayerNorm, LastTwoAxesNoBias) { checkLayerNorm({3, 4, 5}, 1, false, 2); }
TEST(DnnlLayerNorm, NegativeAxisTwo) { checkLayerNorm({2, 3, 4, 6}, -2, true, 3); }

TEST(DnnlLayerNorm, MeanAndInvStdDevOutputs) {
  // Rows [1,2,3,4] and [0,0,0,8]: means 2.5 and 2, variances 1.25 and 12.
  OpCase c;
  c.op = "LayerNormalization";
  c.attrs.set("epsilon", Attr::ofFloat(0.25f));
  c.inputs = {Tensor::fromVector<float>({2, 4}, {1, 2, 3, 4, 0, 0, 0, 8}),
              Tensor::fromVector<float>({4}, {1, 1, 1, 1})};
  c.constant = {false, true};
  c.outputs = {{2, 4}, {2, 1}, {2, 1}};
  ASSERT_TRUE(dnnlSupports(c));
  std::unique_ptr<Kernel> k = createKernel(c);
  ASSERT_TRUE(k);
  Tensor y = Tensor::alloc(DType::F32, {2, 4}), mean = Tensor::alloc(DType::F32, {2, 1}),
         inv = Tensor::alloc(DType::F32, {2, 1});
  ASSERT_TRUE(k->run({&c.inputs[0], &c.inputs[1], nullptr}, {&y, &mean, &inv}).isOk());
  expectClose(mean, {2.5, 2.0});
  expectClose(inv, {1 / std::sqrt(1.5), 1 / std::sqrt(12.25)});
  expectClose(y, {-1.5 / std::sqrt(1.5), -0.5 / std::sqrt(1.5), 0.5 / std::sqrt(1.5),
                  1.5 / std::sqrt(1.5), -2 / 3.5, -2 / 3.5, -2 / 3.5, 6 / 3.5});
  // Only InvStdDev requested (Mean absent): the mean goes to the workspace.
  c.outputAbsent = {false, true, false};
  std::unique_ptr<Kernel> k2 = createKernel(c);
  ASSERT_TRUE(k2);
  Tensor inv2 = Tensor::alloc(DType::F32, {2, 1});
  ASSERT_TRUE(k2->run({&c.inputs[0], &c.inputs[1], nullptr}, {&y, nullptr, &inv2}).isOk());
  expectClose(inv2, {1 / std::sqrt(1.5), 1 / std::sqrt(12.25)});
}

// ---- Softmax / LogSoftmax ----

void checkSoftmax(const std::string& op, const Shape& x, int64_t axis, uint32_t seed) {
  OpCase c;
  c.op = op;
  c.attrs.set("axis", Attr::ofInt(axis));
  c.inputs = {randomTensor(x, seed, -5.f, 5.f)};
  c.outputs = {x};
  ASSERT_TRUE(dnnlSupports(c));
  Tensor y = runOnce(c);
  const int64_t a = axis < 0 ? axis + (int64_t)x.size() : axis;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < a; ++i) outer *= x[i];
  for (size_t i = a + 1; i < x.size(); ++i) inner *= x[i];
  const int64_t n = x[a];
  const float* X = c.inputs[0].data<float>();
  std::vector<double> want(numElements(x));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      double mx = -1e30, sum = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max<double>(mx, X[(o * n + j) * inner + in]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(X[(o * n + j) * inner + in] - mx);
      for (int64_t j = 0; j < n; ++j) {
        double v = X[(o * n + j) * inner + in] - mx;
        want[(o * n + j) * inner + in] = op == "Softmax" ? std::exp(v) / sum : v - std::log(sum);
      }
    }
  expectClose(y, want);
}

TEST(DnnlSoftmax, DefaultLastAxis) { checkSoftmax("Softmax", {4, 1000}, -1, 1); }
TEST(DnnlSoftmax, MiddleAxis) { checkSoftmax("Softmax", {2, 5, 3, 4}, 1, 2); }
TEST(DnnlSoftmax, FirstAxis) { checkSoftmax("Softmax", {6, 7}, 0, 3); }
TEST(DnnlLogSoftmax, LastAxis) { checkSoftmax("LogSoftmax", {3, 17}, -1, 4); }
TEST(DnnlLogSoftmax, MiddleAxis) { checkSoftmax("LogSoftmax", {2, 9, 5}, -2, 5); }

TEST(DnnlSoftmax, HandComputed) {
  // softmax([0, ln 3]) = [0.25, 0.75]
  OpCase c;
  c.op = "Softmax";
  c.inputs = {Tensor::fromVector<float>({1, 2}, {0.f, std::log(3.f)})};
  c.outputs = {{1, 2}};
  expectClose(runOnce(c), {0.25, 0.75});
}

TEST(DnnlSoftmax, AxisOutOfRangeFallsBack) {
  OpCase c;
  c.op = "Softmax";
  c.attrs.set("axis", Attr::ofInt(2));
  c.inputs = {randomTensor({2, 3}, 1)};
  c.outputs = {{2, 3}};
  EXPECT_FALSE(dnnlSupports(c));
}

// ---- GroupNormalization / InstanceNormalization (+ SiLU) ----

// GroupNormalization-21 (8 groups of 4 channels) or InstanceNormalization (groups == C), alone
// or as a groupnorm-silu step, with the host layout on either side: the same values as a
// two-pass f64 normalisation of the plain tensor, and the impl says which loop and layout ran.
void checkGroupNorm(const std::string& op, bool inBlocked, bool outBlocked, bool silu) {
  const Shape x = {2, 32, 5, 7};
  const int64_t N = 2, C = 32, S = 35, G = op == "InstanceNormalization" ? C : 8, Cg = C / G;
  OpCase c;
  AttrMap member;
  member.set("epsilon", Attr::ofFloat(1e-3f));
  if (op == "GroupNormalization") member.set("num_groups", Attr::ofInt(G));
  if (silu) {
    FusedStep f = fusedStep("groupnorm-silu", {op, "Sigmoid", "Mul"}, {{0, 1, 2}, {-2}, {-3, -2}}, {2});
    f.setMemberAttr(0, "epsilon", Attr::ofFloat(1e-3f));
    if (op == "GroupNormalization") f.setMemberAttr(0, "num_groups", Attr::ofInt(G));
    c.op = "Fused";
    c.attrs = f.attrs;
    c.body = f.body;
  } else {
    c.op = op;
    c.attrs = member;
  }
  c.attrs.set("input_layouts", Attr::ofStrings({inBlocked ? "blocked" : "", "", ""}));
  c.attrs.set("output_layouts", Attr::ofStrings({outBlocked ? "blocked" : ""}));
  Tensor plainX = randomTensor(x, 41, -2.f, 3.f);
  c.inputs = {inBlocked ? relayout(plainX, true) : plainX, randomTensor({C}, 42, 0.5f, 2.f),
              randomTensor({C}, 43)};
  c.constant = {false, true, false};
  c.outputs = {x};
  std::string impl;
  Tensor y = runOnce(c, &impl);
  ASSERT_TRUE(y.defined());
  EXPECT_NE(impl.find(silu ? "group-norm+silu" : "group-norm:"), std::string::npos) << impl;
  EXPECT_EQ(impl.find("reorders[dst]") != std::string::npos, inBlocked != outBlocked) << impl;
  if (outBlocked) y = relayout(y, false);
  const float *X = plainX.data<float>(), *sc = c.inputs[1].data<float>(), *b = c.inputs[2].data<float>();
  std::vector<double> want(numElements(x));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t base = (n * C + g * Cg) * S, len = Cg * S;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < len; ++i) mean += X[base + i];
      mean /= double(len);
      for (int64_t i = 0; i < len; ++i) var += (X[base + i] - mean) * (X[base + i] - mean);
      var /= double(len);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t ch = g * Cg + i / S;
        double v = (X[base + i] - mean) / std::sqrt(var + 1e-3) * sc[ch] + b[ch];
        want[base + i] = silu ? v / (1 + std::exp(-v)) : v;
      }
    }
  expectClose(y, want);
}

TEST(DnnlGroupNorm, Plain) { checkGroupNorm("GroupNormalization", false, false, false); }
TEST(DnnlGroupNorm, BlockedInAndOut) { checkGroupNorm("GroupNormalization", true, true, false); }
TEST(DnnlGroupNorm, BlockedInPlainOut) { checkGroupNorm("GroupNormalization", true, false, false); }
TEST(DnnlGroupNorm, PlainInBlockedOut) { checkGroupNorm("GroupNormalization", false, true, false); }
TEST(DnnlGroupNorm, FusedSiluBlocked) { checkGroupNorm("GroupNormalization", true, true, true); }
TEST(DnnlGroupNorm, FusedSiluPlain) { checkGroupNorm("GroupNormalization", false, false, true); }
TEST(DnnlGroupNorm, InstanceNormBlocked) { checkGroupNorm("InstanceNormalization", true, true, false); }
TEST(DnnlGroupNorm, InstanceNormFusedSiluPlainInBlockedOut) {
  checkGroupNorm("InstanceNormalization", false, true, true);
}

// Scale and bias not of C elements (GroupNormalization-18's [num_groups]) or groups not
// dividing C: this kernel declines them (the ref kernel then answers, with its error).
// ---- BatchNormalization in training mode ----

// Batch statistics per channel over N and the spatial dims (population variance), Y and the
// running outputs (ONNX: m * input + (1 - m) * batch), against a two-pass f64 computation of
// the plain tensor. Values around 500 with a spread of 1: the shifted moments keep the
// variance (a one-pass sum of squares in f32 would lose it entirely). Rank 4 in every layout
// mix, and rank 2 (BatchNorm1d), plain, with the running outputs absent or present.
void checkBatchNormTraining(const Shape& x, bool inBlocked, bool outBlocked, bool running) {
  const int64_t N = x[0], C = x[1], S = numElements(x) / (N * C);
  OpCase c;
  c.op = "BatchNormalization";
  c.attrs.set("epsilon", Attr::ofFloat(1e-3f));
  c.attrs.set("momentum", Attr::ofFloat(0.8f));
  c.attrs.set("training_mode", Attr::ofInt(1));
  c.attrs.set("input_layouts", Attr::ofStrings({inBlocked ? "blocked" : "", "", "", "", ""}));
  c.attrs.set("output_layouts", Attr::ofStrings({outBlocked ? "blocked" : "", "", ""}));
  Tensor plainX = randomTensor(x, 51, 499.f, 501.f);
  c.inputs = {inBlocked ? relayout(plainX, true) : plainX, randomTensor({C}, 52, 0.5f, 2.f),
              randomTensor({C}, 53), randomTensor({C}, 54), randomTensor({C}, 55, 0.5f, 2.f)};
  c.outputs = {x, {C}, {C}};
  if (!running) c.outputAbsent = {false, true, true};
  ASSERT_TRUE(dnnlSupports(c));
  std::unique_ptr<Kernel> k = createKernel(c);
  ASSERT_TRUE(k);
  EXPECT_NE(k->implName().find("batch-norm-training"), std::string::npos) << k->implName();
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(&t);
  std::vector<Tensor> outs = {Tensor::alloc(DType::F32, x), Tensor::alloc(DType::F32, {C}),
                              Tensor::alloc(DType::F32, {C})};
  std::vector<Tensor*> outPtrs = {&outs[0], running ? &outs[1] : nullptr, running ? &outs[2] : nullptr};
  Status st = k->run(in, outPtrs);
  ASSERT_TRUE(st.isOk()) << st.message();
  Tensor y = outBlocked ? relayout(outs[0], false) : outs[0];
  const float* X = plainX.data<float>();
  std::vector<double> want(numElements(x)), wantMean(C), wantVar(C);
  for (int64_t ch = 0; ch < C; ++ch) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) mean += X[(n * C + ch) * S + s];
    mean /= double(N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) var += std::pow(X[(n * C + ch) * S + s] - mean, 2);
    var /= double(N * S);
    const double a = c.inputs[1].data<float>()[ch] / std::sqrt(var + 1e-3);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s)
        want[(n * C + ch) * S + s] = (X[(n * C + ch) * S + s] - mean) * a + c.inputs[2].data<float>()[ch];
    wantMean[ch] = 0.8 * c.inputs[3].data<float>()[ch] + 0.2 * mean;
    wantVar[ch] = 0.8 * c.inputs[4].data<float>()[ch] + 0.2 * var;
  }
  expectClose(y, want);
  if (!running) return;
  for (int64_t ch = 0; ch < C; ++ch) {
    EXPECT_NEAR(outs[1].data<float>()[ch], wantMean[ch], 1e-4) << ch;
    EXPECT_NEAR(outs[2].data<float>()[ch], wantVar[ch], 1e-5) << ch;
  }
}

TEST(DnnlBatchNormTraining, Plain) {
  checkBatchNormTraining({3, 16, 5, 7}, false, false, true);
  checkBatchNormTraining({3, 16, 5, 7}, false, false, false);
}
TEST(DnnlBatchNormTraining, BlockedInAndOut) { checkBatchNormTraining({3, 16, 5, 7}, true, true, true); }
TEST(DnnlBatchNormTraining, BlockedInPlainOut) { checkBatchNormTraining({3, 16, 5, 7}, true, false, true); }
TEST(DnnlBatchNormTraining, PlainInBlockedOut) { checkBatchNormTraining({3, 16, 5, 7}, false, true, true); }
TEST(DnnlBatchNormTraining, Rank2) { checkBatchNormTraining({6, 8}, false, false, true); }

// c's kernel from `reg` (its name into `impl`), run `runs` times on c's inputs: every output of
// the last run, f32 of c.outputs' shapes.
std::vector<Tensor> runAllOutputs(const KernelRegistry& reg, const OpCase& c, std::string* impl,
                                  int runs = 1) {
  std::vector<Tensor> outs;
  for (const Shape& s : c.outputs) outs.push_back(Tensor::alloc(DType::F32, s));
  std::unique_ptr<Kernel> k;
  Status st = reg.create("cpu", c.context(), &k);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!k) return outs;
  *impl = k->implName();
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(&t);
  std::vector<Tensor*> outPtrs;
  for (Tensor& t : outs) outPtrs.push_back(&t);
  for (int r = 0; r < runs; ++r) {
    st = k->run(in, outPtrs);
    EXPECT_TRUE(st.isOk()) << st.message();
  }
  return outs;
}

// The dnnl registry's kernel for c (its impl naming `implPart`) against the reference kernel,
// every output within `tol`; returns the dnnl kernel's outputs.
std::vector<Tensor> expectMatchesReference(const OpCase& c, const std::string& implPart, double tol) {
  std::string impl, refImpl;
  std::vector<Tensor> got = runAllOutputs(dnnlRegistry(), c, &impl);
  const std::vector<Tensor> want = runAllOutputs(refRegistry(), c, &refImpl);
  EXPECT_NE(impl.find(implPart), std::string::npos) << impl;
  for (size_t o = 0; o < got.size(); ++o) {
    SCOPED_TRACE("output " + std::to_string(o));
    std::vector<double> w(want[o].data<float>(), want[o].data<float>() + want[o].numel());
    expectClose(got[o], w, tol);
  }
  return got;
}

// BatchNormalizationGrad (autodiff) against the reference kernel (f64 sums of the same f32
// inputs): X around 300 with a spread of 1 per channel plus a per-image offset, so the per-image
// shifts differ from the batch mean (the rule's (x0 - mean) terms matter), threads 1 and 2,
// rank 4 and rank 2; the impl is the AVX2 (or scalar) loop.
void checkBatchNormGrad(const Shape& x, int threads) {
  const int64_t C = x[1];
  OpCase c;
  c.op = "BatchNormalizationGrad";
  c.attrs.set("epsilon", Attr::ofFloat(1e-3f));
  Tensor X = randomTensor(x, 61, 299.f, 301.f);
  const int64_t perImage = numElements(x) / x[0];
  for (int64_t i = 0; i < X.numel(); ++i) X.data<float>()[i] += 0.5f * float(i / perImage);
  c.inputs = {X, randomTensor(x, 62), randomTensor({C}, 63, 0.5f, 2.f)};
  c.outputs = {x, {C}, {C}};
  c.threads = threads;
  ASSERT_TRUE(dnnlSupports(c));
  expectMatchesReference(c, "batch-norm-grad", 2e-4);
}

TEST(DnnlBatchNormGrad, MatchesTheReference) {
  checkBatchNormGrad({4, 16, 9, 11}, 1);
  checkBatchNormGrad({4, 16, 9, 11}, 2);
  checkBatchNormGrad({6, 8}, 1);
}

// LayerNormalizationGrad (autodiff) against the reference kernel (f64 sums of the same f32
// inputs): rows off zero (mean 5, spread 2) so the mean terms matter, a row length with an AVX2
// tail (37), more rows than one 32-row block (70, 130), threads 1 and 2 (the same bits on
// either), and a middle axis.
void checkLayerNormGrad(const Shape& x, int64_t axis, int threads) {
  const int64_t a = axis < 0 ? axis + (int64_t)x.size() : axis;
  const Shape norm(x.begin() + a, x.end());
  OpCase c;
  c.op = "LayerNormalizationGrad";
  c.attrs.set("axis", Attr::ofInt(axis));
  c.attrs.set("epsilon", Attr::ofFloat(1e-5f));
  c.inputs = {randomTensor(x, 71, 3.f, 7.f), randomTensor(x, 72), randomTensor(norm, 73, 0.5f, 2.f)};
  c.outputs = {x, norm, norm};
  c.threads = threads;
  ASSERT_TRUE(dnnlSupports(c));
  const std::vector<Tensor> got = expectMatchesReference(c, "layer-norm-grad", 2e-4);
  // The same bits on the other thread count, from a kernel's second run (the column sums start
  // over, the blocks combine in a fixed order).
  OpCase other = c;
  other.threads = 3 - threads;
  std::string impl;
  const std::vector<Tensor> again = runAllOutputs(dnnlRegistry(), other, &impl, 2);
  for (size_t o = 0; o < 3; ++o)
    EXPECT_EQ(0, std::memcmp(again[o].data<float>(), got[o].data<float>(), got[o].numel() * sizeof(float)))
        << "output " << o;
}

TEST(DnnlLayerNormGrad, MatchesTheReference) {
  checkLayerNormGrad({70, 37}, -1, 1);
  checkLayerNormGrad({70, 37}, -1, 2);
  checkLayerNormGrad({130, 16}, -1, 2);
  checkLayerNormGrad({4, 5, 7}, 1, 2);
  checkLayerNormGrad({3, 64}, -1, 1);
}

TEST(DnnlLayerNormGrad, DeclinesWhatItCannotRun) {
  OpCase c;
  c.op = "LayerNormalizationGrad";
  c.attrs.set("axis", Attr::ofInt(-1));
  c.inputs = {randomTensor({4, 6}, 1), randomTensor({4, 6}, 2), randomTensor({6}, 3)};
  c.outputs = {{4, 6}, {6}, {6}};
  EXPECT_TRUE(dnnlSupports(c));
  c.inputs[2] = randomTensor({1, 6}, 3);  // a Scale of another shape than X's normalized dims
  EXPECT_FALSE(dnnlSupports(c));
  c.inputs[2] = randomTensor({6}, 3);
  c.attrs.set("axis", Attr::ofInt(2));
  EXPECT_FALSE(dnnlSupports(c));
}

// The f64 reference against central differences of L = sum(dY * LayerNorm(X; Scale, B)) in
// double: dX, dScale and dB, axis 1 of a [3, 2, 5] X (normalized over 10 values).
TEST(RefLayerNormGrad, MatchesFiniteDifferences) {
  const Shape x = {3, 2, 5}, norm = {2, 5};
  const int64_t rows = 3, n = 10;
  std::vector<double> X, dY, S, B;
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> u(-2, 2);
  for (int64_t i = 0; i < rows * n; ++i) X.push_back(u(gen) + 1.5);
  for (int64_t i = 0; i < rows * n; ++i) dY.push_back(u(gen));
  for (int64_t i = 0; i < n; ++i) S.push_back(0.5 + 0.25 * u(gen));
  for (int64_t i = 0; i < n; ++i) B.push_back(u(gen));
  const double eps = double(1e-3f);  // the kernel's epsilon attribute is an f32
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& sv, const std::vector<double>& bv) {
    double L = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < n; ++j) mean += xv[r * n + j];
      mean /= n;
      for (int64_t j = 0; j < n; ++j) var += (xv[r * n + j] - mean) * (xv[r * n + j] - mean);
      const double rstd = 1 / std::sqrt(var / n + eps);
      for (int64_t j = 0; j < n; ++j) L += dY[r * n + j] * ((xv[r * n + j] - mean) * rstd * sv[j] + bv[j]);
    }
    return L;
  };
  KernelContext ctx;
  ctx.opType = "LayerNormalizationGrad";
  ctx.nodeName = "test_LayerNormalizationGrad";
  AttrMap attrs;
  attrs.set("axis", Attr::ofInt(1));
  attrs.set("epsilon", Attr::ofFloat(float(eps)));
  ctx.attrs = &attrs;
  ctx.inputTypes = {{DType::F64, x}, {DType::F64, x}, {DType::F64, norm}};
  ctx.constInputs = {nullptr, nullptr, nullptr};
  ctx.outputTypes = {{DType::F64, x}, {DType::F64, norm}, {DType::F64, norm}};
  std::unique_ptr<Kernel> k;
  Status st = refRegistry().create("cpu", ctx, &k);
  ASSERT_TRUE(st.isOk()) << st.message();
  Tensor tX = Tensor::fromVector<double>(x, X), tdY = Tensor::fromVector<double>(x, dY),
         tS = Tensor::fromVector<double>(norm, S);
  Tensor dX = Tensor::alloc(DType::F64, x), dS = Tensor::alloc(DType::F64, norm), dB = Tensor::alloc(DType::F64, norm);
  ASSERT_TRUE(k->run({&tX, &tdY, &tS}, {&dX, &dS, &dB}).isOk());
  const double h = 1e-5;
  auto fd = [&](std::vector<double>* v, int64_t i, auto&& f) {
    const double keep = (*v)[i];
    (*v)[i] = keep + h;
    const double up = f();
    (*v)[i] = keep - h;
    const double down = f();
    (*v)[i] = keep;
    return (up - down) / (2 * h);
  };
  for (int64_t i = 0; i < rows * n; ++i)
    EXPECT_NEAR(dX.data<double>()[i], fd(&X, i, [&] { return loss(X, S, B); }), 1e-6) << "dX " << i;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(dS.data<double>()[i], fd(&S, i, [&] { return loss(X, S, B); }), 1e-6) << "dScale " << i;
    EXPECT_NEAR(dB.data<double>()[i], fd(&B, i, [&] { return loss(X, S, B); }), 1e-6) << "dB " << i;
  }
}

TEST(DnnlGroupNorm, DeclinesWhatItCannotRun) {
  OpCase c;
  c.op = "GroupNormalization";
  c.attrs.set("num_groups", Attr::ofInt(3));
  c.inputs = {randomTensor({1, 8, 4, 4}, 1), randomTensor({8}, 2), randomTensor({8}, 3)};
  c.constant = {false, true, true};
  c.outputs = {{1, 8, 4, 4}};
  EXPECT_FALSE(dnnlSupports(c));
  c.attrs.set("num_groups", Attr::ofInt(4));
  c.inputs[1] = randomTensor({4}, 2);
  c.inputs[2] = randomTensor({4}, 3);
  EXPECT_FALSE(dnnlSupports(c));
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
