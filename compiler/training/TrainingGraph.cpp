// The training step graph (TrainingGraph.h): parameters to arguments, the loss, and the
// optimizer's updates written as ordinary tandem ops so they are placed and fused like the rest.
#include "compiler/training/TrainingGraph.h"

#include <string>

#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "compiler/autodiff/GradientRules.h"
#include "compiler/training/Variables.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tandem::training {
namespace {

constexpr const char* kTrainableAttr = "tandem.trainable";

mlir::DictionaryAttr argAttrs(mlir::Builder& b, const std::string& name, bool trainable) {
  llvm::SmallVector<mlir::NamedAttribute> a = {b.getNamedAttr(kNameAttr, b.getStringAttr(name))};
  if (trainable) a.push_back(b.getNamedAttr(kTrainableAttr, b.getUnitAttr()));
  return b.getDictionaryAttr(a);
}

// Inserts an argument at `index` of @main (and of its block) and returns it.
mlir::BlockArgument addArg(mlir::func::FuncOp main, unsigned index, mlir::Type t,
                           mlir::DictionaryAttr attrs, mlir::Location loc) {
  main.insertArgument(index, t, attrs, loc);
  return main.getArgument(index);
}

bool isF32(mlir::Value v) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

// A weight or bias: operand 1 or 2 of Conv, Gemm or MatMul (directly; a Transpose or Reshape
// between is not looked through).
bool isWeightOrBias(ConstantOp c) {
  for (mlir::OpOperand& use : c.getResult().getUses()) {
    std::string t = onnxOpType(use.getOwner());
    if ((t == "Conv" || t == "Gemm" || t == "MatMul") && use.getOperandNumber() >= 1)
      return true;
  }
  return false;
}

void setResults(mlir::func::FuncOp main, mlir::func::ReturnOp ret,
                llvm::ArrayRef<mlir::Value> values, llvm::ArrayRef<std::string> names) {
  mlir::Builder b(main.getContext());
  ret->setOperands(values);
  updateMainResultTypes(main);
  llvm::SmallVector<mlir::DictionaryAttr> attrs;
  for (const std::string& n : names)
    attrs.push_back(b.getDictionaryAttr({b.getNamedAttr(kNameAttr, b.getStringAttr(n))}));
  main.setAllResultAttrs(attrs);
}

}  // namespace

mlir::LogicalResult buildLoss(mlir::ModuleOp module, const CompileOptions::Training& options) {
  mlir::func::FuncOp main = getMainFunc(module);
  if (!main) return module.emitError("training: module has no func.func @main");
  mlir::Block& body = main.getBody().front();
  auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
  if (main.getNumArguments() < 1 || ret.getNumOperands() < 1)
    return main.emitError("training: @main must take the images and return the logits first");
  mlir::Value logits = ret.getOperand(0);
  auto lt = llvm::dyn_cast<mlir::RankedTensorType>(logits.getType());
  if (!isF32(logits) || lt.getRank() != 2 || !lt.hasStaticShape())
    return main.emitError() << "training: result 0 must be the logits, f32 [N, C] with static "
                               "dims (bind the batch dim), got "
                            << logits.getType();

  // 1. Parameters: constants become trainable arguments, in the order they appear.
  llvm::SmallVector<ConstantOp> params;
  for (ConstantOp c : body.getOps<ConstantOp>())
    if (isF32(c.getResult()) && (options.allFloatConstants || isWeightOrBias(c)))
      params.push_back(c);
  if (params.empty())
    return main.emitError("training: the model has no f32 weight or bias of a Conv, Gemm or "
                          "MatMul to train");
  mlir::OpBuilder b(ret);
  llvm::StringSet<> seen;
  for (ConstantOp c : params) {
    std::string name = nodeName(c.getLoc());
    if (name.empty() || !seen.insert(name).second)
      return c.emitError() << "training: parameter '" << name
                           << "' needs a unique initializer name (it is written back by name)";
    mlir::BlockArgument a =
        addArg(main, main.getNumArguments(), c.getType(), argAttrs(b, name, true), c.getLoc());
    // Its value stays with it: the initial value of the variable it becomes (Variables.h).
    main.setArgAttr(a.getArgNumber(), kInitialValueAttr, c.getValue());
    c.getResult().replaceAllUsesWith(a);
    c.erase();
  }

  if (options.forwardOnly) return mlir::success();

  // 2. Labels after x; the loss as the only result.
  auto labelsType = mlir::RankedTensorType::get({lt.getDimSize(0)}, b.getI64Type());
  mlir::BlockArgument labels =
      addArg(main, 1, labelsType, argAttrs(b, "labels", false), main.getLoc());
  autodiff::GradBuilder g(b, mlir::NameLoc::get(b.getStringAttr("loss")));
  mlir::Value loss =
      g.op("SoftmaxCrossEntropyLoss", {logits, labels}, {g.strAttr("reduction", "mean")});
  if (g.failed()) return mlir::failure();
  setResults(main, ret, {loss}, {"loss"});
  return mlir::success();
}

mlir::LogicalResult appendOptimizer(mlir::ModuleOp module,
                                    const CompileOptions::Training& options) {
  mlir::func::FuncOp main = getMainFunc(module);
  auto ret = llvm::cast<mlir::func::ReturnOp>(main.getBody().front().getTerminator());
  // The trainable arguments, in order: their gradients are results 1...
  llvm::SmallVector<mlir::BlockArgument> params;
  for (mlir::BlockArgument a : main.getArguments())
    if (main.getArgAttr(a.getArgNumber(), kTrainableAttr)) params.push_back(a);
  if (ret.getNumOperands() != 1 + params.size())
    return main.emitError() << "training: expected the loss and " << params.size()
                            << " gradients, got " << ret.getNumOperands() << " results";
  mlir::OpBuilder b(ret);
  mlir::Type f32 = b.getF32Type();
  llvm::SmallVector<mlir::Value> results = {ret.getOperand(0)};
  llvm::SmallVector<std::string> names = {"loss"};
  const double lr = options.learningRate;

  if (options.optimizer == CompileOptions::Training::Optimizer::Sgd) {
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string name = valueName(params[i]);
      autodiff::GradBuilder g(b, mlir::NameLoc::get(b.getStringAttr(name + "/sgd")));
      results.push_back(g.sub(params[i], g.mulS(ret.getOperand(1 + i), lr)));
      names.push_back(name + "_new");
      if (g.failed()) return mlir::failure();
    }
    setResults(main, ret, results, names);
    return mlir::success();
  }

  // Adam: the step-dependent scalars once, then per parameter the moment updates and the step.
  const double b1 = options.beta1, b2 = options.beta2, eps = options.epsilon;
  auto scalarType = mlir::RankedTensorType::get({}, f32);
  mlir::BlockArgument step = addArg(main, main.getNumArguments(), scalarType,
                                    argAttrs(b, "step", false), main.getLoc());
  autodiff::GradBuilder s(b, mlir::NameLoc::get(b.getStringAttr("adam/bias_correction")));
  // stepSize = lr / (1 - b1^t); invSqrtBc2 = 1 / sqrt(1 - b2^t).
  mlir::Value bc1 = s.rsubS(1.0, s.op("Pow", {s.scalar(b1, f32), step}));
  mlir::Value stepSize = s.div(s.scalar(lr, f32), bc1);
  mlir::Value sqrtBc2 = s.op("Sqrt", {s.rsubS(1.0, s.op("Pow", {s.scalar(b2, f32), step}))});
  if (s.failed()) return mlir::failure();
  // State arguments before `step`: every m, then every v, so that result 1 + i replaces
  // argument 2 + i.
  llvm::SmallVector<mlir::BlockArgument> ms, vs;
  for (const char* suffix : {".m", ".v"})
    for (mlir::BlockArgument p : params)
      (suffix[1] == 'm' ? ms : vs)
          .push_back(addArg(main, main.getNumArguments() - 1, p.getType(),
                            argAttrs(b, valueName(p) + suffix, false), main.getLoc()));
  llvm::SmallVector<mlir::Value> newM, newV;
  llvm::SmallVector<std::string> mNames, vNames;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string name = valueName(params[i]);
    autodiff::GradBuilder g(b, mlir::NameLoc::get(b.getStringAttr(name + "/adam")));
    mlir::Value grad = ret.getOperand(1 + i);
    mlir::Value m1 = g.add(g.mulS(ms[i], b1), g.mulS(grad, 1 - b1));
    mlir::Value v1 = g.add(g.mulS(vs[i], b2), g.mulS(g.mul(grad, grad), 1 - b2));
    mlir::Value denom = g.addS(g.div(g.op("Sqrt", {v1}), sqrtBc2), eps);
    results.push_back(g.sub(params[i], g.mul(g.div(m1, denom), stepSize)));
    names.push_back(name + "_new");
    newM.push_back(m1);
    newV.push_back(v1);
    mNames.push_back(name + ".m_new");
    vNames.push_back(name + ".v_new");
    if (g.failed()) return mlir::failure();
  }
  results.append(newM.begin(), newM.end());
  results.append(newV.begin(), newV.end());
  names.append(mNames.begin(), mNames.end());
  names.append(vNames.begin(), vNames.end());
  setResults(main, ret, results, names);
  return mlir::success();
}

}  // namespace tandem::training
