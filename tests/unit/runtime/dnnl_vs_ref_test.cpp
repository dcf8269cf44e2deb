// Differential test: every oneDNN kernel against the reference CPU kernel of the same op on
// random inputs (ggml test-backend-ops style). Cases the reference backend cannot create yet are
// skipped with a message; the dnnl_*_test files check the same ops against naive loops.
#include "dnnl_test_util.h"

namespace tandem {
namespace dnnltest {
namespace {

Tensor runWith(const KernelRegistry& reg, const OpCase& c, Status* st) {
  std::unique_ptr<Kernel> k;
  *st = reg.create("cpu", c.context(), &k);
  if (!st->isOk()) return Tensor();
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.inputs) in.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor> outs;
  std::vector<Tensor*> ptrs;
  for (size_t i = 0; i < c.outputs.size(); ++i) outs.push_back(Tensor::alloc(DType::F32, c.outputs[i]));
  for (size_t i = 0; i < outs.size(); ++i)
    ptrs.push_back(i < c.outputAbsent.size() && c.outputAbsent[i] ? nullptr : &outs[i]);
  *st = k->run(in, ptrs);
  return outs[0];
}

void differential(const OpCase& c) {
  SCOPED_TRACE(c.op);
  ASSERT_TRUE(dnnlSupports(c)) << "the dnnl backend should take this case";
  Status refSt;
  Tensor want = runWith(refRegistry(), c, &refSt);
  if (!refSt.isOk()) {
    std::printf("[  SKIP    ] %s: reference kernel unavailable: %s\n", c.op.c_str(),
                refSt.message().c_str());
    return;
  }
  Tensor got = runOnce(c);
  expectClose(got, toDouble(want));
}

OpCase make(std::string op, std::vector<Tensor> inputs, std::vector<Shape> outputs,
            std::vector<bool> constant = {}, AttrMap attrs = AttrMap()) {
  OpCase c;
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.outputs = std::move(outputs);
  c.constant = std::move(constant);
  c.attrs = std::move(attrs);
  return c;
}

AttrMap ints(std::vector<std::pair<std::string, std::vector<int64_t>>> kv,
             std::vector<std::pair<std::string, int64_t>> scalars = {},
             std::vector<std::pair<std::string, std::string>> strings = {}) {
  AttrMap a;
  for (auto& [k, v] : kv) a.set(k, Attr::ofInts(v));
  for (auto& [k, v] : scalars) a.set(k, Attr::ofInt(v));
  for (auto& [k, v] : strings) a.set(k, Attr::ofString(v));
  return a;
}

TEST(DnnlVsRef, Conv) {
  Tensor x = randomTensor({2, 8, 9, 9}, 1);
  differential(make("Conv", {x, randomTensor({16, 8, 3, 3}, 2), randomTensor({16}, 3)},
                    {{2, 16, 9, 9}}, {false, true, true}, ints({{"pads", {1, 1, 1, 1}}})));
  differential(make("Conv", {x, randomTensor({8, 2, 3, 3}, 4)}, {{2, 8, 4, 3}}, {false, true},
                    ints({{"strides", {2, 2}}, {"dilations", {1, 2}}}, {{"group", 4}})));
  differential(make("Conv", {x, randomTensor({4, 8, 4, 4}, 5)}, {{2, 4, 5, 5}}, {false, true},
                    ints({{"strides", {2, 2}}}, {}, {{"auto_pad", "SAME_LOWER"}})));
  differential(make("Conv", {randomTensor({1, 4, 12}, 6), randomTensor({6, 4, 3}, 7)},
                    {{1, 6, 12}}, {false, true}, ints({{"pads", {1, 1}}})));
}

TEST(DnnlVsRef, ConvTranspose) {
  Tensor x = randomTensor({1, 4, 5, 5}, 10);
  differential(make("ConvTranspose", {x, randomTensor({4, 3, 3, 3}, 11), randomTensor({3}, 12)},
                    {{1, 3, 10, 10}}, {false, true, true},
                    ints({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}})));
  differential(make("ConvTranspose", {x, randomTensor({4, 2, 3, 3}, 13)}, {{1, 4, 7, 7}},
                    {false, true}, ints({}, {{"group", 2}})));
}

TEST(DnnlVsRef, GemmAndMatMul) {
  differential(make("Gemm", {randomTensor({6, 10}, 20), randomTensor({7, 10}, 21),
                             randomTensor({7}, 22)},
                    {{6, 7}}, {false, true, true}, ints({}, {{"transB", 1}})));
  AttrMap ab = ints({}, {{"transA", 1}});
  ab.set("alpha", Attr::ofFloat(0.5f));
  ab.set("beta", Attr::ofFloat(2.f));
  differential(make("Gemm", {randomTensor({10, 6}, 23), randomTensor({10, 7}, 24),
                             randomTensor({6, 1}, 25)},
                    {{6, 7}}, {false, false, false}, ab));
  differential(make("MatMul", {randomTensor({2, 1, 4, 8}, 26), randomTensor({3, 8, 5}, 27)},
                    {{2, 3, 4, 5}}));
  differential(make("MatMul", {randomTensor({8}, 28), randomTensor({2, 8, 3}, 29)}, {{2, 3}}));
}

TEST(DnnlVsRef, Pooling) {
  Tensor x = randomTensor({2, 3, 9, 10}, 30);
  differential(make("MaxPool", {x}, {{2, 3, 5, 5}}, {},
                    ints({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}})));
  differential(make("MaxPool", {x}, {{2, 3, 4, 5}}, {},
                    ints({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}}, {{"ceil_mode", 1}})));
  differential(make("AveragePool", {x}, {{2, 3, 5, 5}}, {},
                    ints({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}},
                         {{"count_include_pad", 1}})));
  differential(make("AveragePool", {x}, {{2, 3, 4, 5}}, {},
                    ints({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}}, {{"ceil_mode", 1}})));
  differential(make("AveragePool", {x}, {{2, 3, 5, 5}}, {},
                    ints({{"kernel_shape", {2, 3}}, {"strides", {2, 2}}}, {},
                         {{"auto_pad", "SAME_UPPER"}})));
  differential(make("GlobalAveragePool", {x}, {{2, 3, 1, 1}}));
  differential(make("GlobalMaxPool", {x}, {{2, 3, 1, 1}}));
  // MaxPoolGrad: overlapping windows (dY adds up where windows share a maximum), padding,
  // ceil_mode, dilations.
  differential(make("MaxPoolGrad", {x, randomTensor({2, 3, 5, 5}, 31)}, {{2, 3, 9, 10}}, {},
                    ints({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}})));
  differential(make("MaxPoolGrad", {x, randomTensor({2, 3, 4, 5}, 32)}, {{2, 3, 9, 10}}, {},
                    ints({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}}, {{"ceil_mode", 1}})));
  differential(make("MaxPoolGrad", {x, randomTensor({2, 3, 7, 8}, 33)}, {{2, 3, 9, 10}}, {},
                    ints({{"kernel_shape", {2, 2}}, {"dilations", {2, 2}}, {"strides", {1, 1}}})));
  differential(make("MaxPoolGrad", {randomTensor({2, 16, 6, 6}, 34), randomTensor({2, 16, 3, 3}, 35)},
                    {{2, 16, 6, 6}}, {}, ints({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}})));
}

TEST(DnnlVsRef, Normalization) {
  Tensor x = randomTensor({2, 4, 3, 5}, 40);
  differential(make("BatchNormalization",
                    {x, randomTensor({4}, 41), randomTensor({4}, 42), randomTensor({4}, 43),
                     randomTensor({4}, 44, 0.1f, 2.f)},
                    {{2, 4, 3, 5}}, {false, true, true, true, true}));
  OpCase ln = make("LayerNormalization", {x, randomTensor({3, 5}, 45), randomTensor({3, 5}, 46)},
                   {{2, 4, 3, 5}}, {false, true, true}, ints({}, {{"axis", 2}}));
  differential(ln);
  differential(make("Softmax", {x}, {{2, 4, 3, 5}}));
  differential(make("Softmax", {x}, {{2, 4, 3, 5}}, {}, ints({}, {{"axis", 1}})));
  differential(make("LogSoftmax", {x}, {{2, 4, 3, 5}}, {}, ints({}, {{"axis", -2}})));
}

TEST(DnnlVsRef, Eltwise) {
  Tensor x = randomTensor({4, 33}, 50, -3.f, 3.f);
  Tensor pos = randomTensor({4, 33}, 51, 0.05f, 5.f);
  for (const char* op : {"Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "HardSigmoid", "Tanh",
                         "Exp", "Abs", "Neg"})
    differential(make(op, {x}, {{4, 33}}));
  for (const char* op : {"Sqrt", "Reciprocal"}) differential(make(op, {pos}, {{4, 33}}));
  differential(make("Clip", {x, scalarF32(-1.f), scalarF32(0.5f)}, {{4, 33}}, {false, true, true}));
  differential(make("Clip", {x, Tensor(), scalarF32(0.5f)}, {{4, 33}}, {false, false, true}));
  differential(make("Pow", {x, Tensor::fromVector<int64_t>({}, {3})}, {{4, 33}}, {false, true}));
}

TEST(DnnlVsRef, Binary) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Min", "Max"}) {
    differential(make(op, {randomTensor({2, 3, 4}, 60), randomTensor({3, 1}, 61, 0.5f, 2.f)},
                      {{2, 3, 4}}));
    if (std::string(op) != "Div")
      differential(make(op, {randomTensor({4}, 62), randomTensor({2, 3, 4}, 63)}, {{2, 3, 4}}));
  }
}

// Transpose as a oneDNN reorder over merged dims: ConvNeXt's NCHW <-> NHWC, attention's head
// split/merge, the default reversal, and perms that only move size-1 dims (a 1-D copy).
TEST(DnnlVsRef, Transpose) {
  struct Case {
    Shape x;
    std::vector<int64_t> perm;  // empty: the default (reverse)
    Shape y;
  };
  const std::vector<Case> cases = {
      {{2, 5, 3, 4}, {0, 2, 3, 1}, {2, 3, 4, 5}}, {{2, 3, 4, 5}, {0, 3, 1, 2}, {2, 5, 3, 4}},
      {{2, 6, 4, 5}, {0, 2, 1, 3}, {2, 4, 6, 5}}, {{2, 6, 4, 5}, {0, 2, 3, 1}, {2, 4, 5, 6}},
      {{3, 4, 5}, {}, {5, 4, 3}},                 {{1, 6, 1, 5}, {2, 0, 3, 1}, {1, 1, 5, 6}},
      {{1, 6, 1, 5}, {0, 2, 1, 3}, {1, 1, 6, 5}}, {{7, 1, 9}, {1, 0, 2}, {1, 7, 9}}};
  int seed = 80;
  for (const Case& c : cases) {
    AttrMap a;
    if (!c.perm.empty()) a.set("perm", Attr::ofInts(c.perm));
    OpCase oc = make("Transpose", {randomTensor(c.x, seed++)}, {c.y}, {}, a);
    differential(oc);
  }
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
