// Tests of the reference RNN, GRU and LSTM kernels against values computed step by step from the
// ONNX equations (Python, outside the kernel): bidirectional with sequence_lens, GRU with and
// without linear_before_reset, LSTM with peepholes, clip and layout 1, an activation with alpha.
#include "tests/unit/runtime/ref_test_util.h"

namespace tandem {
namespace {
using namespace reftest;

// Runs `op` with all outputs requested (shapes given) and returns them.
std::vector<Tensor> runAll(const std::string& op, AttrMap a, std::vector<Tensor> in,
                           std::vector<Shape> outShapes) {
  OpCall c{op, std::move(a), std::move(in), {}};
  for (Shape& s : outShapes) c.outputs.push_back({DType::F32, std::move(s)});
  std::vector<Tensor> outs;
  Status st = c.run(&outs);
  EXPECT_TRUE(st.isOk()) << st.message();
  return outs;
}

TEST(RefRNN, BidirectionalWithSequenceLengths) {
  // seq 3, batch 2, input 1, hidden 1; batch row 1 has length 2: its Y at t = 2 is 0 in both
  // directions, and the reverse direction starts at t = 1.
  auto outs = runAll("RNN", attrs({{"direction", Attr::ofString("bidirectional")}}),
                     {f32({3, 2, 1}, {0.5f, -1, 1, 0.25f, -0.5f, 2}), f32({2, 1, 1}, {0.8f, -0.6f}),
                      f32({2, 1, 1}, {0.5f, 0.3f}), f32({2, 2}, {0.1f, -0.2f, 0.05f, 0}),
                      i32({2}, {3, 2})},
                     {{3, 2, 2, 1}, {2, 2, 1}});
  expectValues<float>(outs[0], {3, 2, 2, 1},
                      {0.2913126f, -0.7162979f, -0.3595287f, 0.5511974f, 0.6887934f, -0.2525634f,
                       -0.4211485f, -0.0996680f, -0.1543595f, 0, 0.3363755f, 0});
  expectValues<float>(outs[1], {2, 2, 1}, {-0.1543595f, -0.2525634f, -0.3595287f, 0.5511974f});
}

TEST(RefRNN, ActivationAlpha) {
  // LeakyRelu with alpha 0.5, W = R = 1: h1 = leaky(-2) = -1, h2 = leaky(1 - 1) = 0.
  auto outs = runAll("RNN",
                     attrs({{"activations", Attr::ofStrings({"LeakyRelu"})},
                            {"activation_alpha", Attr::ofFloats({0.5f})}}),
                     {f32({2, 1, 1}, {-2, 1}), f32({1, 1, 1}, {1}), f32({1, 1, 1}, {1})},
                     {{2, 1, 1, 1}, {1, 1, 1}});
  expectValues<float>(outs[0], {2, 1, 1, 1}, {-1, 0});
}

std::vector<Tensor> gruInputs() {
  return {f32({2, 1, 2}, {1, -0.5f, 0.25f, 0.75f}),
          f32({1, 6, 2}, {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.1f, 0.2f, 0.2f, -0.4f, 0.3f, 0.6f, 0.1f}),
          f32({1, 6, 2}, {0.3f, -0.2f, 0.1f, 0.4f, -0.5f, 0.2f, 0.3f, 0.3f, 0.2f, -0.1f, 0.4f, 0.5f}),
          f32({1, 12}, {0.1f, -0.1f, 0.2f, 0, 0.05f, -0.05f, 0, 0.1f, -0.2f, 0.1f, 0.3f, -0.3f}),
          none(),
          f32({1, 1, 2}, {0.5f, -0.25f})};
}

TEST(RefGRU, LinearBeforeResetChangesTheCandidate) {
  auto outs = runAll("GRU", {}, gruInputs(), {{2, 1, 1, 2}, {1, 1, 2}});
  expectValues<float>(outs[0], {2, 1, 1, 2}, {0.2323865f, 0.0587056f, 0.3263635f, 0.0064056f});
  expectValues<float>(outs[1], {1, 1, 2}, {0.3263635f, 0.0064056f});
  auto lbr = runAll("GRU", attrs({{"linear_before_reset", Attr::ofInt(1)}}), gruInputs(),
                    {{2, 1, 1, 2}, {1, 1, 2}});
  expectValues<float>(lbr[0], {2, 1, 1, 2}, {0.1785761f, 0.1341921f, 0.2400334f, 0.1104046f});
}

TEST(RefLSTM, PeepholesClipAndLayout1) {
  // layout 1: X [batch 1, seq 2, input 1]; gates i, o, f, c; P = [Pi, Po, Pf]; clip 0.5.
  auto outs = runAll("LSTM", attrs({{"layout", Attr::ofInt(1)}, {"clip", Attr::ofFloat(0.5f)}}),
                     {f32({1, 2, 1}, {2, -1}), f32({1, 4, 1}, {0.5f, -0.3f, 0.8f, 1.2f}),
                      f32({1, 4, 1}, {0.2f, 0.1f, -0.4f, 0.3f}),
                      f32({1, 8}, {0.1f, 0, 0, 0.2f, 0, 0.1f, 0, 0}), none(), f32({1, 1, 1}, {0.1f}),
                      f32({1, 1, 1}, {-0.2f}), f32({1, 3}, {0.3f, -0.2f, 0.1f})},
                     {{1, 2, 1, 1}, {1, 1, 1}, {1, 1, 1}});
  expectValues<float>(outs[0], {1, 2, 1, 1}, {0.0610577f, -0.0788000f});
  expectValues<float>(outs[1], {1, 1, 1}, {-0.0788000f});
  expectValues<float>(outs[2], {1, 1, 1}, {-0.1306843f});
}

TEST(RefRecurrent, RejectsBadShapesAndActivations) {
  OpCall c{"RNN", attrs({{"activations", Attr::ofStrings({"Cube"})}}),
           {f32({2, 1, 1}, {1, 2}), f32({1, 1, 1}, {1}), f32({1, 1, 1}, {1})},
           {{DType::F32, {2, 1, 1, 1}}}};
  EXPECT_NE(errorOf(c).find("activation 'Cube' is not an ONNX RNN activation"), std::string::npos)
      << errorOf(c);
  c.attrs = {};
  c.inputs[1] = f32({1, 2, 1}, {1, 1});
  EXPECT_NE(errorOf(c).find("do not fit X"), std::string::npos) << errorOf(c);
}

}  // namespace
}  // namespace tandem
