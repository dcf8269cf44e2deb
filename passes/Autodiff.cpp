// --tandem-autodiff: reverse-mode differentiation of @main's scalar loss with respect to the
// trainable arguments and named constants; the gradients become extra results of @main.
#include <string>

#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "compiler/autodiff/GradientRules.h"
#include "mlir/IR/Builders.h"
#include "compiler/IrConventions.h"
#include "passes/Passes.h"

namespace tandem {
#define GEN_PASS_DEF_TANDEMAUTODIFF
#include "passes/Passes.h.inc"
}  // namespace tandem

namespace tandem {
namespace {

constexpr const char* kTrainableAttr = "tandem.trainable";
constexpr const char* kGradientOfAttr = "tandem.gradient_of";

// The values gradients flow through: f32 and f64 tensors (the float types Tandem has kernels
// for); indices, masks and shapes carry none.
bool isFloatTensor(mlir::Value v) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  return t && (t.getElementType().isF32() || t.getElementType().isF64());
}

// A wrt value and the name its gradient result is known by.
struct WrtValue {
  mlir::Value value;
  std::string name;
};

class AutodiffPass : public impl::TandemAutodiffBase<AutodiffPass> {
 public:
  using TandemAutodiffBase::TandemAutodiffBase;

  void runOnOperation() override {
    // 1. Find the loss (result `loss` of @main: one float element) and the wrt values
    //    (tandem.trainable float arguments, then the names in `wrt`).
    // 2. Forward sweep in op order: a float result of an op with an active operand is active.
    // 3. Reverse sweep seeded with d loss / d loss = 1: for each op with a gradient on some
    //    result and an active operand, call its rule before the return; accumulate each
    //    operand's contribution with Add.
    // 4. Append each wrt value's gradient (or zeros) to the return and to @main's results.
    mlir::ModuleOp module = getOperation();
    mlir::func::FuncOp main = getMainFunc(module);
    if (!main) {
      module.emitError("tandem-autodiff: module has no func.func @main");
      return signalPassFailure();
    }
    auto ret = llvm::cast<mlir::func::ReturnOp>(main.getBody().front().getTerminator());
    const unsigned lossIndex = loss;
    if (lossIndex >= ret.getNumOperands()) {
      main.emitError() << "tandem-autodiff: loss result " << lossIndex << " but @main has "
                       << ret.getNumOperands() << " results";
      return signalPassFailure();
    }
    mlir::Value lossValue = ret.getOperand(lossIndex);
    auto lossType = llvm::dyn_cast<mlir::RankedTensorType>(lossValue.getType());
    if (!isFloatTensor(lossValue) || !lossType.hasStaticShape() ||
        lossType.getNumElements() != 1) {
      main.emitError() << "tandem-autodiff: the loss (result " << lossIndex << ", "
                       << lossValue.getType() << ") must be an f32 or f64 tensor of one element";
      return signalPassFailure();
    }
    llvm::SmallVector<WrtValue> wrtValues;
    if (mlir::failed(collectWrt(main, &wrtValues))) return signalPassFailure();

    llvm::DenseSet<mlir::Value> active;
    for (const WrtValue& w : wrtValues) active.insert(w.value);
    mlir::Block& body = main.getBody().front();
    for (mlir::Operation& op : body) {
      if (!llvm::any_of(op.getOperands(), [&](mlir::Value v) { return active.count(v); }))
        continue;
      for (mlir::Value r : op.getResults())
        if (isFloatTensor(r)) active.insert(r);
    }

    llvm::DenseMap<mlir::Value, mlir::Value> grads;
    mlir::OpBuilder b(ret);
    if (active.count(lossValue))
      grads[lossValue] = createConstant(b, ret.getLoc(), onesLike(lossType));
    if (mlir::failed(backward(body, ret, active, grads))) return signalPassFailure();

    appendGradients(main, ret, wrtValues, grads);
  }

 private:
  static Tensor onesLike(mlir::RankedTensorType t) {
    Shape s(t.getShape().begin(), t.getShape().end());
    if (t.getElementType().isF64()) return Tensor::fromVector<double>(s, {1.0});
    return Tensor::fromVector<float>(s, {1.0f});
  }

  mlir::LogicalResult collectWrt(mlir::func::FuncOp main, llvm::SmallVector<WrtValue>* out) {
    llvm::DenseSet<mlir::Value> seen;
    auto add = [&](mlir::Value v, std::string name, mlir::Location loc) -> mlir::LogicalResult {
      if (!isFloatTensor(v))
        return mlir::emitError(loc) << "tandem-autodiff: '" << name
                                    << "' is not a float tensor and cannot be differentiated";
      if (auto t = llvm::cast<mlir::RankedTensorType>(v.getType()); !t.hasStaticShape())
        return mlir::emitError(loc) << "tandem-autodiff: '" << name << "' has a dynamic shape "
                                    << t << "; bind its dims first";
      if (seen.insert(v).second) out->push_back({v, std::move(name)});
      return mlir::success();
    };
    for (mlir::BlockArgument a : main.getArguments())
      if (main.getArgAttr(a.getArgNumber(), kTrainableAttr) &&
          mlir::failed(add(a, valueName(a), main.getLoc())))
        return mlir::failure();
    if (wrt.empty()) return checkNotEmpty(main, *out);
    // Names of inputs, then of constants (the first of a name wins): one pass, so a `wrt`
    // listing every initializer of a large model stays linear.
    llvm::StringMap<mlir::Value> byName;
    for (mlir::BlockArgument a : main.getArguments()) byName.try_emplace(valueName(a), a);
    for (ConstantOp c : main.getBody().front().getOps<ConstantOp>())
      if (std::string n = nodeName(c.getLoc()); !n.empty()) byName.try_emplace(n, c.getResult());
    for (const std::string& name : wrt) {
      mlir::Value found = byName.lookup(name);
      if (!found)
        return main.emitError() << "tandem-autodiff: wrt names '" << name
                                << "', which is neither an input nor a constant of @main";
      mlir::Location loc = found.getDefiningOp() ? found.getDefiningOp()->getLoc() : main.getLoc();
      if (mlir::failed(add(found, name, loc))) return mlir::failure();
    }
    return checkNotEmpty(main, *out);
  }

  static mlir::LogicalResult checkNotEmpty(mlir::func::FuncOp main,
                                           llvm::ArrayRef<WrtValue> wrtValues) {
    if (!wrtValues.empty()) return mlir::success();
    return main.emitError() << "tandem-autodiff: nothing to differentiate: no @main argument has "
                            << kTrainableAttr << " and `wrt` names nothing";
  }

  // The reverse sweep (step 3). Every op it builds goes before the return, after all forward
  // ops, so each forward value it reads dominates it.
  mlir::LogicalResult backward(mlir::Block& body, mlir::func::ReturnOp ret,
                               const llvm::DenseSet<mlir::Value>& active,
                               llvm::DenseMap<mlir::Value, mlir::Value>& grads) {
    mlir::OpBuilder b(ret);
    // Ops are collected first: the rules append to the block being walked.
    llvm::SmallVector<mlir::Operation*> forward;
    for (mlir::Operation& op : body)
      if (&op != ret.getOperation()) forward.push_back(&op);
    return autodiff::reverseSweep(b, forward, active, grads);
  }

  void appendGradients(mlir::func::FuncOp main, mlir::func::ReturnOp ret,
                       llvm::ArrayRef<WrtValue> wrtValues,
                       llvm::DenseMap<mlir::Value, mlir::Value>& grads) {
    mlir::OpBuilder b(ret);
    llvm::SmallVector<mlir::Value> results(ret.getOperands());
    const unsigned first = results.size();
    for (const WrtValue& w : wrtValues) {
      mlir::Value gv = grads.lookup(w.value);
      if (!gv) {
        // The loss does not depend on it: a zero gradient, still returned so every wrt value
        // has its result.
        autodiff::GradBuilder g(b, mlir::NameLoc::get(b.getStringAttr(w.name + "/grad")));
        gv = g.zeros(w.value.getType());
      }
      results.push_back(gv);
    }
    // The result attribute list grows with the results (setFunctionType leaves it as it was).
    llvm::SmallVector<mlir::DictionaryAttr> attrs;
    main.getAllResultAttrs(attrs);
    attrs.resize(first, b.getDictionaryAttr({}));
    for (const WrtValue& w : wrtValues)
      attrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr(kNameAttr, b.getStringAttr(w.name + "_grad")),
           b.getNamedAttr(kGradientOfAttr, b.getStringAttr(w.name))}));
    ret->setOperands(results);
    updateMainResultTypes(main);
    main.setAllResultAttrs(attrs);
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createAutodiffPass() { return std::make_unique<AutodiffPass>(); }
std::unique_ptr<mlir::Pass> createAutodiffPass(const TandemAutodiffOptions& options) {
  return std::make_unique<AutodiffPass>(options);
}

}  // namespace tandem
