// BatchNormalization (ONNX BatchNormalization-15: inference, Y only, a per-channel affine loop;
// training mode, batch statistics and the running ones; Tandem's BatchNormalizationGrad and
// LayerNormalizationGrad),
// GroupNormalization-21 and InstanceNormalization-6 (a moments pass and an affine pass, in plain
// or the host's activation layout) and oneDNN LayerNormalization (ONNX LayerNormalization-17, with its optional Mean/InvStdDev
// outputs), Softmax and LogSoftmax (ONNX -13, one axis) for f32.
#include <cmath>
#include <string>

#include "runtime/cpu/avx2/ChannelAffine.h"
#include "runtime/cpu/avx2/Rows.h"
#include "runtime/cpu/avx2/Sgemm.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"

namespace tandem {
namespace dnnlcpu {
namespace {

/// A primitive with one plain source and one plain destination of the same dims, plus optional
/// per-channel parameter tensors bound by argument id (scale, shift, mean, variance).
class NormKernel : public DnnlKernel {
 public:
  struct Param {
    int arg;         // DNNL_ARG_*
    size_t input;    // ONNX input index
    dnnl::memory::desc md;
  };

  Status init(const char* op, const dnnl::primitive_desc_base& pd, dnnl::primitive prim,
              const dnnl::memory::desc& dataMd, const std::vector<Param>& params,
              const KernelContext& ctx) {
    op_ = op;
    dnnl::engine& eng = cpuEngine();
    prim_ = std::move(prim);
    setImpl(pd);
    scratch_.init(pd, &ws_, &args_);
    src_ = dnnl::memory(dataMd, eng, DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(dataMd, eng, DNNL_MEMORY_NONE);
    args_.add(DNNL_ARG_SRC, src_);
    args_.add(DNNL_ARG_DST, dst_);
    for (const Param& p : params) {
      const Tensor* c = p.input < ctx.constInputs.size() ? ctx.constInputs[p.input] : nullptr;
      Bound b;
      b.input = p.input;
      b.isConst = c != nullptr;
      // Constant parameters are copied once so run() never touches their inputs.
      b.mem = c ? prepackConstant(*c, p.md, p.md) : dnnl::memory(p.md, eng, DNNL_MEMORY_NONE);
      args_.add(p.arg, b.mem);
      params_.push_back(b);
    }
    return Status::ok();
  }

  /// LayerNormalization statistics: oneDNN writes the mean and the variance of each of the
  /// `count` normalised rows; ONNX wants Mean (output 1) and InvStdDev = 1/sqrt(var + eps)
  /// (output 2), each optional. Requires a forward_training primitive.
  void enableStats(const dnnl::memory::desc& statMd, int64_t count, float eps, bool meanOut,
                   bool invStdOut) {
    dnnl::engine& eng = cpuEngine();
    stats_ = true;
    count_ = count;
    eps_ = eps;
    meanOut_ = meanOut;
    invStdOut_ = invStdOut;
    mean_ = dnnl::memory(statMd, eng, DNNL_MEMORY_NONE);
    var_ = dnnl::memory(statMd, eng, DNNL_MEMORY_NONE);
    if (!meanOut) meanOff_ = ws_.add(statMd.get_size());
    varOff_ = ws_.add(statMd.get_size());
    args_.add(DNNL_ARG_MEAN, mean_);
    args_.add(DNNL_ARG_VARIANCE, var_);
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun(op_, [&] {
      char* ws = ws_.total() ? threadWorkspace(ws_.total()) : nullptr;
      scratch_.bindBuffers(ws);
      bind(src_, in[0]->raw());
      bind(dst_, out[0]->raw());
      for (const Bound& b : params_)
        if (!b.isConst) bind(b.mem, in[b.input]->raw());
      if (stats_) {
        bind(mean_, meanOut_ ? out[1]->raw() : ws + meanOff_);
        bind(var_, ws + varOff_);
      }
      args_.execute(prim_);
      if (stats_ && invStdOut_) {
        const float* var = reinterpret_cast<const float*>(ws + varOff_);
        float* inv = out[2]->data<float>();
        for (int64_t i = 0; i < count_; ++i) inv[i] = 1.f / std::sqrt(var[i] + eps_);
      }
      return Status::ok();
    });
  }

 private:
  struct Bound {
    size_t input = 0;
    bool isConst = false;
    dnnl::memory mem;
  };
  const char* op_ = "Norm";
  dnnl::primitive prim_;
  WorkspaceLayout ws_;
  Scratchpad scratch_;
  dnnl::memory src_, dst_;
  std::vector<Bound> params_;
  bool stats_ = false, meanOut_ = false, invStdOut_ = false;
  int64_t count_ = 0;
  float eps_ = 0.f;
  size_t meanOff_ = 0, varOff_ = 0;
  dnnl::memory mean_, var_;
  ExecArgs args_;
};

template <typename F>
KernelFactory normFactory(F build) {
  return [build](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    return guardDnnl(ctx, [&] {
      auto k = std::make_unique<NormKernel>();
      TANDEM_RETURN_IF_ERROR(build(ctx, k.get()));
      *out = std::move(k);
      return Status::ok();
    });
  };
}

bool sameShapeInOut(const KernelContext& ctx) {
  return !ctx.inputTypes.empty() && !ctx.outputTypes.empty() &&
         ctx.inputTypes[0].shape == ctx.outputTypes[0].shape;
}

// ---- BatchNormalization ----

bool batchNormSupported(const KernelContext& ctx) {
  if (ctx.inputTypes.size() != 5 || !sameShapeInOut(ctx) || hasEmptyTensor(ctx)) return false;
  if (outputRequested(ctx, 1) || outputRequested(ctx, 2)) return false;  // training outputs
  if (ctx.attrs->getInt("training_mode", 0) != 0) return false;
  const Shape& x = ctx.inputTypes[0].shape;
  if (x.size() < 2 || x.size() > 5) return false;
  for (size_t i = 1; i < 5; ++i)
    if (ctx.inputTypes[i].shape != Shape{x[1]}) return false;
  return true;
}

// Training mode (batch statistics; the running statistics as outputs 1 and 2 when asked for):
// f32 throughout, the parameters and the running outputs [C].
bool batchNormTrainingSupported(const KernelContext& ctx) {
  if (ctx.inputTypes.size() != 5 || !sameShapeInOut(ctx) || hasEmptyTensor(ctx)) return false;
  if (ctx.attrs->getInt("training_mode", 0) == 0) return false;
  const Shape& x = ctx.inputTypes[0].shape;
  if (x.size() < 2 || x.size() > 5 || ctx.inputTypes[0].dtype != DType::F32) return false;
  for (size_t i = 1; i < 5; ++i)
    if (ctx.inputTypes[i].shape != Shape{x[1]} || ctx.inputTypes[i].dtype != DType::F32) return false;
  for (size_t i = 1; i < 3; ++i)
    if (outputRequested(ctx, i) &&
        (ctx.outputTypes[i].shape != Shape{x[1]} || ctx.outputTypes[i].dtype != DType::F32))
      return false;
  return true;
}

// BatchNormalizationGrad (autodiff): f32 X, dY and scale, plain (the step's operands are).
bool batchNormGradSupported(const KernelContext& ctx) {
  if (ctx.inputTypes.size() != 3 || ctx.outputTypes.size() != 3 || hasEmptyTensor(ctx)) return false;
  const Shape& x = ctx.inputTypes[0].shape;
  if (x.size() < 2 || ctx.inputTypes[1].shape != x || ctx.inputTypes[2].shape != Shape{x[1]})
    return false;
  for (size_t i = 0; i < 3; ++i)
    if (ctx.inputTypes[i].dtype != DType::F32 || ctx.outputTypes[i].dtype != DType::F32) return false;
  return !isBlocked(ctx, true, 0) && !isBlocked(ctx, true, 1) && !isBlocked(ctx, false, 0);
}

// LayerNormalizationGrad (autodiff): f32 X, dY and Scale of X's dims from axis on, plain.
bool layerNormGradSupported(const KernelContext& ctx) {
  if (ctx.inputTypes.size() != 3 || ctx.outputTypes.size() != 3 || hasEmptyTensor(ctx)) return false;
  const Shape& x = ctx.inputTypes[0].shape;
  const int64_t rank = (int64_t)x.size(), a = ctx.attrs->getInt("axis", -1);
  const int64_t axis = a < 0 ? a + rank : a;
  if (axis < 0 || axis >= rank || ctx.inputTypes[1].shape != x ||
      ctx.inputTypes[2].shape != Shape(x.begin() + axis, x.end()))
    return false;
  for (size_t i = 0; i < 3; ++i)
    if (ctx.inputTypes[i].dtype != DType::F32 || ctx.outputTypes[i].dtype != DType::F32) return false;
  return !isBlocked(ctx, true, 0) && !isBlocked(ctx, true, 1) && !isBlocked(ctx, false, 0);
}

// X [N, C, D...] as [N, C, S], S the product of D... (1 for rank 2).
void channelDims(const Shape& x, int64_t* N, int64_t* C, int64_t* S) {
  *N = x[0];
  *C = x[1];
  *S = 1;
  for (size_t i = 2; i < x.size(); ++i) *S *= x[i];
}

// A kernel K whose init(ctx) sets it up, created under guardDnnl.
template <typename K>
Status createInitialized(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  return guardDnnl(ctx, [&] {
    auto k = std::make_unique<K>();
    TANDEM_RETURN_IF_ERROR(k->init(ctx));
    *out = std::move(k);
    return Status::ok();
  });
}

avx2::ChannelLayout hostChannelLayout() {
  std::string name = activationLayoutName();
  if (name == "nhwc") return avx2::ChannelLayout::ChannelsLast;
  if (name == "nChw16c") return avx2::ChannelLayout::Blocked16;
  return avx2::ChannelLayout::Blocked8;
}

/// Inference BatchNormalization as one per-channel affine pass (runtime/cpu/avx2/ChannelAffine.h),
/// optionally with the ReLU that follows it, reading and writing plain or the host's activation
/// layout. oneDNN's batch norm on plain NCHW is its generic ncsp_bnorm, 10x slower than this
/// loop. Where input and output layouts differ, the affine map runs in the input's layout into
/// the thread workspace and a oneDNN reorder writes the output.
class BatchNormKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx, bool relu) {
    const Shape& x = ctx.inputTypes[0].shape;
    channelDims(x, &N_, &C_, &S_);
    relu_ = relu;
    eps_ = ctx.attrs->getFloat("epsilon", 1e-5f);
    const bool inBlocked = isBlocked(ctx, true, 0), outBlocked = isBlocked(ctx, false, 0);
    layout_ = inBlocked ? hostChannelLayout() : avx2::ChannelLayout::Plain;
    threads_ = ctx.threads;
    scale_.resize(C_);
    shift_.resize(C_);
    constParams_ = true;
    for (size_t i = 1; i < 5; ++i) constParams_ &= ctx.constInputs.size() > i && ctx.constInputs[i];
    if (constParams_)
      foldParams(ctx.constInputs[1]->data<float>(), ctx.constInputs[2]->data<float>(),
                 ctx.constInputs[3]->data<float>(), ctx.constInputs[4]->data<float>());
    // "avx2:channel-affine+relu:nhwc": the loop, its ReLU, and the layout it runs in.
    impl_ = std::string(avx2::available() ? "avx2:" : "scalar:") + "channel-affine" +
            (relu ? "+relu" : "") + ":" +
            (inBlocked ? activationLayoutName() : "nchw");
    if (dst_.init(toDims(x), inBlocked, outBlocked)) impl_ += " reorders[dst]";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("BatchNormalization", [&] {
      if (!constParams_)
        foldParams(in[1]->data<float>(), in[2]->data<float>(), in[3]->data<float>(),
                   in[4]->data<float>());
      float* y = dst_.target(out[0]);
      avx2::channelAffine(layout_, N_, C_, S_, scale_.data(), shift_.data(), relu_,
                          in[0]->data<float>(), y, threads_);
      dst_.finish(y, out[0]);
      return Status::ok();
    });
  }

 private:
  void foldParams(const float* scale, const float* b, const float* mean, const float* var) {
    avx2::foldBatchNorm(C_, scale, b, mean, var, eps_, scale_.data(), shift_.data());
  }

  int64_t N_ = 0, C_ = 0, S_ = 0;
  bool relu_ = false, constParams_ = false;
  float eps_ = 1e-5f;
  int threads_ = 1;
  avx2::ChannelLayout layout_ = avx2::ChannelLayout::Plain;
  std::vector<float> scale_, shift_;
  OutputReorder dst_;
};

/// Concat (channels) -> BatchNormalization -> Relu as avx2::concatChannelAffine: each input is
/// read once and the output written once, where a Concat then a batchnorm-relu step read and
/// write the concatenation twice (DenseNet concatenates every earlier feature map of its block
/// before each layer's pre-activation: ~12% of densenet121's time at batch 32 was that copy).
class ConcatBatchNormReluKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx, std::vector<int64_t> catInputs,
              std::vector<int64_t> params, float eps, bool plain) {
    const Shape& y = ctx.outputTypes[0].shape;
    if (params.size() != 4 || catInputs.empty() || y.size() < 3)
      return Status::error("Fused concat-batchnorm-relu: needs the Concat's inputs and 4 parameters");
    N_ = y[0];
    S_ = 1;
    for (size_t d = 2; d < y.size(); ++d) S_ *= y[d];
    int64_t C = 0;
    for (int64_t i : catInputs) {
      const Shape& x = ctx.inputTypes[i].shape;
      if (ctx.inputTypes[i].dtype != DType::F32 || x.size() != y.size() || x[0] != N_ ||
          !std::equal(x.begin() + 2, x.end(), y.begin() + 2))
        return Status::error("Fused concat-batchnorm-relu: input " + std::to_string(i) +
                             " is not an f32 activation of the output's batch and spatial dims");
      channels_.push_back(x[1]);
      C += x[1];
    }
    if (C != y[1]) return Status::error("Fused concat-batchnorm-relu: the inputs' channels do not sum to C");
    for (int64_t p : params)
      if (ctx.inputTypes[p].shape != Shape{C} || ctx.inputTypes[p].dtype != DType::F32)
        return Status::error("Fused concat-batchnorm-relu: BatchNormalization parameters must be f32 [C]");
    cat_ = std::move(catInputs);
    params_ = std::move(params);
    eps_ = eps;
    layout_ = plain ? avx2::ChannelLayout::Plain : hostChannelLayout();
    threads_ = ctx.threads;
    scale_.resize(C);
    shift_.resize(C);
    constParams_ = true;
    for (int64_t p : params_) constParams_ &= (size_t)p < ctx.constInputs.size() && ctx.constInputs[p];
    if (constParams_) fold(ctx.constInputs);
    impl_ = std::string(avx2::available() ? "avx2:" : "scalar:") + "concat+channel-affine+relu:" +
            (plain ? "nchw" : activationLayoutName());
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("Fused concat-batchnorm-relu", [&] {
      if (!constParams_) fold(in);
      std::vector<const float*> srcs;
      for (int64_t i : cat_) srcs.push_back(in[i]->data<float>());
      avx2::concatChannelAffine(layout_, N_, S_, srcs, channels_, scale_.data(), shift_.data(),
                                /*relu=*/true, out[0]->data<float>(), threads_);
      return Status::ok();
    });
  }

 private:
  void fold(const std::vector<const Tensor*>& t) {
    avx2::foldBatchNorm((int64_t)scale_.size(), t[params_[0]]->data<float>(),
                        t[params_[1]]->data<float>(), t[params_[2]]->data<float>(),
                        t[params_[3]]->data<float>(), eps_, scale_.data(), shift_.data());
  }

  std::vector<int64_t> cat_, params_, channels_;
  int64_t N_ = 0, S_ = 1;
  float eps_ = 1e-5f;
  bool constParams_ = false;
  int threads_ = 1;
  avx2::ChannelLayout layout_ = avx2::ChannelLayout::Plain;
  std::vector<float> scale_, shift_;
};

// ---- LayerNormalization ----

/// oneDNN normalises over the last dimension only, so X is seen as [outer, inner] with inner the
/// product of the normalised dims X.shape[axis:]; Scale and B must then have `inner` elements.
/// Mean and InvStdDev, when requested, have `outer` elements (shape X.shape[:axis] + [1...]).
bool layerNormShape(const KernelContext& ctx, int64_t* outer, int64_t* inner) {
  if (ctx.inputTypes.size() < 2 || !sameShapeInOut(ctx) || hasEmptyTensor(ctx)) return false;
  if (ctx.attrs->getInt("stash_type", 1) != 1) return false;
  const Shape& x = ctx.inputTypes[0].shape;
  int64_t axis;
  if (x.empty() || !normalizeAxis(ctx.attrs->getInt("axis", -1), (int64_t)x.size(), &axis))
    return false;
  *outer = 1;
  *inner = 1;
  for (int64_t i = 0; i < (int64_t)x.size(); ++i) (i < axis ? *outer : *inner) *= x[i];
  if (numElements(ctx.inputTypes[1].shape) != *inner) return false;
  if (inputPresent(ctx, 2) && numElements(ctx.inputTypes[2].shape) != *inner) return false;
  for (size_t i = 1; i <= 2; ++i)
    if (outputRequested(ctx, i) && (ctx.outputTypes[i].dtype != DType::F32 ||
                                    numElements(ctx.outputTypes[i].shape) != *outer))
      return false;
  return true;
}

Status buildLayerNorm(const KernelContext& ctx, NormKernel* k) {
  int64_t outer, inner;
  if (!layerNormShape(ctx, &outer, &inner))
    return Status::error("LayerNormalization: only f32 with full-size Scale/B");
  dnnl::memory::desc data = plainDesc({outer, inner});
  dnnl::memory::desc ch = plainDesc({inner});
  dnnl::memory::desc stat = plainDesc({outer});
  const float eps = ctx.attrs->getFloat("epsilon", 1e-5f);
  const bool hasB = inputPresent(ctx, 2);
  const bool meanOut = outputRequested(ctx, 1), invStdOut = outputRequested(ctx, 2);
  auto flags = dnnl::normalization_flags::use_scale;
  if (hasB) flags = flags | dnnl::normalization_flags::use_shift;
  // Statistics are outputs only of a training-mode primitive; the math is the same.
  const bool stats = meanOut || invStdOut;
  dnnl::layer_normalization_forward::desc d(
      stats ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, data, stat,
      eps, flags);
  dnnl::layer_normalization_forward::primitive_desc pd(d, baseAttr(), cpuEngine());
  std::vector<NormKernel::Param> params = {{DNNL_ARG_SCALE, 1, ch}};
  if (hasB) params.push_back({DNNL_ARG_SHIFT, 2, ch});
  TANDEM_RETURN_IF_ERROR(k->init("LayerNormalization", pd, dnnl::layer_normalization_forward(pd),
                                 data, params, ctx));
  if (stats) k->enableStats(stat, outer, eps, meanOut, invStdOut);
  return Status::ok();
}

// ---- Softmax / LogSoftmax ----

bool softmaxAxis(const KernelContext& ctx, int64_t* axis) {
  if (ctx.inputTypes.size() != 1 || !sameShapeInOut(ctx) || hasEmptyTensor(ctx)) return false;
  const int64_t rank = (int64_t)ctx.inputTypes[0].shape.size();
  if (rank == 0 || rank > DNNL_MAX_NDIMS) return false;
  return normalizeAxis(ctx.attrs->getInt("axis", -1), rank, axis);
}

std::function<Status(const KernelContext&, NormKernel*)> buildSoftmax(bool log) {
  return [log](const KernelContext& ctx, NormKernel* k) {
    int64_t axis;
    if (!softmaxAxis(ctx, &axis)) return Status::error(ctx.opType + ": invalid axis");
    dnnl::memory::desc data = plainDesc(toDims(ctx.inputTypes[0].shape));
    dnnl::softmax_v2_forward::desc d(
        dnnl::prop_kind::forward_inference,
        log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, data, data,
        (int)axis);
    dnnl::softmax_v2_forward::primitive_desc pd(d, baseAttr(), cpuEngine());
    return k->init(log ? "LogSoftmax" : "Softmax", pd, dnnl::softmax_v2_forward(pd), data, {},
                   ctx);
  };
}

// The groups GroupNormalization / InstanceNormalization normalise over, or 0 where the
// kernel below cannot run the instance (then the ref kernel does: other dtypes, bad shapes).
int64_t groupNormGroups(const KernelContext& ctx) {
  if (ctx.inputTypes.size() != 3 || !sameShapeInOut(ctx) || hasEmptyTensor(ctx)) return 0;
  const Shape& x = ctx.inputTypes[0].shape;
  if (x.size() < 2) return 0;
  for (size_t i = 1; i < 3; ++i)
    if (numElements(ctx.inputTypes[i].shape) != x[1]) return 0;
  if (ctx.opType == "InstanceNormalization") return x.size() >= 3 ? x[1] : 0;
  const int64_t g = ctx.attrs->getInt("num_groups", 0);
  return g >= 1 && x[1] % g == 0 ? g : 0;
}

/// BatchNormalizationGrad as avx2::batchNormTrainingGrad: three passes over plain X and dY
/// where the composition of forward ops it replaces took about ten (reductions, broadcast
/// Sub and Mul).
class BatchNormGradKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    const Shape& x = ctx.inputTypes[0].shape;
    channelDims(x, &N_, &C_, &S_);
    eps_ = ctx.attrs->getFloat("epsilon", 1e-5f);
    threads_ = ctx.threads;
    impl_ = std::string(avx2::available() ? "avx2:" : "scalar:") + "batch-norm-grad:nchw";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("BatchNormalizationGrad", [&] {
      std::vector<double> dscale(C_), dbias(C_);
      avx2::batchNormTrainingGrad(N_, C_, S_, in[0]->data<float>(), in[1]->data<float>(),
                                  in[2]->data<float>(), eps_, out[0]->data<float>(),
                                  dscale.data(), dbias.data(), threads_);
      for (int64_t c = 0; c < C_; ++c) {
        out[1]->data<float>()[c] = float(dscale[c]);
        out[2]->data<float>()[c] = float(dbias[c]);
      }
      return Status::ok();
    });
  }

 private:
  int64_t N_ = 0, C_ = 0, S_ = 0;
  float eps_ = 1e-5f;
  int threads_ = 1;
};

/// LayerNormalizationGrad as avx2::layerNormGrad: three passes over each row of X and dY (the
/// statistics, the two sums, dX with the column sums) where the LayerNormalization rule's
/// composition took about fifteen ops (reductions, broadcast Sub and Mul, a Reciprocal, Sqrt).
class LayerNormGradKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    const Shape& x = ctx.inputTypes[0].shape;
    n_ = numElements(ctx.inputTypes[2].shape);
    rows_ = n_ ? numElements(x) / n_ : 0;
    eps_ = ctx.attrs->getFloat("epsilon", 1e-5f);
    threads_ = ctx.threads;
    impl_ = std::string(avx2::available() ? "avx2:" : "scalar:") + "layer-norm-grad";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("LayerNormalizationGrad", [&] {
      dscale_.resize(n_);
      dbias_.resize(n_);
      avx2::layerNormGrad(rows_, n_, in[0]->data<float>(), in[1]->data<float>(), in[2]->data<float>(), eps_,
                          out[0]->data<float>(), dscale_.data(), dbias_.data(), threads_);
      for (int64_t i = 0; i < n_; ++i) {
        out[1]->data<float>()[i] = float(dscale_[i]);
        out[2]->data<float>()[i] = float(dbias_[i]);
      }
      return Status::ok();
    });
  }

 private:
  int64_t rows_ = 0, n_ = 0;
  double eps_ = 1e-5;
  int threads_ = 1;
  std::vector<double> dscale_, dbias_;
};

/// Training-mode BatchNormalization as avx2::batchNormTraining (batch mean and population
/// variance per channel over N and the spatial dims, then one affine pass), reading and writing
/// plain or the host's activation layout, and, when asked for, running_mean' = m * mean + (1 -
/// m) * batch mean and running_var' = m * var + (1 - m) * batch variance (ONNX's formulas, m
/// the momentum). The reference kernel runs the same in f64, three scalar passes.
class BatchNormTrainingKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx) {
    const Shape& x = ctx.inputTypes[0].shape;
    channelDims(x, &N_, &C_, &S_);
    eps_ = ctx.attrs->getFloat("epsilon", 1e-5f);
    momentum_ = ctx.attrs->getFloat("momentum", 0.9f);
    threads_ = ctx.threads;
    const bool inBlocked = isBlocked(ctx, true, 0), outBlocked = isBlocked(ctx, false, 0);
    layout_ = inBlocked ? hostChannelLayout() : avx2::ChannelLayout::Plain;
    impl_ = std::string(avx2::available() ? "avx2:" : "scalar:") + "batch-norm-training:" +
            (inBlocked ? activationLayoutName() : "nchw");
    if (dst_.init(toDims(x), inBlocked, outBlocked)) impl_ += " reorders[dst]";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("BatchNormalization", [&] {
      float* y = dst_.target(out[0]);
      std::vector<double> mean(C_), var(C_);
      avx2::batchNormTraining(layout_, N_, C_, S_, in[1]->data<float>(), in[2]->data<float>(),
                              eps_, in[0]->data<float>(), y, mean.data(), var.data(), threads_);
      dst_.finish(y, out[0]);
      const double m = momentum_;
      for (size_t i = 1; i < 3; ++i) {
        if (out.size() <= i || !out[i]) continue;
        const float* prior = in[2 + i]->data<float>();
        const std::vector<double>& batch = i == 1 ? mean : var;
        float* r = out[i]->data<float>();
        for (int64_t c = 0; c < C_; ++c) r[c] = float(double(prior[c]) * m + batch[c] * (1 - m));
      }
      return Status::ok();
    });
  }

 private:
  int64_t N_ = 0, C_ = 0, S_ = 0;
  float eps_ = 1e-5f, momentum_ = 0.9f;
  int threads_ = 1;
  avx2::ChannelLayout layout_ = avx2::ChannelLayout::Plain;
  OutputReorder dst_;
};
/// GroupNormalization / InstanceNormalization (+ SiLU) as avx2::groupNorm, reading and writing
/// plain or the host's activation layout, so a diffusion U-Net's GroupNorm -> SiLU -> Conv and
/// Conv -> Add -> GroupNorm stay in the convolutions' layout. Where input and output layouts
/// differ, it runs in the input's layout into the thread workspace and a oneDNN reorder writes
/// the output.
class GroupNormKernel : public DnnlKernel {
 public:
  Status init(const KernelContext& ctx, int64_t groups, bool silu) {
    const Shape& x = ctx.inputTypes[0].shape;
    channelDims(x, &N_, &C_, &S_);
    groups_ = groups;
    silu_ = silu;
    eps_ = ctx.attrs->getFloat("epsilon", 1e-5f);
    threads_ = ctx.threads;
    const bool inBlocked = isBlocked(ctx, true, 0), outBlocked = isBlocked(ctx, false, 0);
    layout_ = inBlocked ? hostChannelLayout() : avx2::ChannelLayout::Plain;
    // "avx2:group-norm+silu:nhwc": the loop, its SiLU, and the layout it runs in.
    impl_ = std::string(avx2::available() ? "avx2:" : "scalar:") + "group-norm" +
            (silu ? "+silu" : "") + ":" + (inBlocked ? activationLayoutName() : "nchw");
    if (dst_.init(toDims(x), inBlocked, outBlocked)) impl_ += " reorders[dst]";
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("GroupNormalization", [&] {
      float* y = dst_.target(out[0]);
      avx2::groupNorm(layout_, N_, C_, S_, groups_, in[1]->data<float>(), in[2]->data<float>(),
                      eps_, silu_, in[0]->data<float>(), y, threads_);
      dst_.finish(y, out[0]);
      return Status::ok();
    });
  }

 private:
  int64_t N_ = 0, C_ = 0, S_ = 0, groups_ = 1;
  bool silu_ = false;
  float eps_ = 1e-5f;
  int threads_ = 1;
  avx2::ChannelLayout layout_ = avx2::ChannelLayout::Plain;
  OutputReorder dst_;
};

}  // namespace

Status createBatchNormKernel(const KernelContext& ctx, bool relu, std::unique_ptr<Kernel>* out) {
  if (!batchNormSupported(ctx))
    return Status::error("BatchNormalization: only inference with per-channel [C] parameters");
  return guardDnnl(ctx, [&] {
    auto k = std::make_unique<BatchNormKernel>();
    TANDEM_RETURN_IF_ERROR(k->init(ctx, relu));
    *out = std::move(k);
    return Status::ok();
  });
}

Status createGroupNormKernel(const KernelContext& ctx, bool silu, std::unique_ptr<Kernel>* out) {
  const int64_t groups = groupNormGroups(ctx);
  if (groups == 0)
    return Status::error(ctx.opType + ": needs X [N, C, ...] (InstanceNormalization: rank 3 or more), "
                         "scale and bias of C elements and num_groups dividing C");
  return guardDnnl(ctx, [&] {
    auto k = std::make_unique<GroupNormKernel>();
    TANDEM_RETURN_IF_ERROR(k->init(ctx, groups, silu));
    *out = std::move(k);
    return Status::ok();
  });
}

Status createConcatBatchNormReluKernel(const KernelContext& step,
                                       const std::vector<int64_t>& catInputs,
                                       const std::vector<int64_t>& params, float eps, bool plain,
                                       std::unique_ptr<Kernel>* out) {
  auto k = std::make_unique<ConcatBatchNormReluKernel>();
  TANDEM_RETURN_IF_ERROR(k->init(step, catInputs, params, eps, plain));
  *out = std::move(k);
  return Status::ok();
}

void registerDnnlNormKernels(KernelRegistry& r) {
  r.add(makeDef(
      "BatchNormalization",
      [](const KernelContext& ctx) { return batchNormSupported(ctx) || batchNormTrainingSupported(ctx); },
      [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
        if (!batchNormTrainingSupported(ctx)) return createBatchNormKernel(ctx, /*relu=*/false, out);
        return createInitialized<BatchNormTrainingKernel>(ctx, out);
      }));
  r.add(makeDef("BatchNormalizationGrad", batchNormGradSupported,
                createInitialized<BatchNormGradKernel>));
  r.add(makeDef("LayerNormalizationGrad", layerNormGradSupported,
                createInitialized<LayerNormGradKernel>));
  for (const char* op : {"GroupNormalization", "InstanceNormalization"})
    r.add(makeDef(
        op, [](const KernelContext& ctx) { return groupNormGroups(ctx) > 0; },
        [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
          return createGroupNormKernel(ctx, /*silu=*/false, out);
        }));
  r.add(makeDef(
      "LayerNormalization",
      [](const KernelContext& ctx) {
        int64_t o, i;
        return layerNormShape(ctx, &o, &i);
      },
      normFactory(buildLayerNorm)));
  auto softmaxOk = [](const KernelContext& ctx) {
    int64_t axis;
    return softmaxAxis(ctx, &axis);
  };
  r.add(makeDef("Softmax", softmaxOk, normFactory(buildSoftmax(false))));
  r.add(makeDef("LogSoftmax", softmaxOk, normFactory(buildSoftmax(true))));
}

}  // namespace dnnlcpu
}  // namespace tandem
