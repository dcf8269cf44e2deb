// Unit tests of the training shape functions: the losses (NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLoss), their gradients and the optimizer updates (Adagrad, Adam, Momentum).
#include "tests/unit/compiler/shapes/shape_test_util.h"

namespace tandem::testing {
namespace {

OperandInfo I32(Dims d) { return T(DType::I32, std::move(d)); }

TEST(Loss, ReductionPicksTheShape) {
  // mean (the default) and sum give a scalar; none gives the labels' shape.
  EXPECT_SHAPE(infer("NegativeLogLikelihoodLoss", {F32({3, 5}), I64({3})}), DType::F32, {});
  EXPECT_SHAPE(infer("NegativeLogLikelihoodLoss", {F64({3, 5, 2, 7}), I32({3, 2, 7}), F64({5})},
                     Attrs({S("reduction", "none")})),
               DType::F64, {3, 2, 7});
  EXPECT_SHAPE(infer("SoftmaxCrossEntropyLoss", {F32({U, 5, 4}), I64({U, 4})},
                     Attrs({S("reduction", "sum"), I("ignore_index", -1)})),
               DType::F32, {});
}

TEST(Loss, SoftmaxCrossEntropyLogProbHasTheScoresShape) {
  auto r = infer("SoftmaxCrossEntropyLoss", {F32({2, 3, 4}), I64({2, 4})},
                 Attrs({S("reduction", "none")}), 2);
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(0), (Dims{2, 4}));
  EXPECT_EQ(r.dims(1), (Dims{2, 3, 4}));
  EXPECT_EQ(r.dtype(1), DType::F32);
  EXPECT_ERR(infer("NegativeLogLikelihoodLoss", {F32({2, 3}), I64({2})}, Attrs(), 2),
             "NegativeLogLikelihoodLoss expects 1 result, got 2");
}

TEST(Loss, Errors) {
  EXPECT_ERR(infer("SoftmaxCrossEntropyLoss", {F32({3}), I64({3})}),
             "SoftmaxCrossEntropyLoss: input 0 (scores) must have rank >= 2 ([N, C, d1, ...]), got [3]");
  EXPECT_ERR(infer("NegativeLogLikelihoodLoss", {F32({3, 5, 2}), I64({3, 5})}),
             "NegativeLogLikelihoodLoss: input 1 (target) shape [3,5] must be input 0 (input) "
             "shape [3,5,2] without dim 1 (C)");
  EXPECT_ERR(infer("NegativeLogLikelihoodLoss", {F32({3, 5}), I64({3}), F32({4})}),
             "NegativeLogLikelihoodLoss: input 2 (weight) must have shape [C] = [5], got [4]");
  EXPECT_ERR(infer("SoftmaxCrossEntropyLoss", {F32({3, 5}), F32({3})}),
             "SoftmaxCrossEntropyLoss: input 1 (labels) has dtype f32 but must be one of i32, i64");
  EXPECT_ERR(infer("SoftmaxCrossEntropyLoss", {F32({3, 5}), I64({3})}, Attrs({S("reduction", "avg")})),
             "SoftmaxCrossEntropyLoss: attribute reduction='avg' is not one of none, sum, mean");
}

TEST(LossGrad, IsTheScoresShapeAndChecksDY) {
  EXPECT_SHAPE(infer("SoftmaxCrossEntropyLossGrad", {F32({}), F32({2, 3, 4}), I64({2, 4})}),
               DType::F32, {2, 3, 4});
  EXPECT_SHAPE(infer("NegativeLogLikelihoodLossGrad",
                     {F64({2, 4}), F64({2, 3, 4}), I32({2, 4}), F64({3})},
                     Attrs({S("reduction", "none")})),
               DType::F64, {2, 3, 4});
  EXPECT_ERR(infer("SoftmaxCrossEntropyLossGrad", {F32({2}), F32({2, 3}), I64({2})}),
             "SoftmaxCrossEntropyLossGrad: input 0 (dY) shape [2] is not the loss's shape [] (a "
             "scalar) for reduction=mean");
  EXPECT_ERR(infer("SoftmaxCrossEntropyLossGrad", {F32({}), F32({2, 3}), I64({2})},
                   Attrs({S("reduction", "none")})),
             "SoftmaxCrossEntropyLossGrad: input 0 (dY) shape [] is not the loss's shape [2] for "
             "reduction=none");
}

TEST(Optimizer, ResultsAreGroupedLikeTheInputs) {
  // Adam of two tensors: R, T, X1, X2, G1, G2, V1, V2, H1, H2 -> X1', X2', V1', V2', H1', H2'.
  auto r = infer("Adam",
                 {F32({}), I64({}), F64({3}), F64({2, 2}), F64({3}), F64({2, 2}), F64({3}),
                  F64({2, 2}), F64({3}), F64({2, 2})},
                 Attrs(), 6);
  ASSERT_EQ(r.err, "");
  for (size_t i : {0, 2, 4}) {
    EXPECT_EQ(r.dims(i), (Dims{3})) << i;
    EXPECT_EQ(r.dims(i + 1), (Dims{2, 2})) << i;
    EXPECT_EQ(r.dtype(i), DType::F64) << i;
  }
  auto a = infer("Adagrad", {F32({}), I64({}), F32({4}), F32({4}), F32({4})}, Attrs(), 2);
  ASSERT_EQ(a.err, "");
  EXPECT_EQ(a.dims(1), (Dims{4}));
}

TEST(Optimizer, Errors) {
  EXPECT_ERR(infer("Adagrad", {F32({}), I64({}), F32({4}), F32({4})}, Attrs(), 2),
             "Adagrad expects 2 + 3*N inputs (R, T, then N of X, G, H), got 4");
  EXPECT_ERR(infer("Adagrad", {F32({}), I64({}), F32({4}), F32({4}), F32({4})}, Attrs(), 3),
             "Adagrad expects 2 results for 1 tensor(s), got 3");
  EXPECT_ERR(infer("Adagrad", {F32({}), I64({}), F32({4}), F32({5}), F32({4})}, Attrs(), 2),
             "Adagrad: input 3 shape [5] differs from input 2 (X1) shape [4]");
  EXPECT_ERR(infer("Adagrad", {F32({1}), I64({}), F32({4}), F32({4}), F32({4})}, Attrs(), 2),
             "Adagrad: input 0 (R) must be a scalar, got shape [1]");
  EXPECT_ERR(infer("Adagrad", {F32({}), T(DType::I32, {}), F32({4}), F32({4}), F32({4})}, Attrs(), 2),
             "Adagrad: input 1 (T) has dtype i32 but must be one of i64");
  EXPECT_ERR(infer("Momentum", {F32({}), I64({}), F32({4}), F32({4}), F32({4})}, Attrs(), 2),
             "Momentum: attribute alpha is required");
}

}  // namespace
}  // namespace tandem::testing
