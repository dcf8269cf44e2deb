// The AVX2 kernels (runtime/cpu/avx2: packed-B GEMM, Winograd F(2x2, 3x3), the softmax and
// layer-norm rows) against naive
// double-precision loops, directly and through the Conv / Gemm / Fused kernels that choose them.
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "dnnl_test_util.h"
#include "runtime/cpu/avx2/Activation.h"
#include "runtime/cpu/avx2/ChannelAffine.h"
#include "runtime/cpu/avx2/Pool.h"
#include "runtime/cpu/avx2/Rows.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/avx2/Winograd.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnltest {
namespace {

#define SKIP_WITHOUT_AVX2() \
  if (!avx2::available()) GTEST_SKIP() << "this CPU has no AVX2/FMA"

void expectNear(const std::vector<float>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])))) {
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
      ++bad;
    }
}

struct GemmCase {
  int64_t M, K, N;
  bool transB, bias, accumulate, relu;
  int threads;
};

void checkGemm(const GemmCase& c) {
  const int64_t lda = c.K + 3, ldc = c.N + 5;  // padded rows: strides are honoured
  std::vector<float> A = randomVec(c.M * lda, 1), B = randomVec(c.K * c.N, 2),
                     bias = randomVec(c.N, 3), C = randomVec(c.M * ldc, 4);
  avx2::PackedB pb;
  ASSERT_TRUE(c.transB ? pb.pack(B.data(), c.K, c.N, 1, c.K) : pb.pack(B.data(), c.K, c.N, c.N, 1));
  std::vector<double> want(C.begin(), C.end());
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double acc = c.bias ? bias[j] : 0.0;
      for (int64_t k = 0; k < c.K; ++k)
        acc += (double)A[i * lda + k] * (c.transB ? B[j * c.K + k] : B[k * c.N + j]);
      if (c.accumulate) acc += C[i * ldc + j];
      if (c.relu) acc = std::max(acc, 0.0);
      want[i * ldc + j] = acc;
    }
  avx2::GemmEpilogue ep;
  ep.bias = c.bias ? bias.data() : nullptr;
  ep.accumulate = c.accumulate;
  ep.relu = c.relu;
  avx2::sgemmParallel(c.M, A.data(), lda, pb, C.data(), ldc, ep, c.threads);
  expectNear(C, want, 1e-4,
             "M" + std::to_string(c.M) + " K" + std::to_string(c.K) + " N" + std::to_string(c.N));
}

TEST(Avx2Sgemm, MatchesNaiveOverShapesAndEpilogues) {
  SKIP_WITHOUT_AVX2();
  // Every row remainder (1-6 and blocks of 6), K in one slice and across two or three balanced
  // slices of at most 512 (600: 300 + 300; 1031: 344 + 344 + 343), and every
  // remainder of the assembly kernels' 4-step unrolling (K % 4 = 0..3, below and above one
  // unrolled step), 8-wide tails, N not a multiple of 8 (padded panels: 3, 10, 27).
  for (int64_t M : {1, 2, 5, 6, 7, 13, 32})
    for (int64_t K : {1, 4, 7, 258, 301, 600, 1031})
      for (int64_t N : {3, 8, 10, 16, 24, 27, 40})
        checkGemm({M, K, N, (M + K) % 2 == 0, N != 16, M % 3 == 0, K != 7, 1});
}

TEST(Avx2Sgemm, ThreadsSplitPanelsOrRows) {
  SKIP_WITHOUT_AVX2();
  checkGemm({32, 784, 512, true, true, false, true, 2});  // panels split
  checkGemm({50, 64, 16, false, true, true, true, 2});    // one panel: rows split
  checkGemm({3, 64, 8, false, false, false, false, 4});   // fewer row blocks than threads
}

TEST(Avx2Sgemm, RowChunksMatchNaive) {
  SKIP_WITHOUT_AVX2();
  // More rows than one chunk's A slice holds (192 KiB: 162 rows at 300 deep, 1536 at 32 deep,
  // 96 at 512), so every panel passes chunk after chunk, with one and two K slices, a padded
  // last panel and accumulation across slices; 2 threads split panels or rows inside chunks.
  checkGemm({301, 600, 27, false, true, true, true, 1});
  checkGemm({1600, 32, 40, true, true, false, true, 1});
  checkGemm({1600, 32, 16, false, false, true, false, 2});
  checkGemm({400, 1031, 72, true, true, true, true, 2});
}

// A and C in nChw8c (one image of P positions: MatrixLayout {8, 8 * P}), as a 1x1 convolution
// reads and writes them: every row remainder, K in one and several 512-deep slices (cut at
// whole 8-channel blocks: 1032 = 344 + 344 + 344), one or two 16-wide panels and an 8-wide
// one, the epilogue's sum, ReLU and activations on the blocked C, 1 and 2 threads. The
// elements outside the real rows (the image's padding to P) are left as they were.
TEST(Avx2Sgemm, BlockedLayoutsMatchNaive) {
  SKIP_WITHOUT_AVX2();
  int checked = 0;
  for (int64_t M : {1, 5, 6, 49, 200})
    for (int64_t K : {8, 32, 1032})
      for (int64_t N : {8, 16, 40}) {
        const int64_t P = M + 3;  // position stride > rows used
        std::vector<float> A = randomVec(K * P, 11), B = randomVec(K * N, 12),
                           bias = randomVec(N, 13), C = randomVec(N * P, 14);
        auto a = [&](int64_t i, int64_t k) { return A[(k / 8) * 8 * P + i * 8 + k % 8]; };
        auto cIdx = [&](int64_t i, int64_t n) { return (n / 8) * 8 * P + i * 8 + n % 8; };
        const bool accumulate = (M + N) % 2 == 0, relu = K == 32;
        const bool act = N == 40;
        std::vector<double> want(C.begin(), C.end());
        for (int64_t i = 0; i < M; ++i)
          for (int64_t n = 0; n < N; ++n) {
            double acc = bias[n];
            for (int64_t k = 0; k < K; ++k) acc += (double)a(i, k) * B[k * N + n];
            if (accumulate) acc += C[cIdx(i, n)];
            if (relu) acc = std::max(acc, 0.0);
            if (act) acc = std::tanh(acc);
            want[cIdx(i, n)] = acc;
          }
        avx2::PackedB pb;
        ASSERT_TRUE(pb.pack(B.data(), K, N, N, 1));
        avx2::ActivationStep tanhStep{avx2::Activation::Tanh};
        avx2::GemmEpilogue ep;
        ep.bias = bias.data();
        ep.accumulate = accumulate;
        ep.relu = relu;
        if (act) ep.activations = &tanhStep, ep.activationCount = 1;
        avx2::sgemmParallel(M, A.data(), avx2::MatrixLayout{8, 8 * P}, pb, C.data(),
                            avx2::MatrixLayout{8, 8 * P}, ep, M % 2 ? 1 : 2);
        expectNear(C, want, 1e-4,
                   "blocked M" + std::to_string(M) + " K" + std::to_string(K) + " N" +
                       std::to_string(N));
        ++checked;
      }
  EXPECT_EQ(checked, 45);
}

// The activations against double-precision formulas over [-40, 40] (dense near 0, where tanh's
// two branches meet at 0.625, and out to where exp's clamp acts), every tail length 0-7, NaN
// and infinities. An element passes within 2e-6 relative or 1e-7 absolute (GELU and swish end
// in x * 1e-38-ish values where the exact ones underflow further).
TEST(Avx2Activation, MatchesDoubleFormulas) {
  SKIP_WITHOUT_AVX2();
  std::vector<float> xs;
  for (int i = -4000; i <= 4000; ++i) xs.push_back(i * 1e-3f);        // [-4, 4], step 1e-3
  for (int i = -400; i <= 400; ++i) xs.push_back(i * 0.1f);           // [-40, 40]
  for (float v : {1e-6f, -1e-6f, 1e-20f, 0.f, -0.f, 0.6249f, 0.625f, 0.6251f, -0.625f, 88.f,
                  -88.f, 200.f, -200.f})
    xs.push_back(v);
  const double c = std::sqrt(2.0 / M_PI);
  struct Case {
    avx2::ActivationStep step;
    std::function<double(double)> f;
    const char* name;
  };
  std::vector<Case> cases = {
      {{avx2::Activation::Tanh}, [](double x) { return std::tanh(x); }, "tanh"},
      {{avx2::Activation::GeluTanh},
       [c](double x) { return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x))); },
       "gelu_tanh"},
      {{avx2::Activation::Logistic}, [](double x) { return 1 / (1 + std::exp(-x)); }, "logistic"},
      {{avx2::Activation::Swish, 1.7f}, [](double x) { return x / (1 + std::exp(-1.7 * x)); },
       "swish"},
  };
  for (const Case& k : cases) {
    std::vector<float> y = xs;
    avx2::applyActivations(&k.step, 1, y.data(), (int64_t)y.size());
    int bad = 0;
    for (size_t i = 0; i < xs.size() && bad < 5; ++i) {
      double want = k.f(xs[i]);
      double err = std::fabs(y[i] - want);
      if (!(err <= 2e-6 * std::fabs(want) || err <= 1e-7)) {
        ADD_FAILURE() << k.name << "(" << xs[i] << "): got " << y[i] << ", want " << want;
        ++bad;
      }
    }
    // Tails: lengths 0-7 after full vectors must give the very same values, and leave the
    // element past the end alone.
    for (int64_t n = 0; n <= 15; ++n) {
      std::vector<float> t(xs.begin(), xs.begin() + n + 1);
      t[n] = 12345.f;
      avx2::applyActivations(&k.step, 1, t.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        std::vector<float> one(8, xs[i]);
        avx2::applyActivations(&k.step, 1, one.data(), 8);
        EXPECT_EQ(t[i], one[0]) << k.name << " tail " << n;
      }
      EXPECT_EQ(t[n], 12345.f) << k.name << " wrote past n = " << n;
    }
    float special[3] = {NAN, INFINITY, -INFINITY};
    avx2::applyActivations(&k.step, 1, special, 3);
    EXPECT_TRUE(std::isnan(special[0])) << k.name;
    if (k.step.kind == avx2::Activation::Tanh) {
      EXPECT_EQ(special[1], 1.f);
      EXPECT_EQ(special[2], -1.f);
    } else if (k.step.kind == avx2::Activation::Logistic) {
      EXPECT_EQ(special[1], 1.f);
      EXPECT_TRUE(special[2] >= 0.f && special[2] < 1e-38f) << special[2];  // exp's clamp
    } else {
      EXPECT_EQ(special[1], INFINITY) << k.name;
    }
  }
  // Two steps apply in order: tanh then logistic differs from logistic then tanh.
  avx2::ActivationStep two[2] = {{avx2::Activation::Tanh}, {avx2::Activation::Logistic}};
  float v[1] = {0.3f};
  avx2::applyActivations(two, 2, v, 1);
  EXPECT_NEAR(v[0], 1 / (1 + std::exp(-std::tanh(0.3))), 1e-6);
}

// A GEMM tile's activations (up to 6 x 16, row-major or in 8-column blocks, every column count
// 0-16): each element in the tile gets the value applyActivations gives it alone, and nothing
// outside the tile changes.
TEST(Avx2Rows, SoftmaxAndLogSoftmaxMatchDoubleWithMaskedElementsExactlyZero) {
  SKIP_WITHOUT_AVX2();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 7, 8, 9, 13, 64, 128, 1000}) {
    std::vector<float> x = randomVec(n, uint32_t(n), -30.f, 30.f);
    for (int64_t i = 3; i < n; i += 5) x[i] = -inf;  // an attention mask
    if (n > 20) x[n - 1] = -1e30f;                   // a finite mask (HF BERT's min float)
    double m = -inf, s = 0;
    for (float v : x) m = std::max(m, double(v));
    for (float v : x) s += std::exp(double(v) - m);
    for (bool log : {false, true}) {
      std::vector<float> y(n, 42.f);
      ASSERT_TRUE(avx2::softmaxRow(x.data(), y.data(), n, log)) << n;
      std::vector<double> want(n);
      for (int64_t i = 0; i < n; ++i)
        want[i] = log ? double(x[i]) - (m + std::log(s)) : std::exp(double(x[i]) - m) / s;
      for (int64_t i = 0; i < n; ++i) {
        if (x[i] == -inf) {
          EXPECT_EQ(y[i], log ? -inf : 0.f) << "n " << n << " [" << i << "]";
        } else if (log) {
          EXPECT_NEAR(y[i], want[i], 1e-6 * std::max(1.0, std::fabs(want[i]))) << n << " " << i;
        } else {
          // x - m is rounded to f32 (as oneDNN's softmax does): exp's relative error grows
          // with |x - m| by its half ulp, plus a few ulps of exp and the scaling.
          const double rel = 6e-8 * (std::fabs(double(x[i]) - m) + 8);
          EXPECT_NEAR(y[i], want[i], rel * want[i] + 1e-37) << "n " << n << " [" << i << "]";
        }
      }
    }
  }
  // A NaN anywhere, +inf, or a row of -inf: false, y untouched (the scalar path gives NaN).
  std::vector<float> withNan(11, 1.f), withInf(11, 1.f), allMasked(11, -inf);
  withNan[9] = std::nanf("");  // in the vector part
  withInf[2] = inf;
  for (const std::vector<float>& x : {withNan, withInf, allMasked}) {
    std::vector<float> y(11, 42.f);
    EXPECT_FALSE(avx2::softmaxRow(x.data(), y.data(), 11, false));
    EXPECT_EQ(y, std::vector<float>(11, 42.f));
  }
}

TEST(Avx2Rows, LayerNormMatchesDoubleInPlaceAndWithoutBias) {
  SKIP_WITHOUT_AVX2();
  for (int64_t n : {1, 5, 8, 17, 256, 768}) {
    // An offset mean (100) with a small spread: the two-pass variance keeps its digits.
    std::vector<float> x = randomVec(n, uint32_t(7 * n), 99.f, 101.f);
    const std::vector<float> scale = randomVec(n, 1, 0.5f, 1.5f), bias = randomVec(n, 2);
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= double(n);
    for (float v : x) var += (v - mean) * (v - mean);
    const double inv = 1.0 / std::sqrt(var / double(n) + 1e-5);
    for (bool withBias : {true, false}) {
      std::vector<double> want(n);
      for (int64_t i = 0; i < n; ++i)
        want[i] = (x[i] - mean) * inv * scale[i] + (withBias ? bias[i] : 0.0);
      std::vector<float> y = x;  // in place
      avx2::layerNormRow(y.data(), y.data(), n, scale.data(), withBias ? bias.data() : nullptr, 1e-5);
      expectNear(y, want, 2e-5, "layerNormRow n " + std::to_string(n));
    }
  }
}

// One channel of InstanceNormalization as the reference kernel composes it (Image.cpp):
// meanAndSquares, then affineRow in place.
TEST(Avx2Rows, InstanceNormMatchesDoubleInPlace) {
  SKIP_WITHOUT_AVX2();
  for (int64_t n : {1, 5, 8, 17, 4099}) {
    // An offset mean (100) with a small spread, as above.
    std::vector<float> x = randomVec(n, uint32_t(11 * n), 99.f, 101.f);
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= double(n);
    for (float v : x) var += (v - mean) * (v - mean);
    const double scale = 1.25, bias = -0.5, k = scale / std::sqrt(var / double(n) + 1e-5);
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = (x[i] - mean) * k + bias;
    std::vector<float> y = x;  // in place
    double m, sq;
    avx2::meanAndSquares(y.data(), n, &m, &sq);
    const double kk = scale / std::sqrt(sq / double(n) + 1e-5);
    avx2::affineRow(y.data(), y.data(), n, kk, bias - m * kk);
    // One f32 rounding of a double expression: within 1e-6 of |y| <= ~3.
    expectNear(y, want, 1e-6, "meanAndSquares + affineRow n " + std::to_string(n));
  }
}

TEST(Avx2Activation, TileMatchesElementwise) {
  SKIP_WITHOUT_AVX2();
  const avx2::ActivationStep gelu{avx2::Activation::GeluTanh};
  const int64_t rowStride = 40;
  int checked = 0;
  for (int64_t blockStride : {int64_t(8), int64_t(20)})
    for (int64_t rows = 0; rows <= 6; ++rows)
      for (int64_t cols = 0; cols <= 16; ++cols) {
        std::vector<float> x = randomVec(8 * rowStride, 21), before = x;
        std::vector<bool> inTile(x.size(), false);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; ++j) inTile[r * rowStride + (j / 8) * blockStride + j % 8] = true;
        avx2::applyActivationsTile(&gelu, 1, x.data(), rows, cols, rowStride, blockStride);
        for (size_t i = 0; i < x.size(); ++i) {
          float want = before[i];
          if (inTile[i]) avx2::applyActivations(&gelu, 1, &want, 1);
          ASSERT_EQ(x[i], want) << "rows " << rows << " cols " << cols << " blockStride "
                                << blockStride << " element " << i;
        }
        ++checked;
      }
  EXPECT_EQ(checked, 2 * 7 * 17);
}

TEST(Avx2Sgemm, PackPadsWidthToMultipleOf8) {
  std::vector<float> b(12 * 10, 1.f);
  avx2::PackedB pb;
  ASSERT_TRUE(pb.pack(b.data(), 12, 10, 10, 1));
  EXPECT_EQ(pb.cols(), 10);
  EXPECT_EQ(pb.paddedCols(), 16);
  EXPECT_EQ(pb.panel(0)[10], 0.f);  // padding columns are zeros
  EXPECT_EQ(pb.panel(0)[9], 1.f);
  EXPECT_FALSE(pb.pack(b.data(), 0, 8, 8, 1));
  EXPECT_FALSE(pb.pack(b.data(), 12, 0, 0, 1));
}

// nChw8c <-> NCHW for tests: element (n, c, h, w) at ((n*C/8 + c/8)*H + h)*W*8 + w*8 + c%8.
size_t blockedIndex(int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H, int64_t W) {
  return (size_t)((((n * (C / 8) + c / 8) * H + h) * W + w) * 8 + c % 8);
}

struct WinoCase {
  int64_t N, C, K, H, W, padT, padL, padB, padR;
  bool bias, accumulate, relu;
  int threads;
};

// Runs F(m x m, 3x3) for m = outputTile against the direct convolution in double.
void checkWinogradTile(const WinoCase& c, int outputTile) {
  const int64_t OH = c.H + c.padT + c.padB - 2, OW = c.W + c.padL + c.padR - 2;
  std::vector<float> x = randomVec(c.N * c.C * c.H * c.W, 11),
                     w = randomVec(c.K * c.C * 9, 12, -0.3f, 0.3f), b = randomVec(c.K, 13),
                     y = randomVec(c.N * c.K * OH * OW, 14);
  std::vector<double> want(y.size());
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = c.bias ? b[k] : 0.0;
          for (int64_t ch = 0; ch < c.C; ++ch)
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 3; ++j) {
                int64_t ih = oh - c.padT + i, iw = ow - c.padL + j;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                acc += (double)x[blockedIndex(n, ch, ih, iw, c.C, c.H, c.W)] *
                       w[((k * c.C + ch) * 3 + i) * 3 + j];
              }
          size_t o = blockedIndex(n, k, oh, ow, c.K, OH, OW);
          if (c.accumulate) acc += y[o];
          if (c.relu) acc = std::max(acc, 0.0);
          want[o] = acc;
        }
  avx2::WinogradConv3x3 wc;
  avx2::Conv3x3Shape s{c.N, c.C, c.H, c.W, c.K, OH, OW, c.padT, c.padL};
  ASSERT_TRUE(wc.prepare(s, w.data(), c.bias ? b.data() : nullptr, outputTile));
  ASSERT_EQ(wc.outputTile(), outputTile);
  wc.run(x.data(), y.data(), c.accumulate, c.relu, c.threads);
  expectNear(y, want, 1e-4,
             "F(" + std::to_string(outputTile) + ") N" + std::to_string(c.N) + " C" + std::to_string(c.C) + " K" + std::to_string(c.K) +
                 " " + std::to_string(c.H) + "x" + std::to_string(c.W));
}

void checkWinograd(const WinoCase& c) {
  checkWinogradTile(c, 2);
  checkWinogradTile(c, 4);
}

TEST(Avx2Winograd, MatchesNaiveConvolution) {
  SKIP_WITHOUT_AVX2();
  // Odd and even outputs (partial tiles), no / symmetric / asymmetric / 2-wide padding,
  // epilogues on and off, several tile blocks (N 3 x 9x9 tiles > one block at C=K=8), and
  // 2-3 threads splitting the tiles or sharing blocks.
  checkWinograd({1, 8, 8, 6, 6, 1, 1, 1, 1, true, false, false, 1});
  checkWinograd({2, 16, 24, 7, 9, 1, 1, 1, 1, true, true, true, 1});
  checkWinograd({1, 8, 16, 5, 8, 0, 0, 0, 0, false, false, true, 1});
  checkWinograd({3, 8, 8, 17, 18, 1, 0, 0, 1, true, true, false, 1});
  checkWinograd({1, 24, 8, 4, 4, 2, 2, 2, 2, true, false, true, 1});
  checkWinograd({2, 64, 64, 14, 14, 1, 1, 1, 1, true, true, true, 2});
  checkWinograd({1, 8, 8, 3, 3, 0, 1, 2, 1, false, true, false, 2});
  // Few tiles and a transformed filter over 1 MiB (16 x 136 x 128 floats): 2 threads share
  // each block, phase by phase.
  checkWinograd({1, 136, 128, 6, 5, 1, 1, 1, 1, true, true, true, 2});
  // Many tiles on 2 threads: the tile-parallel path.
  checkWinograd({2, 8, 16, 31, 32, 1, 1, 1, 1, true, true, true, 2});
  checkWinograd({3, 16, 8, 29, 29, 1, 1, 1, 1, false, false, true, 3});
}

TEST(Avx2Winograd, RejectsUnsupportedShapes) {
  std::vector<float> w(16 * 16 * 9);
  avx2::WinogradConv3x3 wc;
  EXPECT_FALSE(wc.prepare({1, 12, 8, 8, 16, 8, 8, 1, 1}, w.data(), nullptr));  // C % 8
  EXPECT_FALSE(wc.prepare({1, 16, 8, 8, 12, 8, 8, 1, 1}, w.data(), nullptr));  // K % 8
  EXPECT_FALSE(wc.prepare({1, 16, 8, 8, 16, 10, 10, 3, 3}, w.data(), nullptr));  // pad 3
  EXPECT_FALSE(wc.prepare({1, 16, 8, 8, 16, 8, 12, 1, 1}, w.data(), nullptr));  // OW: pad 5
  EXPECT_FALSE(wc.prepare({1, 16, 8, 8, 16, 8, 8, 1, 1}, w.data(), nullptr, 3));  // F(3x3, 3x3)
}

// F(4x4, 3x3) unless there are few 4x4 tiles for a large transformed filter.
TEST(Avx2Winograd, ChoosesOutputTileByShape) {
  SKIP_WITHOUT_AVX2();
  auto tileFor = [](int64_t N, int64_t C, int64_t HW) {
    std::vector<float> w(C * C * 9, 0.01f);
    avx2::WinogradConv3x3 wc;
    EXPECT_TRUE(wc.prepare({N, C, HW, HW, C, HW, HW, 1, 1}, w.data(), nullptr));
    return wc.outputTile();
  };
  EXPECT_EQ(tileFor(1, 64, 56), 4);    // ResNet-18 layer 1, batch 1: 196 tiles
  EXPECT_EQ(tileFor(1, 256, 14), 2);   // 16 tiles, 9 MiB filter
  EXPECT_EQ(tileFor(1, 512, 7), 2);    // 4 tiles, 36 MiB filter
  EXPECT_EQ(tileFor(32, 512, 7), 4);   // batch 32: 128 tiles
  EXPECT_EQ(tileFor(1, 32, 8), 4);     // 4 tiles, but a 144 KiB filter
}

// Through the registry: a ResNet-like 3x3 Conv with 64 channels picks Winograd (plain user
// buffers, so the kernel's reorders run too) and matches the reference kernel.
TEST(Avx2Winograd, ConvKernelChoosesItAndMatchesReference) {
  SKIP_WITHOUT_AVX2();
  OpCase oc;
  oc.op = "Conv";
  oc.attrs.set("pads", Attr::ofInts({1, 1, 1, 1}));
  oc.inputs = {randomTensor({2, 64, 9, 10}, 21), randomTensor({64, 64, 3, 3}, 22, -0.1f, 0.1f),
               randomTensor({64}, 23)};
  oc.constant = {false, true, true};
  oc.outputs = {{2, 64, 9, 10}};
  KernelRegistry refOnly;
  registerCpuReferenceKernels(refOnly);
  std::unique_ptr<Kernel> rk;
  ASSERT_TRUE(refOnly.create("cpu", oc.context(), &rk).isOk());
  Tensor want = Tensor::alloc(DType::F32, {2, 64, 9, 10});
  std::vector<Tensor*> outs = {&want};
  ASSERT_TRUE(rk->run({&oc.inputs[0], &oc.inputs[1], &oc.inputs[2]}, outs).isOk());
  // The load option (tandem --winograd) picks the algorithm: by shape, F(2x2) only, or none.
  // Winograd reads the 8-channel-blocked layout that oneDNN's jit:avx2 convolution picks;
  // where oneDNN prefers another layout on this host (AVX-512: brgconv on nhwc) it stays off.
  const bool blocked8 = std::string(dnnlcpu::activationLayoutName()) == "nChw8c";
  const std::pair<WinogradPolicy, const char*> cases[] = {
      {WinogradPolicy::Auto, blocked8 ? "avx2:winograd_4x4_3x3" : "dnnl:"},
      {WinogradPolicy::Tile2x2, blocked8 ? "avx2:winograd_2x2_3x3" : "dnnl:"},
      {WinogradPolicy::Off, "dnnl:"}};
  for (const auto& [policy, wantImpl] : cases) {
    oc.winograd = policy;
    std::string impl;
    Tensor got = runOnce(oc, &impl);
    EXPECT_EQ(impl.rfind(wantImpl, 0), 0u) << impl;
    expectClose(got, toDouble(want), 1e-4);
  }
}

// Strided and 32-channel convolutions keep oneDNN's direct kernel.
TEST(Avx2Winograd, NotChosenOutsideItsRange) {
  SKIP_WITHOUT_AVX2();
  OpCase oc;
  oc.op = "Conv";
  oc.attrs.set("pads", Attr::ofInts({1, 1, 1, 1}));
  oc.attrs.set("strides", Attr::ofInts({2, 2}));
  oc.inputs = {randomTensor({1, 64, 8, 8}, 31), randomTensor({64, 64, 3, 3}, 32)};
  oc.constant = {false, true};
  oc.outputs = {{1, 64, 4, 4}};
  std::string impl;
  runOnce(oc, &impl);
  EXPECT_EQ(impl.find("winograd"), std::string::npos) << impl;
  OpCase narrow;
  narrow.op = "Conv";
  narrow.inputs = {randomTensor({1, 16, 8, 8}, 33), randomTensor({64, 16, 3, 3}, 34)};
  narrow.constant = {false, true};
  narrow.outputs = {{1, 64, 6, 6}};
  runOnce(narrow, &impl);
  EXPECT_EQ(impl.find("winograd"), std::string::npos) << impl;
}

// Gemm with constant transposed weights, a bias row: the packed GEMM, matching the reference.
TEST(Avx2Sgemm, GemmKernelChoosesItAndMatchesReference) {
  SKIP_WITHOUT_AVX2();
  OpCase oc;
  oc.op = "Gemm";
  oc.attrs.set("transB", Attr::ofInt(1));
  // 10 outputs (a classifier layer): packed with 6 zero columns of padding.
  oc.inputs = {randomTensor({9, 70}, 41), randomTensor({10, 70}, 42), randomTensor({10}, 43)};
  oc.constant = {false, true, true};
  oc.outputs = {{9, 10}};
  std::string impl;
  Tensor got = runOnce(oc, &impl);
  EXPECT_EQ(impl.rfind("avx2:sgemm_packed", 0), 0u) << impl;
  KernelRegistry refOnly;
  registerCpuReferenceKernels(refOnly);
  std::unique_ptr<Kernel> rk;
  ASSERT_TRUE(refOnly.create("cpu", oc.context(), &rk).isOk());
  Tensor want = Tensor::alloc(DType::F32, {9, 10});
  std::vector<Tensor*> outs = {&want};
  ASSERT_TRUE(rk->run({&oc.inputs[0], &oc.inputs[1], &oc.inputs[2]}, outs).isOk());
  expectClose(got, toDouble(want), 1e-4);
  // Non-constant weights stay with oneDNN (nothing to pack ahead).
  oc.constant = {false, false, true};
  runOnce(oc, &impl);
  EXPECT_EQ(impl.find("avx2"), std::string::npos) << impl;
}

// MaxPool on blocked input through the registry (the plan's input_layouts says "blocked"):
// blocked or plain output, windows clipped at padded edges, against a naive pool of the plain
// tensor. The input handed over is the plain tensor in the host's activation layout; the AVX2
// pool runs where that layout is nChw8c (AVX2 hosts), oneDNN's pool elsewhere.
void checkMaxPool(Shape x, std::vector<int64_t> k, std::vector<int64_t> st,
                  std::vector<int64_t> pads, bool dstBlocked) {
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3];
  const int64_t OH = (H + pads[0] + pads[2] - k[0]) / st[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - k[1]) / st[1] + 1;
  Tensor plain = randomTensor(x, 51);
  OpCase oc;
  oc.op = "MaxPool";
  oc.attrs.set("kernel_shape", Attr::ofInts(k));
  oc.attrs.set("strides", Attr::ofInts(st));
  oc.attrs.set("pads", Attr::ofInts(pads));
  oc.attrs.set("input_layouts", Attr::ofStrings({"blocked"}));
  if (dstBlocked) oc.attrs.set("output_layouts", Attr::ofStrings({"blocked"}));
  oc.inputs = {relayout(plain, true)};
  oc.outputs = {{N, C, OH, OW}};
  std::string impl;
  Tensor got = runOnce(oc, &impl);
  if (std::string(dnnlcpu::activationLayoutName()) == "nChw8c")
    EXPECT_EQ(impl, std::string("avx2:maxpool_nChw8c") + (dstBlocked ? "" : " to nchw"));
  else
    EXPECT_EQ(impl.rfind("dnnl:", 0), 0u) << impl;
  std::vector<double> want(N * C * OH * OW);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double m = -INFINITY;
          for (int64_t i = 0; i < k[0]; ++i)
            for (int64_t j = 0; j < k[1]; ++j) {
              int64_t h = oh * st[0] - pads[0] + i, w = ow * st[1] - pads[1] + j;
              if (h >= 0 && h < H && w >= 0 && w < W)
                m = std::max(m, (double)plain.data<float>()[((n * C + c) * H + h) * W + w]);
            }
          want[((n * C + c) * OH + oh) * OW + ow] = m;
        }
  expectClose(dstBlocked ? relayout(got, false) : got, want, 0);
}

TEST(Avx2MaxPool, BlockedInputToBlockedAndPlainOutput) {
  SKIP_WITHOUT_AVX2();
  checkMaxPool({2, 16, 11, 12}, {3, 3}, {2, 2}, {1, 1, 1, 1}, true);   // ResNet's stem pool
  checkMaxPool({2, 16, 11, 12}, {3, 3}, {2, 2}, {1, 1, 1, 1}, false);
  checkMaxPool({3, 64, 24, 24}, {2, 2}, {2, 2}, {0, 0, 0, 0}, false);  // MNIST's pool -> Flatten
  checkMaxPool({1, 16, 7, 5}, {3, 2}, {1, 2}, {2, 0, 0, 1}, true);     // asymmetric everything
}

TEST(Avx2MaxPool, PlainInputStaysWithOneDnn) {
  SKIP_WITHOUT_AVX2();
  OpCase oc;
  oc.op = "MaxPool";
  oc.attrs.set("kernel_shape", Attr::ofInts({2, 2}));
  oc.attrs.set("strides", Attr::ofInts({2, 2}));
  oc.inputs = {randomTensor({1, 16, 8, 8}, 61)};
  oc.outputs = {{1, 16, 4, 4}};
  std::string impl;
  runOnce(oc, &impl);
  EXPECT_EQ(impl.rfind("dnnl:", 0), 0u) << impl;
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem

namespace tandem {
namespace dnnltest {
namespace {

// Where an [N, C, S] activation in `layout` stores logical element (n, c, s).
int64_t layoutIndex(avx2::ChannelLayout layout, int64_t C, int64_t S, int64_t n, int64_t c, int64_t s) {
  using L = avx2::ChannelLayout;
  switch (layout) {
    case L::Plain: return (n * C + c) * S + s;
    case L::ChannelsLast: return (n * S + s) * C + c;
    case L::Blocked8: return ((n * (C / 8) + c / 8) * S + s) * 8 + c % 8;
    case L::Blocked16: return ((n * (C / 16) + c / 16) * S + s) * 16 + c % 16;
  }
  return 0;
}

// channelAffine in each layout against a naive loop on the plain tensor: the element at
// (n, c, s) must get channel c's scale and shift wherever the layout stores it. C = 32 fits
// every layout; C = 5 (plain, channels-last) and threads = 2 exercise the remainders and the
// split. Runs the AVX2 path where the CPU has it, the scalar one otherwise.
TEST(Avx2ChannelAffine, EveryLayoutMatchesNaive) {
  using L = avx2::ChannelLayout;
  struct Case { L layout; int64_t N, C, S; };
  for (const Case& k : {Case{L::Plain, 2, 5, 13}, Case{L::ChannelsLast, 2, 5, 13},
                        Case{L::ChannelsLast, 2, 32, 7}, Case{L::Blocked8, 2, 32, 7},
                        Case{L::Blocked16, 2, 32, 7}, Case{L::Plain, 1, 32, 3}})
    for (bool relu : {false, true})
      for (int threads : {1, 2}) {
        const int64_t n = k.N * k.C * k.S;
        std::vector<float> x = randomVec(n, 7), a = randomVec(k.C, 8, 0.5f, 2.f),
                           b = randomVec(k.C, 9);
        auto at = [&](int64_t i, int64_t c, int64_t s) { return layoutIndex(k.layout, k.C, k.S, i, c, s); };
        std::vector<float> y(n, -99.f);
        avx2::channelAffine(k.layout, k.N, k.C, k.S, a.data(), b.data(), relu, x.data(), y.data(),
                            threads);
        std::vector<float> got(n);
        std::vector<double> want(n);
        for (int64_t i = 0; i < k.N; ++i)
          for (int64_t c = 0; c < k.C; ++c)
            for (int64_t s = 0; s < k.S; ++s) {
              int64_t p = at(i, c, s);
              double v = (double)x[p] * a[c] + b[c];
              want[p] = relu ? std::max(v, 0.0) : v;
              got[p] = y[p];
            }
        expectNear(got, want, 1e-5,
                   "layout " + std::to_string((int)k.layout) + " relu " + std::to_string(relu));
      }
}

// groupNorm in each layout against a two-pass f64 GroupNormalization (+ SiLU) on the plain
// tensor. Cases: 8 groups of 4 channels in every layout; InstanceNorm's groups == C with
// C = 5 (plain, channels-last remainders); one group over a large S (several f32 chunks);
// values around 1000 with a spread of 1 (E[x^2] - E[x]^2, or x * a + b with b = bias - mean * a,
// in f32 would lose digits there); threads 1 and 2; src == dst.
TEST(Avx2GroupNorm, EveryLayoutMatchesTwoPassReference) {
  using L = avx2::ChannelLayout;
  struct Case { L layout; int64_t N, C, S, G; float offset; };
  for (const Case& k : {Case{L::Plain, 2, 32, 37, 8, 0.f}, Case{L::ChannelsLast, 2, 32, 37, 8, 0.f},
                        Case{L::Blocked8, 2, 32, 37, 8, 0.f}, Case{L::Blocked16, 2, 32, 37, 8, 0.f},
                        Case{L::Plain, 1, 5, 13, 5, 0.f}, Case{L::ChannelsLast, 1, 5, 13, 5, 0.f},
                        Case{L::ChannelsLast, 1, 16, 9000, 1, 0.f}, Case{L::Plain, 1, 16, 9000, 2, 0.f},
                        Case{L::Blocked8, 1, 16, 300, 2, 1000.f}, Case{L::ChannelsLast, 1, 24, 300, 3, 1000.f}})
    for (bool silu : {false, true})
      for (int threads : {1, 2}) {
        const int64_t n = k.N * k.C * k.S, Cg = k.C / k.G;
        std::vector<float> x = randomVec(n, 17, k.offset - 1.f, k.offset + 1.f),
                           sc = randomVec(k.C, 18, 0.5f, 2.f), bi = randomVec(k.C, 19);
        auto at = [&](int64_t i, int64_t c, int64_t s) { return layoutIndex(k.layout, k.C, k.S, i, c, s); };
        std::vector<double> want(n);
        for (int64_t i = 0; i < k.N; ++i)
          for (int64_t g = 0; g < k.G; ++g) {
            double mean = 0, var = 0;
            for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c)
              for (int64_t s = 0; s < k.S; ++s) mean += x[at(i, c, s)];
            mean /= double(Cg * k.S);
            for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c)
              for (int64_t s = 0; s < k.S; ++s) var += (x[at(i, c, s)] - mean) * (x[at(i, c, s)] - mean);
            var /= double(Cg * k.S);
            for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c)
              for (int64_t s = 0; s < k.S; ++s) {
                double v = (x[at(i, c, s)] - mean) / std::sqrt(var + 1e-5) * sc[c] + bi[c];
                want[at(i, c, s)] = silu ? v / (1 + std::exp(-v)) : v;
              }
          }
        const bool inPlace = threads == 2 && silu;
        std::vector<float> y = inPlace ? x : std::vector<float>(n, -99.f);
        avx2::groupNorm(k.layout, k.N, k.C, k.S, k.G, sc.data(), bi.data(), 1e-5f, silu,
                        inPlace ? y.data() : x.data(), y.data(), threads);
        expectNear(y, want, 1e-5,
                   "layout " + std::to_string((int)k.layout) + " C " + std::to_string(k.C) +
                       " silu " + std::to_string(silu) + " threads " + std::to_string(threads));
      }
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
