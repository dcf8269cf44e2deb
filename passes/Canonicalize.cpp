// --tandem-canonicalize: constant folding by running the CPU kernels, Shape/Identity/Dropout
// folds, then dead-code elimination and common-subexpression elimination.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "compiler/ConstantFold.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/CSE.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"
#include "runtime/Kernel.h"
#include "runtime/CheckedMath.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMCANONICALIZE
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

// Dropout is an identity at inference: training_mode absent or a constant false.
bool isInferenceDropout(mlir::Operation* op) {
  if (op->getNumOperands() < 3 || op->getOperand(2).getDefiningOp<NoneOp>()) return true;
  Tensor mode;
  if (!getConstantValue(op->getOperand(2), &mode) || mode.numel() != 1) return false;
  return mode.dtype() == DType::Bool && mode.data<uint8_t>()[0] == 0;
}

// A Pad whose pads are a constant of zeros is the identity in every mode (PyTorch exports one
// before each AvgPool of DenseNet's transitions); its result then has its input's type.
bool isZeroPad(mlir::Operation* op) {
  if (op->getNumOperands() < 2 || op->getNumResults() != 1 ||
      op->getResult(0).getType() != op->getOperand(0).getType())
    return false;
  Tensor pads;
  if (!getConstantValue(op->getOperand(1), &pads) || pads.dtype() != DType::I64) return false;
  for (int64_t i = 0; i < pads.numel(); ++i)
    if (pads.data<int64_t>()[i] != 0) return false;
  return true;
}

class CanonicalizePass : public impl::TandemCanonicalizeBase<CanonicalizePass> {
 public:
  using TandemCanonicalizeBase::TandemCanonicalizeBase;

  void runOnOperation() override {
    // 1. Walk @main forward (so every op sees its operands' final form):
    //    a. re-infer the op's result types (an operand may just have become a constant);
    //    b. Identity, Dropout in inference mode and Pad with constant zero pads are replaced
    //       by their input (Dropout's mask by an all-true constant);
    //    c. Shape of a static-shaped value becomes an i64 constant; an inference
    //       BatchNormalization whose input is a Conv with constant weights (and no other
    //       reader) is folded into the Conv's weights and bias;
    //    c'. the last op of a written-out composite becomes the composite op: GELU (erf and
    //       tanh forms), LayerNorm over the last axis, Softmax, 2-D MatMul + Add as Gemm
    //       (CanonicalizePatterns.cpp);
    //    d. an op whose operands are all constants is evaluated with its CPU kernel from the
    //       registry and replaced by tandem.constant results, unless the results would exceed
    //       fold-limit elements and the inputs' size (Expand/Tile would bloat the plan). Ops
    //       with no CPU kernel, and a Dropout that may train (random), are left alone.
    // 2. Erase ops whose results are unused (all tandem ops are pure), last to first.
    // 3. MLIR's CSE merges identical ops, duplicate constants included.
    // 4. A value returned at several result positions gets an Identity for each position
    //    after its first, so every graph output is its own plan value and keeps its name
    //    (the plan names a value after the first output returning it; two trainable inputs
    //    of one Add have the same gradient value). After CSE, which would merge them back.
    //    Likewise a graph input returned as an output of another name (ReduceL2-18 with
    //    noop_with_empty_axes, an Identity of the input).
    // 5. @main's result types follow the returned values.
    mlir::ModuleOp module = getOperation();
    mlir::func::FuncOp main = getMainFunc(module);
    if (!main) {
      module.emitError("tandem-canonicalize: module has no func.func @main");
      return signalPassFailure();
    }
    mlir::Block& body = main.getBody().front();
    mlir::IRRewriter rewriter(&getContext());

    for (mlir::Operation& op : llvm::make_early_inc_range(body)) {
      if (!llvm::isa_and_present<TandemDialect>(op.getDialect()) ||
          llvm::isa<ConstantOp, NoneOp, CopyOp>(op))
        continue;
      if (mlir::failed(reinferResultTypes(&op))) return signalPassFailure();
      std::string type = onnxOpType(&op);
      if (type == "Identity" || (type == "Dropout" && isInferenceDropout(&op)) ||
          (type == "Pad" && isZeroPad(&op))) {
        if (foldToInput(rewriter, &op)) continue;
      }
      if (type == "Shape" && foldShapeOp(rewriter, &op)) continue;
      if (type == "Gather" && foldGatherOfShape(rewriter, &op)) continue;
      if (type == "BatchNormalization" && foldBatchNormIntoConv(rewriter, &op)) continue;
      if (rewriteCompositeOp(rewriter, &op)) continue;
      // A Dropout left here may train: its mask comes from the seed the plan is loaded with
      // (LoadOptions::seed) unless the op has its own, so it is drawn at run time.
      if (op.getNumOperands() > 0 && llvm::all_of(op.getOperands(), isConstantOrNone) &&
          type != "Dropout") {
        mlir::FailureOr<bool> folded =
            foldWithCpuKernel(rewriter, &op, type, foldLimit, "tandem-canonicalize");
        if (mlir::failed(folded)) return signalPassFailure();
      }
    }

    for (mlir::Operation& op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (mlir::isOpTriviallyDead(&op)) rewriter.eraseOp(&op);

    mlir::DominanceInfo dominance(main);
    mlir::eliminateCommonSubExpressions(rewriter, dominance, main);
    if (mlir::failed(separateRepeatedOutputs(rewriter, main))) return signalPassFailure();
    updateMainResultTypes(main);
  }

 private:
  mlir::LogicalResult separateRepeatedOutputs(mlir::IRRewriter& rewriter, mlir::func::FuncOp main) {
    auto ret = llvm::cast<mlir::func::ReturnOp>(main.getBody().front().getTerminator());
    llvm::DenseSet<mlir::Value> seen;
    rewriter.setInsertionPoint(ret);
    for (mlir::OpOperand& operand : ret->getOpOperands()) {
      const unsigned i = operand.getOperandNumber();
      if (seen.insert(operand.get()).second && !renamesInput(main, operand.get(), i)) continue;
      mlir::FailureOr<mlir::Operation*> copy =
          createTandemOp(rewriter, operand.get().getLoc(), "Identity", {operand.get()}, {});
      if (mlir::failed(copy)) return mlir::failure();
      operand.set((*copy)->getResult(0));
    }
    return mlir::success();
  }

  /// A graph input returned unchanged (an Identity folded away) as an output of another name:
  /// the plan would name the output after the input. Variable updates are left alone.
  static bool renamesInput(mlir::func::FuncOp main, mlir::Value v, unsigned result) {
    auto arg = llvm::dyn_cast<mlir::BlockArgument>(v);
    if (!arg || main.getResultAttr(result, kVariableUpdateAttr)) return false;
    auto out = main.getResultAttrOfType<mlir::StringAttr>(result, kNameAttr);
    auto in = main.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), kNameAttr);
    return out && (!in || in.getValue() != out.getValue());
  }

  bool foldToInput(mlir::IRRewriter& rewriter, mlir::Operation* op) {
    mlir::Value input = op->getOperand(0);
    if (op->getNumResults() > 1 && !op->getResult(1).use_empty()) {
      auto maskType = llvm::cast<mlir::RankedTensorType>(op->getResult(1).getType());
      if (!maskType.hasStaticShape()) return false;
      Tensor mask =
          Tensor::alloc(DType::Bool, Shape(maskType.getShape().begin(), maskType.getShape().end()));
      std::fill_n(mask.data<uint8_t>(), mask.numel(), 1);
      rewriter.setInsertionPoint(op);
      rewriter.replaceAllUsesWith(op->getResult(1), createConstant(rewriter, op->getLoc(), mask));
    }
    rewriter.replaceAllUsesWith(op->getResult(0), input);
    rewriter.eraseOp(op);
    return true;
  }

  // BN(Conv(X, W, B)) = Conv(X, W * s, (B - mean) * s + bias) with s = scale / sqrt(var + eps)
  // per output channel (ONNX BatchNormalization-15, inference form).
  bool foldBatchNormIntoConv(mlir::IRRewriter& rewriter, mlir::Operation* bn) {
    if (bn->getNumResults() != 1 || bn->getNumOperands() != 5) return false;
    if (auto mode = bn->getAttrOfType<mlir::IntegerAttr>("training_mode");
        mode && mode.getInt() != 0)
      return false;
    mlir::Operation* conv = bn->getOperand(0).getDefiningOp();
    if (!conv || onnxOpType(conv) != "Conv" || !conv->getResult(0).hasOneUse()) return false;
    Tensor w, b, scale, bias, mean, var;
    bool hasBias = conv->getNumOperands() > 2 && !conv->getOperand(2).getDefiningOp<NoneOp>();
    if (!getConstantValue(conv->getOperand(1), &w) ||
        (hasBias && !getConstantValue(conv->getOperand(2), &b)) ||
        !getConstantValue(bn->getOperand(1), &scale) ||
        !getConstantValue(bn->getOperand(2), &bias) ||
        !getConstantValue(bn->getOperand(3), &mean) || !getConstantValue(bn->getOperand(4), &var))
      return false;
    DType dt = w.dtype();
    if ((dt != DType::F32 && dt != DType::F64) || w.rank() < 1) return false;
    int64_t m = w.dim(0);
    for (const Tensor* t : {&scale, &bias, &mean, &var})
      if (t->dtype() != dt || t->numel() != m) return false;
    if (hasBias && (b.dtype() != dt || b.numel() != m)) return false;
    auto eps = bn->getAttrOfType<mlir::FloatAttr>("epsilon");
    double epsilon = eps ? eps.getValueAsDouble() : 1e-5;  // ONNX default

    Tensor newW = Tensor::copyOf(w);
    Tensor newB = Tensor::alloc(dt, {m});
    int64_t perChannel = m ? w.numel() / m : 0;
    dispatchDType(dt, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_floating_point_v<T>) {
        T* pw = newW.data<T>();
        T* pb = newB.data<T>();
        for (int64_t c = 0; c < m; ++c) {
          T sc = scale.data<T>()[c] / std::sqrt(var.data<T>()[c] + (T)epsilon);
          for (int64_t i = 0; i < perChannel; ++i) pw[c * perChannel + i] *= sc;
          T b0 = hasBias ? b.data<T>()[c] : T(0);
          pb[c] = (b0 - mean.data<T>()[c]) * sc + bias.data<T>()[c];
        }
      }
    });

    rewriter.setInsertionPoint(conv);
    mlir::Location loc = rewriter.getFusedLoc({conv->getLoc(), bn->getLoc()});
    mlir::Value wv = createConstant(rewriter, conv->getLoc(), newW);
    mlir::Value bv = createConstant(rewriter, conv->getLoc(), newB);
    mlir::OperationState state(loc, conv->getName());
    state.addOperands({conv->getOperand(0), wv, bv});
    state.addAttributes(conv->getAttrs());
    state.addTypes(bn->getResult(0).getType());
    mlir::Operation* fused = rewriter.create(state);
    rewriter.replaceOp(bn, fused->getResults());
    rewriter.eraseOp(conv);
    return true;
  }

  // true: folded; false: left alone; failure: the kernel rejected the constants (an error in
  // the model, reported on the op).
};

}  // namespace

std::unique_ptr<mlir::Pass> createCanonicalizePass() {
  return std::make_unique<CanonicalizePass>();
}
std::unique_ptr<mlir::Pass> createCanonicalizePass(const TandemCanonicalizeOptions& options) {
  return std::make_unique<CanonicalizePass>(options);
}

}  // namespace tandem
