// --tandem-canonicalize's zero Pad -> AveragePool rewrite (passes/CanonicalizePatterns.cpp
// rewritePadWindow): torch.onnx writes avg_pool2d(padding=p) with count_include_pad=True as a
// Pad and a pool without pads; the rewrite gives the pool the pads and has it count them. Each
// case is compiled from an ONNX model, run, and compared with Pad then AveragePool evaluated
// naively in double (ONNX's definitions: the divisor is the window's taps inside the padded
// input, or with count_include_pad inside the input plus the pool's own pads); the plan is
// checked to have (or, for the forms the rewrite leaves, still have) its Pad step.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "tests/unit/onnx_model_builder.h"
#include "tests/unit/passes/compile_run_util.h"

namespace tandem {
namespace {

using namespace testing_onnx;

struct Case {
  std::string name;
  std::vector<int64_t> x;      // [N, C, spatial...]
  std::vector<int64_t> pad;    // ONNX Pad pads over every dim: begins, then ends
  std::vector<int64_t> kernel, strides, poolPads;  // poolPads empty: none
  int64_t countIncludePad = 0, ceilMode = 0;
  bool rewritten = true;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < v.size(); ++i) n *= v[i];
  return n;
}

// Pad by zero, then AveragePool, both in double, for 1-3 spatial dims.
std::vector<double> naive(const Case& c, const std::vector<float>& x, std::vector<int64_t>* outShape) {
  const size_t rank = c.x.size(), sp = rank - 2;
  std::vector<int64_t> padded(rank);
  for (size_t d = 0; d < rank; ++d) padded[d] = c.x[d] + c.pad[d] + c.pad[rank + d];
  std::vector<double> p(product(padded), 0.0);
  std::vector<int64_t> at(rank, 0);
  for (int64_t i = 0; i < product(c.x); ++i) {
    int64_t r = i, o = 0;
    for (size_t d = rank; d-- > 0;) {
      at[d] = r % c.x[d];
      r /= c.x[d];
    }
    for (size_t d = 0; d < rank; ++d) o = o * padded[d] + at[d] + c.pad[d];
    p[o] = x[i];
  }
  std::vector<int64_t> begin(sp, 0), end(sp, 0);
  if (!c.poolPads.empty())
    for (size_t d = 0; d < sp; ++d) begin[d] = c.poolPads[d], end[d] = c.poolPads[sp + d];
  *outShape = {padded[0], padded[1]};
  for (size_t d = 0; d < sp; ++d) {
    const int64_t span = padded[2 + d] + begin[d] + end[d] - c.kernel[d];
    const int64_t s = c.strides[d];
    outShape->push_back((c.ceilMode ? (span + s - 1) / s : span / s) + 1);
  }
  std::vector<double> out(product(*outShape), 0.0);
  std::vector<int64_t> o(rank), k(sp);
  for (int64_t i = 0; i < (int64_t)out.size(); ++i) {
    int64_t r = i;
    for (size_t d = rank; d-- > 0;) {
      o[d] = r % (*outShape)[d];
      r /= (*outShape)[d];
    }
    double sum = 0;
    int64_t taps = 0, counted = 0;
    for (int64_t t = 0; t < product(c.kernel); ++t) {
      int64_t rt = t, off = o[0] * padded[1] + o[1];
      bool inside = true, insidePads = true;
      for (size_t d = sp; d-- > 0;) {
        k[d] = rt % c.kernel[d];
        rt /= c.kernel[d];
      }
      for (size_t d = 0; d < sp; ++d) {
        const int64_t pos = o[2 + d] * c.strides[d] + k[d] - begin[d];
        inside = inside && pos >= 0 && pos < padded[2 + d];
        insidePads = insidePads && pos >= -begin[d] && pos < padded[2 + d] + end[d];
        off = off * padded[2 + d] + std::clamp<int64_t>(pos, 0, padded[2 + d] - 1);
      }
      if (inside) sum += p[off], ++taps;
      counted += insidePads;
    }
    out[i] = sum / double(c.countIncludePad ? counted : taps);
  }
  return out;
}

class PadPool : public ::testing::TestWithParam<Case> {};

TEST_P(PadPool, MatchesPadThenPool) {
  const Case& c = GetParam();
  Model m(19);
  m.input("x", c.x);
  auto* pads = m.g()->add_initializer();
  pads->set_name("pads");
  pads->set_data_type(onnx::TensorProto::INT64);
  pads->add_dims((int64_t)c.pad.size());
  for (int64_t v : c.pad) pads->add_int64_data(v);
  m.node("Pad", {"x", "pads"}, {"xp"}, "pad");
  auto* pool = m.node("AveragePool", {"xp"}, {"y"}, "pool");
  intsAttr(pool, "kernel_shape", c.kernel);
  intsAttr(pool, "strides", c.strides);
  if (!c.poolPads.empty()) intsAttr(pool, "pads", c.poolPads);
  intAttr(pool, "count_include_pad", c.countIncludePad);
  intAttr(pool, "ceil_mode", c.ceilMode);
  m.output("y");

  Tensor x = passtest::randomTensor(Shape(c.x), 11);
  std::vector<int64_t> outShape;
  std::vector<double> want =
      naive(c, std::vector<float>(x.data<float>(), x.data<float>() + x.numel()), &outShape);
  passtest::CompiledRun run = passtest::compileAndRunOnnx(m.bytes(), "pad_pool.onnx", {x});
  int padSteps = 0;
  for (const auto& s : run.plan.steps()) padSteps += s.op_type() == "Pad";
  EXPECT_EQ(padSteps, c.rewritten ? 0 : 1) << c.name;
  ASSERT_EQ(run.outputs.size(), 1u);
  ASSERT_EQ(run.outputs[0].shape(), Shape(outShape)) << c.name;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(run.outputs[0].data<float>()[i], want[i], 1e-5) << c.name << " at " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Forms, PadPool,
    ::testing::Values(
        // Inception's pool branch: avg_pool2d(3, 1, padding=1) as torch.onnx writes it.
        Case{"inception", {1, 32, 9, 9}, {0, 0, 1, 1, 0, 0, 1, 1}, {3, 3}, {1, 1}, {}},
        Case{"stride2_uneven", {2, 3, 7, 8}, {0, 0, 2, 0, 0, 0, 1, 1}, {3, 2}, {2, 2}, {}},
        Case{"own_counted_pads", {1, 4, 6, 6}, {0, 0, 1, 0, 0, 0, 0, 1}, {3, 3}, {1, 2}, {1, 1, 0, 1}, 1},
        Case{"one_d", {1, 5, 11}, {0, 0, 2, 0, 0, 1}, {4}, {3}, {}},
        Case{"three_d", {1, 2, 4, 5, 5}, {0, 0, 1, 1, 1, 0, 0, 1, 1, 1}, {2, 3, 3}, {1, 1, 2}, {}},
        // Left as they are: pads the pool does not count, ceil_mode, a Pad of the channels, and
        // a window wholly in the pads (oneDNN's pooling does not take it).
        Case{"own_uncounted_pads", {1, 4, 6, 6}, {0, 0, 1, 1, 0, 0, 1, 1}, {3, 3}, {1, 1}, {1, 1, 1, 1}, 0, 0, false},
        Case{"ceil_mode", {1, 4, 6, 6}, {0, 0, 1, 1, 0, 0, 1, 1}, {3, 3}, {2, 2}, {}, 0, 1, false},
        Case{"channel_pad", {1, 4, 6, 6}, {0, 1, 1, 1, 0, 0, 1, 1}, {3, 3}, {1, 1}, {}, 0, 0, false},
        Case{"window_in_pads", {1, 2, 5, 5}, {0, 0, 3, 0, 0, 0, 0, 0}, {3, 3}, {1, 1}, {}, 0, 0, false}));

}  // namespace
}  // namespace tandem
