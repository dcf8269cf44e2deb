// Tests of the reference elementwise kernels: unary math/activations, Clip, broadcasting binary
// ops, comparisons, Mod, logic and BitShift, IsNaN/IsInf, Pow with mixed dtypes, variadic
// Min/Max/Sum/Mean, Where, PRelu.
#include <algorithm>
#include <cstring>
#include <limits>

#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(RefUnary, MathFunctions) {
  expectValues<float>(run1("Sqrt", {}, {f32({3}, {4, 9, 0.25f})}, DType::F32, {3}), {3},
                      {2, 3, 0.5f});
  expectValues<float>(run1("Exp", {}, {f32({2}, {0, 1})}, DType::F32, {2}), {2}, {1, 2.718281828f});
  expectValues<double>(run1("Log", {}, {f64({2}, {1, 2.718281828459045})}, DType::F64, {2}), {2},
                       {0, 1}, 1e-12);
  expectValues<float>(run1("Tanh", {}, {f32({2}, {0, 0.5f})}, DType::F32, {2}), {2},
                      {0, 0.46211715726f});
  expectValues<float>(run1("Erf", {}, {f32({3}, {0, 0.5f, -1})}, DType::F32, {3}), {3},
                      {0, 0.52049987781f, -0.84270079295f});
  expectValues<float>(run1("Reciprocal", {}, {f32({2}, {2, -4})}, DType::F32, {2}), {2},
                      {0.5f, -0.25f});
}

// The trigonometric and hyperbolic ops come from the op table's formulas (runtime/core/OpTable.def);
// values from Python's math module, f64 computed in double.
TEST(RefUnary, TrigonometricAndHyperbolic) {
  expectValues<float>(run1("Sin", {}, {f32({2}, {0.5f, -2.0f})}, DType::F32, {2}), {2},
                      {0.479425539f, -0.909297427f});
  expectValues<double>(run1("Sin", {}, {f64({2}, {0.5, -2.0})}, DType::F64, {2}), {2},
                       {0.47942553860420301, -0.90929742682568171}, 1e-14);
  expectValues<float>(run1("Cos", {}, {f32({2}, {0.5f, -2.0f})}, DType::F32, {2}), {2},
                      {0.877582562f, -0.416146837f});
  expectValues<double>(run1("Cos", {}, {f64({2}, {0.5, -2.0})}, DType::F64, {2}), {2},
                       {0.87758256189037276, -0.41614683654714241}, 1e-14);
  expectValues<float>(run1("Tan", {}, {f32({2}, {0.5f, -1.0f})}, DType::F32, {2}), {2},
                      {0.54630249f, -1.55740772f});
  expectValues<double>(run1("Tan", {}, {f64({2}, {0.5, -1.0})}, DType::F64, {2}), {2},
                       {0.54630248984379048, -1.5574077246549023}, 1e-14);
  expectValues<float>(run1("Asin", {}, {f32({2}, {0.5f, -0.9f})}, DType::F32, {2}), {2},
                      {0.523598776f, -1.11976951f});
  expectValues<double>(run1("Asin", {}, {f64({2}, {0.5, -0.9})}, DType::F64, {2}), {2},
                       {0.52359877559829893, -1.1197695149986342}, 1e-14);
  expectValues<float>(run1("Acos", {}, {f32({2}, {0.5f, -0.9f})}, DType::F32, {2}), {2},
                      {1.04719755f, 2.69056584f});
  expectValues<double>(run1("Acos", {}, {f64({2}, {0.5, -0.9})}, DType::F64, {2}), {2},
                       {1.0471975511965979, 2.6905658417935308}, 1e-14);
  expectValues<float>(run1("Atan", {}, {f32({2}, {0.5f, -3.0f})}, DType::F32, {2}), {2},
                      {0.463647609f, -1.24904577f});
  expectValues<double>(run1("Atan", {}, {f64({2}, {0.5, -3.0})}, DType::F64, {2}), {2},
                       {0.46364760900080609, -1.2490457723982544}, 1e-14);
  expectValues<float>(run1("Sinh", {}, {f32({2}, {0.5f, -2.0f})}, DType::F32, {2}), {2},
                      {0.521095305f, -3.62686041f});
  expectValues<double>(run1("Sinh", {}, {f64({2}, {0.5, -2.0})}, DType::F64, {2}), {2},
                       {0.52109530549374738, -3.626860407847019}, 1e-14);
  expectValues<float>(run1("Cosh", {}, {f32({2}, {0.5f, -2.0f})}, DType::F32, {2}), {2},
                      {1.12762597f, 3.76219569f});
  expectValues<double>(run1("Cosh", {}, {f64({2}, {0.5, -2.0})}, DType::F64, {2}), {2},
                       {1.1276259652063807, 3.7621956910836314}, 1e-14);
  expectValues<float>(run1("Asinh", {}, {f32({2}, {0.5f, -3.0f})}, DType::F32, {2}), {2},
                      {0.481211825f, -1.81844646f});
  expectValues<double>(run1("Asinh", {}, {f64({2}, {0.5, -3.0})}, DType::F64, {2}), {2},
                       {0.48121182505960347, -1.8184464592320668}, 1e-14);
  expectValues<float>(run1("Acosh", {}, {f32({2}, {1.0f, 3.0f})}, DType::F32, {2}), {2},
                      {0.f, 1.76274717f});
  expectValues<double>(run1("Acosh", {}, {f64({2}, {1.0, 3.0})}, DType::F64, {2}), {2},
                       {0, 1.7627471740390861}, 1e-14);
  expectValues<float>(run1("Atanh", {}, {f32({2}, {0.5f, -0.9f})}, DType::F32, {2}), {2},
                      {0.549306144f, -1.47221949f});
  expectValues<double>(run1("Atanh", {}, {f64({2}, {0.5, -0.9})}, DType::F64, {2}), {2},
                       {0.54930614433405478, -1.4722194895832204}, 1e-14);
}

TEST(RefUnary, F64StaysF64) {
  // 1 + 1e-12 is not representable in f32; a kernel computing in f32 would print 1.
  Tensor y = run1("Sqrt", {}, {f64({1}, {1.000000000002})}, DType::F64, {1});
  expectValues<double>(y, {1}, {1.000000000001}, 1e-15);
}

TEST(RefUnary, SignOpsOnIntegers) {
  expectValues<int32_t>(run1("Neg", {}, {i32({3}, {-1, 2, 0})}, DType::I32, {3}), {3}, {1, -2, 0});
  expectValues<int64_t>(run1("Abs", {}, {i64({2}, {-3, 4})}, DType::I64, {2}), {2}, {3, 4});
  expectValues<uint8_t>(run1("Abs", {}, {u8({2}, {0, 200})}, DType::U8, {2}), {2}, {0, 200});
  expectValues<int32_t>(run1("Relu", {}, {i32({3}, {-5, 0, 7})}, DType::I32, {3}), {3}, {0, 0, 7});
}

TEST(RefUnary, ReluKeepsNaN) {
  expectValues<float>(run1("Relu", {}, {f32({4}, {-1, 0, 2, kNaN})}, DType::F32, {4}), {4},
                      {0, 0, 2, kNaN});
}

TEST(RefUnary, SigmoidIsStableForLargeMagnitudes) {
  expectValues<double>(run1("Sigmoid", {}, {f64({3}, {-800, 0, 800})}, DType::F64, {3}), {3},
                       {0, 0.5, 1});
  expectValues<float>(run1("Sigmoid", {}, {f32({2}, {1, -1})}, DType::F32, {2}), {2},
                      {0.73105857863f, 0.26894142137f});
}

TEST(RefUnary, SoftplusIsStable) {
  // A naive log(exp(x) + 1) overflows f32 at x = 200.
  expectValues<float>(run1("Softplus", {}, {f32({3}, {0, 200, -20})}, DType::F32, {3}), {3},
                      {0.69314718056f, 200, 2.0611536e-9f});
}

TEST(RefUnary, ActivationsWithAttributes) {
  expectValues<float>(run1("LeakyRelu", attrs({{"alpha", Attr::ofFloat(0.1f)}}),
                           {f32({2}, {-2, 3})}, DType::F32, {2}),
                      {2}, {-0.2f, 3});
  expectValues<float>(run1("LeakyRelu", {}, {f32({1}, {-2})}, DType::F32, {1}), {1}, {-0.02f});
  expectValues<float>(
      run1("Elu", attrs({{"alpha", Attr::ofFloat(2)}}), {f32({2}, {-1, 1})}, DType::F32, {2}), {2},
      {-1.26424111766f, 1});
  expectValues<float>(run1("Selu", {}, {f32({3}, {-1, 0, 2})}, DType::F32, {3}), {3},
                      {-1.1113307378f, 0, 2.1014019747f});
  expectValues<float>(run1("HardSigmoid", {}, {f32({4}, {-3, 0, 1, 3})}, DType::F32, {4}), {4},
                      {0, 0.5f, 0.7f, 1});
  expectValues<float>(
      run1("HardSigmoid", attrs({{"alpha", Attr::ofFloat(0.5f)}, {"beta", Attr::ofFloat(0.25f)}}),
           {f32({2}, {0, 1})}, DType::F32, {2}),
      {2}, {0.25f, 0.75f});
}

// Rounding and sign from the op table's formulas: Round halves to even (ONNX Round-11), Sign
// passes NaN and zero through.
TEST(RefUnary, RoundingAndSign) {
  expectValues<float>(run1("Round", {}, {f32({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f})},
                           DType::F32, {6}),
                      {6}, {0, 2, 2, -0.f, -2, 2});
  expectValues<float>(run1("Floor", {}, {f32({2}, {-1.5f, 1.5f})}, DType::F32, {2}), {2}, {-2, 1});
  expectValues<double>(run1("Ceil", {}, {f64({2}, {-1.5, 1.2})}, DType::F64, {2}), {2}, {-1, 2});
  Tensor s = run1("Sign", {}, {f32({4}, {-3, 0, 2.5f, kNaN})}, DType::F32, {4});
  EXPECT_EQ(s.data<float>()[0], -1.f);
  EXPECT_EQ(s.data<float>()[1], 0.f);
  EXPECT_EQ(s.data<float>()[2], 1.f);
  EXPECT_TRUE(std::isnan(s.data<float>()[3]));
  expectValues<float>(run1("Softsign", {}, {f32({2}, {1, -3})}, DType::F32, {2}), {2}, {0.5f, -0.75f});
  expectValues<float>(run1("HardSwish", {}, {f32({4}, {-4, -1, 1, 4})}, DType::F32, {4}), {4},
                      {0, -1.f / 3, 2.f / 3, 4});
}

TEST(RefUnary, ThresholdedReluCeluShrink) {
  expectValues<float>(run1("ThresholdedRelu", attrs({{"alpha", Attr::ofFloat(2)}}),
                           {f32({3}, {1, 2, 3})}, DType::F32, {3}),
                      {3}, {0, 0, 3});
  // Celu with alpha 2 at -1: 2 * (e^-0.5 - 1).
  expectValues<float>(run1("Celu", attrs({{"alpha", Attr::ofFloat(2)}}), {f32({2}, {-1, 3})},
                           DType::F32, {2}),
                      {2}, {-0.786938680574733f, 3});
  expectValues<float>(run1("Shrink", attrs({{"lambd", Attr::ofFloat(1.5f)}, {"bias", Attr::ofFloat(1.5f)}}),
                           {f32({5}, {-2, -1, 0, 1, 2})}, DType::F32, {5}),
                      {5}, {-0.5f, 0, 0, 0, 0.5f});
  // Unsigned input: -lambd is compared in double, so nothing wraps.
  expectValues<uint8_t>(run1("Shrink", attrs({{"lambd", Attr::ofFloat(1.5f)}, {"bias", Attr::ofFloat(1)}}),
                             {u8({3}, {0, 1, 5})}, DType::U8, {3}),
                        {3}, {0, 0, 4});
}

TEST(RefUnary, EmptyTensor) {
  Tensor y = run1("Exp", {}, {f32({0, 3}, {})}, DType::F32, {0, 3});
  expectValues<float>(y, {0, 3}, {});
}

TEST(RefClip, AbsentMinAndMax) {
  Tensor x = f32({4}, {-5, -1, 1, 5});
  expectValues<float>(run1("Clip", {}, {x}, DType::F32, {4}), {4}, {-5, -1, 1, 5});
  expectValues<float>(run1("Clip", {}, {x, f32({}, {0})}, DType::F32, {4}), {4}, {0, 0, 1, 5});
  expectValues<float>(run1("Clip", {}, {x, none(), f32({}, {2})}, DType::F32, {4}), {4},
                      {-5, -1, 1, 2});
  expectValues<float>(run1("Clip", {}, {x, f32({}, {-2}), f32({}, {2})}, DType::F32, {4}), {4},
                      {-2, -1, 1, 2});
}

TEST(RefClip, MinAboveMaxGivesMax) {
  expectValues<float>(
      run1("Clip", {}, {f32({3}, {-1, 0, 9}), f32({}, {3}), f32({}, {1})}, DType::F32, {3}), {3},
      {1, 1, 1});
}

TEST(RefClip, IntegersAndNaN) {
  expectValues<int8_t>(
      run1("Clip", {}, {i8({3}, {-128, 5, 127}), i8({}, {-3}), i8({}, {100})}, DType::I8, {3}), {3},
      {-3, 5, 100});
  expectValues<float>(
      run1("Clip", {}, {f32({2}, {kNaN, 9}), f32({}, {0}), f32({}, {1})}, DType::F32, {2}), {2},
      {kNaN, 1});
}

TEST(RefBinary, AddBroadcastsRowVector) {
  Tensor y = run1("Add", {}, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 30})}, DType::F32,
                  {2, 3});
  expectValues<float>(y, {2, 3}, {11, 22, 33, 14, 25, 36});
}

TEST(RefBinary, SubBroadcastsBothWays) {
  Tensor y = run1("Sub", {}, {f32({2, 1}, {10, 20}), f32({1, 3}, {1, 2, 3})}, DType::F32, {2, 3});
  expectValues<float>(y, {2, 3}, {9, 8, 7, 19, 18, 17});
}

TEST(RefBinary, MulWithScalarAndHigherRank) {
  Tensor y = run1("Mul", {}, {f64({}, {2}), f64({2, 1, 2}, {1, 2, 3, 4})}, DType::F64, {2, 1, 2});
  expectValues<double>(y, {2, 1, 2}, {2, 4, 6, 8});
  Tensor z = run1("Mul", {}, {i64({2, 2, 1}, {1, 2, 3, 4}), i64({1, 1, 3}, {1, 10, 100})},
                  DType::I64, {2, 2, 3});
  expectValues<int64_t>(z, {2, 2, 3}, {1, 10, 100, 2, 20, 200, 3, 30, 300, 4, 40, 400});
}

// The broadcasting rows (Broadcast2: trailing dims merged into one contiguous or repeated run)
// against index arithmetic, for Sub (operand order matters) over patterns that merge
// differently: a middle dim, both operands broadcast, size-1 dims between, scalars on either
// side, 1.4M elements (threaded, a row longer than a chunk), and many short rows grouped into
// tasks whose later rows' offsets an odometer steps to.
TEST(RefBinary, BroadcastRowsMatchIndexArithmetic) {
  const std::pair<Shape, Shape> cases[] = {
      {{1, 64, 3, 49, 49}, {1, 64, 1, 49, 49}}, {{2, 3, 4}, {3, 1}},   {{4, 1, 5}, {1, 3, 1}},
      {{2, 1, 3, 1}, {1, 4, 1, 5}},             {{5}, {}},             {{}, {7}},
      {{3, 1}, {3, 1}},                         {{2, 70000}, {2, 1}}, {{1, 1, 6}, {2, 1, 1}},
      {{256, 1, 1, 2}, {1, 7, 7, 2}},  // 12,544 rows of 2 (RAFT): two tasks of rows, odometer carries
      {{1024, 1, 8, 2}, {1, 9, 1, 2}}};  // 147K elements, threaded, in rows of 2
  for (const auto& [as, bs] : cases) {
    const size_t r = std::max(as.size(), bs.size());
    Shape pa = as, pb = bs, ys(r);
    pa.insert(pa.begin(), r - pa.size(), 1);
    pb.insert(pb.begin(), r - pb.size(), 1);
    for (size_t d = 0; d < r; ++d) ys[d] = std::max(pa[d], pb[d]);
    std::vector<float> av(numElements(as)), bv(numElements(bs));
    for (size_t i = 0; i < av.size(); ++i) av[i] = float(i % 1000) * 0.5f;
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = float(i % 997) * 3.f + 1.f;
    Tensor y = run1("Sub", {}, {f32(as, av), f32(bs, bv)}, DType::F32, ys);
    SCOPED_TRACE(shapeToString(as) + " - " + shapeToString(bs));
    ASSERT_EQ(y.shape(), ys);
    const int64_t n = numElements(ys);
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i, ai = 0, bi = 0, sa = 1, sb = 1;
      for (int64_t d = (int64_t)r - 1; d >= 0; --d) {
        const int64_t idx = rem % ys[d];
        rem /= ys[d];
        ai += (pa[d] == 1 ? 0 : idx) * sa;
        bi += (pb[d] == 1 ? 0 : idx) * sb;
        sa *= pa[d];
        sb *= pb[d];
      }
      ASSERT_EQ(y.data<float>()[i], av[ai] - bv[bi]) << "element " << i;
    }
  }
}

TEST(RefBinary, EmptyBroadcast) {
  Tensor y = run1("Add", {}, {f32({0, 3}, {}), f32({3}, {1, 2, 3})}, DType::F32, {0, 3});
  expectValues<float>(y, {0, 3}, {});
}

TEST(RefBinary, IntegerDivisionTruncatesTowardZero) {
  expectValues<int32_t>(
      run1("Div", {}, {i32({4}, {7, -7, 7, -7}), i32({4}, {2, 2, -2, -2})}, DType::I32, {4}), {4},
      {3, -3, -3, 3});
  expectValues<uint8_t>(run1("Div", {}, {u8({2}, {255, 9}), u8({1}, {4})}, DType::U8, {2}), {2},
                        {63, 2});
  // INT_MIN / -1 overflows; wrap-around gives INT_MIN instead of a trap.
  expectValues<int32_t>(
      run1("Div", {}, {i32({1}, {std::numeric_limits<int32_t>::min()}), i32({1}, {-1})}, DType::I32,
           {1}),
      {1}, {std::numeric_limits<int32_t>::min()});
}

TEST(RefBinary, IntegerDivisionByZeroIsAnError) {
  OpCall c{"Div", {}, {i32({2}, {1, 2}), i32({2}, {1, 0})}, {{DType::I32, {2}}}};
  EXPECT_NE(errorOf(c).find("division by zero"), std::string::npos);
}

TEST(RefBinary, FloatDivisionByZeroIsInf) {
  expectValues<float>(run1("Div", {}, {f32({2}, {1, -1}), f32({}, {0})}, DType::F32, {2}), {2},
                      {kInf, -kInf});
}

TEST(RefBinary, Comparisons) {
  expectValues<bool>(run1("Equal", {}, {i64({3}, {1, 2, 3}), i64({1}, {2})}, DType::Bool, {3}), {3},
                     {false, true, false});
  expectValues<bool>(run1("Equal", {}, {boolean({2}, {true, false}), boolean({2}, {true, true})},
                          DType::Bool, {2}),
                     {2}, {true, false});
  expectValues<bool>(
      run1("Equal", {}, {f32({2}, {kNaN, 1}), f32({2}, {kNaN, 1})}, DType::Bool, {2}), {2},
      {false, true});
  expectValues<bool>(
      run1("Less", {}, {f32({2, 1}, {1, 5}), f32({3}, {0, 3, 6})}, DType::Bool, {2, 3}), {2, 3},
      {false, true, true, false, false, true});
  expectValues<bool>(run1("Greater", {}, {i8({3}, {-1, 0, 1}), i8({}, {0})}, DType::Bool, {3}), {3},
                     {false, false, true});
  expectValues<bool>(run1("Equal", {}, {u8({2}, {7, 8}), u8({2}, {7, 7})}, DType::Bool, {2}), {2},
                     {true, false});
}

TEST(RefBinary, OrEqualComparisons) {
  expectValues<bool>(run1("GreaterOrEqual", {}, {f32({3}, {1, 2, 3}), f32({1}, {2})}, DType::Bool, {3}),
                     {3}, {false, true, true});
  expectValues<bool>(run1("LessOrEqual", {}, {i32({3}, {1, 2, 3}), i32({1}, {2})}, DType::Bool, {3}),
                     {3}, {true, true, false});
  expectValues<bool>(run1("LessOrEqual", {}, {f32({1}, {kNaN}), f32({1}, {kNaN})}, DType::Bool, {1}),
                     {1}, {false});
}

// Mod-13: fmod = 0 takes the divisor's sign (Python %), fmod = 1 the dividend's (C fmod).
TEST(RefBinary, ModSigns) {
  expectValues<int32_t>(
      run1("Mod", {}, {i32({4}, {7, -7, 7, -7}), i32({4}, {3, 3, -3, -3})}, DType::I32, {4}), {4},
      {1, 2, -2, -1});
  expectValues<int32_t>(run1("Mod", attrs({{"fmod", Attr::ofInt(1)}}),
                             {i32({4}, {7, -7, 7, -7}), i32({4}, {3, 3, -3, -3})}, DType::I32, {4}),
                        {4}, {1, -1, 1, -1});
  expectValues<float>(run1("Mod", attrs({{"fmod", Attr::ofInt(1)}}),
                           {f32({2}, {-4.5f, 4.5f}), f32({1}, {2})}, DType::F32, {2}),
                      {2}, {-0.5f, 0.5f});
  expectValues<int8_t>(run1("Mod", {}, {i8({2}, {-128, 5}), i8({2}, {-1, -2})}, DType::I8, {2}), {2},
                       {0, -1});
  OpCall zero{"Mod", {}, {i32({2}, {1, 2}), i32({2}, {1, 0})}, {{DType::I32, {2}}}};
  EXPECT_NE(errorOf(zero).find("modulo by zero"), std::string::npos);
}

TEST(RefBinary, LogicBroadcasts) {
  Tensor a = boolean({2, 2}, {true, true, false, false});
  Tensor b = boolean({2}, {true, false});
  expectValues<bool>(run1("And", {}, {a, b}, DType::Bool, {2, 2}), {2, 2}, {true, false, false, false});
  expectValues<bool>(run1("Or", {}, {a, b}, DType::Bool, {2, 2}), {2, 2}, {true, true, true, false});
  expectValues<bool>(run1("Xor", {}, {a, b}, DType::Bool, {2, 2}), {2, 2}, {false, true, true, false});
  expectValues<bool>(run1("Not", {}, {b}, DType::Bool, {2}), {2}, {false, true});
}

TEST(RefBinary, BitShiftDirections) {
  expectValues<uint8_t>(run1("BitShift", attrs({{"direction", Attr::ofString("LEFT")}}),
                             {u8({3}, {16, 4, 1}), u8({3}, {1, 2, 8})}, DType::U8, {3}),
                        {3}, {32, 16, 0});
  expectValues<uint8_t>(run1("BitShift", attrs({{"direction", Attr::ofString("RIGHT")}}),
                             {u8({3}, {16, 4, 255}), u8({1}, {2})}, DType::U8, {3}),
                        {3}, {4, 1, 63});
}

TEST(RefUnary, IsNaNAndIsInf) {
  Tensor x = f32({4}, {kNaN, kInf, -kInf, 1});
  expectValues<bool>(run1("IsNaN", {}, {x}, DType::Bool, {4}), {4}, {true, false, false, false});
  expectValues<bool>(run1("IsInf", {}, {x}, DType::Bool, {4}), {4}, {false, true, true, false});
  expectValues<bool>(run1("IsInf", attrs({{"detect_positive", Attr::ofInt(0)}}), {x}, DType::Bool, {4}),
                     {4}, {false, false, true, false});
}

TEST(RefBinary, PReluBroadcastsSlope) {
  Tensor y =
      run1("PRelu", {}, {f32({2, 2}, {-1, 2, -3, 4}), f32({2}, {0.1f, 0.2f})}, DType::F32, {2, 2});
  expectValues<float>(y, {2, 2}, {-0.1f, 2, -0.3f, 4});
  Tensor z = run1("PRelu", {}, {f32({1, 2, 2}, {-1, -1, -1, 1}), f32({2, 1}, {2, 3})}, DType::F32,
                  {1, 2, 2});
  expectValues<float>(z, {1, 2, 2}, {-2, -2, -3, 1});
}

TEST(RefPow, SameDtypes) {
  expectValues<float>(run1("Pow", {}, {f32({2}, {2, 3}), f32({2}, {3, 2})}, DType::F32, {2}), {2},
                      {8, 9});
  expectValues<float>(run1("Pow", {}, {f32({3}, {4, 9, 2}), f32({}, {0.5f})}, DType::F32, {3}), {3},
                      {2, 3, 1.41421356f});
  expectValues<int64_t>(
      run1("Pow", {}, {i64({3}, {3, 2, -2}), i64({3}, {3, 10, 3})}, DType::I64, {3}), {3},
      {27, 1024, -8});
}

TEST(RefPow, MixedDtypes) {
  expectValues<float>(run1("Pow", {}, {f32({2}, {2, 4}), i64({2}, {2, -1})}, DType::F32, {2}), {2},
                      {4, 0.25f});
  expectValues<float>(run1("Pow", {}, {f32({2}, {2, 3}), i32({2}, {3, 0})}, DType::F32, {2}), {2},
                      {8, 1});
  // Integer base, float exponent: computed in floating point then truncated toward zero.
  expectValues<int32_t>(run1("Pow", {}, {i32({2}, {2, 3}), f32({2}, {0.5f, 2})}, DType::I32, {2}),
                        {2}, {1, 9});
  expectValues<int64_t>(run1("Pow", {}, {i64({3}, {2, 1, -1}), i64({}, {-1})}, DType::I64, {3}),
                        {3}, {0, 1, -1});
  expectValues<double>(run1("Pow", {}, {f64({1}, {2}), f32({1}, {0.5f})}, DType::F64, {1}), {1},
                       {1.4142135623730951}, 1e-14);
}

TEST(RefVariadic, MinMaxSumBroadcastThreeInputs) {
  std::vector<Tensor> in = {f32({3}, {1, 5, 3}), f32({2, 1}, {2, 4}), f32({}, {3.5f})};
  expectValues<float>(run1("Max", {}, in, DType::F32, {2, 3}), {2, 3}, {3.5f, 5, 3.5f, 4, 5, 4});
  expectValues<float>(run1("Min", {}, in, DType::F32, {2, 3}), {2, 3}, {1, 2, 2, 1, 3.5f, 3});
  expectValues<float>(run1("Sum", {}, in, DType::F32, {2, 3}), {2, 3},
                      {6.5f, 10.5f, 8.5f, 8.5f, 12.5f, 10.5f});
}

TEST(RefVariadic, SingleInputAndIntegers) {
  expectValues<int32_t>(run1("Sum", {}, {i32({2}, {4, -1})}, DType::I32, {2}), {2}, {4, -1});
  expectValues<int64_t>(run1("Max", {}, {i64({2}, {4, -1}), i64({2}, {3, 0})}, DType::I64, {2}),
                        {2}, {4, 0});
  expectValues<uint8_t>(run1("Min", {}, {u8({2}, {4, 255}), u8({2}, {3, 254})}, DType::U8, {2}),
                        {2}, {3, 254});
}

TEST(RefVariadic, MeanBroadcasts) {
  expectValues<float>(
      run1("Mean", {}, {f32({2}, {1, 2}), f32({1}, {4}), f32({2}, {1, 6})}, DType::F32, {2}), {2},
      {2, 4});
  expectValues<double>(run1("Mean", {}, {f64({1}, {3})}, DType::F64, {1}), {1}, {3});
}

TEST(RefVariadic, MaxPropagatesNaN) {
  expectValues<float>(run1("Max", {}, {f32({2}, {kNaN, 1}), f32({2}, {0, kNaN})}, DType::F32, {2}),
                      {2}, {kNaN, kNaN});
}

TEST(RefWhere, BroadcastsAllThree) {
  Tensor y = run1("Where", {}, {boolean({2, 1}, {true, false}), i64({2}, {10, 20}), i64({}, {-1})},
                  DType::I64, {2, 2});
  expectValues<int64_t>(y, {2, 2}, {10, 20, -1, -1});
}

// Where's runs (forEachStridedRun over coalesced dims): a mask broadcast over the inner dims
// (one condition a run: a copy from X, a fill from a scalar Y), every operand contiguous, and
// mixed strides (X broadcast along the inner dim where the mask is not), each against the
// element-by-element definition.
TEST(RefWhere, RunsOfEveryStridePattern) {
  const Shape ys = {2, 3, 4, 5};
  const int64_t n = numElements(ys);
  struct Case {
    Shape c, x, y;
  };
  for (const Case& k : {Case{{2, 3, 1, 1}, ys, {}}, Case{ys, ys, ys}, Case{{1, 3, 4, 1}, {5}, {2, 1, 4, 5}},
                        Case{{2, 1, 1, 5}, {4, 1}, ys}}) {
    SCOPED_TRACE(shapeToString(k.c) + shapeToString(k.x) + shapeToString(k.y));
    auto fill = [](const Shape& s, float scale) {
      std::vector<float> v(numElements(s));
      for (size_t i = 0; i < v.size(); ++i) v[i] = scale * float(i + 1);
      return f32(s, v);
    };
    std::vector<bool> cv(numElements(k.c));
    for (size_t i = 0; i < cv.size(); ++i) cv[i] = (i * 7) % 3 != 0;
    Tensor c = boolean(k.c, cv), x = fill(k.x, 1.f), y = fill(k.y, -0.5f);
    Tensor got = run1("Where", {}, {c, x, y}, DType::F32, ys);
    ASSERT_TRUE(got.defined());
    // Element (i0..i3) reads each operand at its broadcast index.
    auto at = [&](const Tensor& t, const std::vector<int64_t>& idx) {
      const Shape& s = t.shape();
      int64_t off = 0;
      const size_t lead = ys.size() - s.size();
      for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + (s[d] == 1 ? 0 : idx[lead + d]);
      return off;
    };
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> idx(4);
      for (int64_t d = 3, r = i; d >= 0; --d) {
        idx[d] = r % ys[d];
        r /= ys[d];
      }
      const float want = c.data<bool>()[at(c, idx)] ? x.data<float>()[at(x, idx)] : y.data<float>()[at(y, idx)];
      ASSERT_EQ(got.data<float>()[i], want) << i;
    }
  }
}

TEST(RefWhere, AllDtypes) {
  Tensor c = boolean({3}, {true, false, true});
  expectValues<bool>(
      run1("Where", {}, {c, boolean({3}, {false, false, false}), boolean({3}, {true, true, true})},
           DType::Bool, {3}),
      {3}, {false, true, false});
  expectValues<double>(
      run1("Where", {}, {c, f64({3}, {1, 2, 3}), f64({3}, {-1, -2, -3})}, DType::F64, {3}), {3},
      {1, -2, 3});
  expectValues<int8_t>(run1("Where", {}, {c, i8({1}, {5}), i8({3}, {-1, -2, -3})}, DType::I8, {3}),
                       {3}, {5, -2, 5});
}

TEST(RefElementwiseRegistry, DtypeFeasibility) {
  KernelRegistry& r = registry();
  EXPECT_TRUE(r.supports("Add", "cpu", {DType::I32, DType::I32}));
  EXPECT_FALSE(r.supports("Add", "cpu", {DType::F32, DType::I32}));
  EXPECT_FALSE(r.supports("Add", "cpu", {DType::Bool, DType::Bool}));
  EXPECT_TRUE(r.supports("Equal", "cpu", {DType::Bool, DType::Bool}));
  EXPECT_TRUE(r.supports("Pow", "cpu", {DType::F32, DType::I64}));
  EXPECT_FALSE(r.supports("Pow", "cpu", {DType::Bool, DType::I64}));
  EXPECT_TRUE(r.supports("Where", "cpu", {DType::Bool, DType::F32, DType::F32}));
  EXPECT_FALSE(r.supports("Where", "cpu", {DType::I32, DType::F32, DType::F32}));
  EXPECT_FALSE(r.supports("Sqrt", "cpu", {DType::I32}));
  EXPECT_TRUE(r.supports("Clip", "cpu", {DType::U8, DType::U8, DType::U8}));
}

TEST(RefBinary, NonBroadcastableShapesFailAtCreation) {
  OpCall c{"Add", {}, {f32({2}, {1, 2}), f32({3}, {1, 2, 3})}, {{DType::F32, {3}}}};
  std::string e = errorOf(c);
  EXPECT_NE(e.find("does not broadcast"), std::string::npos) << e;
  EXPECT_NE(e.find("Add 'n'"), std::string::npos) << e;
}

// The 16-bit and wide unsigned integers (ONNX INT16, UINT16, UINT32, UINT64) in the ops whose
// tests use them: Max/Min, Mod, BitShift, and Pow's exponent.
TEST(RefWideIntegers, MaxModBitShiftPow) {
  expectValues<uint32_t>(run1("Max", {}, {tensor<uint32_t>({2}, {4000000000u, 1}), tensor<uint32_t>({2}, {3, 2})},
                              DType::U32, {2}),
                         {2}, {4000000000u, 2});
  expectValues<int16_t>(run1("Min", {}, {tensor<int16_t>({2}, {-300, 5}), tensor<int16_t>({1}, {0})},
                             DType::I16, {2}),
                        {2}, {-300, 0});
  expectValues<uint16_t>(run1("Mod", {}, {tensor<uint16_t>({2}, {65535, 7}), tensor<uint16_t>({2}, {16, 7})},
                              DType::U16, {2}),
                         {2}, {15, 0});
  expectValues<int16_t>(run1("Mod", {}, {tensor<int16_t>({2}, {-7, 7}), tensor<int16_t>({2}, {3, -3})},
                             DType::I16, {2}),
                        {2}, {2, -2});
  expectValues<uint64_t>(run1("BitShift", attrs({{"direction", Attr::ofString("LEFT")}}),
                              {tensor<uint64_t>({3}, {1, 1, 3}), tensor<uint64_t>({3}, {63, 64, 1})},
                              DType::U64, {3}),
                         {3}, {uint64_t(1) << 63, 0, 6});
  expectValues<float>(run1("Pow", {}, {f32({2}, {2, 3}), tensor<uint64_t>({2}, {10, 2})}, DType::F32, {2}),
                      {2}, {1024, 9});
}

// f16 Max/Min/Mod run through f32 and round back once; bits in, bits out.
TEST(RefHalf, MaxMinModOnF16) {
  auto half = [](std::vector<uint16_t> bits) {
    Tensor t = Tensor::alloc(DType::F16, {(int64_t)bits.size()});
    std::memcpy(t.raw(), bits.data(), bits.size() * 2);
    return t;
  };
  // 1.5 (0x3E00), -2 (0xC000), 0.1 (0x2E66); 1 (0x3C00), 3 (0x4200), -1 (0xBC00).
  Tensor a = half({0x3E00, 0xC000, 0x2E66}), b = half({0x3C00, 0x4200, 0xBC00});
  Tensor mx = run1("Max", {}, {a, b}, DType::F16, {3});
  EXPECT_EQ(std::vector<uint16_t>(mx.data<uint16_t>(), mx.data<uint16_t>() + 3),
            (std::vector<uint16_t>{0x3E00, 0x4200, 0x2E66}));
  Tensor mn = run1("Min", {}, {a, b}, DType::F16, {3});
  EXPECT_EQ(std::vector<uint16_t>(mn.data<uint16_t>(), mn.data<uint16_t>() + 3),
            (std::vector<uint16_t>{0x3C00, 0xC000, 0xBC00}));
  // fmod(1.5, 1) = 0.5 (0x3800), fmod(-2, 3) = -2, fmod(0.1, -1) = 0.1.
  Tensor md = run1("Mod", attrs({{"fmod", Attr::ofInt(1)}}), {a, b}, DType::F16, {3});
  EXPECT_EQ(std::vector<uint16_t>(md.data<uint16_t>(), md.data<uint16_t>() + 3),
            (std::vector<uint16_t>{0x3800, 0xC000, 0x2E66}));
}

// QuantizeLinear rounds halves to even and saturates; per-axis scales follow axis 1.
TEST(RefQuantize, QuantizeDequantizeDynamic) {
  expectValues<uint8_t>(run1("QuantizeLinear", {}, {f32({5}, {1, 3, -10, 1000, 5}), f32({}, {2}), u8({}, {128})},
                             DType::U8, {5}),
                        {5}, {128, 130, 123, 255, 130});
  expectValues<int8_t>(run1("QuantizeLinear", {}, {f32({2, 2}, {1, 1, 1, 1}), f32({2}, {1, 0.5f}), i8({2}, {0, 3})},
                            DType::I8, {2, 2}),
                       {2, 2}, {1, 5, 1, 5});
  expectValues<float>(run1("DequantizeLinear", {}, {u8({3}, {0, 128, 255}), f32({}, {0.5f}), u8({}, {128})},
                           DType::F32, {3}),
                      {3}, {-64, 0, 63.5f});
  OpCall dyn{"DynamicQuantizeLinear", {}, {f32({3}, {-1, 0, 2})}, {{DType::U8, {3}}, {DType::F32, {}}, {DType::U8, {}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(dyn.run(&outs).isOk());
  // scale 3/255; zero point round(1 / (3/255)) = 85; y = round(x * 85) + 85.
  expectValues<float>(outs[1], {}, {3.f / 255});
  expectValues<uint8_t>(outs[2], {}, {85});
  expectValues<uint8_t>(outs[0], {3}, {0, 85, 255});
  // round(x / scale) comes before the zero point: 2.5 -> 2, + 1 = 3 (not round(3.5) = 4).
  expectValues<uint8_t>(run1("QuantizeLinear", {}, {f32({1}, {5}), f32({}, {2}), u8({}, {1})}, DType::U8, {1}),
                        {1}, {3});
  // A NaN input, or 0 / 0 with a zero scale, is the zero point (NaN to an integer is undefined);
  // +-inf saturate.
  expectValues<int8_t>(run1("QuantizeLinear", {},
                            {f32({3}, {std::nanf(""), INFINITY, -INFINITY}), f32({}, {1}), i8({}, {-5})},
                            DType::I8, {3}),
                       {3}, {-5, 127, -128});
  expectValues<uint8_t>(run1("QuantizeLinear", {}, {f32({2}, {0, 1}), f32({}, {0}), u8({}, {9})}, DType::U8, {2}),
                        {2}, {9, 255});
}

// The vectorised runs (16 elements at a time, the rest one by one) against round-half-even in
// double: ties of both parities, NaN, +-inf, saturation at both ends, u8 and i8, per tensor
// and per axis 1 with rows longer than a vector; and DequantizeLinear back.
template <typename Y>
void checkQuantizeRuns(DType dt, Shape shape, std::vector<float> scales, std::vector<Y> zps) {
  const int64_t n = numElements(shape), C = shape[1], inner = n / (shape[0] * C);
  std::vector<float> x(n);
  for (int64_t k = 0; k < n; ++k) x[k] = float(k % 41 - 20) * 0.75f + (k % 7 == 0 ? 0.25f : 0.f);
  x[3] = std::nanf("");
  x[17] = INFINITY;
  x[18] = -INFINITY;
  x[20] = 1e6f;
  x[33] = -1e6f;
  const bool perAxis = scales.size() > 1;
  const Shape paramShape = perAxis ? Shape{C} : Shape{};
  Tensor q = run1("QuantizeLinear", {},
                  {f32(shape, x), f32(paramShape, scales), tensor<Y>(paramShape, zps)}, dt, shape);
  std::vector<Y> want(n);
  std::vector<float> back(n);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t a = perAxis ? (k / inner) % C : 0;
    const float quot = x[k] / scales[a];
    double r = std::isnan(quot) ? 0.0 : std::nearbyint(double(quot));
    r = std::clamp(r + double(zps[a]), double(std::numeric_limits<Y>::min()),
                   double(std::numeric_limits<Y>::max()));
    want[k] = Y(r);
    back[k] = float(int32_t(want[k]) - int32_t(zps[a])) * scales[a];
  }
  expectValues<Y>(q, shape, want);
  expectValues<float>(run1("DequantizeLinear", {}, {q, f32(paramShape, scales), tensor<Y>(paramShape, zps)},
                           DType::F32, shape),
                      shape, back);
}

TEST(RefQuantize, VectorRunsMatchRoundHalfToEven) {
  checkQuantizeRuns<uint8_t>(DType::U8, {1, 1, 83}, {0.5f}, {100});
  checkQuantizeRuns<int8_t>(DType::I8, {1, 1, 83}, {0.25f}, {-3});
  checkQuantizeRuns<uint8_t>(DType::U8, {2, 3, 37}, {0.5f, 0.25f, 3.f}, {0, 128, 255});
  checkQuantizeRuns<int8_t>(DType::I8, {2, 3, 37}, {1.f, 0.5f, 0.125f}, {0, -128, 127});
}

}  // namespace
}  // namespace tandem
