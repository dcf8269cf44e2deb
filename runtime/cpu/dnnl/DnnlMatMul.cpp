// oneDNN Gemm (ONNX Gemm-13) and MatMul (ONNX MatMul-13, numpy batching) for f32, on
// dnnl::matmul.
#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"

#include <omp.h>

namespace tandem {
namespace dnnlcpu {
namespace {

/// Shared matmul kernel: dst = alpha * src x weights (+ beta * dst, where Gemm first fills dst
/// with C broadcast to [M, N]: that is oneDNN's sum post-op, exactly sgemm's beta*C).
class MatMulKernel : public DnnlKernel {
 public:
  /// `srcMd`/`wMd`/`dstMd`: how the caller's buffers are laid out (weights may be strided for
  /// transB). A constant weights tensor is prepacked into the layout the primitive prefers.
  /// `ep`: post-ops of a fused step after Gemm's own sum; when they would make oneDNN fall to
  /// a worse implementation, *regressed is set and the kernel is left unbuilt. `biasConst`: a
  /// constant [1, N] bias row added by the primitive (fused Gemm whose C is a bias row); else
  /// ep->bias, if any (a bias Add the step fused).
  Status init(const char* op, const dnnl::memory::desc& srcMd, const dnnl::memory::desc& wMd,
              const dnnl::memory::desc& dstMd, const Tensor* wConst, float alpha, float beta,
              bool sumPostOp, const Epilogue* ep = nullptr, std::string* regressed = nullptr,
              const Tensor* biasConst = nullptr) {
    op_ = op;
    if (!biasConst && ep) biasConst = ep->bias;
    if (variant_ != "" && variant_ != "dnnl" && variant_ != "avx2")
      return Status::error(std::string(op) + ": unknown variant '" + variant_ + "'");
    if (variant_ != "dnnl" &&
        initAvx2(srcMd, wMd, dstMd, wConst, alpha, beta, sumPostOp, ep, biasConst))
      return Status::ok();
    if (variant_ == "avx2")
      return Status::error(std::string(op) + ": variant avx2 does not apply (needs a row-major A, "
                           "constant weights, alpha 1 and no scale-row post-op)");
    dnnl::engine& eng = cpuEngine();
    auto makeAttr = [&](bool withEpilogue) {
      dnnl::primitive_attr attr = baseAttr();
      if (alpha != 1.f) attr.set_output_scales(0, {alpha});
      dnnl::post_ops po;
      if (sumPostOp) po.append_sum(beta);
      if (withEpilogue) ep->appendTo(&po, (int)dstMd.dims().size());
      if (po.len() > 0) attr.set_post_ops(po);
      return attr;
    };
    dnnl::memory::dims wDims = wMd.dims();
    dnnl::memory::desc wWant = wConst ? anyDesc(wDims) : wMd;
    dnnl::memory::desc biasMd;
    if (biasConst) biasMd = Epilogue::rowDesc(*biasConst, (int)dstMd.dims().size());
    dnnl::matmul::desc d = biasConst ? dnnl::matmul::desc(srcMd, wWant, biasMd, dstMd)
                                     : dnnl::matmul::desc(srcMd, wWant, dstMd);
    dnnl::matmul::primitive_desc pd(d, makeAttr(ep != nullptr), eng);
    if (ep) {
      // The unfused reference keeps the bias: it is part of the descriptor, not a post-op.
      dnnl::matmul::primitive_desc plain(d, makeAttr(false), eng);
      if (implRegresses(plain.impl_info_str(), pd.impl_info_str())) {
        *regressed = std::string("fused dnnl:") + pd.impl_info_str() + " vs unfused dnnl:" +
                     plain.impl_info_str();
        return Status::ok();
      }
      sumInput_ = ep->sumInput;
    }
    prim_ = dnnl::matmul(pd);
    setImpl(pd);
    if (ep) impl_ += " +post-ops[" + ep->text + "]";
    if (biasConst) {
      biasMem_ = prepackConstant(*biasConst, biasMd, biasMd);
      args_.add(DNNL_ARG_BIAS, biasMem_);
    }
    if (ep) {
      // Scale rows: owned copies, at their post-op's index (after Gemm's own sum).
      int index = sumPostOp ? 1 : 0;
      for (const Epilogue::Item& it : ep->items) {
        if (it.scaleRow) {
          dnnl::memory::desc md = Epilogue::rowDesc(*it.scaleRow, (int)dstMd.dims().size());
          rowMems_.push_back(prepackConstant(*it.scaleRow, md, md));
          args_.add(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, rowMems_.back());
        }
        ++index;
      }
    }
    scratch_.init(pd, &ws_, &args_);
    src_ = dnnl::memory(srcMd, eng, DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(dstMd, eng, DNNL_MEMORY_NONE);
    constW_ = wConst != nullptr;
    if (wConst) weights_ = prepackConstant(*wConst, wMd, pd.weights_desc());
    else weights_ = dnnl::memory(wMd, eng, DNNL_MEMORY_NONE);
    args_.add(DNNL_ARG_SRC, src_);
    args_.add(DNNL_ARG_WEIGHTS, weights_);
    args_.add(DNNL_ARG_DST, dst_);
    return Status::ok();
  }

  /// B (input 1), when constant, is prepacked (oneDNN's layout or Sgemm.h's panels) and never
  /// read again. Gemm's C stays read (its fill, or a bias row not prepacked here).
  bool consumesConstant(size_t input) const override { return input == 1 && (avx2_ || constW_); }

  /// KernelContext::variant: "" (heuristic), "dnnl" or "avx2". Call before init().
  void setVariant(const std::string& v) { variant_ = v; }

  /// Gemm's C operand: fill Y with C broadcast to [m, n] before the matmul (C is [], [n],
  /// [1|m, 1|n]).
  void setBroadcastC(int64_t m, int64_t n, int64_t cRows, int64_t cCols) {
    fillC_ = true;
    m_ = m;
    n_ = n;
    cRows_ = cRows;
    cCols_ = cCols;
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun(op_, [&] {
      if (fillC_) fillC(in[2]->data<float>(), out[0]->data<float>());
      if (sumInput_ >= 0 && in[sumInput_]->raw() != out[0]->raw())
        std::memcpy(out[0]->raw(), in[sumInput_]->raw(), in[sumInput_]->bytes());
      if (avx2_) {
        avx2::sgemmParallel(m_, in[0]->data<float>(), packed_.rows(), packed_,
                            out[0]->data<float>(), packed_.cols(), avx2Ep_, omp_get_max_threads());
        for (size_t i = 0; i < tailPrims_.size(); ++i) {
          bind(tailMem_, out[0]->raw());
          tailArgs_.execute(tailPrims_[i]);
        }
        return Status::ok();
      }
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      scratch_.bindBuffers(ws);
      bind(src_, in[0]->raw());
      if (!constW_) bind(weights_, in[1]->raw());
      bind(dst_, out[0]->raw());
      args_.execute(prim_);
      return Status::ok();
    });
  }

 private:
  void fillC(const float* c, float* y) const {
    if (c == y && cRows_ == m_ && cCols_ == n_) return;  // planned in place: already there
    for (int64_t i = 0; i < m_; ++i) {
      const float* row = c + (cRows_ == 1 ? 0 : i) * cCols_;
      float* dst = y + i * n_;
      if (cCols_ == n_) std::memcpy(dst, row, sizeof(float) * n_);
      else std::fill(dst, dst + n_, row[0]);
    }
  }

  /// Our AVX2 GEMM over weights packed once (runtime/cpu/avx2/Sgemm.h) instead of oneDNN 2.6's
  /// gemm:jit, which repacks nothing ahead and ran 10-25% slower on the models' fully
  /// connected layers (M = 32: 784x512, 512x512, 9216x128). Taken for a row-major A (M >= 4:
  /// below that the product is a matrix-vector one, bound by reading B), constant weights (any
  /// N: columns past a multiple of 8 are zero-padded in the packing, e.g. a 10-class output
  /// layer), alpha 1, Gemm's C only as a bias row or with beta 1, and post-ops of at
  /// most a sum then a ReLU. Returns false (oneDNN is built instead) otherwise. The variant
  /// "avx2" (measured against oneDNN at load) also takes M < 4 and other activations after
  /// the product (GPT's tanh-GELU): oneDNN eltwise primitives run them in place over the
  /// output, where oneDNN's own gemm:jit with such a post-op ran 4-8x slower on AVX2.
  bool initAvx2(const dnnl::memory::desc& srcMd, const dnnl::memory::desc& wMd,
                const dnnl::memory::desc& dstMd, const Tensor* wConst, float alpha, float beta,
                bool sumPostOp, const Epilogue* ep, const Tensor* biasConst) {
    bool sum = false, relu = false;
    std::vector<EltwiseStep> tail;
    if (!avx2::available() || !wConst || alpha != 1.f || (sumPostOp && beta != 1.f) ||
        !avx2EpilogueWithTail(ep, &sum, &relu, &tail) || (!tail.empty() && variant_ != "avx2"))
      return false;
    const dnnl::memory::dims sd = srcMd.dims(), wd = wMd.dims(), dd = dstMd.dims();
    if (sd.size() != 2 || wd.size() != 2 || dd.size() != 2) return false;
    const int64_t M = sd[0], K = sd[1], N = wd[1];
    if (M < (variant_ == "avx2" ? 1 : 4) || wd[0] != K || dd[0] != M || dd[1] != N) return false;
    const dnnl_dim_t* ss = srcMd.data.format_desc.blocking.strides;
    const dnnl_dim_t* ws = wMd.data.format_desc.blocking.strides;
    const dnnl_dim_t* ds = dstMd.data.format_desc.blocking.strides;
    if (srcMd.data.format_kind != dnnl_blocked || wMd.data.format_kind != dnnl_blocked ||
        dstMd.data.format_kind != dnnl_blocked || ss[0] != K || ss[1] != 1 || ds[0] != N ||
        ds[1] != 1)
      return false;
    if (!packed_.pack(wConst->data<float>(), K, N, ws[0], ws[1])) return false;
    if (biasConst) {
      bias_.resize(N);
      std::memcpy(bias_.data(), biasConst->raw(), sizeof(float) * N);
      avx2Ep_.bias = bias_.data();
    }
    avx2Ep_.accumulate = sumPostOp || sum;
    avx2Ep_.relu = relu;
    std::string tailImpl;
    if (!tail.empty() && avx2Activations(tail, &activations_)) {
      // Applied on each tile as the GEMM stores it (Activation.h).
      avx2Ep_.activations = activations_.data();
      avx2Ep_.activationCount = (int)activations_.size();
      tailImpl = "avx2";
    } else if (!tail.empty()) {
      dnnl::engine& eng = cpuEngine();
      dnnl::memory::desc md = plainDesc({M, N});
      tailMem_ = dnnl::memory(md, eng, DNNL_MEMORY_NONE);
      for (const EltwiseStep& e : tail) {
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, e.a, md, e.alpha, e.beta);
        dnnl::eltwise_forward::primitive_desc pd(d, baseAttr(), eng);
        tailImpl += std::string(tailImpl.empty() ? "dnnl:" : ",") + pd.impl_info_str();
        tailPrims_.emplace_back(dnnl::eltwise_forward(pd));
      }
      tailArgs_.add(DNNL_ARG_SRC, tailMem_);
      tailArgs_.add(DNNL_ARG_DST, tailMem_);
    }
    if (ep) sumInput_ = ep->sumInput;
    m_ = M;
    avx2_ = true;
    impl_ = "avx2:sgemm_packed";
    if (ep) impl_ += " +post-ops[" + ep->text + "]";
    if (!tailImpl.empty()) impl_ += " (activations: " + tailImpl + ")";
    return true;
  }

  /// The tail as Tandem's AVX2 activations, when each step is one of them (tanh, tanh-GELU,
  /// logistic, swish); false leaves *out empty.
  static bool avx2Activations(const std::vector<EltwiseStep>& tail,
                              std::vector<avx2::ActivationStep>* out) {
    out->clear();
    for (const EltwiseStep& e : tail) {
      avx2::ActivationStep s;
      if (e.a == dnnl::algorithm::eltwise_tanh && e.alpha == 0.f && e.beta == 0.f)
        s.kind = avx2::Activation::Tanh;
      else if (e.a == dnnl::algorithm::eltwise_gelu_tanh)
        s.kind = avx2::Activation::GeluTanh;
      else if (e.a == dnnl::algorithm::eltwise_logistic)
        s.kind = avx2::Activation::Logistic;
      else if (e.a == dnnl::algorithm::eltwise_swish)
        s.kind = avx2::Activation::Swish, s.alpha = e.alpha;
      else
        return out->clear(), false;
      out->push_back(s);
    }
    return true;
  }

  std::string variant_;
  bool avx2_ = false;
  std::vector<avx2::ActivationStep> activations_;
  avx2::PackedB packed_;
  avx2::GemmEpilogue avx2Ep_;
  std::vector<float> bias_;
  // Activations after the AVX2 product (avx2EpilogueWithTail), in place over the output.
  std::vector<dnnl::primitive> tailPrims_;
  dnnl::memory tailMem_;
  ExecArgs tailArgs_;

  const char* op_ = "MatMul";
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  dnnl::memory src_, weights_, dst_, biasMem_;
  std::vector<dnnl::memory> rowMems_;  // binary post-op operands (Epilogue::Item::scaleRow)
  int sumInput_ = -1;
  bool constW_ = false;
  bool fillC_ = false;
  int64_t m_ = 0, n_ = 0, cRows_ = 0, cCols_ = 0;
  ExecArgs args_;
};

// ---- Gemm ----

struct GemmShape {
  int64_t M = 0, K = 0, N = 0;
  bool transA = false, transB = false;
  bool hasC = false;
  int64_t cRows = 1, cCols = 1;
};

bool gemmShape(const KernelContext& ctx, GemmShape* g, std::string* why) {
  if (ctx.inputTypes.size() < 2 || ctx.outputTypes.empty()) {
    *why = "expects inputs A, B";
    return false;
  }
  if (hasEmptyTensor(ctx)) {
    *why = "zero-size tensor";
    return false;
  }
  const Shape& a = ctx.inputTypes[0].shape;
  const Shape& b = ctx.inputTypes[1].shape;
  if (a.size() != 2 || b.size() != 2) {
    *why = "A and B must be 2-D";
    return false;
  }
  g->transA = ctx.attrs->getInt("transA", 0) != 0;
  g->transB = ctx.attrs->getInt("transB", 0) != 0;
  g->M = g->transA ? a[1] : a[0];
  g->K = g->transA ? a[0] : a[1];
  g->N = g->transB ? b[0] : b[1];
  if ((g->transB ? b[1] : b[0]) != g->K) {
    *why = "inner dimensions of A and B differ";
    return false;
  }
  if (ctx.outputTypes[0].shape != Shape{g->M, g->N}) {
    *why = "output shape is not [M, N]";
    return false;
  }
  g->hasC = inputPresent(ctx, 2) && ctx.attrs->getFloat("beta", 1.f) != 0.f;
  if (g->hasC) {
    const Shape& c = ctx.inputTypes[2].shape;
    if (c.size() > 2) {
      *why = "C has rank > 2";
      return false;
    }
    g->cCols = c.empty() ? 1 : c.back();
    g->cRows = c.size() == 2 ? c[0] : 1;
    if ((g->cCols != 1 && g->cCols != g->N) || (g->cRows != 1 && g->cRows != g->M)) {
      *why = "C is not unidirectionally broadcastable to [M, N]";
      return false;
    }
  }
  return true;
}

// Gemm's A as [M, K] and B as [K, N] over the caller's buffers: transposes are strides, not
// copies (A^T is [M, K] with strides {1, M}).
dnnl::memory::desc gemmADesc(const GemmShape& g) {
  return dnnl::memory::desc(dims{g.M, g.K}, dnnl::memory::data_type::f32,
                            g.transA ? dims{1, g.M} : dims{g.K, 1});
}
dnnl::memory::desc gemmBDesc(const GemmShape& g) {
  return dnnl::memory::desc(dims{g.K, g.N}, dnnl::memory::data_type::f32,
                            g.transB ? dims{1, g.K} : dims{g.N, 1});
}

Status createGemm(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  return guardDnnl(ctx, [&] {
    GemmShape g;
    std::string why;
    if (!gemmShape(ctx, &g, &why)) return Status::error("Gemm: " + why);
    const int64_t M = g.M, N = g.N;
    const dnnl::memory::desc srcMd = gemmADesc(g), wMd = gemmBDesc(g);
    dnnl::memory::desc dstMd = plainDesc({M, N});
    const Tensor* bConst = ctx.constInputs.size() > 1 ? ctx.constInputs[1] : nullptr;
    auto k = std::make_unique<MatMulKernel>();
    k->setVariant(ctx.variant);
    const float alpha = ctx.attrs->getFloat("alpha", 1.f);
    const float beta = ctx.attrs->getFloat("beta", 1.f);
    TANDEM_RETURN_IF_ERROR(k->init("Gemm", srcMd, wMd, dstMd, bConst, alpha, beta, g.hasC));
    if (g.hasC) k->setBroadcastC(M, N, g.cRows, g.cCols);
    *out = std::move(k);
    return Status::ok();
  });
}

// ---- MatMul ----

struct MatMulShape {
  dims src, weights, dst;  // same rank, oneDNN batch broadcasting on size-1 dims
};

bool matmulShape(const KernelContext& ctx, MatMulShape* m, std::string* why) {
  if (ctx.inputTypes.size() < 2 || ctx.outputTypes.empty()) {
    *why = "expects inputs A, B";
    return false;
  }
  if (hasEmptyTensor(ctx)) {
    *why = "zero-size tensor";
    return false;
  }
  Shape a = ctx.inputTypes[0].shape, b = ctx.inputTypes[1].shape;
  if (a.empty() || b.empty()) {
    *why = "scalar operand";
    return false;
  }
  // ONNX/numpy: a 1-D A is a row [1, K], a 1-D B a column [K, 1]; the inserted dims are
  // removed from Y, which leaves its dense layout unchanged, so we compute the padded shape.
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  size_t r = std::max(a.size(), b.size());
  if (r > DNNL_MAX_NDIMS) {
    *why = "rank above oneDNN's limit";
    return false;
  }
  a.insert(a.begin(), r - a.size(), 1);
  b.insert(b.begin(), r - b.size(), 1);
  if (a[r - 1] != b[r - 2]) {
    *why = "inner dimensions differ";
    return false;
  }
  Shape y(r);
  for (size_t i = 0; i + 2 < r; ++i) {
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1) {
      *why = "batch dimensions do not broadcast";
      return false;
    }
    y[i] = std::max(a[i], b[i]);
  }
  y[r - 2] = a[r - 2];
  y[r - 1] = b[r - 1];
  if (numElements(y) != numElements(ctx.outputTypes[0].shape)) {
    *why = "output shape disagrees with the operands";
    return false;
  }
  // When B has no batch (weights shared by every row), fold A's batch into M: one large GEMM
  // instead of a batch of small ones.
  bool bShared = true;
  for (size_t i = 0; i + 2 < r; ++i) bShared = bShared && b[i] == 1;
  if (bShared) {
    int64_t rows = numElements(a) / a[r - 1];
    m->src = {rows, a[r - 1]};
    m->weights = {b[r - 2], b[r - 1]};
    m->dst = {rows, b[r - 1]};
  } else {
    m->src = dims(a.begin(), a.end());
    m->weights = dims(b.begin(), b.end());
    m->dst = dims(y.begin(), y.end());
  }
  return true;
}

Status createMatMul(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  return guardDnnl(ctx, [&] {
    MatMulShape m;
    std::string why;
    if (!matmulShape(ctx, &m, &why)) return Status::error("MatMul: " + why);
    const Tensor* bConst = ctx.constInputs.size() > 1 ? ctx.constInputs[1] : nullptr;
    auto k = std::make_unique<MatMulKernel>();
    k->setVariant(ctx.variant);
    TANDEM_RETURN_IF_ERROR(k->init("MatMul", plainDesc(m.src), plainDesc(m.weights),
                                   plainDesc(m.dst), bConst, 1.f, 0.f, false));
    *out = std::move(k);
    return Status::ok();
  });
}

}  // namespace

std::vector<std::string> matmulVariants(const KernelContext& ctx, bool avx2Epilogue) {
  // The checks of MatMulKernel::initAvx2 that need no oneDNN descriptor.
  std::vector<std::string> v = {"dnnl"};
  std::string why;
  const bool bConst = ctx.constInputs.size() > 1 && ctx.constInputs[1];
  if (!avx2::available() || !bConst || !avx2Epilogue) return v;
  if (ctx.opType == "Gemm") {
    GemmShape g;
    if (!gemmShape(ctx, &g, &why) || g.transA || ctx.attrs->getFloat("alpha", 1.f) != 1.f ||
        (g.hasC && ctx.attrs->getFloat("beta", 1.f) != 1.f))
      return v;
  } else if (ctx.opType == "MatMul") {
    MatMulShape m;
    if (!matmulShape(ctx, &m, &why) || m.src.size() != 2) return v;
  } else {
    return v;
  }
  v.push_back("avx2");
  return v;
}

Status createMatMulEpilogue(const KernelContext& ctx, const Epilogue& ep,
                            std::unique_ptr<Kernel>* out, std::string* regressed) {
  return guardDnnl(ctx, [&] {
    auto k = std::make_unique<MatMulKernel>();
    k->setVariant(ctx.variant);
    if (ctx.opType == "MatMul") {
      MatMulShape m;
      std::string why;
      if (!matmulShape(ctx, &m, &why)) return Status::error("MatMul: " + why);
      const Tensor* bConst = ctx.constInputs.size() > 1 ? ctx.constInputs[1] : nullptr;
      TANDEM_RETURN_IF_ERROR(k->init("MatMul", plainDesc(m.src), plainDesc(m.weights),
                                     plainDesc(m.dst), bConst, 1.f, 0.f, false, &ep, regressed));
    } else {
      GemmShape g;
      std::string why;
      if (!gemmShape(ctx, &g, &why)) return Status::error("Gemm: " + why);
      const int64_t M = g.M, N = g.N;
      const dnnl::memory::desc srcMd = gemmADesc(g), wMd = gemmBDesc(g);
      const Tensor* bConst = ctx.constInputs.size() > 1 ? ctx.constInputs[1] : nullptr;
      const float alpha = ctx.attrs->getFloat("alpha", 1.f);
      const float beta = ctx.attrs->getFloat("beta", 1.f);
      // A constant bias row with alpha = beta = 1 is the primitive's bias, leaving the sum free
      // for a residual; any other C stays Gemm's own sum.
      const Tensor* cConst = g.hasC && ctx.constInputs.size() > 2 ? ctx.constInputs[2] : nullptr;
      bool biasRow = cConst && g.cRows == 1 && g.cCols == N && alpha == 1.f && beta == 1.f;
      bool cSum = g.hasC && !biasRow;
      if (cSum && ep.sumInput >= 0) return Status::error("Gemm: C and a residual both need sum");
      TANDEM_RETURN_IF_ERROR(k->init("Gemm", srcMd, wMd, plainDesc({M, N}), bConst, alpha, beta,
                                     cSum, &ep, regressed, biasRow ? cConst : nullptr));
      if (cSum) k->setBroadcastC(M, N, g.cRows, g.cCols);
    }
    if (regressed->empty()) *out = std::move(k);
    return Status::ok();
  });
}

void registerDnnlMatMulKernels(KernelRegistry& r) {
  auto variants = [](const KernelContext& ctx) { return matmulVariants(ctx, true); };
  KernelDef gemm = makeDef(
      "Gemm",
      [](const KernelContext& ctx) {
        GemmShape g;
        std::string why;
        return gemmShape(ctx, &g, &why);
      },
      createGemm);
  gemm.variants = variants;
  r.add(std::move(gemm));
  KernelDef matmul = makeDef(
      "MatMul",
      [](const KernelContext& ctx) {
        MatMulShape m;
        std::string why;
        return matmulShape(ctx, &m, &why);
      },
      createMatMul);
  matmul.variants = variants;
  r.add(std::move(matmul));
}

}  // namespace dnnlcpu
}  // namespace tandem
