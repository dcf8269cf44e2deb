// The host-layout channel Split (runtime/cpu/dnnl/DnnlSplit.cpp) against a plain split: input
// and every output blocked, mixed layouts (met in plain), two threads, and plain splits or
// other axes left to ref.
#include "dnnl_test_util.h"

namespace tandem {
namespace dnnltest {
namespace {

// Outputs of 16, 32 and 16 channels (whole blocks in nChw8c and nChw16c, so every host layout
// keeps them blocked) of a 64-channel input. inBlocked / outBlocked[i]: the plan's layouts.
void checkSplit(bool inBlocked, const std::vector<bool>& outBlocked, const std::string& wantImpl,
                int64_t hw = 3, int threads = 1) {
  const std::vector<int64_t> channels = {16, 32, 16};
  const int64_t N = 2, H = hw, W = hw + 2, S = H * W, C = 64;
  OpCase c;
  c.op = "Split";
  c.threads = threads;
  c.attrs.set("axis", Attr::ofInt(1));
  const Tensor plain = randomTensor({N, C, H, W}, 31);
  c.inputs = {inBlocked ? relayout(plain, true) : plain};
  std::vector<std::string> outLayouts;
  for (size_t i = 0; i < channels.size(); ++i) {
    c.outputs.push_back({N, channels[i], H, W});
    outLayouts.push_back(outBlocked[i] ? "blocked" : "");
  }
  c.attrs.set("input_layouts", Attr::ofStrings({inBlocked ? "blocked" : ""}));
  c.attrs.set("output_layouts", Attr::ofStrings(outLayouts));
  ASSERT_TRUE(dnnlSupports(c));
  std::unique_ptr<Kernel> k = createKernel(c);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->implName(), wantImpl);
  std::vector<Tensor> outs;
  std::vector<Tensor*> outPtrs;
  for (const Shape& s : c.outputs) outs.push_back(Tensor::alloc(DType::F32, s));
  for (Tensor& t : outs) outPtrs.push_back(&t);
  ASSERT_TRUE(k->run({&c.inputs[0]}, outPtrs).isOk());
  int64_t c0 = 0;
  for (size_t i = 0; i < channels.size(); ++i) {
    Tensor y = outBlocked[i] ? relayout(outs[i], false) : outs[i];
    std::vector<double> want;
    for (int64_t n = 0; n < N; ++n) {
      const float* p = plain.data<float>() + (n * C + c0) * S;
      want.insert(want.end(), p, p + channels[i] * S);
    }
    SCOPED_TRACE("output " + std::to_string(i));
    expectClose(y, want, 0.0);
    c0 += channels[i];
  }
}

TEST(DnnlSplit, AllBlockedCopiesChunks) {
  checkSplit(true, {true, true, true}, std::string("dnnl:split-copy:") + dnnlcpu::activationLayoutName());
}

// 2 x 64 x 40 x 42 floats (860 KB): the copies are split over two threads.
TEST(DnnlSplit, LargeSplitSplitsTheCopiesOverThreads) {
  checkSplit(true, {true, true, true}, std::string("dnnl:split-copy:") + dnnlcpu::activationLayoutName(), 40, 2);
}

TEST(DnnlSplit, MixedLayoutsMeetInPlain) {
  checkSplit(true, {false, true, false}, "dnnl:split-copy:nchw reorders[src,dst1]");
  checkSplit(false, {true, false, true}, "dnnl:split-copy:nchw reorders[dst0,dst2]");
  checkSplit(true, {false, false, false}, "dnnl:split-copy:nchw reorders[src]");
}

TEST(DnnlSplit, PlainOrOtherAxisIsLeftToRef) {
  OpCase c;
  c.op = "Split";
  c.attrs.set("axis", Attr::ofInt(1));
  c.inputs = {randomTensor({1, 32, 2, 2}, 1)};
  c.outputs = {{1, 16, 2, 2}, {1, 16, 2, 2}};
  EXPECT_FALSE(dnnlSupports(c));  // no blocked side
  c.attrs.set("axis", Attr::ofInt(2));
  c.attrs.set("input_layouts", Attr::ofStrings({"blocked"}));
  c.outputs = {{1, 32, 1, 2}, {1, 32, 1, 2}};
  EXPECT_FALSE(dnnlSupports(c));
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
