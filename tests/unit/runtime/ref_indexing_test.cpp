// Tests of the reference indexing kernels: Concat, Split, Slice (negative/out-of-range/INT64_MAX
// bounds, negative steps), Gather (negative indices), Pad (constant/reflect/edge/wrap, negative
// pads, axes), Tile, and the threaded paths of ScatterElements and Expand/Transpose against
// sequential loops; EmbeddingBag (modes, per-sample weights, Slice-style bounds, empty bags,
// NaN, bad indices, threads) against the Slice -> Gather -> Reduce loop it replaces.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

const int64_t kMax = std::numeric_limits<int64_t>::max();
const int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(RefConcat, AxesAndEmptyInputs) {
  Tensor a = f32({2, 1}, {1, 2}), b = f32({2, 2}, {3, 4, 5, 6}), e = f32({2, 0}, {});
  expectValues<float>(
      run1("Concat", attrs({{"axis", Attr::ofInt(1)}}), {a, e, b}, DType::F32, {2, 3}), {2, 3},
      {1, 3, 4, 2, 5, 6});
  expectValues<float>(
      run1("Concat", attrs({{"axis", Attr::ofInt(-2)}}), {b, b}, DType::F32, {4, 2}), {4, 2},
      {3, 4, 5, 6, 3, 4, 5, 6});
  expectValues<bool>(run1("Concat", attrs({{"axis", Attr::ofInt(0)}}),
                          {boolean({1}, {true}), boolean({2}, {false, true})}, DType::Bool, {3}),
                     {3}, {true, false, true});
}

TEST(RefConcat, MismatchedInputFails) {
  OpCall c{"Concat",
           attrs({{"axis", Attr::ofInt(1)}}),
           {f32({2, 1}, {1, 2}), f32({3, 1}, {1, 2, 3})},
           {{DType::F32, {2, 2}}}};
  EXPECT_NE(errorOf(c).find("does not fit the output"), std::string::npos);
}

TEST(RefSplit, VariableAndEqualParts) {
  Tensor x = i64({6}, {1, 2, 3, 4, 5, 6});
  OpCall var{"Split", {}, {x, i64({2}, {2, 4})}, {{DType::I64, {2}}, {DType::I64, {4}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(var.run(&outs).isOk());
  expectValues<int64_t>(outs[0], {2}, {1, 2});
  expectValues<int64_t>(outs[1], {4}, {3, 4, 5, 6});
  // No split input: equal parts, as many as there are outputs.
  OpCall eq{"Split", {}, {x}, {{DType::I64, {2}}, {DType::I64, {2}}, {DType::I64, {2}}}};
  ASSERT_TRUE(eq.run(&outs).isOk());
  expectValues<int64_t>(outs[2], {2}, {5, 6});
}

// Large enough to split over two threads (a transformer's qkv [32, 64, 768] along the last
// axis into three, and back): every element where it belongs, on 1 and 2 threads alike.
TEST(RefSplit, ThreadedSplitAndConcatMoveEveryElement) {
  const int64_t N = 32, T = 64, D = 256;
  std::vector<float> v((size_t)(N * T * 3 * D));
  std::iota(v.begin(), v.end(), 0.f);
  const Tensor x = f32({N, T, 3 * D}, v);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    OpCall split{"Split", attrs({{"axis", Attr::ofInt(2)}}), {x},
                 {{DType::F32, {N, T, D}}, {DType::F32, {N, T, D}}, {DType::F32, {N, T, D}}}};
    split.threads = threads;
    std::vector<Tensor> parts;
    ASSERT_TRUE(split.run(&parts).isOk());
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t r = 0; r < N * T; r += 97)
        for (int64_t d = 0; d < D; d += 31)
          ASSERT_EQ(parts[k].data<float>()[r * D + d], v[(size_t)(r * 3 * D + k * D + d)]) << k << " " << r << " " << d;
    OpCall concat{"Concat", attrs({{"axis", Attr::ofInt(-1)}}), parts, {{DType::F32, {N, T, 3 * D}}}};
    concat.threads = threads;
    std::vector<Tensor> back;
    ASSERT_TRUE(concat.run(&back).isOk());
    EXPECT_EQ(std::memcmp(back[0].raw(), x.raw(), x.bytes()), 0);
  }
}

TEST(RefSplit, InnerAxisAndZeroSizedPart) {
  Tensor x = f32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  OpCall c{"Split",
           attrs({{"axis", Attr::ofInt(-1)}}),
           {x, i64({3}, {1, 0, 3})},
           {{DType::F32, {2, 1}}, {DType::F32, {2, 0}}, {DType::F32, {2, 3}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<float>(outs[0], {2, 1}, {0, 4});
  expectValues<float>(outs[1], {2, 0}, {});
  expectValues<float>(outs[2], {2, 3}, {1, 2, 3, 5, 6, 7});
}

TEST(RefSplit, SplitInputDisagreeingWithOutputsFails) {
  OpCall c{"Split",
           {},
           {f32({4}, {1, 2, 3, 4}), i64({2}, {1, 3})},
           {{DType::F32, {2}}, {DType::F32, {2}}}};
  EXPECT_NE(errorOf(c).find("disagrees"), std::string::npos);
}

Tensor range10() { return i32({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}); }

TEST(RefSlice, Basic2D) {
  Tensor x = f32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  expectValues<float>(
      run1("Slice", {}, {x, i64({2}, {0, 1}), i64({2}, {2, 3})}, DType::F32, {2, 2}), {2, 2},
      {1, 2, 5, 6});
  // Negative axis, i32 operands, given as load-time constants.
  expectValues<float>(run1("Slice", {}, {x, i32({1}, {1}), i32({1}, {3}), i32({1}, {-1})},
                           DType::F32, {2, 2}, /*constInputs=*/true),
                      {2, 2}, {1, 2, 5, 6});
  expectValues<float>(
      run1("Slice", {}, {x, i64({1}, {0}), i64({1}, {4}), i64({1}, {1}), i64({1}, {2})}, DType::F32,
           {2, 2}),
      {2, 2}, {0, 2, 4, 6});
}

// Slice and Pad say they read their shape operands at run time (Kernel::readsShapeOperandsAtRun:
// the eager executor then keeps one kernel for every value giving the same types): made with
// one set of constant operands, each runs on other values of the same types and gives those
// values' result, not the constants'. (Tile says so too, but its repeats are fixed by its
// operand and result shapes.)
TEST(RefShapeOperands, ReadAtRunWhereTheKernelSaysSo) {
  struct Case {
    OpCall made;                    // constant operands: what the kernel is created with
    std::vector<Tensor> runWith;    // operands of the run: same types, other values
    std::vector<float> want;
  };
  Tensor x = f32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  std::vector<Case> cases;
  cases.push_back({OpCall{"Slice", {}, {x, i64({1}, {0}), i64({1}, {2}), i64({1}, {1})}, {{DType::F32, {2, 2}}}, true},
                   {x, i64({1}, {2}), i64({1}, {4}), i64({1}, {1})},
                   {2, 3, 6, 7}});
  cases.push_back({OpCall{"Pad", {}, {x, i64({4}, {0, 1, 0, 0})}, {{DType::F32, {2, 5}}}, true},
                   {x, i64({4}, {0, 0, 0, 1})},
                   {0, 1, 2, 3, 0, 4, 5, 6, 7, 0}});
  for (Case& c : cases) {
    SCOPED_TRACE(c.made.op);
    std::unique_ptr<Kernel> k;
    ASSERT_TRUE(c.made.create(&k).isOk());
    ASSERT_TRUE(k->readsShapeOperandsAtRun());
    Tensor y = Tensor::alloc(c.made.outputs[0].dtype, c.made.outputs[0].shape);
    std::vector<const Tensor*> ins;
    for (const Tensor& t : c.runWith) ins.push_back(&t);
    Status st = k->run(ins, {&y});
    ASSERT_TRUE(st.isOk()) << st.message();
    expectValues<float>(y, c.made.outputs[0].shape, c.want);
  }
  // A kernel that bakes the values in says so: Gather's reference kernel (no shape operand)
  // keeps the default.
  std::unique_ptr<Kernel> g;
  ASSERT_TRUE((OpCall{"Gather", {}, {x, i64({1}, {1})}, {{DType::F32, {1, 4}}}, true}).create(&g).isOk());
  EXPECT_FALSE(g->readsShapeOperandsAtRun());
}

TEST(RefSlice, OutOfRangeAndInt64MaxEnds) {
  expectValues<int32_t>(
      run1("Slice", {}, {range10(), i64({1}, {7}), i64({1}, {kMax})}, DType::I32, {3}), {3},
      {7, 8, 9});
  expectValues<int32_t>(
      run1("Slice", {}, {range10(), i64({1}, {-3}), i64({1}, {1000})}, DType::I32, {3}), {3},
      {7, 8, 9});
  expectValues<int32_t>(
      run1("Slice", {}, {range10(), i64({1}, {20}), i64({1}, {30})}, DType::I32, {0}), {0}, {});
  expectValues<int32_t>(
      run1("Slice", {}, {range10(), i64({1}, {-100}), i64({1}, {2})}, DType::I32, {2}), {2},
      {0, 1});
}

TEST(RefSlice, NegativeSteps) {
  expectValues<int32_t>(
      run1("Slice", {}, {range10(), i64({1}, {8}), i64({1}, {1}), i64({1}, {0}), i64({1}, {-3})},
           DType::I32, {3}),
      {3}, {8, 5, 2});
  // Whole axis reversed: start past the end clamps to the last element, end INT64_MIN to "-1".
  expectValues<int32_t>(
      run1("Slice", {},
           {range10(), i64({1}, {kMax}), i64({1}, {kMin}), i64({1}, {0}), i64({1}, {-1})},
           DType::I32, {10}),
      {10}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  expectValues<int32_t>(
      run1("Slice", {}, {range10(), i64({1}, {-1}), i64({1}, {-4}), i64({1}, {0}), i64({1}, {-1})},
           DType::I32, {3}),
      {3}, {9, 8, 7});
}

TEST(RefSlice, ConstantOperandsMayBeOmittedAtRunTime) {
  // Created with starts/ends as load-time constants, run with nullptr in their places.
  OpCall c{"Slice", {}, {range10(), i64({1}, {2}), i64({1}, {5})}, {{DType::I32, {3}}}, true};
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(c.create(&k).isOk());
  Tensor x = range10(), y = Tensor::alloc(DType::I32, {3});
  ASSERT_TRUE(k->run({&x, nullptr, nullptr}, {&y}).isOk());
  expectValues<int32_t>(y, {3}, {2, 3, 4});
}

TEST(RefSlice, BadOperandsFail) {
  OpCall step0{"Slice",
               {},
               {range10(), i64({1}, {0}), i64({1}, {5}), i64({1}, {0}), i64({1}, {0})},
               {{DType::I32, {5}}}};
  EXPECT_NE(errorOf(step0).find("steps must not be 0"), std::string::npos);
  OpCall shape{"Slice", {}, {range10(), i64({1}, {0}), i64({1}, {5})}, {{DType::I32, {4}}}};
  EXPECT_NE(errorOf(shape).find("has shape"), std::string::npos);
}

TEST(RefGather, AxisZeroAndNegativeIndices) {
  Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  expectValues<float>(run1("Gather", {}, {x, i64({2}, {2, 0})}, DType::F32, {2, 2}), {2, 2},
                      {5, 6, 1, 2});
  expectValues<float>(run1("Gather", {}, {x, i32({2, 1}, {-1, -3})}, DType::F32, {2, 1, 2}),
                      {2, 1, 2}, {5, 6, 1, 2});
}

TEST(RefGather, InnerAxisAndScalarIndex) {
  Tensor x = i64({2, 3}, {0, 1, 2, 3, 4, 5});
  expectValues<int64_t>(
      run1("Gather", attrs({{"axis", Attr::ofInt(1)}}), {x, i64({}, {1})}, DType::I64, {2}), {2},
      {1, 4});
  expectValues<int64_t>(
      run1("Gather", attrs({{"axis", Attr::ofInt(-1)}}), {x, i64({2}, {2, 2})}, DType::I64, {2, 2}),
      {2, 2}, {2, 2, 5, 5});
}

TEST(RefGather, OutOfRangeIndexFails) {
  OpCall c{"Gather", {}, {f32({3}, {1, 2, 3}), i64({1}, {3})}, {{DType::F32, {1}}}};
  EXPECT_NE(errorOf(c).find("index 3 is out of range"), std::string::npos);
}

TEST(RefPad, ConstantMode) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  expectValues<float>(run1("Pad", {}, {x, i64({4}, {1, 0, 0, 1})}, DType::F32, {3, 3}), {3, 3},
                      {0, 0, 0, 1, 2, 0, 3, 4, 0});
  expectValues<float>(
      run1("Pad", {}, {x, i64({4}, {0, 1, 0, 0}), f32({}, {9})}, DType::F32, {2, 3}), {2, 3},
      {9, 1, 2, 9, 3, 4});
  expectValues<bool>(run1("Pad", {}, {boolean({1}, {true}), i64({2}, {1, 1})}, DType::Bool, {3}),
                     {3}, {false, true, false});
}

TEST(RefPad, ReflectEdgeWrap) {
  Tensor x = f32({3}, {1, 2, 3});
  expectValues<float>(run1("Pad", attrs({{"mode", Attr::ofString("reflect")}}),
                           {x, i64({2}, {2, 2})}, DType::F32, {7}),
                      {7}, {3, 2, 1, 2, 3, 2, 1});
  expectValues<float>(run1("Pad", attrs({{"mode", Attr::ofString("edge")}}), {x, i64({2}, {2, 1})},
                           DType::F32, {6}),
                      {6}, {1, 1, 1, 2, 3, 3});
  expectValues<float>(run1("Pad", attrs({{"mode", Attr::ofString("wrap")}}), {x, i64({2}, {1, 2})},
                           DType::F32, {6}),
                      {6}, {3, 1, 2, 3, 1, 2});
  // Pads wider than the input reflect again, like numpy.pad.
  expectValues<int32_t>(run1("Pad", attrs({{"mode", Attr::ofString("reflect")}}),
                             {i32({2}, {1, 2}), i64({2}, {3, 0})}, DType::I32, {5}),
                        {5}, {2, 1, 2, 1, 2});
}

// A 4-D pad of every dim, large enough to be split across two threads by rows, against
// per-element index arithmetic: outer rows that are padding (constant) or reflected, and each
// row's interior copied in one run between its reflected or constant ends.
TEST(RefPad, FourDimsThreadedMatchesPerElementIndexing) {
  const Shape xs{3, 40, 130, 9};
  const std::vector<int64_t> pb{1, 2, 3, 2}, pe{0, 1, 2, 4};
  std::vector<float> xv(numElements(xs));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(i % 1009) - 500.f;
  Shape ys(4);
  for (int d = 0; d < 4; ++d) ys[d] = xs[d] + pb[d] + pe[d];
  std::vector<int64_t> pads(pb);
  pads.insert(pads.end(), pe.begin(), pe.end());
  for (const char* mode : {"constant", "reflect"}) {
    SCOPED_TRACE(mode);
    OpCall c{"Pad", attrs({{"mode", Attr::ofString(mode)}}),
             {f32(xs, xv), i64({8}, pads), f32({}, {7.5f})}, {{DType::F32, ys}}};
    c.threads = 2;
    std::vector<Tensor> outs;
    ASSERT_TRUE(c.run(&outs).isOk());
    const float* y = outs[0].data<float>();
    int64_t i = 0, bad = 0;
    for (int64_t a = 0; a < ys[0]; ++a)
      for (int64_t b = 0; b < ys[1]; ++b)
        for (int64_t h = 0; h < ys[2]; ++h)
          for (int64_t w = 0; w < ys[3]; ++w, ++i) {
            const int64_t o[4] = {a, b, h, w};
            int64_t off = 0;
            bool pad = false;
            for (int d = 0; d < 4; ++d) {
              int64_t s = o[d] - pb[d];
              if (s < 0 || s >= xs[d]) {
                pad = true;
                s = s < 0 ? -s : 2 * (xs[d] - 1) - s;  // reflect (pads < the dim here)
              }
              off = off * xs[d] + s;
            }
            const float want = pad && std::string(mode) == "constant" ? 7.5f : xv[off];
            if (y[i] != want && bad++ < 5) ADD_FAILURE() << "element " << i << ": " << y[i] << " != " << want;
          }
    EXPECT_EQ(bad, 0);
  }
}

TEST(RefPad, NegativePadsCropAndAxes) {
  expectValues<float>(run1("Pad", {}, {f32({4}, {1, 2, 3, 4}), i64({2}, {-1, 1})}, DType::F32, {4}),
                      {4}, {2, 3, 4, 0});
  expectValues<float>(
      run1("Pad", {}, {f32({2, 2}, {1, 2, 3, 4}), i64({2}, {1, 1}), none(), i64({1}, {-1})},
           DType::F32, {2, 4}),
      {2, 4}, {0, 1, 2, 0, 0, 3, 4, 0});
}

TEST(RefPad, UnknownModeFails) {
  OpCall c{"Pad",
           attrs({{"mode", Attr::ofString("symmetric")}}),
           {f32({1}, {1}), i64({2}, {0, 0})},
           {{DType::F32, {1}}}};
  EXPECT_NE(errorOf(c).find("mode='symmetric'"), std::string::npos);
}

TEST(RefTile, Repeats) {
  expectValues<float>(run1("Tile", {}, {f32({2}, {1, 2}), i64({1}, {3})}, DType::F32, {6}), {6},
                      {1, 2, 1, 2, 1, 2});
  expectValues<int8_t>(run1("Tile", {}, {i8({2, 1}, {5, 6}), i64({2}, {2, 2})}, DType::I8, {4, 2}),
                       {4, 2}, {5, 5, 6, 6, 5, 5, 6, 6});
  expectValues<float>(run1("Tile", {}, {f32({2}, {1, 2}), i64({1}, {0})}, DType::F32, {0}), {0},
                      {});
}

// ScatterElements with indices as large as the data but along the axis (MultiScaleRoIAlign's
// level merge, threaded over the non-axis positions): duplicates and negative indices resolve
// as one sequential row-major pass does, for reduction none and add, on 1 and 2 threads; and
// along an inner axis (the non-aligned walk) too.
TEST(RefScatterElements, ThreadedScatterMatchesTheSequentialRule) {
  const int64_t D = 5, P = 7, C = 256, S = 196;
  std::vector<float> data(D * C * S), upd(P * C * S);
  std::vector<int64_t> idx(P * C * S);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i % 97) * 0.5f;
  for (size_t i = 0; i < upd.size(); ++i) upd[i] = float(i % 89) - 40.f;
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t((i * 2654435761u) % (2 * D)) - D;  // [-D, D)
  const Tensor x = Tensor::fromVector<float>({D, C, S}, data), u = Tensor::fromVector<float>({P, C, S}, upd);
  const Tensor ix = Tensor::fromVector<int64_t>({P, C, S}, idx);
  for (const char* reduction : {"none", "add"}) {
    std::vector<float> want = data;
    for (int64_t j = 0; j < P; ++j)
      for (int64_t r = 0; r < C * S; ++r) {
        int64_t k = idx[j * C * S + r];
        if (k < 0) k += D;
        float& y = want[k * C * S + r];
        y = std::string(reduction) == "add" ? y + upd[j * C * S + r] : upd[j * C * S + r];
      }
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(reduction) + " threads " + std::to_string(threads));
      OpCall c{"ScatterElements",
               attrs({{"axis", Attr::ofInt(0)}, {"reduction", Attr::ofString(reduction)}}),
               {x, ix, u},
               {{DType::F32, {D, C, S}}}};
      c.threads = threads;
      std::vector<Tensor> outs;
      Status st = c.run(&outs);
      ASSERT_TRUE(st.isOk()) << st.message();
      ASSERT_EQ(0, std::memcmp(outs[0].raw(), want.data(), want.size() * sizeof(float)));
    }
  }
  // Along axis 1 with indices narrower than the data in dim 0: the general walk.
  const Tensor x2 = Tensor::fromVector<float>({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Tensor i2 = Tensor::fromVector<int64_t>({2, 2}, {3, -4, 0, 0});
  const Tensor u2 = Tensor::fromVector<float>({2, 2}, {100, 200, 300, 400});
  expectValues<float>(run1("ScatterElements", attrs({{"axis", Attr::ofInt(1)}}), {x2, i2, u2}, DType::F32, {3, 4}),
                      {3, 4}, {200, 1, 2, 100, 400, 5, 6, 7, 8, 9, 10, 11});
  OpCall bad{"ScatterElements", attrs({{"axis", Attr::ofInt(0)}}),
             {x, Tensor::fromVector<int64_t>({P, C, S}, std::vector<int64_t>(P * C * S, D)), u},
             {{DType::F32, {D, C, S}}}};
  bad.threads = 2;
  EXPECT_NE(errorOf(bad).find("out of range"), std::string::npos);
}

// Expand and Transpose gather rows of merged runs (memcpy, fill or strided) over threads:
// against the naive strided definition, large enough to split.
TEST(RefStridedGather, ExpandAndTransposeMatchTheNaiveLoop) {
  const Tensor col = Tensor::fromVector<int64_t>({6, 1, 1, 1}, {5, -1, 7, 0, 3, 9});
  for (int threads : {1, 2}) {
    OpCall e{"Expand", {}, {col, Tensor::fromVector<int64_t>({4}, {6, 256, 7, 7})}, {{DType::I64, {6, 256, 7, 7}}}};
    e.threads = threads;
    std::vector<Tensor> outs;
    ASSERT_TRUE(e.run(&outs).isOk());
    for (int64_t i = 0; i < outs[0].numel(); ++i)
      ASSERT_EQ(outs[0].data<int64_t>()[i], col.data<int64_t>()[i / (256 * 49)]) << i;
    // A middle broadcast: [3, 1, 5] -> [3, 4000, 5] (stride-1 runs of 5).
    std::vector<float> v(15);
    for (int i = 0; i < 15; ++i) v[i] = float(i);
    OpCall m{"Expand", {}, {Tensor::fromVector<float>({3, 1, 5}, v), Tensor::fromVector<int64_t>({3}, {3, 4000, 5})},
             {{DType::F32, {3, 4000, 5}}}};
    m.threads = threads;
    ASSERT_TRUE(m.run(&outs).isOk());
    for (int64_t i = 0; i < outs[0].numel(); ++i)
      ASSERT_EQ(outs[0].data<float>()[i], v[(i / 20000) * 5 + i % 5]) << i;
    // Transpose [2, 300, 200] by (2, 0, 1): strided runs.
    std::vector<float> t(2 * 300 * 200);
    for (size_t i = 0; i < t.size(); ++i) t[i] = float(i);
    OpCall tr{"Transpose", attrs({{"perm", Attr::ofInts({2, 0, 1})}}), {Tensor::fromVector<float>({2, 300, 200}, t)},
              {{DType::F32, {200, 2, 300}}}};
    tr.threads = threads;
    ASSERT_TRUE(tr.run(&outs).isOk());
    for (int64_t c = 0; c < 200; ++c)
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t b = 0; b < 300; ++b)
          ASSERT_EQ(outs[0].data<float>()[(c * 2 + a) * 300 + b], t[(a * 300 + b) * 200 + c]);
  }
}

// TopK's k-of-many scan (k < n / 8: a heap of the k best) against a full stable sort: many ties
// (values on a coarse grid), largest and smallest, and a row with a NaN (the sorting path).
TEST(RefTopK, HeapSelectionMatchesTheFullOrder) {
  const int64_t n = 50000, k = 100;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = float((i * 7919) % 1000) * 0.25f;  // each value 50 times
  for (bool largest : {true, false}) {
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return largest ? v[a] > v[b] : v[a] < v[b];
    });
    OpCall c{"TopK", attrs({{"largest", Attr::ofInt(largest ? 1 : 0)}}),
             {Tensor::fromVector<float>({1, n}, v), Tensor::fromVector<int64_t>({1}, {k})},
             {{DType::F32, {1, k}}, {DType::I64, {1, k}}}};
    std::vector<Tensor> outs;
    ASSERT_TRUE(c.run(&outs).isOk());
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(outs[1].data<int64_t>()[j], order[j]) << j;
      EXPECT_EQ(outs[0].data<float>()[j], v[order[j]]) << j;
    }
  }
  std::vector<float> w = v;
  w[3] = std::numeric_limits<float>::quiet_NaN();
  OpCall c{"TopK", {}, {Tensor::fromVector<float>({n}, w), Tensor::fromVector<int64_t>({1}, {k})},
           {{DType::F32, {k}}, {DType::I64, {k}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  // Each value 50 times: the top 100 are 50 x 249.75 then 50 x 249.5 (the NaN among neither).
  EXPECT_EQ(outs[0].data<float>()[0], 249.75f);
  EXPECT_EQ(outs[0].data<float>()[k - 1], 249.5f);
}

// NonZero split over threads (chunks counted, then filled from their offsets): rank 1 (the
// bit-mask fill) and rank 3, against one sequential pass; sized by the kernel (unknown dim)
// through the context's result allocator.
TEST(RefNonZero, ThreadedChunksKeepRowMajorOrder) {
  for (const Shape& shape : {Shape{300001}, Shape{7, 211, 203}}) {
    const int64_t total = numElements(shape);
    std::vector<float> x(total);
    for (int64_t i = 0; i < total; ++i) x[i] = ((i * 2654435761u) >> 7) % 3 == 0 ? 1.f : 0.f;
    std::vector<std::vector<int64_t>> want(shape.size());
    for (int64_t i = 0; i < total; ++i) {
      if (x[i] == 0) continue;
      for (int64_t d = (int64_t)shape.size() - 1, rem = i; d >= 0; --d) {
        want[d].push_back(rem % shape[d]);
        rem /= shape[d];
      }
    }
    OpCall c{"NonZero", {}, {Tensor::fromVector<float>(shape, x)}, {{DType::I64, {(int64_t)shape.size(), -1}}}};
    c.threads = 2;
    // A region's allocator hands out uninitialised memory: poisoned here, every entry written.
    int allocations = 0;
    c.allocResult = [&](DType dt, const Shape& s, const std::string& what, Tensor* out) {
      ++allocations;
      Status st = Tensor::tryAlloc(dt, s, what, out);
      if (st.isOk()) std::memset(out->raw(), 0x5a, out->bytes());
      return st;
    };
    std::unique_ptr<Kernel> kernel;
    ASSERT_TRUE(c.create(&kernel).isOk());
    Tensor y;
    const Tensor in = c.inputs[0];
    ASSERT_TRUE(kernel->run({&in}, {&y}).isOk());
    const int64_t got = (int64_t)want[0].size();
    EXPECT_EQ(allocations, 1);
    ASSERT_EQ(y.shape(), (Shape{(int64_t)shape.size(), got}));
    for (size_t d = 0; d < shape.size(); ++d)
      for (int64_t j = 0; j < got; ++j) ASSERT_EQ(y.data<int64_t>()[d * got + j], want[d][j]) << d << " " << j;
  }
}

// ---- EmbeddingBag: what torch.onnx's Loop computes, bag by bag -----------------------------

/// The Loop's arithmetic for bag m: Slice(indices, starts[m], ends[m]) -> Gather(weight) ->
/// [* per-sample weight] -> ReduceSum / ReduceMean / ReduceMax over axis 0 (f64 sums).
std::vector<float> loopOfBags(const std::vector<float>& w, int64_t V, int64_t D,
                              const std::vector<int64_t>& idx, const std::vector<int64_t>& starts,
                              const std::vector<int64_t>& ends, const std::vector<float>* psw,
                              const std::string& mode) {
  const int64_t L = (int64_t)idx.size();
  auto bound = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + L : v, 0, L); };
  std::vector<float> y;
  for (size_t m = 0; m < starts.size(); ++m) {
    const int64_t s = bound(starts[m]), e = bound(ends[m]);
    for (int64_t d = 0; d < D; ++d) {
      double acc = mode == "max" ? -INFINITY : 0.0;
      for (int64_t j = s; j < e; ++j) {
        const int64_t r = idx[j] < 0 ? idx[j] + V : idx[j];
        const float v = psw ? float(w[r * D + d] * (*psw)[j]) : w[r * D + d];
        if (mode == "max") {
          if (!std::isnan(acc) && (std::isnan(v) || v > acc)) acc = v;
        } else {
          acc += v;
        }
      }
      if (mode == "mean") acc /= double(e > s ? e - s : 0);
      y.push_back(float(acc));
    }
  }
  return y;
}

AttrMap bagMode(const char* mode) { return attrs({{"mode", Attr::ofString(mode)}}); }

TEST(RefEmbeddingBag, ModesAndPerSampleWeightsMatchTheLoop) {
  const int64_t V = 5, D = 3;
  std::vector<float> w;
  for (int64_t i = 0; i < V * D; ++i) w.push_back(0.25f * float(i) - 1.5f);
  // Bags [0, 2), [2, 5), [5, 6), and [1, 4) overlapping the others; index -1 is row 4.
  const std::vector<int64_t> idx = {0, 4, 2, -1, 3, 1}, starts = {0, 2, 5, 1}, ends = {2, 5, 6, 4};
  const std::vector<float> psw = {0.5f, 2.f, -1.f, 1.5f, 3.f, -0.25f};
  for (const char* mode : {"sum", "mean", "max"}) {
    SCOPED_TRACE(mode);
    std::vector<Tensor> in = {f32({V, D}, w), i64({6}, idx), i64({4}, starts), i64({4}, ends)};
    expectValues<float>(run1("EmbeddingBag", bagMode(mode), in, DType::F32, {4, D}), {4, D},
                        loopOfBags(w, V, D, idx, starts, ends, nullptr, mode));
    in.push_back(f32({6}, psw));
    expectValues<float>(run1("EmbeddingBag", bagMode(mode), in, DType::F32, {4, D}), {4, D},
                        loopOfBags(w, V, D, idx, starts, ends, &psw, mode));
  }
  // Sum of bag 1 by hand: rows 2, 4 and 3.
  Tensor y = run1("EmbeddingBag", {}, {f32({V, D}, w), i64({6}, idx), i64({4}, starts), i64({4}, ends)},
                  DType::F32, {4, D});
  ASSERT_TRUE(y.defined());
  EXPECT_FLOAT_EQ(y.data<float>()[3], w[6] + w[12] + w[9]);
}

TEST(RefEmbeddingBag, BoundsAreSlicesAndEmptyBagsReduceNothing) {
  // starts/ends as Slice reads them on [0, 4): -3 is 1, 99 is clamped to 4, -99 to 0; the last
  // two bags are empty (start past end, and both clamped to 4).
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};  // [3, 2]
  const std::vector<int64_t> idx = {2, 0, 1, 2}, starts = {-3, -99, 3, 7}, ends = {99, 1, 2, 9};
  std::vector<Tensor> in = {f32({3, 2}, w), i32({4}, {2, 0, 1, 2}), i32({4}, {-3, -99, 3, 7}),
                            i64({4}, ends)};
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  expectValues<float>(run1("EmbeddingBag", bagMode("sum"), in, DType::F32, {4, 2}), {4, 2},
                      {1 + 3 + 5, 2 + 4 + 6, 5, 6, 0, 0, 0, 0});
  expectValues<float>(run1("EmbeddingBag", bagMode("mean"), in, DType::F32, {4, 2}), {4, 2},
                      {3, 4, 5, 6, nan, nan, nan, nan});
  expectValues<float>(run1("EmbeddingBag", bagMode("max"), in, DType::F32, {4, 2}), {4, 2},
                      {5, 6, 5, 6, -inf, -inf, -inf, -inf});
  EXPECT_EQ(loopOfBags(w, 3, 2, idx, starts, ends, nullptr, "sum")[0], 9.f);
}

TEST(RefEmbeddingBag, NaNWinsTheMaxAndF64Works) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor w = f64({3, 1}, {1, nan, 3});
  std::vector<Tensor> in = {w, i64({3}, {0, 1, 2}), i64({2}, {0, 2}), i64({2}, {3, 3})};
  expectValues<double>(run1("EmbeddingBag", bagMode("max"), in, DType::F64, {2, 1}), {2, 1}, {nan, 3});
  expectValues<double>(run1("EmbeddingBag", bagMode("sum"), in, DType::F64, {2, 1}), {2, 1}, {nan, 3});
}

TEST(RefEmbeddingBag, BadIndicesAndOperandsFail) {
  Tensor w = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  // Index 3 is in bag 1 only; an out-of-range index outside every bag is never read.
  OpCall bad{"EmbeddingBag", {}, {w, i64({3}, {0, 3, 7}), i64({2}, {0, 1}), i64({2}, {1, 2})},
             {{DType::F32, {2, 2}}}};
  EXPECT_NE(errorOf(bad).find("indices[1] = 3 is out of range for a weight of 3 rows"),
            std::string::npos) << errorOf(bad);
  OpCall fine{"EmbeddingBag", {}, {w, i64({3}, {0, -3, 7}), i64({2}, {0, 1}), i64({2}, {1, 2})},
              {{DType::F32, {2, 2}}}};
  EXPECT_EQ(errorOf(fine), "");
  OpCall mode{"EmbeddingBag", bagMode("min"), {w, i64({1}, {0}), i64({1}, {0}), i64({1}, {1})},
              {{DType::F32, {1, 2}}}};
  EXPECT_NE(errorOf(mode).find("mode must be sum, mean or max"), std::string::npos);
  OpCall lengths{"EmbeddingBag", {}, {w, i64({1}, {0}), i64({2}, {0, 0}), i64({1}, {1})},
                 {{DType::F32, {2, 2}}}};
  EXPECT_NE(errorOf(lengths).find("starts and ends must have one length"), std::string::npos);
  OpCall psw{"EmbeddingBag", {}, {w, i64({2}, {0, 1}), i64({1}, {0}), i64({1}, {2}), f32({1}, {1})},
             {{DType::F32, {1, 2}}}};
  EXPECT_NE(errorOf(psw).find("per_sample_weights must be [L]"), std::string::npos);
}

TEST(RefEmbeddingBag, ThreadedBagsMatchOneThread) {
  // 4096 bags of 0-7 rows of 64: enough work for the bags to be split across threads.
  const int64_t V = 300, D = 64, M = 4096;
  std::vector<float> w((size_t)(V * D));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * float(i));
  std::vector<int64_t> idx, starts, ends;
  for (int64_t m = 0; m < M; ++m) {
    starts.push_back((int64_t)idx.size());
    for (int64_t k = 0; k < (m * 5) % 8; ++k) idx.push_back((m * 31 + k * 7) % V);
    ends.push_back((int64_t)idx.size());
  }
  const int64_t L = (int64_t)idx.size();
  std::vector<Tensor> in = {f32({V, D}, w), i64({L}, idx), i64({M}, starts), i64({M}, ends)};
  OpCall two{"EmbeddingBag", bagMode("mean"), in, {{DType::F32, {M, D}}}};
  two.threads = 2;
  std::vector<Tensor> outs;
  ASSERT_TRUE(two.run(&outs));
  std::vector<float> want = loopOfBags(w, V, D, idx, starts, ends, nullptr, "mean");
  expectValues<float>(outs[0], {M, D}, want);
}

}  // namespace
}  // namespace tandem
