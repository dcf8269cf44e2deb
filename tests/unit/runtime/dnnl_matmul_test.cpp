// oneDNN Gemm and MatMul kernels against naive loops (transposes, alpha/beta, C broadcasting,
// batched broadcasting, 1-D operands).
#include "dnnl_test_util.h"

namespace tandem {
namespace dnnltest {
namespace {

struct GemmSpec {
  int64_t M, K, N;
  bool transA = false, transB = false;
  float alpha = 1.f, beta = 1.f;
  bool setAlphaBeta = false;
  Shape c;  // empty + hasC=false: no C
  bool hasC = false;
  bool constB = true;
};

std::vector<double> naiveGemm(const GemmSpec& s, const Tensor& a, const Tensor& b,
                              const Tensor* c) {
  std::vector<double> y(s.M * s.N);
  const float* A = a.data<float>();
  const float* B = b.data<float>();
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        double av = s.transA ? A[k * s.M + i] : A[i * s.K + k];
        double bv = s.transB ? B[j * s.K + k] : B[k * s.N + j];
        acc += av * bv;
      }
      double cv = 0;
      if (c) {
        const Shape& cs = c->shape();
        int64_t cCols = cs.empty() ? 1 : cs.back();
        int64_t cRows = cs.size() == 2 ? cs[0] : 1;
        cv = c->data<float>()[(cRows == 1 ? 0 : i) * cCols + (cCols == 1 ? 0 : j)];
      }
      y[i * s.N + j] = s.alpha * acc + s.beta * cv;
    }
  return y;
}

void checkGemm(const GemmSpec& s, uint32_t seed) {
  OpCase c;
  c.op = "Gemm";
  if (s.transA) c.attrs.set("transA", Attr::ofInt(1));
  if (s.transB) c.attrs.set("transB", Attr::ofInt(1));
  if (s.setAlphaBeta) {
    c.attrs.set("alpha", Attr::ofFloat(s.alpha));
    c.attrs.set("beta", Attr::ofFloat(s.beta));
  }
  c.inputs = {randomTensor(s.transA ? Shape{s.K, s.M} : Shape{s.M, s.K}, seed),
              randomTensor(s.transB ? Shape{s.N, s.K} : Shape{s.K, s.N}, seed + 1)};
  if (s.hasC) c.inputs.push_back(randomTensor(s.c, seed + 2));
  c.constant = {false, s.constB, true};
  c.outputs = {{s.M, s.N}};
  ASSERT_TRUE(dnnlSupports(c));
  Tensor y = runOnce(c);
  expectClose(y, naiveGemm(s, c.inputs[0], c.inputs[1], s.hasC ? &c.inputs[2] : nullptr));
}

TEST(DnnlGemm, TransBWithBiasRow) {
  // The fully-connected layer: Y = X W^T + b, b of shape [N].
  GemmSpec s{8, 512, 100, false, true};
  s.hasC = true;
  s.c = {100};
  checkGemm(s, 1);
}

TEST(DnnlGemm, TransAAlphaBetaFullC) {
  GemmSpec s{17, 33, 9, true, false};
  s.setAlphaBeta = true;
  s.alpha = 0.5f;
  s.beta = -2.f;
  s.hasC = true;
  s.c = {17, 9};
  checkGemm(s, 2);
}

TEST(DnnlGemm, BothTransposedColumnC) {
  GemmSpec s{6, 10, 7, true, true};
  s.setAlphaBeta = true;
  s.alpha = 2.f;
  s.beta = 0.25f;
  s.hasC = true;
  s.c = {6, 1};
  checkGemm(s, 3);
}

TEST(DnnlGemm, ScalarCAndRuntimeB) {
  GemmSpec s{5, 4, 3};
  s.hasC = true;
  s.c = {};
  s.constB = false;
  checkGemm(s, 4);
  s.c = {1, 1};
  checkGemm(s, 5);
  s.c = {1, 3};
  checkGemm(s, 6);
}

TEST(DnnlGemm, NoC) {
  GemmSpec s{12, 7, 20};
  s.setAlphaBeta = true;
  s.alpha = -1.5f;
  s.beta = 3.f;  // no C: beta has no effect
  checkGemm(s, 7);
}

TEST(DnnlGemm, BetaZeroIgnoresC) {
  GemmSpec s{4, 4, 4};
  s.setAlphaBeta = true;
  s.beta = 0.f;
  s.hasC = true;
  s.c = {4, 4};
  checkGemm(s, 8);
}

TEST(DnnlGemm, HandComputed) {
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]; alpha 2, beta 1, C = [1, -1].
  OpCase c;
  c.op = "Gemm";
  c.attrs.set("alpha", Attr::ofFloat(2.f));
  c.inputs = {Tensor::fromVector<float>({2, 2}, {1, 2, 3, 4}),
              Tensor::fromVector<float>({2, 2}, {5, 6, 7, 8}),
              Tensor::fromVector<float>({2}, {1, -1})};
  c.constant = {false, true, true};
  c.outputs = {{2, 2}};
  expectClose(runOnce(c), {39, 43, 87, 99});
}

TEST(DnnlGemm, ConstantBIsPrepackedAtCreation) {
  // transB weights are transposed into the primitive's layout once; run() ignores input 1.
  GemmSpec s{3, 5, 4, false, true};
  OpCase c;
  c.op = "Gemm";
  c.attrs.set("transB", Attr::ofInt(1));
  c.inputs = {randomTensor({3, 5}, 9), randomTensor({4, 5}, 10)};
  c.constant = {false, true};
  c.outputs = {{3, 4}};
  std::vector<double> want = naiveGemm(s, c.inputs[0], c.inputs[1], nullptr);
  std::unique_ptr<Kernel> k = createKernel(c);
  ASSERT_TRUE(k);
  Tensor b = c.inputs[1];
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = -7.f;
  Tensor y = Tensor::alloc(DType::F32, {3, 4});
  ASSERT_TRUE(k->run({&c.inputs[0], &c.inputs[1]}, {&y}).isOk());
  expectClose(y, want);
}

// ---- MatMul ----

/// numpy matmul of A [.., M, K] and B [.., K, N] with batch broadcasting (ranks >= 2).
std::vector<double> naiveBatchedMatMul(const Tensor& a, Shape as, const Tensor& b, Shape bs,
                                       const Shape& ys) {
  const size_t r = ys.size();
  as.insert(as.begin(), r - as.size(), 1);
  bs.insert(bs.begin(), r - bs.size(), 1);
  const int64_t M = as[r - 2], K = as[r - 1], N = bs[r - 1];
  int64_t batches = numElements(ys) / (M * N);
  std::vector<double> y(numElements(ys));
  for (int64_t bi = 0; bi < batches; ++bi) {
    // Decompose the batch index over ys's batch dims, then map into A and B (size-1 dims: 0).
    int64_t rem = bi, aOff = 0, bOff = 0, aStride = M * K, bStride = K * N;
    for (int64_t d = (int64_t)r - 3; d >= 0; --d) {
      int64_t idx = rem % ys[d];
      rem /= ys[d];
      aOff += (as[d] == 1 ? 0 : idx) * aStride;
      bOff += (bs[d] == 1 ? 0 : idx) * bStride;
      aStride *= as[d];
      bStride *= bs[d];
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += (double)a.data<float>()[aOff + i * K + k] * b.data<float>()[bOff + k * N + j];
        y[bi * M * N + i * N + j] = acc;
      }
  }
  return y;
}

void checkMatMul(const Shape& as, const Shape& bs, const Shape& ys, bool constB, uint32_t seed) {
  OpCase c;
  c.op = "MatMul";
  c.inputs = {randomTensor(as, seed), randomTensor(bs, seed + 1)};
  c.constant = {false, constB};
  c.outputs = {ys};
  ASSERT_TRUE(dnnlSupports(c));
  Tensor y = runOnce(c);
  // 1-D operands: A [K] -> [1, K], B [K] -> [K, 1]; the naive loop works on the padded shapes.
  Shape a2 = as, b2 = bs, y2 = ys;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  size_t r = std::max(a2.size(), b2.size());
  Shape full(r);
  Shape ap = a2, bp = b2;
  ap.insert(ap.begin(), r - ap.size(), 1);
  bp.insert(bp.begin(), r - bp.size(), 1);
  for (size_t i = 0; i + 2 < r; ++i) full[i] = std::max(ap[i], bp[i]);
  full[r - 2] = ap[r - 2];
  full[r - 1] = bp[r - 1];
  expectClose(y, naiveBatchedMatMul(c.inputs[0], a2, c.inputs[1], b2, full));
}

TEST(DnnlMatMul, Plain2D) { checkMatMul({7, 13}, {13, 5}, {7, 5}, false, 1); }

TEST(DnnlMatMul, BatchedBroadcastBothSides) {
  // [2,1,4,8] x [3,8,5] -> [2,3,4,5]: A broadcast over B's batch 3, B over A's batch 2.
  checkMatMul({2, 1, 4, 8}, {3, 8, 5}, {2, 3, 4, 5}, false, 2);
}

TEST(DnnlMatMul, BatchedSameBatch) { checkMatMul({4, 6, 9}, {4, 9, 3}, {4, 6, 3}, false, 3); }

TEST(DnnlMatMul, ConstantSharedWeightsFoldBatch) {
  // Transformer-style projection: [2,5,16] x const [16,24]; computed as one [10,16]x[16,24].
  checkMatMul({2, 5, 16}, {16, 24}, {2, 5, 24}, true, 4);
}

TEST(DnnlMatMul, BroadcastWeightsBatch) {
  checkMatMul({3, 4, 6}, {1, 6, 2}, {3, 4, 2}, true, 5);
}

TEST(DnnlMatMul, OneDOperands) {
  checkMatMul({8}, {8, 3}, {3}, false, 6);        // vector x matrix
  checkMatMul({2, 4, 8}, {8}, {2, 4}, false, 7);  // batched matrix x vector
  checkMatMul({8}, {8}, {}, false, 8);            // dot product -> scalar
}

TEST(DnnlMatMul, RejectsMismatchedInner) {
  OpCase c;
  c.op = "MatMul";
  c.inputs = {randomTensor({2, 3}, 1), randomTensor({4, 5}, 2)};
  c.outputs = {{2, 5}};
  EXPECT_FALSE(dnnlSupports(c));
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
