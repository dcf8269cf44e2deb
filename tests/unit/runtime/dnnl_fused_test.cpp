// "Fused" steps (tandem.fused in the plan): oneDNN epilogues, the element-wise loop and the row
// kernel against the same body run op by op with the reference kernels; the regression rule;
// aliasing.
#include <algorithm>

#include "dnnl_test_util.h"
#include "fused_attrs_util.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"
#include "runtime/cpu/ref/Fused.h"

namespace tandem {
namespace dnnltest {
namespace {

/// A registry with both CPU backends (dnnl first by priority), like the executor's.
const KernelRegistry& fullRegistry() {
  static KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    registerCpuDnnlKernels(*reg);
    registerCpuReferenceKernels(*reg);
    return reg;
  }();
  return *r;
}
/// Only the reference kernels: the unfused composite runs every body op with them.
/// A fused body member by member, as compiler/pipeline/EmitPlan.cpp writes it (plan::FusedBody).
struct BodyBuilder {
  plan::FusedBody body;
  int add(const std::string& op, std::vector<int64_t> operands, AttrMap a = {}) {
    return addMember(&body, op, operands, a);
  }
  static int64_t result(int j) { return -2 - j; }
  /// Makes `oc` the group: its attributes ("kind" only) and body. `shapes`: each member's
  /// result shape, for bodies whose members differ (otherwise each is the step's output 0's).
  void finish(OpCase* oc, const std::string& kind, std::vector<int> outputs,
              const std::vector<Shape>& shapes = {}) {
    oc->body = body;
    for (size_t j = 0; j < shapes.size(); ++j) {
      plan::FusedBody::Shape* shape = oc->body.mutable_members((int)j)->mutable_shape();
      for (int64_t d : shapes[j]) shape->add_dims(d);
    }
    for (int j : outputs) oc->body.add_results(j);
    oc->attrs = AttrMap();
    oc->attrs.set("kind", Attr::ofString(kind));
  }
};

Tensor runWith(const KernelRegistry& reg, const OpCase& c, std::string* impl,
               std::vector<Tensor>* allOutputs = nullptr) {
  std::unique_ptr<Kernel> k;
  Status st = reg.create("cpu", c.context(), &k);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!k) return Tensor();
  *impl = k->implName();
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor> outs;
  for (const Shape& s : c.outputs) outs.push_back(Tensor::alloc(DType::F32, s));
  std::vector<Tensor*> ptrs;
  for (Tensor& t : outs) ptrs.push_back(&t);
  st = k->run(in, ptrs);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (allOutputs) *allOutputs = outs;
  return outs[0];
}

TEST(DnnlFused, RegressionClasses) {
  EXPECT_TRUE(dnnlcpu::implRegresses("jit:avx2", "gemm:jit"));
  EXPECT_TRUE(dnnlcpu::implRegresses("jit:avx2", "ref:any"));
  EXPECT_TRUE(dnnlcpu::implRegresses("gemm:jit", "ref:any"));
  EXPECT_FALSE(dnnlcpu::implRegresses("jit:avx2", "jit:avx2"));
  EXPECT_FALSE(dnnlcpu::implRegresses("gemm:jit", "gemm:jit"));  // matmul's normal kernel
  EXPECT_FALSE(dnnlcpu::implRegresses("gemm:jit", "brg:avx512_core"));
}

// ResNet's residual block tail: Conv(3x3, pad 1) + B, + residual (sum), Relu; 16 channels so the
// blocked JIT kernel applies. The fused primitive must keep that kernel and match op-by-op.
TEST(DnnlFused, ConvSumReluMatchesUnfused) {
  BodyBuilder b;
  AttrMap conv;
  conv.set("pads", Attr::ofInts({1, 1, 1, 1}));
  int c = b.add("Conv", {0, 1, 2}, conv);
  int s = b.add("Add", {BodyBuilder::result(c), 3});
  int r = b.add("Relu", {BodyBuilder::result(s)});
  OpCase oc;
  oc.op = "Fused";
  b.finish(&oc, "conv-epilogue", {r});
  oc.inputs = {randomTensor({2, 16, 7, 7}, 1), randomTensor({16, 16, 3, 3}, 2, -0.2f, 0.2f),
               randomTensor({16}, 3), randomTensor({2, 16, 7, 7}, 4)};
  oc.constant = {false, true, true, false};
  oc.outputs = {{2, 16, 7, 7}};
  std::string fusedImpl, refImpl;
  Tensor got = runWith(fullRegistry(), oc, &fusedImpl);
  Tensor want = runWith(refRegistry(), oc, &refImpl);
  EXPECT_NE(fusedImpl.find("+post-ops[sum+eltwise_relu]"), std::string::npos) << fusedImpl;
  EXPECT_EQ(fusedImpl.find("gemm"), std::string::npos) << fusedImpl;
  EXPECT_EQ(refImpl.rfind("unfused(ref + ref + ref)", 0), 0u) << refImpl;
  expectClose(got, toDouble(want), 1e-4);
  // Some output must be clamped by the Relu and some positive, or the test proves little.
  int zeros = 0;
  for (int64_t i = 0; i < got.numel(); ++i) zeros += got.data<float>()[i] == 0.f;
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, got.numel());
}

// ConvNeXt's depthwise 7x7 Conv (pad 3, 16 groups) then a Transpose to channels-last: the
// primitive writes nhwc, which must be the reference's transposed result; also with a residual
// sum (in NCHW, the Conv's shape) before the Transpose, and the 1-D (NCW -> NWC) form.
TEST(DnnlFused, ConvThenTransposeToChannelsLast) {
  for (int variant = 0; variant < 3; ++variant) {
    const bool residual = variant == 1, oneD = variant == 2;
    BodyBuilder b;
    AttrMap conv;
    conv.set("group", Attr::ofInt(16));
    conv.set("pads", oneD ? Attr::ofInts({3, 3}) : Attr::ofInts({3, 3, 3, 3}));
    int c = b.add("Conv", {0, 1, 2}, conv);
    int last = c;
    if (residual) last = b.add("Add", {BodyBuilder::result(c), 3});
    AttrMap perm;
    perm.set("perm", oneD ? Attr::ofInts({0, 2, 1}) : Attr::ofInts({0, 2, 3, 1}));
    int t = b.add("Transpose", {BodyBuilder::result(last)}, perm);
    const Shape x = oneD ? Shape{2, 16, 9} : Shape{2, 16, 9, 9};
    const Shape y = oneD ? Shape{2, 9, 16} : Shape{2, 9, 9, 16};
    std::vector<Shape> shapes(residual ? 2 : 1, x);
    shapes.push_back(y);
    OpCase oc;
    oc.op = "Fused";
    b.finish(&oc, "conv-epilogue", {t}, shapes);
    oc.inputs = {randomTensor(x, 31),
                 randomTensor(oneD ? Shape{16, 1, 7} : Shape{16, 1, 7, 7}, 32, -0.2f, 0.2f),
                 randomTensor({16}, 33)};
    oc.constant = {false, true, true};
    if (residual) {
      oc.inputs.push_back(randomTensor(x, 34));
      oc.constant.push_back(false);
    }
    oc.outputs = {y};
    std::string fusedImpl, refImpl;
    Tensor got = runWith(fullRegistry(), oc, &fusedImpl);
    Tensor want = runWith(refRegistry(), oc, &refImpl);
    EXPECT_NE(fusedImpl.find(residual ? "+post-ops[sum+dst:channels-last]"
                                      : "+post-ops[dst:channels-last]"),
              std::string::npos)
        << fusedImpl;
    expectClose(got, toDouble(want), 1e-4);
  }
}

// The residual planned in place: the output buffer is the residual's (plan-memory's rule).
TEST(DnnlFused, ConvSumInPlace) {
  BodyBuilder b;
  int c = b.add("Conv", {0, 1});
  int s = b.add("Add", {3, BodyBuilder::result(c)});  // residual first: either order is a sum
  OpCase oc;
  oc.op = "Fused";
  b.finish(&oc, "conv-epilogue", {s});
  Tensor x = randomTensor({1, 8, 5, 5}, 5), w = randomTensor({8, 8, 1, 1}, 6);
  Tensor res = randomTensor({1, 8, 5, 5}, 7);
  oc.inputs = {x, w, Tensor(), res};
  oc.constant = {false, true, false, false};
  oc.outputs = {{1, 8, 5, 5}};
  std::string impl;
  Tensor want = runWith(refRegistry(), oc, &impl);
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(fullRegistry().create("cpu", oc.context(), &k).isOk());
  Tensor aliased = Tensor::copyOf(res);
  ASSERT_TRUE(k->run({&x, &w, nullptr, &aliased}, {&aliased}).isOk());
  expectClose(aliased, toDouble(want), 1e-4);
}

// A fused group whose one-primitive form oneDNN can only run with its reference kernel runs
// unfused and says why; otherwise it is one optimized primitive with the post-ops. Which of
// the two depends on the host (oneDNN 2.6's jit:avx2 convolution and gemm:jit have no
// eltwise-then-sum post-ops; its AVX-512 brgemm kernels have), so both outcomes are checked.
void expectNeverReferenceFused(const std::string& impl, const std::string& postOps) {
  if (impl.rfind("unfused(", 0) == 0) {
    EXPECT_NE(impl.find("post-ops regress (fused dnnl:ref"), std::string::npos) << impl;
    EXPECT_EQ(impl.find("unfused(dnnl:ref"), std::string::npos) << impl;
  } else {
    EXPECT_EQ(impl.rfind("dnnl:", 0), 0u) << impl;
    EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
    EXPECT_NE(impl.find(postOps), std::string::npos) << impl;
  }
}

// Conv -> Relu -> residual Add: where oneDNN has no JIT convolution for eltwise-then-sum
// post-ops (2.6 on AVX2 offers ref:any) the step runs unfused and says why; with blocked
// activations (the plan's input_layouts / output_layouts) the unfused ops run on plain copies.
TEST(DnnlFused, ConvReluThenSumRunsUnfused) {
  for (bool blocked : {false, true}) {
    BodyBuilder b;
    AttrMap conv;
    conv.set("pads", Attr::ofInts({1, 1, 1, 1}));
    int c = b.add("Conv", {0, 1, 2}, conv);
    int r = b.add("Relu", {BodyBuilder::result(c)});
    int s = b.add("Add", {BodyBuilder::result(r), 3});
    OpCase plain;
    plain.op = "Fused";
    b.finish(&plain, "conv-epilogue", {s});
    plain.inputs = {randomTensor({2, 16, 7, 7}, 21), randomTensor({16, 16, 3, 3}, 22, -0.2f, 0.2f),
                    randomTensor({16}, 23), randomTensor({2, 16, 7, 7}, 24)};
    plain.constant = {false, true, true, false};
    plain.outputs = {{2, 16, 7, 7}};
    std::string refImpl;
    Tensor want = runWith(refRegistry(), plain, &refImpl);

    OpCase oc = plain;
    if (blocked) {
      oc.attrs.set("input_layouts", Attr::ofStrings({"blocked", "", "", "blocked"}));
      oc.attrs.set("output_layouts", Attr::ofStrings({"blocked"}));
      oc.inputs[0] = relayout(plain.inputs[0], true);
      oc.inputs[3] = relayout(plain.inputs[3], true);
    }
    std::string impl;
    Tensor got = runWith(fullRegistry(), oc, &impl);
    expectNeverReferenceFused(impl, "+post-ops[eltwise_relu+sum]");
    if (impl.rfind("unfused(", 0) == 0) {
      EXPECT_EQ(impl.find("(via plain layout)") != std::string::npos, blocked) << impl;
    }
    expectClose(blocked ? relayout(got, false) : got, toDouble(want), 1e-4);
  }
}

// The blocked layout on the fast path: Conv + sum + Relu with blocked X, residual and Y runs as
// one primitive with no reorder at all, and matches the plain computation.
TEST(DnnlFused, ConvEpilogueOnBlockedActivationsHasNoReorders) {
  BodyBuilder b;
  AttrMap conv;
  conv.set("pads", Attr::ofInts({1, 1, 1, 1}));
  int c = b.add("Conv", {0, 1, 2}, conv);
  int s = b.add("Add", {BodyBuilder::result(c), 3});
  int r = b.add("Relu", {BodyBuilder::result(s)});
  OpCase plain;
  plain.op = "Fused";
  b.finish(&plain, "conv-epilogue", {r});
  plain.inputs = {randomTensor({2, 16, 7, 7}, 25), randomTensor({16, 16, 3, 3}, 26, -0.2f, 0.2f),
                  randomTensor({16}, 27), randomTensor({2, 16, 7, 7}, 28)};
  plain.constant = {false, true, true, false};
  plain.outputs = {{2, 16, 7, 7}};
  std::string refImpl, impl;
  Tensor want = runWith(refRegistry(), plain, &refImpl);
  OpCase oc = plain;
  oc.attrs.set("input_layouts", Attr::ofStrings({"blocked", "", "", "blocked"}));
  oc.attrs.set("output_layouts", Attr::ofStrings({"blocked"}));
  oc.inputs[0] = relayout(plain.inputs[0], true);
  oc.inputs[3] = relayout(plain.inputs[3], true);
  Tensor got = runWith(fullRegistry(), oc, &impl);
  EXPECT_NE(impl.find("+post-ops[sum+eltwise_relu]"), std::string::npos) << impl;
  EXPECT_EQ(impl.find("reorders["), std::string::npos) << impl;
  expectClose(relayout(got, false), toDouble(want), 1e-4);
  // The reference kernels cannot read blocked bytes: the registry refuses rather than guess.
  std::unique_ptr<Kernel> k;
  Status st = refRegistry().create("cpu", oc.context(), &k);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("blocked activation layout"), std::string::npos) << st.message();
}

// Gemm with a bias row: + residual (sum) then Relu fuses; Relu then + residual makes oneDNN
// 2.6 fall from gemm:jit to its reference matmul, so that group runs unfused and says why.
// And MatMul + Sigmoid.
TEST(DnnlFused, GemmAndMatMulEpilogues) {
  for (bool sumFirst : {true, false}) {
    BodyBuilder b;
    AttrMap g;
    g.set("transB", Attr::ofInt(1));
    int gm = b.add("Gemm", {0, 1, 2}, g);
    int last;
    if (sumFirst) {
      int s = b.add("Add", {BodyBuilder::result(gm), 3});
      last = b.add("Relu", {BodyBuilder::result(s)});
    } else {
      int r = b.add("Relu", {BodyBuilder::result(gm)});
      last = b.add("Add", {BodyBuilder::result(r), 3});
    }
    OpCase oc;
    oc.op = "Fused";
    b.finish(&oc, "gemm-epilogue", {last});
    oc.inputs = {randomTensor({4, 6}, 8), randomTensor({5, 6}, 9), randomTensor({5}, 10),
                 randomTensor({4, 5}, 11)};
    oc.constant = {false, true, true, false};
    oc.outputs = {{4, 5}};
    std::string fusedImpl, refImpl;
    Tensor got = runWith(fullRegistry(), oc, &fusedImpl);
    Tensor want = runWith(refRegistry(), oc, &refImpl);
    if (sumFirst) {
      EXPECT_NE(fusedImpl.find("+post-ops[sum+eltwise_relu]"), std::string::npos) << fusedImpl;
    } else {
      // Unfused (AVX2 hosts), the Gemm alone runs as the packed AVX2 GEMM or gemm:jit.
      expectNeverReferenceFused(fusedImpl, "+post-ops[eltwise_relu+sum]");
      if (fusedImpl.rfind("unfused(", 0) == 0) {
        EXPECT_TRUE(fusedImpl.rfind("unfused(avx2:sgemm_packed + ", 0) == 0 ||
                    fusedImpl.rfind("unfused(dnnl:gemm:jit + ", 0) == 0)
            << fusedImpl;
      }
    }
    expectClose(got, toDouble(want), 1e-4);
  }
  {
    BodyBuilder b;
    int mm = b.add("MatMul", {0, 1});
    int sg = b.add("Sigmoid", {BodyBuilder::result(mm)});
    OpCase oc;
    oc.op = "Fused";
    b.finish(&oc, "gemm-epilogue", {sg});
    oc.inputs = {randomTensor({3, 4}, 12), randomTensor({4, 2}, 13)};
    oc.constant = {false, true};
    oc.outputs = {{3, 2}};
    std::string fusedImpl, refImpl;
    Tensor got = runWith(fullRegistry(), oc, &fusedImpl);
    Tensor want = runWith(refRegistry(), oc, &refImpl);
    EXPECT_NE(fusedImpl.find("+post-ops[eltwise_logistic]"), std::string::npos) << fusedImpl;
    expectClose(got, toDouble(want), 1e-4);
  }
}

// Gated activations as PyTorch exports them: SiLU = Mul(y, Sigmoid(y)) (EfficientNet) and
// HardSwish = Mul(y, HardSigmoid(y; 1/6, 1/2)) (MobileNetV3), the Mul's operands in either
// order, after a Conv (16 channels, the blocked JIT kernel) or a Gemm: one eltwise_swish /
// eltwise_hardswish post-op, never a reference kernel, matching op-by-op reference kernels.
// A HardSigmoid with other constants is no HardSwish: the Mul then runs unfused.
TEST(DnnlFused, GatedActivationsAreOnePostOp) {
  struct Case {
    const char* anchor;
    const char* gate;
    float alpha;
    bool gateFirst;
    const char* postOp;  // null: not one post-op
  };
  const Case cases[] = {
      {"Conv", "Sigmoid", 0.f, false, "+post-ops[eltwise_swish]"},
      {"Conv", "Sigmoid", 0.f, true, "+post-ops[eltwise_swish]"},
      {"Conv", "HardSigmoid", 1.f / 6.f, false, "+post-ops[eltwise_hardswish]"},
      {"Gemm", "Sigmoid", 0.f, true, "+post-ops[eltwise_swish]"},
      {"Gemm", "HardSigmoid", 1.f / 6.f, true, "+post-ops[eltwise_hardswish]"},
      {"Conv", "HardSigmoid", 0.2f, false, nullptr},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.anchor) + " " + k.gate + " alpha " + std::to_string(k.alpha));
    const bool conv = std::string(k.anchor) == "Conv";
    BodyBuilder b;
    AttrMap anchorAttrs, gateAttrs;
    if (conv) anchorAttrs.set("pads", Attr::ofInts({1, 1, 1, 1}));
    else anchorAttrs.set("transB", Attr::ofInt(1));
    if (std::string(k.gate) == "HardSigmoid") {
      gateAttrs.set("alpha", Attr::ofFloat(k.alpha));
      gateAttrs.set("beta", Attr::ofFloat(0.5f));
    }
    int a = b.add(k.anchor, {0, 1, 2}, anchorAttrs);
    int g = b.add(k.gate, {BodyBuilder::result(a)}, gateAttrs);
    int m = k.gateFirst ? b.add("Mul", {BodyBuilder::result(g), BodyBuilder::result(a)})
                        : b.add("Mul", {BodyBuilder::result(a), BodyBuilder::result(g)});
    OpCase oc;
    oc.op = "Fused";
    b.finish(&oc, conv ? "conv-epilogue" : "gemm-epilogue", {m});
    if (conv) {
      oc.inputs = {randomTensor({2, 16, 7, 7}, 41), randomTensor({16, 16, 3, 3}, 42, -0.5f, 0.5f),
                   randomTensor({16}, 43)};
      oc.outputs = {{2, 16, 7, 7}};
    } else {
      oc.inputs = {randomTensor({8, 32}, 44), randomTensor({24, 32}, 45),
                   randomTensor({24}, 46)};
      oc.outputs = {{8, 24}};
    }
    oc.constant = {false, true, true};
    std::string fusedImpl, refImpl;
    Tensor got = runWith(fullRegistry(), oc, &fusedImpl);
    Tensor want = runWith(refRegistry(), oc, &refImpl);
    if (k.postOp) {
      expectNeverReferenceFused(fusedImpl, k.postOp);
    } else {
      EXPECT_EQ(fusedImpl.rfind("unfused(", 0), 0u) << fusedImpl;
    }
    expectClose(got, toDouble(want), 1e-5);
    // The gate must act in its curved part and its flat parts, or the test proves little:
    // some outputs negative (x * gate < 0 needs x < 0 with gate > 0), some clamped or large.
    int negative = 0, large = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      negative += got.data<float>()[i] < 0.f;
      large += got.data<float>()[i] > 3.f;
    }
    EXPECT_GT(negative, 0);
    EXPECT_GT(large, 0);
  }
}

// The transformer / ConvNeXt Linear tails over a [2, 3, 8] activation (the batch folds into the
// GEMM's rows): a constant bias row (read as the Add's first operand), then Gelu (erf) and a
// per-column scale [1, 1, 16]; or the bias, the scale, a residual sum and a Relu. One primitive
// (bias, binary_mul, sum, eltwise) where oneDNN keeps its kernel class, else unfused; both
// match op-by-op reference kernels. Then bias + Relu on the AVX2 packed GEMM (variant avx2),
// whose epilogue adds the bias.
TEST(DnnlFused, MatMulBiasRowScaleRowEpilogues) {
  for (bool residual : {false, true}) {
    BodyBuilder b;
    int mm = b.add("MatMul", {0, 1});
    int bias = b.add("Add", {2, BodyBuilder::result(mm)});
    int last;
    std::string want;
    if (!residual) {
      int g = b.add("Gelu", {BodyBuilder::result(bias)});
      last = b.add("Mul", {BodyBuilder::result(g), 3});
      want = "+post-ops[bias+eltwise_gelu_erf+binary_mul]";
    } else {
      int sc = b.add("Mul", {BodyBuilder::result(bias), 3});
      int s = b.add("Add", {BodyBuilder::result(sc), 4});
      last = b.add("Relu", {BodyBuilder::result(s)});
      want = "+post-ops[bias+binary_mul+sum+eltwise_relu]";
    }
    OpCase oc;
    oc.op = "Fused";
    b.finish(&oc, "gemm-epilogue", {last});
    oc.inputs = {randomTensor({2, 3, 8}, 21), randomTensor({8, 16}, 22), randomTensor({16}, 23),
                 randomTensor({1, 1, 16}, 24)};
    oc.constant = {false, true, true, true};
    if (residual) {
      oc.inputs.push_back(randomTensor({2, 3, 16}, 25));
      oc.constant.push_back(false);
    }
    oc.outputs = {{2, 3, 16}};
    std::string fusedImpl, refImpl;
    Tensor got = runWith(fullRegistry(), oc, &fusedImpl);
    Tensor wantT = runWith(refRegistry(), oc, &refImpl);
    if (fusedImpl.rfind("unfused(", 0) != 0) {
      EXPECT_EQ(fusedImpl.rfind("dnnl:", 0), 0u) << fusedImpl;
      EXPECT_NE(fusedImpl.find(want), std::string::npos) << fusedImpl;
    } else {
      EXPECT_NE(fusedImpl.find("post-ops regress"), std::string::npos) << fusedImpl;
    }
    expectClose(got, toDouble(wantT), 1e-4);
  }
  if (avx2::available()) {
    BodyBuilder b;
    int mm = b.add("MatMul", {0, 1});
    int bias = b.add("Add", {BodyBuilder::result(mm), 2});
    int r = b.add("Relu", {BodyBuilder::result(bias)});
    OpCase oc;
    oc.op = "Fused";
    b.finish(&oc, "gemm-epilogue", {r});
    oc.inputs = {randomTensor({6, 8}, 26), randomTensor({8, 16}, 27), randomTensor({1, 16}, 28)};
    oc.constant = {false, true, true};
    oc.outputs = {{6, 16}};
    KernelContext ctx = oc.context();
    std::vector<std::string> variants = fullRegistry().variants("cpu", ctx);
    EXPECT_NE(std::find(variants.begin(), variants.end(), "avx2"), variants.end());
    ctx.variant = "avx2";
    std::unique_ptr<Kernel> k;
    Status st = fullRegistry().create("cpu", ctx, &k);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_EQ(k->implName(), "avx2:sgemm_packed +post-ops[bias+eltwise_relu]");
    Tensor got = Tensor::alloc(DType::F32, {6, 16});
    std::vector<const Tensor*> in = {&oc.inputs[0], &oc.inputs[1], &oc.inputs[2]};
    std::vector<Tensor*> out = {&got};
    ASSERT_TRUE(k->run(in, out).isOk());
    std::string refImpl;
    expectClose(got, toDouble(runWith(refRegistry(), oc, &refImpl)), 1e-4);
  }
}

// Activations after the packed GEMM's product: tanh, tanh-GELU, the logistic and swish run as
// Tandem's AVX2 activations on each stored tile (Activation.h; "(activations: avx2)"), others
// (erf-GELU) as oneDNN eltwise primitives over the output; a Sigmoid after a Relu keeps that
// order. Variant avx2 is offered for such epilogues, says which in its name, and matches the
// op-by-op reference, with N = 24 (a 16-wide and an 8-wide panel) and N = 21 (padded columns).
// With a per-column scale (binary_mul) it is not offered.
TEST(DnnlFused, MatMulAvx2VariantWithActivationTail) {
  if (!avx2::available()) GTEST_SKIP() << "host (or TANDEM_MAX_CPU_ISA) has no AVX2";
  for (int64_t n : {24, 21})
  for (int form = 0; form < 5; ++form) {
    SCOPED_TRACE("form " + std::to_string(form) + ", N = " + std::to_string(n));
    BodyBuilder b;
    int mm = b.add("MatMul", {0, 1});
    int bias = b.add("Add", {BodyBuilder::result(mm), 2});
    int last;
    std::string want;
    if (form == 0) {
      last = b.add("Gelu", {BodyBuilder::result(bias)});
      want = "avx2:sgemm_packed +post-ops[bias+eltwise_gelu_erf] (activations: dnnl:";
    } else if (form == 1) {
      int r = b.add("Relu", {BodyBuilder::result(bias)});
      last = b.add("Sigmoid", {BodyBuilder::result(r)});
      want = "avx2:sgemm_packed +post-ops[bias+eltwise_relu+eltwise_logistic] (activations: avx2)";
    } else if (form == 3) {
      AttrMap a;
      a.set("approximate", Attr::ofString("tanh"));
      last = b.add("Gelu", {BodyBuilder::result(bias)}, a);
      want = "avx2:sgemm_packed +post-ops[bias+eltwise_gelu_tanh] (activations: avx2)";
    } else if (form == 4) {
      last = b.add("Tanh", {BodyBuilder::result(bias)});
      want = "avx2:sgemm_packed +post-ops[bias+eltwise_tanh] (activations: avx2)";
    } else {
      last = b.add("Mul", {BodyBuilder::result(bias), 3});
    }
    OpCase oc;
    oc.op = "Fused";
    b.finish(&oc, "gemm-epilogue", {last});
    oc.inputs = {randomTensor({12, 8}, 31, -2.f, 2.f), randomTensor({8, n}, 32, -1.f, 1.f),
                 randomTensor({1, n}, 33)};
    oc.constant = {false, true, true};
    if (form == 2) {
      oc.inputs.push_back(randomTensor({n}, 34));
      oc.constant.push_back(true);
    }
    oc.outputs = {{12, n}};
    KernelContext ctx = oc.context();
    std::vector<std::string> variants = fullRegistry().variants("cpu", ctx);
    bool offered = std::find(variants.begin(), variants.end(), "avx2") != variants.end();
    if (form == 2) {
      EXPECT_FALSE(offered) << "a scale row is no AVX2 epilogue";
      continue;
    }
    ASSERT_TRUE(offered);
    ctx.variant = "avx2";
    std::unique_ptr<Kernel> k;
    Status st = fullRegistry().create("cpu", ctx, &k);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_EQ(k->implName().rfind(want, 0), 0u) << k->implName();
    Tensor got = Tensor::alloc(DType::F32, {12, n});
    std::vector<const Tensor*> in = {&oc.inputs[0], &oc.inputs[1], &oc.inputs[2]};
    std::vector<Tensor*> out = {&got};
    ASSERT_TRUE(k->run(in, out).isOk());
    std::string refImpl;
    expectClose(got, toDouble(runWith(refRegistry(), oc, &refImpl)), 1e-5);
  }
}

// Element-wise loop: (x + y) * 0.5 -> tanh with exp(x) as a second output; large enough for
// several chunks; then run with output 0 aliasing input x (in place).
TEST(DnnlFused, ElementwiseLoopMatchesUnfusedAndAliases) {
  BodyBuilder b;
  int e = b.add("Exp", {0});
  int a = b.add("Add", {0, 1});
  int m = b.add("Mul", {BodyBuilder::result(a), 2});
  int t = b.add("Tanh", {BodyBuilder::result(m)});
  int r = b.add("Sub", {BodyBuilder::result(t), BodyBuilder::result(e)});
  OpCase oc;
  oc.op = "Fused";
  b.finish(&oc, "elementwise", {r, e});
  const int64_t n = 5000;
  oc.inputs = {randomTensor({n}, 14), randomTensor({n}, 15), scalarF32(0.5f)};
  oc.constant = {false, false, true};
  oc.outputs = {{n}, {n}};
  std::string loopImpl, refImpl;
  std::vector<Tensor> got, want;
  runWith(fullRegistry(), oc, &loopImpl, &got);
  runWith(refRegistry(), oc, &refImpl, &want);
  EXPECT_EQ(loopImpl, "fused-loop(5 ops)");
  expectClose(got[0], toDouble(want[0]), 1e-5);
  expectClose(got[1], toDouble(want[1]), 1e-5);

  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(fullRegistry().create("cpu", oc.context(), &k).isOk());
  Tensor x = Tensor::copyOf(oc.inputs[0]);
  Tensor second = Tensor::alloc(DType::F32, {n});
  ASSERT_TRUE(k->run({&x, &oc.inputs[1], &oc.inputs[2]}, {&x, &second}).isOk());
  expectClose(x, toDouble(want[0]), 1e-5);
  expectClose(second, toDouble(want[1]), 1e-5);
}

std::vector<Tensor> runUnfused(const OpCase& c);

// The loop's vector forms (Sigmoid, Tanh and tanh-GELU from the AVX2 activations where the
// host has AVX2; HardSigmoid, LeakyRelu, Clip, Abs, Neg as plain loops) and SiLU's x * Sigmoid(x)
// against the reference kernels op by op: 4,099 elements (8 chunks and a tail) over [-30, 30],
// with NaN, the infinities, signed zeros and exp's clamping range among them.
TEST(DnnlFused, ElementwiseLoopVectorFormsMatchReference) {
  BodyBuilder b;
  AttrMap gelu, hard, leaky;
  gelu.set("approximate", Attr::ofString("tanh"));
  hard.set("alpha", Attr::ofFloat(1.f / 6.f));
  hard.set("beta", Attr::ofFloat(0.5f));
  leaky.set("alpha", Attr::ofFloat(0.1f));
  std::vector<int> outs = {b.add("Sigmoid", {0}), b.add("Tanh", {0}), b.add("Gelu", {0}, gelu),
                           b.add("HardSigmoid", {0}, hard), b.add("LeakyRelu", {0}, leaky),
                           b.add("Clip", {0, 1, 2}), b.add("Abs", {0}), b.add("Neg", {0})};
  outs.push_back(b.add("Mul", {0, BodyBuilder::result(outs[0])}));
  OpCase oc;
  oc.op = "Fused";
  b.finish(&oc, "elementwise", outs);
  const int64_t n = 4099;
  Tensor x = randomTensor({n}, 41, -30.f, 30.f);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.f, -0.f, 1e-20f, 88.f, -88.f, 100.f,
                            -100.f, 0.62f, -0.63f, 3.f, -3.f};
  for (size_t i = 0; i < sizeof(specials) / sizeof(float); ++i)
    x.data<float>()[i * 97 + 5] = specials[i];
  oc.inputs = {x, scalarF32(-2.5f), scalarF32(4.f)};
  oc.constant = {false, true, true};
  oc.outputs.assign(outs.size(), Shape{n});
  std::string impl;
  std::vector<Tensor> got;
  runWith(fullRegistry(), oc, &impl, &got);
  EXPECT_EQ(impl, "fused-loop(9 ops)");
  std::vector<Tensor> want = runUnfused(oc);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o)
    for (int64_t i = 0; i < n; ++i) {
      float g = got[o].data<float>()[i], w = want[o].data<float>()[i];
      if (g == w) continue;  // the infinities
      // The vector exp keeps its argument above -87.3, so Sigmoid(-inf) is 4.5e-39, not 0
      // (runtime/cpu/avx2/Activation.h): tanh-GELU and x * Sigmoid(x) at -inf are -inf there,
      // NaN (-inf * 0) in the reference.
      if ((o == 2 || o == 8) && x.data<float>()[i] == -INFINITY && g == -INFINITY) continue;
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(g)) << "output " << o << " at x = " << x.data<float>()[i];
        continue;
      }
      EXPECT_NEAR(g, w, 1e-6 + 1e-6 * std::fabs(w)) << "output " << o << " at x = " << x.data<float>()[i];
    }
}

// A body the loop cannot run (broadcasting operand) falls back to the unfused composite and
// says so; the result is still right.
TEST(DnnlFused, ElementwiseFallsBackUnfused) {
  BodyBuilder b;
  int a = b.add("Add", {0, 1});
  int r = b.add("Relu", {BodyBuilder::result(a)});
  OpCase oc;
  oc.op = "Fused";
  b.finish(&oc, "elementwise", {r});
  oc.inputs = {randomTensor({3, 4}, 16), randomTensor({4}, 17)};
  oc.outputs = {{3, 4}};
  std::string impl, refImpl;
  Tensor got = runWith(fullRegistry(), oc, &impl);
  Tensor want = runWith(refRegistry(), oc, &refImpl);
  EXPECT_NE(impl.find("unfused("), std::string::npos) << impl;
  EXPECT_NE(impl.find("no loop form"), std::string::npos) << impl;
  expectClose(got, toDouble(want), 1e-6);
}

/// The body run op by op with the reference kernels (the unfused composite), all outputs.
std::vector<Tensor> runUnfused(const OpCase& c) {
  fused::Body body;
  KernelContext ctx = c.context();
  EXPECT_TRUE(fused::parseBody(ctx, &body).isOk());
  std::unique_ptr<Kernel> k;
  Status st = fused::createUnfused(refRegistry(), ctx, body, "", &k);
  EXPECT_TRUE(st.isOk()) << st.message();
  std::vector<Tensor> outs;
  for (const Shape& sh : c.outputs) outs.push_back(Tensor::alloc(DType::F32, sh));
  if (!k) return outs;
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(&t);
  std::vector<Tensor*> ptrs;
  for (Tensor& t : outs) ptrs.push_back(&t);
  st = k->run(in, ptrs);
  EXPECT_TRUE(st.isOk()) << st.message();
  return outs;
}

// Every row root over (a - b) * s (s a scalar read per run), with the difference also an
// output: rows of 600 floats (longer than one chunk), 12 rows, so the threaded path runs too.
TEST(DnnlFused, RowKernelMatchesUnfusedForEveryRoot) {
  const Shape xs = {3, 4, 600};
  struct Root {
    std::string op;
    AttrMap attrs;
    Shape result;
    bool axesInput = false;  // ReduceSum-13's axes as a constant step input
    bool layerNorm = false;
  };
  auto attrs = [](std::vector<std::pair<std::string, Attr>> kv) {
    AttrMap m;
    for (auto& [k, v] : kv) m.set(k, v);
    return m;
  };
  std::vector<Root> roots = {
      {"ReduceSum", attrs({{"keepdims", Attr::ofInt(0)}}), {3}, true},
      {"ReduceMean", attrs({{"axes", Attr::ofInts({-1})}}), {3, 4, 1}},
      {"ReduceMax", attrs({{"axes", Attr::ofInts({2})}, {"keepdims", Attr::ofInt(0)}}), {3, 4}},
      {"ReduceMin", attrs({{"axes", Attr::ofInts({-1})}}), {3, 4, 1}},
      {"ReduceL2", attrs({{"axes", Attr::ofInts({-1})}, {"keepdims", Attr::ofInt(0)}}), {3, 4}},
      {"ReduceSumSquare", attrs({{"axes", Attr::ofInts({1, 2})}}), {3, 1, 1}},
      {"Softmax", attrs({}), xs},
      {"LogSoftmax", attrs({{"axis", Attr::ofInt(2)}}), xs},
      {"LayerNormalization", attrs({{"epsilon", Attr::ofFloat(1e-3f)}}), xs, false, true},
  };
  for (const Root& root : roots) {
    SCOPED_TRACE(root.op);
    BodyBuilder b;
    int d = b.add("Sub", {0, 1});
    int m = b.add("Mul", {BodyBuilder::result(d), 2});
    std::vector<int64_t> operands = {BodyBuilder::result(m)};
    if (root.axesInput || root.layerNorm) operands.push_back(3);
    if (root.layerNorm) operands.push_back(4);
    int r = b.add(root.op, operands, root.attrs);
    OpCase oc;
    oc.op = "Fused";
    b.finish(&oc, root.layerNorm ? "layernorm" : root.op.rfind("Reduce", 0) == 0 ? "reduction" : "softmax",
             {r, d}, {xs, xs, root.result});
    oc.inputs = {randomTensor(xs, 20), randomTensor(xs, 21), scalarF32(1.75f)};
    oc.constant = {false, false, false};
    if (root.axesInput) {
      oc.inputs.push_back(Tensor::fromVector<int64_t>({2}, {-2, -1}));
      oc.constant.push_back(true);
    }
    if (root.layerNorm) {
      oc.inputs.push_back(randomTensor({600}, 22, 0.5f, 1.5f));
      oc.inputs.push_back(randomTensor({600}, 23));
      oc.constant.insert(oc.constant.end(), {true, true});
    }
    oc.outputs = {root.result, xs};
    std::string impl;
    std::vector<Tensor> got;
    runWith(fullRegistry(), oc, &impl, &got);
    std::vector<Tensor> want = runUnfused(oc);
    EXPECT_EQ(impl, "fused-rows(2 ops + root)");
    ASSERT_EQ(got.size(), 2u);
    expectClose(got[0], toDouble(want[0]), 2e-5);
    expectClose(got[1], toDouble(want[1]), 1e-6);
  }
}

// add-layernorm in place, as plan-memory may plan it: the sum overwrites x and the norm r.
TEST(DnnlFused, AddLayerNormInPlace) {
  const Shape xs = {5, 1000};
  BodyBuilder b;
  int s = b.add("Add", {0, 1});
  int n = b.add("LayerNormalization", {BodyBuilder::result(s), 2, 3});
  OpCase oc;
  oc.op = "Fused";
  b.finish(&oc, "add-layernorm", {s, n}, {xs, xs});
  oc.inputs = {randomTensor(xs, 30, -2.f, 3.f), randomTensor(xs, 31), randomTensor({1000}, 32),
               randomTensor({1000}, 33)};
  oc.constant = {false, false, true, true};
  oc.outputs = {xs, xs};
  std::vector<Tensor> want = runUnfused(oc);
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(fullRegistry().create("cpu", oc.context(), &k).isOk());
  EXPECT_EQ(k->implName(), "fused-rows(1 ops + root)");
  Tensor x = Tensor::copyOf(oc.inputs[0]), r = Tensor::copyOf(oc.inputs[1]);
  ASSERT_TRUE(k->run({&x, &r, &oc.inputs[2], &oc.inputs[3]}, {&x, &r}).isOk());
  expectClose(x, toDouble(want[0]), 1e-6);
  expectClose(r, toDouble(want[1]), 1e-5);
}

// A reduction over a leading axis has no row form: the group runs unfused and says why.
TEST(DnnlFused, RowKernelRefusesLeadingAxes) {
  BodyBuilder b;
  int a = b.add("Abs", {0});
  AttrMap ax;
  ax.set("axes", Attr::ofInts({0}));
  int r = b.add("ReduceMean", {BodyBuilder::result(a)}, ax);
  OpCase oc;
  oc.op = "Fused";
  b.finish(&oc, "reduction", {r}, {{4, 6}, {1, 6}});
  oc.inputs = {randomTensor({4, 6}, 40)};
  oc.outputs = {{1, 6}};
  std::string impl;
  Tensor got = runWith(fullRegistry(), oc, &impl);
  EXPECT_NE(impl.find("no row form"), std::string::npos) << impl;
  expectClose(got, toDouble(runUnfused(oc)[0]), 1e-6);
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
