// oneDNN binary kernels (Add/Sub/Mul/Div/Min/Max) with numpy broadcasting against naive loops,
// plus the registration contract of the whole dnnl backend.
#include <functional>
#include <set>
#include <thread>

#include "dnnl_test_util.h"

namespace tandem {
namespace dnnltest {
namespace {

double apply(const std::string& op, double a, double b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Min") return std::min(a, b);
  return std::max(a, b);
}

/// numpy broadcasting of a and b to y, evaluated in double.
std::vector<double> naiveBinary(const std::string& op, const Tensor& a, const Tensor& b,
                                const Shape& y) {
  const size_t r = y.size();
  Shape as = a.shape(), bs = b.shape();
  as.insert(as.begin(), r - as.size(), 1);
  bs.insert(bs.begin(), r - bs.size(), 1);
  std::vector<double> out(numElements(y));
  for (int64_t i = 0; i < (int64_t)out.size(); ++i) {
    int64_t rem = i, ai = 0, bi = 0, aStride = 1, bStride = 1;
    for (int64_t d = (int64_t)r - 1; d >= 0; --d) {
      int64_t idx = rem % y[d];
      rem /= y[d];
      ai += (as[d] == 1 ? 0 : idx) * aStride;
      bi += (bs[d] == 1 ? 0 : idx) * bStride;
      aStride *= as[d];
      bStride *= bs[d];
    }
    out[i] = apply(op, a.data<float>()[ai], b.data<float>()[bi]);
  }
  return out;
}

OpCase binaryCase(const std::string& op, const Shape& a, const Shape& b, const Shape& y,
                  uint32_t seed) {
  OpCase c;
  c.op = op;
  // Divisors kept away from zero so the relative check is meaningful.
  c.inputs = {randomTensor(a, seed, -2.f, 2.f),
              op == "Div" ? randomTensor(b, seed + 1, 0.5f, 2.f) : randomTensor(b, seed + 1)};
  c.outputs = {y};
  return c;
}

void checkBinary(const std::string& op, const Shape& a, const Shape& b, const Shape& y,
                 uint32_t seed) {
  OpCase c = binaryCase(op, a, b, y, seed);
  ASSERT_TRUE(dnnlSupports(c)) << op;
  SCOPED_TRACE(op + " " + shapeToString(a) + " " + shapeToString(b));
  expectClose(runOnce(c), naiveBinary(op, c.inputs[0], c.inputs[1], y));
}

const char* kOps[] = {"Add", "Sub", "Mul", "Div", "Min", "Max"};

TEST(DnnlBinary, SameShape) {
  for (const char* op : kOps) checkBinary(op, {2, 3, 17}, {2, 3, 17}, {2, 3, 17}, 1);
}

TEST(DnnlBinary, SecondOperandBroadcast) {
  for (const char* op : kOps) {
    checkBinary(op, {2, 8, 5, 5}, {8, 1, 1}, {2, 8, 5, 5}, 2);  // per-channel bias
    checkBinary(op, {4, 6}, {}, {4, 6}, 3);                     // scalar
  }
}

// Broadcasts oneDNN's jit binary may not cover (a middle dim; Swin's shifted-window mask, 5-D):
// whichever kernel the CPU registry picks, it is never oneDNN's "ref:any" (one element at a
// time: 17 ms where the reference kernels' rows take 0.4) and it matches the naive loop. The
// Swin shape has 1.4M elements, so the threaded rows run too.
TEST(DnnlBinary, NoOneDnnReferenceBroadcast) {
  KernelRegistry full;
  registerCpuDnnlKernels(full);
  registerCpuReferenceKernels(full);
  struct Case { Shape a, b, y; };
  const Case cases[] = {{{3, 4, 5}, {3, 1, 5}, {3, 4, 5}},
                        {{1, 64, 3, 49, 49}, {1, 64, 1, 49, 49}, {1, 64, 3, 49, 49}},
                        {{2, 3, 1, 4}, {2, 1, 5, 1}, {2, 3, 5, 4}}};
  for (const Case& k : cases)
    for (const char* op : kOps) {
      OpCase c = binaryCase(op, k.a, k.b, k.y, 8);
      SCOPED_TRACE(std::string(op) + " " + shapeToString(k.a) + " " + shapeToString(k.b));
      std::unique_ptr<Kernel> kernel;
      Status st = full.create("cpu", c.context(), &kernel);
      ASSERT_TRUE(st.isOk()) << st.message();
      EXPECT_EQ(kernel->implName().find("ref:any"), std::string::npos) << kernel->implName();
      Tensor y = Tensor::alloc(DType::F32, k.y);
      ASSERT_TRUE(kernel->run({&c.inputs[0], &c.inputs[1]}, {&y}).isOk());
      expectClose(y, naiveBinary(op, c.inputs[0], c.inputs[1], k.y));
    }
}

TEST(DnnlBinary, FirstOperandBroadcastSwapsWhenExact) {
  // Commutative ops swap the operands; Sub computes -(B - A), exact in floating point.
  for (const char* op : {"Add", "Mul", "Min", "Max", "Sub"}) {
    checkBinary(op, {5}, {3, 5}, {3, 5}, 5);
    checkBinary(op, {}, {2, 2, 3}, {2, 2, 3}, 6);
  }
}

// A squeeze-excitation scale x[N, C, H, W] * s[N, C, 1, 1] (either operand order) with x and the
// result in the host's activation layout or plain, as the plan says (input_layouts /
// output_layouts): oneDNN's jit computes it (never its reference), and it matches the naive loop
// read in plain. 64 channels fill whole blocks of every host layout; 24 pad nChw16c (kept plain).
TEST(DnnlBinary, ChannelScaleInTheHostLayout) {
  for (int64_t C : {64, 24})
    for (int64_t sN : {2, 1})
    for (bool xFirst : {true, false})
      for (bool inBlocked : {true, false})
        for (bool outBlocked : {true, false}) {
          const Shape xs = {2, C, 5, 7}, ss = {sN, C, 1, 1};
          OpCase c = binaryCase("Mul", xFirst ? xs : ss, xFirst ? ss : xs, xs, 11);
          const Tensor x = c.inputs[xFirst ? 0 : 1], scale = c.inputs[xFirst ? 1 : 0];
          std::vector<std::string> layouts = {"", ""};
          layouts[xFirst ? 0 : 1] = inBlocked ? "blocked" : "";
          c.attrs.set("input_layouts", Attr::ofStrings(layouts));
          c.attrs.set("output_layouts", Attr::ofStrings({outBlocked ? "blocked" : ""}));
          const KernelContext ctx = c.context();
          const bool xHost = dnnlcpu::isBlocked(ctx, true, xFirst ? 0 : 1);
          const bool yHost = dnnlcpu::isBlocked(ctx, false, 0);
          EXPECT_EQ(xHost, inBlocked && (C % 16 == 0 || std::string(dnnlcpu::activationLayoutName()) != "nChw16c"));
          if (xHost) c.inputs[xFirst ? 0 : 1] = relayout(x, true);
          SCOPED_TRACE("C " + std::to_string(C) + " s " + shapeToString(ss) + (xFirst ? " x*s" : " s*x") + (inBlocked ? " in-blocked" : "") +
                       (outBlocked ? " out-blocked" : ""));
          ASSERT_TRUE(dnnlSupports(c));
          std::string impl;
          Tensor y = runOnce(c, &impl);
          EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
          EXPECT_EQ(impl.find("reorders[dst]") != std::string::npos, xHost != yHost) << impl;
          if (yHost) y = relayout(y, false);
          expectClose(y, naiveBinary("Mul", x, scale, xs));
        }
}

// A residual Add of two same-shape activations both in the host layout (the plan keeps both or
// neither: passes/Fuse.cpp's markLayouts), result blocked or plain: oneDNN's jit, not its
// reference, and the naive sum.
TEST(DnnlBinary, ResidualAddInTheHostLayout) {
  for (bool outBlocked : {true, false}) {
    const Shape xs = {1, 32, 6, 5};
    OpCase c = binaryCase("Add", xs, xs, xs, 12);
    const Tensor a = c.inputs[0], b = c.inputs[1];
    c.attrs.set("input_layouts", Attr::ofStrings({"blocked", "blocked"}));
    c.attrs.set("output_layouts", Attr::ofStrings({outBlocked ? "blocked" : ""}));
    c.inputs = {relayout(a, true), relayout(b, true)};
    SCOPED_TRACE(outBlocked ? "out blocked" : "out plain");
    ASSERT_TRUE(dnnlSupports(c));
    std::string impl;
    Tensor y = runOnce(c, &impl);
    EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
    EXPECT_EQ(impl.find("reorders[dst]") != std::string::npos, !outBlocked) << impl;
    if (outBlocked) y = relayout(y, false);
    expectClose(y, naiveBinary("Add", a, b, xs));
  }
}

TEST(DnnlBinary, HandComputedSubSwapped) {
  OpCase c;
  c.op = "Sub";
  c.inputs = {Tensor::fromVector<float>({2}, {10.f, 20.f}),
              Tensor::fromVector<float>({2, 2}, {1.f, 2.f, 3.f, 4.f})};
  c.outputs = {{2, 2}};
  expectClose(runOnce(c), {9, 18, 7, 16});
}

TEST(DnnlBinary, UnexpressibleBroadcastsFallBack) {
  // Div with a broadcast numerator and a two-sided broadcast are left to the reference kernel.
  EXPECT_FALSE(dnnlSupports(binaryCase("Div", {5}, {3, 5}, {3, 5}, 1)));
  EXPECT_FALSE(dnnlSupports(binaryCase("Add", {3, 1}, {1, 4}, {3, 4}, 1)));
  // Variadic Max with three inputs.
  OpCase c = binaryCase("Max", {3}, {3}, {3}, 1);
  c.inputs.push_back(randomTensor({3}, 9));
  EXPECT_FALSE(dnnlSupports(c));
}

TEST(DnnlBinary, InPlaceOutputAliasingFirstInput) {
  // The memory planner may give Y the buffer of A: element-wise ops must still be right.
  OpCase c = binaryCase("Mul", {4, 16}, {16}, {4, 16}, 7);
  std::vector<double> want = naiveBinary("Mul", c.inputs[0], c.inputs[1], {4, 16});
  std::unique_ptr<Kernel> k = createKernel(c);
  ASSERT_TRUE(k);
  Tensor y = c.inputs[0];  // shares the buffer
  ASSERT_TRUE(k->run({&c.inputs[0], &c.inputs[1]}, {&y}).isOk());
  expectClose(y, want);
}

// ---- registration contract of the whole backend ----

TEST(DnnlRegistry, EveryDefIsCpuDnnlPriority10F32) {
  std::set<std::string> ops;
  for (const KernelDef& d : dnnlRegistry().all()) {
    ops.insert(d.opType);
    EXPECT_EQ(d.deviceKind, "cpu");
    EXPECT_EQ(d.impl, "dnnl");
    EXPECT_EQ(d.priority, 10);
    ASSERT_TRUE(d.accepts);
    ASSERT_TRUE(d.supportsContext);
    // The int8 products (DnnlQuantized.cpp) take u8/i8 x and w, nothing f32.
    if (d.opType == "ConvInteger" || d.opType == "MatMulInteger" || d.opType == "QLinearConv" ||
        d.opType == "QLinearMatMul" || d.opType == "QLinearMatMulBias" ||
        d.opType == "DynamicQuantizeMatMul") {
      const size_t w = d.opType[0] == 'Q' ? 3 : 1;
      std::vector<DType> q(w + 1, DType::F32);
      q[0] = d.opType == "DynamicQuantizeMatMul" ? DType::F32 : DType::U8;
      q[w] = DType::I8;
      EXPECT_TRUE(d.accepts(q)) << d.opType;
      EXPECT_FALSE(d.accepts(std::vector<DType>(w + 1, DType::F32))) << d.opType;
      continue;
    }
    // DequantizeMatMul (DnnlDequantizeMatMul.cpp): A f32, B u8/i8, b_scale f32.
    if (d.opType == "DequantizeMatMul") {
      EXPECT_TRUE(d.accepts({DType::F32, DType::I8, DType::F32}));
      EXPECT_TRUE(d.accepts({DType::F32, DType::U8, DType::F32, DType::U8, DType::F32}));
      EXPECT_FALSE(d.accepts({DType::F32, DType::F32, DType::F32}));
      continue;
    }
    // Attention (DnnlAttention.cpp) takes f32 Q, K, V, a bool mask and i64 nonpad_kv_seqlen.
    if (d.opType == "Attention") {
      EXPECT_TRUE(d.accepts({DType::F32, DType::F32, DType::F32, DType::Bool, DType::I64}));
      EXPECT_FALSE(d.accepts({DType::F32, DType::F32}));
      EXPECT_FALSE(d.accepts({DType::F64, DType::F64, DType::F64}));
      continue;
    }
    EXPECT_TRUE(d.accepts({DType::F32, DType::F32})) << d.opType;
    EXPECT_FALSE(d.accepts({DType::F64, DType::F64})) << d.opType;
    EXPECT_FALSE(d.accepts({DType::I64})) << d.opType;
  }
  for (const char* op :
       {"Conv", "ConvTranspose", "Gemm", "MatMul", "MaxPool", "AveragePool", "GlobalAveragePool",
        "GlobalMaxPool", "BatchNormalization", "LayerNormalization", "Softmax", "LogSoftmax",
        "Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "HardSigmoid", "Tanh", "Clip", "Exp",
        "Sqrt", "Abs", "Neg", "Reciprocal", "Pow", "Add", "Sub", "Mul", "Div", "Min",
        "Max", "Transpose", "Attention", "DequantizeMatMul"})
    EXPECT_TRUE(ops.count(op)) << op << " not registered";
  EXPECT_TRUE(dnnlRegistry().supports("Pow", "cpu", {DType::F32, DType::I64}));
  EXPECT_FALSE(dnnlRegistry().supports("Erf", "cpu", {DType::F32}));
}

TEST(DnnlRegistry, ConcurrentRunsOfOneKernel) {
  // Executable::run may be called from several threads; each run binds its own buffers.
  OpCase c = binaryCase("Add", {64, 64}, {64}, {64, 64}, 11);
  std::unique_ptr<Kernel> k = createKernel(c);
  ASSERT_TRUE(k);
  std::vector<Tensor> xs, ys;
  for (int t = 0; t < 4; ++t) {
    xs.push_back(randomTensor({64, 64}, 100 + t));
    ys.push_back(Tensor::alloc(DType::F32, {64, 64}));
  }
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      bool good = true;
      for (int i = 0; i < 50; ++i) good = good && k->run({&xs[t], &c.inputs[1]}, {&ys[t]}).isOk();
      ok[t] = good;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    EXPECT_TRUE(ok[t]);
    expectClose(ys[t], naiveBinary("Add", xs[t], c.inputs[1], {64, 64}));
  }
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
