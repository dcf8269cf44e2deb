// "Fused" conv-epilogue / gemm-epilogue steps as one oneDNN primitive with post-ops (residual
// Add as `sum`, activations as `eltwise`), or unfused when post-ops would cost the fast kernel;
// "batchnorm-relu" steps as one per-channel affine + ReLU pass, "concat-batchnorm-relu" as
// the same pass over the Concat's inputs, and "groupnorm-silu" as the group norm's affine pass
// with SiLU (DnnlNorm.cpp).
#include <oneapi/dnnl/dnnl_debug.h>

#include <algorithm>
#include <string>

#include "runtime/OpTable.h"
#include "runtime/cpu/dnnl/DnnlCommon.h"
#include "runtime/cpu/ref/Fused.h"

namespace tandem {
namespace dnnlcpu {
namespace {

/// Maps the step's inputs onto the anchor kernel's (X, W, [B], residual at index 3).
class EpilogueKernel : public Kernel {
 public:
  EpilogueKernel(std::unique_ptr<Kernel> inner, std::vector<int64_t> refs)
      : inner_(std::move(inner)), refs_(std::move(refs)), args_(refs_.size()) {}
  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < refs_.size(); ++i) args_[i] = refs_[i] >= 0 ? in[refs_[i]] : nullptr;
    return inner_->run(args_, out);
  }
  std::string implName() const override { return inner_->implName(); }
  /// run() reads a step input only as the anchor inputs mapped to it: consumed where the
  /// anchor consumes each of those (a bias or scale row the post-ops copied is never read).
  bool consumesConstant(size_t input) const override {
    for (size_t i = 0; i < refs_.size(); ++i)
      if (refs_[i] == (int64_t)input && !inner_->consumesConstant(i)) return false;
    return true;
  }

 private:
  std::unique_ptr<Kernel> inner_;
  std::vector<int64_t> refs_;  // per anchor input: step input index or -1
  std::vector<const Tensor*> args_;
  std::mutex mu_;
};

/// Runs a plain-layout kernel (the unfused composite) for a step whose inputs or outputs are
/// blocked: blocked inputs are reordered into owned plain copies first, outputs computed into
/// plain buffers and reordered into the step's blocked outputs.
class PlainLayoutAdapter : public Kernel {
 public:
  Status init(const KernelContext& ctx, std::unique_ptr<Kernel> inner) {
    inner_ = std::move(inner);
    dnnl::engine& eng = cpuEngine();
    auto side = [&](bool input, const std::vector<TensorType>& types, std::vector<Side>* out) {
      for (size_t i = 0; i < types.size(); ++i) {
        Side sd;
        if (types[i].present() && isBlocked(ctx, input, i)) {
          dims d = toDims(types[i].shape);
          sd.blocked = dnnl::memory(channelBlockedDesc(d), eng, DNNL_MEMORY_NONE);
          sd.plainTensor = Tensor::alloc(types[i].dtype, types[i].shape);
          sd.plain = dnnl::memory(plainDesc(d), eng, sd.plainTensor.raw());
          sd.reorder = input ? dnnl::reorder(sd.blocked, sd.plain) : dnnl::reorder(sd.plain, sd.blocked);
          sd.args.add(DNNL_ARG_FROM, input ? sd.blocked : sd.plain);
          sd.args.add(DNNL_ARG_TO, input ? sd.plain : sd.blocked);
          sd.used = true;
        }
        out->push_back(std::move(sd));
      }
    };
    side(true, ctx.inputTypes, &ins_);
    side(false, ctx.outputTypes, &outs_);
    return Status::ok();
  }
  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guardRun("Fused", [&] {
      std::vector<const Tensor*> a(in);
      std::vector<Tensor*> b(out);
      for (size_t i = 0; i < ins_.size() && i < in.size(); ++i)
        if (ins_[i].used && in[i]) {
          bind(ins_[i].blocked, in[i]->raw());
          ins_[i].args.execute(ins_[i].reorder);
          a[i] = &ins_[i].plainTensor;
        }
      for (size_t i = 0; i < outs_.size(); ++i)
        if (outs_[i].used) b[i] = &outs_[i].plainTensor;
      TANDEM_RETURN_IF_ERROR(inner_->run(a, b));
      for (size_t i = 0; i < outs_.size(); ++i)
        if (outs_[i].used) {
          bind(outs_[i].blocked, out[i]->raw());
          outs_[i].args.execute(outs_[i].reorder);
        }
      return Status::ok();
    });
  }
  std::string implName() const override { return inner_->implName() + " (via plain layout)"; }

 private:
  struct Side {
    bool used = false;
    dnnl::memory blocked, plain;
    Tensor plainTensor;
    dnnl::reorder reorder;
    ExecArgs args;
  };
  std::unique_ptr<Kernel> inner_;
  std::vector<Side> ins_, outs_;
  std::mutex mu_;
};

bool anyBlocked(const KernelContext& ctx) {
  for (size_t i = 0; i < ctx.inputTypes.size(); ++i)
    if (isBlocked(ctx, true, i)) return true;
  for (size_t i = 0; i < ctx.outputTypes.size(); ++i)
    if (isBlocked(ctx, false, i)) return true;
  return false;
}

/// The layout of step input `i` as a kernel reading it sees it: "blocked" (the host layout)
/// or "" (plain); "" for an absent input (i < 0).
const char* stepInputLayout(const KernelContext& ctx, int64_t i) {
  return i >= 0 && isBlocked(ctx, true, (size_t)i) ? "blocked" : "";
}

/// The anchor's attributes with the step's activation layouts as the anchor sees them: X's
/// (W and B plain) and Y's, "channels-last" when the group ends in a Transpose to it. Also the
/// BatchNormalization of a batchnorm-relu step and the group norm of a groupnorm-silu one.
AttrMap anchorLayoutAttrs(const KernelContext& ctx, const fused::BodyOp& anchorOp,
                          bool channelsLastOut) {
  AttrMap a = anchorOp.attrs;
  a.set("input_layouts",
        Attr::ofStrings({stepInputLayout(ctx, anchorOp.refs.empty() ? -1 : anchorOp.refs[0]), "", ""}));
  a.set("output_layouts", Attr::ofStrings({channelsLastOut            ? "channels-last"
                                           : isBlocked(ctx, false, 0) ? "blocked"
                                                                      : ""}));
  return a;
}

bool isEpilogueKind(const KernelContext& ctx) {
  std::string k = ctx.attrs->getString("kind", "");
  return k == "conv-epilogue" || k == "gemm-epilogue";
}

Status createFusedEpilogue(const KernelRegistry& registry, const KernelContext& ctx,
                           std::unique_ptr<Kernel>* out) {
  // 1. Decode the body: op 0 is the anchor, every later op one post-op on the running result.
  // 2. Post-ops: for a Gemm/MatMul, an Add of a constant row of the output's last dim right
  //    after the product is the primitive's bias, and a Mul by one a binary_mul post-op; an Add
  //    whose other operand is a step input is the sum (residual as anchor input 3); an
  //    activation maps to its eltwise steps, a gate and the Mul of it (SiLU, HardSwish) to
  //    eltwise_swish or eltwise_hardswish. Anything else: not expressible here.
  // 3. Build the primitive; if oneDNN's implementation regresses against the plain op, run the
  //    group unfused and say why in implName().
  fused::Body body;
  TANDEM_RETURN_IF_ERROR(fused::parseBody(ctx, &body));
  if (body.outputsFrom.size() != 1 || body.outputsFrom[0] != (int64_t)body.ops.size() - 1)
    return Status::error("Fused epilogue: the last body op must be the only output");
  const fused::BodyOp& anchorOp = body.ops[0];
  // A Conv epilogue may end in a Transpose to channels-last (NC... -> N...C): the primitive
  // then writes its destination in nwc / nhwc / ndhwc, which are the transposed bytes.
  size_t postEnd = body.ops.size();
  bool channelsLastOut = false;
  if (anchorOp.type == "Conv" && body.ops.size() >= 2 && body.ops.back().type == "Transpose") {
    const Shape& y = ctx.outputTypes[0].shape;
    std::vector<int64_t> perm = body.ops.back().attrs.getInts("perm");
    std::vector<int64_t> want;
    for (int64_t d = 0; d < (int64_t)y.size(); ++d) want.push_back(d == 0 ? 0 : d == (int64_t)y.size() - 1 ? 1 : d + 1);
    if (perm != want || y.size() < 3 || y.size() > 5 || body.ops.back().refs.size() != 1 ||
        body.ops.back().refs[0] != -2 - (int64_t)(body.ops.size() - 2))
      return Status::error("Fused epilogue: a Transpose ends it only as NC... -> N...C");
    channelsLastOut = true;
    postEnd = body.ops.size() - 1;
  }
  KernelContext anchor = fused::bodyOpContext(ctx, body, 0);
  std::vector<int64_t> refs = anchorOp.refs;
  for (int64_t r : refs)
    if (r < -1) return Status::error("Fused epilogue: anchor reads a body result");
  while (anchor.inputTypes.size() < 3) {
    anchor.inputTypes.push_back(TensorType{});
    anchor.constInputs.push_back(nullptr);
    refs.push_back(-1);
  }
  // The step's activation layouts, as the anchor sees them (X, and the residual below).
  AttrMap anchorAttrs = anchorLayoutAttrs(ctx, anchorOp, channelsLastOut);
  std::vector<std::string> inLayouts = {stepInputLayout(ctx, refs[0]), "", ""};
  anchor.attrs = &anchorAttrs;
  Epilogue ep;
  const bool matmul = anchorOp.type == "Gemm" || anchorOp.type == "MatMul";
  const bool gemmHasC = anchorOp.type == "Gemm" && refs.size() > 2 && refs[2] >= 0;
  for (size_t k = 1; k < postEnd; ++k) {
    const fused::BodyOp& op = body.ops[k];
    const int64_t prev = -2 - (int64_t)(k - 1);
    // A constant row of the output's last dim (passes/Fuse.cpp: a bias row, a per-column
    // scale), or null.
    auto constRow = [&](int64_t other) -> const Tensor* {
      const Tensor* t = other >= 0 && (size_t)other < ctx.constInputs.size() ? ctx.constInputs[other] : nullptr;
      const Shape& y = ctx.outputTypes[0].shape;
      if (!matmul || !t || t->dtype() != DType::F32 || y.empty() || t->shape().empty() ||
          t->shape().size() > y.size() || t->shape().back() != y.back() || t->numel() != y.back())
        return nullptr;
      return t;
    };
    // A gated activation Mul(y, gate(y)) (passes/Fuse.cpp's swishReaders): the gate reads
    // the running result y and the next op multiplies the two; one eltwise post-op.
    if (k + 1 < postEnd && op.refs.size() == 1 && op.refs[0] == prev &&
        isSwishGate(op.type, op.attrs.getFloat("alpha", 0.2f), op.attrs.getFloat("beta", 0.5f))) {
      const fused::BodyOp& mul = body.ops[k + 1];
      const int64_t gate = -2 - (int64_t)k;
      if (mul.type == "Mul" && (mul.refs == std::vector<int64_t>{prev, gate} ||
                                mul.refs == std::vector<int64_t>{gate, prev})) {
        EltwiseStep s{op.type == "Sigmoid" ? dnnl::algorithm::eltwise_swish
                                           : dnnl::algorithm::eltwise_hardswish,
                      1.f, 0.f};
        ep.items.push_back({false, s});
        ep.text += std::string(ep.text.empty() ? "" : "+") + dnnl_alg_kind2str((dnnl_alg_kind_t)s.a);
        ++k;
        continue;
      }
    }
    if ((op.type == "Add" || op.type == "Mul") && op.refs.size() == 2) {
      int64_t other = op.refs[0] == prev ? op.refs[1] : op.refs[1] == prev ? op.refs[0] : -1;
      const Tensor* row = constRow(other);
      if (row && op.type == "Add" && k == 1 && !gemmHasC) {
        ep.bias = row;
        ep.text += std::string(ep.text.empty() ? "" : "+") + "bias";
        continue;
      }
      if (row && op.type == "Mul") {
        Epilogue::Item it;
        it.scaleRow = row;
        ep.items.push_back(it);
        ep.text += std::string(ep.text.empty() ? "" : "+") + "binary_mul";
        continue;
      }
      if (op.type == "Mul") {
        if (anyBlocked(ctx)) return Status::error("Fused epilogue: Mul is no per-column scale");
        return fused::createUnfused(registry, ctx, body, "Mul is no per-column scale", out);
      }
    }
    if (op.type == "Add") {
      if (op.refs.size() != 2 || ep.sumInput >= 0) return Status::error("Fused epilogue: bad Add");
      int64_t other = op.refs[0] == prev ? op.refs[1] : op.refs[1] == prev ? op.refs[0] : -1;
      if (other < 0) return Status::error("Fused epilogue: Add does not read a step input");
      if (ctx.inputTypes[other].shape != body.shapes[0] ||
          ctx.inputTypes[other].dtype != DType::F32) {
        // A bias row (a CUDA gemm-epilogue run here because its GPU is absent) is no oneDNN
        // sum: the group runs op by op, in plain layout as CUDA groups always are.
        if (anyBlocked(ctx)) return Status::error("Fused epilogue: residual type differs from the output");
        return fused::createUnfused(registry, ctx, body, "bias Add is no oneDNN sum", out);
      }
      ep.sumInput = 3;
      anchor.inputTypes.resize(3);
      anchor.constInputs.resize(3);
      refs.resize(3);
      anchor.inputTypes.push_back(ctx.inputTypes[other]);
      anchor.constInputs.push_back(nullptr);
      refs.push_back(other);
      inLayouts.push_back(stepInputLayout(ctx, other));
      ep.items.push_back({true, {}});
      ep.text += std::string(ep.text.empty() ? "" : "+") + "sum";
      continue;
    }
    if (op.refs.empty() || op.refs[0] != prev)
      return Status::error("Fused epilogue: " + op.type + " does not read the previous result");
    KernelContext c = fused::bodyOpContext(ctx, body, k);
    std::vector<EltwiseStep> steps;
    if (!eltwiseSteps(c, &steps)) return Status::error("Fused epilogue: no post-op for " + op.type);
    for (const EltwiseStep& s : steps) {
      ep.items.push_back({false, s});
      ep.text += std::string(ep.text.empty() ? "" : "+") + dnnl_alg_kind2str((dnnl_alg_kind_t)s.a);
    }
  }

  if (channelsLastOut) ep.text += std::string(ep.text.empty() ? "" : "+") + "dst:channels-last";
  anchorAttrs.set("input_layouts", Attr::ofStrings(inLayouts));
  std::unique_ptr<Kernel> inner;
  std::string regressed;
  if (anchorOp.type == "Conv") {
    TANDEM_RETURN_IF_ERROR(createConvEpilogue(anchor, ep, &inner, &regressed));
  } else if (anchorOp.type == "Gemm" || anchorOp.type == "MatMul") {
    TANDEM_RETURN_IF_ERROR(createMatMulEpilogue(anchor, ep, &inner, &regressed));
  } else {
    return Status::error("Fused epilogue: anchor " + anchorOp.type + " is not Conv/Gemm/MatMul");
  }
  if (!regressed.empty()) {
    std::unique_ptr<Kernel> unfused;
    TANDEM_RETURN_IF_ERROR(fused::createUnfused(
        registry, ctx, body, "post-ops regress (" + regressed + ")", &unfused));
    if (!anyBlocked(ctx)) {
      *out = std::move(unfused);
      return Status::ok();
    }
    auto adapter = std::make_unique<PlainLayoutAdapter>();
    TANDEM_RETURN_IF_ERROR(adapter->init(ctx, std::move(unfused)));
    *out = std::move(adapter);
    return Status::ok();
  }
  *out = std::make_unique<EpilogueKernel>(std::move(inner), refs);
  return Status::ok();
}

bool isBatchNormReluKind(const KernelContext& ctx) {
  return ctx.attrs->getString("kind", "") == "batchnorm-relu";
}

// Body: BatchNormalization (op 0) then Relu reading it, the only output.
Status createFusedBatchNormRelu(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  fused::Body body;
  TANDEM_RETURN_IF_ERROR(fused::parseBody(ctx, &body));
  if (body.ops.size() != 2 || body.ops[0].type != "BatchNormalization" ||
      body.ops[1].type != "Relu" || body.ops[1].refs != std::vector<int64_t>{-2} ||
      body.outputsFrom != std::vector<int64_t>{1})
    return Status::error("Fused batchnorm-relu: the body must be BatchNormalization then Relu");
  const fused::BodyOp& bn = body.ops[0];
  for (int64_t r : bn.refs)
    if (r < 0) return Status::error("Fused batchnorm-relu: BatchNormalization lacks an input");
  KernelContext anchor = fused::bodyOpContext(ctx, body, 0);
  const AttrMap attrs = anchorLayoutAttrs(ctx, bn, /*channelsLastOut=*/false);
  anchor.attrs = &attrs;
  std::unique_ptr<Kernel> inner;
  TANDEM_RETURN_IF_ERROR(createBatchNormKernel(anchor, /*relu=*/true, &inner));
  *out = std::make_unique<EpilogueKernel>(std::move(inner), bn.refs);
  return Status::ok();
}

bool isGroupNormSiluKind(const KernelContext& ctx) {
  return ctx.attrs->getString("kind", "") == "groupnorm-silu";
}

// Body: GroupNormalization or InstanceNormalization of step inputs (op 0), Sigmoid of it (op 1),
// Mul of the two (op 2), the only output.
Status createFusedGroupNormSilu(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  fused::Body body;
  TANDEM_RETURN_IF_ERROR(fused::parseBody(ctx, &body));
  const bool shape =
      body.ops.size() == 3 &&
      (body.ops[0].type == "GroupNormalization" || body.ops[0].type == "InstanceNormalization") &&
      body.ops[1].type == "Sigmoid" && body.ops[1].refs == std::vector<int64_t>{-2} &&
      body.ops[2].type == "Mul" &&
      (body.ops[2].refs == std::vector<int64_t>{-2, -3} || body.ops[2].refs == std::vector<int64_t>{-3, -2}) &&
      body.outputsFrom == std::vector<int64_t>{2} && body.ops[0].refs.size() == 3 &&
      std::all_of(body.ops[0].refs.begin(), body.ops[0].refs.end(), [](int64_t r) { return r >= 0; });
  if (!shape)
    return Status::error("Fused groupnorm-silu: the body must be GroupNormalization or "
                         "InstanceNormalization of step inputs, Sigmoid of it, and their Mul");
  const fused::BodyOp& gn = body.ops[0];
  KernelContext anchor = fused::bodyOpContext(ctx, body, 0);
  const AttrMap attrs = anchorLayoutAttrs(ctx, gn, /*channelsLastOut=*/false);
  anchor.attrs = &attrs;
  std::unique_ptr<Kernel> inner;
  TANDEM_RETURN_IF_ERROR(createGroupNormKernel(anchor, /*silu=*/true, &inner));
  *out = std::make_unique<EpilogueKernel>(std::move(inner), gn.refs);
  return Status::ok();
}

bool isConcatBatchNormReluKind(const KernelContext& ctx) {
  return ctx.attrs->getString("kind", "") == "concat-batchnorm-relu";
}

// Body: Concat of step inputs along axis 1 (op 0), BatchNormalization of it (op 1, parameters
// from step inputs), Relu of that (op 2), the only output. Every value in the host layout, or
// every one plain; mixed, the plain kernel runs behind PlainLayoutAdapter.
Status createFusedConcatBatchNormRelu(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
  fused::Body body;
  TANDEM_RETURN_IF_ERROR(fused::parseBody(ctx, &body));
  const char* shape =
      "Fused concat-batchnorm-relu: the body must be Concat (axis 1) of step inputs, "
      "BatchNormalization of it, then Relu";
  if (body.ops.size() != 3 || body.ops[0].type != "Concat" ||
      body.ops[1].type != "BatchNormalization" || body.ops[2].type != "Relu" ||
      body.ops[2].refs != std::vector<int64_t>{-3} || body.ops[1].refs.size() != 5 ||
      body.ops[1].refs[0] != -2 || body.outputsFrom != std::vector<int64_t>{2} ||
      ctx.outputTypes.size() != 1)
    return Status::error(shape);
  const Shape& y = ctx.outputTypes[0].shape;
  int64_t axis;
  if (!normalizeAxis(body.ops[0].attrs.getInt("axis", 0), (int64_t)y.size(), &axis) || axis != 1)
    return Status::error(shape);
  const std::vector<int64_t>& cat = body.ops[0].refs;
  std::vector<int64_t> params(body.ops[1].refs.begin() + 1, body.ops[1].refs.end());
  for (int64_t r : cat)
    if (r < 0) return Status::error(shape);
  for (int64_t r : params)
    if (r < 0) return Status::error(shape);
  if (body.ops[1].attrs.getInt("training_mode", 0) != 0)
    return Status::error("Fused concat-batchnorm-relu: BatchNormalization in training mode");
  const float eps = body.ops[1].attrs.getFloat("epsilon", 1e-5f);
  const bool outBlocked = isBlocked(ctx, false, 0);
  bool uniform = true;
  for (int64_t r : cat) uniform &= isBlocked(ctx, true, (size_t)r) == outBlocked;
  return guardDnnl(ctx, [&] {
    std::unique_ptr<Kernel> k;
    TANDEM_RETURN_IF_ERROR(
        createConcatBatchNormReluKernel(ctx, cat, params, eps, !(uniform && outBlocked), &k));
    if (uniform) {
      *out = std::move(k);
      return Status::ok();
    }
    auto adapter = std::make_unique<PlainLayoutAdapter>();
    TANDEM_RETURN_IF_ERROR(adapter->init(ctx, std::move(k)));
    *out = std::move(adapter);
    return Status::ok();
  });
}

/// The variants of the anchor op (convVariants / matmulVariants). The AVX2 kernels apply a
/// residual sum then a ReLU at most; any other post-op leaves oneDNN alone.
std::vector<std::string> fusedEpilogueVariants(const KernelContext& ctx) {
  fused::Body body;
  if (!isEpilogueKind(ctx) || !fused::parseBody(ctx, &body).isOk() || body.ops.empty())
    return {};
  // A MatMul/Gemm's bias row (a constant Add right after the product, createFusedEpilogue's
  // rule) is the AVX2 kernel's bias; the rest must be [residual Add] [Relu].
  const bool matmul = body.ops[0].type == "Gemm" || body.ops[0].type == "MatMul";
  size_t first = 1;
  if (matmul && body.ops.size() > 1 && body.ops[1].type == "Add") {
    const fused::BodyOp& add = body.ops[1];
    int64_t other = add.refs.size() == 2 ? std::max(add.refs[0], add.refs[1]) : -1;
    const Shape& y = ctx.outputTypes[0].shape;
    bool biasRow = other >= 0 && (size_t)other < ctx.constInputs.size() && ctx.constInputs[other] &&
                   !y.empty() && ctx.inputTypes[other].shape != y &&
                   numElements(ctx.inputTypes[other].shape) == y.back();
    if (biasRow) first = 2;
  }
  std::vector<std::string> types;
  for (size_t k = first; k < body.ops.size(); ++k) types.push_back(body.ops[k].type);
  bool avx2Ep = types.empty() || types == std::vector<std::string>{"Relu"} ||
                types == std::vector<std::string>{"Add"} ||
                types == std::vector<std::string>{"Add", "Relu"};
  // The packed GEMM's variant also runs other activations after the product (as oneDNN
  // eltwise primitives over its output: avx2EpilogueWithTail): anything but a scale row, and a
  // residual only first. Convolutions' AVX2 kernels (Winograd) keep the rule above.
  const size_t adds = (size_t)std::count(types.begin(), types.end(), "Add");
  bool matmulTail = matmul && std::count(types.begin(), types.end(), "Mul") == 0 &&
                    (adds == 0 || (adds == 1 && types[0] == "Add"));
  if (!types.empty() && types[0] == "Add") {
    // Only a residual of the output's type becomes a sum (createFusedEpilogue).
    const fused::BodyOp& add = body.ops[first];
    int64_t other = add.refs.size() == 2 ? std::max(add.refs[0], add.refs[1]) : -1;
    bool residual = other >= 0 && ctx.inputTypes[other].shape == ctx.outputTypes[0].shape;
    avx2Ep = avx2Ep && residual;
    matmulTail = matmulTail && residual;
  }
  KernelContext anchor = fused::bodyOpContext(ctx, body, 0);
  // The activation layouts as createFusedEpilogue gives them to the anchor.
  const AttrMap anchorAttrs =
      anchorLayoutAttrs(ctx, body.ops[0], body.ops.size() >= 2 && body.ops.back().type == "Transpose");
  anchor.attrs = &anchorAttrs;
  if (body.ops[0].type == "Conv") return convVariants(anchor, avx2Ep);
  if (body.ops[0].type == "Gemm" || body.ops[0].type == "MatMul")
    return matmulVariants(anchor, avx2Ep || matmulTail);
  return {};
}

}  // namespace

void registerDnnlFusedKernels(KernelRegistry& r) {
  const KernelRegistry* reg = &r;
  KernelDef d = makeDef("Fused", isEpilogueKind,
                        [reg](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
                          return createFusedEpilogue(*reg, ctx, out);
                        });
  d.dtypesText = "f32 (conv/gemm epilogues)";
  d.variants = fusedEpilogueVariants;
  r.add(std::move(d));
  KernelDef bn = makeDef("Fused", isBatchNormReluKind, [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    return createFusedBatchNormRelu(ctx, out);
  });
  bn.dtypesText = "f32 (batchnorm-relu)";
  r.add(std::move(bn));
  KernelDef cbn = makeDef("Fused", isConcatBatchNormReluKind,
                          [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
                            return createFusedConcatBatchNormRelu(ctx, out);
                          });
  cbn.dtypesText = "f32 (concat-batchnorm-relu)";
  r.add(std::move(cbn));
  KernelDef gns = makeDef("Fused", isGroupNormSiluKind,
                          [](const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
                            return createFusedGroupNormSilu(ctx, out);
                          });
  gns.dtypesText = "f32 (groupnorm-silu)";
  r.add(std::move(gns));
}

}  // namespace dnnlcpu
}  // namespace tandem
