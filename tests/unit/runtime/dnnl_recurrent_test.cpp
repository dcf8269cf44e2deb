// The RNN / GRU / LSTM kernels of runtime/cpu/dnnl/DnnlRecurrent.cpp, both variants (oneDNN's
// primitive, "dnnl", and the AVX2 cell, "gemv", where the CPU has AVX2), against the reference
// kernels (runtime/cpu/ref/Recurrent.cpp, which the ONNX node tests check) on random inputs:
// every output (Y, Y_h, Y_c), each direction, with and without B, initial states and
// peepholes, batch 1 (oneDNN: Y written in place) and batch 3 (Y reordered from oneDNN's
// [T, N, D, H]), one and two threads.
// Also which configurations the oneDNN kernel declines (left to the reference kernel).
#include "dnnl_test_util.h"

namespace tandem {
namespace dnnltest {
namespace {

/// Runs the case on `reg` and returns every requested output (absent ones undefined).
std::vector<Tensor> runAll(const KernelRegistry& reg, const OpCase& c, std::string* impl) {
  std::unique_ptr<Kernel> k;
  Status st = reg.create("cpu", c.context(), &k);
  EXPECT_TRUE(st.isOk()) << st.message();
  if (!st.isOk()) return {};
  *impl = k->implName();
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor> outs(c.outputs.size());
  std::vector<Tensor*> ptrs;
  for (size_t i = 0; i < outs.size(); ++i) {
    const bool absent = i < c.outputAbsent.size() && c.outputAbsent[i];
    if (!absent) outs[i] = Tensor::alloc(DType::F32, c.outputs[i]);
    ptrs.push_back(absent ? nullptr : &outs[i]);
  }
  st = k->run(in, ptrs);
  EXPECT_TRUE(st.isOk()) << st.message();
  return outs;
}

struct Config {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t T = 5, N = 1, C = 7, H = 6;
  bool bias = true, h0 = true, c0 = true, peephole = false;
  int64_t linearBeforeReset = 0;
  std::string rnnActivation;  // RNN only: "" keeps the default (Tanh)
  std::vector<bool> outputAbsent;
};

OpCase makeCase(const Config& k, uint32_t seed) {
  const int64_t D = k.direction == "bidirectional" ? 2 : 1;
  const int64_t G = k.op == "LSTM" ? 4 : k.op == "GRU" ? 3 : 1;
  OpCase c;
  c.op = k.op;
  c.attrs.set("direction", Attr::ofString(k.direction));
  c.attrs.set("hidden_size", Attr::ofInt(k.H));
  if (k.op == "GRU") c.attrs.set("linear_before_reset", Attr::ofInt(k.linearBeforeReset));
  if (!k.rnnActivation.empty())
    c.attrs.set("activations", Attr::ofStrings(std::vector<std::string>(D, k.rnnActivation)));
  c.inputs = {randomTensor({k.T, k.N, k.C}, seed), randomTensor({D, G * k.H, k.C}, seed + 1, -0.5f, 0.5f),
              randomTensor({D, G * k.H, k.H}, seed + 2, -0.5f, 0.5f),
              k.bias ? randomTensor({D, 2 * G * k.H}, seed + 3, -0.5f, 0.5f) : Tensor(), Tensor(),
              k.h0 ? randomTensor({D, k.N, k.H}, seed + 4) : Tensor()};
  if (k.op == "LSTM") {
    c.inputs.push_back(k.c0 ? randomTensor({D, k.N, k.H}, seed + 5) : Tensor());
    c.inputs.push_back(k.peephole ? randomTensor({D, 3 * k.H}, seed + 6, -0.5f, 0.5f) : Tensor());
  }
  c.constant = {false, true, true, true, true, false, false, true};
  c.outputs = {{k.T, D, k.N, k.H}, {D, k.N, k.H}};
  if (k.op == "LSTM") c.outputs.push_back({D, k.N, k.H});
  c.outputAbsent = k.outputAbsent;
  return c;
}

void compareWithReference(const Config& k, uint32_t seed) {
  OpCase c = makeCase(k, seed);
  ASSERT_TRUE(dnnlSupports(c)) << "the oneDNN kernel should take this case";
  std::string refImpl;
  std::vector<Tensor> want = runAll(refRegistry(), c, &refImpl);
  std::vector<std::string> variants = dnnlRegistry().variants("cpu", c.context());
  ASSERT_FALSE(variants.empty());
  for (const std::string& v : variants)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(k.op + " " + k.direction + " N=" + std::to_string(k.N) + " variant " + v +
                   " threads " + std::to_string(threads));
      c.variant = v;
      c.threads = threads;
      std::string impl;
      std::vector<Tensor> got = runAll(dnnlRegistry(), c, &impl);
      EXPECT_EQ(impl.rfind(v == "gemv" ? "avx2:" : "dnnl:", 0), 0u) << impl;
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE("output " + std::to_string(i));
        ASSERT_EQ(got[i].defined(), want[i].defined());
        if (got[i].defined()) expectClose(got[i], toDouble(want[i]), 2e-5);
      }
    }
}

TEST(DnnlRecurrent, LstmEveryDirectionAndBatch) {
  uint32_t seed = 10;
  for (const char* dir : {"forward", "reverse", "bidirectional"})
    for (int64_t n : {1, 3}) {
      Config k;
      k.direction = dir;
      k.N = n;
      compareWithReference(k, seed += 10);
    }
}

TEST(DnnlRecurrent, LstmPeepholesAndDefaults) {
  Config k;
  k.peephole = true;
  k.direction = "bidirectional";
  k.N = 2;
  compareWithReference(k, 100);
  // No B, no initial states: zeros.
  k.peephole = false;
  k.bias = k.h0 = k.c0 = false;
  compareWithReference(k, 110);
}

TEST(DnnlRecurrent, GruBothResetOrders) {
  uint32_t seed = 200;
  for (int64_t lbr : {0, 1})
    for (const char* dir : {"forward", "bidirectional"})
      for (int64_t n : {1, 3}) {
        Config k;
        k.op = "GRU";
        k.linearBeforeReset = lbr;
        k.direction = dir;
        k.N = n;
        compareWithReference(k, seed += 10);
      }
}

TEST(DnnlRecurrent, RnnActivations) {
  uint32_t seed = 300;
  for (const char* act : {"", "Relu", "Sigmoid", "Tanh"}) {
    Config k;
    k.op = "RNN";
    k.rnnActivation = act;
    k.direction = "reverse";
    k.N = 2;
    compareWithReference(k, seed += 10);
  }
}

TEST(DnnlRecurrent, OnlySomeOutputs) {
  Config k;
  k.direction = "bidirectional";
  k.N = 3;
  // (The plan always gives Y a buffer: the reference kernels require output 0.)
  k.outputAbsent = {false, true, false};  // Y and Y_c
  compareWithReference(k, 400);
  k.outputAbsent = {false, false, true};  // Y and Y_h, initial h only
  k.c0 = false;
  compareWithReference(k, 410);
  k.op = "GRU";
  k.outputAbsent = {false, true};
  compareWithReference(k, 420);
}

// Gate widths past one 64-column block of the AVX2 cell's GEMV (four 16-wide panels), with a
// last panel partly padding, and a batch of 6, where the cell uses the packed GEMM instead.
TEST(DnnlRecurrent, WideGatesAndLargerBatch) {
  Config k;
  k.H = 20;  // LSTM: 80 gate columns, 4 + 1 panels
  k.direction = "bidirectional";
  k.peephole = true;
  compareWithReference(k, 600);
  k.N = 6;
  compareWithReference(k, 610);
  Config g;
  g.op = "GRU";
  g.H = 26;  // 78 columns: the fifth panel has two padding columns
  g.linearBeforeReset = 1;
  compareWithReference(g, 620);
  g.linearBeforeReset = 0;
  g.N = 6;
  compareWithReference(g, 630);
  Config r;
  r.op = "RNN";
  r.H = 62;  // four panels, the last with two padding columns
  r.N = 2;
  compareWithReference(r, 640);
}

TEST(DnnlRecurrent, DeclinesWhatOnlyTheReferenceRuns) {
  auto declined = [](OpCase c) { EXPECT_FALSE(dnnlSupports(c)) << c.op; };
  Config k;
  OpCase c = makeCase(k, 500);
  c.attrs.set("clip", Attr::ofFloat(1.f));
  declined(c);
  c = makeCase(k, 500);
  c.attrs.set("layout", Attr::ofInt(1));
  declined(c);
  c = makeCase(k, 500);
  c.attrs.set("activations", Attr::ofStrings({"Tanh", "Tanh", "Tanh"}));
  declined(c);
  c = makeCase(k, 500);
  c.constant[1] = false;  // W computed at run time
  declined(c);
  // sequence_lens shorter than the sequence for some row.
  k.N = 2;
  c = makeCase(k, 500);
  c.inputs[4] = Tensor::fromVector<int32_t>({2}, {5, 3});
  declined(c);
  // ... but equal to it everywhere is the full sequence.
  c.inputs[4] = Tensor::fromVector<int32_t>({2}, {5, 5});
  EXPECT_TRUE(dnnlSupports(c));
  Config r;
  r.op = "RNN";
  r.direction = "bidirectional";
  c = makeCase(r, 500);
  c.attrs.set("activations", Attr::ofStrings({"Tanh", "Relu"}));  // one per direction
  declined(c);
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
