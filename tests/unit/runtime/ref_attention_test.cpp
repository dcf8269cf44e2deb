// Tests of the reference kernels of the ops new after opset 17 that e2e.small_models covers
// only at small sizes: Attention (sizes past the AVX2 GEMM's 16-column panels, GQA, past cache,
// causal offset and a bool mask, several threads; f32 and f64 against a double loop),
// RotaryEmbedding and TensorScatter run-time index errors, TensorScatter in place, Col2Im's
// overlapping blocks, Bitwise* broadcasting, and DeformConv with zero offsets equal to Conv.
#include <cmath>
#include <random>

#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

struct AttentionCase {
  int64_t B = 2, Hq = 6, Hkv = 2, Sq = 37, Skv = 45, P = 20, D = 40, Dv = 24;
};

// Attention-25 in double over 4-D inputs: scale 1/sqrt(D), past then K, bool mask over
// [B, 1, Sq, T], causal with offset P; a fully masked row gives 0.
std::vector<double> referenceAttention(const AttentionCase& c, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v,
                                       const std::vector<double>& pk, const std::vector<double>& pv,
                                       const std::vector<bool>& mask) {
  const int64_t T = c.P + c.Skv;
  std::vector<double> y(c.B * c.Hq * c.Sq * c.Dv, 0.0);
  auto key = [&](int64_t b, int64_t h, int64_t t, int64_t d) {
    return t < c.P ? pk[((b * c.Hkv + h) * c.P + t) * c.D + d]
                   : k[((b * c.Hkv + h) * c.Skv + t - c.P) * c.D + d];
  };
  auto value = [&](int64_t b, int64_t h, int64_t t, int64_t d) {
    return t < c.P ? pv[((b * c.Hkv + h) * c.P + t) * c.Dv + d]
                   : v[((b * c.Hkv + h) * c.Skv + t - c.P) * c.Dv + d];
  };
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.Sq; ++i) {
        std::vector<double> s(T);
        double m = -INFINITY;
        for (int64_t t = 0; t < T; ++t) {
          const bool allowed = mask[(b * c.Sq + i) * T + t] && t <= i + c.P;
          double dot = 0;
          for (int64_t d = 0; d < c.D; ++d)
            dot += q[((b * c.Hq + h) * c.Sq + i) * c.D + d] * key(b, h / (c.Hq / c.Hkv), t, d);
          s[t] = allowed ? dot / std::sqrt(double(c.D)) : -INFINITY;
          m = std::max(m, s[t]);
        }
        if (m == -INFINITY) continue;
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - m));
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < c.Dv; ++d)
            y[((b * c.Hq + h) * c.Sq + i) * c.Dv + d] +=
                s[t] / sum * value(b, h / (c.Hq / c.Hkv), t, d);
      }
  return y;
}

template <typename T>
Tensor tensorOf(DType dt, Shape s, const std::vector<double>& v) {
  Tensor t = Tensor::alloc(dt, std::move(s));
  for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = T(v[i]);
  return t;
}

template <typename T>
void checkAttention(DType dt, double tol) {
  AttentionCase c;
  const int64_t T_ = c.P + c.Skv;
  std::mt19937 gen(7);
  std::normal_distribution<double> normal;
  auto draw = [&](int64_t n) {
    std::vector<double> v(n);
    for (double& e : v) e = double(T(normal(gen)));  // representable in T
    return v;
  };
  const auto q = draw(c.B * c.Hq * c.Sq * c.D), k = draw(c.B * c.Hkv * c.Skv * c.D);
  const auto v = draw(c.B * c.Hkv * c.Skv * c.Dv), pk = draw(c.B * c.Hkv * c.P * c.D);
  const auto pv = draw(c.B * c.Hkv * c.P * c.Dv);
  std::vector<bool> mask(c.B * c.Sq * T_);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (gen() % 5) != 0;
  for (int64_t t = 0; t < T_; ++t) mask[(0 * c.Sq + 3) * T_ + t] = false;  // a fully masked row
  const auto want = referenceAttention(c, q, k, v, pk, pv, mask);
  OpCall call{"Attention",
              attrs({{"is_causal", Attr::ofInt(1)}}),
              {tensorOf<T>(dt, {c.B, c.Hq, c.Sq, c.D}, q), tensorOf<T>(dt, {c.B, c.Hkv, c.Skv, c.D}, k),
               tensorOf<T>(dt, {c.B, c.Hkv, c.Skv, c.Dv}, v), boolean({c.B, 1, c.Sq, T_}, mask),
               tensorOf<T>(dt, {c.B, c.Hkv, c.P, c.D}, pk), tensorOf<T>(dt, {c.B, c.Hkv, c.P, c.Dv}, pv)},
              {{dt, {c.B, c.Hq, c.Sq, c.Dv}}, {dt, {c.B, c.Hkv, T_, c.D}}, {DType::Undefined, {}}}};
  call.threads = 2;
  std::vector<Tensor> outs;
  ASSERT_TRUE(call.run(&outs).isOk());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(double(outs[0].data<T>()[i]) - want[i]));
  EXPECT_LT(worst, tol);
  for (int64_t d = 0; d < c.Dv; ++d)
    for (int64_t h = 0; h < c.Hq; ++h)
      EXPECT_EQ(outs[0].data<T>()[((0 * c.Hq + h) * c.Sq + 3) * c.Dv + d], T(0));
  // present_key: past rows then K's, per (b, kv head).
  EXPECT_EQ(outs[1].data<T>()[0], T(pk[0]));
  EXPECT_EQ(outs[1].data<T>()[(c.P) * c.D], T(k[0]));
  EXPECT_EQ(outs[1].data<T>()[((1 * c.Hkv + 1) * T_ + T_ - 1) * c.D + c.D - 1], T(k.back()));
}

TEST(RefAttention, GqaPastCausalBoolMaskF32) { checkAttention<float>(DType::F32, 2e-5); }
TEST(RefAttention, GqaPastCausalBoolMaskF64) { checkAttention<double>(DType::F64, 1e-12); }

TEST(RefAttention, NonpadOutOfRangeIsAnError) {
  OpCall c{"Attention", {},
           {f32({1, 1, 1, 2}, {1, 0}), f32({1, 1, 2, 2}, {1, 0, 0, 1}), f32({1, 1, 2, 2}, {1, 2, 3, 4}),
            none(), none(), none(), i64({1}, {3})},
           {{DType::F32, {1, 1, 1, 2}}}};
  EXPECT_NE(errorOf(c).find("nonpad_kv_seqlen[0] = 3 is outside [0, 2]"), std::string::npos)
      << errorOf(c);
}

TEST(RefRotaryEmbedding, PositionOutOfRangeIsAnError) {
  OpCall c{"RotaryEmbedding", {},
           {f32({1, 1, 1, 2}, {1, 2}), f32({2, 1}, {1, 1}), f32({2, 1}, {0, 0}), i64({1, 1}, {2})},
           {{DType::F32, {1, 1, 1, 2}}}};
  EXPECT_NE(errorOf(c).find("position_ids[0, 0] = 2 is outside the caches' 2 rows"),
            std::string::npos)
      << errorOf(c);
}

TEST(RefTensorScatter, LinearOverflowIsAnErrorCircularWraps) {
  Tensor past = f32({1, 3, 1}, {1, 2, 3});
  Tensor upd = f32({1, 2, 1}, {8, 9});
  OpCall lin{"TensorScatter", attrs({{"axis", Attr::ofInt(1)}}), {past, upd, i64({1}, {2})},
             {{DType::F32, {1, 3, 1}}}};
  EXPECT_NE(errorOf(lin).find("does not fit the cache of 3 (mode linear)"), std::string::npos)
      << errorOf(lin);
  Tensor y = run1("TensorScatter",
                  attrs({{"axis", Attr::ofInt(1)}, {"mode", Attr::ofString("circular")}}),
                  {past, upd, i64({1}, {2})}, DType::F32, {1, 3, 1});
  expectValues<float>(y, {1, 3, 1}, {9, 2, 8});
}

TEST(RefTensorScatter, InPlaceWritesOnlyTheUpdate) {
  OpCall c{"TensorScatter", {},
           {f32({2, 4, 1}, {0, 1, 2, 3, 4, 5, 6, 7}), f32({2, 1, 1}, {-1, -2}), i64({2}, {3, 0})},
           {{DType::F32, {2, 4, 1}}}};
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(c.create(&k).isOk());
  Tensor cache = Tensor::copyOf(c.inputs[0]);
  ASSERT_TRUE(k->run({&cache, &c.inputs[1], &c.inputs[2]}, {&cache}).isOk());
  expectValues<float>(cache, {2, 4, 1}, {0, 1, 2, -1, -2, 5, 6, 7});
}

TEST(RefCol2Im, OverlappingBlocksAdd) {
  // Image [1, 3], block [1, 2], stride 1: two positions; column l covers x = l and l + 1.
  Tensor y = run1("Col2Im", {}, {f32({1, 2, 2}, {1, 2, 10, 20}), i64({2}, {1, 3}), i64({2}, {1, 2})},
                  DType::F32, {1, 1, 1, 3}, /*constInputs=*/true);
  expectValues<float>(y, {1, 1, 1, 3}, {1, 12, 20});
}

TEST(RefBitwise, BroadcastAndWideTypes) {
  Tensor a = i64({2, 2}, {-1, 12, 5, int64_t(1) << 40});
  Tensor b = i64({2}, {0x0F, -4});
  expectValues<int64_t>(run1("BitwiseAnd", {}, {a, b}, DType::I64, {2, 2}), {2, 2},
                        {0x0F, 12, 5, int64_t(1) << 40});
  expectValues<int64_t>(run1("BitwiseXor", {}, {a, b}, DType::I64, {2, 2}), {2, 2},
                        {-16, -16, 10, -(int64_t(1) << 40) - 4});
  Tensor u = Tensor::alloc(DType::U16, {2});
  u.data<uint16_t>()[0] = 0;
  u.data<uint16_t>()[1] = 0x00FF;
  Tensor n = run1("BitwiseNot", {}, {u}, DType::U16, {2});
  EXPECT_EQ(n.data<uint16_t>()[0], 0xFFFF);
  EXPECT_EQ(n.data<uint16_t>()[1], 0xFF00);
  OpCall floats{"BitwiseAnd", {}, {f32({1}, {1}), f32({1}, {1})}, {{DType::F32, {1}}}};
  EXPECT_NE(errorOf(floats), "");
}

TEST(RefDeformConv, ZeroOffsetsAreConv) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-1, 1);
  auto fill = [&](Shape s) {
    Tensor t = Tensor::alloc(DType::F32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(gen);
    return t;
  };
  // 20 output channels (past one 16-column GEMM panel), groups 2, stride 2, dilation 2.
  Tensor x = fill({2, 6, 9, 11}), w = fill({20, 3, 3, 3}), b = fill({20});
  AttrMap a = attrs({{"group", Attr::ofInt(2)},
                     {"strides", Attr::ofInts({2, 2})},
                     {"dilations", Attr::ofInts({2, 2})},
                     {"pads", Attr::ofInts({1, 2, 1, 0})}});
  const Shape ys = {2, 20, 4, 4};
  Tensor conv = run1("Conv", a, {x, w, b}, DType::F32, ys);
  Tensor offset = Tensor::alloc(DType::F32, {2, 18, 4, 4});
  std::memset(offset.raw(), 0, offset.bytes());
  Tensor deform = run1("DeformConv", a, {x, w, offset, b}, DType::F32, ys);
  ASSERT_TRUE(conv.defined() && deform.defined());
  for (int64_t i = 0; i < conv.numel(); ++i)
    EXPECT_NEAR(deform.data<float>()[i], conv.data<float>()[i], 1e-5) << i;
  // A mask of 0.5 halves the products (the bias stays).
  Tensor mask = Tensor::alloc(DType::F32, {2, 9, 4, 4});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<float>()[i] = 0.5f;
  Tensor half = run1("DeformConv", a, {x, w, offset, b, mask}, DType::F32, ys);
  for (int64_t i = 0; i < conv.numel(); ++i) {
    const float bias = b.data<float>()[(i / 16) % 20];
    EXPECT_NEAR(half.data<float>()[i], (conv.data<float>()[i] - bias) * 0.5f + bias, 1e-5) << i;
  }
}

}  // namespace
}  // namespace tandem
