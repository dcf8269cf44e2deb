// Tests of the reference data-movement kernels: Identity, Dropout, Flatten, Reshape, Squeeze,
// Unsqueeze, Transpose, Expand, Shape, Constant, ConstantOfShape, Cast, CastLike; the generation
// and scan kernels Range, EyeLike, Size, Trilu, CumSum.
#include <cstring>
#include <limits>

#include "runtime/Half.h"
#include "runtime/Philox.h"
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// reshaped() and sliced() share the buffer and its ownership: the view outlives the tensor it
// came from; a view of borrowed memory owns nothing.
TEST(TensorViews, SlicedAndReshapedShareOwnership) {
  Tensor part;
  {
    Tensor t = Tensor::fromVector<float>({2, 3}, {0, 1, 2, 3, 4, 5});
    part = t.sliced(2, {2, 2}).reshaped({4});
    EXPECT_TRUE(part.ownsData());
    EXPECT_EQ(part.raw(), static_cast<const float*>(t.raw()) + 2);
  }
  ASSERT_EQ(part.shape(), (Shape{4}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(part.data<float>()[i], (float)(i + 2));
  float borrowed[4] = {7, 8, 9, 10};
  Tensor v = Tensor::view(DType::F32, {4}, borrowed);
  EXPECT_FALSE(v.ownsData());
  EXPECT_FALSE(v.sliced(1, {3}).ownsData());
  EXPECT_EQ(v.sliced(1, {3}).data<float>()[0], 8.f);
}

TEST(RefCopyOps, IdentityAllDtypes) {
  expectValues<bool>(run1("Identity", {}, {boolean({2}, {true, false})}, DType::Bool, {2}), {2},
                     {true, false});
  expectValues<int8_t>(run1("Identity", {}, {i8({}, {-7})}, DType::I8, {}), {}, {-7});
  expectValues<double>(run1("Identity", {}, {f64({0}, {})}, DType::F64, {0}), {0}, {});
}

TEST(RefCopyOps, ReshapeFamilyUseTheOutputShape) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  expectValues<float>(run1("Reshape", {}, {x, i64({2}, {3, -1})}, DType::F32, {3, 2}), {3, 2}, v);
  expectValues<float>(run1("Flatten", attrs({{"axis", Attr::ofInt(0)}}), {x}, DType::F32, {1, 6}),
                      {1, 6}, v);
  expectValues<float>(run1("Unsqueeze", {}, {x, i64({1}, {-1})}, DType::F32, {2, 3, 1}), {2, 3, 1},
                      v);
  expectValues<int64_t>(
      run1("Squeeze", {}, {i64({1, 3, 1}, {7, 8, 9}), i64({2}, {0, 2})}, DType::I64, {3}), {3},
      {7, 8, 9});
  expectValues<int64_t>(run1("Squeeze", {}, {i64({1, 3, 1}, {7, 8, 9})}, DType::I64, {3}), {3},
                        {7, 8, 9});
}

TEST(RefCopyOps, ElementCountMismatchFails) {
  OpCall c{"Reshape", {}, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({1}, {4})}, {{DType::F32, {4}}}};
  EXPECT_NE(errorOf(c).find("does not hold"), std::string::npos);
}

TEST(RefDropout, InferenceCopiesAndMaskIsTrue) {
  Tensor x = f32({3}, {1, -2, 3});
  OpCall c{"Dropout",
           {},
           {x, f32({}, {0.5f}), boolean({}, {false})},
           {{DType::F32, {3}}, {DType::Bool, {3}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<float>(outs[0], {3}, {1, -2, 3});
  expectValues<bool>(outs[1], {3}, {true, true, true});
  expectValues<float>(run1("Dropout", {}, {x}, DType::F32, {3}), {3}, {1, -2, 3});
}

TEST(RefDropout, TrainingModeWithZeroRatioIsIdentity) {
  expectValues<float>(
      run1("Dropout", {}, {f32({2}, {4, 5}), f32({}, {0}), boolean({}, {true})}, DType::F32, {2}),
      {2}, {4, 5});
}

// Training mode: y = x / (1 - ratio) where the Philox mask keeps x, else 0. `counter`, when
// given, is Tandem's input 3 (a run-time input, not a constant).
std::vector<Tensor> trainingDropout(const Tensor& x, float ratio, const AttrMap& a,
                                    const std::string& node = "n", uint64_t seed = 0,
                                    const Tensor* counter = nullptr) {
  KernelContext ctx;
  ctx.opType = "Dropout";
  ctx.nodeName = node;
  ctx.attrs = &a;
  ctx.seed = seed;
  const Tensor r = f32({}, {ratio}), t = boolean({}, {true});
  ctx.inputTypes = {{x.dtype(), x.shape()}, {DType::F32, {}}, {DType::Bool, {}}};
  ctx.constInputs = {nullptr, nullptr, nullptr};
  if (counter) {
    ctx.inputTypes.push_back({counter->dtype(), counter->shape()});
    ctx.constInputs.push_back(nullptr);
  }
  ctx.outputTypes = {{x.dtype(), x.shape()}, {DType::Bool, x.shape()}};
  std::unique_ptr<Kernel> k;
  Status st = registry().create("cpu", ctx, &k);
  EXPECT_TRUE(st.isOk()) << st.message();
  std::vector<Tensor> outs = {Tensor::alloc(x.dtype(), x.shape()), Tensor::alloc(DType::Bool, x.shape())};
  if (k) {
    std::vector<const Tensor*> in = {&x, &r, &t};
    if (counter) in.push_back(counter);
    st = k->run(in, {&outs[0], &outs[1]});
    EXPECT_TRUE(st.isOk()) << st.message();
  }
  return outs;
}

TEST(RefDropout, TrainingModeKeepsByThePhiloxMaskAndScales) {
  const int64_t n = 20000;
  std::vector<float> xv(n);
  for (int64_t i = 0; i < n; ++i) xv[i] = 1.0f + (float)(i % 7);
  const Tensor x = f32({n}, xv);
  auto outs = trainingDropout(x, 0.75f, attrs({{"seed", Attr::ofInt(42)}}));
  // The mask is the documented one (runtime/Philox.h), element by element.
  DropoutMask m;
  m.seed = 42;
  m.threshold = DropoutMask::thresholdFor(0.75);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = outs[1].data<bool>()[i];
    ASSERT_EQ(keep, m.keep(i)) << i;
    kept += keep;
    EXPECT_EQ(outs[0].data<float>()[i], keep ? xv[i] * 4.0f : 0.0f) << i;
  }
  // A quarter is kept: 5000 expected, standard deviation sqrt(n * 0.25 * 0.75) ~ 61.
  EXPECT_NEAR((double)kept, 5000.0, 4 * 61.3);
}

TEST(RefDropout, TrainingMaskDependsOnSeedAndStreamOnly) {
  const Tensor x = f64({1000}, std::vector<double>(1000, 2.0));
  const AttrMap seeded = attrs({{"seed", Attr::ofInt(7)}});
  auto a = trainingDropout(x, 0.5f, seeded, "a");
  auto b = trainingDropout(x, 0.5f, seeded, "b");   // the seed attribute fixes the mask
  auto c = trainingDropout(x, 0.5f, attrs({{"seed", Attr::ofInt(8)}}), "a");
  auto planA = trainingDropout(x, 0.5f, AttrMap(), "a", 7);  // plan seed, stream from the node
  auto planB = trainingDropout(x, 0.5f, AttrMap(), "b", 7);
  auto planA2 = trainingDropout(x, 0.5f, AttrMap(), "a", 7);
  auto differ = [](const Tensor& p, const Tensor& q) {
    int64_t d = 0;
    for (int64_t i = 0; i < p.numel(); ++i) d += p.data<bool>()[i] != q.data<bool>()[i];
    return d;
  };
  EXPECT_EQ(differ(a[1], b[1]), 0);
  EXPECT_GT(differ(a[1], c[1]), 300);          // about half of 1000 differ
  EXPECT_GT(differ(planA[1], planB[1]), 300);  // two unseeded Dropouts draw different masks
  EXPECT_EQ(differ(planA[1], planA2[1]), 0);
  for (int64_t i = 0; i < 1000; ++i)
    EXPECT_EQ(a[0].data<double>()[i], a[1].data<bool>()[i] ? 4.0 : 0.0) << i;
}

// The counter (the training step) selects the mask: mask = f(seed, stream, counter).
TEST(RefDropout, CounterSelectsAnIndependentMask) {
  const int64_t n = 4000;
  const Tensor x = f32({n}, std::vector<float>(n, 3.0f));
  auto withCounter = [&](const Tensor& c) { return trainingDropout(x, 0.3f, AttrMap(), "d", 9, &c); };
  const Tensor c0 = f32({}, {0}), c1 = f32({}, {1}), c2 = f32({}, {2}), i2 = i64({}, {2});
  const Tensor c1e = f32({}, {1}), big = i64({}, {(int64_t)1 << 40});
  auto none = trainingDropout(x, 0.3f, AttrMap(), "d", 9);
  auto m0 = withCounter(c0), m1 = withCounter(c1), m1again = withCounter(c1e);
  auto m2 = withCounter(c2), m2i = withCounter(i2), mBig = withCounter(big);
  auto differ = [](const Tensor& p, const Tensor& q) {
    int64_t d = 0;
    for (int64_t i = 0; i < p.numel(); ++i) d += p.data<bool>()[i] != q.data<bool>()[i];
    return d;
  };
  // Independent masks keeping 70% differ in 2 * 0.3 * 0.7 = 42% of elements (~1680 of 4000).
  EXPECT_GT(differ(m1[1], m2[1]), 1400);
  EXPECT_GT(differ(m0[1], m1[1]), 1400);
  EXPECT_EQ(differ(m1[1], m1again[1]), 0);   // the same counter, the same mask
  EXPECT_EQ(differ(m2[1], m2i[1]), 0);       // f32 2 and i64 2 are one counter
  EXPECT_EQ(differ(none[1], m0[1]), 0);      // absent = counter 0 = the masks of before
  EXPECT_EQ(differ(mBig[1], m0[1]), 0);      // 2^40 = 0 mod 2^32 (documented)
  // Counter 2 is Philox's step word 2, element by element; 70% kept, scaled by 1 / 0.7.
  DropoutMask m;
  m.seed = 9;
  m.stream = fnv1a32("d", 1);
  m.step = 2;
  m.threshold = DropoutMask::thresholdFor(0.3);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(m2[1].data<bool>()[i], m.keep(i)) << i;
    kept += m2[1].data<bool>()[i];
    EXPECT_EQ(m2[0].data<float>()[i], m.keep(i) ? 3.0f * (float)(1.0 / 0.7) : 0.0f) << i;
  }
  // 2800 expected, standard deviation sqrt(4000 * 0.3 * 0.7) ~ 29.
  EXPECT_NEAR((double)kept, 2800.0, 4 * 29.0);
}

TEST(RefDropout, CounterMustBeAWholeNonNegativeScalar) {
  auto err = [](const Tensor& c) {
    OpCall call{"Dropout", {}, {f32({2}, {4, 5}), f32({}, {0.5f}), boolean({}, {true}), c},
                {{DType::F32, {2}}}};
    return errorOf(call);
  };
  EXPECT_NE(err(f32({}, {1.5f})).find("counter 1.500000 is not a non-negative whole number"),
            std::string::npos) << err(f32({}, {1.5f}));
  EXPECT_NE(err(i64({}, {-1})).find("not a non-negative whole number"), std::string::npos);
  EXPECT_NE(err(f32({2}, {1, 2})).find("counter (input 3) must be an f32 or i64 scalar, got f32"),
            std::string::npos) << err(f32({2}, {1, 2}));
  EXPECT_NE(err(i32({}, {1})).find("must be an f32 or i64 scalar, got i32"), std::string::npos);
}

TEST(RefDropout, TrainingRatioMustBeBelowOne) {
  OpCall c{"Dropout", {}, {f32({2}, {4, 5}), f32({}, {1}), boolean({}, {true})}, {{DType::F32, {2}}}};
  EXPECT_NE(errorOf(c).find("ratio 1.000000 is outside [0, 1)"), std::string::npos) << errorOf(c);
}

TEST(RefTranspose, DefaultReversesAndPerm) {
  expectValues<float>(run1("Transpose", {}, {f32({2, 3}, {1, 2, 3, 4, 5, 6})}, DType::F32, {3, 2}),
                      {3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor x = i32({2, 1, 3}, {0, 1, 2, 3, 4, 5});
  expectValues<int32_t>(
      run1("Transpose", attrs({{"perm", Attr::ofInts({1, 2, 0})}}), {x}, DType::I32, {1, 3, 2}),
      {1, 3, 2}, {0, 3, 1, 4, 2, 5});
  expectValues<bool>(run1("Transpose", {}, {boolean({1, 2}, {true, false})}, DType::Bool, {2, 1}),
                     {2, 1}, {true, false});
}

TEST(RefTranspose, BadPermFails) {
  OpCall c{"Transpose",
           attrs({{"perm", Attr::ofInts({0, 0})}}),
           {f32({2, 2}, {1, 2, 3, 4})},
           {{DType::F32, {2, 2}}}};
  EXPECT_NE(errorOf(c).find("not a permutation"), std::string::npos);
}

TEST(RefExpand, BroadcastsToTheOutput) {
  Tensor y =
      run1("Expand", {}, {f32({3, 1}, {1, 2, 3}), i64({3}, {2, 1, 2})}, DType::F32, {2, 3, 2});
  expectValues<float>(y, {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  expectValues<bool>(run1("Expand", {}, {boolean({}, {true}), i64({1}, {2})}, DType::Bool, {2}),
                     {2}, {true, true});
  expectValues<int64_t>(run1("Expand", {}, {i64({1}, {4}), i64({2}, {2, 0})}, DType::I64, {2, 0}),
                        {2, 0}, {});
}

TEST(RefShape, StartAndEnd) {
  Tensor x = f32({2, 3, 4}, std::vector<float>(24, 0));
  expectValues<int64_t>(run1("Shape", {}, {x}, DType::I64, {3}), {3}, {2, 3, 4});
  expectValues<int64_t>(run1("Shape", attrs({{"start", Attr::ofInt(1)}}), {x}, DType::I64, {2}),
                        {2}, {3, 4});
  expectValues<int64_t>(run1("Shape", attrs({{"end", Attr::ofInt(-1)}}), {x}, DType::I64, {2}), {2},
                        {2, 3});
  expectValues<int64_t>(
      run1("Shape", attrs({{"start", Attr::ofInt(-10)}, {"end", Attr::ofInt(10)}}), {x}, DType::I64,
           {3}),
      {3}, {2, 3, 4});
  expectValues<int64_t>(run1("Shape", attrs({{"start", Attr::ofInt(2)}, {"end", Attr::ofInt(1)}}),
                             {x}, DType::I64, {0}),
                        {0}, {});
}

TEST(RefConstant, EveryValueAttribute) {
  expectValues<float>(run1("Constant", attrs({{"value", Attr::ofTensor(f32({2}, {1.5f, 2}))}}), {},
                           DType::F32, {2}),
                      {2}, {1.5f, 2});
  expectValues<float>(
      run1("Constant", attrs({{"value_float", Attr::ofFloat(3)}}), {}, DType::F32, {}), {}, {3});
  expectValues<float>(
      run1("Constant", attrs({{"value_floats", Attr::ofFloats({1, 2, 3})}}), {}, DType::F32, {3}),
      {3}, {1, 2, 3});
  expectValues<int64_t>(
      run1("Constant", attrs({{"value_int", Attr::ofInt(-4)}}), {}, DType::I64, {}), {}, {-4});
  expectValues<int64_t>(
      run1("Constant", attrs({{"value_ints", Attr::ofInts({5, 6})}}), {}, DType::I64, {2}), {2},
      {5, 6});
}

TEST(RefConstant, StringValuesAreRefused) {
  OpCall c{"Constant", attrs({{"value_string", Attr::ofString("x")}}), {}, {{DType::F32, {}}}};
  EXPECT_NE(errorOf(c).find("string constants are not supported"), std::string::npos);
}

TEST(RefConstantOfShape, DefaultAndTypedValues) {
  expectValues<float>(run1("ConstantOfShape", {}, {i64({2}, {2, 2})}, DType::F32, {2, 2}), {2, 2},
                      {0, 0, 0, 0});
  expectValues<int64_t>(run1("ConstantOfShape", attrs({{"value", Attr::ofTensor(i64({1}, {7}))}}),
                             {i64({1}, {3})}, DType::I64, {3}),
                        {3}, {7, 7, 7});
  expectValues<bool>(
      run1("ConstantOfShape", attrs({{"value", Attr::ofTensor(boolean({1}, {true}))}}),
           {i64({1}, {2})}, DType::Bool, {2}),
      {2}, {true, true});
  expectValues<float>(run1("ConstantOfShape", {}, {i64({2}, {0, 3})}, DType::F32, {0, 3}), {0, 3},
                      {});
}

AttrMap to(DType t) { return attrs({{"to", Attr::ofInt(int64_t(t))}}); }

TEST(RefCast, FloatToIntegerTruncatesTowardZero) {
  expectValues<int32_t>(
      run1("Cast", to(DType::I32), {f32({4}, {1.9f, -1.9f, 0.5f, -0.5f})}, DType::I32, {4}), {4},
      {1, -1, 0, 0});
  expectValues<int64_t>(run1("Cast", to(DType::I64), {f64({2}, {1e10, -3.99})}, DType::I64, {2}),
                        {2}, {10000000000, -3});
}

TEST(RefCast, ToAndFromBool) {
  expectValues<bool>(
      run1("Cast", to(DType::Bool), {f32({4}, {0, -0.0f, 2, kNaN})}, DType::Bool, {4}), {4},
      {false, false, true, true});
  expectValues<bool>(run1("Cast", to(DType::Bool), {i64({2}, {0, -5})}, DType::Bool, {2}), {2},
                     {false, true});
  expectValues<float>(run1("Cast", to(DType::F32), {boolean({2}, {true, false})}, DType::F32, {2}),
                      {2}, {1, 0});
  expectValues<int64_t>(
      run1("Cast", to(DType::I64), {boolean({2}, {false, true})}, DType::I64, {2}), {2}, {0, 1});
}

TEST(RefCast, IntegerNarrowingWrapsAndFloatPrecision) {
  expectValues<int8_t>(run1("Cast", to(DType::I8), {i64({2}, {300, -1})}, DType::I8, {2}), {2},
                       {44, -1});
  expectValues<uint8_t>(run1("Cast", to(DType::U8), {i32({2}, {-1, 256})}, DType::U8, {2}), {2},
                        {255, 0});
  expectValues<int8_t>(run1("Cast", to(DType::I8), {u8({1}, {200})}, DType::I8, {1}), {1}, {-56});
  expectValues<float>(run1("Cast", to(DType::F32), {f64({1}, {1.0 / 3})}, DType::F32, {1}), {1},
                      {0.33333334f}, 0);
  expectValues<double>(
      run1("Cast", to(DType::F64), {i64({1}, {-9007199254740993})}, DType::F64, {1}), {1},
      {-9007199254740992.0}, 0);
  expectValues<int32_t>(run1("Cast", to(DType::I32), {f32({1}, {kNaN})}, DType::I32, {1}), {1},
                        {0});
}

TEST(RefCast, EveryPairIsRegistered) {
  const std::vector<DType> all = {DType::F32, DType::F64, DType::I32, DType::I64,
                                  DType::U8,  DType::I8,  DType::Bool};
  for (DType from : all)
    for (DType dst : all) {
      OpCall c{"Cast", to(dst), {Tensor::alloc(from, {2})}, {{dst, {2}}}};
      EXPECT_EQ(errorOf(c), "") << dtypeName(from) << " -> " << dtypeName(dst);
    }
}

TEST(RefCast, ToMustMatchTheOutput) {
  OpCall c{"Cast", to(DType::I32), {f32({1}, {1})}, {{DType::I64, {1}}}};
  EXPECT_NE(errorOf(c).find("does not match the output dtype"), std::string::npos);
}

// CastLike takes the dtype of its second input and converts as Cast does.
TEST(RefCastLike, ConvertsToTheLikeDtype) {
  expectValues<int32_t>(run1("CastLike", {}, {f32({3}, {1.9f, -1.9f, kNaN}), i32({1}, {0})},
                             DType::I32, {3}),
                        {3}, {1, -1, 0});
  expectValues<double>(run1("CastLike", {}, {i64({2}, {3, -4}), f64({1}, {0})}, DType::F64, {2}), {2},
                       {3, -4});
}

// Range's length is the plan's (from constant operands); the kernel fills start + i * delta.
TEST(RefRange, FloatAndNegativeDelta) {
  expectValues<float>(run1("Range", {}, {f32({}, {1}), f32({}, {2}), f32({}, {0.3f})}, DType::F32, {4}),
                      {4}, {1, 1.3f, 1.6f, 1.9f});
  expectValues<int32_t>(run1("Range", {}, {i32({}, {10}), i32({}, {4}), i32({}, {-3})}, DType::I32, {2}),
                        {2}, {10, 7});
  OpCall wrong{"Range", {}, {i32({}, {0}), i32({}, {5}), i32({}, {1})}, {{DType::I32, {3}}}};
  EXPECT_NE(errorOf(wrong).find("give 5 elements but the plan has 3"), std::string::npos);
}

TEST(RefEyeLikeAndSize, Values) {
  expectValues<float>(run1("EyeLike", attrs({{"k", Attr::ofInt(1)}, {"dtype", Attr::ofInt(1)}}),
                           {i32({2, 3}, {0, 0, 0, 0, 0, 0})}, DType::F32, {2, 3}),
                      {2, 3}, {0, 1, 0, 0, 0, 1});
  expectValues<int64_t>(run1("EyeLike", attrs({{"k", Attr::ofInt(-1)}}), {i64({3, 2}, {9, 9, 9, 9, 9, 9})},
                             DType::I64, {3, 2}),
                        {3, 2}, {0, 0, 1, 0, 0, 1});
  expectValues<int64_t>(run1("Size", {}, {f32({2, 3}, {1, 2, 3, 4, 5, 6})}, DType::I64, {}), {}, {6});
}

TEST(RefTrilu, UpperAndLowerWithK) {
  Tensor x = i64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  expectValues<int64_t>(run1("Trilu", {}, {x}, DType::I64, {3, 3}), {3, 3}, {1, 2, 3, 0, 5, 6, 0, 0, 9});
  expectValues<int64_t>(run1("Trilu", attrs({{"upper", Attr::ofInt(0)}}), {x, i64({}, {-1})}, DType::I64,
                             {3, 3}),
                        {3, 3}, {0, 0, 0, 4, 0, 0, 7, 8, 0});
  expectValues<int64_t>(run1("Trilu", {}, {x, i64({}, {2})}, DType::I64, {3, 3}), {3, 3},
                        {0, 0, 3, 0, 0, 0, 0, 0, 0});
}

TEST(RefCumSum, ExclusiveAndReverse) {
  Tensor x = f64({2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues<double>(run1("CumSum", {}, {x, i32({}, {1})}, DType::F64, {2, 3}), {2, 3},
                       {1, 3, 6, 4, 9, 15});
  expectValues<double>(run1("CumSum", attrs({{"exclusive", Attr::ofInt(1)}, {"reverse", Attr::ofInt(1)}}),
                            {x, i64({}, {-1})}, DType::F64, {2, 3}),
                       {2, 3}, {5, 3, 0, 11, 6, 0});
  expectValues<double>(run1("CumSum", {}, {x, i64({}, {0})}, DType::F64, {2, 3}), {2, 3},
                       {1, 2, 3, 5, 7, 9});
}

// Periodic windows divide by size, symmetric ones by size - 1 (ONNX *Window-17).
TEST(RefWindows, PeriodicAndSymmetric) {
  expectValues<float>(run1("HannWindow", {}, {i64({}, {4})}, DType::F32, {4}), {4}, {0, 0.5f, 1, 0.5f});
  expectValues<double>(run1("HannWindow", attrs({{"periodic", Attr::ofInt(0)}, {"output_datatype", Attr::ofInt(11)}}),
                            {i32({}, {3})}, DType::F64, {3}),
                       {3}, {0, 1, 0}, 1e-15);
  // Hamming: 25/46 - 21/46 cos(2 pi n / 4).
  expectValues<float>(run1("HammingWindow", {}, {i64({}, {4})}, DType::F32, {4}), {4},
                      {4.f / 46, 25.f / 46, 1, 25.f / 46});
  // Blackman at n = 1 of 4: 0.42 - 0.5 cos(pi / 2) + 0.08 cos(pi) = 0.34.
  expectValues<float>(run1("BlackmanWindow", {}, {i64({}, {4})}, DType::F32, {4}), {4},
                      {0, 0.34f, 1, 0.34f});
}

// f16 is stored as its IEEE binary16 bits; Cast rounds into it to nearest-even, once.
TEST(RefCast, ToAndFromF16) {
  Tensor y = run1("Cast", attrs({{"to", Attr::ofInt(10)}}),
                  {f32({10}, {1, -2, 0.1f, 65504, 65520, 1e-8f, 6e-8f, 2049, 2051, kNaN})}, DType::F16, {10});
  const std::vector<uint16_t> want = {0x3C00, 0xC000, 0x2E66, 0x7BFF, 0x7C00,
                                      0x0000, 0x0001, 0x6800, 0x6802, 0x7E00};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.data<uint16_t>()[i], want[i]) << i;

  Tensor h = Tensor::alloc(DType::F16, {3});
  const uint16_t bits[3] = {0x3555, 0x0001, 0xFC00};
  std::memcpy(h.raw(), bits, sizeof bits);
  expectValues<double>(run1("Cast", attrs({{"to", Attr::ofInt(11)}}), {h}, DType::F64, {3}), {3},
                       {0.333251953125, 5.960464477539063e-08, -std::numeric_limits<double>::infinity()},
                       1e-15);
  Tensor like = Tensor::alloc(DType::F16, {1});
  Tensor z = run1("CastLike", {}, {f64({2}, {0.5, -1.5}), like}, DType::F16, {2});
  EXPECT_EQ(z.data<uint16_t>()[0], 0x3800);
  EXPECT_EQ(z.data<uint16_t>()[1], 0xBE00);
}

// bf16 is the high half of an f32. Expected bits cross-checked with PyTorch's
// torch.tensor(f32).bfloat16() (round to nearest-even on the f32 bits).
float f32Bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(BFloat16, FromFloatRoundsToNearestEven) {
  EXPECT_EQ(bfloat16FromFloat(1.0f), 0x3F80);
  EXPECT_EQ(bfloat16FromFloat(0.1f), 0x3DCD);                    // 0x3DCCCCCD rounds up
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x3F808000)), 0x3F80);     // tie, even below
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x3F818000)), 0x3F82);     // tie, even above
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x3F808001)), 0x3F81);     // just above the tie
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0xBF808001)), 0xBF81);     // sign carries
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x7F7F7FFF)), 0x7F7F);     // largest bf16 3.3895e38
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x7F7F8000)), 0x7F80);     // its tie rounds to inf
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x7F7FFFFF)), 0x7F80);     // FLT_MAX -> inf
  EXPECT_EQ(bfloat16FromFloat(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(bfloat16FromFloat(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(bfloat16FromFloat(-0.0f), 0x8000);
  // f32 subnormals round like normals, in units of 2^-133.
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x00000001)), 0x0000);
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x00008000)), 0x0000);     // tie, even 0
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x00018000)), 0x0002);     // tie, even 2
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x00010000)), 0x0001);     // exact, smallest bf16
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x007FFFFF)), 0x0080);     // up into the normals
  // NaN stays NaN (quiet, same sign), even one whose payload is all in the dropped half, which
  // truncation or a carry would turn into inf.
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x7FC00000)), 0x7FC0);
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x7F800001)), 0x7FC0);
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0xFFFFFFFF)), 0xFFFF);
  EXPECT_EQ(bfloat16FromFloat(f32Bits(0x7FA00000)), 0x7FE0);     // payload top kept
}

TEST(BFloat16, ToFloatIsExact) {
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x3F80)), 0x3F800000u);
  EXPECT_EQ(bfloat16ToFloat(0x0001), std::ldexp(1.0f, -133));    // smallest subnormal
  EXPECT_EQ(bfloat16ToFloat(0x7F7F), 3.3895313892515355e38f);
  EXPECT_EQ(bfloat16ToFloat(0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x7FE1)), 0x7FE10000u);       // NaN payload kept
  // Every bf16 survives the round trip bit for bit (NaNs are quiet already: 0x40 set).
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = uint16_t(b);
    const bool quietOrNotNaN = (h & 0x7F80) != 0x7F80 || (h & 0x7F) == 0 || (h & 0x40);
    if (quietOrNotNaN) ASSERT_EQ(bfloat16FromFloat(bfloat16ToFloat(h)), h) << b;
    ASSERT_EQ(bfloat16FromDouble(double(bfloat16ToFloat(h))) & 0x7FFF,
              std::isnan(bfloat16ToFloat(h)) ? (h | 0x40) & 0x7FFF : h & 0x7FFF)
        << b;
  }
}

TEST(BFloat16, FromDoubleRoundsOnce) {
  // 1 + 2^-8 + 2^-40 is above the tie between 0x3F80 and 0x3F81: rounding once gives 0x3F81;
  // through f32 (as PyTorch's f64.bfloat16() does) the 2^-40 is lost and the tie goes to 0x3F80.
  EXPECT_EQ(bfloat16FromDouble(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), 0x3F81);
  EXPECT_EQ(bfloat16FromDouble(1.0 + std::ldexp(1.0, -8)), 0x3F80);
  EXPECT_EQ(bfloat16FromDouble(0.1), 0x3DCD);
  EXPECT_EQ(bfloat16FromDouble(1e300), 0x7F80);
  EXPECT_EQ(bfloat16FromDouble(-1e300), 0xFF80);
  EXPECT_EQ(bfloat16FromDouble(3.3895313892515355e38), 0x7F7F);
  EXPECT_EQ(bfloat16FromDouble(std::ldexp(1.0, -133)), 0x0001);
  EXPECT_EQ(bfloat16FromDouble(std::ldexp(1.0, -134)), 0x0000);   // tie with 0, even
  EXPECT_EQ(bfloat16FromDouble(std::ldexp(3.0, -134)), 0x0002);   // tie, even 2
  EXPECT_EQ(bfloat16FromDouble(std::ldexp(1.0, -134) * 1.0000001), 0x0001);
  EXPECT_EQ(bfloat16FromDouble(std::numeric_limits<double>::quiet_NaN()) & 0x7FC0, 0x7FC0);
}

// Cast into and out of bf16 through the CPU reference kernels.
TEST(RefCast, ToAndFromBF16) {
  Tensor y = run1("Cast", attrs({{"to", Attr::ofInt(16)}}),
                  {f32({6}, {1, 0.1f, f32Bits(0x3F808000), f32Bits(0x3F818000), 1e39f, kNaN})},
                  DType::BF16, {6});
  const std::vector<uint16_t> want = {0x3F80, 0x3DCD, 0x3F80, 0x3F82, 0x7F80, 0x7FC0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.data<uint16_t>()[i], want[i]) << i;

  Tensor b = Tensor::alloc(DType::BF16, {4});
  const uint16_t bits[4] = {0x3EAB, 0x0001, 0xFF80, 0xC2F7};
  std::memcpy(b.raw(), bits, sizeof bits);
  expectValues<double>(run1("Cast", attrs({{"to", Attr::ofInt(11)}}), {b}, DType::F64, {4}), {4},
                       {0.333984375, std::ldexp(1.0, -133),
                        -std::numeric_limits<double>::infinity(), -123.5},
                       0);
  expectValues<int64_t>(run1("Cast", attrs({{"to", Attr::ofInt(7)}}), {b}, DType::I64, {4}), {4},
                        {0, 0, std::numeric_limits<int64_t>::min(), -123});
  // f64 -> bf16 rounds once (see FromDoubleRoundsOnce); bf16 -> f16 rounds the exact value.
  Tensor d = run1("Cast", attrs({{"to", Attr::ofInt(16)}}),
                  {f64({1}, {1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)})}, DType::BF16, {1});
  EXPECT_EQ(d.data<uint16_t>()[0], 0x3F81);
  Tensor h = run1("Cast", attrs({{"to", Attr::ofInt(10)}}), {b}, DType::F16, {4});
  const std::vector<uint16_t> wantH = {0x3558, 0x0000, 0xFC00, 0xD7B8};  // 1/3ish, 0, -inf, -123.5
  for (size_t i = 0; i < wantH.size(); ++i) EXPECT_EQ(h.data<uint16_t>()[i], wantH[i]) << i;
  Tensor like = Tensor::alloc(DType::BF16, {1});
  Tensor z = run1("CastLike", {}, {f64({2}, {0.5, -1.5}), like}, DType::BF16, {2});
  EXPECT_EQ(z.data<uint16_t>()[0], 0x3F00);
  EXPECT_EQ(z.data<uint16_t>()[1], 0xBFC0);
}

// Max, Min and Mod read bf16 through their f32 kernels, exactly.
TEST(RefCast, MaxOnBF16) {
  Tensor a = Tensor::alloc(DType::BF16, {3}), c = Tensor::alloc(DType::BF16, {3});
  const uint16_t av[3] = {0x3F80, 0xC000, 0x7FC0}, cv[3] = {0x3F81, 0xC040, 0x3F80};
  std::memcpy(a.raw(), av, sizeof av);
  std::memcpy(c.raw(), cv, sizeof cv);
  Tensor m = run1("Max", {}, {a, c}, DType::BF16, {3});
  EXPECT_EQ(m.data<uint16_t>()[0], 0x3F81);
  EXPECT_EQ(m.data<uint16_t>()[1], 0xC000);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(m.data<uint16_t>()[2])));
}

}  // namespace
}  // namespace tandem
