// oneDNN unary element-wise kernels against the ONNX formulas evaluated in double.
#include <cstring>
#include <functional>
#include <limits>

#include "dnnl_test_util.h"
#include "runtime/cpu/avx2/Activation.h"
#include "runtime/cpu/avx2/Sgemm.h"

namespace tandem {
namespace dnnltest {
namespace {

void checkUnary(const std::string& op, const AttrMap& attrs, const Tensor& x,
                const std::function<double(double)>& f, const std::vector<Tensor>& extra = {},
                const std::vector<bool>& constant = {}) {
  OpCase c;
  c.op = op;
  c.attrs = attrs;
  c.inputs = {x};
  for (const Tensor& t : extra) c.inputs.push_back(t);
  c.constant = constant;
  c.outputs = {x.shape()};
  ASSERT_TRUE(dnnlSupports(c)) << op;
  Tensor y = runOnce(c);
  std::vector<double> want;
  for (int64_t i = 0; i < x.numel(); ++i) want.push_back(f(x.data<float>()[i]));
  SCOPED_TRACE(op);
  expectClose(y, want);
}

void checkUnary(const std::string& op, const std::function<double(double)>& f, float lo = -4.f,
                float hi = 4.f) {
  checkUnary(op, AttrMap(), randomTensor({3, 5, 71}, 42, lo, hi), f);
}

AttrMap floats(std::vector<std::pair<std::string, float>> kv) {
  AttrMap a;
  for (auto& [k, v] : kv) a.set(k, Attr::ofFloat(v));
  return a;
}

TEST(DnnlEltwise, Activations) {
  checkUnary("Relu", [](double x) { return x > 0 ? x : 0; });
  checkUnary("LeakyRelu", [](double x) { return x > 0 ? x : 0.01 * x; });
  checkUnary("LeakyRelu", floats({{"alpha", 0.2f}}), randomTensor({40}, 1),
             [](double x) { return x > 0 ? x : (double)0.2f * x; });
  checkUnary("Elu", floats({{"alpha", 0.7f}}), randomTensor({64}, 2, -4, 4),
             [](double x) { return x > 0 ? x : (double)0.7f * (std::exp(x) - 1); });
  checkUnary("Selu", [](double x) {
    const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
    return x > 0 ? g * x : g * a * (std::exp(x) - 1);
  });
  checkUnary("Selu", floats({{"alpha", 2.f}, {"gamma", 3.f}}), randomTensor({50}, 3),
             [](double x) { return x > 0 ? 3 * x : 3 * 2 * (std::exp(x) - 1); });
  checkUnary("Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -10, 10);
  checkUnary("HardSigmoid", [](double x) {
    return std::max(0.0, std::min(1.0, (double)0.2f * x + (double)0.5f));
  });
  checkUnary("HardSigmoid", floats({{"alpha", 0.5f}, {"beta", 0.25f}}), randomTensor({80}, 4),
             [](double x) { return std::max(0.0, std::min(1.0, 0.5 * x + 0.25)); });
  checkUnary("Tanh", [](double x) { return std::tanh(x); });
}

// Gelu's derivative in double, times dY: erf form, or tanh form.
double geluGradWant(double x, double dy, bool tanhForm) {
  if (std::isnan(x) || std::isnan(dy)) return std::nan("");
  if (std::isinf(x)) return x > 0 ? dy : 0.0 * dy;
  double d;
  if (tanhForm) {
    const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
    d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
  } else {
    d = 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  }
  return dy * d;
}

// GeluGrad (autodiff's Gelu backward) against Gelu's derivative in double, both forms, times
// dY: each CPU variant (oneDNN's eltwise backward; avx2::geluGrad where the host has AVX2),
// the factory's own choice, and the reference kernel. avx2::geluGrad within 5e-7 of |dY|
// (erf's approximation is 6.5e-8), over a tail of 7 lanes, on 1 and 2 threads past the 64K
// elements where it splits, and at +-inf, NaN, +-20 and 0.
TEST(DnnlEltwise, GeluGradIsTheDerivativeTimesDy) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* approx : {"none", "tanh"}) {
    SCOPED_TRACE(approx);
    const bool tanhForm = std::string(approx) == "tanh";
    OpCase c;
    c.op = "GeluGrad";
    c.attrs.set("approximate", Attr::ofString(approx));
    c.inputs = {randomTensor({3, 5, 71}, 7, -2.f, 2.f), randomTensor({3, 5, 71}, 8, -6.f, 6.f)};
    const std::vector<float> special = {inf, -inf, nan, 20.f, -20.f, 0.f, -0.f, 30.f, -30.f, 1e-20f};
    for (size_t i = 0; i < special.size(); ++i) c.inputs[1].data<float>()[i] = special[i];
    c.outputs = {{3, 5, 71}};
    ASSERT_TRUE(dnnlSupports(c));
    std::vector<double> want;
    for (int64_t i = 0; i < c.inputs[1].numel(); ++i)
      want.push_back(geluGradWant(c.inputs[1].data<float>()[i], c.inputs[0].data<float>()[i], tanhForm));
    std::vector<std::string> variants = {"dnnl", ""};
    if (avx2::available()) variants.push_back("avx2");
    for (const std::string& variant : variants) {
      SCOPED_TRACE("variant '" + variant + "'");
      c.variant = variant;
      std::string impl;
      Tensor dx = runOnce(c, &impl);
      const bool ours = variant == "avx2" || (variant.empty() && avx2::available());
      EXPECT_EQ(impl.rfind(ours ? "avx2:gelu-grad" : "dnnl:", 0), 0u) << impl;
      if (!ours) {  // oneDNN's: within 1e-4, its own NaN and infinities (the first 3) aside
        std::vector<double> w = want;
        for (size_t i = 0; i < 3; ++i) w[i] = dx.data<float>()[i];
        expectClose(dx, w);
        continue;
      }
      int bad = 0;
      for (int64_t i = 0; i < dx.numel(); ++i) {
        const double got = dx.data<float>()[i], dy = c.inputs[0].data<float>()[i];
        const bool ok = std::isnan(want[i]) ? std::isnan(got) : std::fabs(got - want[i]) <= 5e-7 * std::fabs(dy);
        if (!ok && bad++ < 5) ADD_FAILURE() << "x " << c.inputs[1].data<float>()[i] << ": got " << got << ", want " << want[i];
      }
      EXPECT_EQ(bad, 0);
    }
    // The reference kernel in f32 (autodiff_test checks it in f64 against finite differences),
    // on finite x.
    std::unique_ptr<Kernel> ref;
    for (size_t i = 0; i < 3; ++i) {
      c.inputs[1].data<float>()[i] = 1.f;
      want[i] = geluGradWant(1.0, c.inputs[0].data<float>()[i], tanhForm);
    }
    ASSERT_TRUE(refRegistry().create("cpu", c.context(), &ref).isOk());
    Tensor refDx = Tensor::alloc(DType::F32, {3, 5, 71});
    ASSERT_TRUE(ref->run({&c.inputs[0], &c.inputs[1]}, {&refDx}).isOk());
    expectClose(refDx, want);
  }
  // Past 64K elements on two threads: the same bits as one thread (each element alone).
  if (!avx2::available()) return;
  const int64_t n = 3 * 65536 + 5;
  Tensor dy = randomTensor({n}, 3, -1.f, 1.f), x = randomTensor({n}, 4, -8.f, 8.f);
  Tensor one = Tensor::alloc(DType::F32, {n}), two = Tensor::alloc(DType::F32, {n});
  for (bool tanhForm : {false, true}) {
    avx2::geluGrad(dy.data<float>(), x.data<float>(), one.data<float>(), n, tanhForm, 1);
    avx2::geluGrad(dy.data<float>(), x.data<float>(), two.data<float>(), n, tanhForm, 2);
    EXPECT_EQ(std::memcmp(one.raw(), two.raw(), one.bytes()), 0);
    int bad = 0;
    for (int64_t i = 0; i < n; i += 7) {
      const double w = geluGradWant(x.data<float>()[i], dy.data<float>()[i], tanhForm);
      if (std::fabs(two.data<float>()[i] - w) > 5e-7 * std::fabs(dy.data<float>()[i]) && bad++ < 5)
        ADD_FAILURE() << "element " << i << ": got " << two.data<float>()[i] << ", want " << w;
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(DnnlEltwise, Math) {
  checkUnary("Exp", [](double x) { return std::exp(x); });
  checkUnary("Sqrt", [](double x) { return std::sqrt(x); }, 0.f, 100.f);
  checkUnary("Abs", [](double x) { return std::fabs(x); });
  checkUnary("Neg", [](double x) { return -x; });
  checkUnary("Reciprocal", [](double x) { return 1 / x; }, 0.1f, 10.f);
  checkUnary("Reciprocal", [](double x) { return 1 / x; }, -10.f, -0.1f);
}

TEST(DnnlEltwise, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::fromVector<float>({6}, {0.f, -0.f, 1.f, -1.f, inf, -inf});
  checkUnary("Relu", AttrMap(), x, [](double v) { return v > 0 ? v : 0; });
  checkUnary("Abs", AttrMap(), x, [](double v) { return std::fabs(v); });
  checkUnary("Neg", AttrMap(), x, [](double v) { return -v; });
  Tensor pos = Tensor::fromVector<float>({3}, {0.f, 1.f, inf});
  checkUnary("Sqrt", AttrMap(), pos, [](double v) { return std::sqrt(v); });
  // Saturating ends of the transcendental functions.
  Tensor big = Tensor::fromVector<float>({8}, {-100.f, -30.f, 30.f, 80.f, 100.f, inf, -inf, 0.f});
  checkUnary("Sigmoid", AttrMap(), big, [](double v) { return 1 / (1 + std::exp(-v)); });
  checkUnary("Tanh", AttrMap(), big, [](double v) { return std::tanh(v); });
  checkUnary("Exp", AttrMap(), big, [](double v) { return std::exp(v) > 3.5e38 ? HUGE_VAL : std::exp(v); });
  checkUnary("Elu", AttrMap(), big, [](double v) { return v > 0 ? v : std::expm1(v); });
}

TEST(DnnlEltwise, ClipConstantBounds) {
  Tensor x = randomTensor({4, 9}, 5, -3, 3);
  checkUnary("Clip", AttrMap(), x, [](double v) { return std::min(1.0, std::max(-0.5, v)); },
             {scalarF32(-0.5f), scalarF32(1.f)}, {false, true, true});
  // Max only: min is an absent optional input (undefined tensor).
  checkUnary("Clip", AttrMap(), x, [](double v) { return std::min(1.0, v); },
             {Tensor(), scalarF32(1.f)}, {false, false, true});
  // Min only.
  checkUnary("Clip", AttrMap(), x, [](double v) { return std::max(0.0, v); },
             {scalarF32(0.f)}, {false, true});
  // Neither: identity.
  checkUnary("Clip", AttrMap(), x, [](double v) { return v; });
}

TEST(DnnlEltwise, ClipUnsupportedCasesFallBack) {
  OpCase c;
  c.op = "Clip";
  c.inputs = {randomTensor({4}, 1), scalarF32(0.f), scalarF32(1.f)};
  c.outputs = {{4}};
  c.constant = {false, false, true};
  EXPECT_FALSE(dnnlSupports(c)) << "runtime min";
  c.constant = {false, true, true};
  EXPECT_TRUE(dnnlSupports(c));
  c.inputs[1] = scalarF32(2.f);  // min > max: ONNX gives max everywhere
  EXPECT_FALSE(dnnlSupports(c));
}

TEST(DnnlEltwise, PowConstantScalarExponent) {
  Tensor x = randomTensor({5, 6}, 6, -3, 3);
  checkUnary("Pow", AttrMap(), x, [](double v) { return v * v; },
             {Tensor::fromVector<int64_t>({}, {2})}, {false, true});
  checkUnary("Pow", AttrMap(), x, [](double v) { return v * v * v; },
             {Tensor::fromVector<float>({1}, {3.f})}, {false, true});
  checkUnary("Pow", AttrMap(), randomTensor({20}, 7, 0.1f, 9.f),
             [](double v) { return std::sqrt(v); }, {scalarF32(0.5f)}, {false, true});
  checkUnary("Pow", AttrMap(), x, [](double v) { return 1 / (v * v); },
             {Tensor::fromVector<double>({}, {-2.0})}, {false, true});
}

TEST(DnnlEltwise, PowRuntimeExponentFallsBack) {
  OpCase c;
  c.op = "Pow";
  c.inputs = {randomTensor({4}, 1), scalarF32(2.f)};
  c.outputs = {{4}};
  EXPECT_FALSE(dnnlSupports(c));
}

TEST(DnnlEltwise, InaccurateOrMissingOpsAndNonF32AreNotClaimed) {
  // Erf: no oneDNN algorithm; Log, Softplus: oneDNN's JIT log is not accurate enough near 1.
  for (const char* op : {"Erf", "Log", "Softplus"}) {
    OpCase c;
    c.op = op;
    c.inputs = {randomTensor({4}, 1, 0.5f, 2.f)};
    c.outputs = {{4}};
    EXPECT_FALSE(dnnlSupports(c)) << op;
  }
  OpCase d;
  d.op = "Relu";
  d.inputs = {Tensor::fromVector<int64_t>({2}, {-1, 1})};
  d.outputs = {{2}};
  EXPECT_FALSE(dnnlSupports(d));
}

TEST(DnnlEltwise, ScalarTensor) {
  checkUnary("Exp", AttrMap(), scalarF32(1.f), [](double v) { return std::exp(v); });
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
