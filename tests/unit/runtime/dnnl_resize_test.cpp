// The host-layout nearest Resize (runtime/cpu/dnnl/DnnlResize.cpp) against the reference Resize
// on the plain tensor, which samples the ONNX reference's tap tables: upsampling by 2 (a
// diffusion U-Net's, an FPN's), non-integer and shrinking sizes with other coordinate modes,
// 5-D, every mix of layouts, two threads; plain and linear resizes left to ref.
#include "dnnl_test_util.h"

namespace tandem {
namespace dnnltest {
namespace {

struct ResizeCase {
  Shape x, y;
  std::string ctm = "half_pixel", nearestMode = "round_prefer_floor";
  bool bySizes = false;  // the sizes input instead of scales
  int threads = 1;
};

OpCase resizeOp(const ResizeCase& k, const Tensor& x) {
  OpCase c;
  c.op = "Resize";
  c.threads = k.threads;
  c.attrs.set("mode", Attr::ofString("nearest"));
  c.attrs.set("coordinate_transformation_mode", Attr::ofString(k.ctm));
  c.attrs.set("nearest_mode", Attr::ofString(k.nearestMode));
  if (k.bySizes) {
    Tensor sizes = Tensor::alloc(DType::I64, {(int64_t)k.y.size()});
    for (size_t d = 0; d < k.y.size(); ++d) sizes.data<int64_t>()[d] = k.y[d];
    c.inputs = {x, Tensor(), Tensor(), sizes};
    c.constant = {false, false, false, true};
  } else {
    Tensor scales = Tensor::alloc(DType::F32, {(int64_t)k.y.size()});
    for (size_t d = 0; d < k.y.size(); ++d) scales.data<float>()[d] = float(k.y[d]) / float(k.x[d]);
    c.inputs = {x, Tensor(), scales};
    c.constant = {false, false, true};
  }
  c.outputs = {k.y};
  return c;
}

void checkResize(const ResizeCase& k, bool inBlocked, bool outBlocked) {
  const Tensor plainX = randomTensor(k.x, 51);
  // The reference on the plain tensor.
  OpCase r = resizeOp(k, plainX);
  std::unique_ptr<Kernel> refKernel;
  Status st = refRegistry().create("cpu", r.context(), &refKernel);
  ASSERT_TRUE(st.isOk()) << st.message();
  Tensor want = Tensor::alloc(DType::F32, k.y);
  std::vector<const Tensor*> in;
  for (const Tensor& t : r.inputs) in.push_back(t.defined() ? &t : nullptr);
  ASSERT_TRUE(refKernel->run(in, {&want}).isOk());

  OpCase c = resizeOp(k, inBlocked ? relayout(plainX, true) : plainX);
  c.attrs.set("input_layouts", Attr::ofStrings({inBlocked ? "blocked" : "", "", "", ""}));
  c.attrs.set("output_layouts", Attr::ofStrings({outBlocked ? "blocked" : ""}));
  ASSERT_TRUE(dnnlSupports(c));
  std::string impl;
  Tensor y = runOnce(c, &impl);
  ASSERT_TRUE(y.defined());
  EXPECT_EQ(impl, std::string("dnnl:resize-nearest:") +
                      (inBlocked ? dnnlcpu::activationLayoutName() : "nchw") +
                      (inBlocked != outBlocked ? " reorders[dst]" : ""));
  if (outBlocked) y = relayout(y, false);
  std::vector<double> w(want.data<float>(), want.data<float>() + want.numel());
  expectClose(y, w, 0.0);
}

// C = 32: whole blocks in nChw8c and nChw16c, so every host layout keeps the values blocked.
TEST(DnnlResize, UpsampleByTwoInEveryLayoutMix) {
  const ResizeCase k{{2, 32, 5, 6}, {2, 32, 10, 12}};
  checkResize(k, true, true);
  checkResize(k, true, false);
  checkResize(k, false, true);
}

TEST(DnnlResize, OtherSizesAndCoordinateModes) {
  checkResize({{1, 32, 5, 6}, {1, 32, 7, 13}, "asymmetric", "floor", true}, true, true);
  checkResize({{1, 32, 9, 8}, {1, 32, 4, 3}, "half_pixel", "round_prefer_ceil", true}, true, true);
  checkResize({{1, 32, 4, 4}, {1, 32, 9, 6}, "align_corners", "ceil", true}, true, false);
}

TEST(DnnlResize, FiveDAndThreads) {
  checkResize({{1, 32, 3, 4, 5}, {1, 32, 6, 8, 10}}, true, true);
  ResizeCase big{{1, 32, 32, 32}, {1, 32, 64, 64}};
  big.threads = 2;
  checkResize(big, true, true);
}

TEST(DnnlResize, PlainOrLinearIsLeftToRef) {
  const ResizeCase k{{1, 32, 4, 4}, {1, 32, 8, 8}};
  OpCase c = resizeOp(k, randomTensor(k.x, 1));
  EXPECT_FALSE(dnnlSupports(c));  // no blocked side
  c.attrs.set("input_layouts", Attr::ofStrings({"blocked", "", ""}));
  c.attrs.set("mode", Attr::ofString("linear"));
  EXPECT_FALSE(dnnlSupports(c));
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
