// The CPU row groups and producer duplication end to end (issue 5): GraphBuilder graphs compiled
// with and without --tandem-fuse must give the same outputs, and the fused plan must really run
// the row kernel (add-layernorm, reduction, softmax) and copy the cheap shared producer.
#include <gtest/gtest.h>

#include <map>

#include "frontend/GraphBuilder.h"
#include "tests/unit/passes/compile_run_util.h"

using namespace tandem;
using passtest::randomTensor;

namespace {

// Rows longer than one 512-float chunk and enough elements for the threaded path.
constexpr int64_t kRows = 16, kCols = 700;

// A transformer-like tail: s = x + r (the residual stream, also read by the next MatMul);
// LayerNorm(s); a scaled, masked Softmax; a squared-difference mean and a multi-axis sum; a
// cheap Neg read by a reduction and by a loop (duplicated into both); an Exp read by two loops
// (expensive: materialised once).
mlir::OwningOpRef<mlir::ModuleOp> buildModel(GraphBuilder& g) {
  Value x = g.input("x", DType::F32, {2, kRows / 2, kCols});
  Value r = g.input("r", DType::F32, {2, kRows / 2, kCols});
  Value m = g.input("m", DType::F32, {2, kRows / 2, kCols});
  Value s = g.add(x, r);
  Value ln = g.layerNormalization(s, g.constant(randomTensor({kCols}, 11, 0.5f, 1.5f)),
                                  g.constant(randomTensor({kCols}, 12)));
  g.output(ln, "ln");
  g.output(g.matMul(s, g.constant(randomTensor({kCols, 3}, 13))), "next");
  g.output(g.softmax(g.add(g.mul(x, g.scalar(4.0f)), m)), "probs");
  Value d = g.sub(x, m);
  g.output(g.reduceMean(g.mul(d, d), {-1}, false), "msd");
  g.output(g.reduceSum(g.relu(r), {1, 2}, true), "sum12");
  Value n = g.neg(m);
  g.output(g.reduceMax(n, {-1}, true), "max");
  g.output(g.abs(g.add(n, x)), "absum");
  Value e = g.exp(r);
  g.output(g.relu(e), "e1");
  g.output(g.sub(e, x), "e2");
  std::string error;
  auto module = g.finish(&error);
  EXPECT_TRUE(module) << error;
  return module;
}

passtest::CompiledRun compileAndRun(bool fuse) {
  GraphBuilder g;
  auto module = buildModel(g);
  CompileOptions co;
  co.fuse = fuse;
  Shape shape = {2, kRows / 2, kCols};
  return passtest::compileAndRun(*module, co,
                                 {randomTensor(shape, 1), randomTensor(shape, 2), randomTensor(shape, 3)});
}

std::string kindOf(const plan::Step& s) {
  for (const plan::Attribute& a : s.attrs())
    if (a.name() == "kind") return a.s();
  return "";
}

TEST(FusionRows, SameOutputsAsUnfusedAndRowKernelsRun) {
  passtest::CompiledRun fused = compileAndRun(true), plain = compileAndRun(false);
  ASSERT_EQ(fused.outputs.size(), 9u);
  ASSERT_EQ(plain.outputs.size(), fused.outputs.size());
  for (size_t o = 0; o < fused.outputs.size(); ++o) {
    const Tensor& a = fused.outputs[o];
    const Tensor& b = plain.outputs[o];
    ASSERT_EQ(a.shape(), b.shape()) << "output " << o;
    EXPECT_LT(passtest::maxRelDiff(a, b), 1e-4) << "output " << o;
  }

  // The fused plan: each group kind once or more, every row group on the row kernel.
  std::map<std::string, int> kinds;
  int rowKernels = 0;
  for (int i = 0; i < fused.plan.steps_size(); ++i) {
    const plan::Step& s = fused.plan.steps(i);
    if (s.op_type() != "Fused") continue;
    std::string k = kindOf(s);
    ++kinds[k];
    if (k == "add-layernorm" || k == "reduction" || k == "softmax") {
      ASSERT_LT((size_t)i, fused.impls.size());
      EXPECT_EQ(fused.impls[i].rfind("fused-rows(", 0), 0u) << k << ": " << fused.impls[i];
      ++rowKernels;
    }
  }
  EXPECT_EQ(kinds["add-layernorm"], 1);
  EXPECT_EQ(kinds["softmax"], 1);
  EXPECT_EQ(kinds["reduction"], 3);  // msd, sum12, max (with its copy of the Neg)
  EXPECT_EQ(rowKernels, 5);
  // The residual sum is the add-layernorm's second output (the MatMul reads it); the Neg is
  // copied into its two readers and no step computes it alone; the Exp is materialised.
  for (const plan::Step& s : fused.plan.steps()) {
    if (kindOf(s) == "add-layernorm") {
      EXPECT_EQ(s.outputs_size(), 2);
    }
    EXPECT_NE(s.op_type(), "Neg");
    EXPECT_NE(s.op_type(), "LayerNormalization");
  }
  // The log says where each copy of the Neg runs and why the Exp was not copied.
  size_t first = fused.log.find("(Neg): cpu");
  ASSERT_NE(first, std::string::npos) << fused.log;
  EXPECT_NE(fused.log.find("duplicated: a copy in each of 2 readers", first), std::string::npos)
      << fused.log;
  EXPECT_NE(fused.log.find("(Neg): cpu", first + 1), std::string::npos) << fused.log;
  EXPECT_NE(fused.log.find("not duplicated: Exp is expensive (2 readers)"), std::string::npos)
      << fused.log;
  EXPECT_NE(fused.log.find("[add-layernorm]"), std::string::npos) << fused.log;
  // The summary counts the Neg once (one op of the graph), copies or not: 18 ops either way.
  EXPECT_NE(fused.log.find("summary: ops: cpu 18;"), std::string::npos) << fused.log;
  EXPECT_NE(plain.log.find("summary: ops: cpu 18;"), std::string::npos) << plain.log;
  int steps = fused.plan.steps_size(), plainSteps = plain.plan.steps_size();
  EXPECT_LT(steps, plainSteps - 8) << "fused " << steps << " vs unfused " << plainSteps;
}

}  // namespace
