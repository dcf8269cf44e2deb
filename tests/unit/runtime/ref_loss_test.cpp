// Tests of the reference loss kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// against hand-computed values, and their gradients (NegativeLogLikelihoodLossGrad,
// SoftmaxCrossEntropyLossGrad) against central differences of the forward kernels in f64.
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {

using namespace reftest;

// A factory's refusal reaches the caller inside the registry's "no cpu kernel ..." message.
#define EXPECT_ERROR_HAS(call, sub)                                              \
  do {                                                                           \
    const std::string e_ = errorOf(call);                                        \
    EXPECT_NE(e_.find(sub), std::string::npos) << "error was: '" << e_ << "'"; \
  } while (0)

AttrMap lossAttrs(const std::string& reduction, const int64_t* ignore = nullptr) {
  AttrMap a;
  a.set("reduction", Attr::ofString(reduction));
  if (ignore) a.set("ignore_index", Attr::ofInt(*ignore));
  return a;
}

// logsumexp of [1, 2, 3] and of [1, 1, 1].
const double kLse0 = 3.0 + std::log(1.0 + std::exp(-1.0) + std::exp(-2.0));
const double kLse1 = 1.0 + std::log(3.0);

TEST(RefSoftmaxCrossEntropyLoss, MeanSumNoneAndLogProb) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 1, 1, 1});
  const Tensor y = i64({2}, {2, 0});
  const double l0 = kLse0 - 3, l1 = kLse1 - 1;
  expectValues<float>(run1("SoftmaxCrossEntropyLoss", lossAttrs("mean"), {x, y}, DType::F32, {}),
                      {}, {float((l0 + l1) / 2)});
  expectValues<float>(run1("SoftmaxCrossEntropyLoss", lossAttrs("sum"), {x, y}, DType::F32, {}),
                      {}, {float(l0 + l1)});
  OpCall c{"SoftmaxCrossEntropyLoss", lossAttrs("none"), {x, y},
           {{DType::F32, {2}}, {DType::F32, {2, 3}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<float>(outs[0], {2}, {float(l0), float(l1)});
  expectValues<float>(outs[1], {2, 3},
                      {float(1 - kLse0), float(2 - kLse0), float(3 - kLse0), float(1 - kLse1),
                       float(1 - kLse1), float(1 - kLse1)});
}

TEST(RefSoftmaxCrossEntropyLoss, WeightsDivideMeanByTheirSum) {
  const Tensor x = f64({2, 3}, {1, 2, 3, 1, 1, 1});
  const double l0 = kLse0 - 3, l1 = kLse1 - 1;
  // Labels 2 and 0 weigh 2 and 0.5: mean = (2 l0 + 0.5 l1) / 2.5.
  expectValues<double>(run1("SoftmaxCrossEntropyLoss", lossAttrs("mean"),
                            {x, i32({2}, {2, 0}), f64({3}, {0.5, 1, 2})}, DType::F64, {}),
                       {}, {(2 * l0 + 0.5 * l1) / 2.5}, 1e-12);
}

TEST(RefSoftmaxCrossEntropyLoss, LargeScoresDoNotOverflow) {
  // exp(1000) overflows f32 and f64: the max is subtracted first.
  expectValues<float>(run1("SoftmaxCrossEntropyLoss", lossAttrs("none"),
                           {f32({2, 2}, {1000, 0, -1000, 0}), i64({2}, {1, 1})}, DType::F32, {2}),
                      {2}, {1000, 0});
}

TEST(RefNegativeLogLikelihoodLoss, IgnoreIndexWeighsNothing) {
  const Tensor x = f32({2, 3}, {-1, -2, -3, -4, -5, -6});
  expectValues<float>(run1("NegativeLogLikelihoodLoss", lossAttrs("none"), {x, i64({2}, {1, 2})},
                           DType::F32, {2}),
                      {2}, {2, 6});
  const int64_t ignore = 2;
  // The ignored row neither adds to the sum nor to the count.
  expectValues<float>(run1("NegativeLogLikelihoodLoss", lossAttrs("mean", &ignore),
                           {x, i64({2}, {1, 2})}, DType::F32, {}),
                      {}, {2});
  // ignore_index may lie outside [0, C).
  const int64_t negative = -100;
  expectValues<float>(run1("NegativeLogLikelihoodLoss", lossAttrs("sum", &negative),
                           {x, i32({2}, {-100, 0})}, DType::F32, {}),
                      {}, {4});
}

TEST(RefNegativeLogLikelihoodLoss, SpatialDims) {
  // input [N=1, C=2, d=3]: class c of position d is x[c * 3 + d].
  expectValues<double>(run1("NegativeLogLikelihoodLoss", lossAttrs("none"),
                            {f64({1, 2, 3}, {-1, -2, -3, -4, -5, -6}), i64({1, 3}, {1, 0, 1})},
                            DType::F64, {1, 3}),
                       {1, 3}, {4, 2, 6});
}

TEST(RefNegativeLogLikelihoodLoss, LabelOutOfRangeIsAnError) {
  OpCall c{"NegativeLogLikelihoodLoss", lossAttrs("mean"),
           {f32({2, 3}, {-1, -2, -3, -4, -5, -6}), i64({2}, {0, 3})}, {{DType::F32, {}}}};
  EXPECT_EQ(errorOf(c), "NegativeLogLikelihoodLoss 'n': label 3 at element 1 is outside [0, 3)");
  OpCall bad{"SoftmaxCrossEntropyLoss", lossAttrs("mean"),
             {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({3}, {0, 1, 2})}, {{DType::F32, {}}}};
  EXPECT_ERROR_HAS(bad, "SoftmaxCrossEntropyLoss 'n': labels shape [3] is not [2] (the scores' "
                        "without dim 1)");
}

// ---- gradients against central differences ---------------------------------------------------

// Deterministic values in [lo, hi).
std::vector<double> pseudoRandom(int64_t n, uint32_t seed, double lo, double hi) {
  std::vector<double> v(n);
  uint32_t s = seed;
  for (double& e : v) {
    s = s * 1664525u + 1013904223u;
    e = lo + (hi - lo) * (s >> 8) / double(1u << 24);
  }
  return v;
}

struct GradCase {
  Shape shape;  // [N, C, d...]
  std::string reduction;
  bool ignore;   // labels include ignore_index (-1)
  bool weighted;
};

// L(x) = sum_j dY_j * loss_j(x), so dL/dx is what the Grad op returns for that dY.
double weightedLoss(const std::string& op, const AttrMap& a, const Tensor& x, const Tensor& y,
                    const Tensor& w, const Tensor& dY, const Shape& lossShape) {
  Tensor loss = run1(op, a, {x, y, w}, DType::F64, lossShape);
  double s = 0;
  for (int64_t i = 0; i < loss.numel(); ++i) s += loss.data<double>()[i] * dY.data<double>()[i];
  return s;
}

void checkGradient(const std::string& op, const GradCase& gc) {
  SCOPED_TRACE(op + " " + shapeToString(gc.shape) + " " + gc.reduction +
               (gc.ignore ? " ignore_index" : "") + (gc.weighted ? " weighted" : ""));
  const bool sce = op == "SoftmaxCrossEntropyLoss";
  const int64_t N = gc.shape[0], C = gc.shape[1];
  Shape labelShape = gc.shape;
  labelShape.erase(labelShape.begin() + 1);
  const int64_t labels = numElements(labelShape);
  const int64_t ignoreIndex = -1;
  AttrMap a = lossAttrs(gc.reduction, gc.ignore ? &ignoreIndex : nullptr);

  std::vector<int64_t> yv(labels);
  for (int64_t i = 0; i < labels; ++i) yv[i] = (i * 7 + 3) % C;
  if (gc.ignore) yv[0] = yv[labels / 2] = ignoreIndex;
  const Tensor y = i64(labelShape, yv);
  const Tensor w = gc.weighted ? f64({C}, pseudoRandom(C, 7, 0.5, 2.0)) : none();
  const Shape lossShape = gc.reduction == "none" ? labelShape : Shape{};
  const Tensor dY = f64(lossShape, pseudoRandom(numElements(lossShape), 11, -1.5, 1.5));
  // SCE takes scores; NLL takes log-probabilities (any values: the loss is linear in them).
  Tensor x = f64(gc.shape, pseudoRandom(numElements(gc.shape), 3, sce ? -3.0 : -4.0, sce ? 3.0 : 0.0));

  // The analytic gradient from the forward's log_prob (SCE) or the input itself (NLL).
  Tensor second = x;
  if (sce) {
    OpCall f{op, a, {x, y, w}, {{DType::F64, lossShape}, {DType::F64, gc.shape}}};
    std::vector<Tensor> outs;
    ASSERT_TRUE(f.run(&outs).isOk());
    second = outs[1];
  }
  const Tensor grad = run1(op + "Grad", a, {dY, second, y, w}, DType::F64, gc.shape);
  ASSERT_TRUE(grad.defined());

  const double h = 1e-5;
  double maxErr = 0;
  int64_t nonzero = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double keep = x.data<double>()[i];
    x.data<double>()[i] = keep + h;
    const double up = weightedLoss(op, a, x, y, w, dY, lossShape);
    x.data<double>()[i] = keep - h;
    const double down = weightedLoss(op, a, x, y, w, dY, lossShape);
    x.data<double>()[i] = keep;
    const double numeric = (up - down) / (2 * h);
    const double analytic = grad.data<double>()[i];
    maxErr = std::max(maxErr, std::fabs(numeric - analytic) / std::max(1.0, std::fabs(numeric)));
    nonzero += std::fabs(analytic) > 1e-12;
  }
  EXPECT_LT(maxErr, 1e-7);
  // Every counted label moves its whole row (SCE) or its own entry (NLL); ignored ones nothing.
  const int64_t counted = labels - (gc.ignore ? 2 : 0);
  EXPECT_EQ(nonzero, sce ? counted * C : counted) << "nonzero entries of " << N * C * (labels / N);
}

const std::vector<GradCase>& gradCases() {
  static const std::vector<GradCase> cases = {
      {{4, 5}, "mean", false, false},     {{4, 5}, "sum", false, true},
      {{4, 5}, "none", true, false},      {{3, 4, 6}, "mean", true, true},
      {{2, 3, 2, 3}, "none", false, true}, {{2, 3, 2, 3}, "sum", true, false},
      {{1, 7, 5}, "mean", false, false},  {{5, 2}, "mean", true, true},
  };
  return cases;
}

TEST(RefSoftmaxCrossEntropyLossGrad, MatchesCentralDifferences) {
  for (const GradCase& gc : gradCases()) checkGradient("SoftmaxCrossEntropyLoss", gc);
}

TEST(RefNegativeLogLikelihoodLossGrad, MatchesCentralDifferences) {
  for (const GradCase& gc : gradCases()) checkGradient("NegativeLogLikelihoodLoss", gc);
}

// f32 [N, C] rows take the AVX2 row kernels (log-softmax row; exp(logp) scaled) where the CPU
// has AVX2: the loss, log_prob and gradient agree with the f64 kernel on the same values (C of
// 1000 and 13, a tail; a row with -inf scores; a row with a NaN, which keeps ONNX's NaN through
// the scalar path; an ignored label), for every reduction.
TEST(RefSoftmaxCrossEntropyLoss, F32RowsAgreeWithF64) {
  for (int64_t C : {1000, 13}) {
    const int64_t N = 6;
    std::vector<double> xs = pseudoRandom(N * C, 5, -8, 8);
    xs[1 * C + 3] = -std::numeric_limits<double>::infinity();
    xs[2 * C + 1] = std::numeric_limits<double>::quiet_NaN();
    std::vector<float> xf(xs.begin(), xs.end());
    std::vector<int64_t> labels = {0, C - 1, 4, 7 % C, -1, 5};
    const int64_t ignore = -1;
    for (const char* reduction : {"mean", "sum", "none"}) {
      SCOPED_TRACE(std::string(reduction) + " C " + std::to_string(C));
      const Shape lossShape = std::string(reduction) == "none" ? Shape{N} : Shape{};
      std::vector<Tensor> out32, out64, g32, g64;
      const Tensor y = i64({N}, labels);
      OpCall f32c{"SoftmaxCrossEntropyLoss", lossAttrs(reduction, &ignore), {f32({N, C}, xf), y},
                  {{DType::F32, lossShape}, {DType::F32, {N, C}}}};
      OpCall f64c{"SoftmaxCrossEntropyLoss", lossAttrs(reduction, &ignore), {f64({N, C}, xs), y},
                  {{DType::F64, lossShape}, {DType::F64, {N, C}}}};
      ASSERT_TRUE(f32c.run(&out32).isOk());
      ASSERT_TRUE(f64c.run(&out64).isOk());
      // The loss alone (no log_prob output) computes the same rows.
      std::vector<Tensor> lossOnly;
      OpCall f32l{"SoftmaxCrossEntropyLoss", lossAttrs(reduction, &ignore), {f32({N, C}, xf), y},
                  {{DType::F32, lossShape}}};
      ASSERT_TRUE(f32l.run(&lossOnly).isOk());
      for (int64_t i = 0; i < lossOnly[0].numel(); ++i) {
        const float a = lossOnly[0].data<float>()[i], b = out32[0].data<float>()[i];
        EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << "loss without log_prob " << i;
      }
      for (int64_t i = 0; i < out64[1].numel(); ++i) {
        const double want = out64[1].data<double>()[i], got = out32[1].data<float>()[i];
        if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << "log_prob " << i;
        else if (std::isinf(want)) EXPECT_EQ(got, want) << "log_prob " << i;
        else EXPECT_NEAR(got, want, 2e-6 * std::max(1.0, std::fabs(want))) << "log_prob " << i;
      }
      for (int64_t i = 0; i < out64[0].numel(); ++i) {
        const double want = out64[0].data<double>()[i], got = out32[0].data<float>()[i];
        if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << "loss " << i;
        else EXPECT_NEAR(got, want, 2e-6 * std::max(1.0, std::fabs(want))) << "loss " << i;
      }
      std::vector<double> dys = pseudoRandom(lossShape.empty() ? 1 : N, 9, 0.5, 2);
      std::vector<float> dyf(dys.begin(), dys.end());
      OpCall g32c{"SoftmaxCrossEntropyLossGrad", lossAttrs(reduction, &ignore),
                  {f32(lossShape, dyf), out32[1], y}, {{DType::F32, {N, C}}}};
      OpCall g64c{"SoftmaxCrossEntropyLossGrad", lossAttrs(reduction, &ignore),
                  {f64(lossShape, dys), out64[1], y}, {{DType::F64, {N, C}}}};
      ASSERT_TRUE(g32c.run(&g32).isOk());
      ASSERT_TRUE(g64c.run(&g64).isOk());
      for (int64_t i = 0; i < g64[0].numel(); ++i) {
        const double want = g64[0].data<double>()[i], got = g32[0].data<float>()[i];
        if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << "dx " << i;
        else EXPECT_NEAR(got, want, 1e-6) << "dx " << i;
      }
    }
  }
}

TEST(RefSoftmaxCrossEntropyLossGrad, HandValuesF32) {
  // mean over 2 rows, dY = 1: row n's gradient is (softmax - onehot) / 2.
  const Tensor lp = f32({2, 2}, {std::log(0.25f), std::log(0.75f), std::log(0.5f), std::log(0.5f)});
  expectValues<float>(run1("SoftmaxCrossEntropyLossGrad", lossAttrs("mean"),
                           {f32({}, {1}), lp, i64({2}, {1, 0})}, DType::F32, {2, 2}),
                      {2, 2}, {0.125f, -0.125f, -0.25f, 0.25f});
  // An ignored row gets zeros, and the mean counts only the other.
  const int64_t ignore = 0;
  expectValues<float>(run1("SoftmaxCrossEntropyLossGrad", lossAttrs("mean", &ignore),
                           {f32({}, {2}), lp, i64({2}, {1, 0})}, DType::F32, {2, 2}),
                      {2, 2}, {0.5f, -0.5f, 0, 0});
}

TEST(RefNegativeLogLikelihoodLossGrad, AllIgnoredGivesZerosNotNaN) {
  const int64_t ignore = 1;
  expectValues<double>(run1("NegativeLogLikelihoodLossGrad", lossAttrs("mean", &ignore),
                            {f64({}, {1}), f64({2, 2}, {-1, -1, -1, -1}), i64({2}, {1, 1})},
                            DType::F64, {2, 2}),
                       {2, 2}, {0, 0, 0, 0});
}

TEST(RefSoftmaxCrossEntropyLossGrad, DYMustHaveTheLossShape) {
  OpCall c{"SoftmaxCrossEntropyLossGrad", lossAttrs("none"),
           {f32({}, {1}), f32({2, 2}, {0, 0, 0, 0}), i64({2}, {1, 0})}, {{DType::F32, {2, 2}}}};
  EXPECT_ERROR_HAS(c, "SoftmaxCrossEntropyLossGrad 'n': dY must be f32[2] (the loss's type), "
                      "got f32[]");
}

}  // namespace
}  // namespace tandem
