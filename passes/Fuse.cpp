// --tandem-fuse: per-device fusion groups (tandem.fused) after placement and transfers: CPU
// Conv/Gemm/MatMul epilogues (residual sum + activations as oneDNN post-ops) and element-wise
// chains run as one loop.
#include <algorithm>
#include <limits>
#include <set>

#include "compiler/OpBuilding.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "compiler/TandemDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "passes/FuseCuda.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"
#include "runtime/OpTable.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMFUSE
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

// Unary activations oneDNN can apply as eltwise post-ops: the op table's kDnnlPostOp rows (the
// mapping the runtime uses is runtime/cpu/dnnl/DnnlEltwise.cpp's; Log and Softplus stay out for
// the accuracy reason noted there).
bool isPostOpActivation(const std::string& type) { return opHas(type, kDnnlPostOp); }

using fusion::isConstant;
using fusion::isF32;
using fusion::isNone;
using fusion::numElementsOf;

// Clip's bounds must be constant scalars (absent is fine): oneDNN fixes them at creation.
bool clipBoundsConstant(mlir::Operation* op) {
  for (unsigned i = 1; i < op->getNumOperands(); ++i) {
    mlir::Value b = op->getOperand(i);
    if (isNone(b)) continue;
    if (!isConstant(b) || numElementsOf(b) != 1) return false;
  }
  return true;
}

// One op of the CPU element-wise loop (runtime/cpu/ref/Fused.cpp): fusion::loopFusible for the
// op table's kCpuLoop rows.
bool loopFusible(mlir::Operation* op) { return fusion::loopFusible(op, kCpuLoop); }

// XLA's IsExpensive for the loop ops: transcendental functions, divisions and square roots
// cost tens of cycles per element, the rest one or two instructions. Only cheap ops (the op
// table's kCheap rows) are computed again in every consumer (duplication); any other op counts
// as expensive.
bool isCheapLoopOp(const std::string& type) { return opHas(type, kCheap); }

// Ops that fold a run of elements into one value or need a whole row before writing any of it.
// They are group roots only, never producers inside a group: a consumer reading them would
// need the finished row, so fusing one as a producer would recompute it per element. The op
// table's kReductionRoot rows.
bool isReductionLike(mlir::Operation* op) { return opHas(onnxOpType(op), kReductionRoot); }

// A gated activation Mul(x, gate(x)) on `x` (isSwishGate: SiLU, HardSwish): the gate and the
// Mul, when they are x's only two readers, the gate's result is read by the Mul alone, both
// keep x's type and lie on `device`; {nullptr, nullptr} otherwise.
std::pair<mlir::Operation*, mlir::Operation*> swishReaders(mlir::Value x, const std::string& device) {
  llvm::SmallVector<mlir::Operation*, 2> users(x.getUsers());
  if (users.size() != 2) return {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    mlir::Operation* gate = users[i];
    mlir::Operation* mul = users[1 - i];
    if (gate->getNumOperands() != 1 || gate->getNumResults() != 1 ||
        !isSwishGate(onnxOpType(gate), floatAttrOr(gate, "alpha", 0.2f),
                     floatAttrOr(gate, "beta", 0.5f)))
      continue;
    mlir::Value s = gate->getResult(0);
    if (!s.hasOneUse() || *s.getUsers().begin() != mul || onnxOpType(mul) != "Mul" ||
        mul->getNumOperands() != 2 || mul->getNumResults() != 1)
      continue;
    bool pair = (mul->getOperand(0) == x && mul->getOperand(1) == s) ||
                (mul->getOperand(0) == s && mul->getOperand(1) == x);
    if (!pair || s.getType() != x.getType() || mul->getResult(0).getType() != x.getType() ||
        deviceOfOp(gate) != device || deviceOfOp(mul) != device)
      continue;
    return {gate, mul};
  }
  return {nullptr, nullptr};
}

// The axes a Reduce* op folds (ReduceSum-13: the axes input, which must be a constant; the
// others: the `axes` attribute; absent: every axis), normalised; false when unknown or when
// the op would be the identity (noop_with_empty_axes).
bool reducedAxes(mlir::Operation* op, int64_t rank, llvm::SmallVector<int64_t>* axes) {
  std::vector<int64_t> raw;
  if (onnxOpType(op) == "ReduceSum") {
    if (op->getNumOperands() > 1 && !isNone(op->getOperand(1))) {
      Tensor t;
      if (!getConstantValue(op->getOperand(1), &t) || t.dtype() != DType::I64) return false;
      for (int64_t i = 0; i < t.numel(); ++i) raw.push_back(t.data<int64_t>()[i]);
    }
    if (raw.empty() && intAttrOr(op, "noop_with_empty_axes", 0)) return false;
  } else if (auto a = op->getAttrOfType<mlir::ArrayAttr>("axes")) {
    for (mlir::Attribute e : a) raw.push_back(llvm::cast<mlir::IntegerAttr>(e).getInt());
  }
  axes->clear();
  if (raw.empty())
    for (int64_t d = 0; d < rank; ++d) axes->push_back(d);
  for (int64_t a : raw) {
    if (a < -rank || a >= rank) return false;
    axes->push_back(a < 0 ? a + rank : a);
  }
  llvm::sort(*axes);
  return std::unique(axes->begin(), axes->end()) == axes->end();
}

// A root of a row group (runtime/cpu/ref/Fused.cpp's row kernel): an f32 reduction
// (ReduceSum/Mean/Max/Min/L2/SumSquare) over the last axes, a Softmax/LogSoftmax over the last axis, or a
// LayerNormalization over the last axis with Scale and B of that axis' length (one result).
// Each output element is then one contiguous run ("row") of X, operand 0, so the element-wise
// producers of X can be computed row by row while the row is reduced.
bool rowRoot(mlir::Operation* op) {
  if (op->getNumResults() != 1 || op->getNumOperands() < 1 || !isF32(op->getOperand(0)) ||
      !isF32(op->getResult(0)))
    return false;
  auto xt = llvm::cast<mlir::RankedTensorType>(op->getOperand(0).getType());
  const int64_t rank = xt.getRank();
  if (rank == 0 || xt.getNumElements() == 0) return false;
  std::string t = onnxOpType(op);
  auto lastAxis = [&](int64_t a) { return a == -1 || a == rank - 1; };
  if (t == "Softmax" || t == "LogSoftmax") return lastAxis(intAttrOr(op, "axis", -1));
  if (t == "LayerNormalization") {
    if (!lastAxis(intAttrOr(op, "axis", -1)) || op->getNumOperands() < 2) return false;
    for (unsigned i = 1; i < op->getNumOperands() && i < 3; ++i) {
      mlir::Value p = op->getOperand(i);
      if (i == 2 && isNone(p)) continue;
      auto pt = llvm::dyn_cast<mlir::RankedTensorType>(p.getType());
      if (!isF32(p) || pt.getRank() != 1 || pt.getDimSize(0) != xt.getDimSize(rank - 1) ||
          p == op->getOperand(0))
        return false;
    }
    return true;
  }
  if (t == "ReduceSum" || t == "ReduceMean" || t == "ReduceMax" || t == "ReduceMin" ||
      t == "ReduceL2" || t == "ReduceSumSquare") {
    llvm::SmallVector<int64_t> axes;
    if (!reducedAxes(op, rank, &axes)) return false;
    for (size_t i = 0; i < axes.size(); ++i)  // a suffix: rank-k, ..., rank-1
      if (axes[i] != rank - (int64_t)axes.size() + (int64_t)i) return false;
    return !axes.empty();
  }
  return false;
}

// Whether `consumer` can take the loop-fusible `producer` into its group: an element-wise op
// of the producer's type (a loop member or root), or a row root reading it as X only.
bool absorbsLoopProducer(mlir::Operation* consumer, mlir::Operation* producer) {
  mlir::Value x = producer->getResult(0);
  if (loopFusible(consumer)) return consumer->getResult(0).getType() == x.getType();
  if (!rowRoot(consumer) || consumer->getOperand(0) != x) return false;
  for (unsigned i = 1; i < consumer->getNumOperands(); ++i)
    if (consumer->getOperand(i) == x) return false;
  return true;
}

// An f32 Transpose of a 3-D to 5-D value with perm (0, 2, ..., r-1, 1): NC... to N...C.
bool isToChannelsLast(mlir::Operation* op) {
  if (onnxOpType(op) != "Transpose" || op->getNumResults() != 1 || !isF32(op->getOperand(0)))
    return false;
  int64_t r = llvm::cast<mlir::RankedTensorType>(op->getOperand(0).getType()).getRank();
  auto perm = op->getAttrOfType<mlir::ArrayAttr>("perm");
  if (r < 3 || r > 5 || !perm || (int64_t)perm.size() != r) return false;
  for (int64_t d = 0; d < r; ++d) {
    auto p = llvm::dyn_cast<mlir::IntegerAttr>(perm[d]);
    int64_t want = d == 0 ? 0 : d == r - 1 ? 1 : d + 1;
    if (!p || p.getInt() != want) return false;
  }
  return true;
}

struct Group {
  std::string kind;
  llvm::SmallVector<mlir::Operation*> members;  // program order; the last is the root
};

class FusePass : public impl::TandemFuseBase<FusePass> {
 public:
  void runOnOperation() override {
    // 1. Steps 2-5 are the CPU backend's rules, for ops on CPU devices (6: cuda); every group
    //    lies on one device, and tandem.copy is never a member, so no group crosses a device
    //    boundary or a transfer.
    // 2. Epilogue groups, forward: a Conv / Gemm / MatMul (f32) absorbs the chain of its single
    //    consumers on the same device while each is a post-op: an Add of a same-typed
    //    non-constant value (the residual, oneDNN `sum`; one per group) or an activation,
    //    a gated one included: Mul(x, Sigmoid(x)) (SiLU) or Mul(x, HardSigmoid(x; 1/6, 1/2))
    //    (HardSwish) whose gate and Mul are x's only readers, one post-op (isSwishGate).
    //    Then an inference BatchNormalization whose only reader is a Relu: kind
    //    `batchnorm-relu` (one per-channel affine + ReLU pass; DenseNet's pre-activation), or
    //    `concat-batchnorm-relu` with the channel Concat it alone reads (DenseNet's blocks).
    //    Then a GroupNormalization / InstanceNormalization whose only readers are a SiLU's
    //    Sigmoid and Mul: kind `groupnorm-silu` (the SiLU in the norm's affine pass).
    // 3. Element-wise groups, consumers first (XLA instruction fusion): a loop-fusible root
    //    absorbs loop-fusible producers of the same type and device. A producer read only
    //    inside the group becomes internal; one also read outside becomes an extra output, if
    //    the group stays convex (no path leaves it and comes back) and its outside readers
    //    come after the root. Before that, duplication (XLA): a cheap loop op whose every
    //    reader would absorb it into its group is copied once per reader, so no group has to
    //    materialise it (duplicateCheapProducers).
    //    Row groups in the same sweep: a reduction over the last axes (ReduceSum/Mean/Max/Min),
    //    Softmax/LogSoftmax or LayerNormalization over the last axis absorbs the loop-fusible
    //    producers of its X the same way (kind `reduction`, `softmax`, `layernorm`, and
    //    `add-layernorm` for the residual sum feeding a LayerNormalization, whose sum is an
    //    output when read outside). A reduction is only ever a root, never a producer in a
    //    group (noteReductionProducers says so where a loop would have taken it).
    // 4. Each group of two or more ops becomes one tandem.fused at the root's position; its
    //    operands are the external inputs, its results the values read outside.
    //    A producer kept out for a reason worth seeing gets `fusion_refused`.
    // 5. Layout: a 4-D or 5-D f32 activation written by a CPU op whose oneDNN kernel can write the
    //    host's activation layout (Conv, a conv-epilogue, Max/Average pool, inference
    //    BatchNormalization, batchnorm-relu and concat-batchnorm-relu, GroupNormalization,
    //    InstanceNormalization and groupnorm-silu, a nearest Resize of the spatial dims, a
    //    channel Concat or Split, a same-shape Add, a per-channel Mul/Add x * s[N, C, 1, 1(, 1)])
    //    and read only by ops of the same device that can read it (a Conv's X, a
    //    conv-epilogue's X or residual, a pool's input, a BatchNormalization's,
    //    GroupNormalization's or InstanceNormalization's X, that Resize's or Split's X, any
    //    input of a channel Concat or a same-shape Add, that Mul/Add's x), stays "blocked"
    //    between them (`result_layouts`; a fixpoint, markLayouts, since the ops that keep
    //    layouts need every input and result in it): reorders happen only
    //    where such a region meets other ops. The runtime picks the layout (nChw8c, nChw16c or
    //    nhwc, as oneDNN's convolution prefers on the host; nCdhw8c, nCdhw16c or ndhwc for 5-D)
    //    and keeps a value plain where that layout would pad its channels.
    // 6. Ops on cuda devices form the CUDA backend's groups (passes/FuseCuda.h: cuBLASLt
    //    epilogues, residual Add + LayerNormalization, element-wise chains), materialised as in 4.
    mlir::ModuleOp module = getOperation();
    mlir::func::FuncOp main = getMainFunc(module);
    if (!main) {
      module.emitError("tandem-fuse: module has no func.func @main");
      return signalPassFailure();
    }
    mlir::Block& body = main.getBody().front();
    std::vector<Group> groups;
    grouped_.clear();

    for (mlir::Operation& op : body)
      if (onCpu(&op)) formEpilogue(&op, &groups);
    for (mlir::Operation& op : body)
      if (onCpu(&op)) formBatchNormRelu(&op, &groups);
    for (mlir::Operation& op : body)
      if (onCpu(&op)) formGroupNormSilu(&op, &groups);
    duplicateCheapProducers(body);
    llvm::SmallVector<mlir::Operation*> ops;
    rank_.clear();
    for (mlir::Operation& op : body) {
      rank_[&op] = (int64_t)ops.size();
      ops.push_back(&op);
    }
    for (mlir::Operation* op : llvm::reverse(ops)) {
      if (!onCpu(op) || grouped_.count(op)) continue;
      if (rowRoot(op)) formRowGroup(op, &groups);
      else if (loopFusible(op)) formElementwise(op, &groups);
    }
    noteReductionProducers(body);
    // CUDA groups (passes/FuseCuda.cpp): the same one-device and convexity guarantees.
    for (CudaFusionGroup& g : formCudaFusionGroups(body, grouped_))
      groups.push_back(Group{g.kind, g.members});

    for (Group& g : groups) materialize(g);
    markLayouts(body);
  }

 private:
  static bool onCpu(mlir::Operation* op) {
    std::string d = deviceOfOp(op);
    return !d.empty() && deviceKindOf(d) == "cpu" && !llvm::isa<CopyOp, ConstantOp, NoneOp>(op);
  }

  void refuse(mlir::Operation* op, const std::string& why) {
    op->setAttr(kFusionRefusedAttr, mlir::StringAttr::get(op->getContext(), why));
  }

  // `op` is a `type` (Add or Mul) of `x` and a constant row of x's last axis.
  static bool constantRow(mlir::Operation* op, const char* type, mlir::Value x) {
    if (onnxOpType(op) != type) return false;
    mlir::Value row = fusion::lastAxisRowOperand(op, x);
    return row && isConstant(row);
  }

  void formEpilogue(mlir::Operation* anchor, std::vector<Group>* groups) {
    std::string type = onnxOpType(anchor);
    if (type != "Conv" && type != "Gemm" && type != "MatMul") return;
    if (anchor->getNumResults() != 1 || !isF32(anchor->getResult(0))) return;
    // Gemm's C is its own sum unless it is a bias row ([N] or [1, N]); a second sum is not
    // offered by oneDNN.
    bool sumFree = true;
    if (type == "Gemm" && anchor->getNumOperands() > 2 && !isNone(anchor->getOperand(2))) {
      auto c = llvm::cast<mlir::RankedTensorType>(anchor->getOperand(2).getType());
      auto y = llvm::cast<mlir::RankedTensorType>(anchor->getResult(0).getType());
      int64_t n = y.getDimSize(1);
      sumFree = (c.getRank() == 1 && c.getDimSize(0) == n) ||
                (c.getRank() == 2 && c.getDimSize(0) == 1 && c.getDimSize(1) == n);
    }
    Group g;
    g.kind = type == "Conv" ? "conv-epilogue" : "gemm-epilogue";
    g.members.push_back(anchor);
    std::string device = deviceOfOp(anchor);
    mlir::Value cur = anchor->getResult(0);
    bool activated = false;
    const bool matmul = type != "Conv";
    while (true) {
      // SiLU / HardSwish as Mul(cur, gate(cur)): one post-op (eltwise_swish / _hardswish).
      auto [gate, mul] = swishReaders(cur, device);
      if (gate) {
        if (grouped_.count(gate) || grouped_.count(mul)) break;
        activated = true;
        g.members.push_back(gate);
        g.members.push_back(mul);
        cur = mul->getResult(0);
        continue;
      }
      if (!cur.hasOneUse()) break;
      mlir::Operation* user = *cur.getUsers().begin();
      std::string ut = onnxOpType(user);
      // Gemm/MatMul only: a constant bias row right after the product is the primitive's bias
      // (added before any post-op), and a Mul by a constant row of the last axis (a per-column
      // scale: ConvNeXt's layer scale) a binary post-op.
      bool bias = matmul && g.members.size() == 1 && fusion::anchorTakesBias(anchor) &&
                  constantRow(user, "Add", cur);
      bool scale = matmul && constantRow(user, "Mul", cur);
      bool candidate = isPostOpActivation(ut) || ut == "Add" || scale;
      if (!candidate || user->getNumResults() != 1 ||
          user->getResult(0).getType() != cur.getType())
        break;
      if (deviceOfOp(user) != device) {
        refuse(user, "on " + deviceOfOp(user) + ", producer on " + device);
        break;
      }
      if (grouped_.count(user)) break;
      if (bias || scale) {
        // Neither uses the sum: a residual may still follow.
      } else if (ut == "Add") {
        if (user->getNumOperands() != 2 || !sumFree) break;
        mlir::Value other = user->getOperand(user->getOperand(0) == cur ? 1 : 0);
        if (other == cur || other.getType() != cur.getType() || isConstant(other)) break;
        if (activated) {
          // oneDNN 2.6 has only reference kernels for a sum after an eltwise post-op (conv
          // jit:avx2 and matmul gemm:jit both fall to ref:any): keep conv + activation fused.
          refuse(user, "sum after an activation (oneDNN has no fast kernel for it)");
          break;
        }
        sumFree = false;
      } else {
        activated = true;
        if (user->getOperand(0) != cur) break;
        if (ut == "Clip" ? !clipBoundsConstant(user) : user->getNumOperands() != 1) break;
      }
      g.members.push_back(user);
      cur = user->getResult(0);
    }
    // A Conv's result moved to channels-last (NC... -> N...C, as ConvNeXt does before its
    // LayerNormalization over channels): the primitive writes its destination in nhwc, which
    // is the transposed tensor, instead of writing NCHW for a Transpose to copy.
    if (!matmul && cur.hasOneUse()) {
      mlir::Operation* user = *cur.getUsers().begin();
      if (isToChannelsLast(user) && deviceOfOp(user) == device && !grouped_.count(user))
        g.members.push_back(user);
    }
    if (g.members.size() < 2) return;
    for (mlir::Operation* m : g.members) grouped_.insert(m);
    groups->push_back(std::move(g));
  }

  // An inference BatchNormalization (f32, per-channel parameters) whose only reader is a Relu
  // on its device: one per-channel affine + ReLU pass (kind `batchnorm-relu`). The BN of a
  // pre-activation block (DenseNet) cannot fold into the Conv after the Relu.
  void formBatchNormRelu(mlir::Operation* bn, std::vector<Group>* groups) {
    if (!isBatchNormInference(bn) || grouped_.count(bn) || !bn->getResult(0).hasOneUse()) return;
    mlir::Operation* user = *bn->getResult(0).getUsers().begin();
    if (onnxOpType(user) != "Relu" || grouped_.count(user) || user->getNumOperands() != 1 ||
        user->getResult(0).getType() != bn->getResult(0).getType())
      return;
    if (deviceOfOp(user) != deviceOfOp(bn)) {
      refuse(user, "on " + deviceOfOp(user) + ", producer on " + deviceOfOp(bn));
      return;
    }
    // A channel Concat read only by this BatchNormalization (DenseNet concatenates its block's
    // feature maps before each layer's pre-activation) joins as `concat-batchnorm-relu`: the
    // affine pass reads the Concat's inputs, and the concatenation is never written.
    mlir::Operation* cat = bn->getOperand(0).getDefiningOp();
    bool withConcat = cat && isChannelConcat(cat) && !grouped_.count(cat) &&
                      cat->getResult(0).hasOneUse() && deviceOfOp(cat) == deviceOfOp(bn);
    Group g{withConcat ? "concat-batchnorm-relu" : "batchnorm-relu", {bn, user}};
    if (withConcat) g.members.insert(g.members.begin(), cat);
    for (mlir::Operation* m : g.members) grouped_.insert(m);
    groups->push_back(std::move(g));
  }

  // A group norm whose result only its SiLU reads, y * Sigmoid(y): one `groupnorm-silu` group,
  // the SiLU computed in the norm's affine pass (runtime/cpu/dnnl/DnnlNorm.cpp) instead of a
  // loop of its own over the whole activation (a diffusion U-Net's every GroupNorm).
  void formGroupNormSilu(mlir::Operation* norm, std::vector<Group>* groups) {
    mlir::Operation *sig = nullptr, *mul = nullptr;
    if (!siluOf(norm, &sig, &mul) || grouped_.count(norm) || grouped_.count(sig) ||
        grouped_.count(mul))
      return;
    Group g{"groupnorm-silu", {norm, sig, mul}};
    for (mlir::Operation* m : g.members) grouped_.insert(m);
    groups->push_back(std::move(g));
  }

 public:
  // The BatchNormalization the CPU kernel runs (runtime/cpu/dnnl/DnnlNorm.cpp): inference, f32
  // X, five operands, the parameters [C]. Also cpuFusesIntoProducer's batchnorm-relu rule.
  // A Concat along the channels of f32 [N, C, H, W] values (runtime/cpu/dnnl/DnnlConcat.cpp
  // copies chunks in the host layout, or meets mixed layouts in plain). Also
  // cpuFusesIntoProducer's concat-batchnorm-relu rule.
  // The activations kept in the host's layout between oneDNN's kernels: 4-D (2-D images) and
  // 5-D (video, volumes: R3D, S3D). 3-D ones (Conv1d chains) stay plain: blocking them was
  // measured slower (PointNet 6.2 -> 10.1 ms).
  static bool isActivationRank(int64_t rank) { return rank == 4 || rank == 5; }

  static bool isChannelConcat(mlir::Operation* op) {
    if (onnxOpType(op) != "Concat" || op->getNumResults() != 1 || !isF32(op->getResult(0)))
      return false;
    auto t = llvm::cast<mlir::RankedTensorType>(op->getResult(0).getType());
    int64_t axis = intAttrOr(op, "axis", 0);
    if (!isActivationRank(t.getRank()) || (axis != 1 && axis != 1 - t.getRank())) return false;
    return llvm::all_of(op->getOperands(), [](mlir::Value v) { return isF32(v); });
  }

  // A GroupNormalization-21 or InstanceNormalization-6 the CPU kernel runs in any activation
  // layout (runtime/cpu/dnnl/DnnlNorm.cpp): f32 X [N, C, ...] of static shape, scale and bias
  // of C elements, num_groups dividing C.
  static bool isGroupNorm(mlir::Operation* op) {
    const std::string t = onnxOpType(op);
    if ((t != "GroupNormalization" && t != "InstanceNormalization") || op->getNumOperands() != 3 ||
        op->getNumResults() != 1 || !isF32(op->getResult(0)) || !isF32(op->getOperand(0)))
      return false;
    auto x = llvm::cast<mlir::RankedTensorType>(op->getResult(0).getType());
    if (x.getRank() < 3) return false;
    const int64_t C = x.getDimSize(1);
    for (unsigned i = 1; i < 3; ++i)
      if (!isF32(op->getOperand(i)) || numElementsOf(op->getOperand(i)) != C) return false;
    if (t == "InstanceNormalization") return true;
    const int64_t g = intAttrOr(op, "num_groups", 0);
    return g >= 1 && C % g == 0;
  }

  // A Resize the CPU kernel runs in any activation layout (runtime/cpu/dnnl/DnnlResize.cpp):
  // nearest, not tf_crop_and_resize, of a 4-D or 5-D f32 activation, N and C unchanged.
  static bool isNearestResize(mlir::Operation* op) {
    if (onnxOpType(op) != "Resize" || op->getNumResults() != 1 || !isF32(op->getResult(0)) ||
        !isF32(op->getOperand(0)))
      return false;
    auto str = [&](const char* name, const char* dflt) {
      auto a = op->getAttrOfType<mlir::StringAttr>(name);
      return a ? a.getValue().str() : std::string(dflt);
    };
    if (str("mode", "nearest") != "nearest" ||
        str("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize")
      return false;
    auto x = llvm::cast<mlir::RankedTensorType>(op->getOperand(0).getType());
    auto y = llvm::cast<mlir::RankedTensorType>(op->getResult(0).getType());
    return isActivationRank(x.getRank()) && x.getDimSize(0) == y.getDimSize(0) &&
           x.getDimSize(1) == y.getDimSize(1);
  }

  // `norm` (isGroupNorm) read only by a SiLU, Mul(y, Sigmoid(y)) in either order, of its type
  // and on its device (swishReaders): that Sigmoid and Mul.
  static bool siluOf(mlir::Operation* norm, mlir::Operation** sig, mlir::Operation** mul) {
    if (!isGroupNorm(norm)) return false;
    std::tie(*sig, *mul) = swishReaders(norm->getResult(0), deviceOfOp(norm));
    return *sig && onnxOpType(*sig) == "Sigmoid";
  }

  static bool isBatchNormInference(mlir::Operation* op) {
    if (onnxOpType(op) != "BatchNormalization" || op->getNumOperands() != 5 ||
        op->getNumResults() != 1 || !isF32(op->getResult(0)) ||
        intAttrOr(op, "training_mode", 0) != 0)
      return false;
    auto x = llvm::cast<mlir::RankedTensorType>(op->getResult(0).getType());
    if (x.getRank() < 2) return false;
    for (unsigned i = 1; i < 5; ++i) {
      auto p = llvm::dyn_cast<mlir::RankedTensorType>(op->getOperand(i).getType());
      if (!p || p.getRank() != 1 || p.getDimSize(0) != x.getDimSize(1)) return false;
    }
    return true;
  }

 private:
  void formElementwise(mlir::Operation* root, std::vector<Group>* groups) {
    llvm::SmallPtrSet<mlir::Operation*, 8> in;
    in.insert(root);
    int64_t minRank = rank_.lookup(root);
    std::string device = deviceOfOp(root);
    mlir::Type type = root->getResult(0).getType();
    llvm::SmallVector<mlir::Operation*> work = {root};
    while (!work.empty()) {
      mlir::Operation* m = work.pop_back_val();
      for (mlir::Value v : m->getOperands()) {
        mlir::Operation* p = v.getDefiningOp();
        if (!p || in.count(p) || grouped_.count(p) || !loopFusible(p) ||
            p->getResult(0).getType() != type || llvm::isa<CopyOp>(p))
          continue;
        if (deviceOfOp(p) != device) {
          refuse(p, "on " + deviceOfOp(p) + ", consumer on " + device);
          continue;
        }
        bool readOutside = llvm::any_of(p->getUsers(), [&](mlir::Operation* u) { return !in.count(u); });
        if (readOutside) {
          in.insert(p);
          if (!convexWith(in, p, root, minRank)) {
            in.erase(p);
            refuseNonConvex(p);
            continue;
          }
          bool late = llvm::all_of(p->getUsers(), [&](mlir::Operation* u) {
            return in.count(u) || rank_.lookup(root) < rank_.lookup(u);
          });
          if (!late) {
            in.erase(p);
            refuse(p, "read outside before the group's root");
            continue;
          }
        } else {
          // Read only inside, yet a path may still leave an earlier member and reach p.
          in.insert(p);
          if (!convexWith(in, p, root, minRank)) {
            in.erase(p);
            refuseNonConvex(p);
            continue;
          }
        }
        minRank = std::min(minRank, rank_.lookup(p));
        work.push_back(p);
      }
    }
    if (in.size() < 2) return;
    Group g;
    g.kind = "elementwise";
    g.members = inProgramOrder(in);
    for (mlir::Operation* m : g.members) grouped_.insert(m);
    groups->push_back(std::move(g));
  }

  // Row groups, consumers first like element-wise ones: a row root absorbs the loop-fusible
  // producers of its X (operand 0; of X's type and the root's device) and theirs, so the row
  // kernel computes them while it reduces each row and X is never written to memory. Scale,
  // bias and axes operands stay inputs. A root alone is no group.
  void formRowGroup(mlir::Operation* root, std::vector<Group>* groups) {
    llvm::SmallPtrSet<mlir::Operation*, 8> in;
    in.insert(root);
    growLoopProducers(root, root->getOperand(0), &in);
    if (in.size() < 2) return;
    Group g;
    std::string t = onnxOpType(root);
    if (t == "LayerNormalization") {
      mlir::Operation* x = root->getOperand(0).getDefiningOp();
      g.kind = x && in.count(x) && onnxOpType(x) == "Add" ? "add-layernorm" : "layernorm";
    } else {
      g.kind = t == "Softmax" || t == "LogSoftmax" ? "softmax" : "reduction";
    }
    g.members = inProgramOrder(in);
    for (mlir::Operation* m : g.members) grouped_.insert(m);
    groups->push_back(std::move(g));
  }

  // formElementwise's producer rules from one seed value: loop-fusible producers of the seed's
  // type on the root's device join while the group stays convex and their outside readers
  // follow the root; a member's operands are followed in turn.
  void growLoopProducers(mlir::Operation* root, mlir::Value seed,
                         llvm::SmallPtrSetImpl<mlir::Operation*>* in) {
    std::string device = deviceOfOp(root);
    mlir::Type type = seed.getType();
    int64_t minRank = rank_.lookup(root);
    for (mlir::Operation* m : *in) minRank = std::min(minRank, rank_.lookup(m));
    llvm::SmallVector<mlir::Value> work = {seed};
    while (!work.empty()) {
      mlir::Operation* p = work.pop_back_val().getDefiningOp();
      if (!p || in->count(p) || grouped_.count(p) || !loopFusible(p) ||
          p->getResult(0).getType() != type || llvm::isa<CopyOp>(p))
        continue;
      if (deviceOfOp(p) != device) {
        refuse(p, "on " + deviceOfOp(p) + ", consumer on " + device);
        continue;
      }
      in->insert(p);
      if (!convexWith(*in, p, root, minRank)) {
        in->erase(p);
        refuseNonConvex(p);
        continue;
      }
      bool late = llvm::all_of(p->getUsers(), [&](mlir::Operation* u) {
        return in->count(u) || rank_.lookup(root) < rank_.lookup(u);
      });
      if (!late) {
        in->erase(p);
        refuse(p, "read outside before the group's root");
        continue;
      }
      minRank = std::min(minRank, rank_.lookup(p));
      for (mlir::Value v : p->getOperands()) work.push_back(v);
    }
  }

  // Incremental convexity for groups grown from `root` towards its producers (every member
  // precedes `root`, which is the last): `in` was convex and `p` has just joined it. A path
  // that leaves the group and comes back, which an earlier check did not rule out, starts or
  // ends at p: (a) member -> outside ops -> p, found by a backward search from p that never
  // goes below the lowest member rank (`minRank`, before p joined), since no member lies
  // there; (b) p -> outside ops -> member, found by a forward search from p's outside readers
  // that never goes past `root`. Ranks are program positions, a topological order of the
  // block, so each search stays inside [lowest member, root]; a chain costs O(1) per member
  // where a search from every member costs O(group) (quadratic for a 200k-op chain). Same
  // answer as a search from all members (fusionGroupIsConvex): a path through p before it
  // joined would already have made the group non-convex.
  //
  // Each search visits at most kConvexSearchBudget outside ops; past that, p is refused as if
  // non-convex (a sound answer: fusing less is always correct). In real models the outside ops
  // between a group's lowest member and its root are a few dozen; in a random DAG they can be
  // the whole graph, and unbounded searches made a 100k-op DAG compile in ~640 s (quadratic).
  // The budget keeps the pass linear: O(budget) per candidate producer.
  static constexpr size_t kConvexSearchBudget = 512;
  enum class Convexity { Convex, NotConvex, SearchTooLong };

  bool convexWith(const llvm::SmallPtrSetImpl<mlir::Operation*>& in, mlir::Operation* p,
                  mlir::Operation* root, int64_t minRank) {
    lastConvexity_ = convexity(in, p, root, minRank);
    return lastConvexity_ == Convexity::Convex;
  }
  // The refusal after convexWith said no, with its reason.
  void refuseNonConvex(mlir::Operation* p) {
    refuse(p, lastConvexity_ == Convexity::SearchTooLong
                  ? "convexity undecided within " + std::to_string(kConvexSearchBudget) +
                        " ops (fusing less is safe)"
                  : std::string("non-convex"));
  }

  Convexity convexity(const llvm::SmallPtrSetImpl<mlir::Operation*>& in, mlir::Operation* p,
                      mlir::Operation* root, int64_t minRank) const {
    mlir::Block* block = root->getBlock();
    const int64_t rootRank = rank_.lookup(root);
    llvm::SmallPtrSet<mlir::Operation*, 32> seen;
    llvm::SmallVector<mlir::Operation*> work;
    // (a) Backward from p through outside producers at or above minRank.
    auto visitBack = [&](mlir::Operation* d) {
      if (d && d->getBlock() == block && !in.count(d) && rank_.lookup(d) > minRank &&
          seen.insert(d).second)
        work.push_back(d);
    };
    for (mlir::Value v : p->getOperands()) visitBack(v.getDefiningOp());
    while (!work.empty()) {
      if (seen.size() > kConvexSearchBudget) return Convexity::SearchTooLong;
      mlir::Operation* x = work.pop_back_val();
      for (mlir::Value v : x->getOperands()) {
        mlir::Operation* d = v.getDefiningOp();
        if (d && in.count(d) && d != p) return Convexity::NotConvex;
        visitBack(d);
      }
    }
    // (b) Forward from p's outside readers that precede the root.
    seen.clear();
    auto visitFwd = [&](mlir::Operation* u) {
      if (u->getBlock() == block && rank_.lookup(u) < rootRank && seen.insert(u).second)
        work.push_back(u);
    };
    for (mlir::Operation* u : p->getUsers())
      if (!in.count(u)) visitFwd(u);
    while (!work.empty()) {
      if (seen.size() > kConvexSearchBudget) return Convexity::SearchTooLong;
      mlir::Operation* x = work.pop_back_val();
      for (mlir::Operation* u : x->getUsers()) {
        if (in.count(u)) return Convexity::NotConvex;
        visitFwd(u);
      }
    }
    return Convexity::Convex;
  }

  // Members in program order (ranks), without a walk over the whole block per group.
  llvm::SmallVector<mlir::Operation*> inProgramOrder(
      const llvm::SmallPtrSetImpl<mlir::Operation*>& in) const {
    llvm::SmallVector<mlir::Operation*> v(in.begin(), in.end());
    llvm::sort(v, [&](mlir::Operation* a, mlir::Operation* b) {
      return rank_.lookup(a) < rank_.lookup(b);
    });
    return v;
  }

  // Duplication, XLA's rule for instruction fusion: a producer read by several fusions is
  // computed again inside each one, instead of being written once and read back by each,
  // when it is cheap (isCheapLoopOp: the copies cost less than the memory round trip).
  // Here: a loop-fusible op whose every reader is on its device and would absorb it into its
  // group (absorbsLoopProducer; not already in an epilogue) gets one copy per reader, each read
  // by that reader alone, so each reader's group takes its copy and the value is never
  // materialised. Visited consumers first, so a chain of cheap ops is copied whole. The copies
  // carry `fusion_duplicated`; an expensive op that qualified otherwise, or one whose copies
  // would read more memory than materialising it, gets `fusion_not_duplicated` and is
  // materialised once as before. Never across devices.
  void duplicateCheapProducers(mlir::Block& body) {
    llvm::SmallVector<mlir::Operation*> candidates;
    // Block order kept here rather than asked of MLIR: each clone inserted below invalidates the
    // block's cached order, and Operation::isBeforeInBlock then renumbers the whole block, so
    // sorting every candidate's readers that way is quadratic in the block (a 100k-op DAG spent
    // half its compile there). An op is (its position, +inf); a clone, inserted right before
    // its reader u, is (u's position, a counter): after earlier clones before u, before u.
    llvm::DenseMap<mlir::Operation*, std::pair<int64_t, int64_t>> order;
    int64_t position = 0, cloneCount = 0;
    for (mlir::Operation& op : body) {
      order[&op] = {position++, std::numeric_limits<int64_t>::max()};
      if (onCpu(&op) && !grouped_.count(&op) && loopFusible(&op)) candidates.push_back(&op);
    }
    for (mlir::Operation* p : llvm::reverse(candidates)) {
      llvm::SmallVector<mlir::Operation*> readers;
      for (mlir::Operation* u : p->getUsers())
        if (!llvm::is_contained(readers, u)) readers.push_back(u);
      if (readers.size() < 2) continue;
      std::string device = deviceOfOp(p);
      bool absorbed = llvm::all_of(readers, [&](mlir::Operation* u) {
        return u->getBlock() == p->getBlock() && onCpu(u) && deviceOfOp(u) == device &&
               !grouped_.count(u) && absorbsLoopProducer(u, p);
      });
      if (!absorbed) continue;
      std::string n = std::to_string(readers.size()) + " readers";
      mlir::MLIRContext* ctx = p->getContext();
      if (!isCheapLoopOp(onnxOpType(p))) {
        p->setAttr(kFusionNotDuplicatedAttr,
                   mlir::StringAttr::get(ctx, onnxOpType(p) + " is expensive (" + n + ")"));
        continue;
      }
      // Memory traffic, in tensors of p's size: materialised, p reads its f full-size operands,
      // writes itself once and is read by k readers (f + 1 + k); copied, each of the k copies
      // reads the f operands (f * k). Unless copies read less, materialise: that bounds a chain of
      // residual sums, whose copies would otherwise pile up in every later reader and read every
      // earlier summand again (quadratic in the chain's length).
      int64_t f = 0;
      llvm::SmallVector<mlir::Value> seen;
      for (mlir::Value v : p->getOperands())
        if (numElementsOf(v) > 1 && !llvm::is_contained(seen, v)) {
          seen.push_back(v);
          ++f;
        }
      const int64_t k = (int64_t)readers.size();
      if (f * k >= f + 1 + k) {
        p->setAttr(kFusionNotDuplicatedAttr,
                   mlir::StringAttr::get(ctx, "copies would read " + std::to_string(f) +
                                                  " operands in each of " + n));
        continue;
      }
      llvm::sort(readers, [&](mlir::Operation* a, mlir::Operation* b) { return order.lookup(a) < order.lookup(b); });
      p->setAttr(kFusionDuplicatedAttr, mlir::StringAttr::get(ctx, "a copy in each of " + n));
      for (mlir::Operation* u : llvm::drop_begin(readers)) {
        mlir::OpBuilder b(u);
        mlir::Operation* copy = b.clone(*p);
        order[copy] = {order.lookup(u).first, cloneCount++};
        u->replaceUsesOfWith(p->getResult(0), copy->getResult(0));
      }
    }
  }

  // A reduction is a group root only. Where a loop op or a row root on the same device reads a
  // reduction's result of its loop type (the one case the loop rules would otherwise take),
  // the reduction gets `fusion_refused` saying so, unless it roots a group of its own.
  void noteReductionProducers(mlir::Block& body) {
    for (mlir::Operation& op : body) {
      if (!onCpu(&op)) continue;
      bool row = rowRoot(&op);
      if (!row && !loopFusible(&op)) continue;
      mlir::Type type = row ? op.getOperand(0).getType() : op.getResult(0).getType();
      llvm::SmallVector<mlir::Value> reads;
      if (row) reads.push_back(op.getOperand(0));
      else reads.append(op.operand_begin(), op.operand_end());
      for (mlir::Value v : reads) {
        mlir::Operation* d = v.getDefiningOp();
        if (!d || v.getType() != type || grouped_.count(d) || !isReductionLike(d) ||
            deviceOfOp(d) != deviceOfOp(&op))
          continue;
        refuse(d, "a reduction fuses only as a group root, not as a producer");
      }
    }
  }

  static bool convex(const llvm::SmallPtrSetImpl<mlir::Operation*>& in) {
    return fusionGroupIsConvex(in);
  }

  void materialize(Group& g) {
    mlir::Operation* root = g.members.back();
    llvm::SmallPtrSet<mlir::Operation*, 8> in(g.members.begin(), g.members.end());
    llvm::SmallVector<mlir::Value> inputs, outputs;
    llvm::SmallVector<mlir::Location> locs;
    for (mlir::Operation* m : g.members) {
      locs.push_back(m->getLoc());
      for (mlir::Value v : m->getOperands()) {
        mlir::Operation* d = v.getDefiningOp();
        if ((d && in.count(d)) || isNone(v) || llvm::is_contained(inputs, v)) continue;
        inputs.push_back(v);
      }
      bool outside = llvm::any_of(m->getUsers(), [&](mlir::Operation* u) { return !in.count(u); });
      if (outside || m == root) outputs.push_back(m->getResult(0));
    }

    mlir::OpBuilder b(root);
    llvm::SmallVector<mlir::Type> inTypes, outTypes;
    for (mlir::Value v : inputs) inTypes.push_back(v.getType());
    for (mlir::Value v : outputs) outTypes.push_back(v.getType());
    auto fused = b.create<FusedOp>(b.getFusedLoc(locs), outTypes, inputs, b.getStringAttr(g.kind));
    // Placement facts are the root's: same device for every member by construction.
    for (const char* a : {kDeviceAttr, kPlacementReasonAttr})
      if (mlir::Attribute v = root->getAttr(a)) fused->setAttr(a, v);
    mlir::Block* block = b.createBlock(&fused.getBody(), {}, inTypes,
                                       llvm::SmallVector<mlir::Location>(inputs.size(), root->getLoc()));
    mlir::IRMapping map;
    for (auto [v, arg] : llvm::zip(inputs, block->getArguments())) map.map(v, arg);
    b.setInsertionPointToStart(block);
    for (mlir::Operation* m : g.members) {
      for (mlir::Value v : m->getOperands())
        if (isNone(v) && !map.contains(v)) map.map(v, b.clone(*v.getDefiningOp())->getResult(0));
      b.clone(*m, map);
    }
    llvm::SmallVector<mlir::Value> yielded;
    for (mlir::Value v : outputs) yielded.push_back(map.lookup(v));
    b.create<YieldOp>(root->getLoc(), yielded);

    for (auto [v, r] : llvm::zip(outputs, fused.getResults()))
      v.replaceUsesWithIf(r, [&](mlir::OpOperand& use) { return !in.count(use.getOwner()); });
    for (mlir::Operation* m : llvm::reverse(g.members)) m->erase();
  }

  // Pools whose oneDNN kernel the runtime uses: plain ONNX attributes, or ceil_mode where the
  // last window only overhangs the end by less than a window (oneDNN's extra right padding, as
  // runtime/cpu/dnnl/DnnlPool.cpp expresses it; GoogLeNet's pools) and padding is not counted.
  static bool isPlainPool(mlir::Operation* op) {
    std::string t = onnxOpType(op);
    if (t == "GlobalAveragePool" || t == "GlobalMaxPool") return true;
    if (t != "MaxPool" && t != "AveragePool") return false;
    auto ceil = op->getAttrOfType<mlir::IntegerAttr>("ceil_mode");
    if (!ceil || ceil.getInt() == 0) return true;
    return ceilPoolFitsOneDnn(op, t);
  }

  static bool ceilPoolFitsOneDnn(mlir::Operation* op, const std::string& t) {
    auto in = llvm::dyn_cast<mlir::RankedTensorType>(op->getOperand(0).getType());
    auto out = llvm::dyn_cast<mlir::RankedTensorType>(op->getResult(0).getType());
    if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape() || !isActivationRank(in.getRank()))
      return false;
    const int64_t sp = in.getRank() - 2;
    if (auto ap = op->getAttrOfType<mlir::StringAttr>("auto_pad"); ap && ap.getValue() != "NOTSET")
      return false;
    if (t == "AveragePool")
      if (auto c = op->getAttrOfType<mlir::IntegerAttr>("count_include_pad"); c && c.getInt() != 0)
        return false;
    auto k = intsAttrOr(op, "kernel_shape", sp, 1), s = intsAttrOr(op, "strides", sp, 1),
         d = intsAttrOr(op, "dilations", sp, 1), pads = intsAttrOr(op, "pads", 2 * sp, 0);
    for (int64_t i = 0; i < sp; ++i) {
      int64_t ext = (k[i] - 1) * d[i] + 1, pl = pads[i], pr = pads[sp + i];
      int64_t need = (out.getDimSize(2 + i) - 1) * s[i] + ext - in.getDimSize(2 + i) - pl;
      if (pl >= ext || std::max(pr, need) >= ext || need < 0) return false;
    }
    return true;
  }

  static bool writesBlocked(mlir::Operation* op) {
    // A conv-epilogue ending in a Transpose writes channels-last, no other layout.
    if (auto f = llvm::dyn_cast<FusedOp>(op)) {
      if (f.getKind() == "batchnorm-relu" || f.getKind() == "concat-batchnorm-relu" ||
          f.getKind() == "groupnorm-silu")
        return true;
      mlir::Operation* last = f.getBody().front().getTerminator()->getOperand(0).getDefiningOp();
      return f.getKind() == "conv-epilogue" && last && onnxOpType(last) != "Transpose";
    }
    std::string t = onnxOpType(op);
    return t == "Conv" || (isPlainPool(op) && t.rfind("Global", 0) != 0) ||
           isBatchNormInference(op) || isGroupNorm(op) || isNearestResize(op) ||
           isChannelConcat(op) || isChannelSplit(op) || isSameShapeAdd(op) ||
           channelBroadcastOperand(op) >= 0;
  }

  // A per-channel scale or shift of a 4-D or 5-D f32 activation x, x * s or x + s (either order)
  // with s [N or 1, C, 1, 1(, 1)]: squeeze-excitation's rescale between a depthwise and a pointwise
  // convolution (EfficientNet, MobileNetV3, RegNet). oneDNN's binary reads and writes x's layout
  // (runtime/cpu/dnnl/DnnlBinary.cpp). The operand index of x, or -1.
  static int channelBroadcastOperand(mlir::Operation* op) {
    const std::string t = onnxOpType(op);
    if ((t != "Mul" && t != "Add") || op->getNumOperands() != 2 || op->getNumResults() != 1 ||
        !isF32(op->getResult(0)))
      return -1;
    auto y = llvm::cast<mlir::RankedTensorType>(op->getResult(0).getType());
    if (!y.hasStaticShape() || !isActivationRank(y.getRank())) return -1;
    for (int i = 0; i < 2; ++i) {
      auto s = llvm::dyn_cast<mlir::RankedTensorType>(op->getOperand(1 - i).getType());
      if (op->getOperand(i).getType() != y || !isF32(op->getOperand(1 - i)) || !s ||
          !s.hasStaticShape() || s.getRank() != y.getRank())
        continue;
      bool perChannel = (s.getDimSize(0) == 1 || s.getDimSize(0) == y.getDimSize(0)) &&
                        s.getDimSize(1) == y.getDimSize(1);
      for (int64_t d = 2; d < s.getRank(); ++d) perChannel &= s.getDimSize(d) == 1;
      if (perChannel) return i;
    }
    return -1;
  }


  // A same-shape Add of two 4-D or 5-D f32 activations (a residual sum outside a conv
  // epilogue: YOLO's C2f bottlenecks). oneDNN's binary runs it in any layout the two share.
  static bool isSameShapeAdd(mlir::Operation* op) {
    if (onnxOpType(op) != "Add" || op->getNumOperands() != 2 || op->getNumResults() != 1 ||
        !isF32(op->getResult(0)))
      return false;
    auto y = llvm::cast<mlir::RankedTensorType>(op->getResult(0).getType());
    return isActivationRank(y.getRank()) && op->getOperand(0).getType() == y &&
           op->getOperand(1).getType() == y;
  }

  // A Split along the channels of a 4-D or 5-D f32 activation (YOLO's C2f, CSP blocks):
  // runtime/cpu/dnnl/DnnlSplit.cpp copies chunks in the host layout.
  static bool isChannelSplit(mlir::Operation* op) {
    if (onnxOpType(op) != "Split" || op->getNumResults() < 1 || !isF32(op->getOperand(0)))
      return false;
    auto x = llvm::cast<mlir::RankedTensorType>(op->getOperand(0).getType());
    int64_t axis = intAttrOr(op, "axis", 0);
    if (!isActivationRank(x.getRank()) || (axis != 1 && axis != 1 - x.getRank())) return false;
    return llvm::all_of(op->getResults(), [](mlir::Value r) { return isF32(r); });
  }

  // Ops that keep their inputs' layout (a group norm, groupnorm-silu, a nearest Resize, a
  // channel Split, a same-shape Add): each reads the host layout only where every result stays
  // in it, and writes it only where every input (keptInputs) has it, so a reorder stays where it
  // was (beside a convolution, or on a Resize's smaller side) instead of moving into the op,
  // which would run in one layout and reorder into the other, and an Add never meets one
  // blocked and one plain operand.
  static bool keepsLayout(mlir::Operation* op) {
    if (auto f = llvm::dyn_cast<FusedOp>(op)) return f.getKind() == "groupnorm-silu";
    return isGroupNorm(op) || isNearestResize(op) || isChannelSplit(op) || isSameShapeAdd(op);
  }

  // The inputs whose layout a keepsLayout op keeps: X (of the group norm, in a groupnorm-silu),
  // both operands of the Add.
  static llvm::SmallVector<mlir::Value, 2> keptInputs(mlir::Operation* op) {
    if (auto f = llvm::dyn_cast<FusedOp>(op)) {
      for (mlir::Operation& m : f.getBody().front())
        if (isGroupNorm(&m))
          if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(m.getOperand(0)))
            return {op->getOperand(arg.getArgNumber())};
      return {};
    }
    if (isSameShapeAdd(op)) return {op->getOperand(0), op->getOperand(1)};
    return {op->getOperand(0)};
  }

  // What a reader can take in the host layout, on its own (keepsLayout's conditions aside).
  static bool readsBlocked(mlir::OpOperand& use) {
    mlir::Operation* op = use.getOwner();
    unsigned i = use.getOperandNumber();
    if (auto f = llvm::dyn_cast<FusedOp>(op)) {
      mlir::BlockArgument arg = f.getBody().front().getArgument(i);
      if (f.getKind() == "batchnorm-relu")
        return llvm::all_of(arg.getUses(), [](mlir::OpOperand& u) {
          return onnxOpType(u.getOwner()) == "BatchNormalization" && u.getOperandNumber() == 0;
        });
      if (f.getKind() == "groupnorm-silu")
        return llvm::all_of(arg.getUses(), [](mlir::OpOperand& u) {
          return isGroupNorm(u.getOwner()) && u.getOperandNumber() == 0;
        });
      if (f.getKind() == "concat-batchnorm-relu")
        return llvm::all_of(arg.getUses(), [](mlir::OpOperand& u) {
          return onnxOpType(u.getOwner()) == "Concat";
        });
      if (f.getKind() != "conv-epilogue") return false;
      return llvm::all_of(arg.getUses(), [](mlir::OpOperand& u) {
        std::string t = onnxOpType(u.getOwner());
        return (t == "Conv" && u.getOperandNumber() == 0) || t == "Add";
      });
    }
    std::string t = onnxOpType(op);
    if (isChannelConcat(op) || isSameShapeAdd(op)) return true;
    if (int x = channelBroadcastOperand(op); x >= 0) return (int)i == x;
    return i == 0 && (t == "Conv" || isPlainPool(op) || isBatchNormInference(op) || isGroupNorm(op) ||
                      isNearestResize(op) || isChannelSplit(op));
  }

  // Which values stay in the host layout, as a fixpoint: start from every 4-D / 5-D f32 result
  // of static shape that its CPU op can write in that layout and that has readers; drop a value
  // one of whose readers cannot take it (another device, or readsBlocked says no); and while
  // values are dropped, an op that keeps layouts and touches a dropped value (as a result or a
  // kept input) drops all its results and kept inputs. A worklist: each value is dropped once,
  // so the pass stays linear in the graph.
  void markLayouts(mlir::Block& body) {
    llvm::DenseSet<mlir::Value> blocked;
    for (mlir::Operation& op : body) {
      if (!onCpu(&op) || !writesBlocked(&op)) continue;
      for (mlir::Value r : op.getResults()) {
        auto t = llvm::dyn_cast<mlir::RankedTensorType>(r.getType());
        if (t && t.hasStaticShape() && isActivationRank(t.getRank()) && t.getElementType().isF32() &&
            !r.use_empty())
          blocked.insert(r);
      }
    }
    llvm::SmallVector<mlir::Value> dropped;
    auto drop = [&](mlir::Value v) {
      if (v && blocked.erase(v)) dropped.push_back(v);
    };
    // A keepsLayout op keeps its results and kept inputs together: all of them or none.
    auto dropAllOf = [&](mlir::Operation* op) {
      for (mlir::Value r : op->getResults()) drop(r);
      for (mlir::Value v : keptInputs(op)) drop(v);
    };
    for (mlir::Operation& op : body)
      for (mlir::Value r : op.getResults()) {
        if (!blocked.contains(r)) continue;
        const std::string device = deviceOfOp(&op);
        if (!llvm::all_of(r.getUses(), [&](mlir::OpOperand& u) {
              return deviceOfOp(u.getOwner()) == device && readsBlocked(u);
            }))
          drop(r);
      }
    // Kept inputs that no op can write blocked (a graph input, a Reshape's result), and results
    // that were never candidates, count as dropped.
    for (mlir::Operation& op : body)
      if (keepsLayout(&op) &&
          (!llvm::all_of(op.getResults(), [&](mlir::Value r) { return blocked.contains(r); }) ||
           !llvm::all_of(keptInputs(&op), [&](mlir::Value v) { return v && blocked.contains(v); })))
        dropAllOf(&op);
    while (!dropped.empty()) {
      mlir::Value v = dropped.pop_back_val();
      if (mlir::Operation* producer = v.getDefiningOp(); producer && keepsLayout(producer))
        dropAllOf(producer);
      for (mlir::OpOperand& u : v.getUses())
        if (keepsLayout(u.getOwner())) {
          llvm::SmallVector<mlir::Value, 2> kept = keptInputs(u.getOwner());
          if (llvm::is_contained(kept, v)) dropAllOf(u.getOwner());
        }
    }
    for (mlir::Operation& op : body) {
      if (!llvm::any_of(op.getResults(), [&](mlir::Value r) { return blocked.contains(r); })) continue;
      llvm::SmallVector<mlir::Attribute> layouts;
      for (mlir::Value r : op.getResults())
        layouts.push_back(mlir::StringAttr::get(op.getContext(), blocked.contains(r) ? "blocked" : ""));
      op.setAttr(kResultLayoutsAttr, mlir::ArrayAttr::get(op.getContext(), layouts));
    }
  }

  llvm::DenseSet<mlir::Operation*> grouped_;
  Convexity lastConvexity_ = Convexity::Convex;
  // Program position of each op of the body after duplication (the grouping sweep's ranks).
  llvm::DenseMap<mlir::Operation*, int64_t> rank_;
};

}  // namespace

std::unique_ptr<mlir::Pass> createFusePass() { return std::make_unique<FusePass>(); }

namespace fusion {
bool isF32(mlir::Value v) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  return t && t.hasStaticShape() && t.getElementType().isF32();
}
bool isConstant(mlir::Value v) { return v.getDefiningOp<ConstantOp>() != nullptr; }
bool isNone(mlir::Value v) { return v.getDefiningOp<NoneOp>() != nullptr; }
int64_t numElementsOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getNumElements();
}
bool anchorTakesBias(mlir::Operation* anchor) {
  if (onnxOpType(anchor) == "Gemm") return anchor->getNumOperands() < 3 || isNone(anchor->getOperand(2));
  auto b = llvm::dyn_cast<mlir::RankedTensorType>(anchor->getOperand(1).getType());
  return b && b.getRank() == 2;
}
mlir::Value lastAxisRowOperand(mlir::Operation* op, mlir::Value x) {
  if (op->getNumOperands() != 2 || op->getNumResults() != 1 ||
      op->getResult(0).getType() != x.getType())
    return {};
  mlir::Value b = op->getOperand(op->getOperand(0) == x ? 1 : 0);
  if (b == x || !isF32(b)) return {};
  auto bt = llvm::cast<mlir::RankedTensorType>(b.getType());
  auto xt = llvm::cast<mlir::RankedTensorType>(x.getType());
  if (bt.getRank() < 1 || bt.getRank() > xt.getRank() || bt.getShape().back() != xt.getShape().back())
    return {};
  return bt.getNumElements() == xt.getShape().back() ? b : mlir::Value();
}
bool isBiasAdd(mlir::Operation* add, mlir::Value x) {
  return onnxOpType(add) == "Add" && lastAxisRowOperand(add, x);
}
bool loopFusible(mlir::Operation* op, uint32_t loopFlag) {
  if (op->getNumResults() != 1 || !isF32(op->getResult(0))) return false;
  std::string type = onnxOpType(op);
  mlir::Type rt = op->getResult(0).getType();
  if (opHas(type, kUnary | loopFlag)) {
    if (type == "Clip" && !clipBoundsConstant(op)) return false;
    if (type != "Clip" && op->getNumOperands() != 1) return false;
    return op->getOperand(0).getType() == rt;
  }
  if (opHas(type, kBinary | loopFlag)) {
    if (op->getNumOperands() != 2) return false;
    bool full = false;
    for (mlir::Value v : op->getOperands()) {
      if (!isF32(v)) return false;
      if (v.getType() == rt) full = true;
      else if (numElementsOf(v) != 1) return false;
    }
    return full;
  }
  return false;
}
}  // namespace fusion

// Forward search from the members' outside readers over non-members; reaching a member closes
// a path that leaves the group and comes back.
bool fusionGroupIsConvex(const llvm::SmallPtrSetImpl<mlir::Operation*>& in) {
  llvm::SmallPtrSet<mlir::Operation*, 32> seen;
  llvm::SmallVector<mlir::Operation*> work;
  for (mlir::Operation* m : in)
    for (mlir::Operation* u : m->getUsers())
      if (!in.count(u) && seen.insert(u).second) work.push_back(u);
  while (!work.empty()) {
    mlir::Operation* x = work.pop_back_val();
    for (mlir::Operation* u : x->getUsers()) {
      if (in.count(u)) return false;
      if (seen.insert(u).second) work.push_back(u);
    }
  }
  return true;
}

bool cpuFusesIntoProducer(mlir::Operation* producer, mlir::Operation* consumer) {
  if (consumer->getNumResults() != 1 || producer->getNumResults() != 1) return false;
  mlir::Value x = producer->getResult(0);
  // Element-wise loop: both loop-fusible, of one result type.
  if (loopFusible(producer) && loopFusible(consumer) &&
      x.getType() == consumer->getResult(0).getType())
    return true;
  // Epilogue: an f32 Conv/Gemm/MatMul with an activation on its result, or a residual sum of a
  // same-typed non-constant value (formEpilogue's rules for the first member).
  // Row group: a reduction-like root computes its loop-fusible producer row by row.
  if (loopFusible(producer) && rowRoot(consumer) && consumer->getOperand(0) == x) return true;
  std::string pt = onnxOpType(producer), ct = onnxOpType(consumer);
  // After a Gemm/MatMul's constant bias row or per-column scale (itself in the epilogue), an
  // activation or another scale continues the same epilogue.
  if ((pt == "Add" || pt == "Mul") && isF32(x) && consumer->getResult(0).getType() == x.getType())
    for (mlir::Value v : producer->getOperands()) {
      mlir::Operation* m = v.getDefiningOp();
      std::string mt = m ? onnxOpType(m) : "";
      if ((mt != "Gemm" && mt != "MatMul") || !v.hasOneUse() || v.getType() != x.getType() ||
          !cpuFusesIntoProducer(m, producer))
        continue;
      mlir::Value row = fusion::lastAxisRowOperand(consumer, x);
      if (ct == "Mul") return row && isConstant(row);
      // A residual sum after the bias row (post-ops bias+sum: a transformer's projection).
      if (pt == "Add" && ct == "Add" && consumer->getNumOperands() == 2) {
        mlir::Value other = consumer->getOperand(consumer->getOperand(0) == x ? 1 : 0);
        return other != x && other.getType() == x.getType() && !isConstant(other);
      }
      if (isPostOpActivation(ct))
        return consumer->getOperand(0) == x &&
               (ct == "Clip" ? clipBoundsConstant(consumer) : consumer->getNumOperands() == 1);
    }
  if (pt == "Conv" && isF32(x) && isToChannelsLast(consumer)) return true;
  // formBatchNormRelu: the placer then prices the Relu inside the BatchNormalization's
  // measured step, not as a pass of its own (DenseNet's were estimated ~10x their time).
  if (pt == "BatchNormalization" && ct == "Relu" && FusePass::isBatchNormInference(producer) &&
      consumer->getNumOperands() == 1 && consumer->getResult(0).getType() == x.getType())
    return true;
  // formBatchNormRelu's concat-batchnorm-relu: the BatchNormalization (and through it the Relu)
  // is priced inside the channel Concat's step, which reads the inputs once and writes once.
  if (pt == "Concat" && ct == "BatchNormalization" && FusePass::isChannelConcat(producer) &&
      FusePass::isBatchNormInference(consumer) && consumer->getOperand(0) == x)
    return true;
  if ((pt != "Conv" && pt != "Gemm" && pt != "MatMul") || !isF32(x) ||
      consumer->getResult(0).getType() != x.getType())
    return false;
  // A constant bias row or per-column scale of a Gemm/MatMul (formEpilogue).
  mlir::Value row = pt != "Conv" ? fusion::lastAxisRowOperand(consumer, x) : mlir::Value();
  if (row && isConstant(row) &&
      (ct == "Mul" || (ct == "Add" && fusion::anchorTakesBias(producer))))
    return true;
  if (isPostOpActivation(ct))
    return consumer->getOperand(0) == x &&
           (ct == "Clip" ? clipBoundsConstant(consumer) : consumer->getNumOperands() == 1);
  if (ct == "Add" && consumer->getNumOperands() == 2) {
    mlir::Value other = consumer->getOperand(consumer->getOperand(0) == x ? 1 : 0);
    bool sumFree = true;  // Gemm's C is its own sum unless it is a bias row
    if (pt == "Gemm" && producer->getNumOperands() > 2 && !isNone(producer->getOperand(2))) {
      auto c = llvm::cast<mlir::RankedTensorType>(producer->getOperand(2).getType());
      int64_t n = llvm::cast<mlir::RankedTensorType>(x.getType()).getDimSize(1);
      sumFree = (c.getRank() == 1 && c.getDimSize(0) == n) ||
                (c.getRank() == 2 && c.getDimSize(0) == 1 && c.getDimSize(1) == n);
    }
    return sumFree && other != x && other.getType() == x.getType() && !isConstant(other);
  }
  return false;
}

}  // namespace tandem
