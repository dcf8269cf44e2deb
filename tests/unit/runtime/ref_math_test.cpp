// Tests of the reference Gemm, MatMul and Det kernels: transposes, alpha/beta, broadcast C, 1-D
// operands, batch broadcasting, empty and zero-K products, multi-threaded runs.
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

// A = [[1,2,3],[4,5,6]], B = [[1,0],[0,1],[1,1]] -> A*B = [[4,5],[10,11]].
Tensor gemmA() { return f32({2, 3}, {1, 2, 3, 4, 5, 6}); }
Tensor gemmB() { return f32({3, 2}, {1, 0, 0, 1, 1, 1}); }

TEST(RefGemm, PlainProduct) {
  expectValues<float>(run1("Gemm", {}, {gemmA(), gemmB()}, DType::F32, {2, 2}), {2, 2},
                      {4, 5, 10, 11});
}

TEST(RefGemm, Transposes) {
  Tensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor bt = f32({2, 3}, {1, 0, 1, 0, 1, 1});
  expectValues<float>(
      run1("Gemm", attrs({{"transA", Attr::ofInt(1)}}), {at, gemmB()}, DType::F32, {2, 2}), {2, 2},
      {4, 5, 10, 11});
  expectValues<float>(
      run1("Gemm", attrs({{"transB", Attr::ofInt(1)}}), {gemmA(), bt}, DType::F32, {2, 2}), {2, 2},
      {4, 5, 10, 11});
  expectValues<float>(run1("Gemm", attrs({{"transA", Attr::ofInt(1)}, {"transB", Attr::ofInt(1)}}),
                           {at, bt}, DType::F32, {2, 2}),
                      {2, 2}, {4, 5, 10, 11});
}

TEST(RefGemm, AlphaBetaAndBroadcastC) {
  AttrMap ab = attrs({{"alpha", Attr::ofFloat(2)}, {"beta", Attr::ofFloat(0.5f)}});
  expectValues<float>(run1("Gemm", ab, {gemmA(), gemmB(), f32({2}, {10, 20})}, DType::F32, {2, 2}),
                      {2, 2}, {13, 20, 25, 32});
  expectValues<float>(run1("Gemm", {}, {gemmA(), gemmB(), f32({2, 1}, {1, 2})}, DType::F32, {2, 2}),
                      {2, 2}, {5, 6, 12, 13});
  expectValues<float>(run1("Gemm", {}, {gemmA(), gemmB(), f32({}, {3})}, DType::F32, {2, 2}),
                      {2, 2}, {7, 8, 13, 14});
  expectValues<float>(
      run1("Gemm", {}, {gemmA(), gemmB(), f32({2, 2}, {1, 2, 3, 4})}, DType::F32, {2, 2}), {2, 2},
      {5, 7, 13, 15});
}

TEST(RefGemm, ZeroInnerDimensionLeavesBetaC) {
  Tensor y =
      run1("Gemm", attrs({{"beta", Attr::ofFloat(2)}}),
           {f32({2, 0}, {}), f32({0, 2}, {}), f32({2, 2}, {1, 2, 3, 4})}, DType::F32, {2, 2});
  expectValues<float>(y, {2, 2}, {2, 4, 6, 8});
}

TEST(RefGemm, IntegerAndDouble) {
  expectValues<int32_t>(
      run1("Gemm", {}, {i32({1, 2}, {3, 4}), i32({2, 1}, {5, 6})}, DType::I32, {1, 1}), {1, 1},
      {39});
  // 1e8 + 1 - 1e8 is 1 in f64 but 0 if the kernel went through f32.
  expectValues<double>(
      run1("Gemm", {}, {f64({1, 3}, {1e8, 1, -1e8}), f64({3, 1}, {1, 1, 1})}, DType::F64, {1, 1}),
      {1, 1}, {1}, 0);
}

TEST(RefGemm, BadCShapeFails) {
  OpCall c{"Gemm", {}, {gemmA(), gemmB(), f32({3}, {1, 2, 3})}, {{DType::F32, {2, 2}}}};
  EXPECT_NE(errorOf(c).find("does not broadcast"), std::string::npos);
}

TEST(RefMatMul, TwoD) {
  expectValues<float>(run1("MatMul", {}, {gemmA(), gemmB()}, DType::F32, {2, 2}), {2, 2},
                      {4, 5, 10, 11});
}

TEST(RefMatMul, OneDOperands) {
  expectValues<float>(run1("MatMul", {}, {f32({3}, {1, 2, 3}), gemmB()}, DType::F32, {2}), {2},
                      {4, 5});
  expectValues<float>(run1("MatMul", {}, {gemmA(), f32({3}, {1, 1, 1})}, DType::F32, {2}), {2},
                      {6, 15});
  expectValues<float>(
      run1("MatMul", {}, {f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})}, DType::F32, {}), {}, {32});
  // A 1-D left operand against a batch of matrices.
  expectValues<float>(
      run1("MatMul", {}, {f32({2}, {1, 1}), f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}, DType::F32,
           {2, 2}),
      {2, 2}, {4, 6, 12, 14});
}

TEST(RefMatMul, BatchBroadcasting) {
  Tensor a = f32({2, 1, 1, 2}, {1, 2, 3, 4});
  Tensor b = f32({3, 2, 1}, {1, 0, 0, 1, 1, 1});
  expectValues<float>(run1("MatMul", {}, {a, b}, DType::F32, {2, 3, 1, 1}), {2, 3, 1, 1},
                      {1, 2, 3, 3, 4, 7});
  // Rank-3 times rank-2: the matrix is shared by every batch.
  expectValues<int64_t>(run1("MatMul", {}, {i64({2, 1, 2}, {1, 2, 3, 4}), i64({2, 1}, {10, 1})},
                             DType::I64, {2, 1, 1}),
                        {2, 1, 1}, {12, 34});
}

TEST(RefMatMul, EmptyAndZeroK) {
  expectValues<float>(run1("MatMul", {}, {f32({0, 3}, {}), gemmB()}, DType::F32, {0, 2}), {0, 2},
                      {});
  expectValues<float>(run1("MatMul", {}, {f32({2, 0}, {}), f32({0, 3}, {})}, DType::F32, {2, 3}),
                      {2, 3}, {0, 0, 0, 0, 0, 0});
}

TEST(RefMatMul, ThreadedMatchesNaive) {
  const int64_t M = 37, K = 29, N = 41;
  std::vector<double> a(M * K), b(K * N), y(M * N, 0);
  for (int64_t i = 0; i < M * K; ++i) a[i] = (i % 7) - 3;
  for (int64_t i = 0; i < K * N; ++i) b[i] = (i % 5) * 0.5;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) y[m * N + n] += a[m * K + k] * b[k * N + n];
  OpCall c{"MatMul", {}, {f64({M, K}, a), f64({K, N}, b)}, {{DType::F64, {M, N}}}};
  c.threads = 2;
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<double>(outs[0], {M, N}, y, 1e-12);
}

TEST(RefMatMul, InnerMismatchFails) {
  OpCall c{"MatMul",
           {},
           {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 2}, {1, 2, 3, 4})},
           {{DType::F32, {2, 2}}}};
  EXPECT_NE(errorOf(c).find("inner dimensions differ"), std::string::npos);
}

TEST(RefDet, PivotsAndBatches) {
  // A zero leading entry needs a row swap, which flips the sign: det [[0,2],[3,4]] = -6.
  expectValues<float>(run1("Det", {}, {f32({2, 2}, {0, 2, 3, 4})}, DType::F32, {}), {}, {-6});
  // det diag(2,3,4) = 24; det [[1,2,3],[0,1,4],[5,6,0]] = 1; a singular matrix gives 0.
  expectValues<double>(run1("Det", {}, {f64({3, 3, 3}, {2, 0, 0, 0, 3, 0, 0, 0, 4,  //
                                                          1, 2, 3, 0, 1, 4, 5, 6, 0,  //
                                                          1, 2, 3, 2, 4, 6, 0, 1, 1})},
                            DType::F64, {3}),
                       {3}, {24, 1, 0}, 1e-12);
}

}  // namespace
}  // namespace tandem
