// The training step graph (TrainingGraph.h): parameters to arguments, the loss, and the
// optimizer's updates written as ordinary tandem ops so they are placed and fused like the rest.
#include "compiler/training/TrainingGraph.h"

#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "compiler/ConstantFold.h"
#include "compiler/IrConventions.h"
#include "compiler/OpBuilding.h"
#include "compiler/TandemDialect.h"
#include "compiler/autodiff/GradientRules.h"
#include "compiler/training/Variables.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tandem::training {
namespace {

constexpr const char* kTrainableAttr = "tandem.trainable";
constexpr const char* kBufferAttr = "tandem.buffer";

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

// A row of the last axis added to a MatMul's or Gemm's result: a Linear's bias as exporters
// write it for inputs of rank above 2 (MatMul, then Add of an [N] initializer).
bool isProductBias(mlir::OpOperand& use) {
  mlir::Operation* add = use.getOwner();
  if (onnxOpType(add) != "Add" || add->getNumOperands() != 2) return false;
  mlir::Value product = add->getOperand(1 - use.getOperandNumber());
  mlir::Operation* p = product.getDefiningOp();
  if (!p || (onnxOpType(p) != "MatMul" && onnxOpType(p) != "Gemm")) return false;
  auto bt = llvm::dyn_cast<mlir::RankedTensorType>(use.get().getType());
  auto yt = llvm::dyn_cast<mlir::RankedTensorType>(product.getType());
  return bt && yt && bt.hasStaticShape() && yt.hasStaticShape() && bt.getRank() >= 1 &&
         yt.getRank() >= 1 && bt.getShape().back() == yt.getShape().back() &&
         bt.getNumElements() == yt.getShape().back();
}

// What PyTorch's nn.Linear, nn.Conv*, nn.ConvTranspose*, nn.*Norm and nn.Embedding hold as
// parameters: operand 1 or 2 (weight, bias) of Conv, ConvTranspose, Gemm or MatMul; the bias
// row an Add adds to a MatMul's or Gemm's result; the scale and B (operands 1, 2) of
// BatchNormalization, LayerNormalization, GroupNormalization and InstanceNormalization; the
// table (operand 0) a Gather or EmbeddingBag reads at ids that are no constant (an embedding; a
// position table gathered at constant ids is not one). Read directly or through up to four
// layout ops (Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Identity) as operand 0:
// torch.onnx without constant folding writes a Linear's weight as Transpose -> MatMul
// (nn.MultiheadAttention's in_proj_weight, a Linear over channels-last activations).
bool feedsWeightOrBias(mlir::Value v, int depth) {
  for (mlir::OpOperand& use : v.getUses()) {
    mlir::Operation* owner = use.getOwner();
    std::string t = onnxOpType(owner);
    const unsigned i = use.getOperandNumber();
    if ((t == "Conv" || t == "ConvTranspose" || t == "Gemm" || t == "MatMul") && i >= 1) return true;
    if (t == "Add" && isProductBias(use)) return true;
    if ((t == "BatchNormalization" || t == "LayerNormalization" || t == "GroupNormalization" ||
         t == "InstanceNormalization") &&
        (i == 1 || i == 2))
      return true;
    if ((t == "Gather" || t == "EmbeddingBag") && i == 0 && owner->getNumOperands() > 1 &&
        !owner->getOperand(1).getDefiningOp<ConstantOp>())
      return true;
    const bool layout = t == "Transpose" || t == "Reshape" || t == "Flatten" || t == "Squeeze" ||
                        t == "Unsqueeze" || t == "Identity";
    if (layout && i == 0 && depth < 4 && owner->getNumResults() == 1 &&
        feedsWeightOrBias(owner->getResult(0), depth + 1))
      return true;
  }
  return false;
}

bool isWeightOrBias(ConstantOp c) { return feedsWeightOrBias(c.getResult(), 0); }

// A Dropout's ratio (operand 1) and nothing else: a hyperparameter, never a parameter (with
// allFloatConstants it would be one, and Dropout has no gradient in its ratio).
bool onlyDropoutRatio(ConstantOp c) {
  return llvm::all_of(c.getResult().getUses(), [](mlir::OpOperand& use) {
    return onnxOpType(use.getOwner()) == "Dropout" && use.getOperandNumber() == 1;
  });
}

// Whether BatchNormalization `op`'s statistics train (buildLoss 1b): in inference form
// (training_mode absent or 0), or in training mode with its running_mean / running_var
// results unused (PyTorch's export with TrainingMode.TRAINING), and input_mean and input_var
// f32 initializers of its own. A training-mode one whose running results the graph uses is
// left as it is (false). Failure (an error on the op): statistics that are not initializers
// of its own, which could not be written back.
mlir::FailureOr<bool> trainsStatistics(mlir::Operation* op) {
  if (onnxOpType(op) != "BatchNormalization" || op->getNumOperands() != 5) return false;
  if (intAttrOr(op, "training_mode", 0) != 0)
    for (unsigned i = 1; i < op->getNumResults(); ++i)
      if (!op->getResult(i).use_empty()) return false;
  for (unsigned i : {3u, 4u}) {
    auto c = op->getOperand(i).getDefiningOp<ConstantOp>();
    if (!c || !isF32(c.getResult()) || !c.getResult().hasOneUse())
      return op->emitError()
             << "training: BatchNormalization '" << nodeName(op->getLoc()) << "': its "
             << (i == 3 ? "input_mean" : "input_var")
             << " is not an f32 initializer of its own, so its running statistics cannot be "
                "trained and written back (PyTorch shares equal initializers unless exported "
                "with training=torch.onnx.TrainingMode.TRAINING); --freeze-batchnorm keeps them "
                "as they are";
  }
  return true;
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

// Folds the shape computations an exporter writes (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, PyTorch's view(B, T, heads, -1)) now that the batch dim is bound, re-inferring each
// op's types from its folded operands: autodiff needs static shapes, and canonicalize, which
// would fold them later, runs after it. Only Shape, a Gather of a Shape and ops of constant
// operands with integer or bool results fold here, so no float constant (a parameter to be)
// is touched.
mlir::LogicalResult foldShapeComputations(mlir::Block& body) {
  mlir::IRRewriter rewriter(body.getParentOp()->getContext());
  auto integerResults = [](mlir::Operation* op) {
    return llvm::all_of(op->getResultTypes(), [](mlir::Type t) {
      auto rt = llvm::dyn_cast<mlir::RankedTensorType>(t);
      return rt && rt.getElementType().isInteger();
    });
  };
  for (mlir::Operation& op : llvm::make_early_inc_range(body)) {
    if (!llvm::isa_and_present<TandemDialect>(op.getDialect()) || llvm::isa<ConstantOp, NoneOp, CopyOp>(op))
      continue;
    if (mlir::failed(reinferResultTypes(&op))) return mlir::failure();
    const std::string type = onnxOpType(&op);
    if (type == "Shape" && foldShapeOp(rewriter, &op)) continue;
    if (type == "Gather" && foldGatherOfShape(rewriter, &op)) continue;
    if (op.getNumOperands() > 0 && llvm::all_of(op.getOperands(), isConstantOrNone) && integerResults(&op) &&
        type != "Dropout" && mlir::failed(foldWithCpuKernel(rewriter, &op, type, 1 << 16, "training")))
      return mlir::failure();
  }
  return mlir::success();
}

// The labels an ignore index k leaves out (i1) and those it counts, 1 - (labels == k) in f32:
// the elementwise ops every device has (no And / Not). Label smoothing and the metrics use it.
struct IgnoreMask {
  mlir::Value ignored, kept;
};
IgnoreMask ignoreMask(autodiff::GradBuilder& g, mlir::OpBuilder& b, mlir::Value labels, int64_t k) {
  mlir::Value ignore = createConstant(b, g.loc(), Tensor::fromVector<int64_t>({}, {k}));
  mlir::Value ignored = g.op("Equal", {labels, ignore});
  return {ignored, g.rsubS(1.0, g.op("Cast", {ignored}, {g.intAttr("to", 1)}))};
}

// The loss op buildLoss wrote: the SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss named
// "loss" (result 0 itself, or an operand of label smoothing's sum); null when there is none.
mlir::Operation* buildLossOp(mlir::func::FuncOp main) {
  mlir::Operation* found = nullptr;
  main.walk([&](mlir::Operation* op) {
    const std::string type = onnxOpType(op);
    if ((type == "SoftmaxCrossEntropyLoss" || type == "NegativeLogLikelihoodLoss") &&
        nodeName(op->getLoc()) == "loss" && op->getNumOperands() >= 2)
      found = op;
  });
  return found;
}

}  // namespace

mlir::LogicalResult buildLoss(mlir::ModuleOp module, const CompileOptions::Training& options) {
  mlir::func::FuncOp main = getMainFunc(module);
  if (!main) return module.emitError("training: module has no func.func @main");
  mlir::Block& body = main.getBody().front();
  if (mlir::failed(foldShapeComputations(body))) return mlir::failure();
  updateMainResultTypes(main);
  auto ret = llvm::cast<mlir::func::ReturnOp>(body.getTerminator());
  if (main.getNumArguments() < 1 || ret.getNumOperands() < 1)
    return main.emitError("training: @main must take the images and return the logits first");
  mlir::Value logits = ret.getOperand(0);
  auto lt = llvm::dyn_cast<mlir::RankedTensorType>(logits.getType());
  if (!isF32(logits) || !lt || lt.getRank() < 2 || !lt.hasStaticShape())
    return main.emitError() << "training: result 0 must be the "
                            << (options.loss == CompileOptions::Training::Loss::Nll
                                    ? "log-probabilities"
                                    : "logits")
                            << ", f32 [N, C] (or [N, d..., C] with a label per position) with static "
                               "dims (bind the batch dim), got "
                            << logits.getType();
  const int64_t rank = lt.getRank();
  const int64_t classAxis = options.classAxis < 0 ? rank + options.classAxis : options.classAxis;
  if (classAxis < 1 || classAxis >= rank)
    return main.emitError() << "training: the class axis " << options.classAxis
                            << " is not an axis of result 0 after the batch (" << logits.getType()
                            << ": 1 to " << rank - 1 << ", or -1 to " << 1 - rank << ")";

  // The BatchNormalizations whose statistics train (1b): those are buffers, not parameters,
  // even with allFloatConstants.
  llvm::SmallVector<mlir::Operation*> batchNorms;
  llvm::SmallPtrSet<mlir::Operation*, 16> statistics;
  if (options.batchNormInTraining) {
    bool bad = false;
    body.walk([&](mlir::Operation* op) {
      mlir::FailureOr<bool> trains = trainsStatistics(op);
      bad |= mlir::failed(trains);
      if (mlir::failed(trains) || !*trains) return;
      batchNorms.push_back(op);
      statistics.insert(op->getOperand(3).getDefiningOp());
      statistics.insert(op->getOperand(4).getDefiningOp());
    });
    if (bad) return mlir::failure();
  }

  // 1. Parameters: constants become trainable arguments, in the order they appear.
  llvm::SmallVector<ConstantOp> params;
  llvm::StringSet<> named, frozen;
  for (const std::string& n : options.parameterNames) named.insert(n);
  for (const std::string& n : options.frozenNames) frozen.insert(n);
  auto isParameter = [&](ConstantOp c) {
    if (!named.empty()) return named.contains(nodeName(c.getLoc())) && !onlyDropoutRatio(c);
    return options.allFloatConstants ? !onlyDropoutRatio(c) : isWeightOrBias(c);
  };
  int64_t frozenCount = 0;
  for (ConstantOp c : body.getOps<ConstantOp>()) {
    if (!isF32(c.getResult()) || statistics.count(c) || !isParameter(c)) continue;
    if (frozen.contains(nodeName(c.getLoc())))
      ++frozenCount;
    else
      params.push_back(c);
  }
  if (params.empty() && frozenCount)
    return main.emitError() << "training: every one of the model's " << frozenCount
                            << " parameter(s) is frozen; nothing is left to train";
  if (params.empty())
    return main.emitError("training: the model has no f32 weight or bias of a Conv, ConvTranspose, Gemm or "
                          "MatMul, normalization scale or bias or embedding table to train");
  mlir::OpBuilder b(ret);
  llvm::StringSet<> seen;
  // Constant c as a new last argument named after its initializer, which it replaces: its value
  // stays with it, the initial value of the variable it becomes (Variables.h).
  auto toArgument = [&](ConstantOp c, bool trainable,
                        const char* what) -> mlir::FailureOr<mlir::BlockArgument> {
    std::string name = nodeName(c.getLoc());
    if (name.empty() || !seen.insert(name).second)
      return c.emitError() << "training: " << what << " '" << name
                           << "' needs a unique initializer name (it is written back by name)";
    mlir::BlockArgument a =
        addArg(main, main.getNumArguments(), c.getType(), argAttrs(b, name, trainable), c.getLoc());
    main.setArgAttr(a.getArgNumber(), kInitialValueAttr, c.getValue());
    c.getResult().replaceAllUsesWith(a);
    c.erase();
    return a;
  };
  for (ConstantOp c : params)
    if (mlir::failed(toArgument(c, /*trainable=*/true, "parameter"))) return mlir::failure();

  // 1b. Buffers (PyTorch's name for state that is not a parameter): with batchNormInTraining,
  //     each BatchNormalization's input_mean and input_var become arguments after the
  //     parameters, tandem.buffer, their initializer their initial value.
  llvm::SmallVector<mlir::BlockArgument> buffers;
  for (mlir::Operation* bn : batchNorms)
    for (unsigned i : {3u, 4u}) {
      mlir::FailureOr<mlir::BlockArgument> a = toArgument(
          bn->getOperand(i).getDefiningOp<ConstantOp>(), /*trainable=*/false, "running statistic");
      if (mlir::failed(a)) return mlir::failure();
      main.setArgAttr(a->getArgNumber(), kBufferAttr, b.getUnitAttr());
      buffers.push_back(*a);
    }

  if (options.forwardOnly) return mlir::success();

  // 1c. Those BatchNormalizations train (PyTorch's model.train()): batch statistics, and the
  //     running statistics updated with the model's momentum m (ONNX's: PyTorch's momentum is
  //     1 - m) and, as PyTorch, the unbiased batch variance: ONNX's running_var' = m * var +
  //     (1 - m) * bvar uses the population variance, so var' = running_var' * k + m * var *
  //     (1 - k) with k = M / (M - 1), M the elements per channel (N times the spatial size).
  llvm::SmallVector<mlir::Value> bufferUpdates;
  for (size_t k = 0; k < batchNorms.size(); ++k) {
    mlir::Operation* bn = batchNorms[k];
    llvm::SmallVector<int64_t> xs = autodiff::shapeOf(bn->getOperand(0));
    int64_t count = 1;
    for (size_t i = 0; i < xs.size(); ++i)
      if (i != 1) count *= xs[i];
    if (count < 2)
      return bn->emitError() << "training: BatchNormalization '" << nodeName(bn->getLoc())
                             << "' has " << count
                             << " value per channel in a batch; training mode needs more than 1 "
                                "(as PyTorch: use a larger batch)";
    mlir::OpBuilder ob(bn);
    llvm::SmallVector<mlir::NamedAttribute> attrs(bn->getAttrs().begin(), bn->getAttrs().end());
    llvm::erase_if(attrs, [](const mlir::NamedAttribute& a) { return a.getName() == "training_mode"; });
    attrs.push_back(ob.getNamedAttr("training_mode", ob.getI64IntegerAttr(1)));
    mlir::FailureOr<mlir::Operation*> trained = createTandemOp(
        ob, bn->getLoc(), "BatchNormalization", llvm::to_vector(bn->getOperands()), attrs, 3);
    if (mlir::failed(trained)) return mlir::failure();
    bn->getResult(0).replaceAllUsesWith((*trained)->getResult(0));
    const double m = floatAttrOr(*trained, "momentum", 0.9);
    const double unbias = (double)count / (double)(count - 1);
    autodiff::GradBuilder u(b, mlir::NameLoc::get(b.getStringAttr(valueName(buffers[2 * k + 1]) + "/update")));
    mlir::Value runVar = u.add(u.mulS((*trained)->getResult(2), unbias),
                               u.mulS(buffers[2 * k + 1], m * (1 - unbias)));
    if (u.failed()) return mlir::failure();
    bufferUpdates.push_back((*trained)->getResult(1));
    bufferUpdates.push_back(runVar);
    bn->erase();
  }

  // 2. Dropouts train (Keras's fit, PyTorch's model.train()): an inference Dropout (no
  //    training_mode, or a constant false) gets training_mode true, and its ratio made explicit
  //    (ONNX's default 0.5) when absent.
  if (options.dropoutInTraining) {
    llvm::SmallVector<mlir::Operation*> dropouts;
    body.walk([&](mlir::Operation* op) {
      if (onnxOpType(op) == "Dropout") dropouts.push_back(op);
    });
    for (mlir::Operation* d : dropouts) {
      Tensor mode;
      const bool noMode = d->getNumOperands() < 3 || !llvm::isa<mlir::RankedTensorType>(d->getOperand(2).getType());
      if (!noMode && !(getConstantValue(d->getOperand(2), &mode) && mode.numel() == 1 && mode.data<uint8_t>()[0] == 0))
        continue;  // already training (or decided at run time)
      mlir::OpBuilder ob(d);
      if (d->getNumOperands() < 2 || !llvm::isa<mlir::RankedTensorType>(d->getOperand(1).getType())) {
        mlir::Value ratio = createConstant(ob, d->getLoc(), Tensor::fromVector<float>({}, {0.5f}));
        if (d->getNumOperands() < 2) d->insertOperands(1, {ratio});
        else d->setOperand(1, ratio);
      }
      Tensor on = Tensor::alloc(DType::Bool, {});
      on.data<bool>()[0] = true;
      mlir::Value modeOn = createConstant(ob, d->getLoc(), on);
      if (d->getNumOperands() < 3) d->insertOperands(2, {modeOn});
      else d->setOperand(2, modeOn);
    }
  }

  // 3. Labels after x; the loss as the only result.
  //    The labels are result 0's dims without the class axis. The loss op takes [N, C, d...]
  //    (ONNX's layout): classes last are flattened to [N * d..., C] (a view; the mean over
  //    every label is the same), classes elsewhere moved to axis 1.
  llvm::SmallVector<int64_t> labelDims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != classAxis) labelDims.push_back(lt.getDimSize(d));
  auto labelsType = mlir::RankedTensorType::get(labelDims, b.getI64Type());
  mlir::BlockArgument labels =
      addArg(main, 1, labelsType, argAttrs(b, "labels", false), main.getLoc());
  autodiff::GradBuilder g(b, mlir::NameLoc::get(b.getStringAttr("loss")));
  mlir::Value lossLogits = logits, lossLabels = labels;
  if (rank > 2 && classAxis == rank - 1) {
    const int64_t positions = lt.getNumElements() / lt.getDimSize(classAxis);
    lossLogits = g.reshape(logits, {positions, lt.getDimSize(classAxis)});
    lossLabels = g.reshape(labels, {positions});
  } else if (classAxis != 1) {
    llvm::SmallVector<int64_t> perm = {0, classAxis};
    for (int64_t d = 1; d < rank; ++d)
      if (d != classAxis) perm.push_back(d);
    lossLogits = g.transpose(logits, perm);
  }
  const char* lossOp = options.loss == CompileOptions::Training::Loss::Nll
                           ? "NegativeLogLikelihoodLoss"
                           : "SoftmaxCrossEntropyLoss";
  llvm::SmallVector<mlir::NamedAttribute> lossAttrs = {g.strAttr("reduction", "mean")};
  if (options.ignoreIndex) lossAttrs.push_back(g.intAttr("ignore_index", *options.ignoreIndex));
  const int64_t classes = lt.getDimSize(classAxis);
  llvm::SmallVector<mlir::Value> lossOperands = {lossLogits, lossLabels};
  mlir::Value weight;  // [C], f32
  if (!options.classWeights.empty()) {
    if ((int64_t)options.classWeights.size() != classes)
      return main.emitError() << "training: " << options.classWeights.size() << " class weights for "
                              << classes << " classes (result 0's class axis)";
    std::vector<float> w(options.classWeights.begin(), options.classWeights.end());
    weight = createConstant(b, g.loc(), Tensor::fromVector<float>({classes}, w));
    lossOperands.push_back(weight);
  }
  mlir::Value loss = g.op(lossOp, lossOperands, lossAttrs);
  if (options.labelSmoothing > 0) {
    // PyTorch's label smoothing: (1 - eps) CE + eps / C * sum_i kept_i sum_c w_c (-log p_ic)
    // / sum_i kept_i w_{y_i} (w = 1 without class weights: eps * the mean over the labels
    // counted of -mean_c log_softmax, the cross-entropy against the uniform target).
    autodiff::GradBuilder ls(b, mlir::NameLoc::get(b.getStringAttr("loss/label_smoothing")));
    mlir::Value logp = ls.op("LogSoftmax", {lossLogits}, {ls.intAttr("axis", 1)});  // [N, C, d...]
    const size_t lossRank = autodiff::shapeOf(logp).size();
    if (weight) {  // w along axis 1
      llvm::SmallVector<int64_t> ws = {classes};
      for (size_t d = 2; d < lossRank; ++d) ws.push_back(1);
      logp = ls.mul(logp, ls.reshape(weight, ws));
    }
    mlir::Value perLabel = ls.neg(ls.reduceSum(logp, {1}, /*keepdims=*/false));  // [N, d...]
    llvm::SmallVector<int64_t> all(autodiff::shapeOf(perLabel).size());
    std::iota(all.begin(), all.end(), 0);
    // The numerator counts the labels kept (1, or 0 for the ignore index); the denominator
    // is their count, or with class weights the sum of their w[label] (as nll_loss's mean).
    mlir::Value kept, labelWeight, labelsForGather = lossLabels;
    if (options.ignoreIndex) {
      const IgnoreMask mask = ignoreMask(ls, b, lossLabels, *options.ignoreIndex);
      kept = mask.kept;
      mlir::Value zero = createConstant(b, ls.loc(), Tensor::fromVector<int64_t>({}, {0}));
      labelsForGather = ls.op("Where", {mask.ignored, zero, lossLabels});
    }
    labelWeight = kept;
    if (weight) {
      mlir::Value wl = ls.op("Gather", {weight, labelsForGather}, {ls.intAttr("axis", 0)});
      labelWeight = kept ? ls.mul(kept, wl) : wl;
    }
    mlir::Value smooth;
    if (labelWeight) {
      mlir::Value num = ls.reduceSum(kept ? ls.mul(perLabel, kept) : perLabel, all, false);
      smooth = ls.div(num, ls.reduceSum(labelWeight, all, false));
    } else {
      smooth = ls.reduceMean(perLabel, all, false);
    }
    loss = ls.add(ls.mulS(loss, 1 - options.labelSmoothing), ls.mulS(smooth, options.labelSmoothing / classes));
    if (ls.failed()) return mlir::failure();
  }
  if (g.failed()) return mlir::failure();
  llvm::SmallVector<mlir::Value> results = {loss};
  llvm::SmallVector<std::string> names = {"loss"};
  for (size_t i = 0; i < buffers.size(); ++i) {
    results.push_back(bufferUpdates[i]);
    names.push_back(valueName(buffers[i]) + "_new");
  }
  setResults(main, ret, results, names);
  return mlir::success();
}

std::string checkOptions(const CompileOptions::Training& o) {
  using T = CompileOptions::Training;
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  const bool sgd = o.optimizer == T::Optimizer::Sgd, rmsprop = o.optimizer == T::Optimizer::RmsProp,
             adagrad = o.optimizer == T::Optimizer::Adagrad, adam = !sgd && !rmsprop && !adagrad;
  const char* name = sgd ? "sgd" : rmsprop ? "rmsprop" : adagrad ? "adagrad" : "adam and adamw";
  if (!(o.learningRate >= 0)) return "--lr " + num(o.learningRate) + ": must be >= 0";
  if (!(o.weightDecay >= 0))
    return "--weight-decay " + num(o.weightDecay) + ": must be >= 0";
  if (!(o.clipNorm >= 0)) return "--clip-norm " + num(o.clipNorm) + ": must be >= 0 (0: off)";
  if (!(o.momentum >= 0)) return "--momentum " + num(o.momentum) + ": must be >= 0";
  if (!(o.labelSmoothing >= 0 && o.labelSmoothing <= 1))
    return "--label-smoothing " + num(o.labelSmoothing) + ": must be in [0, 1]";
  if (o.labelSmoothing > 0 && o.loss != T::Loss::CrossEntropy)
    return "--label-smoothing applies to --loss cross-entropy (PyTorch's nll_loss has none)";
  for (double w : o.classWeights)
    if (!(w >= 0)) return "--class-weights: " + num(w) + " is negative (each weight must be >= 0)";
  if (!(o.epsilon >= 0)) return "--eps " + num(o.epsilon) + ": must be >= 0";
  if (!sgd && !rmsprop && o.momentum != 0)
    return std::string("--momentum applies to sgd and rmsprop, not ") + name;
  if (!sgd && (o.dampening != 0 || o.nesterov))
    return std::string("--dampening and --nesterov apply to sgd only, not ") + name;
  if (sgd && o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    return "--nesterov requires a momentum > 0 and zero dampening (as torch.optim.SGD)";
  if (!adam) {
    if (o.epsilonMode != T::EpsilonMode::PyTorch)
      return std::string("--epsilon-mode keras applies to adam and adamw, not ") + name;
    if (o.amsgrad) return std::string("--amsgrad applies to adam and adamw, not ") + name;
  } else {
    if (!(o.beta1 >= 0 && o.beta1 < 1)) return "--beta1 " + num(o.beta1) + ": must be in [0, 1)";
    if (!(o.beta2 >= 0 && o.beta2 < 1)) return "--beta2 " + num(o.beta2) + ": must be in [0, 1)";
  }
  if (rmsprop) {
    if (!(o.alpha >= 0)) return "--alpha " + num(o.alpha) + ": must be >= 0";
  } else if (o.centered) {
    return std::string("--centered applies to rmsprop, not ") + name;
  }
  if (adagrad) {
    if (!(o.lrDecay >= 0)) return "--lr-decay " + num(o.lrDecay) + ": must be >= 0";
    if (!(o.initialAccumulator >= 0))
      return "--initial-accumulator " + num(o.initialAccumulator) + ": must be >= 0";
  } else if (o.lrDecay != 0 || o.initialAccumulator != 0) {
    return std::string("--lr-decay and --initial-accumulator apply to adagrad, not ") + name;
  }
  if (o.lrSchedule == T::LrSchedule::Step) {
    if (o.lrStepSize < 1)
      return "--lr-step-size " + std::to_string(o.lrStepSize) + ": must be >= 1";
    if (!(o.lrGamma > 0)) return "--lr-gamma " + num(o.lrGamma) + ": must be > 0";
  }
  if (o.lrSchedule == T::LrSchedule::Cosine) {
    if (o.warmupSteps < 0)
      return "--warmup-steps " + std::to_string(o.warmupSteps) + ": must be >= 0";
    if (o.totalSteps <= o.warmupSteps)
      return "cosine schedule: the total steps (" + std::to_string(o.totalSteps) +
             ") must exceed --warmup-steps (" + std::to_string(o.warmupSteps) + ")";
    if (!(o.lrMin >= 0 && o.lrMin <= o.learningRate))
      return "--lr-min " + num(o.lrMin) + ": must be in [0, --lr]";
  }
  return "";
}

bool usesStepCounter(const CompileOptions::Training& o) {
  using T = CompileOptions::Training;
  switch (o.optimizer) {
    case T::Optimizer::Adam:
    case T::Optimizer::AdamW:
      return true;  // the bias corrections
    case T::Optimizer::Sgd:
      if (o.momentum != 0) return true;  // the first step copies the gradient
      break;
    case T::Optimizer::Adagrad:
      if (o.lrDecay != 0) return true;
      break;
    case T::Optimizer::RmsProp:
      break;
  }
  return o.lrSchedule != T::LrSchedule::Constant;
}

namespace {

// lr_t (TrainingGraph.h, step 1), f32 []. `step` (completed steps) is null for the constant
// schedule, which then is a constant the canonicalizer can fold into its users.
mlir::Value learningRateAt(autodiff::GradBuilder& s, const CompileOptions::Training& o,
                           mlir::Value step, mlir::Value t, mlir::Type f32) {
  using T = CompileOptions::Training;
  const double lr = o.learningRate;
  switch (o.lrSchedule) {
    case T::LrSchedule::Constant:
      return s.scalar(lr, f32);
    case T::LrSchedule::Step: {
      // floor((t - 1) / S) = floor(step / S): an exact f32 division of integers (below 2^24)
      // is correctly rounded, so it lands on k exactly at multiples of S (step * (1 / S)
      // would not: 5 * f32(0.2) rounds below 1).
      mlir::Value k = s.op("Floor", {s.div(step, s.scalar((double)o.lrStepSize, f32))});
      return s.mulS(s.op("Pow", {s.scalar(o.lrGamma, f32), k}), lr);
    }
    case T::LrSchedule::Cosine: {
      const double w = (double)o.warmupSteps, total = (double)o.totalSteps;
      // u = min(t, T) - W; only used for t > W (the Where below picks the warm-up before).
      mlir::Value u = s.addS(s.op("Min", {t, s.scalar(total, f32)}), -w);
      mlir::Value cosine = s.op("Cos", {s.mulS(u, M_PI / (total - w))});
      mlir::Value decayed = s.addS(s.mulS(s.addS(cosine, 1.0), (lr - o.lrMin) / 2), o.lrMin);
      if (o.warmupSteps == 0) return decayed;
      mlir::Value warm = s.mulS(t, lr / w);
      return s.op("Where", {s.op("LessOrEqual", {t, s.scalar(w, f32)}), warm, decayed});
    }
  }
  return {};
}

// A Dropout that may train: training_mode present and not a constant false.
bool isTrainingDropout(mlir::Operation* op) {
  if (onnxOpType(op) != "Dropout" || op->getNumOperands() < 3) return false;
  mlir::Value mode = op->getOperand(2);
  if (!llvm::isa<mlir::RankedTensorType>(mode.getType())) return false;  // a tandem.none
  Tensor m;
  return !getConstantValue(mode, &m) || (m.numel() == 1 && m.data<uint8_t>()[0] != 0);
}

// The parameters' state slots (TrainingGraph.h): the arguments and their next values.
struct Slot {
  std::string suffix;
  llvm::SmallVector<mlir::BlockArgument> args;
  llvm::SmallVector<mlir::Value> next;
};

}  // namespace

mlir::LogicalResult appendOptimizer(mlir::ModuleOp module,
                                    const CompileOptions::Training& options) {
  using T = CompileOptions::Training;
  mlir::func::FuncOp main = getMainFunc(module);
  if (std::string bad = checkOptions(options); !bad.empty())
    return main.emitError() << "training: " << bad;
  auto ret = llvm::cast<mlir::func::ReturnOp>(main.getBody().front().getTerminator());
  // The trainable arguments, in order: their gradients are results 1...
  // The buffers' updates are results 1..K (buildLoss), the gradients follow.
  llvm::SmallVector<mlir::BlockArgument> params;
  size_t numBuffers = 0;
  for (mlir::BlockArgument a : main.getArguments()) {
    if (main.getArgAttr(a.getArgNumber(), kTrainableAttr)) params.push_back(a);
    if (main.getArgAttr(a.getArgNumber(), kBufferAttr)) ++numBuffers;
  }
  if (ret.getNumOperands() != 1 + numBuffers + params.size())
    return main.emitError() << "training: expected the loss, " << numBuffers
                            << " buffer updates and " << params.size() << " gradients, got "
                            << ret.getNumOperands() << " results";
  for (mlir::BlockArgument p : params)
    for (const char* state : {"step", "metric.loss_sum", "metric.correct", "metric.counted"})
      if (valueName(p) == state)
        return main.emitError() << "training: a parameter is named '" << state
                                << "', the name of a training state; rename the initializer";
  mlir::OpBuilder b(ret);
  mlir::Type f32 = b.getF32Type();
  auto scalarType = mlir::RankedTensorType::get({}, f32);

  // The training-mode Dropouts (forward, and the backward ones autodiff built to redraw their
  // masks) that have no counter of their own: each step must draw new masks.
  llvm::SmallVector<mlir::Operation*> dropouts;
  main.walk([&](mlir::Operation* op) {
    if (isTrainingDropout(op) && op->getNumOperands() == 3) dropouts.push_back(op);
  });

  // 1. The step counter (last argument) and the step's scalars: t, lr_t.
  mlir::Value step, t;
  if (usesStepCounter(options) || !dropouts.empty())
    step = addArg(main, main.getNumArguments(), scalarType, argAttrs(b, "step", false),
                  main.getLoc());
  autodiff::GradBuilder s(b, mlir::NameLoc::get(b.getStringAttr("optimizer/step")));
  if (step) t = s.addS(step, 1.0);
  // The Dropouts' counter is `step` (completed steps: 0 at the first step, whose masks are
  // those of a Dropout without a counter), state that a checkpoint keeps, so a resumed run
  // draws the masks the uninterrupted one would have.
  for (mlir::Operation* d : dropouts) d->insertOperands(3, {step});
  mlir::Value lr = learningRateAt(s, options, step, t, f32);
  if (s.failed()) return mlir::failure();

  // 2. The gradients, clipped to the global norm.
  llvm::SmallVector<mlir::Value> grads;
  for (size_t i = 0; i < params.size(); ++i) grads.push_back(ret.getOperand(1 + numBuffers + i));
  if (options.clipNorm > 0) {
    autodiff::GradBuilder c(b, mlir::NameLoc::get(b.getStringAttr("optimizer/clip_grad_norm")));
    mlir::Value sumSq;
    for (mlir::Value g : grads) {
      llvm::SmallVector<int64_t> axes;
      for (int64_t d = 0; d < (int64_t)autodiff::shapeOf(g).size(); ++d) axes.push_back(d);
      mlir::Value sq = c.mul(g, g);
      if (!axes.empty()) sq = c.reduceSum(sq, axes, /*keepdims=*/false);
      sumSq = sumSq ? c.add(sumSq, sq) : sq;
    }
    mlir::Value total = c.op("Sqrt", {sumSq});
    mlir::Value coef = c.op("Min", {c.div(c.scalar(options.clipNorm, f32), c.addS(total, 1e-6)),
                                    c.scalar(1.0, f32)});
    for (mlir::Value& g : grads) g = c.mul(g, coef);
    if (c.failed()) return mlir::failure();
  }

  // 3. The slots' arguments, slot-major, before `step`.
  const bool sgd = options.optimizer == T::Optimizer::Sgd;
  const bool rmsprop = options.optimizer == T::Optimizer::RmsProp;
  const bool adagrad = options.optimizer == T::Optimizer::Adagrad;
  const bool adam = !sgd && !rmsprop && !adagrad;
  llvm::SmallVector<Slot> slots;
  if (sgd && options.momentum != 0) slots.push_back({".momentum_buffer", {}, {}});
  if (adam) {
    slots.push_back({".m", {}, {}});
    slots.push_back({".v", {}, {}});
    if (options.amsgrad) slots.push_back({".v_max", {}, {}});
  }
  // RMSprop's slots in torch's state order: square_avg, momentum_buffer, grad_avg.
  int rmsBuf = -1, rmsGradAvg = -1;
  if (rmsprop) {
    slots.push_back({".square_avg", {}, {}});
    if (options.momentum != 0) {
      rmsBuf = (int)slots.size();
      slots.push_back({".momentum_buffer", {}, {}});
    }
    if (options.centered) {
      rmsGradAvg = (int)slots.size();
      slots.push_back({".grad_avg", {}, {}});
    }
  }
  if (adagrad) slots.push_back({".sum", {}, {}});
  for (Slot& slot : slots)
    for (mlir::BlockArgument p : params)
      slot.args.push_back(addArg(main, main.getNumArguments() - (step ? 1 : 0), p.getType(),
                                 argAttrs(b, valueName(p) + slot.suffix, false),
                                 main.getLoc()));

  // Adam's step-dependent scalars: the step size and the divisor of sqrt(v') (PyTorch), or
  // the whole bias correction in the step size (Keras).
  mlir::Value stepSize, sqrtBc2;
  const double b1 = options.beta1, b2 = options.beta2, eps = options.epsilon;
  const double wd = options.weightDecay;
  if (adam) {
    mlir::Value bc1 = s.rsubS(1.0, s.op("Pow", {s.scalar(b1, f32), t}));
    sqrtBc2 = s.op("Sqrt", {s.rsubS(1.0, s.op("Pow", {s.scalar(b2, f32), t}))});
    stepSize = s.div(lr, bc1);
    if (options.epsilonMode == T::EpsilonMode::Keras) stepSize = s.mul(stepSize, sqrtBc2);
    if (s.failed()) return mlir::failure();
  }
  // Adagrad's decayed step size, lr_t / (1 + (t - 1) lr_decay) = lr_t / (1 + step lr_decay).
  if (adagrad && options.lrDecay != 0) {
    stepSize = s.div(lr, s.addS(s.mulS(step, options.lrDecay), 1.0));
    if (s.failed()) return mlir::failure();
  }

  // 4. Per parameter, the update.
  llvm::SmallVector<mlir::Value> results = {ret.getOperand(0)};
  llvm::SmallVector<std::string> names = {"loss"};
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string name = valueName(params[i]);
    const char* optimizerName = sgd                                          ? "/sgd"
                                : rmsprop                                    ? "/rmsprop"
                                : adagrad                                    ? "/adagrad"
                                : options.optimizer == T::Optimizer::Adam ? "/adam"
                                                                             : "/adamw";
    autodiff::GradBuilder g(b, mlir::NameLoc::get(b.getStringAttr(name + optimizerName)));
    mlir::Value p = params[i], grad = grads[i];
    if (wd != 0 && options.optimizer != T::Optimizer::AdamW) grad = g.add(grad, g.mulS(p, wd));
    if (sgd) {
      if (options.momentum != 0) {
        const double mu = options.momentum;
        mlir::Value later =
            g.add(g.mulS(slots[0].args[i], mu), g.mulS(grad, 1 - options.dampening));
        // The first step copies the gradient (torch: buf = clone(d_p)), whatever the dampening.
        mlir::Value first = g.op("Equal", {step, g.scalar(0.0, f32)});
        mlir::Value buf = g.op("Where", {first, grad, later});
        slots[0].next.push_back(buf);
        grad = options.nesterov ? g.add(grad, g.mulS(buf, mu)) : buf;
      }
      results.push_back(g.sub(p, g.mul(grad, lr)));
    } else if (rmsprop) {
      const double a = options.alpha;
      mlir::Value sq = g.add(g.mulS(slots[0].args[i], a), g.mulS(g.mul(grad, grad), 1 - a));
      slots[0].next.push_back(sq);
      mlir::Value var = sq;
      if (rmsGradAvg >= 0) {  // torch: square_avg.addcmul(grad_avg, grad_avg, value=-1)
        mlir::Value ga = g.add(g.mulS(slots[rmsGradAvg].args[i], a), g.mulS(grad, 1 - a));
        slots[rmsGradAvg].next.push_back(ga);
        var = g.sub(sq, g.mul(ga, ga));
      }
      mlir::Value step = g.div(grad, g.addS(g.op("Sqrt", {var}), eps));
      if (rmsBuf >= 0) {  // the buffer starts at 0, so its first value is g / avg
        step = g.add(g.mulS(slots[rmsBuf].args[i], options.momentum), step);
        slots[rmsBuf].next.push_back(step);
      }
      results.push_back(g.sub(p, g.mul(step, lr)));
    } else if (adagrad) {
      mlir::Value sum = g.add(slots[0].args[i], g.mul(grad, grad));
      slots[0].next.push_back(sum);
      mlir::Value held = options.initialAccumulator != 0 ? g.addS(sum, options.initialAccumulator) : sum;
      mlir::Value update = g.div(grad, g.addS(g.op("Sqrt", {held}), eps));
      results.push_back(g.sub(p, g.mul(update, stepSize ? stepSize : lr)));
    } else {
      if (options.optimizer == T::Optimizer::AdamW && wd != 0)
        p = g.mul(p, g.rsubS(1.0, g.mulS(lr, wd)));
      mlir::Value m1 = g.add(g.mulS(slots[0].args[i], b1), g.mulS(grad, 1 - b1));
      mlir::Value v1 = g.add(g.mulS(slots[1].args[i], b2), g.mulS(g.mul(grad, grad), 1 - b2));
      // AMSGrad: the running maximum of v' in the denominator (torch.maximum, then sqrt).
      mlir::Value vMax = options.amsgrad ? g.op("Max", {slots[2].args[i], v1}) : v1;
      mlir::Value sqrtV = g.op("Sqrt", {vMax});
      mlir::Value denom = options.epsilonMode == T::EpsilonMode::Keras
                              ? g.addS(sqrtV, eps)
                              : g.addS(g.div(sqrtV, sqrtBc2), eps);
      results.push_back(g.sub(p, g.mul(g.div(m1, denom), stepSize)));
      slots[0].next.push_back(m1);
      slots[1].next.push_back(v1);
      if (options.amsgrad) slots[2].next.push_back(vMax);
    }
    names.push_back(name + "_new");
    if (g.failed()) return mlir::failure();
  }
  for (size_t i = 0; i < numBuffers; ++i) {
    results.push_back(ret.getOperand(1 + i));
    names.push_back(main.getResultAttrOfType<mlir::StringAttr>(1 + i, kNameAttr).str());
  }
  for (const Slot& slot : slots)
    for (size_t i = 0; i < params.size(); ++i) {
      results.push_back(slot.next[i]);
      names.push_back(valueName(params[i]) + slot.suffix + "_new");
    }
  if (step) {
    results.push_back(t);
    names.push_back("step_new");
  }

  // 5. Metrics: the loss summed, and the samples whose argmax is their label counted; with an
  //    ignore index, the labels counted too, and the loss summed weighted by them.
  if (options.metrics) {
    mlir::Operation* lossOp = buildLossOp(main);
    if (!lossOp)
      return main.emitError("training: metrics need buildLoss's loss (SoftmaxCrossEntropyLoss or "
                            "NegativeLogLikelihoodLoss of the logits and the labels)");
    mlir::Value logits = lossOp->getOperand(0), labels = lossOp->getOperand(1);
    mlir::Value lossSum = addArg(main, main.getNumArguments(), scalarType,
                                 argAttrs(b, "metric.loss_sum", false), main.getLoc());
    mlir::Value correct = addArg(main, main.getNumArguments(), scalarType,
                                 argAttrs(b, "metric.correct", false), main.getLoc());
    autodiff::GradBuilder m(b, mlir::NameLoc::get(b.getStringAttr("metrics")));
    // The loss op's operands are [N, C, d...] and [N, d...]: every label position counts
    // (every one not ignored).
    llvm::SmallVector<int64_t> allAxes(autodiff::shapeOf(labels).size());
    std::iota(allAxes.begin(), allAxes.end(), 0);
    auto f32Of = [&](mlir::Value v) { return m.op("Cast", {v}, {m.intAttr("to", 1)}); };
    mlir::Value predicted = m.op("ArgMax", {logits}, {m.intAttr("axis", 1), m.intAttr("keepdims", 0)});
    mlir::Value hits = f32Of(m.op("Equal", {predicted, labels}));
    mlir::Value stepLoss = ret.getOperand(0), counted, countedNew;
    if (options.ignoreIndex) {
      counted = addArg(main, main.getNumArguments(), scalarType, argAttrs(b, "metric.counted", false),
                       main.getLoc());
      mlir::Value kept = ignoreMask(m, b, labels, *options.ignoreIndex).kept;
      hits = m.mul(hits, kept);
      mlir::Value n = m.reduceSum(kept, allAxes, /*keepdims=*/false);
      countedNew = m.add(counted, n);
      // loss * n, 0 for a step with no label counted (its mean loss is 0/0).
      stepLoss = m.op("Where", {m.op("Greater", {n, m.scalar(0, f32)}), m.mul(stepLoss, n), m.scalar(0, f32)});
    }
    results.push_back(m.add(lossSum, stepLoss));
    names.push_back("metric.loss_sum_new");
    results.push_back(m.add(correct, m.reduceSum(hits, allAxes, /*keepdims=*/false)));
    names.push_back("metric.correct_new");
    if (countedNew) {
      results.push_back(countedNew);
      names.push_back("metric.counted_new");
    }
    if (m.failed()) return mlir::failure();
    // With the loss, wherever the placer puts it: metrics that the loss's device sums need no
    // per-step copy of the logits, and a step whose loss is on a GPU stays wholly there. The
    // placer prices them at 0 (kMetricAttr): the loss's own costs decide.
    llvm::SmallVector<mlir::Operation*> members = {lossOp};
    main.walk([&](mlir::Operation* op) {
      if (op != lossOp && nodeName(op->getLoc()) == "metrics") members.push_back(op);
    });
    for (mlir::Operation* op : members) {
      if (op != lossOp) op->setAttr(kMetricAttr, b.getUnitAttr());
      addToColocationGroup(op, "metrics");
    }
  }
  setResults(main, ret, results, names);
  return mlir::success();
}

void dropLossOutput(mlir::ModuleOp module) {
  mlir::func::FuncOp main = getMainFunc(module);
  if (!main) return;
  auto ret = llvm::cast<mlir::func::ReturnOp>(main.getBody().front().getTerminator());
  for (unsigned i = 0; i < main.getNumResults(); ++i) {
    auto name = main.getResultAttrOfType<mlir::StringAttr>(i, kNameAttr);
    if (!name || name.getValue() != "loss") continue;
    ret->eraseOperand(i);
    main.eraseResult(i);
    return;
  }
}

}  // namespace tandem::training
