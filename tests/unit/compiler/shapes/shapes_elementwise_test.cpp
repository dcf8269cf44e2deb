// Unit tests of the elementwise shape functions: broadcasting, dtype rules, Cast, Where, Clip,
// Dropout, PRelu, activations.
#include "tests/unit/compiler/shapes/shape_test_util.h"

namespace tandem::testing {
namespace {

TEST(BroadcastShapes, NumpyRules) {
  Dims out;
  EXPECT_EQ(broadcastShapes({2, 3, 4}, {4}, &out), "");
  EXPECT_EQ(out, (Dims{2, 3, 4}));
  EXPECT_EQ(broadcastShapes({1, 3, 1}, {5, 1, 7}, &out), "");
  EXPECT_EQ(out, (Dims{5, 3, 7}));
  EXPECT_EQ(broadcastShapes({}, {2, 2}, &out), "");
  EXPECT_EQ(out, (Dims{2, 2}));
  EXPECT_EQ(broadcastShapes({0, 1}, {1, 5}, &out), "");
  EXPECT_EQ(out, (Dims{0, 5}));
  EXPECT_EQ(broadcastShapes({2, 3}, {4}, &out),
            "first shape [2,3] and second shape [4] are not broadcastable (dim 3 vs 4)");
}

TEST(BroadcastShapes, UnknownDims) {
  Dims out;
  // Unknown vs 1 stays unknown; unknown vs known > 1 must be that value (or an error at run time).
  EXPECT_EQ(broadcastShapes({U, 3}, {1, 3}, &out), "");
  EXPECT_EQ(out, (Dims{U, 3}));
  EXPECT_EQ(broadcastShapes({U, 3}, {7, 1}, &out), "");
  EXPECT_EQ(out, (Dims{7, 3}));
  EXPECT_EQ(broadcastShapes({U}, {U}, &out), "");
  EXPECT_EQ(out, (Dims{U}));
  // Known dims are still checked next to unknown ones.
  EXPECT_NE(broadcastShapes({U, 3}, {U, 4}, &out), "");
}

TEST(BinaryArith, BroadcastsAndKeepsDType) {
  EXPECT_SHAPE(infer("Add", {F32({2, 1, 4}), F32({3, 1})}), DType::F32, {2, 3, 4});
  EXPECT_SHAPE(infer("Sub", {I64({5}), I64({})}), DType::I64, {5});
  EXPECT_SHAPE(infer("Mul", {T(DType::U8, {2, 3}), T(DType::U8, {2, 3})}), DType::U8, {2, 3});
  EXPECT_SHAPE(infer("Div", {F32({U, 8}), F32({8})}), DType::F32, {U, 8});
  EXPECT_SHAPE(infer("Add", {F32({0, 3}), F32({1, 3})}), DType::F32, {0, 3});
}

TEST(BinaryArith, Errors) {
  EXPECT_ERR(infer("Add", {F32({2}), I64({2})}), "Add: input 1 (B) has dtype i64 but input 0 (A) has f32");
  EXPECT_ERR(infer("Add", {F32({2, 3}), F32({4})}),
             "Add: input 0 (A) shape [2,3] and input 1 (B) shape [4] are not broadcastable (dim 3 vs 4)");
  EXPECT_ERR(infer("Mul", {F32({2})}), "Mul expects 2 inputs, got 1");
  EXPECT_ERR(infer("Mul", {F32({2}), F32({2})}, Attrs(), 2), "Mul expects 1 result, got 2");
  EXPECT_ERR(infer("Add", {T(DType::Bool, {2}), T(DType::Bool, {2})}),
             "Add: input 0 (A) has dtype bool but must be one of f32, f64, i32, i64, u8, i8, u16, i16, u32, u64");
  EXPECT_ERR(infer("Add", {F32({2}), Absent()}), "Add expects 2 inputs, got 1");
  OperandInfo undefined;
  undefined.dims = {2};
  EXPECT_ERR(infer("Add", {F32({2}), undefined}), "Add: input 1 (B) has an undefined dtype");
  EXPECT_ERR(infer("Add", {F32({2}), F32({-5})}), "Add: input 1 (B) has invalid dim -5");
}

TEST(Pow, ResultHasBaseDType) {
  EXPECT_SHAPE(infer("Pow", {F32({2, 3}), I64({3})}), DType::F32, {2, 3});
  EXPECT_SHAPE(infer("Pow", {I64({4}), F32({})}), DType::I64, {4});
  EXPECT_SHAPE(infer("Pow", {T(DType::I32, {1}), T(DType::I32, {5})}), DType::I32, {5});
  EXPECT_ERR_HAS(infer("Pow", {T(DType::U8, {2}), F32({2})}), "input 0 (X) has dtype u8");
  EXPECT_ERR_HAS(infer("Pow", {F32({2}), F32({3})}), "not broadcastable");
}

TEST(Variadic, SumMinMax) {
  EXPECT_SHAPE(infer("Sum", {F32({3}), F32({2, 1}), F32({1, 1, 1})}), DType::F32, {1, 2, 3});
  EXPECT_SHAPE(infer("Max", {I64({4})}), DType::I64, {4});
  EXPECT_SHAPE(infer("Min", {T(DType::I32, {U, 2}), T(DType::I32, {5, 1})}), DType::I32, {5, 2});
  EXPECT_ERR(infer("Sum", {}), "Sum expects at least 1 input, got 0");
  EXPECT_ERR(infer("Sum", {I64({2}), I64({2})}),
             "Sum: input 0 has dtype i64 but must be one of f32, f64");
  EXPECT_ERR(infer("Max", {F32({2}), F32({2}), F64({2})}),
             "Max: input 2 has dtype f64 but input 0 has f32");
  EXPECT_ERR_HAS(infer("Min", {F32({2}), F32({3}), F32({2})}), "not broadcastable");
  EXPECT_ERR_HAS(infer("Max", {F32({2}), F32({2}), F32({3})}),
                 "the broadcast of inputs before it shape [2] and input 2 shape [3]");
}

TEST(Compare, ResultIsBool) {
  EXPECT_SHAPE(infer("Equal", {I64({3, 1}), I64({4})}), DType::Bool, {3, 4});
  EXPECT_SHAPE(infer("Equal", {T(DType::Bool, {2}), T(DType::Bool, {2})}), DType::Bool, {2});
  EXPECT_SHAPE(infer("Less", {F32({U}), F32({1})}), DType::Bool, {U});
  EXPECT_SHAPE(infer("Greater", {F64({2, 2}), F64({})}), DType::Bool, {2, 2});
  EXPECT_ERR(infer("Less", {T(DType::Bool, {2}), T(DType::Bool, {2})}),
             "Less: input 0 (A) has dtype bool but must be one of f32, f64, i32, i64, u8, i8, u16, i16, u32, u64");
  EXPECT_ERR(infer("Greater", {F32({2}), I64({2})}),
             "Greater: input 1 (B) has dtype i64 but input 0 (A) has f32");
}

TEST(Where, ThreeWayBroadcast) {
  EXPECT_SHAPE(infer("Where", {T(DType::Bool, {2, 1, 1}), F32({3, 1}), F32({4})}), DType::F32,
               {2, 3, 4});
  EXPECT_SHAPE(infer("Where", {T(DType::Bool, {}), I64({U}), I64({1})}), DType::I64, {U});
  EXPECT_ERR(infer("Where", {F32({2}), F32({2}), F32({2})}),
             "Where: input 0 (condition) has dtype f32 but must be one of bool");
  EXPECT_ERR(infer("Where", {T(DType::Bool, {2}), F32({2}), I64({2})}),
             "Where: input 2 (Y) has dtype i64 but input 1 (X) has f32");
  EXPECT_ERR_HAS(infer("Where", {T(DType::Bool, {2}), F32({2}), F32({3})}), "not broadcastable");
}

TEST(Unary, FloatOnlyOps) {
  for (const char* op : {"Sqrt", "Exp", "Log", "Reciprocal", "Sigmoid", "Tanh", "Softplus", "Elu",
                         "Selu", "HardSigmoid", "LeakyRelu"}) {
    SCOPED_TRACE(op);
    EXPECT_SHAPE(infer(op, {F64({U, 3})}), DType::F64, {U, 3});
    EXPECT_ERR(infer(op, {I64({3})}),
               std::string(op) + ": input 0 (X) has dtype i64 but must be one of f32, f64");
    EXPECT_ERR(infer(op, {F32({3}), F32({3})}), std::string(op) + " expects 1 input, got 2");
  }
}

TEST(Unary, NumericAndSignedOps) {
  EXPECT_SHAPE(infer("Abs", {T(DType::U8, {2})}), DType::U8, {2});
  EXPECT_SHAPE(infer("Erf", {T(DType::I32, {2})}), DType::I32, {2});
  EXPECT_SHAPE(infer("Neg", {T(DType::I8, {})}), DType::I8, {});
  EXPECT_SHAPE(infer("Relu", {F32({1, 0, 3})}), DType::F32, {1, 0, 3});
  EXPECT_ERR(infer("Neg", {T(DType::U8, {2})}),
             "Neg: input 0 (X) has dtype u8 but must be one of f32, f64, i32, i64, i8");
  EXPECT_ERR_HAS(infer("Relu", {T(DType::Bool, {2})}), "has dtype bool");
  EXPECT_SHAPE(infer("Identity", {T(DType::Bool, {4, U})}), DType::Bool, {4, U});
}

TEST(PRelu, SlopeBroadcastsToX) {
  EXPECT_SHAPE(infer("PRelu", {F32({1, 3, 4, 4}), F32({3, 1, 1})}), DType::F32, {1, 3, 4, 4});
  EXPECT_SHAPE(infer("PRelu", {F32({2, 5}), F32({5})}), DType::F32, {2, 5});
  EXPECT_ERR(infer("PRelu", {F32({2, 5}), F32({3})}),
             "PRelu: input 1 (slope) shape [3] is not unidirectionally broadcastable to input 0 (X) shape [2,5]");
  // Unidirectional: the slope may not grow X.
  EXPECT_ERR_HAS(infer("PRelu", {F32({5}), F32({2, 5})}), "not unidirectionally broadcastable");
}

TEST(Clip, OptionalBounds) {
  EXPECT_SHAPE(infer("Clip", {F32({2, 3})}), DType::F32, {2, 3});
  EXPECT_SHAPE(infer("Clip", {F32({2, 3}), Absent(), F32({})}), DType::F32, {2, 3});
  EXPECT_SHAPE(infer("Clip", {T(DType::I8, {4}), T(DType::I8, {}), T(DType::I8, {})}), DType::I8, {4});
  EXPECT_ERR(infer("Clip", {F32({2}), F32({2})}), "Clip: input 1 (min) must be a scalar, got shape [2]");
  EXPECT_ERR(infer("Clip", {F32({2}), I64({})}), "Clip: input 1 (min) has dtype i64 but input 0 (input) has f32");
  EXPECT_ERR(infer("Clip", {F32({2}), F32({}), F32({}), F32({})}), "Clip expects 1 to 3 inputs, got 4");
}

TEST(Cast, ToAttribute) {
  EXPECT_SHAPE(infer("Cast", {F32({2, U})}, Attrs({I("to", 7)})), DType::I64, {2, U});
  EXPECT_SHAPE(infer("Cast", {T(DType::Bool, {3})}, Attrs({I("to", 1)})), DType::F32, {3});
  EXPECT_SHAPE(infer("Cast", {I64({})}, Attrs({I("to", 9)})), DType::Bool, {});
  EXPECT_SHAPE(infer("Cast", {I64({})}, Attrs({I("to", 11)})), DType::F64, {});
  EXPECT_ERR(infer("Cast", {F32({2})}), "Cast: attribute 'to' (an integer) is required");
  EXPECT_ERR(infer("Cast", {F32({2})}, Attrs({I("to", 8)})),
             "Cast: attribute to=8 is not a supported ONNX dtype code");
}

TEST(Dropout, OutputAndMask) {
  auto r = infer("Dropout", {F32({2, U}), F32({}), T(DType::Bool, {})}, Attrs(), 2);
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(0), (Dims{2, U}));
  EXPECT_EQ(r.dtype(0), DType::F32);
  EXPECT_EQ(r.dims(1), (Dims{2, U}));
  EXPECT_EQ(r.dtype(1), DType::Bool);
  EXPECT_SHAPE(infer("Dropout", {F64({3})}), DType::F64, {3});
  EXPECT_ERR(infer("Dropout", {F32({3})}, Attrs(), 3), "Dropout expects 1 or 2 results, got 3");
  EXPECT_ERR(infer("Dropout", {F32({3}), F32({1})}),
             "Dropout: input 1 (ratio) must be a scalar, got shape [1]");
  EXPECT_ERR(infer("Dropout", {F32({3}), Absent(), F32({})}),
             "Dropout: input 2 (training_mode) has dtype f32 but must be one of bool");
  // Tandem's input 3, counter: an f32 or i64 scalar.
  EXPECT_SHAPE(infer("Dropout", {F32({3}), F32({}), T(DType::Bool, {}), F32({})}), DType::F32,
               {3});
  EXPECT_SHAPE(infer("Dropout", {F32({3}), F32({}), T(DType::Bool, {}), T(DType::I64, {})}),
               DType::F32, {3});
  EXPECT_ERR(infer("Dropout", {F32({3}), F32({}), T(DType::Bool, {}), F32({1})}),
             "Dropout: input 3 (counter) must be a scalar, got shape [1]");
  EXPECT_ERR(infer("Dropout", {F32({3}), F32({}), T(DType::Bool, {}), T(DType::I32, {})}),
             "Dropout: input 3 (counter) has dtype i32 but must be one of f32, i64");
}

}  // namespace
}  // namespace tandem::testing
