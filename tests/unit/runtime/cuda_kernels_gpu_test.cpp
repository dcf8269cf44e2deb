// Differential tests of every CUDA kernel against the CPU kernel on the same inputs (ggml
// test-backend-ops style), plus a placed plan that crosses cpu -> cuda:0 -> cpu. Needs a GPU
// (ctest label gpu); without one every test prints the reason and skips.
#include "fused_attrs_util.h"
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "runtime/Backend.h"
#include "runtime/Executable.h"
#include "runtime/PlanFormat.h"
#include "runtime/cpu/ref/RefCommon.h"
#include "runtime/cuda/CudaKernelTable.h"
#include "gpu_test_util.h"

using namespace tandem;

namespace {

struct OpCase {
  std::string name;  // for messages
  std::string op;
  AttrMap attrs;
  std::vector<Tensor> inputs;     // an undefined Tensor is an absent optional input
  std::vector<bool> constant;     // inputs known at load (shape operands, weights)
  std::vector<TensorType> outputs;
  double tol = 1e-5;              // |gpu - cpu| <= tol * (1 + |cpu|)
  plan::FusedBody body;           // "Fused" cases: the group's members (fusedCase)
};

/// A "Fused" case: the group `f`'s kind attribute and body.
OpCase fusedCase(std::string name, const FusedStep& f, std::vector<Tensor> inputs, std::vector<bool> constant,
                 std::vector<TensorType> outputs, double tol) {
  return OpCase{std::move(name), "Fused", f.attrs, std::move(inputs), std::move(constant), std::move(outputs), tol, f.body};
}

std::mt19937& rng() {
  static std::mt19937 r(1234);
  return r;
}

Tensor randomF32(Shape s, float lo = -2.f, float hi = 2.f) {
  Tensor t = Tensor::alloc(DType::F32, s);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng());
  return t;
}

template <typename T>
Tensor randomInt(DType dt, Shape s, int lo, int hi) {
  Tensor t = Tensor::alloc(dt, s);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = (T)d(rng());
  return t;
}

Tensor ints(std::vector<int64_t> v) { return Tensor::fromVector<int64_t>({(int64_t)v.size()}, v); }

KernelContext contextFor(const OpCase& c) {
  KernelContext ctx;
  ctx.opType = c.op;
  ctx.nodeName = c.name;
  ctx.attrs = &c.attrs;
  ctx.fusedBody = c.op == "Fused" ? &c.body : nullptr;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    ctx.inputTypes.push_back(c.inputs[i].defined() ? TensorType{c.inputs[i].dtype(), c.inputs[i].shape()} : TensorType{});
    bool k = i < c.constant.size() && c.constant[i] && c.inputs[i].defined();
    ctx.constInputs.push_back(k ? &c.inputs[i] : nullptr);
  }
  ctx.outputTypes = c.outputs;
  return ctx;
}

// Runs `c` with the CPU registry kernel and with the CUDA backend; compares every output.
void checkAgainstCpu(const OpCase& c) {
  SCOPED_TRACE(c.name);
  KernelContext ctx = contextFor(c);
  std::unique_ptr<Kernel> cpuK;
  Status st = KernelRegistry::global().create("cpu", ctx, &cpuK);
  ASSERT_TRUE(st.isOk()) << st.message();
  std::vector<const Tensor*> cin;
  for (const Tensor& t : c.inputs) cin.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor> cpuOut;
  for (const TensorType& t : c.outputs) cpuOut.push_back(t.present() ? Tensor::alloc(t.dtype, t.shape) : Tensor());
  std::vector<Tensor*> cout;
  for (Tensor& t : cpuOut) cout.push_back(t.defined() ? &t : nullptr);
  ASSERT_TRUE(cpuK->run(cin, cout).isOk());

  std::unique_ptr<DeviceBackend> gpu;
  ASSERT_TRUE(createCudaBackend(0, BackendOptions{}, &gpu).isOk());
  std::unique_ptr<Kernel> k;
  st = gpu->createKernel(ctx, &k);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_TRUE(gpu->finishLoad({k.get()}).isOk());
  std::vector<Tensor> din, dout;
  std::vector<void*> owned;
  for (const Tensor& t : c.inputs) {
    if (!t.defined()) { din.push_back(Tensor()); continue; }
    void* p;
    ASSERT_TRUE(gpu->allocate(t.bytes(), "input", &p).isOk());
    owned.push_back(p);
    ASSERT_TRUE(gpu->copyFromHost(p, t.raw(), t.bytes()).isOk());
    din.push_back(Tensor::view(t.dtype(), t.shape(), p));
  }
  for (const TensorType& t : c.outputs) {
    if (!t.present()) { dout.push_back(Tensor()); continue; }
    void* p;
    ASSERT_TRUE(gpu->allocate(numElements(t.shape) * dtypeSize(t.dtype), "output", &p).isOk());
    owned.push_back(p);
    dout.push_back(Tensor::view(t.dtype, t.shape, p));
  }
  ASSERT_TRUE(gpu->synchronize().isOk());
  std::vector<const Tensor*> gin;
  for (Tensor& t : din) gin.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor*> gout;
  for (Tensor& t : dout) gout.push_back(t.defined() ? &t : nullptr);
  st = gpu->launch(*k, gin, gout);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_TRUE(gpu->synchronize().isOk());
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    if (!c.outputs[o].present()) continue;
    Tensor host = Tensor::alloc(c.outputs[o].dtype, c.outputs[o].shape);
    ASSERT_TRUE(gpu->copyToHost(host.raw(), dout[o].raw(), host.bytes()).isOk());
    ASSERT_TRUE(gpu->synchronize().isOk());
    int bad = 0;
    for (int64_t i = 0; i < host.numel(); ++i) {
      double g = ref::elementAsDouble(host, i), r = ref::elementAsDouble(cpuOut[o], i);
      bool same = (std::isnan(g) && std::isnan(r)) || (std::isinf(r) && g == r) ||
                  std::fabs(g - r) <= c.tol * (1 + std::fabs(r));
      if (!same && bad++ < 5)
        ADD_FAILURE() << c.name << " output " << o << " element " << i << ": gpu " << g << " cpu " << r;
    }
    EXPECT_EQ(bad, 0) << c.name << ": " << bad << " of " << host.numel() << " elements differ";
  }
  k.reset();
  for (void* p : owned) gpu->deallocate(p);
}

TensorType tt(DType d, Shape s) { return TensorType{d, std::move(s)}; }
TensorType f32(Shape s) { return tt(DType::F32, std::move(s)); }

TEST(CudaKernels, UnaryOps) {
  REQUIRE_GPU();
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Erf", "Softplus", "LeakyRelu",
                         "Elu", "Selu", "HardSigmoid"}) {
    OpCase c{op, op, {}, {randomF32({3, 5, 7})}, {}, {f32({3, 5, 7})}};
    checkAgainstCpu(c);
  }
  for (const char* op : {"Log", "Sqrt", "Reciprocal"}) {
    OpCase c{op, op, {}, {randomF32({4, 33}, 0.1f, 3.f)}, {}, {f32({4, 33})}};
    checkAgainstCpu(c);
  }
  OpCase leaky{"LeakyRelu alpha", "LeakyRelu", {}, {randomF32({100})}, {}, {f32({100})}};
  leaky.attrs.set("alpha", Attr::ofFloat(0.3f));
  checkAgainstCpu(leaky);
  for (const char* form : {"none", "tanh"}) {
    OpCase gelu{std::string("Gelu ") + form, "Gelu", {}, {randomF32({3, 70}, -4.f, 4.f)}, {}, {f32({3, 70})}};
    gelu.attrs.set("approximate", Attr::ofString(form));
    checkAgainstCpu(gelu);
  }
  OpCase clip{"Clip", "Clip", {}, {randomF32({2, 50}), Tensor::fromVector<float>({}, {-0.5f}), Tensor::fromVector<float>({}, {1.f})},
              {false, true, true}, {f32({2, 50})}};
  checkAgainstCpu(clip);
  OpCase clipMax{"Clip max only", "Clip", {}, {randomF32({2, 50}), Tensor(), Tensor::fromVector<float>({}, {0.5f})},
                 {false, true, true}, {f32({2, 50})}};
  checkAgainstCpu(clipMax);
}

TEST(CudaKernels, BinaryOpsWithBroadcast) {
  REQUIRE_GPU();
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Min", "Max", "Sum"}) {
    checkAgainstCpu(OpCase{std::string(op) + " same", op, {}, {randomF32({4, 5}), randomF32({4, 5}, 0.5f, 2.f)}, {}, {f32({4, 5})}});
    checkAgainstCpu(OpCase{std::string(op) + " bcast", op, {}, {randomF32({2, 1, 5}), randomF32({3, 1}, 0.5f, 2.f)}, {}, {f32({2, 3, 5})}});
    checkAgainstCpu(OpCase{std::string(op) + " i64", op, {}, {randomInt<int64_t>(DType::I64, {3, 4}, -9, 9),
                                                               randomInt<int64_t>(DType::I64, {4}, 1, 9)}, {}, {tt(DType::I64, {3, 4})}});
    checkAgainstCpu(OpCase{std::string(op) + " i32", op, {}, {randomInt<int32_t>(DType::I32, {3, 4}, -9, 9),
                                                               randomInt<int32_t>(DType::I32, {1}, 1, 9)}, {}, {tt(DType::I32, {3, 4})}});
  }
  checkAgainstCpu(OpCase{"Pow", "Pow", {}, {randomF32({3, 4}, 0.1f, 2.f), randomF32({4}, -2.f, 2.f)}, {}, {f32({3, 4})}, 1e-4});
  checkAgainstCpu(OpCase{"PRelu", "PRelu", {}, {randomF32({2, 3, 4}), randomF32({3, 1})}, {}, {f32({2, 3, 4})}});
  for (const char* op : {"Less", "Greater", "Equal"}) {
    Tensor a = randomInt<int64_t>(DType::I64, {5, 6}, 0, 3), b = randomInt<int64_t>(DType::I64, {6}, 0, 3);
    checkAgainstCpu(OpCase{std::string(op) + " i64", op, {}, {a, b}, {}, {tt(DType::Bool, {5, 6})}});
    checkAgainstCpu(OpCase{std::string(op) + " f32", op, {}, {randomF32({5, 6}), randomF32({5, 1})}, {}, {tt(DType::Bool, {5, 6})}});
  }
  checkAgainstCpu(OpCase{"Sum of 4", "Sum", {}, {randomF32({2, 3}), randomF32({3}), randomF32({2, 1}), randomF32({2, 3})}, {}, {f32({2, 3})}});
  checkAgainstCpu(OpCase{"Max of 3", "Max", {}, {randomF32({2, 3}), randomF32({3}), randomF32({2, 1})}, {}, {f32({2, 3})}});
}

TEST(CudaKernels, WhereAndCast) {
  REQUIRE_GPU();
  Tensor cond = randomInt<uint8_t>(DType::Bool, {4, 1}, 0, 1);
  checkAgainstCpu(OpCase{"Where f32", "Where", {}, {cond, randomF32({4, 5}), randomF32({5})}, {}, {f32({4, 5})}});
  checkAgainstCpu(OpCase{"Where i64", "Where", {}, {cond, randomInt<int64_t>(DType::I64, {1, 5}, -5, 5),
                                                    randomInt<int64_t>(DType::I64, {4, 5}, -5, 5)}, {}, {tt(DType::I64, {4, 5})}});
  std::vector<std::pair<DType, Tensor>> from = {{DType::F32, randomF32({3, 7}, -5.f, 5.f)},
                                                {DType::I64, randomInt<int64_t>(DType::I64, {3, 7}, -5, 5)},
                                                {DType::I32, randomInt<int32_t>(DType::I32, {3, 7}, -5, 5)},
                                                {DType::Bool, randomInt<uint8_t>(DType::Bool, {3, 7}, 0, 1)}};
  for (auto& [fd, t] : from)
    for (DType to : {DType::F32, DType::I64, DType::I32, DType::Bool, DType::F64}) {
      OpCase c{std::string("Cast ") + dtypeName(fd) + "->" + dtypeName(to), "Cast", {}, {t}, {}, {tt(to, {3, 7})}};
      c.attrs.set("to", Attr::ofInt((int)to));
      checkAgainstCpu(c);
    }
}

TEST(CudaKernels, DataMovement) {
  REQUIRE_GPU();
  OpCase tr{"Transpose", "Transpose", {}, {randomF32({2, 3, 4, 5})}, {}, {f32({4, 2, 5, 3})}};
  tr.attrs.set("perm", Attr::ofInts({2, 0, 3, 1}));
  checkAgainstCpu(tr);
  checkAgainstCpu(OpCase{"Transpose default", "Transpose", {}, {randomInt<int64_t>(DType::I64, {3, 4}, 0, 99)}, {}, {tt(DType::I64, {4, 3})}});
  checkAgainstCpu(OpCase{"Expand", "Expand", {}, {randomF32({3, 1}), ints({2, 3, 4})}, {false, true}, {f32({2, 3, 4})}});
  checkAgainstCpu(OpCase{"Tile", "Tile", {}, {randomF32({2, 3}), ints({2, 3})}, {false, true}, {f32({4, 9})}});
  checkAgainstCpu(OpCase{"Reshape", "Reshape", {}, {randomF32({2, 6}), ints({3, 4})}, {false, true}, {f32({3, 4})}});
  checkAgainstCpu(OpCase{"Slice", "Slice", {}, {randomF32({5, 6, 7}), ints({1, -1}), ints({4, -7}), ints({0, 2}), ints({2, -2})},
                         {false, true, true, true, true}, {f32({2, 6, 3})}});
  OpCase cat{"Concat", "Concat", {}, {randomF32({2, 3, 4}), randomF32({2, 1, 4}), randomF32({2, 2, 4})}, {}, {f32({2, 6, 4})}};
  cat.attrs.set("axis", Attr::ofInt(1));
  checkAgainstCpu(cat);
  OpCase split{"Split", "Split", {}, {randomF32({2, 6, 3}), ints({1, 5})}, {false, true}, {f32({2, 1, 3}), f32({2, 5, 3})}};
  split.attrs.set("axis", Attr::ofInt(-2));
  checkAgainstCpu(split);
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    OpCase pad{std::string("Pad ") + mode, "Pad", {}, {randomF32({3, 4}), ints({1, 2, 2, 1}), Tensor::fromVector<float>({}, {7.f})},
               {false, true, true}, {f32({6, 7})}};
    pad.attrs.set("mode", Attr::ofString(mode));
    checkAgainstCpu(pad);
  }
  Tensor idx = Tensor::fromVector<int64_t>({2, 2}, {0, -1, 2, 1});
  OpCase g{"Gather axis 1", "Gather", {}, {randomF32({3, 4, 2}), idx}, {}, {f32({3, 2, 2, 2})}};
  g.attrs.set("axis", Attr::ofInt(1));
  checkAgainstCpu(g);
  Tensor idx32 = Tensor::fromVector<int32_t>({3}, {2, 0, 2});
  checkAgainstCpu(OpCase{"Gather i32", "Gather", {}, {randomInt<int64_t>(DType::I64, {3, 5}, 0, 9), idx32}, {}, {tt(DType::I64, {3, 5})}});
}

TEST(CudaKernels, Reductions) {
  REQUIRE_GPU();
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) {
    OpCase a{std::string(op) + " axes 0,2", op, {}, {randomF32({3, 4, 500})}, {}, {f32({1, 4, 1})}, 1e-4};
    a.attrs.set("axes", Attr::ofInts({0, 2}));
    if (std::string(op) == "ReduceSum") { a.inputs.push_back(ints({0, 2})); a.constant = {false, true}; a.attrs = AttrMap(); }
    checkAgainstCpu(a);
    OpCase all{std::string(op) + " all, no keepdims", op, {}, {randomF32({7, 9})}, {}, {f32({})}, 1e-4};
    all.attrs.set("keepdims", Attr::ofInt(0));
    checkAgainstCpu(all);
  }
  for (int last : {0, 1}) {
    Tensor x = randomInt<int64_t>(DType::I64, {4, 6, 3}, 0, 3);
    Tensor xf = Tensor::alloc(DType::F32, {4, 6, 3});
    for (int64_t i = 0; i < xf.numel(); ++i) xf.data<float>()[i] = (float)x.data<int64_t>()[i];  // ties
    OpCase am{"ArgMax last=" + std::to_string(last), "ArgMax", {}, {xf}, {}, {tt(DType::I64, {4, 1, 3})}};
    am.attrs.set("axis", Attr::ofInt(1));
    am.attrs.set("select_last_index", Attr::ofInt(last));
    checkAgainstCpu(am);
  }
}

TEST(CudaKernels, Normalizations) {
  REQUIRE_GPU();
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    OpCase last{std::string(op) + " last axis", op, {}, {randomF32({3, 1000}, -10, 10)}, {}, {f32({3, 1000})}, 1e-5};
    checkAgainstCpu(last);
    OpCase mid{std::string(op) + " axis 1", op, {}, {randomF32({2, 7, 5})}, {}, {f32({2, 7, 5})}};
    mid.attrs.set("axis", Attr::ofInt(1));
    checkAgainstCpu(mid);
  }
  OpCase ln{"LayerNormalization", "LayerNormalization", {}, {randomF32({4, 3, 64}), randomF32({64}), randomF32({64})},
            {false, true, true}, {f32({4, 3, 64}), f32({4, 3, 1}), f32({4, 3, 1})}, 1e-4};
  checkAgainstCpu(ln);
  OpCase rms{"RMSNormalization", "RMSNormalization", {}, {randomF32({4, 3, 64}), randomF32({64})},
             {false, true}, {f32({4, 3, 64})}, 1e-4};
  checkAgainstCpu(rms);
  OpCase rope{"RotaryEmbedding", "RotaryEmbedding", {}, {randomF32({2, 4, 6, 16}), randomF32({8, 8}), randomF32({8, 8}),
                                                         Tensor::fromVector<int64_t>({2, 6}, {0, 1, 2, 3, 4, 5, 7, 6, 5, 4, 3, 2})},
              {false, true, true, false}, {f32({2, 4, 6, 16})}, 0};
  checkAgainstCpu(rope);
  OpCase gn{"GroupNormalization", "GroupNormalization", {}, {randomF32({2, 6, 5, 7}), randomF32({6}), randomF32({6})},
            {false, true, true}, {f32({2, 6, 5, 7})}, 1e-4};
  gn.attrs.set("num_groups", Attr::ofInt(3));
  checkAgainstCpu(gn);
  OpCase in{"InstanceNormalization", "InstanceNormalization", {}, {randomF32({2, 3, 33}), randomF32({3}), randomF32({3})},
            {false, true, true}, {f32({2, 3, 33})}, 1e-4};
  checkAgainstCpu(in);
  for (Shape s : {Shape{2, 3, 5, 5}, Shape{2, 3, 7}}) {
    OpCase bn{"BatchNormalization rank " + std::to_string(s.size()), "BatchNormalization", {},
              {randomF32(s), randomF32({3}), randomF32({3}), randomF32({3}), randomF32({3}, 0.5f, 2.f)},
              {false, true, true, true, true}, {f32(s)}, 1e-4};
    checkAgainstCpu(bn);
  }
}

TEST(CudaKernels, GemmAndMatMul) {
  REQUIRE_GPU();
  for (int ta : {0, 1})
    for (int tb : {0, 1}) {
      Shape as = ta ? Shape{64, 33} : Shape{33, 64}, bs = tb ? Shape{17, 64} : Shape{64, 17};
      OpCase g{"Gemm tA=" + std::to_string(ta) + " tB=" + std::to_string(tb), "Gemm", {},
               {randomF32(as), randomF32(bs), randomF32({17})}, {false, true, true}, {f32({33, 17})}, 1e-4};
      g.attrs.set("transA", Attr::ofInt(ta));
      g.attrs.set("transB", Attr::ofInt(tb));
      checkAgainstCpu(g);
    }
  OpCase full{"Gemm C matrix alpha beta", "Gemm", {}, {randomF32({8, 16}), randomF32({16, 4}), randomF32({8, 1})},
              {false, true, true}, {f32({8, 4})}, 1e-4};
  full.attrs.set("alpha", Attr::ofFloat(0.5f));
  full.attrs.set("beta", Attr::ofFloat(2.f));
  checkAgainstCpu(full);
  checkAgainstCpu(OpCase{"Gemm no C", "Gemm", {}, {randomF32({5, 7}), randomF32({7, 3})}, {}, {f32({5, 3})}, 1e-4});
  checkAgainstCpu(OpCase{"MatMul 2D", "MatMul", {}, {randomF32({31, 47}), randomF32({47, 29})}, {}, {f32({31, 29})}, 1e-4});
  checkAgainstCpu(OpCase{"MatMul batched", "MatMul", {}, {randomF32({3, 8, 16}), randomF32({3, 16, 5})}, {}, {f32({3, 8, 5})}, 1e-4});
  checkAgainstCpu(OpCase{"MatMul B shared", "MatMul", {}, {randomF32({2, 3, 8, 16}), randomF32({16, 5})}, {}, {f32({2, 3, 8, 5})}, 1e-4});
  checkAgainstCpu(OpCase{"MatMul A shared", "MatMul", {}, {randomF32({8, 16}), randomF32({4, 16, 5})}, {}, {f32({4, 8, 5})}, 1e-4});
  checkAgainstCpu(OpCase{"MatMul broadcast", "MatMul", {}, {randomF32({2, 1, 8, 16}), randomF32({1, 3, 16, 5})}, {}, {f32({2, 3, 8, 5})}, 1e-4});
  checkAgainstCpu(OpCase{"MatMul 1-D", "MatMul", {}, {randomF32({16}), randomF32({2, 16, 5})}, {}, {f32({2, 5})}, 1e-4});
}

TEST(CudaKernels, ConvAndPool) {
  REQUIRE_GPU();
  OpCase conv{"Conv 3x3 pad stride bias", "Conv", {}, {randomF32({2, 4, 9, 9}), randomF32({6, 4, 3, 3}), randomF32({6})},
              {false, true, true}, {f32({2, 6, 5, 5})}, 1e-4};
  conv.attrs.set("pads", Attr::ofInts({1, 1, 1, 1}));
  conv.attrs.set("strides", Attr::ofInts({2, 2}));
  checkAgainstCpu(conv);
  OpCase grp{"Conv groups dilation", "Conv", {}, {randomF32({1, 4, 10, 10}), randomF32({4, 2, 3, 3})},
             {false, true}, {f32({1, 4, 6, 6})}, 1e-4};
  grp.attrs.set("group", Attr::ofInt(2));
  grp.attrs.set("dilations", Attr::ofInts({2, 2}));
  checkAgainstCpu(grp);
  OpCase c1{"Conv 1-D", "Conv", {}, {randomF32({2, 3, 20}), randomF32({5, 3, 4})}, {false, true}, {f32({2, 5, 17})}, 1e-4};
  checkAgainstCpu(c1);
  OpCase same{"Conv SAME_UPPER even", "Conv", {}, {randomF32({1, 2, 8, 8}), randomF32({3, 2, 3, 3})}, {false, true}, {f32({1, 3, 8, 8})}, 1e-4};
  same.attrs.set("auto_pad", Attr::ofString("SAME_UPPER"));
  checkAgainstCpu(same);
  OpCase same2{"Conv SAME_UPPER stride 2 (asymmetric pads)", "Conv", {}, {randomF32({1, 2, 8, 8}), randomF32({3, 2, 3, 3}), randomF32({3})},
               {false, true, true}, {f32({1, 3, 4, 4})}, 1e-4};
  same2.attrs.set("auto_pad", Attr::ofString("SAME_UPPER"));
  same2.attrs.set("strides", Attr::ofInts({2, 2}));
  checkAgainstCpu(same2);
  OpCase asym{"Conv explicit asymmetric pads", "Conv", {}, {randomF32({2, 3, 7, 6}), randomF32({4, 3, 3, 2})},
              {false, true}, {f32({2, 4, 8, 8})}, 1e-4};
  asym.attrs.set("pads", Attr::ofInts({2, 0, 1, 3}));
  checkAgainstCpu(asym);
  OpCase ct{"ConvTranspose stride 2", "ConvTranspose", {}, {randomF32({1, 4, 5, 5}), randomF32({4, 3, 3, 3}), randomF32({3})},
            {false, true, true}, {f32({1, 3, 11, 11})}, 1e-4};
  ct.attrs.set("strides", Attr::ofInts({2, 2}));
  checkAgainstCpu(ct);
  OpCase mp{"MaxPool 3x3 s2 p1", "MaxPool", {}, {randomF32({2, 3, 9, 9})}, {}, {f32({2, 3, 5, 5})}};
  mp.attrs.set("kernel_shape", Attr::ofInts({3, 3}));
  mp.attrs.set("strides", Attr::ofInts({2, 2}));
  mp.attrs.set("pads", Attr::ofInts({1, 1, 1, 1}));
  checkAgainstCpu(mp);
  for (int include : {0, 1}) {
    OpCase ap{"AveragePool count_include_pad=" + std::to_string(include), "AveragePool", {}, {randomF32({1, 2, 6, 6})}, {},
              {f32({1, 2, 6, 6})}};
    ap.attrs.set("kernel_shape", Attr::ofInts({3, 3}));
    ap.attrs.set("pads", Attr::ofInts({1, 1, 1, 1}));
    ap.attrs.set("count_include_pad", Attr::ofInt(include));
    checkAgainstCpu(ap);
  }
  checkAgainstCpu(OpCase{"GlobalAveragePool", "GlobalAveragePool", {}, {randomF32({2, 5, 7, 3})}, {}, {f32({2, 5, 1, 1})}, 1e-5});
  checkAgainstCpu(OpCase{"GlobalMaxPool", "GlobalMaxPool", {}, {randomF32({2, 5, 7, 3})}, {}, {f32({2, 5, 1, 1})}});
}

// The training step's pooling gradient and loss (autodiff's MaxPoolGrad, the ONNX loss and its
// Tandem gradient). More shapes in cuda_backend_ops_gpu_test.cpp.
TEST(CudaKernels, TrainingPoolGradAndLoss) {
  REQUIRE_GPU();
  // Overlapping 3x3 windows over integer-valued X: equal maxima share windows; dY goes to the
  // first in tap order, as the reference MaxPool picks it.
  Tensor ties = randomInt<int64_t>(DType::I64, {2, 3, 9, 10}, 0, 2);
  Tensor x = Tensor::alloc(DType::F32, {2, 3, 9, 10});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = (float)ties.data<int64_t>()[i];
  OpCase mpg{"MaxPoolGrad 3x3 s1 p1 ties", "MaxPoolGrad", {}, {x, randomF32({2, 3, 9, 10})}, {}, {f32({2, 3, 9, 10})}, 0};
  mpg.attrs.set("kernel_shape", Attr::ofInts({3, 3}));
  mpg.attrs.set("pads", Attr::ofInts({1, 1, 1, 1}));
  checkAgainstCpu(mpg);
  OpCase mpg2{"MaxPoolGrad 2x2 s2 asymmetric pads", "MaxPoolGrad", {}, {randomF32({2, 4, 7, 7}), randomF32({2, 4, 4, 4})},
              {}, {f32({2, 4, 7, 7})}, 0};
  mpg2.attrs.set("kernel_shape", Attr::ofInts({2, 2}));
  mpg2.attrs.set("strides", Attr::ofInts({2, 2}));
  mpg2.attrs.set("pads", Attr::ofInts({0, 0, 1, 1}));
  checkAgainstCpu(mpg2);
  for (const char* reduction : {"none", "sum", "mean"}) {
    Tensor labels = Tensor::fromVector<int64_t>({6}, {3, -1, 0, 9, -1, 5});
    OpCase sce{std::string("SoftmaxCrossEntropyLoss ") + reduction, "SoftmaxCrossEntropyLoss", {},
               {randomF32({6, 10}, -5, 5), labels, randomF32({10}, 0.1f, 2.f)}, {},
               {f32(std::string(reduction) == "none" ? Shape{6} : Shape{}), f32({6, 10})}, 1e-6};
    sce.attrs.set("reduction", Attr::ofString(reduction));
    sce.attrs.set("ignore_index", Attr::ofInt(-1));
    checkAgainstCpu(sce);
    Tensor labels32 = Tensor::fromVector<int32_t>({2, 3}, {1, 2, 0, 2, 2, 1});
    Shape ls = std::string(reduction) == "none" ? Shape{2, 3} : Shape{};
    OpCase grad{std::string("SoftmaxCrossEntropyLossGrad ") + reduction + " [2,3,3]", "SoftmaxCrossEntropyLossGrad", {},
                {randomF32(ls), randomF32({2, 3, 3}, -4, 0), labels32}, {}, {f32({2, 3, 3})}, 1e-6};
    grad.attrs.set("reduction", Attr::ofString(reduction));
    grad.attrs.set("ignore_index", Attr::ofInt(2));
    checkAgainstCpu(grad);
  }
}

// The hot-path selection, scan and image ops. More shapes and modes in cuda_backend_ops_gpu_test.cpp.
TEST(CudaKernels, SelectionScanAndResize) {
  REQUIRE_GPU();
  OpCase ge{"GatherElements axis 1", "GatherElements", {}, {randomF32({3, 5}),
            Tensor::fromVector<int64_t>({3, 2}, {0, 4, -1, 2, 3, -5})}, {}, {f32({3, 2})}, 0};
  ge.attrs.set("axis", Attr::ofInt(1));
  checkAgainstCpu(ge);
  for (int mode = 0; mode < 4; ++mode) {
    OpCase cs{"CumSum mode " + std::to_string(mode), "CumSum", {}, {randomF32({4, 1000, 3}),
              Tensor::fromVector<int64_t>({}, {1})}, {false, true}, {f32({4, 1000, 3})}, 0};
    cs.attrs.set("exclusive", Attr::ofInt(mode & 1));
    cs.attrs.set("reverse", Attr::ofInt(mode >> 1));
    checkAgainstCpu(cs);
  }
  // Ties: integer values in [0, 3]; equal values come out by lower index.
  Tensor ties = randomInt<int64_t>(DType::I64, {6, 300}, 0, 3);
  for (int largest = 0; largest < 2; ++largest) {
    OpCase tk{"TopK ties", "TopK", {}, {ties, Tensor::fromVector<int64_t>({1}, {40})}, {false, true},
              {tt(DType::I64, {6, 40}), tt(DType::I64, {6, 40})}, 0};
    tk.attrs.set("largest", Attr::ofInt(largest));
    checkAgainstCpu(tk);
  }
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    OpCase rs{std::string("Resize ") + mode, "Resize", {}, {randomF32({1, 3, 7, 9}), Tensor(),
              Tensor::fromVector<float>({4}, {1.f, 1.f, 2.f, 0.5f})}, {false, false, true}, {f32({1, 3, 14, 4})}, 0};
    rs.attrs.set("mode", Attr::ofString(mode));
    checkAgainstCpu(rs);
  }
}

// Every op of the CUDA table appears in some case above (so none goes untested).
TEST(CudaKernels, EveryTableOpHasACase) {
  std::set<std::string> covered = {
      "Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Erf", "Softplus", "LeakyRelu", "Elu", "Selu",
      "HardSigmoid", "Gelu", "Log", "Sqrt", "Reciprocal", "Clip", "Add", "Sub", "Mul", "Div", "Min", "Max", "Sum",
      "Pow", "PRelu", "Less", "Greater", "Equal", "Where", "Cast", "Transpose", "Expand", "Tile", "Reshape",
      "Slice", "Concat", "Split", "Pad", "Gather", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
      "ArgMax", "Softmax", "LogSoftmax", "LayerNormalization", "RMSNormalization", "RotaryEmbedding",
      "GroupNormalization", "InstanceNormalization",
      "BatchNormalization", "Gemm", "MatMul",
      "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
      "MaxPoolGrad", "SoftmaxCrossEntropyLoss", "SoftmaxCrossEntropyLossGrad",
      "GatherElements", "CumSum", "TopK", "Resize",
      // The reshape family shares one kernel (a device copy), covered by Reshape:
      "Identity", "Dropout", "Flatten", "Squeeze", "Unsqueeze"};
  for (const std::string& op : cudaKernelOps()) EXPECT_TRUE(covered.count(op)) << op << " has no differential case";
}


// Fusion groups the fuse pass forms on cuda devices, against the CPU's run of the same step
// (oneDNN post-ops, the element-wise loop, or op by op).
TEST(CudaFused, GemmEpilogues) {
  REQUIRE_GPU();
  // Gemm + bias Add + Relu: cuBLASLt RELU_BIAS, the bias a step input.
  OpCase relu = fusedCase("Gemm+bias+Relu", fusedStep("gemm-epilogue", {"Gemm", "Add", "Relu"}, {{0, 1}, {-2, 2}, {-3}}, {2}),
              {randomF32({8, 16}), randomF32({16, 32}), randomF32({32})}, {false, true, false}, {f32({8, 32})}, 1e-4);
  checkAgainstCpu(relu);
  // Gemm (transB) with its own [1, N] C and tanh-Gelu: GELU_BIAS with C as the bias.
  OpCase gelu = fusedCase("Gemm(C)+Gelu", fusedStep("gemm-epilogue", {"Gemm", "Gelu"}, {{0, 1, 2}, {-2}}, {1}),
              {randomF32({5, 16}), randomF32({24, 16}), randomF32({1, 24})}, {false, true, true}, {f32({5, 24})}, 1e-4);
  setMemberAttr(&gelu.body, 0, "transB", Attr::ofInt(1));
  setMemberAttr(&gelu.body, 1, "approximate", Attr::ofString("tanh"));
  checkAgainstCpu(gelu);
  // 3-D MatMul with one B matrix, bias first in the Add, tanh-Gelu.
  OpCase mm = fusedCase("MatMul+bias+Gelu", fusedStep("gemm-epilogue", {"MatMul", "Add", "Gelu"}, {{0, 1}, {2, -2}, {-3}}, {2}),
            {randomF32({2, 4, 16}), randomF32({16, 24}), randomF32({24})}, {false, true, true}, {f32({2, 4, 24})}, 1e-4);
  setMemberAttr(&mm.body, 2, "approximate", Attr::ofString("tanh"));
  checkAgainstCpu(mm);
  // Activation alone (no bias): RELU.
  checkAgainstCpu(fusedCase("MatMul+Relu", fusedStep("gemm-epilogue", {"MatMul", "Relu"}, {{0, 1}, {-2}}, {1}),
                         {randomF32({6, 16}), randomF32({16, 8})}, {false, true}, {f32({6, 8})}, 1e-4));
}

TEST(CudaFused, ElementwiseChainIsOneKernel) {
  REQUIRE_GPU();
  // (x * k) -> Sigmoid -> + y -> Clip(min -0.5) -> Gelu(erf); outputs the Gelu and the Sigmoid.
  OpCase c = fusedCase("elementwise chain",
           fusedStep("elementwise", {"Mul", "Sigmoid", "Add", "Clip", "Gelu"}, {{0, 1}, {-2}, {-3, 2}, {-4, 3, -1}, {-5}}, {4, 1}),
           {randomF32({4, 300}), Tensor::fromVector<float>({}, {3.f}), randomF32({4, 300}), Tensor::fromVector<float>({}, {-0.5f})},
           {false, false, false, true}, {f32({4, 300}), f32({4, 300})}, 1e-5);
  checkAgainstCpu(c);
  OpCase d = fusedCase("elementwise attrs",
           fusedStep("elementwise", {"LeakyRelu", "Max", "Div", "Elu", "HardSigmoid"}, {{0}, {-2, 1}, {-3, 1}, {-4}, {-5}}, {4}),
           {randomF32({1000}), randomF32({1000}, 0.5f, 2.f)}, {}, {f32({1000})}, 1e-5);
  setMemberAttr(&d.body, 0, "alpha", Attr::ofFloat(0.3f));
  setMemberAttr(&d.body, 3, "alpha", Attr::ofFloat(0.7f));
  checkAgainstCpu(d);
}

TEST(CudaFused, ResidualAddLayerNorm) {
  REQUIRE_GPU();
  for (int64_t cols : {64, 300}) {  // 64 and 256 threads a block
    OpCase c = fusedCase("Add+LayerNorm cols=" + std::to_string(cols),
             fusedStep("add-layernorm", {"Add", "LayerNormalization"}, {{0, 1}, {-2, 2, 3}}, {0, 1}),
             {randomF32({6, cols}), randomF32({6, cols}), randomF32({cols}), randomF32({cols})}, {false, false, true, true},
             {f32({6, cols}), f32({6, cols})}, 1e-4);
    checkAgainstCpu(c);
  }
  // Only the normalised value out, no B; 3-D with axis 1 (rows of 5 * 40).
  OpCase n = fusedCase("Add+LayerNorm axis=1", fusedStep("add-layernorm", {"Add", "LayerNormalization"}, {{0, 1}, {-2, 2, -1}}, {1}),
           {randomF32({3, 5, 40}), randomF32({3, 5, 40}), randomF32({5, 40})}, {false, false, true}, {f32({3, 5, 40})}, 1e-4);
  setMemberAttr(&n.body, 1, "axis", Attr::ofInt(1));
  checkAgainstCpu(n);
}

// cpu -> cuda:0 (H2D copy) -> Relu on the GPU -> cuda:0 -> cpu (D2H copy) -> Add on the CPU.
TEST(CudaExecutable, PlanCrossingDevicesMatchesTheCpu) {
  REQUIRE_GPU();
  plan::Plan p;
  p.set_version(kPlanVersion);
  auto value = [&](const std::string& name, plan::Value::Kind kind, const std::string& dev, int64_t off) {
    plan::Value* v = p.add_values();
    v->set_id(p.values_size() - 1);
    v->set_name(name);
    v->set_dtype((int)DType::F32);
    v->add_dims(1000);
    v->set_device(dev);
    v->set_kind(kind);
    v->set_arena_offset(off);
    v->set_bytes(4000);
  };
  value("x", plan::Value::INPUT, "cpu", 0);
  value("x_gpu", plan::Value::INTERMEDIATE, "cuda:0", 0);
  value("r_gpu", plan::Value::INTERMEDIATE, "cuda:0", 4096);
  value("r", plan::Value::INTERMEDIATE, "cpu", 4096);
  value("y", plan::Value::INTERMEDIATE, "cpu", 8192);
  auto step = [&](const std::string& op, const std::string& dev, std::vector<int> in, int out) {
    plan::Step* s = p.add_steps();
    s->set_op_type(op);
    s->set_name(op + std::to_string(p.steps_size()));
    s->set_device(dev);
    for (int i : in) s->add_inputs(i);
    s->add_outputs(out);
  };
  step("Copy", "cuda:0", {0}, 1);
  step("Relu", "cuda:0", {1}, 2);
  step("Copy", "cpu", {2}, 3);
  step("Add", "cpu", {3, 0}, 4);
  p.add_inputs(0);
  p.add_outputs(4);
  p.add_outputs(2);  // an output that stays on the GPU: copied back at the end
  for (auto [dev, bytes] : {std::pair<const char*, int>{"cpu", 12288}, {"cuda:0", 8192}}) {
    plan::Arena* a = p.add_arenas();
    a->set_device(dev);
    a->set_bytes(bytes);
  }
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(p, LoadOptions{}, &exe);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_TRUE(exe->notes().empty());
  Tensor x = randomF32({1000});
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<Tensor> out;
    ASSERT_TRUE(exe->run({x}, &out).isOk());
    for (int64_t i = 0; i < 1000; ++i) {
      float v = x.data<float>()[i];
      ASSERT_FLOAT_EQ(out[0].data<float>()[i], std::max(v, 0.f) + v) << i;
      ASSERT_FLOAT_EQ(out[1].data<float>()[i], std::max(v, 0.f)) << i;
    }
  }
  size_t gpuPeak = 0;
  for (auto& [dev, bytes] : exe->peakBytes())
    if (dev == "cuda:0") gpuPeak = bytes;
  EXPECT_GE(gpuPeak, 8192u);
}

}  // namespace
