// DequantizeMatMul (weight-only quantization): runtime/cpu/avx2/DequantGemm.h's paths against
// f64 loops over DequantizeLinear's weights, the panel path bit for bit against the f32 GEMM,
// the int8-activation path (DequantGemmInt8.h) against a scalar model of its quantization, and
// the kernel's variants (runtime/cpu/dnnl/DnnlDequantizeMatMul.cpp) against the reference.
#include <cmath>
#include <random>

#include "dnnl_test_util.h"
#include "runtime/cpu/avx2/DequantGemm.h"
#include "runtime/cpu/avx2/DequantGemmInt8.h"

namespace tandem {
namespace dnnltest {
namespace {

#define SKIP_WITHOUT_AVX2() \
  if (!avx2::available()) GTEST_SKIP() << "this CPU has no AVX2/FMA (or TANDEM_MAX_CPU_ISA caps it)"

/// Quantized weights and their parameters as DequantizeLinear reads them.
struct QuantWeights {
  int64_t K = 0, N = 0, blockSize = 0;
  bool isUnsigned = false;
  std::vector<int32_t> q;      // K x N
  std::vector<float> scale;    // 1, N or blocks x N
  std::vector<int32_t> zp;     // empty or scale's count
  std::vector<uint8_t> bytes;  // q as stored (u8 or i8)
  std::vector<uint8_t> zpBytes;

  int64_t param(int64_t k, int64_t n) const {
    if (scale.size() == 1) return 0;
    return blockSize > 0 ? (k / blockSize) * N + n : n;
  }
  /// DequantizeLinear's f32 value of (k, n): (q - zp) * scale.
  float w(int64_t k, int64_t n) const {
    const int64_t i = param(k, n);
    return float(q[k * N + n] - (zp.empty() ? 0 : zp[i])) * scale[i];
  }
  avx2::QuantBSource source() const {
    avx2::QuantBSource s;
    s.q = bytes.data();
    s.isUnsigned = isUnsigned;
    s.K = K;
    s.N = N;
    s.scale = scale.data();
    s.scaleCount = (int64_t)scale.size();
    s.zeroPoint = zp.empty() ? nullptr : zpBytes.data();
    s.blockSize = blockSize;
    return s;
  }
};

enum class Scales { PerTensor, PerColumn, Blocked };
enum class ZeroPoints { None, Narrow, Wide };  // Narrow: 4-bit values and zero points

QuantWeights makeWeights(int64_t K, int64_t N, bool isUnsigned, Scales scales, int64_t blockSize,
                         ZeroPoints zps, uint32_t seed) {
  std::mt19937 rng(seed);
  QuantWeights w;
  w.K = K;
  w.N = N;
  w.isUnsigned = isUnsigned;
  w.blockSize = scales == Scales::Blocked ? blockSize : 0;
  const int lo = zps == ZeroPoints::Narrow ? (isUnsigned ? 0 : -8) : (isUnsigned ? 0 : -128);
  const int hi = zps == ZeroPoints::Narrow ? (isUnsigned ? 15 : 7) : (isUnsigned ? 255 : 127);
  std::uniform_int_distribution<int> qd(lo, hi);
  for (int64_t i = 0; i < K * N; ++i) w.q.push_back(qd(rng));
  const int64_t blocks = w.blockSize > 0 ? (K + w.blockSize - 1) / w.blockSize : 1;
  const int64_t count = scales == Scales::PerTensor ? 1 : blocks * N;
  std::uniform_real_distribution<float> sd(0.002f, 0.02f);
  for (int64_t i = 0; i < count; ++i) w.scale.push_back(sd(rng));
  if (zps != ZeroPoints::None)
    for (int64_t i = 0; i < count; ++i) w.zp.push_back(qd(rng));
  for (int32_t v : w.q) w.bytes.push_back(uint8_t(v));
  for (int32_t v : w.zp) w.zpBytes.push_back(uint8_t(v));
  return w;
}

struct GemmCase {
  int64_t M, K, N;
  bool isUnsigned;
  Scales scales;
  int64_t blockSize;
  ZeroPoints zps;
  bool bias, accumulate, relu;
  avx2::DequantGemmPath path;
  int threads;
};

std::string describe(const GemmCase& c) {
  return "M" + std::to_string(c.M) + " K" + std::to_string(c.K) + " N" + std::to_string(c.N) +
         (c.isUnsigned ? " u8" : " i8") + " scales " + std::to_string(int(c.scales)) + " block " +
         std::to_string(c.blockSize) + " zp " + std::to_string(int(c.zps)) +
         (c.bias ? " bias" : "") + (c.accumulate ? " acc" : "") + (c.relu ? " relu" : "") +
         " path " + std::to_string(int(c.path)) + " threads " + std::to_string(c.threads);
}

void checkGemm(const GemmCase& c, uint32_t seed) {
  SCOPED_TRACE(describe(c));
  const QuantWeights qw = makeWeights(c.K, c.N, c.isUnsigned, c.scales, c.blockSize, c.zps, seed);
  avx2::PackedQuantB B;
  std::string why;
  ASSERT_TRUE(B.pack(qw.source(), &why)) << why;
  // 4-bit values (and zero points) are kept in 4 bits where blocks hold an even number of rows.
  const bool oneBlock = c.scales != Scales::Blocked || c.blockSize >= c.K;
  if (c.zps == ZeroPoints::Narrow) {
    EXPECT_EQ(B.nibbles(), oneBlock || c.blockSize % 2 == 0);
  }
  const int64_t rowBytes = B.nibbles() ? (c.K + 1) / 2 * 16 : c.K * 16;
  EXPECT_EQ(B.bytes(), B.panels() * (rowBytes + B.blocks() * 16 * 2 * 4));
  const int64_t lda = c.K + 3, ldc = c.N + 5;  // padded rows: the strides are honoured
  std::vector<float> A = randomVec(c.M * lda, seed + 1), bias = randomVec(c.N, seed + 2),
                     C = randomVec(c.M * ldc, seed + 3);
  std::vector<double> want(C.begin(), C.end()), bound(C.size(), 0.0);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double acc = c.bias ? bias[j] : 0.0, mag = std::fabs(acc);
      for (int64_t k = 0; k < c.K; ++k) {
        const double p = (double)A[i * lda + k] * qw.w(k, j);
        acc += p;
        mag += std::fabs(p);
        // 4-bit values are summed as stored (0-15) and 8 x the row sum of A taken off per
        // block: f32 rounding of terms up to 8 x |a| x scale larger.
        if (B.nibbles()) mag += 8 * std::fabs(A[i * lda + k]) * qw.scale[qw.param(k, j)];
      }
      if (c.accumulate) acc += C[i * ldc + j], mag += std::fabs(C[i * ldc + j]);
      if (c.relu) acc = std::max(acc, 0.0);
      want[i * ldc + j] = acc;
      bound[i * ldc + j] = mag;
    }
  avx2::GemmEpilogue ep;
  ep.bias = c.bias ? bias.data() : nullptr;
  ep.accumulate = c.accumulate;
  ep.relu = c.relu;
  avx2::dequantGemm(c.M, A.data(), lda, B, C.data(), ldc, ep, c.threads, c.path);
  int bad = 0;
  for (size_t i = 0; i < C.size() && bad < 5; ++i)
    if (!(std::fabs(C[i] - want[i]) <= 2e-6 * bound[i] + 1e-30)) {
      ADD_FAILURE() << "[" << i / ldc << ", " << i % ldc << "]: got " << C[i] << ", want " << want[i]
                    << " (sum of |terms| " << bound[i] << ")";
      ++bad;
    }
}

TEST(DequantGemm, MatchesTheProductOfDequantizedWeights) {
  SKIP_WITHOUT_AVX2();
  uint32_t seed = 1;
  using P = avx2::DequantGemmPath;
  // Rows around the register tiles (1-4) and the 6-row micro-kernels; K with a ragged last
  // block; N around the 16-column panels and the 8-wide last panel of the panel path.
  for (int64_t M : {1, 2, 3, 4, 5, 7, 17})
    for (int64_t K : {1, 13, 100})
      for (int64_t N : {1, 8, 15, 16, 40, 150})
        for (P path : {P::Registers, P::Panels}) {
          for (Scales sc : {Scales::PerTensor, Scales::PerColumn, Scales::Blocked})
            for (ZeroPoints z : {ZeroPoints::None, ZeroPoints::Narrow, ZeroPoints::Wide})
              for (bool u : {false, true})
                checkGemm({M, K, N, u, sc, sc == Scales::Blocked ? 32 : 0, z, false, false, false,
                           path, 1},
                          seed++);
          // Block sizes 1 (odd: 4-bit values stay 8-bit) and larger than K; the epilogue; two
          // threads over panels or rows.
          checkGemm({M, K, N, false, Scales::Blocked, 1, ZeroPoints::Narrow, false, false, false,
                     path, 1},
                    seed++);
          checkGemm({M, K, N, true, Scales::Blocked, 1, ZeroPoints::Wide, true, true, true, path, 2},
                    seed++);
          checkGemm({M, K, N, false, Scales::Blocked, 128, ZeroPoints::Narrow, true, false, false,
                     path, 2},
                    seed++);
        }
}

// The panel path multiplies panels equal to DequantizeLinear's weights with Sgemm.h's
// micro-kernels: the same bits as the f32 GEMM over the dequantized matrix.
TEST(DequantGemm, PanelPathIsTheF32GemmBitForBit) {
  SKIP_WITHOUT_AVX2();
  for (int64_t N : {24, 40, 150}) {
    const int64_t M = 37, K = 70;
    const QuantWeights qw = makeWeights(K, N, true, Scales::Blocked, 16, ZeroPoints::Wide, 7);
    avx2::PackedQuantB B;
    std::string why;
    ASSERT_TRUE(B.pack(qw.source(), &why)) << why;
    std::vector<float> wf(K * N);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) wf[k * N + n] = qw.w(k, n);
    avx2::PackedB F;
    ASSERT_TRUE(F.pack(wf.data(), K, N, N, 1));
    const std::vector<float> A = randomVec(M * K, 8), bias = randomVec(N, 9);
    std::vector<float> got(M * N), want(M * N);
    avx2::GemmEpilogue ep;
    ep.bias = bias.data();
    avx2::dequantGemm(M, A.data(), K, B, got.data(), N, ep, 1, avx2::DequantGemmPath::Panels);
    avx2::sgemm(M, A.data(), K, F, want.data(), N, ep, 0, F.panels());
    for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(got[i], want[i]) << "N " << N << " element " << i;
  }
}

TEST(DequantGemm, DequantizeColumnsIsDequantizeLinear) {
  SKIP_WITHOUT_AVX2();
  const int64_t K = 45, N = 37, ld = 64;  // 3 panels, the last 5 columns real; a last odd row
  for (ZeroPoints z : {ZeroPoints::Wide, ZeroPoints::Narrow})
  for (bool u : {false, true}) {
    const QuantWeights qw = makeWeights(K, N, u, Scales::Blocked, 8, z, u ? 11 : 12);
    avx2::PackedQuantB B;
    std::string why;
    ASSERT_TRUE(B.pack(qw.source(), &why)) << why;
    std::vector<float> dst(K * ld, -1.f);
    avx2::dequantizeColumns(B, 0, B.panels(), dst.data(), ld, 2);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < ld; ++n)
        ASSERT_EQ(dst[k * ld + n], n < N ? qw.w(k, n) : (n < 48 ? 0.f : -1.f)) << k << ", " << n;
  }
}

TEST(DequantGemm, PackRejectsScaleCountsThatDoNotFit) {
  QuantWeights qw = makeWeights(10, 6, false, Scales::Blocked, 4, ZeroPoints::None, 3);
  avx2::QuantBSource s = qw.source();
  avx2::PackedQuantB B;
  std::string why;
  s.scaleCount = 12;  // blocks of 4 rows of 10: 3 x 6 = 18 expected
  EXPECT_FALSE(B.pack(s, &why));
  EXPECT_NE(why.find("expected 18 scales"), std::string::npos) << why;
  s.blockSize = 0;  // per column: 6, or 1
  EXPECT_FALSE(B.pack(s, &why));
  EXPECT_NE(why.find("one per column"), std::string::npos) << why;
}

// ---- int8 activations (accuracy_level 4) ---------------------------------------------------

/// A's quantization written out independently of the kernel: per row and block, s = max |a| /
/// 127 in f32, q = nearest (ties to even) of a * (1 / s) in f32, within [-127, 127].
struct QuantizedA {
  std::vector<int32_t> q;         // M x K
  std::vector<double> scale;      // M x blocks
};
QuantizedA quantizeA(const std::vector<float>& A, int64_t M, int64_t lda, int64_t K, int64_t bs) {
  const int64_t nb = (K + bs - 1) / bs;
  QuantizedA r;
  r.q.assign(M * K, 0);
  r.scale.assign(M * nb, 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t k0 = b * bs, k1 = std::min(K, k0 + bs);
      float amax = 0;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(A[m * lda + k]));
      const float s = amax / 127.f, inv = s != 0.f ? 1.f / s : 0.f;
      for (int64_t k = k0; k < k1; ++k) {
        const float v = std::nearbyint(A[m * lda + k] * inv);
        r.q[m * K + k] = (int32_t)std::min(127.f, std::max(-127.f, v));
      }
      r.scale[m * nb + b] = s;
    }
  return r;
}

TEST(DequantGemmInt8, QuantizesAsTheScalarModel) {
  if (!avx2::int8DotAvailable()) GTEST_SKIP() << "no AVX2/FMA (or TANDEM_MAX_CPU_ISA caps it)";
  const int64_t M = 5, K = 75, lda = 80, bs = 32, pbs = 32, nb = 3;
  std::vector<float> A = randomVec(M * lda, 61);
  A[3] = 0.f, A[lda + 1] = 2.5f;  // a row whose largest |a| lands exactly on 127
  for (int64_t k = 64; k < 75; ++k) A[2 * lda + k] = 0.f;  // an all-zero block: s 0, q 0
  std::vector<int8_t> q(M * nb * pbs, 99);
  std::vector<float> s(M * nb), sum(M * nb);
  avx2::quantizeRowsInt8(M, A.data(), lda, K, bs, pbs, q.data(), s.data(), sum.data());
  const QuantizedA want = quantizeA(A, M, lda, K, bs);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < nb; ++b) {
      int64_t total = 0;
      for (int64_t i = 0; i < pbs; ++i) {
        const int64_t k = b * bs + i;
        const int32_t w = k < K ? want.q[m * K + k] : 0;  // the padding holds zeros
        ASSERT_EQ(q[(m * nb + b) * pbs + i], w) << "row " << m << " k " << k;
        total += w;
      }
      EXPECT_EQ(s[m * nb + b], (float)want.scale[m * nb + b]) << m << ", " << b;
      EXPECT_EQ(sum[m * nb + b], (float)total) << m << ", " << b;
    }
  EXPECT_EQ(s[2 * nb + 2], 0.f);
}

// The int8 path against the same quantization in f64: rows around the 1-4-row tiles, K with
// ragged last blocks (of 16, and of 20: padded to 24) and K within one block (5, 13: odd, the
// last row paired with zeros), N around the 16-column panels and the 1-4-panel tiles (1 and 7:
// one padded panel), blocks of 16, 32 and 64, zero points or 8, a bias, one and two threads.
TEST(DequantGemmInt8, MatchesTheQuantizedProduct) {
  if (!avx2::int8DotAvailable()) GTEST_SKIP() << "no AVX2/FMA (or TANDEM_MAX_CPU_ISA caps it)";
  uint32_t seed = 100;
  for (int64_t M : {1, 2, 3, 4, 5, 9})
    for (int64_t K : {5, 13, 64, 80, 84})
      for (int64_t N : {1, 7, 16, 24, 72, 136})
        for (int64_t bs : {16, 32, 64})
          for (ZeroPoints z : {ZeroPoints::None, ZeroPoints::Narrow, ZeroPoints::Wide}) {
            // None and Narrow: 4-bit values (without, or with zero points); Wide: 8-bit ones.
            SCOPED_TRACE("M" + std::to_string(M) + " K" + std::to_string(K) + " N" + std::to_string(N) +
                         " block " + std::to_string(bs) + " zp " + std::to_string(int(z)));
            const bool u = seed % 2 == 0;
            const QuantWeights qw = makeWeights(K, N, u, Scales::Blocked, bs,
                                                z == ZeroPoints::Wide ? ZeroPoints::Wide : ZeroPoints::Narrow, seed);
            QuantWeights w = qw;
            if (z == ZeroPoints::None) w.zp.clear(), w.zpBytes.clear();
            avx2::PackedQuantB B;
            avx2::PackedDotB D;
            std::string why;
            ASSERT_TRUE(B.pack(w.source(), &why)) << why;
            ASSERT_TRUE(D.pack(B, &why)) << why;
            EXPECT_EQ(D.eightBit(), !B.nibbles());
            EXPECT_EQ(D.paddedBlock(), (std::min(bs, K) + 7) / 8 * 8);
            const int64_t lda = K + 3, ldc = N + 5;
            const std::vector<float> A = randomVec(M * lda, seed + 1), bias = randomVec(N, seed + 2);
            std::vector<float> C(M * ldc, -7.f);
            const int threads = seed % 3 == 0 ? 2 : 1;
            avx2::dequantGemmInt8(M, A.data(), lda, D, C.data(), ldc, seed % 4 == 0 ? bias.data() : nullptr,
                                  threads);
            const QuantizedA qa = quantizeA(A, M, lda, K, bs);
            const int64_t nb = (K + bs - 1) / bs;
            int bad = 0;
            for (int64_t m = 0; m < M && bad < 5; ++m)
              for (int64_t n = 0; n < ldc && bad < 5; ++n) {
                const float got = C[m * ldc + n];
                if (n >= N) {  // past the columns: untouched
                  if (got != -7.f) ADD_FAILURE() << "wrote column " << n, ++bad;
                  continue;
                }
                double want = seed % 4 == 0 ? bias[n] : 0.0, mag = std::fabs(want);
                for (int64_t b = 0; b < nb; ++b) {
                  int64_t dot = 0;
                  for (int64_t k = b * bs; k < std::min(K, (b + 1) * bs); ++k)
                    dot += int64_t(qa.q[m * K + k]) * (w.q[k * N + n] - (w.zp.empty() ? 0 : w.zp[b * N + n]));
                  const double t = qa.scale[m * nb + b] * w.scale[b * N + n] * double(dot);
                  want += t;
                  mag += std::fabs(t) + qa.scale[m * nb + b] * w.scale[b * N + n] * 256.0 * 127.0;
                }
                if (!(std::fabs(got - want) <= 1e-6 * mag + 1e-30))
                  ADD_FAILURE() << "[" << m << ", " << n << "]: got " << got << ", want " << want, ++bad;
              }
            ++seed;
          }
}

// The dot-product layouts' sizes: 4-bit values half a byte a weight, 8-bit ones a byte (blocks
// padded to 8 rows), 8 bytes of scale and zero point per block and column; an empty B refused.
TEST(DequantGemmInt8, PackedSizes) {
  for (ZeroPoints z : {ZeroPoints::Narrow, ZeroPoints::Wide}) {
    const QuantWeights qw = makeWeights(36, 20, true, Scales::Blocked, 12, z, 71);
    avx2::PackedQuantB B;
    avx2::PackedDotB D;
    std::string why;
    ASSERT_TRUE(B.pack(qw.source(), &why)) << why;
    ASSERT_TRUE(D.pack(B, &why)) << why;
    EXPECT_EQ(D.eightBit(), z == ZeroPoints::Wide);
    EXPECT_EQ(D.paddedBlock(), 16);
    // 2 panels x 3 blocks, each 16 columns x 16 rows of weights and 16 x 2 floats.
    const int64_t weightBytes = D.eightBit() ? 16 * 16 : 16 * 16 / 2;
    EXPECT_EQ(D.bytes(), 2 * 3 * (weightBytes + 16 * 2 * 4));
  }
  avx2::PackedQuantB empty;
  avx2::PackedDotB D;
  std::string why;
  EXPECT_FALSE(D.pack(empty, &why));
  EXPECT_NE(why.find("B is empty"), std::string::npos) << why;
}

/// A DequantizeMatMul op case: A [shape], B of `qw`, the scale and zero point in the op's
/// shapes, a bias.
OpCase dequantizeMatMulCase(const QuantWeights& qw, Shape aShape, bool bias, uint32_t seed) {
  OpCase c;
  c.op = "DequantizeMatMul";
  if (qw.blockSize > 0) c.attrs.set("block_size", Attr::ofInt(qw.blockSize));
  const DType qt = qw.isUnsigned ? DType::U8 : DType::I8;
  Tensor B = Tensor::alloc(qt, {qw.K, qw.N});
  std::copy(qw.bytes.begin(), qw.bytes.end(), static_cast<uint8_t*>(B.raw()));
  const int64_t count = (int64_t)qw.scale.size();
  const Shape ps = count == 1 ? Shape{} : qw.blockSize > 0 ? Shape{count / qw.N, qw.N} : Shape{qw.N};
  Tensor s = Tensor::fromVector<float>(ps, qw.scale);
  Tensor z;
  if (!qw.zp.empty()) {
    z = Tensor::alloc(qt, ps);
    std::copy(qw.zpBytes.begin(), qw.zpBytes.end(), static_cast<uint8_t*>(z.raw()));
  }
  Shape y = aShape;
  y.back() = qw.N;
  c.inputs = {randomTensor(aShape, seed), B, s, z,
              bias ? Tensor::fromVector<float>({qw.N}, randomVec(qw.N, seed + 1)) : Tensor()};
  c.constant = {false, true, true, true, true};
  c.outputs = {y};
  return c;
}

Tensor runRef(const OpCase& c) {
  std::unique_ptr<Kernel> k;
  Status st = refRegistry().create("cpu", c.context(), &k);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!k) return Tensor();
  EXPECT_EQ(k->implName(), "ref");
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(t.defined() ? &t : nullptr);
  Tensor y = Tensor::alloc(DType::F32, c.outputs[0]);
  EXPECT_TRUE(k->run(in, {&y}).isOk());
  return y;
}

TEST(DequantizeMatMulKernel, VariantsMatchTheReference) {
  SKIP_WITHOUT_AVX2();
  struct Case {
    Shape a;
    Scales scales;
    ZeroPoints zps;
    bool isUnsigned, bias;
  };
  // 3 rows (the register path only) and 40 (the three timed variants); A 2-D and 3-D.
  for (const Case& k : {Case{{3, 64}, Scales::PerColumn, ZeroPoints::None, false, true},
                        Case{{3, 64}, Scales::Blocked, ZeroPoints::Narrow, true, false},
                        Case{{2, 20, 64}, Scales::Blocked, ZeroPoints::Wide, true, true},
                        Case{{2, 20, 64}, Scales::PerTensor, ZeroPoints::Wide, false, false}}) {
    const QuantWeights qw = makeWeights(64, 72, k.isUnsigned, k.scales, 16, k.zps, 21);
    OpCase c = dequantizeMatMulCase(qw, k.a, k.bias, 22);
    const Tensor want = runRef(c);
    const bool few = numElements(k.a) / k.a.back() <= avx2::dequantGemmRegisterRows();
    for (const char* v : {"", "registers", "panels", "dnnl"}) {
      SCOPED_TRACE(std::string("variant '") + v + "' A " + shapeToString(k.a));
      c.variant = v;
      std::string impl;
      const Tensor got = runOnce(c, &impl);
      expectClose(got, toDouble(want), 1e-5);
      const std::string name = v;
      const char* want = name == "panels" ? "avx2:dequant_gemm_panels"
                         : name == "dnnl" || (name.empty() && !few) ? "dnnl:"
                                                                    : "avx2:dequant_gemm_registers";
      EXPECT_EQ(impl.rfind(want, 0), 0u) << impl;
    }
    // The variants the loader times: one where the register path is the only choice.
    KernelContext ctx = c.context();
    ctx.variant.clear();
    const std::vector<std::string> variants = dnnlRegistry().variants("cpu", ctx);
    EXPECT_EQ(variants.size(), few ? 1u : 3u);
  }
}

// accuracy_level 4: the one variant "int8" at any number of rows, within the error of rounding A
// to 8 bits per block of the f32 reference, on 4-bit and 8-bit weights; at level 0 the f32
// variants as before, and a named int8 variant is an error.
TEST(DequantizeMatMulKernel, AccuracyLevel4QuantizesActivations) {
  if (!avx2::int8DotAvailable()) GTEST_SKIP() << "no AVX2/FMA (or TANDEM_MAX_CPU_ISA caps it)";
  for (Shape a : {Shape{1, 64}, Shape{2, 20, 64}}) {
    SCOPED_TRACE("A " + shapeToString(a));
    const QuantWeights qw = makeWeights(64, 40, true, Scales::Blocked, 32, ZeroPoints::Narrow, 81);
    OpCase c = dequantizeMatMulCase(qw, a, true, 82);
    c.attrs.set("accuracy_level", Attr::ofInt(4));
    KernelContext ctx = c.context();
    EXPECT_EQ(dnnlRegistry().variants("cpu", ctx), std::vector<std::string>{"int8"});
    std::string impl;
    const Tensor got = runOnce(c, &impl);
    EXPECT_EQ(impl.rfind("avx2:dequant_gemm_int8(", 0), 0u) << impl;
    const Tensor want = runRef(c);  // f32 weights, f64 sums
    // |error| <= sum over k of |w| x (half a step of A's block: max |a| / 254), and more than
    // f32 rounding: the quantization happened.
    const float* A = c.inputs[0].data<float>();
    const int64_t rows = numElements(a) / 64;
    double worst = 0;
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t n = 0; n < 40; ++n) {
        double bound = 1e-6;
        for (int64_t b = 0; b < 2; ++b) {
          float amax = 0;
          for (int64_t k = 32 * b; k < 32 * b + 32; ++k) amax = std::max(amax, std::fabs(A[m * 64 + k]));
          for (int64_t k = 32 * b; k < 32 * b + 32; ++k) bound += std::fabs(qw.w(k, n)) * amax / 254.0 * 1.01;
        }
        const double e = std::fabs(got.data<float>()[m * 40 + n] - want.data<float>()[m * 40 + n]);
        EXPECT_LE(e, bound) << m << ", " << n;
        worst = std::max(worst, e);
      }
    EXPECT_GT(worst, 1e-5);
    c.attrs.set("accuracy_level", Attr::ofInt(0));
    ctx = c.context();
    EXPECT_NE(dnnlRegistry().variants("cpu", ctx), std::vector<std::string>{"int8"});
    c.variant = "int8";
    std::unique_ptr<Kernel> k;
    const Status st = dnnlRegistry().create("cpu", c.context(), &k);
    EXPECT_FALSE(st.isOk());
    EXPECT_NE(st.message().find("variant int8 needs accuracy_level 4"), std::string::npos) << st.message();
  }
  // 8-bit weights: the same variant, as two 4-bit planes.
  const QuantWeights wide = makeWeights(64, 40, true, Scales::Blocked, 32, ZeroPoints::Wide, 83);
  OpCase c = dequantizeMatMulCase(wide, {3, 64}, false, 84);
  c.attrs.set("accuracy_level", Attr::ofInt(4));
  EXPECT_EQ(dnnlRegistry().variants("cpu", c.context()), std::vector<std::string>{"int8"});
  std::string impl;
  runOnce(c, &impl);
  EXPECT_NE(impl.find("8-bit"), std::string::npos) << impl;
}

TEST(DequantizeMatMulKernel, ReferenceIsDequantizeLinearThenMatMul) {
  const QuantWeights qw = makeWeights(13, 5, true, Scales::Blocked, 4, ZeroPoints::Wide, 31);
  OpCase c = dequantizeMatMulCase(qw, {2, 13}, true, 32);
  const Tensor y = runRef(c);
  const float* a = c.inputs[0].data<float>();
  const float* b = c.inputs[4].data<float>();
  std::vector<double> want(10);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t n = 0; n < 5; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < 13; ++k) acc += (double)a[i * 13 + k] * qw.w(k, n);
      want[i * 5 + n] = float(acc) + b[n];
    }
  expectClose(y, want, 1e-6);
}

TEST(DequantizeMatMulKernel, ErrorsNameTheOperand) {
  const QuantWeights qw = makeWeights(8, 4, false, Scales::PerColumn, 0, ZeroPoints::None, 41);
  OpCase c = dequantizeMatMulCase(qw, {2, 8}, false, 42);
  c.inputs[2] = Tensor::fromVector<float>({3}, {1.f, 1.f, 1.f});  // 4 columns
  std::unique_ptr<Kernel> k;
  Status st = refRegistry().create("cpu", c.context(), &k);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("b_scale must be f32 with 1 or 4 values"), std::string::npos)
      << st.message();
  // A named fast variant on a B that is not a constant is an error, never the reference.
  OpCase d = dequantizeMatMulCase(qw, {2, 8}, false, 43);
  d.constant = {false, false, true, true, true};
  d.variant = "registers";
  EXPECT_FALSE(dnnlSupports(d));
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
