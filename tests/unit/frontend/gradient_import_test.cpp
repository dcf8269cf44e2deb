// ai.onnx.preview.training.Gradient lowered at import onto the gradient rules: d sum(y) / d x for
// a two-op graph against central differences in double, zeros for an x that y does not depend
// on, and an op without a gradient rule as an error naming the node.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <random>

#include "tools/driver/Driver.h"

using namespace tandem;

namespace {

void addInput(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto* addNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                         std::vector<std::string> out, const std::string& name) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

// a [2,3], b [3,2], u [2]: y = Tanh(MatMul(a, b)); Gradient(xs = a, b, u; y) -> da, db, du;
// `op` replaces Tanh.
std::string writeModel(const std::string& op) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* t = m.add_opset_import();
  t->set_domain("ai.onnx.preview.training");
  t->set_version(1);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("grad");
  addInput(g, "a", {2, 3});
  addInput(g, "b", {3, 2});
  addInput(g, "u", {2});
  addNode(g, "MatMul", {"a", "b"}, {"c"}, "mm");
  addNode(g, op, {"c"}, {"y"}, "act");
  auto* gr = addNode(g, "Gradient", {"a", "b", "u"}, {"da", "db", "du"}, "grad");
  gr->set_domain("ai.onnx.preview.training");
  auto* xs = gr->add_attribute();
  xs->set_name("xs");
  xs->set_type(onnx::AttributeProto::STRINGS);
  for (const char* x : {"a", "b", "u"}) xs->add_strings(x);
  auto* y = gr->add_attribute();
  y->set_name("y");
  y->set_type(onnx::AttributeProto::STRING);
  y->set_s("y");
  for (const char* o : {"y", "da", "db", "du"}) g->add_output()->set_name(o);
  std::string p = testing::TempDir() + "/tandem_gradient_" + op + "_" + std::to_string(getpid()) + ".onnx";
  std::ofstream f(p, std::ios::binary);
  EXPECT_TRUE(m.SerializeToOstream(&f));
  return p;
}

double sumTanhMatMul(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double c = 0;
      for (int k = 0; k < 3; ++k) c += a[i * 3 + k] * b[k * 2 + j];
      s += std::tanh(c);
    }
  return s;
}

TEST(GradientOp, MatchesCentralDifferences) {
  const std::string path = writeModel("Tanh");
  CompileOptions co;
  ASSERT_TRUE(setTargetDevices(&co, "cpu").isOk());
  CompileResult r;
  Status st = compileOnnxFile(path, ImportOptions{}, co, &r);
  std::remove(path.c_str());
  ASSERT_TRUE(st.isOk()) << st.message();
  std::unique_ptr<Executable> exe;
  ASSERT_TRUE(Executable::load(r.plan, LoadOptions{}, &exe).isOk());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> a(6), b(6);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  std::vector<Tensor> out;
  ASSERT_TRUE(exe->run({Tensor::fromVector<float>({2, 3}, a), Tensor::fromVector<float>({3, 2}, b),
                        Tensor::fromVector<float>({2}, {1.f, 2.f})},
                       &out)
                  .isOk());
  ASSERT_EQ(out.size(), 4u);
  std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  const double h = 1e-6;
  for (int i = 0; i < 6; ++i) {
    auto ap = ad, am = ad;
    ap[i] += h, am[i] -= h;
    EXPECT_NEAR(out[1].data<float>()[i], (sumTanhMatMul(ap, bd) - sumTanhMatMul(am, bd)) / (2 * h), 1e-5) << "da " << i;
    auto bp = bd, bm = bd;
    bp[i] += h, bm[i] -= h;
    EXPECT_NEAR(out[2].data<float>()[i], (sumTanhMatMul(ad, bp) - sumTanhMatMul(ad, bm)) / (2 * h), 1e-5) << "db " << i;
  }
  // y does not depend on u: zeros.
  EXPECT_EQ(out[3].data<float>()[0], 0.f);
  EXPECT_EQ(out[3].data<float>()[1], 0.f);
}

TEST(GradientOp, AnOpWithoutARuleIsAnErrorNamingIt) {
  const std::string path = writeModel("Round");
  CompileOptions co;
  ASSERT_TRUE(setTargetDevices(&co, "cpu").isOk());
  CompileResult r;
  Status st = compileOnnxFile(path, ImportOptions{}, co, &r);
  std::remove(path.c_str());
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("grad"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("no gradient for op 'Round' (node 'act')"), std::string::npos) << st.message();
}

}  // namespace
