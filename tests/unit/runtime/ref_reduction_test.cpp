// Tests of the reference reductions: ReduceSum (axes input, noop_with_empty_axes), ReduceMean/
// ReduceMax/ReduceMin/ReduceL1/ReduceProd/ReduceLogSum/ReduceLogSumExp (axes attribute), keepdims,
// negative and empty axes, empty inputs, ArgMax/ArgMin, Hardmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor x23() { return f32({2, 3}, {1, 2, 3, 4, 5, 6}); }

TEST(RefReduceSum, AxesInputAndKeepdims) {
  expectValues<float>(run1("ReduceSum", {}, {x23(), i64({1}, {1})}, DType::F32, {2, 1}), {2, 1},
                      {6, 15});
  expectValues<float>(run1("ReduceSum", attrs({{"keepdims", Attr::ofInt(0)}}),
                           {x23(), i64({1}, {1})}, DType::F32, {2}),
                      {2}, {6, 15});
  expectValues<float>(run1("ReduceSum", {}, {x23(), i64({1}, {-2})}, DType::F32, {1, 3}), {1, 3},
                      {5, 7, 9});
  expectValues<float>(run1("ReduceSum", {}, {x23(), i64({2}, {1, 0})}, DType::F32, {1, 1}), {1, 1},
                      {21});
}

TEST(RefReduceL2AndSumSquare, KnownValues) {
  Tensor x = f32({2, 2}, {3, 4, -1, 2});
  AttrMap last = attrs({{"axes", Attr::ofInts({-1})}, {"keepdims", Attr::ofInt(0)}});
  expectValues<float>(run1("ReduceL2", last, {x}, DType::F32, {2}), {2}, {5, 2.2360680f});
  expectValues<float>(run1("ReduceSumSquare", last, {x}, DType::F32, {2}), {2}, {25, 5});
  // Absent axes: all, kept as 1s.
  expectValues<float>(run1("ReduceSumSquare", {}, {x}, DType::F32, {1, 1}), {1, 1}, {30});
  expectValues<int64_t>(run1("ReduceSumSquare", attrs({{"axes", Attr::ofInts({0})}}),
                             {i64({2, 2}, {1, 2, 3, 4})}, DType::I64, {1, 2}),
                        {1, 2}, {10, 20});
}

TEST(RefReduce, L1ProdLogSumLogSumExp) {
  Tensor x = f32({2, 2}, {3, -4, -1, 2});
  AttrMap last = attrs({{"axes", Attr::ofInts({-1})}, {"keepdims", Attr::ofInt(0)}});
  expectValues<float>(run1("ReduceL1", last, {x}, DType::F32, {2}), {2}, {7, 3});
  expectValues<float>(run1("ReduceProd", last, {x}, DType::F32, {2}), {2}, {-12, -2});
  expectValues<int32_t>(run1("ReduceProd", {}, {i32({3}, {2, -3, 4})}, DType::I32, {1}), {1}, {-24});
  expectValues<float>(run1("ReduceLogSum", {}, {f32({3}, {1, 2, 4})}, DType::F32, {1}), {1},
                      {1.9459101f});
  // log(e^1 + e^2) = 2.3132617; at 1000 a naive sum of e^x overflows.
  expectValues<double>(run1("ReduceLogSumExp", last, {f64({2, 2}, {1, 2, 1000, 1000})}, DType::F64, {2}),
                       {2}, {2.313261687518223, 1000.6931471805599}, 1e-12);
  expectValues<float>(run1("ReduceLogSumExp", {}, {f32({2}, {-kInf, -kInf})}, DType::F32, {1}), {1},
                      {-kInf});
}

TEST(RefReduceSum, EmptyAxes) {
  // Absent axes reduce everything, unless noop_with_empty_axes makes the op an identity.
  expectValues<float>(run1("ReduceSum", {}, {x23()}, DType::F32, {1, 1}), {1, 1}, {21});
  expectValues<float>(run1("ReduceSum", {}, {x23(), i64({0}, {})}, DType::F32, {1, 1}), {1, 1},
                      {21});
  AttrMap noop = attrs({{"noop_with_empty_axes", Attr::ofInt(1)}});
  expectValues<float>(run1("ReduceSum", noop, {x23()}, DType::F32, {2, 3}), {2, 3},
                      {1, 2, 3, 4, 5, 6});
  expectValues<float>(run1("ReduceSum", noop, {x23(), i64({0}, {})}, DType::F32, {2, 3}), {2, 3},
                      {1, 2, 3, 4, 5, 6});
}

TEST(RefReduceSum, ConstantAxesAndIntegers) {
  expectValues<int64_t>(run1("ReduceSum", {}, {i64({2, 2}, {1, 2, 3, 4}), i64({1}, {0})},
                             DType::I64, {1, 2}, /*constInputs=*/true),
                        {1, 2}, {4, 6});
  expectValues<int32_t>(run1("ReduceSum", attrs({{"keepdims", Attr::ofInt(0)}}),
                             {i32({3}, {-1, 5, 7}), i64({1}, {0})}, DType::I32, {}),
                        {}, {11});
}

TEST(RefReduceSum, AccumulatesF32InWiderPrecision) {
  // In f32 arithmetic 2^24 + 1 rounds back to 2^24, twice.
  expectValues<float>(run1("ReduceSum", {}, {f32({3}, {16777216.f, 1, 1})}, DType::F32, {1}), {1},
                      {16777218.f}, 0);
}

TEST(RefReduce, MeanMaxMinWithAxesAttribute) {
  AttrMap a0 = attrs({{"axes", Attr::ofInts({0})}});
  AttrMap a1 = attrs({{"axes", Attr::ofInts({-1})}, {"keepdims", Attr::ofInt(0)}});
  expectValues<float>(run1("ReduceMean", a0, {x23()}, DType::F32, {1, 3}), {1, 3},
                      {2.5f, 3.5f, 4.5f});
  expectValues<float>(run1("ReduceMean", {}, {x23()}, DType::F32, {1, 1}), {1, 1}, {3.5f});
  expectValues<float>(run1("ReduceMax", a1, {x23()}, DType::F32, {2}), {2}, {3, 6});
  expectValues<float>(run1("ReduceMin", a1, {x23()}, DType::F32, {2}), {2}, {1, 4});
  expectValues<int32_t>(run1("ReduceMax", a0, {i32({2, 2}, {-5, 2, -1, -7})}, DType::I32, {1, 2}),
                        {1, 2}, {-1, 2});
  expectValues<int64_t>(run1("ReduceMean", a0, {i64({2, 1}, {3, 4})}, DType::I64, {1, 1}), {1, 1},
                        {3});
}

TEST(RefReduce, MaxPropagatesNaN) {
  expectValues<float>(run1("ReduceMax", {}, {f32({3}, {1, kNaN, 3})}, DType::F32, {1}), {1},
                      {kNaN});
}

TEST(RefReduce, EmptyReductions) {
  Tensor x = f32({2, 0}, {});
  AttrMap a1 = attrs({{"axes", Attr::ofInts({1})}});
  expectValues<float>(run1("ReduceSum", {}, {x, i64({1}, {1})}, DType::F32, {2, 1}), {2, 1},
                      {0, 0});
  expectValues<float>(run1("ReduceMax", a1, {x}, DType::F32, {2, 1}), {2, 1}, {-kInf, -kInf});
  expectValues<float>(run1("ReduceMin", a1, {x}, DType::F32, {2, 1}), {2, 1}, {kInf, kInf});
  expectValues<float>(run1("ReduceMean", a1, {x}, DType::F32, {2, 1}), {2, 1}, {kNaN, kNaN});
  // Reducing the non-empty axis of an empty tensor gives an empty result.
  expectValues<float>(run1("ReduceSum", {}, {x, i64({1}, {0})}, DType::F32, {1, 0}), {1, 0}, {});
}

// f32 Sum, Mean, Max, Min, SumSquare and L2 over every axis set of [3, 5, 1, 19], [2, 37, 9]
// and [3, 4, 5, 11] (rows with and without an 8-lane tail, columns of inner 9 and 19, a unit
// dim inside the block, split blocks around a kept one such as {0, 2, 3} that fold per lead
// slice, and other split blocks such as {1, 3} that take the strided loop), with a NaN
// in one run, against a naive fold in double: the vector fold (avx2::foldAxis, where the host
// has AVX2) must give the scalar reduction's results, sums to within the double-to-f32 rounding.
TEST(RefReduce, EveryAxisSetMatchesANaiveFold) {
  const std::vector<std::string> ops = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                        "ReduceSumSquare", "ReduceL2"};
  for (const Shape& xs : {Shape{3, 5, 1, 19}, Shape{2, 37, 9}, Shape{3, 4, 5, 11}}) {
    const int64_t rank = (int64_t)xs.size(), n = numElements(xs);
    for (bool withNaN : {false, true}) {
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = float((i * 7919) % 101) / 17.f - 2.9f;
      if (withNaN) v[n / 3] = kNaN;
      const Tensor x = f32(xs, v);
      for (int64_t mask = 1; mask < (1 << rank); ++mask) {
        std::vector<int64_t> axes;
        Shape ys = xs;
        for (int64_t d = 0; d < rank; ++d)
          if (mask >> d & 1) {
            axes.push_back(d);
            ys[d] = 1;
          }
        const std::vector<int64_t> st = [&] {
          std::vector<int64_t> r(rank, 0);
          int64_t m = 1;
          for (int64_t d = rank - 1; d >= 0; --d) {
            r[d] = ys[d] == 1 ? 0 : m;
            m *= ys[d];
          }
          return r;
        }();
        const int64_t nOut = numElements(ys);
        for (const std::string& op : ops) {
          SCOPED_TRACE(op + " over " + shapeToString(xs) + " axes mask " + std::to_string(mask) +
                       (withNaN ? " with NaN" : ""));
          std::vector<double> acc(nOut, op == "ReduceMax" ? -INFINITY : op == "ReduceMin" ? INFINITY : 0.0);
          std::vector<bool> nan(nOut, false);
          int64_t count = 1;
          for (int64_t d = 0; d < rank; ++d)
            if (mask >> d & 1) count *= xs[d];
          for (int64_t i = 0; i < n; ++i) {
            int64_t rem = i, o = 0;
            for (int64_t d = rank - 1; d >= 0; --d) {
              o += (rem % xs[d]) * st[d];
              rem /= xs[d];
            }
            const double e = v[i];
            if (std::isnan(v[i])) nan[o] = true;
            if (op == "ReduceMax") acc[o] = std::max(acc[o], e);
            else if (op == "ReduceMin") acc[o] = std::min(acc[o], e);
            else if (op == "ReduceSumSquare" || op == "ReduceL2") acc[o] += e * e;
            else acc[o] += e;
          }
          std::vector<float> want(nOut);
          for (int64_t j = 0; j < nOut; ++j) {
            double w = op == "ReduceMean" ? acc[j] / double(count) : op == "ReduceL2" ? std::sqrt(acc[j]) : acc[j];
            want[j] = nan[j] ? kNaN : float(w);
          }
          Tensor y = run1(op, attrs({{"axes", Attr::ofInts(axes)}}), {x}, DType::F32, ys);
          ASSERT_TRUE(y.defined());
          for (int64_t j = 0; j < nOut; ++j) {
            const float got = y.data<float>()[j];
            if (std::isnan(want[j])) {
              EXPECT_TRUE(std::isnan(got)) << j;
            } else {
              EXPECT_NEAR(got, want[j], 1e-6 * std::max(1.f, std::fabs(want[j]))) << j;
            }
          }
        }
      }
    }
  }
}

TEST(RefReduce, BadAxesFail) {
  OpCall rep{
      "ReduceMean", attrs({{"axes", Attr::ofInts({1, -1})}}), {x23()}, {{DType::F32, {2, 1}}}};
  EXPECT_NE(errorOf(rep).find("repeated"), std::string::npos);
  OpCall range{"ReduceSum", {}, {x23(), i64({1}, {2})}, {{DType::F32, {2, 1}}}};
  EXPECT_NE(errorOf(range).find("out of range"), std::string::npos);
}

TEST(RefArgMax, AxesKeepdimsSelectLast) {
  Tensor x = f32({2, 3}, {1, 3, 3, 5, 2, 5});
  expectValues<int64_t>(run1("ArgMax", attrs({{"axis", Attr::ofInt(1)}}), {x}, DType::I64, {2, 1}),
                        {2, 1}, {1, 0});
  expectValues<int64_t>(
      run1("ArgMax", attrs({{"axis", Attr::ofInt(-1)}, {"select_last_index", Attr::ofInt(1)}}), {x},
           DType::I64, {2, 1}),
      {2, 1}, {2, 2});
  expectValues<int64_t>(run1("ArgMax", {}, {x}, DType::I64, {1, 3}), {1, 3}, {1, 0, 1});
  expectValues<int64_t>(run1("ArgMax", attrs({{"keepdims", Attr::ofInt(0)}}), {x}, DType::I64, {3}),
                        {3}, {1, 0, 1});
}

TEST(RefArgMax, NaNAndIntegers) {
  expectValues<int64_t>(run1("ArgMax", {}, {f32({3}, {1, kNaN, 3})}, DType::I64, {1}), {1}, {1});
  expectValues<int64_t>(run1("ArgMax", {}, {i32({4}, {-3, 7, 7, 1})}, DType::I64, {1}), {1}, {1});
  expectValues<int64_t>(run1("ArgMax", attrs({{"select_last_index", Attr::ofInt(1)}}),
                             {u8({4}, {0, 7, 7, 1})}, DType::I64, {1}),
                        {1}, {2});
}

TEST(RefArgMin, FirstOrLastMinimum) {
  Tensor x = f32({2, 3}, {3, 1, 1, 0, 5, 0});
  expectValues<int64_t>(run1("ArgMin", attrs({{"axis", Attr::ofInt(1)}}), {x}, DType::I64, {2, 1}),
                        {2, 1}, {1, 0});
  expectValues<int64_t>(run1("ArgMin", attrs({{"axis", Attr::ofInt(1)}, {"select_last_index", Attr::ofInt(1)}}),
                             {x}, DType::I64, {2, 1}),
                        {2, 1}, {2, 2});
  expectValues<int64_t>(run1("ArgMin", attrs({{"keepdims", Attr::ofInt(0)}}), {x}, DType::I64, {3}),
                        {3}, {1, 0, 1});
}

TEST(RefHardmax, FirstMaxAlongAxis) {
  Tensor x = f32({2, 3}, {1, 3, 3, 2, 0, 1});
  expectValues<float>(run1("Hardmax", {}, {x}, DType::F32, {2, 3}), {2, 3}, {0, 1, 0, 1, 0, 0});
  expectValues<float>(run1("Hardmax", attrs({{"axis", Attr::ofInt(0)}}), {x}, DType::F32, {2, 3}),
                      {2, 3}, {0, 1, 1, 1, 0, 0});
}

}  // namespace
}  // namespace tandem
