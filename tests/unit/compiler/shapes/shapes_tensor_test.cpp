// Unit tests of the data-movement shape functions: Flatten, Reshape, Transpose, Squeeze,
// Unsqueeze, Concat, Split, Slice, Gather, EmbeddingBag, Shape, Constant, ConstantOfShape, Expand, Pad, Tile.
#include <limits>

#include "tests/unit/compiler/shapes/shape_test_util.h"

namespace tandem::testing {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(Flatten, Axis) {
  EXPECT_SHAPE(infer("Flatten", {F32({2, 3, 4, 5})}), DType::F32, {2, 60});
  EXPECT_SHAPE(infer("Flatten", {F32({2, 3, 4, 5})}, Attrs({I("axis", 0)})), DType::F32, {1, 120});
  EXPECT_SHAPE(infer("Flatten", {F32({2, 3, 4, 5})}, Attrs({I("axis", 4)})), DType::F32, {120, 1});
  EXPECT_SHAPE(infer("Flatten", {F32({2, 3, 4, 5})}, Attrs({I("axis", -1)})), DType::F32, {24, 5});
  EXPECT_SHAPE(infer("Flatten", {F32({U, 3, 4})}), DType::F32, {U, 12});
  EXPECT_SHAPE(infer("Flatten", {F32({U, 0, 4})}, Attrs({I("axis", 2)})), DType::F32, {0, 4});
  EXPECT_ERR(infer("Flatten", {F32({2, 3})}, Attrs({I("axis", 3)})),
             "Flatten: attribute axis 3 is out of range [-2, 2] for a rank-2 input");
}

TEST(Reshape, ZeroAndMinusOne) {
  EXPECT_SHAPE(infer("Reshape", {F32({2, 3, 4}), Ints({4, 6})}), DType::F32, {4, 6});
  EXPECT_SHAPE(infer("Reshape", {F32({2, 3, 4}), Ints({-1, 2})}), DType::F32, {12, 2});
  EXPECT_SHAPE(infer("Reshape", {F32({2, 3, 4}), Ints({0, -1})}), DType::F32, {2, 12});
  EXPECT_SHAPE(infer("Reshape", {F32({2, 3, 4}), Ints32({2, 0, 4, 1})}), DType::F32, {2, 3, 4, 1});
  // allowzero=1: 0 is a real zero-size dim.
  EXPECT_SHAPE(infer("Reshape", {F32({0, 3, 4}), Ints({3, 4, 0})}, Attrs({I("allowzero", 1)})),
               DType::F32, {3, 4, 0});
  // Unknown batch: copied by 0, and -1 next to it cannot be inferred.
  EXPECT_SHAPE(infer("Reshape", {F32({U, 3, 4}), Ints({0, 12})}), DType::F32, {U, 12});
  EXPECT_SHAPE(infer("Reshape", {F32({U, 3, 4}), Ints({-1, 12})}), DType::F32, {U, 12});
  EXPECT_SHAPE(infer("Reshape", {F32({U, 3, 4}), Ints({0, -1})}), DType::F32, {U, U});
  // An empty shape makes a scalar.
  EXPECT_SHAPE(infer("Reshape", {F32({1, 1}), Ints({})}), DType::F32, {});
}

TEST(Reshape, NonConstantShape) {
  // Rank from the shape operand's length.
  EXPECT_SHAPE(infer("Reshape", {F32({2, 3, 4}), I64({3})}), DType::F32, {U, U, U});
  EXPECT_ERR(infer("Reshape", {F32({2, 3, 4}), I64({U})}),
             "Reshape: input 1 (shape) is not constant and its length is unknown, so the result rank is unknown");
}

TEST(Reshape, Errors) {
  EXPECT_ERR(infer("Reshape", {F32({2, 3, 4}), Ints({5, -1})}),
             "Reshape: cannot reshape data of shape [2,3,4] (24 elements) to [5,-1]");
  EXPECT_ERR(infer("Reshape", {F32({2, 3, 4}), Ints({5, 5})}),
             "Reshape: cannot reshape data of shape [2,3,4] (24 elements) to [5,5] (25 elements)");
  EXPECT_ERR(infer("Reshape", {F32({2, 3, 4}), Ints({-1, -1})}),
             "Reshape: input 1 (shape) [-1,-1] has more than one -1");
  EXPECT_ERR(infer("Reshape", {F32({24}), Ints({2, 0, 12})}),
             "Reshape: input 1 (shape) [2,0,12] has 0 at index 1 but data has only rank 1");
  EXPECT_ERR(infer("Reshape", {F32({2, 3}), Ints({-2, 3})}),
             "Reshape: input 1 (shape) [-2,3] has invalid entry -2");
  EXPECT_ERR(infer("Reshape", {F32({0, 3}), Ints({0, -1})}, Attrs({I("allowzero", 1)})),
             "Reshape: input 1 (shape) [0,-1] has both -1 and 0 with allowzero=1");
  EXPECT_ERR(infer("Reshape", {F32({2, 3}), F32({2})}), "Reshape: input 1 (shape) must be i64 or i32, got f32");
  EXPECT_ERR(infer("Reshape", {F32({2, 3})}), "Reshape expects 2 inputs, got 1");
}

TEST(Transpose, Perm) {
  EXPECT_SHAPE(infer("Transpose", {F32({2, 3, 4})}), DType::F32, {4, 3, 2});
  EXPECT_SHAPE(infer("Transpose", {I64({2, U, 4})}, Attrs({Is("perm", {1, 0, 2})})), DType::I64, {U, 2, 4});
  EXPECT_ERR(infer("Transpose", {F32({2, 3, 4})}, Attrs({Is("perm", {0, 0, 1})})),
             "Transpose: attribute perm [0,0,1] is not a permutation of 0..2");
  EXPECT_ERR(infer("Transpose", {F32({2, 3, 4})}, Attrs({Is("perm", {1, 0})})),
             "Transpose: attribute perm [1,0] has 2 entries but data has rank 3");
}

TEST(Squeeze, AxesInput) {
  EXPECT_SHAPE(infer("Squeeze", {F32({1, 3, 1, 5}), Ints({0, -2})}), DType::F32, {3, 5});
  EXPECT_SHAPE(infer("Squeeze", {F32({1, 3, 1, 5})}), DType::F32, {3, 5});
  // An unknown dim named in axes must be 1 at run time.
  EXPECT_SHAPE(infer("Squeeze", {F32({U, 3}), Ints({0})}), DType::F32, {3});
  EXPECT_ERR(infer("Squeeze", {F32({1, 3}), Ints({1})}),
             "Squeeze: cannot squeeze axis 1 of data shape [1,3]: its size is 3, not 1");
  EXPECT_ERR(infer("Squeeze", {F32({U, 3, 1})}),
             "Squeeze: without axes, dim 0 of data is unknown, so whether it is squeezed (and the result rank) is unknown");
  EXPECT_ERR(infer("Squeeze", {F32({1, 3}), I64({1})}), "Squeeze: input 1 (axes) must be constant");
  EXPECT_ERR(infer("Squeeze", {F32({1, 3}), Ints({2})}),
             "Squeeze: input 1 (axes) value 2 is out of range [-2, 1] for a rank-2 input");
  EXPECT_ERR(infer("Squeeze", {F32({1, 1}), Ints({0, -2})}), "Squeeze: input 1 (axes) value -2 appears twice");
}

TEST(Unsqueeze, AxesIndexTheResult) {
  EXPECT_SHAPE(infer("Unsqueeze", {F32({3, 4}), Ints({0})}), DType::F32, {1, 3, 4});
  EXPECT_SHAPE(infer("Unsqueeze", {F32({3, 4}), Ints({0, 3})}), DType::F32, {1, 3, 4, 1});
  EXPECT_SHAPE(infer("Unsqueeze", {F32({3, 4, 5}), Ints({5, 4, 2})}), DType::F32, {3, 4, 1, 5, 1, 1});
  EXPECT_SHAPE(infer("Unsqueeze", {F32({U}), Ints({-1})}), DType::F32, {U, 1});
  EXPECT_SHAPE(infer("Unsqueeze", {F32({}), Ints({0})}), DType::F32, {1});
  EXPECT_ERR(infer("Unsqueeze", {F32({3}), I64({1})}), "Unsqueeze: input 1 (axes) must be constant");
  EXPECT_ERR(infer("Unsqueeze", {F32({3}), Ints({2})}),
             "Unsqueeze: input 1 (axes) value 2 is out of range [-2, 1] for the rank-2 result");
  EXPECT_ERR(infer("Unsqueeze", {F32({3}), Ints({1, -2})}), "Unsqueeze: input 1 (axes) value -2 appears twice");
  EXPECT_ERR(infer("Unsqueeze", {F32({3})}), "Unsqueeze expects 2 inputs, got 1");
}

TEST(Concat, SumsAlongAxis) {
  EXPECT_SHAPE(infer("Concat", {F32({2, 3}), F32({2, 5}), F32({2, 1})}, Attrs({I("axis", 1)})), DType::F32, {2, 9});
  EXPECT_SHAPE(infer("Concat", {F32({2, 3}), F32({4, 3})}, Attrs({I("axis", -2)})), DType::F32, {6, 3});
  EXPECT_SHAPE(infer("Concat", {F32({U, 3}), F32({2, 3})}, Attrs({I("axis", 0)})), DType::F32, {U, 3});
  // An unknown non-axis dim is resolved by a known one.
  EXPECT_SHAPE(infer("Concat", {F32({U, 3}), F32({2, 3})}, Attrs({I("axis", 1)})), DType::F32, {2, 6});
  EXPECT_SHAPE(infer("Concat", {I64({0}), I64({3})}, Attrs({I("axis", 0)})), DType::I64, {3});
  EXPECT_ERR(infer("Concat", {F32({2, 3}), F32({3, 3})}, Attrs({I("axis", 1)})),
             "Concat: input 1 shape [3,3] differs from input 0 shape [2,3] in dim 0 (only axis 1 may differ)");
  EXPECT_ERR(infer("Concat", {F32({2, 3}), F32({3})}, Attrs({I("axis", 0)})),
             "Concat: input 1 has rank 1 but input 0 has rank 2");
  EXPECT_ERR(infer("Concat", {F32({2}), I64({3})}, Attrs({I("axis", 0)})),
             "Concat: input 1 has dtype i64 but input 0 has f32");
  EXPECT_ERR(infer("Concat", {F32({2})}), "Concat: attribute axis is required");
  EXPECT_ERR(infer("Concat", {}, Attrs({I("axis", 0)})), "Concat expects at least 1 input, got 0");
}

TEST(Split, SplitInput) {
  auto r = infer("Split", {F32({2, 6}), Ints({2, 4})}, Attrs({I("axis", 1)}), 2);
  ASSERT_EQ(r.err, "");
  EXPECT_EQ(r.dims(0), (Dims{2, 2}));
  EXPECT_EQ(r.dims(1), (Dims{2, 4}));
  // Zero-size parts are allowed.
  auto z = infer("Split", {F32({3}), Ints({0, 3, 0})}, Attrs(), 3);
  ASSERT_EQ(z.err, "");
  EXPECT_EQ(z.dims(0), (Dims{0}));
  EXPECT_EQ(z.dims(1), (Dims{3}));
  // Non-constant split: sizes unknown, other dims kept.
  auto u = infer("Split", {F32({4, 6}), I64({2})}, Attrs({I("axis", -1)}), 2);
  ASSERT_EQ(u.err, "");
  EXPECT_EQ(u.dims(1), (Dims{4, U}));
  EXPECT_ERR(infer("Split", {F32({6}), Ints({2, 3})}, Attrs(), 2),
             "Split: input 1 (split) [2,3] sums to 5 but axis 0 has size 6");
  EXPECT_ERR(infer("Split", {F32({6}), Ints({2, 4})}, Attrs(), 3),
             "Split: input 1 (split) has 2 entries but there are 3 results");
}

TEST(Split, EqualParts) {
  auto r = infer("Split", {F32({U, 6})}, Attrs({I("axis", 1)}), 3);
  ASSERT_EQ(r.err, "");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.dims(i), (Dims{U, 2}));
  EXPECT_ERR(infer("Split", {F32({7})}, Attrs(), 3),
             "Split: axis 0 of size 7 cannot be split equally into 3 results");
  // Unknown split axis: parts unknown.
  auto u = infer("Split", {F32({U, 2})}, Attrs(), 2);
  ASSERT_EQ(u.err, "");
  EXPECT_EQ(u.dims(0), (Dims{U, 2}));
  // num_outputs (Split-18): ceil-sized chunks, the last one smaller.
  auto n = infer("Split", {F32({7, 2})}, Attrs({I("num_outputs", 3)}), 3);
  ASSERT_EQ(n.err, "");
  EXPECT_EQ(n.dims(0), (Dims{3, 2}));
  EXPECT_EQ(n.dims(1), (Dims{3, 2}));
  EXPECT_EQ(n.dims(2), (Dims{1, 2}));
  EXPECT_ERR(infer("Split", {F32({6})}, Attrs({I("num_outputs", 2)}), 3),
             "Split: attribute num_outputs=2 but there are 3 results");
  EXPECT_ERR(infer("Split", {F32({6})}, Attrs({I("axis", 1)}), 2),
             "Split: attribute axis 1 is out of range [-1, 0] for a rank-1 input");
}

TEST(Slice, ClampingRules) {
  // Basic, with explicit axes and steps.
  EXPECT_SHAPE(infer("Slice", {F32({20, 10, 5}), Ints({0, 0}), Ints({3, 10}), Ints({0, 1}), Ints({1, 1})}),
               DType::F32, {3, 10, 5});
  // Default axes are 0..n-1.
  EXPECT_SHAPE(infer("Slice", {F32({20, 10, 5}), Ints({0, 0, 3}), Ints({20, 10, 4})}), DType::F32, {20, 10, 1});
  // Out-of-range ends clamp; INT64_MAX means "to the end".
  EXPECT_SHAPE(infer("Slice", {F32({20, 10, 5}), Ints({1}), Ints({1000}), Ints({1})}), DType::F32, {20, 9, 5});
  EXPECT_SHAPE(infer("Slice", {F32({20, 10, 5}), Ints({1}), Ints({kMax}), Ints({1})}), DType::F32, {20, 9, 5});
  // Out-of-range start gives an empty dim.
  EXPECT_SHAPE(infer("Slice", {F32({20, 10, 5}), Ints({1000}), Ints({1000}), Ints({1})}), DType::F32, {20, 0, 5});
  // Negative starts/ends count from the end.
  EXPECT_SHAPE(infer("Slice", {F32({20, 10, 5}), Ints({0}), Ints({-1}), Ints({1})}), DType::F32, {20, 9, 5});
  EXPECT_SHAPE(infer("Slice", {F32({20, 10, 5}), Ints({-3}), Ints({kMax}), Ints({-1})}), DType::F32, {20, 10, 3});
  // Steps: ceil((end - start) / step).
  EXPECT_SHAPE(infer("Slice", {F32({10}), Ints({1}), Ints({10}), Ints({0}), Ints({3})}), DType::F32, {3});
}

TEST(Slice, NegativeSteps) {
  // test_slice_neg_steps: data (20,10,5), starts (20,10,4), ends (0,0,1), steps (-1,-3,-2) -> (19,3,2).
  EXPECT_SHAPE(infer("Slice", {F32({20, 10, 5}), Ints({20, 10, 4}), Ints({0, 0, 1}), Ints({0, 1, 2}),
                               Ints({-1, -3, -2})}),
               DType::F32, {19, 3, 2});
  // Reverse everything: start INT64_MAX clamps to d-1, end INT64_MIN clamps to -1.
  EXPECT_SHAPE(infer("Slice", {F32({7}), Ints({kMax}), Ints({kMin}), Ints({0}), Ints({-1})}), DType::F32, {7});
  EXPECT_SHAPE(infer("Slice", {F32({7}), Ints({-1}), Ints({kMin}), Ints({0}), Ints({kMin})}), DType::F32, {1});
  EXPECT_SHAPE(infer("Slice", {F32({0}), Ints({-1}), Ints({kMin}), Ints({0}), Ints({-1})}), DType::F32, {0});
}

TEST(Slice, UnknownValuesAndDims) {
  EXPECT_SHAPE(infer("Slice", {F32({U, 10}), Ints({0}), Ints({5}), Ints({1})}), DType::F32, {U, 5});
  EXPECT_SHAPE(infer("Slice", {F32({U, 10}), Ints({0}), Ints({5}), Ints({0})}), DType::F32, {U, 10});
  // Non-constant starts: the sliced axes become unknown, the others stay.
  EXPECT_SHAPE(infer("Slice", {F32({4, 10}), I64({1}), Ints({5}), Ints({1})}), DType::F32, {4, U});
  // Non-constant axes: every dim may change.
  EXPECT_SHAPE(infer("Slice", {F32({4, 10}), Ints({1}), Ints({5}), I64({1})}), DType::F32, {U, U});
}

TEST(Slice, Errors) {
  EXPECT_ERR(infer("Slice", {F32({4, 10}), Ints({0, 0}), Ints({1})}),
             "Slice: input 2 (ends) has 1 entries but input 1 (starts) has 2");
  EXPECT_ERR(infer("Slice", {F32({4, 10}), Ints({0}), Ints({1}), Ints({0}), Ints({0})}),
             "Slice: input 4 (steps) [0] has a zero step");
  EXPECT_ERR(infer("Slice", {F32({4, 10}), Ints({0, 0}), Ints({1, 1}), Ints({1, -1})}),
             "Slice: input 3 (axes) value -1 appears twice");
  EXPECT_ERR(infer("Slice", {F32({4, 10}), Ints({0}), Ints({1}), Ints({2})}),
             "Slice: input 3 (axes) value 2 is out of range [-2, 1] for a rank-2 input");
  EXPECT_ERR(infer("Slice", {F32({4}), Ints({0, 0}), Ints({1, 1})}),
             "Slice: input 1 (starts) has 2 entries but data has rank 1");
  EXPECT_ERR(infer("Slice", {F32({4}), Ints({0})}), "Slice expects 3 to 5 inputs, got 2");
}

TEST(Gather, Shapes) {
  EXPECT_SHAPE(infer("Gather", {F32({5, 4, 3}), I64({2, 6})}), DType::F32, {2, 6, 4, 3});
  EXPECT_SHAPE(infer("Gather", {F32({5, 4, 3}), T(DType::I32, {7})}, Attrs({I("axis", 1)})), DType::F32, {5, 7, 3});
  EXPECT_SHAPE(infer("Gather", {F32({5, 4, 3}), I64({})}, Attrs({I("axis", -1)})), DType::F32, {5, 4});
  EXPECT_SHAPE(infer("Gather", {I64({U, 4}), I64({U})}), DType::I64, {U, 4});
  // Constant indices are range-checked; negatives count from the end.
  EXPECT_SHAPE(infer("Gather", {F32({5, 4}), Ints({-5, 4})}), DType::F32, {2, 4});
  EXPECT_ERR(infer("Gather", {F32({5, 4}), Ints({0, 5})}),
             "Gather: input 1 (indices) has value 5 out of range [-5, 4] for axis 0 of size 5");
  EXPECT_ERR(infer("Gather", {F32({5, 4}), F32({1})}),
             "Gather: input 1 (indices) has dtype f32 but must be one of i32, i64");
  EXPECT_ERR(infer("Gather", {F32({5, 4}), I64({1})}, Attrs({I("axis", 2)})),
             "Gather: attribute axis 2 is out of range [-2, 1] for a rank-2 input");
}

TEST(EmbeddingBag, Shapes) {
  const OperandInfo w = F32({50, 8});
  EXPECT_SHAPE(infer("EmbeddingBag", {w, I64({80}), I64({40}), I64({40})}), DType::F32, {40, 8});
  EXPECT_SHAPE(infer("EmbeddingBag", {T(DType::F64, {50, 8}), T(DType::I32, {U}), I64({U}), I64({7}), T(DType::F64, {U})},
                     Attrs({S("mode", "max")})),
               DType::F64, {7, 8});
  EXPECT_SHAPE(infer("EmbeddingBag", {w, I64({80}), I64({U}), I64({U})}), DType::F32, {U, 8});
  EXPECT_ERR(infer("EmbeddingBag", {w, I64({80}), I64({40}), I64({39})}),
             "EmbeddingBag: starts [40] and ends [39] must have one length (the bags)");
  EXPECT_ERR(infer("EmbeddingBag", {F32({50}), I64({80}), I64({40}), I64({40})}),
             "EmbeddingBag: weight must be [V, D], got [50]");
  EXPECT_ERR(infer("EmbeddingBag", {w, I64({80}), I64({40}), I64({40})}, Attrs({S("mode", "min")})),
             "EmbeddingBag: attribute mode must be sum, mean or max, got 'min'");
  EXPECT_ERR(infer("EmbeddingBag", {w, I64({80}), I64({40}), I64({40}), F32({79})}),
             "EmbeddingBag: per_sample_weights must be [L] as indices [80], got [79]");
  EXPECT_ERR(infer("EmbeddingBag", {w, I64({80, 1}), I64({40}), I64({40})}),
             "EmbeddingBag: input 1 (indices) must be 1-D, got [80,1]");
}

TEST(Shape, StartEnd) {
  EXPECT_SHAPE(infer("Shape", {F32({3, 4, 5})}), DType::I64, {3});
  EXPECT_SHAPE(infer("Shape", {T(DType::Bool, {U, 4, 5})}, Attrs({I("start", 1)})), DType::I64, {2});
  EXPECT_SHAPE(infer("Shape", {F32({3, 4, 5})}, Attrs({I("end", -1)})), DType::I64, {2});
  EXPECT_SHAPE(infer("Shape", {F32({3, 4, 5})}, Attrs({I("start", -10), I("end", 10)})), DType::I64, {3});
  EXPECT_SHAPE(infer("Shape", {F32({3, 4, 5})}, Attrs({I("start", 2), I("end", 1)})), DType::I64, {0});
  EXPECT_SHAPE(infer("Shape", {F32({})}), DType::I64, {0});
}

TEST(Constant, ValueAttributes) {
  Tensor t = Tensor::fromVector<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_SHAPE(infer("Constant", {}, Attrs({{"value", Attr::ofTensor(t)}})), DType::I32, {2, 3});
  EXPECT_SHAPE(infer("Constant", {}, Attrs({{"value_float", Attr::ofFloat(1.5f)}})), DType::F32, {});
  EXPECT_SHAPE(infer("Constant", {}, Attrs({{"value_floats", Attr::ofFloats({1, 2, 3})}})), DType::F32, {3});
  EXPECT_SHAPE(infer("Constant", {}, Attrs({I("value_int", 4)})), DType::I64, {});
  EXPECT_SHAPE(infer("Constant", {}, Attrs({Is("value_ints", {4, 5})})), DType::I64, {2});
  EXPECT_ERR(infer("Constant", {}), "Constant: exactly one of the value* attributes must be given, got 0");
  EXPECT_ERR(infer("Constant", {}, Attrs({I("value_int", 4), Is("value_ints", {4})})),
             "Constant: exactly one of the value* attributes must be given, got 2");
  EXPECT_ERR(infer("Constant", {}, Attrs({S("value_string", "x")})),
             "Constant: attribute value_string is not supported (no string or sparse tensors)");
  EXPECT_ERR(infer("Constant", {F32({1})}, Attrs({I("value_int", 4)})), "Constant expects 0 inputs, got 1");
}

TEST(ConstantOfShape, ShapeFromValue) {
  EXPECT_SHAPE(infer("ConstantOfShape", {Ints({4, 3, 2})}), DType::F32, {4, 3, 2});
  Tensor one = Tensor::fromVector<int32_t>({1}, {7});
  EXPECT_SHAPE(infer("ConstantOfShape", {Ints({0})}, Attrs({{"value", Attr::ofTensor(one)}})), DType::I32, {0});
  EXPECT_SHAPE(infer("ConstantOfShape", {Ints({})}), DType::F32, {});
  EXPECT_SHAPE(infer("ConstantOfShape", {I64({2})}), DType::F32, {U, U});
  EXPECT_ERR(infer("ConstantOfShape", {Ints({2, -1})}), "ConstantOfShape: input 0 (input) [2,-1] has a negative dim");
  Tensor two = Tensor::fromVector<int32_t>({2}, {7, 8});
  EXPECT_ERR(infer("ConstantOfShape", {Ints({2})}, Attrs({{"value", Attr::ofTensor(two)}})),
             "ConstantOfShape: attribute value must be a one-element tensor");
}

TEST(Expand, BidirectionalBroadcast) {
  EXPECT_SHAPE(infer("Expand", {F32({3, 1}), Ints({2, 1, 6})}), DType::F32, {2, 3, 6});
  // A shape entry of 1 keeps the larger input dim (test_expand_dim_unchanged).
  EXPECT_SHAPE(infer("Expand", {F32({3, 1}), Ints({3, 4})}), DType::F32, {3, 4});
  EXPECT_SHAPE(infer("Expand", {F32({3, 4}), Ints({1, 1})}), DType::F32, {3, 4});
  EXPECT_SHAPE(infer("Expand", {F32({U, 1}), Ints({1, 5})}), DType::F32, {U, 5});
  // Non-constant shape: the rank is max(rank, len); known input dims other than 1 survive.
  EXPECT_SHAPE(infer("Expand", {F32({3, 1}), I64({3})}), DType::F32, {U, 3, U});
  EXPECT_ERR(infer("Expand", {F32({3, 2}), Ints({4, 4})}),
             "Expand: input 0 (input) shape [3,2] and input 1 (shape) value shape [4,4] are not broadcastable (dim 3 vs 4)");
  EXPECT_ERR(infer("Expand", {F32({3}), Ints({-1})}), "Expand: input 1 (shape) [-1] has a negative dim");
}

TEST(Pad, Modes) {
  EXPECT_SHAPE(infer("Pad", {F32({1, 3, 4, 5}), Ints({0, 0, 1, 3, 0, 0, 2, 4})}), DType::F32, {1, 3, 7, 12});
  EXPECT_SHAPE(infer("Pad", {F32({3, 4}), Ints({0, 2, 0, 0}), F32({})}, Attrs({S("mode", "reflect")})),
               DType::F32, {3, 6});
  // Negative pads crop.
  EXPECT_SHAPE(infer("Pad", {I64({3, 4}), Ints({-1, 0, -1, 1})}, Attrs({S("mode", "edge")})), DType::I64, {1, 5});
  EXPECT_SHAPE(infer("Pad", {F32({U, 4}), Ints({1, 1, 1, 1})}), DType::F32, {U, 6});
  EXPECT_SHAPE(infer("Pad", {F32({2, 4}), I64({4})}), DType::F32, {U, U});
  EXPECT_ERR(infer("Pad", {F32({3, 4}), Ints({1, 1})}),
             "Pad: input 1 (pads) has 2 entries but data of rank 2 needs 4");
  EXPECT_SHAPE(infer("Pad", {F32({3, 4}), Ints({1, 0, 2, 3})}, Attrs({S("mode", "wrap")})),
               DType::F32, {6, 7});  // Pad-19
  EXPECT_ERR(infer("Pad", {F32({3, 4}), Ints({0, 0, 0, 0})}, Attrs({S("mode", "circular")})),
             "Pad: attribute mode='circular' is not one of constant, reflect, edge, wrap");
  EXPECT_ERR(infer("Pad", {F32({3, 4}), Ints({-2, 0, -2, 0})}),
             "Pad: input 1 (pads) [-2,0,-2,0] crops dim 0 of size 3 to a negative size");
  EXPECT_ERR(infer("Pad", {F32({3, 4}), Ints({0, 0, 0, 0}), I64({})}),
             "Pad: input 2 (constant_value) has dtype i64 but input 0 (data) has f32");
  EXPECT_ERR(infer("Pad", {F32({0, 4}), Ints({1, 0, 0, 0})}, Attrs({S("mode", "edge")})),
             "Pad: mode 'edge' cannot pad dim 0, which has size 0");
}

TEST(Tile, Repeats) {
  EXPECT_SHAPE(infer("Tile", {F32({2, 3}), Ints({3, 2})}), DType::F32, {6, 6});
  EXPECT_SHAPE(infer("Tile", {F32({U, 3}), Ints({2, 0})}), DType::F32, {U, 0});
  EXPECT_SHAPE(infer("Tile", {F32({2, 3}), I64({2})}), DType::F32, {U, U});
  EXPECT_ERR(infer("Tile", {F32({2, 3}), Ints({2})}), "Tile: input 1 (repeats) has 1 entries but input has rank 2");
  EXPECT_ERR(infer("Tile", {F32({2, 3}), Ints({2, -1})}), "Tile: input 1 (repeats) [2,-1] has a negative entry");
}

}  // namespace
}  // namespace tandem::testing
