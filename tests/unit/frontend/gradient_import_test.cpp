// ai.onnx.preview.training.Gradient lowered at import onto the gradient rules: d sum(y) / d x for
// a two-op graph against central differences in double, zeros for an x that y does not depend
// on, and an op without a gradient rule as an error naming the node.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <random>

#include "tests/unit/onnx_model_builder.h"
#include "tools/driver/Driver.h"

using namespace tandem;

namespace {

// a [2,3], b [3,2], u [2]: y = Tanh(MatMul(a, b)); Gradient(xs = a, b, u; y) -> da, db, du;
// `op` replaces Tanh.
std::string writeModel(const std::string& op) {
  testing_onnx::Model m;
  auto* t = m.m.add_opset_import();
  t->set_domain("ai.onnx.preview.training");
  t->set_version(1);
  m.input("a", {2, 3}).input("b", {3, 2}).input("u", {2});
  m.node("MatMul", {"a", "b"}, {"c"}, "mm");
  m.node(op, {"c"}, {"y"}, "act");
  auto* gr = m.node("Gradient", {"a", "b", "u"}, {"da", "db", "du"}, "grad");
  gr->set_domain("ai.onnx.preview.training");
  testing_onnx::stringsAttr(gr, "xs", {"a", "b", "u"});
  testing_onnx::stringAttr(gr, "y", "y");
  for (const char* o : {"y", "da", "db", "du"}) m.output(o);
  return testing_onnx::writeTemp(m, "gradient_" + op);
}

// Compiles `path` for the CPU (and removes it); the error message, or "" and *exe loaded.
std::string compile(const std::string& path, std::unique_ptr<Executable>* exe) {
  CompileOptions co;
  EXPECT_TRUE(setTargetDevices(&co, "cpu").isOk());
  CompileResult r;
  Status st = compileOnnxFile(path, ImportOptions{}, co, &r);
  std::remove(path.c_str());
  if (!st.isOk()) return st.message();
  st = Executable::load(r.plan, LoadOptions{}, exe);
  return st.isOk() ? "" : st.message();
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
  std::unique_ptr<Executable> exe;
  ASSERT_EQ(compile(writeModel("Tanh"), &exe), "");
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
  std::unique_ptr<Executable> exe;
  const std::string err = compile(writeModel("Round"), &exe);
  ASSERT_FALSE(err.empty());
  EXPECT_NE(err.find("grad"), std::string::npos) << err;
  EXPECT_NE(err.find("no gradient for op 'Round' (node 'act')"), std::string::npos) << err;
}

}  // namespace
