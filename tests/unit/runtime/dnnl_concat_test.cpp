// The host-layout Concat kernel (runtime/cpu/dnnl/DnnlConcat.cpp) against a plain concatenation:
// every input and the output blocked, mixed layouts, and plain concatenations left to ref.
#include "dnnl_test_util.h"

namespace tandem {
namespace dnnltest {
namespace {

// Inputs of 16 and 32 channels (whole blocks in nChw8c and nChw16c, so every host layout keeps
// them blocked), concatenated on axis 1. inBlocked[i] / outBlocked: the plan's layouts.
// `hw`: H = W; `threads`: the step's threads.
void checkConcat(const std::vector<bool>& inBlocked, bool outBlocked, const std::string& wantImpl,
                 int64_t hw = 0, int threads = 1) {
  const std::vector<int64_t> channels = {16, 32, 16};
  const int64_t N = 2, H = hw ? hw : 3, W = hw ? hw : 5, S = H * W;
  OpCase c;
  c.op = "Concat";
  c.threads = threads;
  c.attrs.set("axis", Attr::ofInt(1));
  std::vector<std::string> inLayouts;
  std::vector<Tensor> plain;
  int64_t C = 0;
  for (size_t i = 0; i < channels.size(); ++i) {
    plain.push_back(randomTensor({N, channels[i], H, W}, 21 + (uint32_t)i));
    c.inputs.push_back(inBlocked[i] ? relayout(plain.back(), true) : plain.back());
    inLayouts.push_back(inBlocked[i] ? "blocked" : "");
    C += channels[i];
  }
  c.attrs.set("input_layouts", Attr::ofStrings(inLayouts));
  c.attrs.set("output_layouts", Attr::ofStrings({outBlocked ? "blocked" : ""}));
  c.outputs = {{N, C, H, W}};
  std::string impl;
  Tensor y = runOnce(c, &impl);
  ASSERT_TRUE(y.defined());
  EXPECT_EQ(impl, wantImpl);
  if (outBlocked) y = relayout(y, false);
  std::vector<double> want;
  for (int64_t n = 0; n < N; ++n)
    for (size_t i = 0; i < channels.size(); ++i) {
      const float* p = plain[i].data<float>() + n * channels[i] * S;
      want.insert(want.end(), p, p + channels[i] * S);
    }
  expectClose(y, want, 0.0);
}

TEST(DnnlConcat, AllBlockedCopiesChunks) {
  checkConcat({true, true, true}, true, std::string("dnnl:concat-copy:") + dnnlcpu::activationLayoutName());
}

// 2 x 64 x 40 x 40 floats (800 KB): the copies are split over two threads.
TEST(DnnlConcat, LargeConcatSplitsTheCopiesOverThreads) {
  const std::string layout = dnnlcpu::activationLayoutName();
  checkConcat({true, true, true}, true, "dnnl:concat-copy:" + layout, 40, 2);
  checkConcat({false, false, true}, false, "dnnl:concat-copy:nchw reorders[src2]", 40, 2);
}

TEST(DnnlConcat, MixedLayoutsMeetInPlain) {
  checkConcat({true, false, true}, true, "dnnl:concat-copy:nchw reorders[src0,src2,dst]");
  checkConcat({false, false, true}, false, "dnnl:concat-copy:nchw reorders[src2]");
  checkConcat({false, false, false}, true, "dnnl:concat-copy:nchw reorders[dst]");
}

TEST(DnnlConcat, PlainOrOtherAxisIsLeftToRef) {
  OpCase c;
  c.op = "Concat";
  c.attrs.set("axis", Attr::ofInt(1));
  c.inputs = {randomTensor({1, 16, 2, 2}, 1), randomTensor({1, 16, 2, 2}, 2)};
  c.outputs = {{1, 32, 2, 2}};
  EXPECT_FALSE(dnnlSupports(c));  // no blocked side
  c.attrs.set("axis", Attr::ofInt(2));
  c.attrs.set("input_layouts", Attr::ofStrings({"blocked", "blocked"}));
  c.outputs = {{1, 16, 4, 2}};
  EXPECT_FALSE(dnnlSupports(c));
}

// RAFT's ConvGRU concatenates 96 + 146 channels into 242, the plan marking the 146- and
// 242-channel values "blocked". A nChw8c or nChw16c host keeps them plain (the blocks would
// pad the channels: dnnlcpu::isBlocked), so for every kernel the step is plain and the
// reference Concat runs it; a channels-last host keeps them in nhwc, and oneDNN's does.
TEST(DnnlConcat, BlockedMarksTheHostKeepsPlainAreReadAsPlain) {
  const int64_t N = 1, H = 4, W = 4;
  OpCase c;
  c.op = "Concat";
  c.attrs.set("axis", Attr::ofInt(1));
  c.attrs.set("input_layouts", Attr::ofStrings({"", "blocked"}));
  c.attrs.set("output_layouts", Attr::ofStrings({"blocked"}));
  const Tensor a = randomTensor({N, 96, H, W}, 3), b = randomTensor({N, 146, H, W}, 4);
  c.inputs = {a, b};
  c.outputs = {{N, 242, H, W}};
  const bool hostBlocks = dnnlcpu::isBlocked(c.context(), true, 1);
  EXPECT_EQ(hostBlocks, std::string(dnnlcpu::activationLayoutName()) == "nhwc");
  if (hostBlocks) c.inputs[1] = relayout(b, true);
  KernelRegistry registry;  // oneDNN's kernels first, then the reference ones, as global()
  registerCpuDnnlKernels(registry);
  registerCpuReferenceKernels(registry);
  std::unique_ptr<Kernel> k;
  Status st = registry.create("cpu", c.context(), &k);
  ASSERT_TRUE(st.isOk()) << st.message();
  Tensor y = Tensor::alloc(DType::F32, {N, 242, H, W});
  st = k->run({&c.inputs[0], &c.inputs[1]}, {&y});
  ASSERT_TRUE(st.isOk()) << st.message();
  if (hostBlocks) y = relayout(y, false);
  std::vector<double> want(a.data<float>(), a.data<float>() + a.numel());
  want.insert(want.end(), b.data<float>(), b.data<float>() + b.numel());
  expectClose(y, want, 0.0);
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
