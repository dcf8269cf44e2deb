// ConvTranspose variant "subpixel": a transposed convolution of stride s whose kernel size is
// a multiple of s, run as one forward convolution plus a pixel shuffle. Output position o of
// the uncropped result is s * u + r (phase r); it sums x[u - q] * W[s q + r] over q < t = k / s,
// so every phase is a t-tap convolution of x, and the s^2 phases (2-D) are the output channels
// of one convolution with s^2 * OC channels and a t x t kernel, written channels-last into the
// workspace and shuffled into the step's NCHW output, cropped by the pads. oneDNN 2.6 runs a
// deconvolution as its backward-data convolution, which for stride 2 is several times slower
// than its forward kernels: a VAE decoder's 128 -> 64, 8x8 -> 16x16, 4x4 stride-2 ConvTranspose
// took jit:avx512_core 0.41 ms (AMD EPYC Zen 5, 1 thread), its forward Conv counterpart 0.08.
// The tuner times it against oneDNN's deconvolution per step.
#include <algorithm>
#include <cstring>

#include "runtime/cpu/dnnl/DnnlCommon.h"
#include "runtime/cpu/ref/RefCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

/// One spatial dim of the decomposition (a 1-D ConvTranspose's height is the unit dim).
struct PhaseDim {
  int64_t s = 1, t = 1;      // stride, taps per phase (kernel / stride)
  int64_t in = 1, out = 1;   // input and output extents
  int64_t padL = 0;          // output j is position j + padL of the uncropped result
  int64_t u0 = 0, U = 1;     // the convolution computes positions u0 .. u0 + U - 1
  int64_t convPadL = 0, convPadR = 0;
};

struct SubpixelGeometry {
  int64_t N = 0, IC = 0, OC = 0;
  PhaseDim h, w;
  int64_t phases() const { return h.s * w.s; }
};

bool phaseDim(int64_t s, int64_t k, int64_t in, int64_t out, int64_t padL, PhaseDim* d,
              std::string* why) {
  if (k % s != 0) {
    *why = "kernel size not a multiple of the stride";
    return false;
  }
  d->s = s;
  d->t = k / s;
  d->in = in;
  d->out = out;
  d->padL = padL;
  // padL >= 0 (convGeometry refuses a negative start pad) and out >= 1: plain division floors.
  d->u0 = padL / s;
  d->U = (padL + out - 1) / s - d->u0 + 1;
  // Position u reads x[u - (t - 1) + q'] for q' < t: the convolution's left pad is t - 1 - u0,
  // its right pad what makes U outputs.
  d->convPadL = d->t - 1 - d->u0;
  d->convPadR = d->U + d->t - 1 - in - d->convPadL;
  if (d->convPadL < 0 || d->convPadR < 0) {
    *why = "pads crop more than the kernel's overlap";
    return false;
  }
  return true;
}

bool subpixelGeometry(const KernelContext& ctx, SubpixelGeometry* sg, std::string* why) {
  ConvGeometry g;
  if (!transposedConvGeometry(ctx, &g, why)) return false;
  if (g.spatial > 2 || g.group != 1) {
    *why = "not a 1-D or 2-D ungrouped ConvTranspose";
    return false;
  }
  for (int i = 0; i < g.spatial; ++i)
    if (g.dilations[i] != 0) {
      *why = "dilated";
      return false;
    }
  if (ctx.constInputs.size() < 2 || !ctx.constInputs[1] ||
      (inputPresent(ctx, 2) && (ctx.constInputs.size() < 3 || !ctx.constInputs[2]))) {
    *why = "weights or bias not constant";
    return false;
  }
  if (isBlocked(ctx, true, 0) || isBlocked(ctx, false, 0)) {
    *why = "source or destination in the host layout";
    return false;
  }
  const dims& k = g.weightsDims;  // [OC, IC, k...]
  sg->N = g.srcDims[0];
  sg->IC = g.srcDims[1];
  sg->OC = g.dstDims[1];
  const int sp = g.spatial;
  if (sp == 2 && !phaseDim(g.strides[0], k[2], g.srcDims[2], g.dstDims[2], g.padL[0], &sg->h, why))
    return false;
  return phaseDim(g.strides[sp - 1], k[1 + sp], g.srcDims[1 + sp], g.dstDims[1 + sp],
                  g.padL[sp - 1], &sg->w, why);
}

class SubpixelDeconvKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    std::string why;
    if (!subpixelGeometry(ctx, &g_, &why))
      return Status::error(std::string("ConvTranspose: variant ") + kSubpixelDeconv + " does not apply (" + why + ")");
    const int64_t P = g_.phases(), OC = g_.OC, IC = g_.IC;
    const PhaseDim &h = g_.h, &w = g_.w;
    const dims srcDims = {g_.N, IC, h.in, w.in};
    const dims zDims = {g_.N, P * OC, h.U, w.U};
    const dims wDims = {P * OC, IC, h.t, w.t};
    // W' [(rh s_w + rw) OC + oc, ic, qh, qw] = W [ic, oc, s_h (t_h - 1 - qh) + rh,
    // s_w (t_w - 1 - qw) + rw]: the phase's taps, flipped (a correlation over x).
    const Tensor& W = *ctx.constInputs[1];
    const int64_t KH = h.s * h.t, KW = w.s * w.t;
    std::vector<float> wp((size_t)(P * OC * IC * h.t * w.t));
    const float* src = W.data<float>();
    for (int64_t rh = 0; rh < h.s; ++rh)
      for (int64_t rw = 0; rw < w.s; ++rw)
        for (int64_t oc = 0; oc < OC; ++oc)
          for (int64_t ic = 0; ic < IC; ++ic)
            for (int64_t qh = 0; qh < h.t; ++qh)
              for (int64_t qw = 0; qw < w.t; ++qw) {
                const int64_t o = (rh * w.s + rw) * OC + oc;
                const int64_t kh = h.s * (h.t - 1 - qh) + rh, kw = w.s * (w.t - 1 - qw) + rw;
                wp[(size_t)(((o * IC + ic) * h.t + qh) * w.t + qw)] =
                    src[((ic * OC + oc) * KH + kh) * KW + kw];
              }
    dnnl::engine& eng = cpuEngine();
    dnnl::memory::desc bMd;
    std::vector<float> bp;
    if (inputPresent(ctx, 2)) {
      const float* b = ctx.constInputs[2]->data<float>();
      for (int64_t p = 0; p < P; ++p) bp.insert(bp.end(), b, b + OC);
      bMd = plainDesc({P * OC});
    }
    const dims strides = {1, 1}, dil = {0, 0}, padL = {h.convPadL, w.convPadL},
               padR = {h.convPadR, w.convPadR};
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, anyDesc(srcDims),
                                      anyDesc(wDims), bMd, anyDesc(zDims), strides, dil, padL, padR);
    dnnl::convolution_forward::primitive_desc pd(d, baseAttr(), eng);
    if (isReferenceImpl(pd))
      return Status::error(std::string("ConvTranspose: variant ") + kSubpixelDeconv +
                           " does not apply (oneDNN would run " + pd.impl_info_str() + ")");
    prim_ = dnnl::convolution_forward(pd);
    // The source from the step's plain NCHW (or NCW) buffer; the phases written channels-last
    // into the workspace, where the shuffle reads them.
    src_.init(plainDesc(srcDims), pd.src_desc(), /*isInput=*/true, &ws_);
    const dnnl::memory::desc zNhwc(zDims, dnnl::memory::data_type::f32,
                                   dnnl::memory::format_tag::nhwc);
    zOffset_ = ws_.add((size_t)(g_.N * P * OC * h.U * w.U) * sizeof(float));
    z_.init(zNhwc, pd.dst_desc(), /*isInput=*/false, &ws_);
    Tensor wt = Tensor::fromVector<float>({P * OC, IC, h.t, w.t}, wp);
    weights_ = prepackConstant(wt, plainDesc(wDims), pd.weights_desc());
    args_.add(DNNL_ARG_SRC, src_.inner());
    args_.add(DNNL_ARG_WEIGHTS, weights_);
    if (!bp.empty()) {
      Tensor bt = Tensor::fromVector<float>({P * OC}, bp);
      bias_ = prepackConstant(bt, bMd, bMd);
      args_.add(DNNL_ARG_BIAS, bias_);
    }
    args_.add(DNNL_ARG_DST, z_.inner());
    scratch_.init(pd, &ws_, &args_);
    threads_ = std::max(1, ctx.threads);
    setImpl(pd);
    impl_ += " (subpixel: " + std::to_string(P) + " phases as one conv + shuffle)";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("ConvTranspose", [&] {
      char* ws = threadWorkspace(ws_.total());
      scratch_.bindBuffers(ws);
      src_.bindBuffers(in[0]->raw(), ws);
      float* z = reinterpret_cast<float*>(ws + zOffset_);
      z_.bindBuffers(z, ws);
      src_.toInner();
      args_.execute(prim_);
      z_.toUser();
      shuffle(z, out[0]->data<float>());
      return Status::ok();
    });
  }

 private:
  /// y [N, OC, out_h, out_w] from z [N, U_h, U_w, P OC]: y[n, oc, i, j] is phase
  /// (rh, rw) = ((i + padL_h) mod s_h, (j + padL_w) mod s_w) at (u_h, u_w) = those divided.
  void shuffle(const float* z, float* y) const {
    const PhaseDim &h = g_.h, &w = g_.w;
    const int64_t OC = g_.OC, C = g_.phases() * OC, rows = g_.N * h.out;
    std::vector<int64_t> col((size_t)w.out);  // per output column: its offset in a z row
    for (int64_t j = 0; j < w.out; ++j) {
      const int64_t p = j + w.padL;
      col[(size_t)j] = (p / w.s - w.u0) * C + (p % w.s) * OC;
    }
    auto rowsRange = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t n = r / h.out, i = r % h.out, p = i + h.padL;
        const float* zr = z + ((n * h.U + (p / h.s - h.u0)) * w.U) * C + (p % h.s) * w.s * OC;
        for (int64_t oc = 0; oc < OC; ++oc) {
          float* yr = y + ((n * OC + oc) * h.out + i) * w.out;
          const float* zc = zr + oc;
          for (int64_t j = 0; j < w.out; ++j) yr[j] = zc[col[(size_t)j]];
        }
      }
    };
    // Rows per thread: about 32K output elements each.
    ref::parallelRanges(threads_, rows, std::max<int64_t>(1, (int64_t{1} << 15) / (OC * w.out)),
                        rowsRange);
  }

  SubpixelGeometry g_;
  dnnl::primitive prim_;
  dnnl::memory weights_, bias_;
  Operand src_, z_;
  size_t zOffset_ = 0;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  ExecArgs args_;
  int threads_ = 1;
};

}  // namespace

bool subpixelDeconvApplies(const KernelContext& ctx, std::string* why) {
  SubpixelGeometry g;
  return subpixelGeometry(ctx, &g, why);
}

Status createSubpixelDeconv(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  auto k = std::make_unique<SubpixelDeconvKernel>();
  TANDEM_RETURN_IF_ERROR(k->init(ctx));
  *out = std::move(k);
  return Status::ok();
}

}  // namespace dnnlcpu
}  // namespace tandem
