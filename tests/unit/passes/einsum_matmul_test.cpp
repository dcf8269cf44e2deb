// --tandem-canonicalize's Einsum rewrite (passes/CanonicalizePatterns.cpp rewriteEinsum): a
// two-operand Einsum of batch, row, column and contracted labels becomes Transpose / Reshape /
// MatMul. Each equation is compiled from an ONNX model, run, and compared with a naive
// evaluation of the equation in double (every label assignment, runtime/Einsum.h's parse);
// the plan is checked to have (or, for the forms the rewrite leaves, not have) its Einsum.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/Einsum.h"
#include "tests/unit/onnx_model_builder.h"
#include "tests/unit/passes/compile_run_util.h"

namespace tandem {
namespace {

using namespace testing_onnx;

// out[result index] = sum over all label assignments of a[...] * b[...].
std::vector<double> naiveEinsum(const std::string& eq, const std::vector<std::vector<int64_t>>& shapes,
                                const std::vector<float>& a, const std::vector<float>& b,
                                std::vector<int64_t>* outShape) {
  EinsumSpec s;
  EXPECT_EQ(parseEinsum(eq, shapes, &s), "") << eq;
  std::vector<int> labels;
  for (size_t l = 0; l < s.used.size(); ++l)
    if (s.used[l]) labels.push_back((int)l);
  outShape->clear();
  for (int l : s.outputLabels) outShape->push_back(s.extent[l]);
  int64_t outN = 1;
  for (int64_t d : *outShape) outN *= d;
  std::vector<double> out(outN, 0.0);
  std::vector<int64_t> at(s.extent.size(), 0);
  auto offset = [&](const std::vector<int>& ls, const std::vector<int64_t>& shape) {
    int64_t o = 0;
    for (size_t i = 0; i < ls.size(); ++i) o = o * shape[i] + (shape[i] == 1 ? 0 : at[ls[i]]);
    return o;
  };
  while (true) {
    int64_t o = 0;
    for (size_t i = 0; i < s.outputLabels.size(); ++i) o = o * (*outShape)[i] + at[s.outputLabels[i]];
    out[o] += double(a[offset(s.inputLabels[0], shapes[0])]) * double(b[offset(s.inputLabels[1], shapes[1])]);
    size_t k = labels.size();
    while (k > 0) {
      int l = labels[k - 1];
      if (++at[l] < s.extent[l]) break;
      at[l] = 0;
      --k;
    }
    if (k == 0) break;
  }
  return out;
}

struct Case {
  std::string equation;
  std::vector<int64_t> a, b;
  bool rewritten;
};

void PrintTo(const Case& c, std::ostream* os) { *os << '"' << c.equation << '"'; }

class EinsumMatMul : public ::testing::TestWithParam<Case> {};

TEST_P(EinsumMatMul, MatchesTheEquation) {
  const Case& c = GetParam();
  Model m(12);
  m.input("a", c.a).input("b", c.b);
  stringAttr(m.node("Einsum", {"a", "b"}, {"y"}, "einsum"), "equation", c.equation);
  m.output("y");

  Tensor a = passtest::randomTensor(Shape(c.a), 7), b = passtest::randomTensor(Shape(c.b), 8);
  auto values = [](const Tensor& t) {
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  std::vector<int64_t> outShape;
  std::vector<double> want = naiveEinsum(c.equation, {c.a, c.b}, values(a), values(b), &outShape);
  passtest::CompiledRun run = passtest::compileAndRunOnnx(m.bytes(), "einsum.onnx", {a, b});
  int einsums = 0, matmuls = 0;
  for (const auto& s : run.plan.steps()) {
    einsums += s.op_type() == "Einsum";
    matmuls += s.op_type() == "MatMul";
  }
  EXPECT_EQ(einsums, c.rewritten ? 0 : 1) << c.equation;
  EXPECT_EQ(matmuls, c.rewritten ? 1 : 0) << c.equation;
  ASSERT_EQ(run.outputs.size(), 1u);
  ASSERT_EQ(run.outputs[0].shape(), Shape(outShape)) << c.equation;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(run.outputs[0].data<float>()[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
        << c.equation << " at " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Equations, EinsumMatMul,
    ::testing::Values(
        Case{"bij,bjk->bik", {3, 4, 5}, {3, 5, 6}, true},
        Case{"B G H I D, B G H J D -> B G H I J", {1, 2, 3, 4, 8}, {1, 2, 3, 5, 8}, true},  // MaxViT
        Case{"B G H I J, B G H J D -> B G H I D", {1, 2, 3, 4, 5}, {1, 2, 3, 5, 8}, true},
        Case{"ik,jk->ij", {4, 7}, {5, 7}, true},
        Case{"ki,kj->ij", {7, 4}, {7, 5}, true},
        Case{"ij,jk->ki", {4, 7}, {7, 5}, true},          // the result transposed
        Case{"i,j->ij", {4}, {5}, true},                  // outer product: nothing contracted
        Case{"i,i->", {6}, {6}, true},                    // inner product: a scalar
        Case{"abc,cd->abd", {2, 3, 4}, {4, 5}, true},     // two row labels
        Case{"bij,jk->bik", {2, 3, 4}, {4, 5}, true},     // B without the batch label
        Case{"bhqd,bkhd->bhqk", {2, 3, 4, 8}, {2, 5, 3, 8}, true},  // labels in other orders
        Case{"ijk,jkl->il", {2, 3, 4}, {3, 4, 5}, true},  // two contracted labels
        Case{"bi,bj->bij", {3, 4}, {3, 5}, true},         // batch, nothing contracted
        Case{"...ij,...jk->...ik", {2, 3, 4, 5}, {2, 3, 5, 6}, true},
        Case{"bij,bjk->bik", {1, 4, 5}, {3, 5, 6}, true},  // a batch extent of 1 broadcasts
        Case{"ijb,jkb->bki", {4, 5, 2}, {5, 3, 2}, true},
        Case{"ijb,jkb->ikb", {4, 5, 2}, {5, 3, 2}, true},  // the result a 3-cycle of [b, i, k]
        Case{"ii,ij->j", {4, 4}, {4, 5}, false},          // a diagonal: the Einsum kernel
        Case{"ij,kl->k", {3, 4}, {5, 6}, false},          // labels summed within one operand
        Case{"ij,jk->ik", {3, 1}, {4, 5}, false}));       // a contracted extent of 1 broadcasts

}  // namespace
}  // namespace tandem
