// oneDNN MaxPool/AveragePool/GlobalAveragePool/GlobalMaxPool kernels against naive loops.
#include <limits>

#include "dnnl_test_util.h"

namespace tandem {
namespace dnnltest {
namespace {

struct PoolSpec {
  std::string op;
  Shape x, y;
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string autoPad;
  int64_t ceilMode = 0, countIncludePad = 0;
  std::vector<int64_t> padL, padREffective;  // what the naive loop uses (pads as ONNX means them)
};

/// ONNX pooling over up to 3 spatial dims: windows start at o*s - pl; max ignores padding;
/// average divides by the number of real elements, or with count_include_pad by the number of
/// window positions inside the explicitly padded input.
std::vector<double> naivePool(const PoolSpec& s, const Tensor& x) {
  const int sp = (int)s.x.size() - 2, off = 3 - sp;
  int64_t in[3], out[3], k[3], st[3], d[3], pl[3], pr[3];
  for (int i = 0; i < 3; ++i) {
    int j = i - off;
    bool real = j >= 0;
    in[i] = real ? s.x[2 + j] : 1;
    out[i] = real ? s.y[2 + j] : 1;
    k[i] = real ? s.kernel[j] : 1;
    st[i] = real && !s.strides.empty() ? s.strides[j] : 1;
    d[i] = real && !s.dilations.empty() ? s.dilations[j] : 1;
    pl[i] = real && !s.padL.empty() ? s.padL[j] : 0;
    pr[i] = real && !s.padREffective.empty() ? s.padREffective[j] : 0;
  }
  const int64_t NC = s.x[0] * s.x[1];
  const int64_t inSz = in[0] * in[1] * in[2], outSz = out[0] * out[1] * out[2];
  std::vector<double> y(NC * outSz);
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t o0 = 0; o0 < out[0]; ++o0)
      for (int64_t o1 = 0; o1 < out[1]; ++o1)
        for (int64_t o2 = 0; o2 < out[2]; ++o2) {
          double mx = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t count = 0, padCount = 0;
          for (int64_t t0 = 0; t0 < k[0]; ++t0)
            for (int64_t t1 = 0; t1 < k[1]; ++t1)
              for (int64_t t2 = 0; t2 < k[2]; ++t2) {
                int64_t i0 = o0 * st[0] - pl[0] + t0 * d[0];
                int64_t i1 = o1 * st[1] - pl[1] + t1 * d[1];
                int64_t i2 = o2 * st[2] - pl[2] + t2 * d[2];
                bool inPadded = i0 < in[0] + pr[0] && i1 < in[1] + pr[1] && i2 < in[2] + pr[2];
                if (inPadded) ++padCount;
                if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2])
                  continue;
                double v = x.data<float>()[nc * inSz + (i0 * in[1] + i1) * in[2] + i2];
                mx = std::max(mx, v);
                sum += v;
                ++count;
              }
          double r = s.op == "MaxPool" ? mx : sum / (s.countIncludePad ? padCount : count);
          y[nc * outSz + (o0 * out[1] + o1) * out[2] + o2] = r;
        }
  return y;
}

OpCase poolCase(const PoolSpec& s, uint32_t seed) {
  OpCase c;
  c.op = s.op;
  c.attrs.set("kernel_shape", Attr::ofInts(s.kernel));
  if (!s.strides.empty()) c.attrs.set("strides", Attr::ofInts(s.strides));
  if (!s.dilations.empty()) c.attrs.set("dilations", Attr::ofInts(s.dilations));
  if (!s.pads.empty()) c.attrs.set("pads", Attr::ofInts(s.pads));
  if (!s.autoPad.empty()) c.attrs.set("auto_pad", Attr::ofString(s.autoPad));
  c.attrs.set("ceil_mode", Attr::ofInt(s.ceilMode));
  if (s.op == "AveragePool") c.attrs.set("count_include_pad", Attr::ofInt(s.countIncludePad));
  c.inputs = {randomTensor(s.x, seed)};
  c.outputs = {s.y};
  return c;
}

void checkPool(const PoolSpec& s, uint32_t seed) {
  OpCase c = poolCase(s, seed);
  ASSERT_TRUE(dnnlSupports(c));
  expectClose(runOnce(c), naivePool(s, c.inputs[0]));
}

TEST(DnnlPool, ResNetMaxPool3x3s2p1) {
  PoolSpec s{"MaxPool", {2, 16, 32, 32}, {2, 16, 16, 16}, {3, 3}, {2, 2}};
  s.pads = {1, 1, 1, 1};
  s.padL = {1, 1};
  checkPool(s, 1);
}

TEST(DnnlPool, MaxPoolCeilMode) {
  // in 6, k 3, s 2: floor gives 2, ceil gives 3 (the last window hangs one past the end).
  PoolSpec s{"MaxPool", {1, 3, 6, 6}, {1, 3, 3, 3}, {3, 3}, {2, 2}};
  s.ceilMode = 1;
  checkPool(s, 2);
}

TEST(DnnlPool, MaxPoolDilated) {
  PoolSpec s{"MaxPool", {1, 2, 9, 9}, {1, 2, 5, 5}, {3, 3}, {1, 1}};
  s.dilations = {2, 2};
  checkPool(s, 3);
}

TEST(DnnlPool, MaxPoolSameUpper) {
  // in 7, s 2, k 3: out 4, total pad 2 -> 1 each side.
  PoolSpec s{"MaxPool", {1, 2, 7, 7}, {1, 2, 4, 4}, {3, 3}, {2, 2}};
  s.autoPad = "SAME_UPPER";
  s.padL = {1, 1};
  checkPool(s, 4);
}

TEST(DnnlPool, AveragePoolExcludePad) {
  PoolSpec s{"AveragePool", {2, 4, 8, 8}, {2, 4, 8, 8}, {3, 3}, {1, 1}};
  s.pads = {1, 1, 1, 1};
  s.padL = {1, 1};
  s.padREffective = {1, 1};
  checkPool(s, 5);
}

TEST(DnnlPool, AveragePoolIncludePad) {
  PoolSpec s{"AveragePool", {1, 3, 7, 7}, {1, 3, 4, 4}, {3, 3}, {2, 2}};
  s.pads = {1, 1, 1, 1};
  s.countIncludePad = 1;
  s.padL = {1, 1};
  s.padREffective = {1, 1};
  checkPool(s, 6);
}

TEST(DnnlPool, AveragePoolCeilExcludePad) {
  PoolSpec s{"AveragePool", {1, 2, 6, 6}, {1, 2, 3, 3}, {3, 3}, {2, 2}};
  s.ceilMode = 1;
  checkPool(s, 7);
}

TEST(DnnlPool, AveragePoolCeilIncludePadFallsBack) {
  // oneDNN would count the ceil overhang in the divisor, ONNX does not: left to the reference.
  PoolSpec s{"AveragePool", {1, 2, 6, 6}, {1, 2, 3, 3}, {3, 3}, {2, 2}};
  s.ceilMode = 1;
  s.countIncludePad = 1;
  EXPECT_FALSE(dnnlSupports(poolCase(s, 8)));
}

TEST(DnnlPool, OneDAndThreeD) {
  PoolSpec a{"AveragePool", {2, 3, 11}, {2, 3, 5}, {3}, {2}};
  a.pads = {0, 0};
  checkPool(a, 9);
  PoolSpec m{"MaxPool", {1, 2, 5, 6, 7}, {1, 2, 3, 3, 4}, {2, 2, 2}, {2, 2, 2}};
  m.pads = {1, 0, 1, 1, 0, 0};
  m.padL = {1, 0, 1};
  checkPool(m, 10);
}

TEST(DnnlPool, IndicesOutputFallsBack) {
  PoolSpec s{"MaxPool", {1, 1, 4, 4}, {1, 1, 2, 2}, {2, 2}, {2, 2}};
  OpCase c = poolCase(s, 11);
  c.outputs.push_back({1, 1, 2, 2});
  EXPECT_FALSE(dnnlSupports(c));
  c.outputAbsent = {false, true};  // Indices not requested: fine
  EXPECT_TRUE(dnnlSupports(c));
}

TEST(DnnlPool, HandComputedMax) {
  OpCase c;
  c.op = "MaxPool";
  c.attrs.set("kernel_shape", Attr::ofInts({2, 2}));
  c.attrs.set("strides", Attr::ofInts({2, 2}));
  c.inputs = {Tensor::fromVector<float>({1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4,
                                                       -5, -6, -7, -8})};
  c.outputs = {{1, 1, 2, 2}};
  expectClose(runOnce(c), {6, 8, -1, -3});
}

void checkGlobal(const std::string& op, const Shape& x, uint32_t seed) {
  OpCase c;
  c.op = op;
  c.inputs = {randomTensor(x, seed)};
  Shape y = x;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  c.outputs = {y};
  ASSERT_TRUE(dnnlSupports(c));
  Tensor out = runOnce(c);
  int64_t NC = x[0] * x[1], S = numElements(x) / NC;
  std::vector<double> want(NC);
  for (int64_t i = 0; i < NC; ++i) {
    double sum = 0, mx = -1e30;
    for (int64_t j = 0; j < S; ++j) {
      double v = c.inputs[0].data<float>()[i * S + j];
      sum += v;
      mx = std::max(mx, v);
    }
    want[i] = op == "GlobalMaxPool" ? mx : sum / S;
  }
  expectClose(out, want);
}

TEST(DnnlPool, GlobalAveragePool) {
  checkGlobal("GlobalAveragePool", {2, 64, 7, 7}, 12);
  checkGlobal("GlobalAveragePool", {1, 5, 9}, 13);
}

TEST(DnnlPool, GlobalMaxPool) {
  checkGlobal("GlobalMaxPool", {2, 8, 5, 6}, 14);
  checkGlobal("GlobalMaxPool", {1, 3, 2, 3, 4}, 15);
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
