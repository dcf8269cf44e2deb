// Tests of the reference gather/scatter, top-k, Einsum, image and value-sized kernels
// (Selection.cpp, Einsum.cpp, Image.cpp) and of the selections they share with the shape
// functions (runtime/DataDependent.h), on cases worked by hand.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/DataDependent.h"
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

TEST(RefGatherElements, NegativeIndexAlongAxis1) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues<float>(run1("GatherElements", attrs({{"axis", Attr::ofInt(1)}}),
                           {x, i64({2, 2}, {2, -3, 0, -1})}, DType::F32, {2, 2}),
                      {2, 2}, {3, 1, 4, 6});
}

TEST(RefScatterND, AddReductionAccumulatesRepeatedTuples) {
  Tensor x = i64({4}, {1, 2, 3, 4});
  expectValues<int64_t>(run1("ScatterND", attrs({{"reduction", Attr::ofString("add")}}),
                             {x, i64({3, 1}, {1, 1, 3}), i64({3}, {10, 20, 5})}, DType::I64, {4}),
                        {4}, {1, 32, 3, 9});
}

// ScatterElements-18 / ScatterND-18 max and min: repeated indices keep the extreme; a NaN on
// either side wins (numpy.maximum).
TEST(RefScatter, MaxAndMinReductionsOfOpset18) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({1, 5}, {1, 2, 3, 4, nan});
  Tensor idx = i64({1, 4}, {1, 1, 3, 4}), upd = f32({1, 4}, {5, -1, nan, 7});
  std::vector<Tensor> outs;
  OpCall mx{"ScatterElements", attrs({{"axis", Attr::ofInt(1)}, {"reduction", Attr::ofString("max")}}),
            {x, idx, upd}, {{DType::F32, {1, 5}}}};
  ASSERT_TRUE(mx.run(&outs).isOk());
  const float* y = outs[0].data<float>();
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], 5.f);
  EXPECT_EQ(y[2], 3.f);
  EXPECT_TRUE(std::isnan(y[3]));  // the update's NaN
  EXPECT_TRUE(std::isnan(y[4]));  // the data's NaN stays
  expectValues<int64_t>(run1("ScatterND", attrs({{"reduction", Attr::ofString("min")}}),
                             {i64({4}, {1, 2, 3, 4}), i64({3, 1}, {1, 1, 3}), i64({3}, {10, -20, 5})},
                             DType::I64, {4}),
                        {4}, {1, -20, 3, 4});
}

TEST(RefTopK, SmallestWithTiesTakesLowerIndexFirst) {
  OpCall c{"TopK", attrs({{"largest", Attr::ofInt(0)}}), {f32({1, 5}, {3, 1, 2, 1, 0}), i64({1}, {3})},
           {{DType::F32, {1, 3}}, {DType::I64, {1, 3}}}};
  std::vector<Tensor> outs;
  ASSERT_TRUE(c.run(&outs).isOk());
  expectValues<float>(outs[0], {1, 3}, {0, 1, 1});
  expectValues<int64_t>(outs[1], {1, 3}, {4, 1, 3});
}

TEST(RefEinsum, BatchedMatMulDiagonalAndImplicitOutput) {
  Tensor a = f32({1, 2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({1, 3, 1}, {1, 0, -1});
  expectValues<float>(run1("Einsum", attrs({{"equation", Attr::ofString("bij,bjk->bik")}}), {a, b},
                           DType::F32, {1, 2, 1}),
                      {1, 2, 1}, {-2, -2});
  Tensor m = f32({2, 2}, {1, 2, 3, 4});
  expectValues<float>(run1("Einsum", attrs({{"equation", Attr::ofString("ii->i")}}), {m}, DType::F32, {2}),
                      {2}, {1, 4});
  // Implicit: labels used once, alphabetically: "ji" -> "ij" is a transpose.
  expectValues<float>(run1("Einsum", attrs({{"equation", Attr::ofString("ji")}}), {m}, DType::F32, {2, 2}),
                      {2, 2}, {1, 3, 2, 4});
}

TEST(RefResize, LinearHalfPixelAndNearestAsymmetricFloor) {
  Tensor x = f32({1, 1, 1, 2}, {0, 4}), scales = f32({4}, {1, 1, 1, 2});
  // half_pixel: x_orig = (j + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 (clamped at the edges).
  expectValues<float>(run1("Resize", attrs({{"mode", Attr::ofString("linear")}}), {x, none(), scales},
                           DType::F32, {1, 1, 1, 4}, /*constInputs=*/true),
                      {1, 1, 1, 4}, {0, 1, 3, 4});
  expectValues<float>(run1("Resize",
                           attrs({{"coordinate_transformation_mode", Attr::ofString("asymmetric")},
                                  {"nearest_mode", Attr::ofString("floor")}}),
                           {x, none(), scales}, DType::F32, {1, 1, 1, 4}, true),
                      {1, 1, 1, 4}, {0, 0, 4, 4});
}

// LR-ASPP's last Resize, smaller: bilinear half_pixel x8 over [1, 3, 24, 20] (230K outputs, so
// the passes run threaded) against the 2-D formula evaluated directly in double: each output is
// the four clamped neighbours weighted (1 - ty)(1 - tx), ..., ty tx.
TEST(RefResize, BilinearUpsampleMatchesTheTwoDimensionalFormula) {
  const int64_t C = 3, H = 24, W = 20, S = 8;
  std::vector<float> v(C * H * W);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 7919) % 1000) / 100.f - 5.f;
  Tensor x = f32({1, C, H, W}, v), scales = f32({4}, {1, 1, (float)S, (float)S});
  Tensor y = run1("Resize", attrs({{"mode", Attr::ofString("linear")}}), {x, none(), scales},
                  DType::F32, {1, C, H * S, W * S}, /*constInputs=*/true);
  ASSERT_EQ(y.shape(), (Shape{1, C, H * S, W * S}));
  auto tap = [](int64_t j, int64_t n, int64_t* i0, int64_t* i1, double* t) {
    const double c = (j + 0.5) / S - 0.5, f = std::floor(c);
    *t = c - f;
    *i0 = std::min<int64_t>(std::max<int64_t>((int64_t)f, 0), n - 1);
    *i1 = std::min<int64_t>(std::max<int64_t>((int64_t)f + 1, 0), n - 1);
  };
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H * S; ++h)
      for (int64_t w = 0; w < W * S; ++w) {
        int64_t h0, h1, w0, w1;
        double ty, tx;
        tap(h, H, &h0, &h1, &ty);
        tap(w, W, &w0, &w1, &tx);
        auto at = [&](int64_t hh, int64_t ww) { return (double)v[(c * H + hh) * W + ww]; };
        const double want = (1 - ty) * ((1 - tx) * at(h0, w0) + tx * at(h0, w1)) +
                            ty * ((1 - tx) * at(h1, w0) + tx * at(h1, w1));
        ASSERT_NEAR(y.data<float>()[(c * H * S + h) * W * S + w], want, 1e-5)
            << "c " << c << " h " << h << " w " << w;
      }
}

// Bilinear GridSample over [2, 16, 9, 11] at a 32x32 grid, the grid reaching past [-1, 1] so
// that every padding mode meets taps outside the plane. Checked against ONNX's reference
// (onnx/reference/ops/op_grid_sample.py) written out in double: x = ((g + 1) W - 1) / 2 or
// (g + 1) / 2 (W - 1) with align_corners, the coordinate clamped (border) or reflected
// (reflection) first, then the four neighbours under the padding mode.
TEST(RefGridSample, BilinearMatchesOnnxReferenceForEveryPaddingMode) {
  const int64_t N = 2, C = 16, H = 9, W = 11, Ho = 32, Wo = 32;
  std::vector<float> xv(N * C * H * W), gv(N * Ho * Wo * 2);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float((i * 7919) % 1000) / 100.f - 5.f;
  for (size_t i = 0; i < gv.size(); ++i) gv[i] = float((i * 104729) % 2601) / 1000.f - 1.3f;
  Tensor x = f32({N, C, H, W}, xv), grid = f32({N, Ho, Wo, 2}, gv);
  // Reflection by repeated mirroring at the bounds (hi > lo here), not the kernel's closed form.
  auto reflectRef = [](double v, double lo, double hi) {
    while (v < lo || v > hi) v = v < lo ? lo + (lo - v) : hi - (v - hi);
    return v;
  };
  for (const char* pad : {"zeros", "border", "reflection"})
    for (int align : {0, 1}) {
      SCOPED_TRACE(std::string(pad) + (align ? " align_corners" : ""));
      Tensor y = run1("GridSample",
                      attrs({{"mode", Attr::ofString("bilinear")}, {"padding_mode", Attr::ofString(pad)},
                             {"align_corners", Attr::ofInt(align)}}),
                      {x, grid}, DType::F32, {N, C, Ho, Wo});
      ASSERT_TRUE(y.defined());
      const std::string p = pad;
      const double loX = align ? 0 : -0.5, hiX = align ? W - 1 : W - 0.5;
      const double loY = align ? 0 : -0.5, hiY = align ? H - 1 : H - 0.5;
      auto pixel = [&](int64_t n, int64_t c, int64_t iy, int64_t ix) -> double {
        if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
          if (p == "zeros") return 0;
          if (p == "border") {
            iy = std::clamp<int64_t>(iy, 0, H - 1), ix = std::clamp<int64_t>(ix, 0, W - 1);
          } else {
            iy = std::clamp<int64_t>((int64_t)reflectRef((double)iy, loY, hiY), 0, H - 1);
            ix = std::clamp<int64_t>((int64_t)reflectRef((double)ix, loX, hiX), 0, W - 1);
          }
        }
        return xv[((n * C + c) * H + iy) * W + ix];
      };
      int64_t outside = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < Ho * Wo; ++i) {
          const double gx = gv[(n * Ho * Wo + i) * 2], gy = gv[(n * Ho * Wo + i) * 2 + 1];
          double fx = align ? (gx + 1) / 2 * (W - 1) : ((gx + 1) * W - 1) / 2;
          double fy = align ? (gy + 1) / 2 * (H - 1) : ((gy + 1) * H - 1) / 2;
          if (p == "border") fx = std::clamp<double>(fx, 0, W - 1), fy = std::clamp<double>(fy, 0, H - 1);
          if (p == "reflection") fx = reflectRef(fx, loX, hiX), fy = reflectRef(fy, loY, hiY);
          const double x0 = std::floor(fx), y0 = std::floor(fy), tx = fx - x0, ty = fy - y0;
          const int64_t ix = (int64_t)x0, iy = (int64_t)y0;
          outside += ix < 0 || iy < 0 || ix + 1 >= W || iy + 1 >= H;
          for (int64_t c = 0; c < C; ++c) {
            const double want = (1 - ty) * ((1 - tx) * pixel(n, c, iy, ix) + tx * pixel(n, c, iy, ix + 1)) +
                                ty * ((1 - tx) * pixel(n, c, iy + 1, ix) + tx * pixel(n, c, iy + 1, ix + 1));
            ASSERT_NEAR(y.data<float>()[(n * C + c) * Ho * Wo + i], want, 1e-5) << "n " << n << " c " << c << " i " << i;
          }
        }
      EXPECT_GT(outside, 0) << "the grid should reach past the plane";
    }
}

TEST(RefDepthToSpace, DcrAndCrdOrderChannelsDifferently) {
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[i] = (float)i;  // C = 8 channels of 1x1
  Tensor x = f32({1, 8, 1, 1}, v);
  // DCR: channel (by, bx, c') with c' fastest of the depth-major order; CRD: (c', by, bx).
  expectValues<float>(run1("DepthToSpace", attrs({{"blocksize", Attr::ofInt(2)}}), {x}, DType::F32, {1, 2, 2, 2}),
                      {1, 2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7});
  expectValues<float>(run1("DepthToSpace", attrs({{"blocksize", Attr::ofInt(2)}, {"mode", Attr::ofString("CRD")}}),
                           {x}, DType::F32, {1, 2, 2, 2}),
                      {1, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
}

TEST(DataDependent, NonMaxSuppressionDropsOverlapsAndHonoursTheLimit) {
  // Box 1 lies inside box 0: IoU 0.81 / 1 = 0.81; box 2 is apart.
  Tensor boxes = f32({1, 3, 4}, {0, 0, 1, 1, 0.1f, 0.1f, 1, 1, 2, 2, 3, 3});
  Tensor scores = f32({1, 1, 3}, {0.9f, 0.95f, 0.5f});
  std::vector<int64_t> sel;
  ASSERT_TRUE(nonMaxSuppression(boxes, scores, 10, 0.5f, false, 0, false, &sel).isOk());
  EXPECT_EQ(sel, (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));
  ASSERT_TRUE(nonMaxSuppression(boxes, scores, 10, 0.9f, true, 0.6f, false, &sel).isOk());
  EXPECT_EQ(sel, (std::vector<int64_t>{0, 0, 1, 0, 0, 0}));
  ASSERT_TRUE(nonMaxSuppression(boxes, scores, 1, 0.5f, false, 0, false, &sel).isOk());
  EXPECT_EQ(sel, (std::vector<int64_t>{0, 0, 1}));
}

// The blocked IoU test against the kept boxes agrees with the rule applied pair by pair: 600
// boxes on a jittered grid (neighbours overlap by chance, hundreds kept per class, so many
// blocks of 64), two classes, a score threshold, ties in score.
TEST(DataDependent, NonMaxSuppressionMatchesThePairwiseRuleOverManyBlocks) {
  const int64_t n = 600;
  std::vector<float> b(4 * n), sc(2 * n);
  uint32_t seed = 12345;
  auto uniform = [&] { return (seed = seed * 1664525u + 1013904223u) / 4294967296.f; };
  for (int64_t i = 0; i < n; ++i) {
    const float y = (i / 25) * 10 + 8 * uniform(), x = (i % 25) * 10 + 8 * uniform();
    const float h = 6 + 10 * uniform(), w = 6 + 10 * uniform();
    // Corners in either order (y1,x1,y2,x2 or y2,x2,y1,x1), as the spec allows.
    if (i % 3) b[4 * i] = y, b[4 * i + 1] = x, b[4 * i + 2] = y + h, b[4 * i + 3] = x + w;
    else b[4 * i] = y + h, b[4 * i + 1] = x + w, b[4 * i + 2] = y, b[4 * i + 3] = x;
  }
  for (int64_t i = 0; i < 2 * n; ++i) sc[i] = std::round(uniform() * 200) / 200;  // ties
  const Tensor boxes = f32({1, n, 4}, b), scores = f32({1, 2, n}, sc);
  for (float iou : {0.1f, 0.5f}) {
    std::vector<int64_t> sel;
    ASSERT_TRUE(nonMaxSuppression(boxes, scores, 1000, iou, true, 0.05f, false, &sel).isOk());
    std::vector<int64_t> want;
    for (int64_t c = 0; c < 2; ++c) {
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n; ++i)
        if (sc[c * n + i] > 0.05f) order.push_back(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t p, int64_t q) { return sc[c * n + p] > sc[c * n + q]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        auto corner = [&](int64_t k, int d) {  // d: 0 y1, 1 x1, 2 y2, 3 x2
          const float lo = std::min(b[4 * k + d % 2], b[4 * k + 2 + d % 2]);
          const float hi = std::max(b[4 * k + d % 2], b[4 * k + 2 + d % 2]);
          return d < 2 ? lo : hi;
        };
        bool keep = true;
        for (int64_t k : kept) {
          const float ih = std::min(corner(i, 2), corner(k, 2)) - std::max(corner(i, 0), corner(k, 0));
          const float iw = std::min(corner(i, 3), corner(k, 3)) - std::max(corner(i, 1), corner(k, 1));
          if (ih <= 0 || iw <= 0) continue;
          const float inter = ih * iw;
          const float uni = (corner(i, 2) - corner(i, 0)) * (corner(i, 3) - corner(i, 1)) +
                            (corner(k, 2) - corner(k, 0)) * (corner(k, 3) - corner(k, 1)) - inter;
          if (uni > 0 && inter / uni > iou) keep = false;
        }
        if (!keep) continue;
        kept.push_back(i);
        want.insert(want.end(), {0, c, i});
      }
      if (iou == 0.5f) {
        EXPECT_GT(kept.size(), 200u);
      }
      EXPECT_LT(kept.size(), order.size());  // something was suppressed
    }
    EXPECT_EQ(sel, want) << "iou " << iou;
  }
}

// In a dynamic region the value-sized kernels get result types with an unknown dim and
// allocate the results at the size the values select (runtime/DataDependent.h).
TEST(RefSelection, RunSizedResultsAreAllocatedByTheKernel) {
  auto runUnallocated = [](const OpCall& c, std::vector<Tensor>* outs) {
    std::unique_ptr<Kernel> k;
    Status st = c.create(&k);
    ASSERT_TRUE(st.isOk()) << st.message();
    outs->assign(c.outputs.size(), Tensor());
    std::vector<Tensor*> ptrs;
    for (Tensor& t : *outs) ptrs.push_back(&t);
    std::vector<const Tensor*> ins;
    for (const Tensor& t : c.inputs) ins.push_back(t.defined() ? &t : nullptr);
    st = k->run(ins, ptrs);
    ASSERT_TRUE(st.isOk()) << st.message();
  };
  std::vector<Tensor> outs;
  runUnallocated(OpCall{"NonZero", {}, {f32({2, 2}, {1, 0, 0, 2})}, {{DType::I64, {2, -1}}}}, &outs);
  expectValues<int64_t>(outs[0], {2, 2}, {0, 1, 0, 1});

  Tensor cond = Tensor::alloc(DType::Bool, {3});
  const bool cv[3] = {true, false, true};
  std::memcpy(cond.raw(), cv, 3);
  AttrMap axis0;
  axis0.set("axis", Attr::ofInt(0));
  runUnallocated(OpCall{"Compress", axis0, {f32({3, 2}, {1, 2, 3, 4, 5, 6}), cond}, {{DType::F32, {-1, 2}}}},
                 &outs);
  expectValues<float>(outs[0], {2, 2}, {1, 2, 5, 6});

  runUnallocated(OpCall{"Unique", {}, {f32({5}, {2, 1, 2, 3, 1})},
                        {{DType::F32, {-1}}, {DType::I64, {-1}}, {DType::I64, {-1}}, {DType::I64, {-1}}}},
                 &outs);
  expectValues<float>(outs[0], {3}, {1, 2, 3});
  expectValues<int64_t>(outs[2], {5}, {1, 0, 1, 2, 0});
  expectValues<int64_t>(outs[3], {3}, {2, 2, 1});

  Tensor boxes = f32({1, 3, 4}, {0, 0, 1, 1, 0.1f, 0.1f, 1, 1, 2, 2, 3, 3});
  Tensor scores = f32({1, 1, 3}, {0.9f, 0.95f, 0.5f});
  Tensor maxOut = Tensor::fromVector<int64_t>({1}, {10}), iou = f32({1}, {0.5f});
  runUnallocated(OpCall{"NonMaxSuppression", {}, {boxes, scores, maxOut, iou}, {{DType::I64, {-1, 3}}}}, &outs);
  expectValues<int64_t>(outs[0], {2, 3}, {0, 0, 1, 0, 0, 2});
}

TEST(DataDependent, UniqueUnsortedKeepsFirstOccurrenceOrder) {
  UniqueResult u;
  ASSERT_TRUE(uniqueSlices(f32({5}, {2, 1, 2, 3, 1}), -1, /*sorted=*/false, &u).isOk());
  EXPECT_EQ(u.first, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(u.inverse, (std::vector<int64_t>{0, 1, 0, 2, 1}));
  EXPECT_EQ(u.counts, (std::vector<int64_t>{2, 2, 1}));
  ASSERT_TRUE(uniqueSlices(f32({5}, {2, 1, 2, 3, 1}), -1, /*sorted=*/true, &u).isOk());
  EXPECT_EQ(u.first, (std::vector<int64_t>{1, 0, 3}));
  EXPECT_EQ(u.inverse, (std::vector<int64_t>{1, 0, 1, 2, 0}));
}

TEST(RefNonZero, ValuesThatDisagreeWithThePlannedSizeFail) {
  OpCall c{"NonZero", {}, {f32({2, 2}, {1, 0, 0, 2})}, {{DType::I64, {2, 3}}}};
  EXPECT_NE(errorOf(c).find("data-dependent output: the plan has 3 entries"), std::string::npos);
  expectValues<int64_t>(run1("NonZero", {}, {f32({2, 2}, {1, 0, 0, 2})}, DType::I64, {2, 2}), {2, 2},
                        {0, 1, 0, 1});
}

}  // namespace
}  // namespace tandem
