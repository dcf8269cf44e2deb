// The CUDA rules of --tandem-fuse: cuBLASLt epilogues, residual Add + LayerNormalization and
// element-wise chains on cuda devices (passes/FuseCuda.h); Fuse.cpp forms and materialises them.
#include "passes/FuseCuda.h"

#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"
#include "runtime/OpTable.h"

namespace tandem {
namespace {

bool onCuda(mlir::Operation* op) {
  std::string d = deviceOfOp(op);
  return !d.empty() && deviceKindOf(d) == "cuda" && !llvm::isa<CopyOp, ConstantOp, NoneOp>(op);
}

using fusion::isConstant;
using fusion::isF32;
using fusion::isNone;
using fusion::numElementsOf;
using fusion::anchorTakesBias;
using fusion::isBiasAdd;

std::string geluForm(mlir::Operation* op) {
  auto a = op->getAttrOfType<mlir::StringAttr>("approximate");
  return a ? a.str() : "none";
}

// An element-wise op of the generated kernel (runtime/cuda/Fused.cpp): the op table's kCudaExpr
// rows, which are also kCpuLoop rows, so a cuda group that falls back to the CPU (no GPU at load)
// still runs as one loop.
bool loopFusible(mlir::Operation* op) { return fusion::loopFusible(op, kCudaExpr); }

bool isMatmul(mlir::Operation* op) {
  std::string t = onnxOpType(op);
  return (t == "Gemm" || t == "MatMul") && op->getNumResults() == 1 && isF32(op->getResult(0));
}

// Gemm's C is fine under an activation epilogue only as the bias row (beta 1, [N] or [1, N]);
// any other C is accumulated with beta, which the cuBLASLt kernel does not combine with one.
bool anchorTakesActivation(mlir::Operation* anchor) {
  if (onnxOpType(anchor) != "Gemm" || anchor->getNumOperands() < 3 || isNone(anchor->getOperand(2)))
    return true;
  auto beta = anchor->getAttrOfType<mlir::FloatAttr>("beta");
  if (beta && beta.getValueAsDouble() != 1.0) return false;
  auto c = llvm::cast<mlir::RankedTensorType>(anchor->getOperand(2).getType());
  int64_t n = llvm::cast<mlir::RankedTensorType>(anchor->getResult(0).getType()).getDimSize(1);
  return (c.getRank() == 1 && c.getDimSize(0) == n) ||
         (c.getRank() == 2 && c.getDimSize(0) == 1 && c.getDimSize(1) == n);
}

// An activation cuBLASLt applies as an epilogue: Relu, or Gelu in the tanh form (cuBLASLt's
// GELU epilogue is the tanh approximation; the exact erf form would differ by up to 4e-4).
bool isEpilogueActivation(mlir::Operation* op, mlir::Value x) {
  std::string t = onnxOpType(op);
  if (op->getNumOperands() != 1 || op->getOperand(0) != x || op->getNumResults() != 1) return false;
  return t == "Relu" || (t == "Gelu" && geluForm(op) == "tanh");
}

// A LayerNormalization the fused kernel runs: f32 X, Scale/B one value per normalised element
// (what the CUDA kernel takes), Mean and InvStdDev not read.
bool layerNormFusible(mlir::Operation* ln) {
  if (onnxOpType(ln) != "LayerNormalization" || !isF32(ln->getOperand(0))) return false;
  for (unsigned i = 1; i < ln->getNumResults(); ++i)
    if (!ln->getResult(i).use_empty()) return false;
  auto x = llvm::cast<mlir::RankedTensorType>(ln->getOperand(0).getType());
  auto axisAttr = ln->getAttrOfType<mlir::IntegerAttr>("axis");
  int64_t axis = axisAttr ? axisAttr.getInt() : -1;
  if (axis < 0) axis += x.getRank();
  if (axis < 0 || axis >= x.getRank()) return false;
  int64_t cols = 1;
  for (int64_t d = axis; d < x.getRank(); ++d) cols *= x.getDimSize(d);
  for (unsigned i = 1; i < ln->getNumOperands() && i < 3; ++i) {
    mlir::Value p = ln->getOperand(i);
    if (isNone(p)) continue;
    if (!isF32(p) || numElementsOf(p) != cols) return false;
  }
  return true;
}

// A same-shape f32 Add (no broadcasting): the residual sum of an add-layernorm group.
bool isFullAdd(mlir::Operation* op) {
  if (onnxOpType(op) != "Add" || op->getNumOperands() != 2 || op->getNumResults() != 1) return false;
  mlir::Value r = op->getResult(0);
  return isF32(r) && op->getOperand(0).getType() == r.getType() &&
         op->getOperand(1).getType() == r.getType();
}

// Convex: no path from a member through non-members back to a member (Fuse.cpp's rule).
bool convex(const llvm::SmallPtrSetImpl<mlir::Operation*>& in) { return fusionGroupIsConvex(in); }

void refuse(mlir::Operation* op, const std::string& why) {
  op->setAttr(kFusionRefusedAttr, mlir::StringAttr::get(op->getContext(), why));
}

class CudaGrouper {
 public:
  CudaGrouper(llvm::DenseSet<mlir::Operation*>& grouped) : grouped_(grouped) {}

  // Forward from the anchor along single consumers: [bias Add] then [Relu | tanh-Gelu].
  void formGemmEpilogue(mlir::Operation* anchor) {
    if (!isMatmul(anchor)) return;
    std::string device = deviceOfOp(anchor);
    CudaFusionGroup g{"gemm-epilogue", {anchor}};
    mlir::Value cur = anchor->getResult(0);
    bool biased = !anchorTakesBias(anchor);
    while (cur.hasOneUse()) {
      mlir::Operation* user = *cur.getUsers().begin();
      bool bias = !biased && isBiasAdd(user, cur);
      bool act = isEpilogueActivation(user, cur) && anchorTakesActivation(anchor);
      if (!bias && !act) {
        if (onnxOpType(user) == "Gelu" && geluForm(user) != "tanh" && deviceOfOp(user) == device)
          refuse(user, "exact Gelu (cuBLASLt's GELU epilogue is the tanh approximation)");
        break;
      }
      if (deviceOfOp(user) != device) {
        refuse(user, "on " + deviceOfOp(user) + ", producer on " + device);
        break;
      }
      if (grouped_.count(user)) break;
      g.members.push_back(user);
      cur = user->getResult(0);
      if (act) break;  // the activation ends the epilogue
      biased = true;
    }
    add(std::move(g));
  }

  // A LayerNormalization absorbs the same-shape Add producing its X.
  void formLayerNorm(mlir::Operation* ln) {
    if (!layerNormFusible(ln)) return;
    mlir::Operation* p = ln->getOperand(0).getDefiningOp();
    if (!p || !isFullAdd(p) || grouped_.count(p) || llvm::isa<CopyOp>(p)) return;
    if (deviceOfOp(p) != deviceOfOp(ln)) {
      refuse(p, "on " + deviceOfOp(p) + ", consumer on " + deviceOfOp(ln));
      return;
    }
    llvm::SmallPtrSet<mlir::Operation*, 4> in = {p, ln};
    if (!convex(in)) return refuse(p, "non-convex");
    bool late = llvm::all_of(p->getUsers(), [&](mlir::Operation* u) { return in.count(u) || ln->isBeforeInBlock(u); });
    if (!late) return refuse(p, "read outside before the group's root");
    add(CudaFusionGroup{"add-layernorm", {p, ln}});
  }

  // Consumers first (XLA instruction fusion), as the CPU loop groups: a fusible root absorbs
  // fusible producers of its type and device; one also read outside becomes an extra output if
  // the group stays convex and its outside readers come after the root.
  void formElementwise(mlir::Operation* root) {
    llvm::SmallPtrSet<mlir::Operation*, 8> in = {root};
    std::string device = deviceOfOp(root);
    mlir::Type type = root->getResult(0).getType();
    llvm::SmallVector<mlir::Operation*> work = {root};
    while (!work.empty()) {
      mlir::Operation* m = work.pop_back_val();
      for (mlir::Value v : m->getOperands()) {
        mlir::Operation* p = v.getDefiningOp();
        if (!p || in.count(p) || grouped_.count(p) || llvm::isa<CopyOp>(p) || !loopFusible(p) ||
            p->getResult(0).getType() != type)
          continue;
        if (deviceOfOp(p) != device) {
          refuse(p, "on " + deviceOfOp(p) + ", consumer on " + device);
          continue;
        }
        in.insert(p);
        bool readOutside = llvm::any_of(p->getUsers(), [&](mlir::Operation* u) { return !in.count(u); });
        if (readOutside && !convex(in)) {
          in.erase(p);
          refuse(p, "non-convex");
          continue;
        }
        if (readOutside && !llvm::all_of(p->getUsers(), [&](mlir::Operation* u) {
              return in.count(u) || root->isBeforeInBlock(u);
            })) {
          in.erase(p);
          refuse(p, "read outside before the group's root");
          continue;
        }
        work.push_back(p);
      }
    }
    CudaFusionGroup g{"elementwise", {}};
    for (mlir::Operation& op : *root->getBlock())
      if (in.count(&op)) g.members.push_back(&op);
    add(std::move(g));
  }

  std::vector<CudaFusionGroup> groups;

 private:
  void add(CudaFusionGroup g) {
    if (g.members.size() < 2) return;
    for (mlir::Operation* m : g.members) grouped_.insert(m);
    groups.push_back(std::move(g));
  }
  llvm::DenseSet<mlir::Operation*>& grouped_;
};

}  // namespace

std::vector<CudaFusionGroup> formCudaFusionGroups(mlir::Block& body,
                                                  llvm::DenseSet<mlir::Operation*>& grouped) {
  // 1. cuBLASLt epilogues (forward from each Gemm/MatMul), 2. residual Add + LayerNormalization,
  // 3. element-wise chains over what is left (consumers first). Only ops on cuda devices.
  CudaGrouper g(grouped);
  llvm::SmallVector<mlir::Operation*> ops;
  for (mlir::Operation& op : body)
    if (onCuda(&op)) ops.push_back(&op);
  for (mlir::Operation* op : ops)
    if (!grouped.count(op)) g.formGemmEpilogue(op);
  for (mlir::Operation* op : ops)
    if (!grouped.count(op)) g.formLayerNorm(op);
  for (mlir::Operation* op : llvm::reverse(ops))
    if (!grouped.count(op) && loopFusible(op)) g.formElementwise(op);
  return std::move(g.groups);
}

bool cudaFusesIntoProducer(mlir::Operation* producer, mlir::Operation* consumer) {
  if (consumer->getNumResults() < 1 || producer->getNumResults() != 1) return false;
  mlir::Value x = producer->getResult(0);
  if (consumer->getNumResults() == 1 && loopFusible(producer) && loopFusible(consumer) &&
      x.getType() == consumer->getResult(0).getType())
    return true;
  if (isMatmul(producer))
    return (anchorTakesBias(producer) && isBiasAdd(consumer, x)) ||
           (anchorTakesActivation(producer) && isEpilogueActivation(consumer, x));
  // The activation after a bias Add that is itself a matmul's epilogue ends the same epilogue.
  if (onnxOpType(producer) == "Add" && isEpilogueActivation(consumer, x))
    for (mlir::Value v : producer->getOperands())
      if (mlir::Operation* m = v.getDefiningOp())
        if (isMatmul(m) && v.hasOneUse() && anchorTakesBias(m) && anchorTakesActivation(m) &&
            isBiasAdd(producer, v))
          return true;
  return isFullAdd(producer) && layerNormFusible(consumer) && consumer->getOperand(0) == x;
}

}  // namespace tandem
