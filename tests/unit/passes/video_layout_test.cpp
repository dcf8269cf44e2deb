// 5-D activations in the host's layout (passes/Fuse.cpp, step 5): a video block in the style of
// R(2+1)D and S3D (a (1,3,3) Conv + BatchNormalization + Relu, a ceil_mode (1,3,3)/(1,2,2) max
// pool, two (3,1,1) branches concatenated on the channels, a per-channel scale, a 1x1x1 Conv
// with a residual Add + Relu, and a global pool) compiled with and without --tandem-fuse must
// give the same outputs, and the fused plan must keep the values between those steps in the
// host's layout ("blocked" step layouts) instead of reordering around every 3-D convolution.
// Whatever layout the host's oneDNN picks (nCdhw8c, nCdhw16c, ndhwc), the numbers must agree;
// the test runs under the capped ISA too (scripts/test.sh).
#include <gtest/gtest.h>


#include "frontend/GraphBuilder.h"
#include "tests/unit/passes/compile_run_util.h"

using namespace tandem;
using passtest::randomTensor;

namespace {

const Shape kInput = {2, 8, 4, 10, 10};

mlir::OwningOpRef<mlir::ModuleOp> buildVideoBlock(GraphBuilder& g) {
  Value x = g.input("x", DType::F32, std::vector<Dim>(kInput.begin(), kInput.end()));
  ConvOptions spatial;
  spatial.pads = {0, 1, 1, 0, 1, 1};
  Value c = g.conv(x, g.constant(randomTensor({32, 8, 1, 3, 3}, 11, -0.3f, 0.3f)),
                   g.constant(randomTensor({32}, 12)), spatial);
  c = g.relu(g.batchNormalization(c, g.constant(randomTensor({32}, 13, 0.5f, 1.5f)),
                                  g.constant(randomTensor({32}, 14)),
                                  g.constant(randomTensor({32}, 15)),
                                  g.constant(randomTensor({32}, 16, 0.5f, 2.f))));
  PoolOptions pool;
  pool.kernelShape = {1, 3, 3};
  pool.strides = {1, 2, 2};
  pool.ceilMode = true;  // 10 -> 5 windows of 3 at stride 2, the last overhanging by one
  Value p = g.maxPool(c, pool);
  ConvOptions temporal;
  temporal.pads = {1, 0, 0, 1, 0, 0};
  Value b1 = g.relu(g.conv(p, g.constant(randomTensor({16, 32, 3, 1, 1}, 17, -0.2f, 0.2f)), {}, temporal));
  Value b2 = g.relu(g.conv(p, g.constant(randomTensor({16, 32, 3, 1, 1}, 18, -0.2f, 0.2f)), {}, temporal));
  Value k = g.mul(g.concat({b1, b2}, 1), g.constant(randomTensor({1, 32, 1, 1, 1}, 19, 0.5f, 1.5f)));
  Value y = g.conv(k, g.constant(randomTensor({32, 32, 1, 1, 1}, 20, -0.2f, 0.2f)));
  y = g.relu(g.add(y, p));
  g.output(y, "block");
  g.output(g.globalAveragePool(y), "pooled");
  std::string error;
  auto module = g.finish(&error);
  EXPECT_TRUE(module) << error;
  return module;
}

passtest::CompiledRun compileAndRun(bool fuse) {
  GraphBuilder g;
  auto module = buildVideoBlock(g);
  CompileOptions co;
  co.fuse = fuse;
  return passtest::compileAndRun(*module, co, {randomTensor(kInput, 1)});
}

// Steps whose first output the plan keeps in the host layout.
int blockedSteps(const plan::Plan& p) {
  int n = 0;
  for (const plan::Step& s : p.steps())
    for (const plan::Attribute& a : s.attrs())
      if (a.name() == "output_layouts" && a.strings_size() > 0 && a.strings(0) == "blocked") ++n;
  return n;
}

TEST(VideoLayout, FiveDimensionalValuesStayInTheHostLayoutAndMatchThePlainPlan) {
  passtest::CompiledRun fused = compileAndRun(true), plain = compileAndRun(false);
  ASSERT_EQ(fused.outputs.size(), 2u);
  ASSERT_EQ(plain.outputs.size(), 2u);
  for (size_t o = 0; o < fused.outputs.size(); ++o) {
    const Tensor& a = fused.outputs[o];
    const Tensor& b = plain.outputs[o];
    ASSERT_EQ(a.shape(), b.shape()) << "output " << o;
    EXPECT_LT(passtest::maxRelDiff(a, b), 1e-4) << "output " << o;
  }
  // The conv-epilogue (Conv + BatchNormalization + Relu), the pool, both branches, the Concat
  // and the scale; the residual conv's result is returned, so it is written plain.
  EXPECT_GE(blockedSteps(fused.plan), 6);
  EXPECT_EQ(blockedSteps(plain.plan), 0);
}

}  // namespace
