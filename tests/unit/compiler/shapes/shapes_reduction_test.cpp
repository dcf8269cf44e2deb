// Unit tests of the Reduce* and ArgMax shape functions.
#include "tests/unit/compiler/shapes/shape_test_util.h"

namespace tandem::testing {
namespace {

TEST(Reduce, AxesAttribute) {
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin"}) {
    SCOPED_TRACE(op);
    EXPECT_SHAPE(infer(op, {F32({2, 3, 4})}, Attrs({Is("axes", {1})})), DType::F32, {2, 1, 4});
    EXPECT_SHAPE(infer(op, {F32({2, 3, 4})}, Attrs({Is("axes", {-1, 0}), I("keepdims", 0)})), DType::F32, {3});
    // No axes: everything reduced.
    EXPECT_SHAPE(infer(op, {I64({2, 3, 4})}), DType::I64, {1, 1, 1});
    EXPECT_SHAPE(infer(op, {F32({2, 3, 4})}, Attrs({I("keepdims", 0)})), DType::F32, {});
    EXPECT_SHAPE(infer(op, {F32({U, 3, U})}, Attrs({Is("axes", {1})})), DType::F32, {U, 1, U});
    EXPECT_ERR(infer(op, {F32({2, 3})}, Attrs({Is("axes", {2})})),
               std::string(op) + ": attribute axes value 2 is out of range [-2, 1] for a rank-2 input");
    EXPECT_ERR(infer(op, {F32({2, 3})}, Attrs({Is("axes", {1, -1})})),
               std::string(op) + ": axis -1 appears twice in axes");
    EXPECT_ERR(infer(op, {F32({2, 3}), Ints({1})}), std::string(op) + " expects 1 input, got 2");
    EXPECT_ERR_HAS(infer(op, {T(DType::Bool, {2})}), "has dtype bool");
  }
}

TEST(ReduceSum, AxesInput) {
  EXPECT_SHAPE(infer("ReduceSum", {F32({3, 2, 2}), Ints({1})}), DType::F32, {3, 1, 2});
  EXPECT_SHAPE(infer("ReduceSum", {F32({3, 2, 2}), Ints32({-2})}, Attrs({I("keepdims", 0)})), DType::F32, {3, 2});
  EXPECT_SHAPE(infer("ReduceSum", {F32({3, 2, 2})}), DType::F32, {1, 1, 1});
  EXPECT_SHAPE(infer("ReduceSum", {F32({3, 2, 2}), Ints({})}, Attrs({I("keepdims", 0)})), DType::F32, {});
  // noop_with_empty_axes: empty (or absent) axes leave the input as it is.
  EXPECT_SHAPE(infer("ReduceSum", {F32({3, 2, 2}), Ints({})}, Attrs({I("noop_with_empty_axes", 1)})),
               DType::F32, {3, 2, 2});
  EXPECT_SHAPE(infer("ReduceSum", {F32({3, 2, 2})}, Attrs({I("noop_with_empty_axes", 1), I("keepdims", 0)})),
               DType::F32, {3, 2, 2});
  // Zero-size dims reduce fine.
  EXPECT_SHAPE(infer("ReduceSum", {F32({0, 4}), Ints({0})}), DType::F32, {1, 4});
}

TEST(ReduceSum, NonConstantAxes) {
  // keepdims: rank kept, dims unknown.
  EXPECT_SHAPE(infer("ReduceSum", {F32({3, 2, 2}), I64({2})}), DType::F32, {U, U, U});
  // keepdims=0: rank from the axes operand's length.
  EXPECT_SHAPE(infer("ReduceSum", {F32({3, 2, 2}), I64({2})}, Attrs({I("keepdims", 0)})), DType::F32, {U});
  EXPECT_ERR(infer("ReduceSum", {F32({3, 2, 2}), I64({U})}, Attrs({I("keepdims", 0)})),
             "ReduceSum: input 1 (axes) is not constant and its length is unknown, so with keepdims=0 the result rank is unknown");
  EXPECT_ERR(infer("ReduceSum", {F32({3}), F32({1})}), "ReduceSum: input 1 (axes) must be i64 or i32, got f32");
  EXPECT_ERR(infer("ReduceSum", {F32({3}), I64({1, 1})}), "ReduceSum: input 1 (axes) must be 1-D, got shape [1,1]");
}

TEST(ArgMax, KeepdimsAndAxis) {
  EXPECT_SHAPE(infer("ArgMax", {F32({2, 3, 4})}), DType::I64, {1, 3, 4});
  EXPECT_SHAPE(infer("ArgMax", {F32({2, 3, 4})}, Attrs({I("axis", -1), I("keepdims", 0)})), DType::I64, {2, 3});
  EXPECT_SHAPE(infer("ArgMax", {T(DType::I32, {U, 5})}, Attrs({I("axis", 1), I("select_last_index", 1)})),
               DType::I64, {U, 1});
  EXPECT_ERR(infer("ArgMax", {F32({2, 3})}, Attrs({I("axis", -3)})),
             "ArgMax: attribute axis -3 is out of range [-2, 1] for a rank-2 input");
  EXPECT_ERR(infer("ArgMax", {F32({0, 3})}), "ArgMax: cannot take ArgMax over axis 0 of size 0");
  EXPECT_ERR(infer("ArgMax", {F32({})}), "ArgMax: attribute axis 0 is invalid for a rank-0 input");
}

}  // namespace
}  // namespace tandem::testing
