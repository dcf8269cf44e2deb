// oneDNN Conv (ONNX Conv-11) and ConvTranspose (ONNX ConvTranspose-11) for 1-D/2-D/3-D f32.
#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/cpu/avx2/GroupedConv.h"
#include "runtime/cpu/avx2/PointwiseConv.h"
#include "runtime/cpu/avx2/Winograd.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"

#include <omp.h>

namespace tandem {
namespace dnnlcpu {
namespace {

// Activation layout policy for convolutions. Tensors between ops are plain NCHW. Either we let
// oneDNN pick the source/destination layout (format_tag::any: nChw8c on AVX2, direct JIT
// kernels) and reorder in and out inside run(), or we force plain NCHW (oneDNN then uses
// im2col + sgemm). Measured through this kernel, reorders included, on the 2-core AVX2 build
// machine (shared, so best of 20-100 runs, 1 OpenMP thread), blocked vs plain in ms:
//   ResNet-18 3x3/1 64ch@56, 128@28, 256@14, 512@7, 7x7/2 stem, 1x1/2 64->128@56:
//   batch 1:  2.79 vs 3.81, 2.49 vs 3.42, 2.48 vs 2.90, 3.50 vs 3.43, 2.68 vs 4.90, 0.20 vs 0.18
//   batch 32: 117 vs 233, 141 vs 229, 144 vs 200, 145 vs 280, 144 vs 316, 16 vs 13
//   ResNet-50 1x1/1 convs (5 shapes): within +-20% of each other, no consistent winner.
// Blocked wins on the 3x3 and stem layers that dominate the time, so we use `any`.
constexpr bool kConvBlockedActivations = true;

// The Conv variant that runs oneDNN's own Winograd (oneDNN 2.6 picks jit_wino_4x3, F(4x4,3x3),
// or jit_fp32_wino_2x3 by shape; AVX-512 only, none for AVX2). Measured through this kernel,
// reorders from and to the host's nhwc included, against brgconv on nhwc (AMD EPYC,
// avx512_core, 1 thread, `tandem tune`, shared machine): mnist_cnn's 32 -> 64 @ 26 3x3 at
// batch 32 0.7x of the time, at batch 1 0.6x; ResNet-18's 64 @ 56 and GoogLeNet's 64 -> 192
// @ 56 0.4-0.6x; a 1-channel input 5x slower (the measurement drops it). Since it may round
// like F(4x4), --winograd 2x2 and off remove it (runtime/Tuning.cpp).
constexpr const char* kDnnlWinograd = "winograd-dnnl";

// The Conv variant that reads a plain NCHW source of a few channels (an image) as it is, with
// oneDNN choosing the destination, instead of reordering it to the host layout first. MNASNet's
// 3 -> 16 stem at batch 32 (AMD EPYC, avx512_core, 1 thread): reorder to nhwc 1.3 ms + brgconv
// 2.6 ms, against jit:avx512_core on nchw 2.2 ms writing nChw16c, whose 16 channels are nhwc's
// bytes (sameBytes: no reorder after it either).
constexpr const char* kDnnlPlainSrc = "dnnl-plain-src";
constexpr int64_t kPlainSrcMaxChannels = 4;

// The Conv variant that runs a grouped 2-D convolution with Tandem's direct kernel
// (runtime/cpu/avx2/GroupedConv.h) on activations in the host layout: RegNetX-400MF's 2-group
// 32-channel 3x3 stride-2 convolution at batch 32 took oneDNN's jit:avx512_core 12.9 ms (AMD
// EPYC Zen 5, 1 thread). Constant weights and bias, at most a sum then a ReLU after it.
constexpr const char* kGroupedDirect = "grouped-direct";

// The Conv variant that runs a 1x1 stride-1 convolution as Tandem's packed AVX2 GEMM
// (runtime/cpu/avx2/PointwiseConv.h) on activations in the host layout (nChw8c or nhwc).
// RegNetX-400MF's 32 -> 32 at 112 x 112 (AMD EPYC Zen 5 capped to AVX2, 1 thread): oneDNN's
// jit_1x1:avx2 0.291 ms, ONNX Runtime 0.197, the GEMM 0.196-0.206. Constant weights and bias,
// at most a sum then a ReLU after it.
constexpr const char* kPointwiseGemm = "pointwise-gemm";

// The Conv variant that runs a 1x1 stride-1 unpadded ungrouped convolution between values in
// the plain layout (N, C, spatial...: Conv1d's, which the plan never blocks, or a 2-D one the
// layout pass left plain) as one oneDNN matmul over the batch, Y[n] [K x P] = W [K x C] *
// X[n] [C x P] with P the spatial positions, reading and writing the step's buffers as they
// are. The convolution primitive reorders both sides into its layout instead: PointNet's
// 128 -> 512 Conv1d over [2, 128, 1024] took brgconv_1x1:avx512_core with both reorders
// 2.45-2.58 ms, the matmul (brg:avx512_core, bias as a binary post-op) 1.5-2.0 ms (AMD EPYC
// Zen 5, 1 thread). Chosen per step by measurement like the others.
constexpr const char* kPlainMatMul = "plain-matmul";

/// True when `g` is a 1x1 stride-1 unpadded ungrouped convolution (any spatial rank) whose
/// source, destination and residual (when the epilogue sums one) are plain in the plan; else
/// false with *why.
bool plainMatMulShape(const KernelContext& ctx, const ConvGeometry& g, const Epilogue* ep,
                      std::string* why) {
  const dims& w = g.weightsDims;  // [OC, IC, k...] when ungrouped
  bool pointwise = g.group == 1 && (int)w.size() == 2 + g.spatial;
  for (int i = 0; pointwise && i < g.spatial; ++i)
    pointwise = w[2 + i] == 1 && g.strides[i] == 1 && g.dilations[i] == 0 && g.padL[i] == 0 &&
                g.padR[i] == 0;
  if (!pointwise) {
    *why = "not a 1x1 stride-1 unpadded ungrouped convolution";
    return false;
  }
  const bool residualPlain =
      !ep || ep->sumInput < 0 ||
      userDesc(ctx, true, (size_t)ep->sumInput, g.dstDims) == plainDesc(g.dstDims);
  if (userDesc(ctx, true, 0, g.srcDims) != plainDesc(g.srcDims) ||
      userDesc(ctx, false, 0, g.dstDims) != plainDesc(g.dstDims) || !residualPlain) {
    *why = "source, destination or residual not in the plain layout";
    return false;
  }
  return true;
}

/// The "plain-matmul" variant (kPlainMatMul above): W as the matmul's source [1, K, C], X as
/// its weights [N, C, P], Y [N, K, P]; the bias ([K], broadcast over the positions) is a
/// binary_add post-op of [1, K, 1] (oneDNN 2.6's matmul runs a [1, K, 1] bias argument only in
/// its reference implementation), after the step's leading sum if any, before its others.
/// Weights and bias are read from the step's inputs on every run, constant or not.
class PlainMatMulConvKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx, const ConvGeometry& g, const Epilogue* ep) {
    std::string why;
    if (!plainMatMulShape(ctx, g, ep, &why))
      return Status::error(std::string("Conv: variant ") + kPlainMatMul + " does not apply (" +
                           why + ")");
    const int64_t N = g.srcDims[0], C = g.srcDims[1], K = g.dstDims[1];
    int64_t P = 1;
    for (int i = 0; i < g.spatial; ++i) P *= g.srcDims[2 + i];
    dnnl::engine& eng = cpuEngine();
    dnnl::memory::desc wMd = plainDesc({1, K, C}), xMd = plainDesc({N, C, P}),
                       yMd = plainDesc({N, K, P});
    hasBias_ = !g.biasDims.empty();
    // A leading sum stays first (oneDNN's gemm-based matmul runs a sum only there: as beta);
    // (W * X + residual) + bias is the same sum in another order.
    dnnl::post_ops po;
    Epilogue rest;
    if (ep) rest = *ep;
    if (!rest.items.empty() && rest.items[0].sum) {
      po.append_sum(1.f);
      rest.items.erase(rest.items.begin());
    }
    if (hasBias_) {
      biasPostOp_ = po.len();
      po.append_binary(dnnl::algorithm::binary_add, plainDesc({1, K, 1}));
    }
    rest.appendTo(&po, 3);
    dnnl::primitive_attr attr = baseAttr();
    attr.set_post_ops(po);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(wMd, xMd, dnnl::memory::desc(), yMd),
                                    attr, eng);
    if (isReferenceImpl(pd))
      return Status::error(std::string("Conv: variant ") + kPlainMatMul +
                           " does not apply (oneDNN would run " + pd.impl_info_str() + ")");
    prim_ = dnnl::matmul(pd);
    w_ = dnnl::memory(wMd, eng, DNNL_MEMORY_NONE);
    x_ = dnnl::memory(xMd, eng, DNNL_MEMORY_NONE);
    y_ = dnnl::memory(yMd, eng, DNNL_MEMORY_NONE);
    args_.add(DNNL_ARG_SRC, w_);
    args_.add(DNNL_ARG_WEIGHTS, x_);
    args_.add(DNNL_ARG_DST, y_);
    if (hasBias_) {
      bias_ = dnnl::memory(plainDesc({1, K, 1}), eng, DNNL_MEMORY_NONE);
      args_.add(DNNL_ARG_ATTR_MULTIPLE_POST_OP(biasPostOp_) | DNNL_ARG_SRC_1, bias_);
    }
    scratch_.init(pd, &ws_, &args_);
    sumInput_ = ep ? ep->sumInput : -1;
    setImpl(pd);
    impl_ += " (conv 1x1 as W*X)";
    if (ep) impl_ += " +post-ops[" + ep->text + "]";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("Conv", [&] {
      scratch_.bindBuffers(ws_.total() ? threadWorkspace(ws_.total()) : nullptr);
      bind(x_, in[0]->raw());
      bind(w_, in[1]->raw());
      if (hasBias_) bind(bias_, in[2]->raw());
      bind(y_, out[0]->raw());
      // oneDNN's sum adds what dst holds: the residual, copied there unless planned in place.
      if (sumInput_ >= 0 && in[sumInput_]->raw() != out[0]->raw())
        std::memcpy(out[0]->raw(), in[sumInput_]->raw(), out[0]->bytes());
      args_.execute(prim_);
      return Status::ok();
    });
  }

 private:
  dnnl::primitive prim_;
  dnnl::memory w_, x_, y_, bias_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  ExecArgs args_;
  bool hasBias_ = false;
  int biasPostOp_ = 0;  // the bias's index among the post-ops
  int sumInput_ = -1;
};

/// The host layout as the AVX2 kernels name it.
avx2::ChannelLayout hostChannelLayout() {
  const std::string host = activationLayoutName();
  return host == "nhwc" ? avx2::ChannelLayout::Nhwc
         : host == "nChw16c" ? avx2::ChannelLayout::NChw16c
                             : avx2::ChannelLayout::NChw8c;
}

/// The pointwise kernel's shape and layout for `g` between values in the host layout, or
/// false with *why.
bool pointwiseShape(const KernelContext& ctx, const ConvGeometry& g, avx2::PointwiseConvShape* s,
                    avx2::ChannelLayout* layout, std::string* why) {
  const dims& w = g.weightsDims;  // [OC, IC, KH, KW] when ungrouped
  if (g.spatial != 2 || g.group != 1 || w.size() != 4 || w[2] != 1 || w[3] != 1 ||
      g.strides != dims{1, 1} || g.dilations != dims{0, 0} || g.padL != dims{0, 0} ||
      g.padR != dims{0, 0}) {
    *why = "not a 2-D 1x1 stride-1 unpadded ungrouped convolution";
    return false;
  }
  if (!isBlocked(ctx, true, 0) || !isBlocked(ctx, false, 0)) {
    *why = "source or destination not in the host layout";
    return false;
  }
  *layout = hostChannelLayout();
  s->N = g.srcDims[0];
  s->C = g.srcDims[1];
  s->H = g.srcDims[2];
  s->W = g.srcDims[3];
  s->K = g.dstDims[1];
  return avx2::pointwiseConvApplies(*s, *layout, why);
}

/// The direct kernel's shape and layout for `g` between values in the host layout, or false
/// with *why.
bool groupedDirectShape(const KernelContext& ctx, const ConvGeometry& g,
                        avx2::GroupedConvShape* s, avx2::ChannelLayout* layout,
                        std::string* why) {
  const std::string host = activationLayoutName();
  if (g.spatial != 2 || g.group < 2 || !isBlocked(ctx, true, 0) || !isBlocked(ctx, false, 0)) {
    *why = "not a grouped 2-D convolution between values in the host layout";
    return false;
  }
  *layout = hostChannelLayout();
  const dims& w = g.weightsDims;  // [G, OC/G, IC/G, KH, KW]
  s->N = g.srcDims[0];
  s->C = g.srcDims[1];
  s->H = g.srcDims[2];
  s->W = g.srcDims[3];
  s->K = g.dstDims[1];
  s->OH = g.dstDims[2];
  s->OW = g.dstDims[3];
  s->G = g.group;
  s->KH = w[3];
  s->KW = w[4];
  s->strideH = g.strides[0];
  s->strideW = g.strides[1];
  s->dilationH = g.dilations[0] + 1;
  s->dilationW = g.dilations[1] + 1;
  s->padTop = g.padL[0];
  s->padLeft = g.padL[1];
  return avx2::groupedConvVectorWidth(*s, *layout, why) != 0;
}

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

bool readSpatialAttr(const AttrMap& a, const char* name, int sp, int64_t dflt, dims* out,
                     std::string* why) {
  std::vector<int64_t> v = a.getInts(name, std::vector<int64_t>(sp, dflt));
  if ((int)v.size() != sp) {
    *why = std::string(name) + " has " + std::to_string(v.size()) + " values, expected " +
           std::to_string(sp);
    return false;
  }
  *out = dims(v.begin(), v.end());
  return true;
}

/// Fills `g` for Conv (transpose=false) or ConvTranspose; returns false with a reason when the
/// configuration is not expressible (the reference kernel then runs it).
bool convGeometry(const KernelContext& ctx, bool transpose, ConvGeometry* g, std::string* why) {
  if (ctx.inputTypes.size() < 2 || ctx.outputTypes.empty()) {
    *why = "expects inputs X, W";
    return false;
  }
  const Shape& x = ctx.inputTypes[0].shape;
  const Shape& w = ctx.inputTypes[1].shape;
  const Shape& y = ctx.outputTypes[0].shape;
  const int rank = (int)x.size();
  if (rank < 3 || rank > 5 || (int)w.size() != rank || (int)y.size() != rank) {
    *why = "only 1-D, 2-D and 3-D convolutions with matching X/W/Y ranks";
    return false;
  }
  if (hasEmptyTensor(ctx)) {
    *why = "zero-size tensor";
    return false;
  }
  const AttrMap& a = *ctx.attrs;
  const int sp = rank - 2;
  g->spatial = sp;
  g->group = a.getInt("group", 1);
  const int64_t G = g->group;
  const int64_t C = x[1];
  // W: Conv [M, C/G, k...]; ConvTranspose [C, M/G, k...].
  const int64_t M = transpose ? w[1] * G : w[0];
  if (G <= 0 || C % G != 0 || M % G != 0 || y[1] != M || (transpose ? w[0] != C : w[1] * G != C)) {
    *why = "channel counts of X, W, Y and group disagree";
    return false;
  }
  dims kernel(w.begin() + 2, w.end());
  std::vector<int64_t> ks = a.getInts("kernel_shape", std::vector<int64_t>(kernel.begin(), kernel.end()));
  if (dims(ks.begin(), ks.end()) != kernel) {
    *why = "kernel_shape disagrees with W";
    return false;
  }
  dims onnxDil;
  if (!readSpatialAttr(a, "strides", sp, 1, &g->strides, why) ||
      !readSpatialAttr(a, "dilations", sp, 1, &onnxDil, why))
    return false;
  for (int i = 0; i < sp; ++i) {
    if (g->strides[i] <= 0 || onnxDil[i] <= 0) {
      *why = "strides and dilations must be positive";
      return false;
    }
  }
  g->dilations.resize(sp);
  dims ext(sp);
  for (int i = 0; i < sp; ++i) {
    g->dilations[i] = onnxDil[i] - 1;
    ext[i] = (kernel[i] - 1) * onnxDil[i] + 1;
  }
  const std::string autoPad = a.getString("auto_pad", "NOTSET");
  g->padL.assign(sp, 0);
  g->padR.assign(sp, 0);
  std::vector<int64_t> pads = a.getInts("pads", std::vector<int64_t>(2 * sp, 0));
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER") {
    *why = "unknown auto_pad '" + autoPad + "'";
    return false;
  }
  if ((int)pads.size() != 2 * sp) {
    *why = "pads must have 2*spatial values";
    return false;
  }

  if (!transpose) {
    for (int i = 0; i < sp; ++i) {
      const int64_t in = x[2 + i], out = y[2 + i], s = g->strides[i];
      if (autoPad == "NOTSET") {
        g->padL[i] = pads[i];
        g->padR[i] = pads[sp + i];
      } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
        int64_t total = std::max<int64_t>(0, (out - 1) * s + ext[i] - in);
        g->padL[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
        g->padR[i] = total - g->padL[i];
      }
      const int64_t span = in + g->padL[i] + g->padR[i] - ext[i];
      if (g->padL[i] < 0 || g->padR[i] < 0 || span < 0 || span / s + 1 != out) {
        *why = "pads/strides do not give the output shape " + shapeToString(y);
        return false;
      }
    }
  } else {
    dims outPad;
    if (!readSpatialAttr(a, "output_padding", sp, 0, &outPad, why)) return false;
    std::vector<int64_t> outShape = a.getInts("output_shape");
    if (!outShape.empty() && (int)outShape.size() != sp && (int)outShape.size() != rank) {
      *why = "output_shape must have spatial (or full) rank";
      return false;
    }
    for (int i = 0; i < sp; ++i) {
      const int64_t in = x[2 + i], out = y[2 + i], s = g->strides[i];
      const int64_t full = s * (in - 1) + outPad[i] + ext[i];
      int64_t pl;
      if (!outShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
        // ONNX ConvTranspose: pads generated from the requested output size; the odd unit goes
        // to the end for SAME_UPPER and to the start otherwise (floor division, as the ONNX
        // reference does, so negative totals grow the output at the expected side).
        int64_t want = !outShape.empty() ? outShape[outShape.size() - sp + i] : in * s;
        int64_t total = full - want;
        pl = autoPad == "SAME_UPPER" ? floorDiv(total, 2) : total - floorDiv(total, 2);
      } else if (autoPad == "VALID") {
        pl = 0;
      } else {
        pl = pads[i];
      }
      // Output position j is position j + pl of the uncropped result; what lies past it (the
      // ONNX end pad minus output_padding) becomes oneDNN's right padding, possibly negative.
      g->padL[i] = pl;
      g->padR[i] = s * (in - 1) + ext[i] - pl - out;
      if (pl < 0) {
        *why = "negative start padding";
        return false;
      }
    }
  }

  g->srcDims = dims(x.begin(), x.end());
  g->dstDims = dims(y.begin(), y.end());
  if (inputPresent(ctx, 2)) {
    const Shape& b = ctx.inputTypes[2].shape;
    if (b.size() != 1 || b[0] != M) {
      *why = "bias B must have shape [M]";
      return false;
    }
    g->biasDims = {M};
  }
  // oneDNN weights are [G, OC/G, IC/G, k...] (group) or [OC, IC, k...]. Conv's ONNX W is that
  // layout already; ConvTranspose's W is [IC, OC/G, k...], i.e. IC outer, OC inner.
  const int64_t IC = C, OC = M;
  dims k(w.begin() + 2, w.end());
  std::vector<int> order;
  if (G == 1) {
    g->weightsDims = {OC, IC};
    order = transpose ? std::vector<int>{1, 0} : std::vector<int>{0, 1};
  } else {
    g->weightsDims = {G, OC / G, IC / G};
    order = transpose ? std::vector<int>{0, 2, 1} : std::vector<int>{0, 1, 2};
  }
  for (int64_t d : k) {
    order.push_back((int)g->weightsDims.size());
    g->weightsDims.push_back(d);
  }
  g->weightsPlain = permutedDesc(g->weightsDims, order);
  return true;
}

class ConvKernel : public DnnlKernel {
 public:
  /// `ep`: post-ops of a fused step (Conv only); when they would make oneDNN fall to a worse
  /// implementation, *regressed is set and the kernel is left unbuilt.
  Status init(const KernelContext& ctx, bool transpose, const Epilogue* ep = nullptr,
              std::string* regressed = nullptr) {
    std::string why;
    ConvGeometry g;
    if (!convGeometry(ctx, transpose, &g, &why)) return Status::error(ctx.opType + ": " + why);
    op_ = transpose ? "ConvTranspose" : "Conv";
    dnnl::engine& eng = cpuEngine();
    const bool blocked = kConvBlockedActivations;
    // The caller's buffers: plain, or blocked when the plan carries that layout here.
    dnnl::memory::desc srcPlain = userDesc(ctx, true, 0, g.srcDims);
    dnnl::memory::desc dstPlain = userDesc(ctx, false, 0, g.dstDims);
    dnnl::memory::desc srcMd = blocked ? anyDesc(g.srcDims) : srcPlain;
    dnnl::memory::desc dstMd = blocked ? anyDesc(g.dstDims) : dstPlain;
    dnnl::memory::desc wMd = anyDesc(g.weightsDims);
    dnnl::memory::desc bMd;  // zero desc: no bias
    hasBias_ = !g.biasDims.empty();
    if (hasBias_) bMd = plainDesc(g.biasDims);
    dnnl::primitive_attr attr = baseAttr();
    if (ep) {
      dnnl::post_ops po;
      ep->appendTo(&po);
      attr.set_post_ops(po);
    }

    const Tensor* wConst = ctx.constInputs.size() > 1 ? ctx.constInputs[1] : nullptr;
    const Tensor* bConst = ctx.constInputs.size() > 2 ? ctx.constInputs[2] : nullptr;
    dnnl::memory::desc chosenSrc, chosenW, chosenDst;
    if (!transpose) {
      if (ctx.variant != "" && ctx.variant != "dnnl" && ctx.variant != "winograd2x2" &&
          ctx.variant != "winograd4x4" && ctx.variant != kDnnlWinograd &&
          ctx.variant != kDnnlPlainSrc && ctx.variant != kGroupedDirect &&
          ctx.variant != kPointwiseGemm)
        return Status::error("Conv: unknown variant '" + ctx.variant + "'");
      if (ctx.variant == kGroupedDirect || ctx.variant == kPointwiseGemm) {
        TANDEM_RETURN_IF_ERROR(ctx.variant == kGroupedDirect
                                   ? initGroupedDirect(ctx, g, wConst, bConst, ep)
                                   : initPointwise(ctx, g, wConst, bConst, ep));
        bindMemories(ctx, g, ep, srcPlain, dstPlain, bMd, srcPlain, g.weightsPlain, dstPlain,
                     wConst, bConst);
        return Status::ok();
      }
      const bool plainSrc = ctx.variant == kDnnlPlainSrc;
      if (plainSrc) {
        if (isBlocked(ctx, true, 0) || g.group != 1 || g.srcDims[1] > kPlainSrcMaxChannels)
          return Status::error("Conv: variant dnnl-plain-src does not apply (source in the host "
                               "layout, grouped, or more than 4 channels)");
        srcMd = srcPlain;
      }
      // The variant "winograd-dnnl" asks oneDNN's own Winograd (convolution_winograd, in its
      // blocked layout, reordered from and to the plan's at the step's edges).
      const bool dnnlWino = ctx.variant == kDnnlWinograd;
      const dnnl::algorithm alg = dnnlWino ? dnnl::algorithm::convolution_winograd
                                           : dnnl::algorithm::convolution_direct;
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, alg, srcMd, wMd, bMd,
                                        dstMd, g.strides, g.dilations, g.padL, g.padR);
      dnnl::convolution_forward::primitive_desc pd;
      try {
        pd = dnnl::convolution_forward::primitive_desc(d, attr, eng);
      } catch (const dnnl::error&) {
        if (!dnnlWino) throw;
        return Status::error("Conv: variant winograd-dnnl does not apply (oneDNN has no Winograd "
                             "for this shape, ISA or post-ops)");
      }
      // Where oneDNN's own choice reorders a side the plan keeps in the host layout (grouped
      // convolutions pick nChw16c on AVX-512 hosts, whose layout is nhwc), ask for the
      // caller's layout on those sides and keep it unless the implementation class drops:
      // RegNet's grouped 3x3 convolutions at batch 32 ran 1.2-2.3x faster in nhwc than in
      // nChw16c with both reorders (oneDNN 2.6 jit:avx512_core either way).
      const bool srcUser = isBlocked(ctx, true, 0), dstUser = isBlocked(ctx, false, 0);
      if (plainSrc && (isReferenceImpl(pd) || std::string(pd.impl_info_str()).find("gemm") !=
                                                  std::string::npos))
        return Status::error(std::string("Conv: variant dnnl-plain-src does not apply (oneDNN "
                                         "would run ") + pd.impl_info_str() + ")");
      if (blocked && !dnnlWino && !plainSrc &&
          ((srcUser && pd.src_desc() != srcPlain) || (dstUser && pd.dst_desc() != dstPlain))) {
        dnnl::convolution_forward::desc du(dnnl::prop_kind::forward_inference, alg,
                                           srcUser ? srcPlain : srcMd, wMd, bMd,
                                           dstUser ? dstPlain : dstMd, g.strides, g.dilations,
                                           g.padL, g.padR);
        try {
          dnnl::convolution_forward::primitive_desc pu(du, attr, eng);
          if (!isReferenceImpl(pu) && !implRegresses(pd.impl_info_str(), pu.impl_info_str())) {
            d = du;
            pd = pu;
          }
        } catch (const dnnl::error&) {
          // No implementation reads the host layout here: keep oneDNN's choice and reorder.
        }
      }
      if (ep) {
        // The same convolution without post-ops: what the group would run unfused.
        dnnl::convolution_forward::primitive_desc plain(d, baseAttr(), eng);
        if (implRegresses(plain.impl_info_str(), pd.impl_info_str())) {
          *regressed = std::string("fused dnnl:") + pd.impl_info_str() + " vs unfused dnnl:" +
                       plain.impl_info_str();
          return Status::ok();
        }
      }
      chosenSrc = pd.src_desc();
      chosenW = pd.weights_desc();
      chosenDst = pd.dst_desc();
      setImpl(pd);
      const int tile = ctx.variant == "winograd2x2" ? 2 : ctx.variant == "winograd4x4" ? 4 : 0;
      initWinograd(g, chosenSrc, chosenDst, wConst, hasBias_ ? bConst : nullptr, ep,
                   ctx.variant == "dnnl" || dnnlWino || plainSrc ? WinogradPolicy::Off
                                                                 : ctx.winograd,
                   tile);
      if (tile && !wino_)
        return Status::error("Conv: variant " + ctx.variant + " does not apply (oneDNN chose " +
                             impl_ + ", or shape/epilogue outside Winograd's)");
      if (!wino_) {
        // Only a primitive that runs is JIT-compiled (Winograd replaces it entirely).
        prim_ = dnnl::convolution_forward(pd);
        scratch_.init(pd, &ws_, &args_);
      }
    } else {
      dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::deconvolution_direct, srcMd, wMd, bMd,
                                          dstMd, g.strides, g.dilations, g.padL, g.padR);
      dnnl::deconvolution_forward::primitive_desc pd(d, attr, eng);
      prim_ = dnnl::deconvolution_forward(pd);
      chosenSrc = pd.src_desc();
      chosenW = pd.weights_desc();
      chosenDst = pd.dst_desc();
      scratch_.init(pd, &ws_, &args_);
      setImpl(pd);
    }

    bindMemories(ctx, g, ep, srcPlain, dstPlain, bMd, chosenSrc, chosenW, chosenDst, wConst, bConst);
    return Status::ok();
  }

  // The memories and arguments of the chosen primitive: activations reordered at the step's
  // edges where the plan's layout differs, the residual of a sum post-op, weights and bias
  // prepacked once when constant.
  void bindMemories(const KernelContext& ctx, const ConvGeometry& g, const Epilogue* ep,
                    const dnnl::memory::desc& srcPlain, const dnnl::memory::desc& dstPlain,
                    const dnnl::memory::desc& bMd, const dnnl::memory::desc& chosenSrc,
                    const dnnl::memory::desc& chosenW, const dnnl::memory::desc& chosenDst,
                    const Tensor* wConst, const Tensor* bConst) {
    dnnl::engine& eng = cpuEngine();
    src_.init(srcPlain, chosenSrc, /*isInput=*/true, &ws_);
    dst_.init(dstPlain, chosenDst, /*isInput=*/false, &ws_);
    if (ep && ep->sumInput >= 0) {
      // oneDNN's sum adds what dst holds: the residual, put there (in dst's layout) per run.
      // Either a copy (same layout as the primitive's dst, skipped when planned in place) or
      // a reorder into it.
      sumInput_ = ep->sumInput;
      dnnl::memory::desc residualMd = userDesc(ctx, true, (size_t)sumInput_, g.dstDims);
      residualReorders_ = residualMd != chosenDst;
      if (residualReorders_) {
        residual_ = dnnl::memory(residualMd, eng, DNNL_MEMORY_NONE);
        residualReorder_ = dnnl::reorder(residual_, dst_.inner());
        residualArgs_.add(DNNL_ARG_FROM, residual_);
        residualArgs_.add(DNNL_ARG_TO, dst_.inner());
      }
    }
    if (ep) impl_ += " +post-ops[" + ep->text + "]";
    // Which activations are reordered per run (none between blocked neighbours).
    if (src_.reordered() || dst_.reordered())
      impl_ += std::string(" reorders[") + (src_.reordered() ? "src" : "") +
               (src_.reordered() && dst_.reordered() ? "," : "") +
               (dst_.reordered() ? "dst" : "") + "]";
    if (wConst && ownKernel()) {
      // Winograd, the grouped and the pointwise kernels keep their own packed filter;
      // oneDNN's copy would never be read.
    } else if (wConst) {
      // Weights are reordered into the primitive's layout once, here, never in run().
      constWeights_ = prepackConstant(*wConst, g.weightsPlain, chosenW);
    } else {
      weights_.init(g.weightsPlain, chosenW, /*isInput=*/true, &ws_);
    }
    if (hasBias_) {
      if (bConst) constBias_ = prepackConstant(*bConst, bMd, bMd);
      else bias_ = dnnl::memory(bMd, eng, DNNL_MEMORY_NONE);
    }
    args_.add(DNNL_ARG_SRC, src_.inner());
    if (!(wConst && ownKernel()))
      args_.add(DNNL_ARG_WEIGHTS, wConst ? constWeights_ : weights_.inner());
    if (hasBias_) args_.add(DNNL_ARG_BIAS, bConst ? constBias_ : bias_);
    args_.add(DNNL_ARG_DST, dst_.inner());
    constW_ = wConst != nullptr;
    constB_ = bConst != nullptr;
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun(op_, [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      scratch_.bindBuffers(ws);
      src_.bindBuffers(in[0]->raw(), ws);
      src_.toInner();
      if (!constW_) {
        weights_.bindBuffers(in[1]->raw(), ws);
        weights_.toInner();
      }
      if (hasBias_ && !constB_) bind(bias_, in[2]->raw());
      dst_.bindBuffers(out[0]->raw(), ws);
      if (sumInput_ >= 0) {
        const Tensor* r = in[sumInput_];
        void* inner = dst_.inner().get_data_handle();
        if (residualReorders_) {
          // The residual is stored in another layout than the output: reordering it onto its
          // own bytes would scramble it. --tandem-plan-memory never shares such a pair.
          const char* rb = static_cast<const char*>(r->raw());
          const char* ib = static_cast<const char*>(inner);
          if (rb < ib + dst_.inner().get_desc().get_size() && ib < rb + r->bytes())
            return Status::error(std::string(op_) + ": the residual shares the output's buffer but is stored "
                                 "in another layout (a plan planned in place across a layout "
                                 "change); compile the model again");
          bind(residual_, r->raw());
          residualArgs_.execute(residualReorder_);
        } else if (r->raw() != inner) {
          // Not planned in place: the residual is copied into Y, which the sum then reads.
          std::memcpy(inner, r->raw(), r->bytes());
        }
      }
      if (wino_) {
        wino_->run(static_cast<const float*>(src_.inner().get_data_handle()),
                   static_cast<float*>(dst_.inner().get_data_handle()), winoSum_, winoRelu_,
                   omp_get_max_threads());
      } else if (grouped_) {
        grouped_->run(static_cast<const float*>(src_.inner().get_data_handle()),
                      static_cast<float*>(dst_.inner().get_data_handle()), winoSum_, winoRelu_,
                      omp_get_max_threads());
      } else if (pointwise_) {
        pointwise_->run(static_cast<const float*>(src_.inner().get_data_handle()),
                        static_cast<float*>(dst_.inner().get_data_handle()), winoSum_, winoRelu_,
                        omp_get_max_threads());
      } else {
        args_.execute(prim_);
      }
      dst_.toUser();
      return Status::ok();
    });
  }

 private:
  /// 3x3 stride-1 convolutions with at least 32 input and output channels run as Winograd
  /// F(4x4, 3x3) or F(2x2, 3x3) (runtime/cpu/avx2/Winograd.h, which picks the tile by shape;
  /// `policy` may limit it to F(2x2) or turn Winograd off: tandem --winograd) when oneDNN
  /// chose the 8-channel-blocked layout for both activations (AVX2 machines), the weights and
  /// bias are constant and the post-ops are at most a sum then a ReLU. Measured against oneDNN
  /// 2.6's jit:avx2 direct kernel (1 thread, same run, noisy shared machine): ResNet-18 shapes
  /// at batch 32 1.3-1.5x (64 ch @ 56), 1.5-1.8x (128 @ 28), 1.6-2.2x (256 @ 14), 1.6-2.0x
  /// (512 @ 7); MNIST's 32 -> 64 @ 26 1.14-1.24x (all with F(2x2); F(4x4) takes 0.6-0.9x of
  /// F(2x2)'s time where it is chosen). With 16 channels the transforms eat the gain (0.9x),
  /// hence the 32 floor.
  ///
  /// `forceTile` 2 or 4 (a measured variant, KernelContext::variant) takes that tile wherever
  /// Winograd can run at all, without the 32-channel floor, ignoring `policy`.
  void initWinograd(const ConvGeometry& g, const dnnl::memory::desc& chosenSrc,
                    const dnnl::memory::desc& chosenDst, const Tensor* wConst,
                    const Tensor* bConst, const Epilogue* ep, WinogradPolicy policy,
                    int forceTile) {
    using tag = dnnl::memory::format_tag;
    if (policy == WinogradPolicy::Off && !forceTile) return;
    const auto f32 = dnnl::memory::data_type::f32;
    if (!avx2::available() || g.spatial != 2 || g.group != 1 || !wConst ||
        (hasBias_ && !bConst) || !avx2Epilogue(ep, &winoSum_, &winoRelu_))
      return;
    const dims& w = g.weightsDims;
    const int64_t floor = forceTile ? 8 : 32;
    if (w.size() != 4 || w[2] != 3 || w[3] != 3 || w[0] < floor || w[1] < floor ||
        g.strides != dims{1, 1} || g.dilations != dims{0, 0})
      return;
    if (chosenSrc != dnnl::memory::desc(g.srcDims, f32, tag::nChw8c) ||
        chosenDst != dnnl::memory::desc(g.dstDims, f32, tag::nChw8c))
      return;
    avx2::Conv3x3Shape s;
    s.N = g.srcDims[0];
    s.C = g.srcDims[1];
    s.H = g.srcDims[2];
    s.W = g.srcDims[3];
    s.K = g.dstDims[1];
    s.OH = g.dstDims[2];
    s.OW = g.dstDims[3];
    s.padTop = g.padL[0];
    s.padLeft = g.padL[1];
    auto wino = std::make_unique<avx2::WinogradConv3x3>();
    const int tile = forceTile ? forceTile : policy == WinogradPolicy::Tile2x2 ? 2 : 0;  // 0: by shape
    if (!wino->prepare(s, wConst->data<float>(), bConst ? bConst->data<float>() : nullptr, tile))
      return;
    wino_ = std::move(wino);
    impl_ = wino_->outputTile() == 4 ? "avx2:winograd_4x4_3x3" : "avx2:winograd_2x2_3x3";
  }

  /// Tandem's own kernel `Own` for a variant (grouped-direct, pointwise-gemm): constant weights
  /// and bias, at most a sum then a ReLU after it, and `shapeFn`'s shape and layout; else the
  /// variant's "does not apply" error with the reason.
  template <class Own, class OwnShape, class ShapeFn>
  Status initOwnKernel(const char* variant, const KernelContext& ctx, const ConvGeometry& g,
                       const Tensor* wConst, const Tensor* bConst, const Epilogue* ep,
                       ShapeFn shapeFn, std::unique_ptr<Own>* out) {
    OwnShape s;
    avx2::ChannelLayout layout;
    std::string why;
    if (!wConst || (hasBias_ && !bConst))
      why = "weights or bias not constant";
    else if (!avx2Epilogue(ep, &winoSum_, &winoRelu_))
      why = "post-ops other than a sum then a ReLU";
    else if (shapeFn(ctx, g, &s, &layout, &why)) {
      auto k = std::make_unique<Own>();
      if (k->prepare(s, layout, wConst->data<float>(), bConst ? bConst->data<float>() : nullptr,
                     &why)) {
        *out = std::move(k);
        return Status::ok();
      }
    }
    return Status::error(std::string("Conv: variant ") + variant + " does not apply (" + why + ")");
  }

  /// The "grouped-direct" variant: Tandem's grouped direct kernel instead of a primitive.
  Status initGroupedDirect(const KernelContext& ctx, const ConvGeometry& g, const Tensor* wConst,
                           const Tensor* bConst, const Epilogue* ep) {
    TANDEM_RETURN_IF_ERROR((initOwnKernel<avx2::GroupedConv, avx2::GroupedConvShape>(
        kGroupedDirect, ctx, g, wConst, bConst, ep, groupedDirectShape, &grouped_)));
    impl_ = std::string(grouped_->vectorWidth() == 16 ? "avx512" : "avx2") + ":grouped_conv_direct";
    return Status::ok();
  }

  /// The "pointwise-gemm" variant: the packed GEMM instead of a primitive.
  Status initPointwise(const KernelContext& ctx, const ConvGeometry& g, const Tensor* wConst,
                       const Tensor* bConst, const Epilogue* ep) {
    TANDEM_RETURN_IF_ERROR((initOwnKernel<avx2::PointwiseConv, avx2::PointwiseConvShape>(
        kPointwiseGemm, ctx, g, wConst, bConst, ep, pointwiseShape, &pointwise_)));
    impl_ = std::string("avx2:pointwise_sgemm_packed(") + activationLayoutName() + ")";
    return Status::ok();
  }

  /// A Tandem kernel runs the step (no oneDNN primitive).
  bool ownKernel() const { return wino_ || grouped_ || pointwise_; }

  std::unique_ptr<avx2::WinogradConv3x3> wino_;
  std::unique_ptr<avx2::GroupedConv> grouped_;
  std::unique_ptr<avx2::PointwiseConv> pointwise_;
  bool winoSum_ = false, winoRelu_ = false;  // the epilogue of wino_, grouped_ or pointwise_

  const char* op_ = "Conv";
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  Operand src_, dst_, weights_;
  dnnl::memory constWeights_, constBias_, bias_;
  bool hasBias_ = false, constW_ = false, constB_ = false;
  ExecArgs args_;
  int sumInput_ = -1;
  bool residualReorders_ = false;
  dnnl::memory residual_;
  dnnl::reorder residualReorder_;
  ExecArgs residualArgs_;
};

/// The "plain-matmul" variant's kernel for `ctx` (a Conv step, `ep` its post-ops or null).
Status createPlainMatMulConv(const KernelContext& ctx, const Epilogue* ep,
                             std::unique_ptr<Kernel>* out) {
  ConvGeometry g;
  std::string why;
  if (!convGeometry(ctx, /*transpose=*/false, &g, &why))
    return Status::error(ctx.opType + ": " + why);
  auto k = std::make_unique<PlainMatMulConvKernel>();
  TANDEM_RETURN_IF_ERROR(k->init(ctx, g, ep));
  *out = std::move(k);
  return Status::ok();
}

KernelFactory convFactory(bool transpose) {
  return [transpose](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    return guardDnnl(ctx, [&] {
      if (!transpose && ctx.variant == kPlainMatMul) return createPlainMatMulConv(ctx, nullptr, out);
      if (transpose && ctx.variant == kSubpixelDeconv) return createSubpixelDeconv(ctx, out);
      if (transpose && ctx.variant != "" && ctx.variant != "dnnl")
        return Status::error("ConvTranspose: unknown variant '" + ctx.variant + "'");
      auto k = std::make_unique<ConvKernel>();
      TANDEM_RETURN_IF_ERROR(k->init(ctx, transpose));
      *out = std::move(k);
      return Status::ok();
    });
  };
}

/// True when oneDNN has a Winograd implementation of `g` (no post-ops) on this host.
bool dnnlWinogradApplies(const ConvGeometry& g) {
  try {
    dnnl::memory::desc bMd;
    if (!g.biasDims.empty()) bMd = plainDesc(g.biasDims);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_winograd, anyDesc(g.srcDims),
                                      anyDesc(g.weightsDims), bMd, anyDesc(g.dstDims), g.strides,
                                      g.dilations, g.padL, g.padR);
    dnnl::convolution_forward::primitive_desc pd(d, baseAttr(), cpuEngine());
    return !isReferenceImpl(pd);
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

bool forwardConvGeometry(const KernelContext& ctx, ConvGeometry* g, std::string* why) {
  return convGeometry(ctx, /*transpose=*/false, g, why);
}

bool transposedConvGeometry(const KernelContext& ctx, ConvGeometry* g, std::string* why) {
  return convGeometry(ctx, /*transpose=*/true, g, why);
}

std::vector<std::string> convVariants(const KernelContext& ctx, bool avx2Epilogue) {
  // 2-D 3x3 stride-1 convolutions with constant weights: Tandem's Winograd where initWinograd
  // would take it (nChw8c activations only: AVX2 hosts, or TANDEM_MAX_CPU_ISA=avx2, and at most
  // a sum then a ReLU), oneDNN's where it has one (AVX-512 hosts).
  ConvGeometry g;
  std::string why;
  std::vector<std::string> v = {"dnnl"};
  if (ctx.opType != "Conv" || !convGeometry(ctx, false, &g, &why)) return v;
  const Tensor* wConst = ctx.constInputs.size() > 1 ? ctx.constInputs[1] : nullptr;
  const bool bias = !g.biasDims.empty();
  const Tensor* bConst = ctx.constInputs.size() > 2 ? ctx.constInputs[2] : nullptr;
  const dims& w = g.weightsDims;
  if (g.group == 1 && !isBlocked(ctx, true, 0) && g.srcDims[1] <= kPlainSrcMaxChannels)
    v.push_back(kDnnlPlainSrc);
  {
    avx2::GroupedConvShape s;
    avx2::ChannelLayout layout;
    if (wConst && (!bias || bConst) && avx2Epilogue && groupedDirectShape(ctx, g, &s, &layout, &why))
      v.push_back(kGroupedDirect);
  }
  {
    avx2::PointwiseConvShape s;
    avx2::ChannelLayout layout;
    if (wConst && (!bias || bConst) && avx2Epilogue && pointwiseShape(ctx, g, &s, &layout, &why))
      v.push_back(kPointwiseGemm);
  }
  if (plainMatMulShape(ctx, g, nullptr, &why)) v.push_back(kPlainMatMul);
  if (g.spatial != 2 || g.group != 1 || !wConst || (bias && !bConst) || w.size() != 4 ||
      w[2] != 3 || w[3] != 3 || g.strides != dims{1, 1} || g.dilations != dims{0, 0})
    return v;
  bool tandemWino = avx2::available() && std::string(activationLayoutName()) == "nChw8c" &&
                    avx2Epilogue && w[0] % 8 == 0 && w[1] % 8 == 0;
  for (int i = 0; i < 2; ++i)
    if (g.padL[i] > 2 || g.padR[i] > 2) tandemWino = false;
  if (tandemWino) {
    v.push_back("winograd2x2");
    v.push_back("winograd4x4");
  }
  if (dnnlWinogradApplies(g)) v.push_back(kDnnlWinograd);
  return v;
}

namespace {

std::function<bool(const KernelContext&)> convSupports(bool transpose) {
  return [transpose](const KernelContext& ctx) {
    ConvGeometry g;
    std::string why;
    return convGeometry(ctx, transpose, &g, &why);
  };
}

}  // namespace

Status createConvEpilogue(const KernelContext& anchor, const Epilogue& ep,
                          std::unique_ptr<Kernel>* out, std::string* regressed) {
  return guardDnnl(anchor, [&] {
    if (anchor.variant == kPlainMatMul) return createPlainMatMulConv(anchor, &ep, out);
    auto k = std::make_unique<ConvKernel>();
    TANDEM_RETURN_IF_ERROR(k->init(anchor, /*transpose=*/false, &ep, regressed));
    if (regressed->empty()) *out = std::move(k);
    return Status::ok();
  });
}

void registerDnnlConvKernels(KernelRegistry& r) {
  KernelDef conv = makeDef("Conv", convSupports(false), convFactory(false));
  conv.variants = [](const KernelContext& ctx) { return convVariants(ctx, true); };
  r.add(std::move(conv));
  KernelDef deconv = makeDef("ConvTranspose", convSupports(true), convFactory(true));
  deconv.variants = [](const KernelContext& ctx) {
    std::vector<std::string> v = {"dnnl"};
    std::string why;
    if (subpixelDeconvApplies(ctx, &why)) v.push_back(kSubpixelDeconv);
    return v;
  };
  r.add(std::move(deconv));
}

}  // namespace dnnlcpu
}  // namespace tandem
