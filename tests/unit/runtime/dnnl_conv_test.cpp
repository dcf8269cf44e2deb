// oneDNN Conv and ConvTranspose kernels against naive ONNX-semantics loops on random inputs.
#include "dnnl_test_util.h"

namespace tandem {
namespace dnnltest {
namespace {

/// Geometry of a naive N-D convolution, padded to 3 spatial dims (leading size-1 dims).
struct Geo {
  int64_t N, C, M, G;
  int64_t in[3], out[3], k[3], s[3], d[3], pl[3];
};

Geo makeGeo(const Shape& x, const Shape& w, const Shape& y, int64_t group,
            std::vector<int64_t> strides, std::vector<int64_t> dil, std::vector<int64_t> padL) {
  Geo g;
  const int sp = (int)x.size() - 2, off = 3 - sp;
  g.N = x[0];
  g.C = x[1];
  g.G = group;
  g.M = y[1];
  for (int i = 0; i < 3; ++i) {
    int j = i - off;
    bool real = j >= 0;
    g.in[i] = real ? x[2 + j] : 1;
    g.out[i] = real ? y[2 + j] : 1;
    g.k[i] = real ? w[2 + j] : 1;
    g.s[i] = real && !strides.empty() ? strides[j] : 1;
    g.d[i] = real && !dil.empty() ? dil[j] : 1;
    g.pl[i] = real && !padL.empty() ? padL[j] : 0;
  }
  return g;
}

/// ONNX Conv: y[n,m,o] = b[m] + sum_{c in group(m), t} x[n,c,o*s - pl + t*d] * w[m,c',t].
std::vector<double> naiveConv(const Tensor& x, const Tensor& w, const Tensor* b, const Geo& g) {
  const int64_t Cg = g.C / g.G, Mg = g.M / g.G;
  const int64_t K = g.k[0] * g.k[1] * g.k[2];
  const int64_t inSz = g.in[0] * g.in[1] * g.in[2], outSz = g.out[0] * g.out[1] * g.out[2];
  std::vector<double> y(g.N * g.M * outSz);
  const float* X = x.data<float>();
  const float* W = w.data<float>();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t m = 0; m < g.M; ++m) {
      const int64_t grp = m / Mg;
      for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
        for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
          for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
            double acc = b ? b->data<float>()[m] : 0.0;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t t0 = 0; t0 < g.k[0]; ++t0)
                for (int64_t t1 = 0; t1 < g.k[1]; ++t1)
                  for (int64_t t2 = 0; t2 < g.k[2]; ++t2) {
                    int64_t i0 = o0 * g.s[0] - g.pl[0] + t0 * g.d[0];
                    int64_t i1 = o1 * g.s[1] - g.pl[1] + t1 * g.d[1];
                    int64_t i2 = o2 * g.s[2] - g.pl[2] + t2 * g.d[2];
                    if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1] || i2 < 0 ||
                        i2 >= g.in[2])
                      continue;
                    int64_t xc = grp * Cg + c;
                    double xv = X[(n * g.C + xc) * inSz + (i0 * g.in[1] + i1) * g.in[2] + i2];
                    double wv = W[(m * Cg + c) * K + (t0 * g.k[1] + t1) * g.k[2] + t2];
                    acc += xv * wv;
                  }
            y[(n * g.M + m) * outSz + (o0 * g.out[1] + o1) * g.out[2] + o2] = acc;
          }
    }
  return y;
}

/// ONNX ConvTranspose as a scatter: x[n,c,i] * w[c,m',t] lands on y[n,m, i*s + t*d - pl].
std::vector<double> naiveConvTranspose(const Tensor& x, const Tensor& w, const Tensor* b,
                                       const Geo& g) {
  const int64_t Cg = g.C / g.G, Mg = g.M / g.G;
  const int64_t K = g.k[0] * g.k[1] * g.k[2];
  const int64_t inSz = g.in[0] * g.in[1] * g.in[2], outSz = g.out[0] * g.out[1] * g.out[2];
  std::vector<double> y(g.N * g.M * outSz, 0.0);
  const float* X = x.data<float>();
  const float* W = w.data<float>();
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t o = 0; o < outSz; ++o) y[(n * g.M + m) * outSz + o] = b ? b->data<float>()[m] : 0;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = 0; c < g.C; ++c) {
      const int64_t grp = c / Cg;
      for (int64_t i0 = 0; i0 < g.in[0]; ++i0)
        for (int64_t i1 = 0; i1 < g.in[1]; ++i1)
          for (int64_t i2 = 0; i2 < g.in[2]; ++i2) {
            double xv = X[(n * g.C + c) * inSz + (i0 * g.in[1] + i1) * g.in[2] + i2];
            for (int64_t mm = 0; mm < Mg; ++mm)
              for (int64_t t0 = 0; t0 < g.k[0]; ++t0)
                for (int64_t t1 = 0; t1 < g.k[1]; ++t1)
                  for (int64_t t2 = 0; t2 < g.k[2]; ++t2) {
                    int64_t o0 = i0 * g.s[0] + t0 * g.d[0] - g.pl[0];
                    int64_t o1 = i1 * g.s[1] + t1 * g.d[1] - g.pl[1];
                    int64_t o2 = i2 * g.s[2] + t2 * g.d[2] - g.pl[2];
                    if (o0 < 0 || o0 >= g.out[0] || o1 < 0 || o1 >= g.out[1] || o2 < 0 ||
                        o2 >= g.out[2])
                      continue;
                    int64_t m = grp * Mg + mm;
                    double wv = W[(c * Mg + mm) * K + (t0 * g.k[1] + t1) * g.k[2] + t2];
                    y[(n * g.M + m) * outSz + (o0 * g.out[1] + o1) * g.out[2] + o2] += xv * wv;
                  }
          }
    }
  return y;
}

struct ConvSpec {
  Shape x, w, y;
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads, padL;  // padL: what the naive loop uses
  std::string autoPad;
  bool bias = false;
  bool constWeights = true;
  bool hostLayout = false;  // X and Y in the host activation layout (the plan's "blocked")
};

void checkConv(const ConvSpec& s, uint32_t seed, std::string* impl = nullptr) {
  OpCase c;
  c.op = "Conv";
  c.attrs.set("group", Attr::ofInt(s.group));
  if (!s.strides.empty()) c.attrs.set("strides", Attr::ofInts(s.strides));
  if (!s.dilations.empty()) c.attrs.set("dilations", Attr::ofInts(s.dilations));
  if (!s.pads.empty()) c.attrs.set("pads", Attr::ofInts(s.pads));
  if (!s.autoPad.empty()) c.attrs.set("auto_pad", Attr::ofString(s.autoPad));
  c.attrs.set("kernel_shape", Attr::ofInts(Shape(s.w.begin() + 2, s.w.end())));
  c.inputs = {randomTensor(s.x, seed), randomTensor(s.w, seed + 1)};
  c.constant = {false, s.constWeights, true};
  if (s.bias) c.inputs.push_back(randomTensor({s.y[1]}, seed + 2));
  c.outputs = {s.y};
  ASSERT_TRUE(dnnlSupports(c));
  const Tensor plainX = c.inputs[0];
  if (s.hostLayout) {
    c.attrs.set("input_layouts", Attr::ofStrings({"blocked", "", ""}));
    c.attrs.set("output_layouts", Attr::ofStrings({"blocked"}));
    c.inputs[0] = relayout(plainX, true);
  }
  std::string chosen;
  Tensor y = runOnce(c, &chosen);
  if (s.hostLayout) y = relayout(y, false);
  c.inputs[0] = plainX;
  if (impl) *impl = chosen;
  Geo g = makeGeo(s.x, s.w, s.y, s.group, s.strides, s.dilations, s.padL);
  // Winograd F(4x4, 3x3) rounds more than a direct sum (its transforms scale by up to 5 and 8):
  // on these [-1, 1] weights about 7x a naive f32 loop's error, 1.3e-4 at 64 channels
  // (runtime/cpu/avx2/Winograd.h). Any wrong transform is off by O(1).
  const bool wino4 = chosen.rfind("avx2:winograd_4x4_3x3", 0) == 0;
  expectClose(y, naiveConv(c.inputs[0], c.inputs[1], s.bias ? &c.inputs[2] : nullptr, g),
              wino4 ? 5e-4 : 1e-4);
}

TEST(DnnlConv, ResNetLike64to64_3x3) {
  ConvSpec s{{2, 64, 28, 28}, {64, 64, 3, 3}, {2, 64, 28, 28}};
  s.pads = {1, 1, 1, 1};
  s.padL = {1, 1};
  s.bias = true;
  std::string impl;
  checkConv(s, 1, &impl);
  // On AVX2 machines this shape runs as Winograd F(4x4, 3x3) (runtime/cpu/avx2/Winograd.h).
  bool wino = impl.rfind("avx2:winograd_4x4_3x3", 0) == 0;
  EXPECT_TRUE(impl.find("dnnl:") != std::string::npos || wino) << impl;
  // Variable weights: nothing to transform ahead, so oneDNN's direct kernel, equally correct.
  s.constWeights = false;
  checkConv(s, 5, &impl);
  EXPECT_NE(impl.find("dnnl:"), std::string::npos) << impl;
}

TEST(DnnlConv, StridedStem7x7) {
  ConvSpec s{{1, 3, 32, 32}, {16, 3, 7, 7}, {1, 16, 16, 16}};
  s.strides = {2, 2};
  s.pads = {3, 3, 3, 3};
  s.padL = {3, 3};
  s.bias = true;
  checkConv(s, 2);
}

TEST(DnnlConv, StridedDownsample3x3) {
  ConvSpec s{{1, 32, 15, 15}, {64, 32, 3, 3}, {1, 64, 8, 8}};
  s.strides = {2, 2};
  s.pads = {1, 1, 1, 1};
  s.padL = {1, 1};
  checkConv(s, 3);
}

TEST(DnnlConv, Grouped) {
  ConvSpec s{{2, 32, 9, 9}, {48, 8, 3, 3}, {2, 48, 9, 9}};
  s.group = 4;
  s.pads = {1, 1, 1, 1};
  s.padL = {1, 1};
  s.bias = true;
  checkConv(s, 4);
}

// A grouped convolution between host-layout neighbours (RegNet's 3x3, group width 16) reads
// and writes that layout itself: oneDNN's own choice (nChw16c on AVX-512 hosts, whose layout
// is nhwc) would reorder both sides on every run.
TEST(DnnlConv, GroupedInHostLayoutHasNoReorders) {
  ConvSpec s{{2, 64, 14, 14}, {64, 16, 3, 3}, {2, 64, 7, 7}};
  s.group = 4;
  s.strides = {2, 2};
  s.pads = {1, 1, 1, 1};
  s.padL = {1, 1};
  s.bias = true;
  s.hostLayout = true;
  std::string impl;
  checkConv(s, 6, &impl);
  EXPECT_EQ(impl.find("reorders"), std::string::npos) << impl;
  EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
}

TEST(DnnlConv, Depthwise) {
  ConvSpec s{{1, 16, 10, 10}, {16, 1, 3, 3}, {1, 16, 5, 5}};
  s.group = 16;
  s.strides = {2, 2};
  s.pads = {1, 1, 1, 1};
  s.padL = {1, 1};
  checkConv(s, 5);
}

TEST(DnnlConv, Pointwise1x1) {
  ConvSpec s{{2, 64, 7, 7}, {128, 64, 1, 1}, {2, 128, 7, 7}};
  s.bias = true;
  checkConv(s, 6);
}

TEST(DnnlConv, DilatedAsymmetricPads) {
  // ONNX dilation 2 (oneDNN 1); pads begin {2,1}, end {0,3}.
  ConvSpec s{{1, 8, 11, 12}, {8, 8, 3, 3}, {1, 8, 9, 12}};
  s.dilations = {2, 2};
  s.pads = {2, 1, 0, 3};
  s.padL = {2, 1};
  checkConv(s, 7);
}

TEST(DnnlConv, AutoPadSameUpperAndLower) {
  // in 7, stride 2, k 4: out 4, total pad (4-1)*2+4-7 = 3: UPPER puts 1 first, LOWER 2.
  ConvSpec s{{1, 4, 7, 7}, {6, 4, 4, 4}, {1, 6, 4, 4}};
  s.strides = {2, 2};
  s.autoPad = "SAME_UPPER";
  s.padL = {1, 1};
  checkConv(s, 8);
  s.autoPad = "SAME_LOWER";
  s.padL = {2, 2};
  checkConv(s, 9);
}

TEST(DnnlConv, AutoPadValid) {
  ConvSpec s{{1, 4, 9, 8}, {5, 4, 3, 2}, {1, 5, 4, 4}};
  s.strides = {2, 2};
  s.autoPad = "VALID";
  checkConv(s, 10);
}

TEST(DnnlConv, RuntimeWeights) {
  // Weights that are not constants are reordered inside run() instead of at creation.
  ConvSpec s{{1, 16, 8, 8}, {32, 16, 3, 3}, {1, 32, 8, 8}};
  s.pads = {1, 1, 1, 1};
  s.padL = {1, 1};
  s.bias = true;
  s.constWeights = false;
  checkConv(s, 11);
}

TEST(DnnlConv, OneD) {
  ConvSpec s{{2, 6, 20}, {8, 3, 5}, {2, 8, 10}};
  s.group = 2;
  s.strides = {2};
  s.pads = {2, 1};
  s.padL = {2};
  s.bias = true;
  checkConv(s, 12);
}

TEST(DnnlConv, ThreeD) {
  ConvSpec s{{1, 4, 6, 7, 8}, {8, 4, 3, 3, 3}, {1, 8, 6, 4, 8}};
  s.strides = {1, 2, 1};
  s.pads = {1, 1, 1, 1, 1, 1};
  s.padL = {1, 1, 1};
  s.bias = true;
  checkConv(s, 13);
}

TEST(DnnlConv, ConstantWeightsArePrepackedAtCreation) {
  // Changing the weight tensor after creation must not change the result: the kernel reordered
  // a copy when it was created and run() never reads input 1.
  OpCase c;
  c.op = "Conv";
  c.attrs.set("pads", Attr::ofInts({1, 1, 1, 1}));
  c.inputs = {randomTensor({1, 8, 6, 6}, 20), randomTensor({8, 8, 3, 3}, 21)};
  c.constant = {false, true};
  c.outputs = {{1, 8, 6, 6}};
  Geo g = makeGeo({1, 8, 6, 6}, {8, 8, 3, 3}, {1, 8, 6, 6}, 1, {}, {}, {1, 1});
  std::vector<double> want = naiveConv(c.inputs[0], c.inputs[1], nullptr, g);
  std::unique_ptr<Kernel> k = createKernel(c);
  ASSERT_TRUE(k);
  Tensor w = c.inputs[1];
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 1000.f;
  Tensor y = Tensor::alloc(DType::F32, {1, 8, 6, 6});
  ASSERT_TRUE(k->run({&c.inputs[0], &c.inputs[1]}, {&y}).isOk());
  expectClose(y, want);
  // A second run on new activations gives the new answer (nothing cached but weights).
  Tensor x2 = randomTensor({1, 8, 6, 6}, 22);
  Tensor y2 = Tensor::alloc(DType::F32, {1, 8, 6, 6});
  Tensor w0 = randomTensor({8, 8, 3, 3}, 21);  // the original weights again
  ASSERT_TRUE(k->run({&x2, &c.inputs[1]}, {&y2}).isOk());
  expectClose(y2, naiveConv(x2, w0, nullptr, g));
}

TEST(DnnlConv, UnsupportedCasesFallBack) {
  OpCase c;
  c.op = "Conv";
  c.inputs = {randomTensor({1, 2, 5, 5, 5, 5}, 1), randomTensor({2, 2, 1, 1, 1, 1}, 2)};
  c.outputs = {{1, 2, 5, 5, 5, 5}};
  EXPECT_FALSE(dnnlSupports(c)) << "4-D spatial convolution";
  OpCase e;
  e.op = "Conv";
  e.inputs = {Tensor::alloc(DType::F32, {0, 2, 5, 5}), randomTensor({2, 2, 1, 1}, 2)};
  e.outputs = {{0, 2, 5, 5}};
  EXPECT_FALSE(dnnlSupports(e)) << "empty batch";
  OpCase d;
  d.op = "Conv";
  d.inputs = {Tensor::alloc(DType::F64, {1, 2, 5, 5}), Tensor::alloc(DType::F64, {2, 2, 1, 1})};
  d.outputs = {{1, 2, 5, 5}};
  EXPECT_FALSE(dnnlSupports(d)) << "f64";
}

// ---- ConvTranspose ----

struct DeconvSpec {
  Shape x, w, y;
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads, outputPadding, outputShape, padL;
  std::string autoPad;
  bool bias = false;
};

OpCase deconvCase(const DeconvSpec& s, uint32_t seed) {
  OpCase c;
  c.op = "ConvTranspose";
  c.attrs.set("group", Attr::ofInt(s.group));
  if (!s.strides.empty()) c.attrs.set("strides", Attr::ofInts(s.strides));
  if (!s.dilations.empty()) c.attrs.set("dilations", Attr::ofInts(s.dilations));
  if (!s.pads.empty()) c.attrs.set("pads", Attr::ofInts(s.pads));
  if (!s.outputPadding.empty()) c.attrs.set("output_padding", Attr::ofInts(s.outputPadding));
  if (!s.outputShape.empty()) c.attrs.set("output_shape", Attr::ofInts(s.outputShape));
  if (!s.autoPad.empty()) c.attrs.set("auto_pad", Attr::ofString(s.autoPad));
  c.inputs = {randomTensor(s.x, seed), randomTensor(s.w, seed + 1)};
  c.constant = {false, true, true};
  if (s.bias) c.inputs.push_back(randomTensor({s.y[1]}, seed + 2));
  c.outputs = {s.y};
  return c;
}

/// Runs the case (with `variant`, "" for the factory's choice) against the naive scatter.
void checkDeconv(const DeconvSpec& s, uint32_t seed, const std::string& variant = "",
                 int threads = 1) {
  OpCase c = deconvCase(s, seed);
  c.variant = variant;
  c.threads = threads;
  ASSERT_TRUE(dnnlSupports(c));
  std::string impl;
  Tensor y = runOnce(c, &impl);
  if (variant == "subpixel") EXPECT_NE(impl.find("(subpixel: "), std::string::npos) << impl;
  Geo g = makeGeo(s.x, s.w, s.y, s.group, s.strides, s.dilations, s.padL);
  expectClose(y, naiveConvTranspose(c.inputs[0], c.inputs[1], s.bias ? &c.inputs[2] : nullptr, g));
}

/// The variants the ConvTranspose def offers for `c`.
std::vector<std::string> deconvVariants(const OpCase& c) {
  for (const KernelDef& d : dnnlRegistry().all())
    if (d.opType == "ConvTranspose" && d.variants) return d.variants(c.context());
  return {};
}

TEST(DnnlConvTranspose, Stride2Pads) {
  // out = 2*(5-1) + 3 - 1 - 1 = 9
  DeconvSpec s{{2, 8, 5, 5}, {8, 4, 3, 3}, {2, 4, 9, 9}};
  s.strides = {2, 2};
  s.pads = {1, 1, 1, 1};
  s.padL = {1, 1};
  s.bias = true;
  checkDeconv(s, 30);
}

TEST(DnnlConvTranspose, OutputPadding) {
  // out = 2*(4-1) + 1 + 3 - 1 - 1 = 8; the last row/column comes from output_padding.
  DeconvSpec s{{1, 4, 4, 4}, {4, 6, 3, 3}, {1, 6, 8, 8}};
  s.strides = {2, 2};
  s.pads = {1, 1, 1, 1};
  s.outputPadding = {1, 1};
  s.padL = {1, 1};
  checkDeconv(s, 31);
}

TEST(DnnlConvTranspose, GroupedDilated) {
  // out = 1*(6-1) + (3-1)*2 + 1 = 10
  DeconvSpec s{{1, 6, 6, 6}, {6, 2, 3, 3}, {1, 6, 10, 10}};
  s.group = 3;
  s.dilations = {2, 2};
  s.bias = true;
  checkDeconv(s, 32);
}

TEST(DnnlConvTranspose, OutputShapeAttribute) {
  // ONNX test_convtranspose_output_shape-like: full size 3*(3-1)+3 = 9 (H) and 2*(3-1)+3 = 7
  // (W), asked for 10 x 8: total padding -1, NOTSET puts floor(-1/2) = -1 at the end, i.e. the
  // output grows by one zero (+bias) row/column at the end and start padding stays 0.
  DeconvSpec s{{1, 1, 3, 3}, {1, 2, 3, 3}, {1, 2, 10, 8}};
  s.strides = {3, 2};
  s.outputShape = {10, 8};
  s.padL = {0, 0};
  s.bias = true;
  checkDeconv(s, 33);
}

TEST(DnnlConvTranspose, AutoPadSameUpper) {
  // out = in*stride = 8; full = 2*3+3 = 9, total 1: SAME_UPPER start 0, end 1.
  DeconvSpec s{{1, 3, 4, 4}, {3, 5, 3, 3}, {1, 5, 8, 8}};
  s.strides = {2, 2};
  s.autoPad = "SAME_UPPER";
  s.padL = {0, 0};
  checkDeconv(s, 34);
  s.autoPad = "SAME_LOWER";
  s.padL = {1, 1};
  checkDeconv(s, 35);
}

TEST(DnnlConvTranspose, OneD) {
  DeconvSpec s{{2, 4, 7}, {4, 3, 4}, {2, 3, 14}};
  s.strides = {2};
  s.pads = {1, 1};
  s.padL = {1};
  s.bias = true;
  checkDeconv(s, 36);
}

// "subpixel": a ConvTranspose whose kernel is a multiple of its stride, as one forward
// convolution over the s^2 output phases plus a shuffle; offered only there (1-D or 2-D,
// ungrouped, undilated, constant weights and bias, plain values), and equal to the scatter
// across pads, output_padding, auto_pad, mixed strides and stride 3.
TEST(SubpixelDeconv, MatchesTheScatterWhereOffered) {
  std::vector<DeconvSpec> specs;
  DeconvSpec vae{{1, 16, 8, 8}, {16, 8, 4, 4}, {1, 8, 16, 16}};  // a VAE decoder's 4x4 / 2
  vae.strides = {2, 2};
  vae.pads = {1, 1, 1, 1};
  vae.padL = {1, 1};
  vae.bias = true;
  specs.push_back(vae);
  DeconvSpec unet{{2, 8, 5, 6}, {8, 4, 2, 2}, {2, 4, 10, 12}};  // U-Net's 2x2 / 2: one tap
  unet.strides = {2, 2};
  unet.padL = {0, 0};
  unet.bias = true;
  specs.push_back(unet);
  DeconvSpec outPad{{1, 4, 4, 4}, {4, 6, 4, 4}, {1, 6, 9, 9}};  // 2*3 + 4 - 2 + 1
  outPad.strides = {2, 2};
  outPad.pads = {1, 1, 1, 1};
  outPad.outputPadding = {1, 1};
  outPad.padL = {1, 1};
  specs.push_back(outPad);
  DeconvSpec three{{1, 3, 5, 4}, {3, 5, 6, 6}, {1, 5, 16, 11}};  // stride 3, uneven pads
  three.strides = {3, 3};
  three.pads = {2, 1, 0, 3};
  three.padL = {2, 1};
  three.bias = true;
  specs.push_back(three);
  DeconvSpec mixed{{1, 4, 5, 6}, {4, 3, 4, 3}, {1, 3, 8, 6}};  // strides 2 and 1
  mixed.strides = {2, 1};
  mixed.pads = {1, 1, 1, 1};
  mixed.padL = {1, 1};
  specs.push_back(mixed);
  DeconvSpec same{{1, 3, 4, 4}, {3, 5, 4, 4}, {1, 5, 8, 8}};  // SAME_UPPER: total 2, start 1
  same.strides = {2, 2};
  same.autoPad = "SAME_UPPER";
  same.padL = {1, 1};
  specs.push_back(same);
  DeconvSpec oneD{{2, 4, 7}, {4, 3, 4}, {2, 3, 14}};
  oneD.strides = {2};
  oneD.pads = {1, 1};
  oneD.padL = {1};
  oneD.bias = true;
  specs.push_back(oneD);
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE("spec " + std::to_string(i));
    std::vector<std::string> v = deconvVariants(deconvCase(specs[i], 40));
    ASSERT_EQ(v, (std::vector<std::string>{"dnnl", "subpixel"}));
    checkDeconv(specs[i], 40 + 3 * (uint32_t)i, "subpixel");
    checkDeconv(specs[i], 40 + 3 * (uint32_t)i, "dnnl");
  }
  // Large enough for the shuffle to split its rows over two threads.
  DeconvSpec big{{1, 8, 32, 32}, {8, 16, 4, 4}, {1, 16, 64, 64}};
  big.strides = {2, 2};
  big.pads = {1, 1, 1, 1};
  big.padL = {1, 1};
  big.bias = true;
  checkDeconv(big, 60, "subpixel", 2);
}

TEST(SubpixelDeconv, NotOfferedElsewhere) {
  DeconvSpec k3{{2, 8, 5, 5}, {8, 4, 3, 3}, {2, 4, 9, 9}};  // 3 is not a multiple of 2
  k3.strides = {2, 2};
  k3.pads = {1, 1, 1, 1};
  EXPECT_EQ(deconvVariants(deconvCase(k3, 50)), (std::vector<std::string>{"dnnl"}));
  DeconvSpec grouped{{1, 4, 4, 4}, {4, 2, 4, 4}, {1, 4, 8, 8}};
  grouped.group = 2;
  grouped.strides = {2, 2};
  grouped.pads = {1, 1, 1, 1};
  EXPECT_EQ(deconvVariants(deconvCase(grouped, 51)), (std::vector<std::string>{"dnnl"}));
  DeconvSpec dilated{{1, 4, 4, 4}, {4, 2, 2, 2}, {1, 2, 9, 9}};  // 2*3 + 2*1 + 1
  dilated.strides = {2, 2};
  dilated.dilations = {2, 2};
  EXPECT_EQ(deconvVariants(deconvCase(dilated, 52)), (std::vector<std::string>{"dnnl"}));
  DeconvSpec threeD{{1, 2, 3, 3, 3}, {2, 2, 2, 2, 2}, {1, 2, 6, 6, 6}};
  threeD.strides = {2, 2, 2};
  EXPECT_EQ(deconvVariants(deconvCase(threeD, 53)), (std::vector<std::string>{"dnnl"}));
  DeconvSpec runtime{{1, 4, 4, 4}, {4, 2, 2, 2}, {1, 2, 8, 8}};
  runtime.strides = {2, 2};
  OpCase c = deconvCase(runtime, 54);
  EXPECT_EQ(deconvVariants(c).size(), 2u);
  c.constant = {false, false};
  EXPECT_EQ(deconvVariants(c), (std::vector<std::string>{"dnnl"}));
  c.variant = "subpixel";
  std::unique_ptr<Kernel> k;
  Status st = dnnlRegistry().create("cpu", c.context(), &k);
  EXPECT_NE(st.message().find("variant subpixel does not apply (weights or bias not constant)"),
            std::string::npos) << st.message();
}

// ---- ConvWeightGrad (autodiff) ----------------------------------------------------------------

struct WeightGradSpec {
  Shape x, dy;
  std::vector<int64_t> k, strides, dilations, pads;
  int64_t group = 1;
};

// dW[m, c, t] = sum_{n, o} dY[n, m, o] * X[n, g*Cg + c, o*s + t*d - p], in f64, written out
// per spatial rank 1-3 by flattening to 3-D (missing dims of extent 1).
std::vector<double> naiveWeightGrad(const WeightGradSpec& w, const Tensor& X, const Tensor& dY) {
  const size_t sp = w.x.size() - 2;
  auto at = [&](const Shape& s, size_t i) { return i < sp ? s[2 + i] : int64_t(1); };
  auto ext = [&](const std::vector<int64_t>& v, size_t i, int64_t dflt) { return i < sp ? v[i] : dflt; };
  const int64_t N = w.x[0], C = w.x[1], M = w.dy[1], Cg = C / w.group, Mg = M / w.group;
  int64_t D[3], O[3], K[3], S[3], Dl[3], P[3];
  for (size_t i = 0; i < 3; ++i) {
    D[i] = at(w.x, i), O[i] = at(w.dy, i), K[i] = ext(w.k, i, 1), S[i] = ext(w.strides, i, 1);
    Dl[i] = ext(w.dilations, i, 1), P[i] = ext(w.pads, i, 0);
  }
  std::vector<double> dW((size_t)(M * Cg * K[0] * K[1] * K[2]), 0.0);
  const float* x = X.data<float>();
  const float* dy = dY.data<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t t0 = 0; t0 < K[0]; ++t0)
        for (int64_t t1 = 0; t1 < K[1]; ++t1)
          for (int64_t t2 = 0; t2 < K[2]; ++t2) {
            double sum = 0;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t o0 = 0; o0 < O[0]; ++o0)
                for (int64_t o1 = 0; o1 < O[1]; ++o1)
                  for (int64_t o2 = 0; o2 < O[2]; ++o2) {
                    const int64_t i0 = o0 * S[0] + t0 * Dl[0] - P[0], i1 = o1 * S[1] + t1 * Dl[1] - P[1],
                                  i2 = o2 * S[2] + t2 * Dl[2] - P[2];
                    if (i0 < 0 || i0 >= D[0] || i1 < 0 || i1 >= D[1] || i2 < 0 || i2 >= D[2]) continue;
                    const int64_t xc = (m / Mg) * Cg + c;
                    sum += double(dy[(((n * M + m) * O[0] + o0) * O[1] + o1) * O[2] + o2]) *
                           double(x[(((n * C + xc) * D[0] + i0) * D[1] + i1) * D[2] + i2]);
                  }
            dW[(size_t)((((m * Cg + c) * K[0] + t0) * K[1] + t1) * K[2] + t2)] = sum;
          }
  return dW;
}

OpCase weightGradCase(const WeightGradSpec& w, uint32_t seed) {
  OpCase c;
  c.op = "ConvWeightGrad";
  c.attrs.set("kernel_shape", Attr::ofInts(w.k));
  c.attrs.set("strides", Attr::ofInts(w.strides));
  c.attrs.set("dilations", Attr::ofInts(w.dilations));
  c.attrs.set("pads", Attr::ofInts(w.pads));
  c.attrs.set("group", Attr::ofInt(w.group));
  c.inputs = {randomTensor(w.x, seed), randomTensor(w.dy, seed + 1)};
  Shape ws = {w.dy[1], w.x[1] / w.group};
  ws.insert(ws.end(), w.k.begin(), w.k.end());
  c.outputs = {ws};
  return c;
}

// oneDNN's backward-weights primitive and the reference kernel against the naive f64 sum: the
// Keras MNIST CNN's second convolution (batch 4), groups with strides and pads, depthwise,
// 1-D with dilation, 3-D; threads 1 and 2.
TEST(DnnlConvWeightGrad, MatchesTheNaiveSum) {
  const std::vector<WeightGradSpec> specs = {
      {{4, 32, 26, 26}, {4, 64, 24, 24}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1},
      {{2, 4, 9, 8}, {2, 6, 5, 4}, {3, 2}, {2, 2}, {1, 1}, {1, 0, 1, 1}, 2},
      {{2, 8, 7, 7}, {2, 8, 4, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 8},
      {{3, 2, 11}, {3, 5, 4}, {3}, {2}, {2}, {1, 0}, 1},
      {{1, 3, 5, 6, 4}, {1, 2, 3, 4, 2}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, 1},
  };
  uint32_t seed = 70;
  for (const WeightGradSpec& w : specs)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(shapeToString(w.x) + " -> " + shapeToString(w.dy) + ", threads " + std::to_string(threads));
      OpCase c = weightGradCase(w, seed += 2);
      c.threads = threads;
      ASSERT_TRUE(dnnlSupports(c));
      const std::vector<double> want = naiveWeightGrad(w, c.inputs[0], c.inputs[1]);
      std::string impl;
      Tensor got = runOnce(c, &impl);
      EXPECT_EQ(impl.rfind("dnnl:", 0), 0u) << impl;
      expectClose(got, want, 1e-4);
      std::unique_ptr<Kernel> k;
      ASSERT_TRUE(refRegistry().create("cpu", c.context(), &k).isOk());
      Tensor ref = Tensor::alloc(DType::F32, c.outputs[0]);
      std::vector<const Tensor*> in = {&c.inputs[0], &c.inputs[1]};
      std::vector<Tensor*> out = {&ref};
      ASSERT_TRUE(k->run(in, out).isOk());
      expectClose(ref, want, 1e-5);
    }
}

// A dY shorter than the Conv's output (ConvTranspose's weight gradient with output_padding >=
// strides) is the reference kernel's: oneDNN needs the extents to match.
TEST(DnnlConvWeightGrad, AShorterDyIsLeftToTheReference) {
  WeightGradSpec w{{1, 2, 7}, {1, 3, 2}, {3}, {2}, {1}, {0, 0}, 1};
  EXPECT_FALSE(dnnlSupports(weightGradCase(w, 90)));
}

}  // namespace
}  // namespace dnnltest
}  // namespace tandem
