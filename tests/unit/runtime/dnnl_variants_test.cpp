// Every kernel variant the loader may measure and choose (KernelDef::variants: Conv's oneDNN /
// Winograd F(2x2) / F(4x4) / oneDNN's Winograd on AVX-512, Gemm and MatMul's oneDNN / AVX2 packed GEMM, and the fused
// epilogue forms of both) computes what the reference kernels compute, so no choice the timing
// cache makes is wrong. On an AVX-512 host Winograd does not apply (nhwc activations); the
// suite runs again under TANDEM_MAX_CPU_ISA=avx2 (scripts/test.sh), where it does.
#include "dnnl_test_util.h"
#include "fused_attrs_util.h"
#include "runtime/cpu/avx2/Sgemm.h"

namespace tandem {
namespace dnnltest {
namespace {

Tensor runWith(const KernelRegistry& reg, const OpCase& c, const std::string& variant,
               std::string* impl) {
  KernelContext ctx = c.context();
  ctx.variant = variant;
  std::unique_ptr<Kernel> k;
  Status st = reg.create("cpu", ctx, &k);
  EXPECT_TRUE(st.isOk()) << c.op << " variant '" << variant << "': " << st.message();
  if (!st.isOk()) return Tensor();
  if (impl) *impl = k->implName();
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(t.defined() ? &t : nullptr);
  Tensor out = Tensor::alloc(DType::F32, c.outputs[0]);
  st = k->run(in, {&out});
  EXPECT_TRUE(st.isOk()) << st.message();
  return out;
}

// The implementation a variant must produce (a prefix of implName()).
std::string implPrefix(const std::string& variant) {
  if (variant == "winograd2x2") return "avx2:winograd_2x2_3x3";
  if (variant == "winograd4x4") return "avx2:winograd_4x4_3x3";
  if (variant == "avx2") return "avx2:sgemm_packed";
  if (variant == "winograd-dnnl") return "dnnl:jit_";  // jit_wino_4x3 or jit_fp32_wino_2x3
  return "dnnl:";
}

// Runs every variant of `c` and compares each with `want`; returns the variants seen.
std::vector<std::string> checkVariants(const OpCase& c, const std::vector<double>& want,
                                       double tol = 1e-4) {
  std::vector<std::string> vs = dnnlRegistry().variants("cpu", c.context());
  EXPECT_FALSE(vs.empty()) << c.op << " lists no variants";
  if (!vs.empty()) {
    EXPECT_EQ(vs[0], "dnnl") << "oneDNN is always a candidate";
  }
  for (const std::string& v : vs) {
    SCOPED_TRACE(c.op + " variant " + v);
    std::string impl;
    Tensor got = runWith(dnnlRegistry(), c, v, &impl);
    if (!got.defined()) continue;
    EXPECT_EQ(impl.rfind(implPrefix(v), 0), 0u) << impl;
    if (v == "winograd-dnnl") {
      EXPECT_NE(impl.find("wino"), std::string::npos) << impl;
    }
    expectClose(got, want, tol);
  }
  return vs;
}

bool winogradHost() {
  return avx2::available() && std::string(dnnlcpu::activationLayoutName()) == "nChw8c";
}

// oneDNN 2.6 has a Winograd f32 convolution for AVX-512 (jit_wino_4x3), none for AVX2.
bool dnnlWinogradHost() {
  return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core &&
         dnnl::get_effective_cpu_isa() != dnnl::cpu_isa::all;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

OpCase convCase(Shape x, Shape w, bool bias, std::vector<int64_t> pads, Shape y) {
  OpCase c;
  c.op = "Conv";
  c.inputs = {randomTensor(x, 1), randomTensor(w, 2)};
  c.constant = {false, true, true};
  if (bias) c.inputs.push_back(randomTensor({w[0]}, 3));
  c.outputs = {y};
  c.attrs.set("pads", Attr::ofInts(pads));
  return c;
}

std::vector<double> refOutput(const OpCase& c) {
  std::string impl;
  return toDouble(runWith(refRegistry(), c, "", &impl));
}

TEST(DnnlVariants, ConvEveryVariantMatchesReference) {
  // 16 channels: under Winograd's heuristic floor (32), but a variant the loader may measure.
  // Odd spatial sizes leave partial output tiles for both F(2x2) and F(4x4).
  for (const OpCase& c : {convCase({2, 16, 9, 11}, {24, 16, 3, 3}, true, {1, 1, 1, 1}, {2, 24, 9, 11}),
                          convCase({1, 8, 10, 7}, {16, 8, 3, 3}, false, {0, 0, 0, 0}, {1, 16, 8, 5}),
                          convCase({1, 32, 6, 6}, {32, 32, 3, 3}, true, {2, 1, 2, 1}, {1, 32, 8, 6})}) {
    // F(4x4) rounds 5-7x more than direct convolution (Winograd.h): 16-32 input channels of
    // [-1, 1] give |y| up to ~10 and errors ~1e-5.
    std::vector<std::string> vs = checkVariants(c, refOutput(c), 2e-4);
    EXPECT_EQ(contains(vs, "winograd2x2"), winogradHost());
    EXPECT_EQ(contains(vs, "winograd4x4"), winogradHost());
  }
  // 32 -> 64 channels as mnist_cnn's second convolution, with a bias: oneDNN's own Winograd
  // is a candidate on AVX-512 hosts and rounds like F(4x4).
  OpCase m = convCase({2, 32, 10, 10}, {64, 32, 3, 3}, true, {0, 0, 0, 0}, {2, 64, 8, 8});
  EXPECT_EQ(contains(checkVariants(m, refOutput(m), 2e-4), "winograd-dnnl"), dnnlWinogradHost());
  // An image-like source (3 channels, plain NCHW): the variant reading it without a reorder,
  // on any host; stride 2 as a stem.
  OpCase img = convCase({2, 3, 11, 11}, {16, 3, 3, 3}, true, {1, 1, 1, 1}, {2, 16, 6, 6});
  img.attrs.set("strides", Attr::ofInts({2, 2}));
  EXPECT_TRUE(contains(checkVariants(img, refOutput(img)), "dnnl-plain-src"));
  // Stride 2: Winograd never applies, on any host.
  OpCase s2 = convCase({1, 16, 9, 9}, {16, 16, 3, 3}, false, {1, 1, 1, 1}, {1, 16, 5, 5});
  s2.attrs.set("strides", Attr::ofInts({2, 2}));
  EXPECT_EQ(checkVariants(s2, refOutput(s2)), std::vector<std::string>{"dnnl"});
}

TEST(DnnlVariants, SameBytesSeesThroughAWholeDimBlock) {
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  auto md = [&](dnnlcpu::dims d, tag t) { return dnnl::memory::desc(d, f32, t); };
  // 16 channels in one 16-channel block: nhwc's bytes; 32 channels: two blocks, not nhwc.
  EXPECT_TRUE(dnnlcpu::sameBytes(md({2, 16, 3, 5}, tag::nChw16c), md({2, 16, 3, 5}, tag::nhwc)));
  EXPECT_FALSE(dnnlcpu::sameBytes(md({2, 32, 3, 5}, tag::nChw16c), md({2, 32, 3, 5}, tag::nhwc)));
  EXPECT_FALSE(dnnlcpu::sameBytes(md({2, 16, 3, 5}, tag::nchw), md({2, 16, 3, 5}, tag::nhwc)));
  // One channel: nchw and nhwc are the same bytes; 12 channels pad a 16-block: not plain.
  EXPECT_TRUE(dnnlcpu::sameBytes(md({2, 1, 3, 5}, tag::nchw), md({2, 1, 3, 5}, tag::nhwc)));
  EXPECT_FALSE(dnnlcpu::sameBytes(md({1, 12, 3, 5}, tag::nChw16c), md({1, 12, 3, 5}, tag::nhwc)));
}

TEST(DnnlVariants, GemmAndMatMulEveryVariantMatchesReference) {
  const bool avx2 = avx2::available();
  OpCase g;
  g.op = "Gemm";
  g.inputs = {randomTensor({5, 40}, 4), randomTensor({24, 40}, 5), randomTensor({24}, 6)};
  g.constant = {false, true, true};
  g.outputs = {{5, 24}};
  g.attrs.set("transB", Attr::ofInt(1));
  EXPECT_EQ(contains(checkVariants(g, refOutput(g)), "avx2"), avx2);

  // M = 1: the heuristic keeps oneDNN (matrix-vector), the avx2 variant must still be right.
  OpCase m1 = g;
  m1.inputs[0] = randomTensor({1, 40}, 7);
  m1.outputs = {{1, 24}};
  EXPECT_EQ(contains(checkVariants(m1, refOutput(m1)), "avx2"), avx2);

  // C as a run-time [M, N] input: Gemm's own sum (beta 1) before the product.
  OpCase cs = g;
  cs.inputs[2] = randomTensor({5, 24}, 8);
  cs.constant = {false, true, false};
  EXPECT_EQ(contains(checkVariants(cs, refOutput(cs)), "avx2"), avx2);

  // alpha != 1: the packed GEMM does not apply.
  OpCase al = g;
  al.attrs.set("alpha", Attr::ofFloat(0.5f));
  EXPECT_EQ(checkVariants(al, refOutput(al)), std::vector<std::string>{"dnnl"});

  OpCase mm;
  mm.op = "MatMul";
  mm.inputs = {randomTensor({2, 3, 40}, 9), randomTensor({40, 20}, 10)};
  mm.constant = {false, true};
  mm.outputs = {{2, 3, 20}};
  EXPECT_EQ(contains(checkVariants(mm, refOutput(mm)), "avx2"), avx2);
}

// y = Relu(anchor(x) + residual), computed from the reference anchor.
std::vector<double> addRelu(const OpCase& anchor, const Tensor& residual) {
  std::vector<double> y = refOutput(anchor);
  const float* r = residual.data<float>();
  for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(0.0, y[i] + r[i]);
  return y;
}

TEST(DnnlVariants, FusedEpiloguesEveryVariantMatchesReference) {
  // conv-epilogue Conv + residual Add + Relu.
  OpCase conv = convCase({1, 16, 7, 9}, {16, 16, 3, 3}, true, {1, 1, 1, 1}, {1, 16, 7, 9});
  Tensor residual = randomTensor({1, 16, 7, 9}, 11);
  OpCase f;
  f.op = "Fused";
  f.inputs = {conv.inputs[0], conv.inputs[1], conv.inputs[2], residual};
  f.constant = {false, true, true, false};
  f.outputs = conv.outputs;
  FusedStep convStep = fusedStep("conv-epilogue", {"Conv", "Add", "Relu"}, {{0, 1, 2}, {-2, 3}, {-3}}, {2});
  convStep.setMemberAttr(0, "pads", Attr::ofInts({1, 1, 1, 1}));
  f.attrs = convStep.attrs;
  f.body = convStep.body;
  std::vector<std::string> vs = checkVariants(f, addRelu(conv, residual), 2e-4);
  EXPECT_EQ(contains(vs, "winograd4x4"), winogradHost());
  EXPECT_EQ(contains(vs, "winograd-dnnl"), dnnlWinogradHost());

  // gemm-epilogue Gemm + Relu.
  OpCase gemm;
  gemm.op = "Gemm";
  gemm.inputs = {randomTensor({6, 32}, 12), randomTensor({32, 16}, 13), randomTensor({16}, 14)};
  gemm.constant = {false, true, true};
  gemm.outputs = {{6, 16}};
  OpCase fg;
  fg.op = "Fused";
  fg.inputs = gemm.inputs;
  fg.constant = gemm.constant;
  fg.outputs = gemm.outputs;
  FusedStep gemmStep = fusedStep("gemm-epilogue", {"Gemm", "Relu"}, {{0, 1, 2}, {-2}}, {1});
  fg.attrs = gemmStep.attrs;
  fg.body = gemmStep.body;
  std::vector<double> want = refOutput(gemm);
  for (double& v : want) v = std::max(0.0, v);
  EXPECT_EQ(contains(checkVariants(fg, want), "avx2"), avx2::available());

  // A post-op the packed GEMM does not apply itself (Sigmoid): its variant runs it after the
  // product as a oneDNN eltwise primitive, and both variants give the same values.
  OpCase sig = fg;
  sig.body = fusedStep("gemm-epilogue", {"Gemm", "Sigmoid"}, {{0, 1, 2}, {-2}}, {1}).body;
  std::vector<double> ws = refOutput(gemm);
  for (double& v : ws) v = 1.0 / (1.0 + std::exp(-v));
  EXPECT_EQ(contains(checkVariants(sig, ws), "avx2"), avx2::available());
}

TEST(DnnlVariants, UnknownOrInapplicableVariantIsAnError) {
  OpCase c = convCase({1, 16, 8, 8}, {16, 16, 3, 3}, false, {1, 1, 1, 1}, {1, 16, 8, 8});
  KernelContext ctx = c.context();
  std::unique_ptr<Kernel> k;
  ctx.variant = "fastest";
  EXPECT_FALSE(dnnlRegistry().create("cpu", ctx, &k).isOk());
  if (!winogradHost()) {
    ctx.variant = "winograd2x2";  // nhwc activations: Winograd cannot read them
    Status st = dnnlRegistry().create("cpu", ctx, &k);
    EXPECT_FALSE(st.isOk());
    EXPECT_NE(st.message().find("does not apply"), std::string::npos) << st.message();
  }
  OpCase g;
  g.op = "Gemm";
  g.inputs = {randomTensor({4, 8}, 1), randomTensor({8, 8}, 2)};
  g.constant = {false, false};  // run-time weights: nothing to pack ahead
  g.outputs = {{4, 8}};
  KernelContext gc = g.context();
  gc.variant = "avx2";
  EXPECT_FALSE(dnnlRegistry().create("cpu", gc, &k).isOk());
  EXPECT_EQ(dnnlRegistry().variants("cpu", g.context()), std::vector<std::string>{"dnnl"});
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
