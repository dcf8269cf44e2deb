// The training step graph: an inference @main (x -> logits) becomes one optimizer step,
// @main(x, labels, params..., optimizer state..., [step]) -> (loss, new params..., new state...).
#pragma once
#include "compiler/Compiler.h"
#include "mlir/IR/BuiltinOps.h"

namespace tandem::training {

/// Before autodiff. Turns @main's parameters into arguments and its first result (logits
/// [N, C], f32) into the loss:
///  - parameters: the f32 constants (initializers) that are operand 1 or 2 (weight, bias) of a
///    Conv, Gemm or MatMul, or every f32 constant with `allFloatConstants`; each becomes a
///    tandem.trainable argument named after its initializer (tandem.name), in the order the
///    constants appear, inserted after the existing arguments;
///  - (stops here with `forwardOnly`: @main(x, params...) keeps its results)
///  - a `labels` argument, i64 [N], inserted right after x (argument 0);
///  - the only result: `loss` = SoftmaxCrossEntropyLoss(logits, labels, reduction "mean"), f32 [].
/// Shapes must be static (bind the batch dim first). Errors (diagnostics on @main): no @main,
/// logits not f32 [N, C], no parameter found, an unnamed parameter.
mlir::LogicalResult buildLoss(mlir::ModuleOp module, const CompileOptions::Training& options);

/// After autodiff (results: loss, then one `<param>_grad` per trainable argument). Replaces the
/// gradients with the updated parameters and appends the optimizer state:
///  - sgd: p' = p - lr * g. No state.
///  - adam (PyTorch's torch.optim.Adam, not ONNX Adam-1; see README "Training"):
///      m' = b1 m + (1 - b1) g,  v' = b2 v + (1 - b2) g^2,
///      p' = p - lr / (1 - b1^t) * m' / (sqrt(v') / sqrt(1 - b2^t) + eps)
///    with state arguments `<param>.m`, `<param>.v` (f32, the parameter's shape, zeros at t = 0)
///    and one `step` argument (f32 [], t = 1 for the first step). ONNX's Adam-1 applies eps
///    inside the bias correction (sqrt(v') + eps, then scales by sqrt(1 - b2^t)), which differs
///    from PyTorch while v' is small, so it is composed from element-wise ops here.
/// Results: loss, the new parameters (named `<param>_new`), then the new m's and v's
/// (`<param>.m_new`, `<param>.v_new`): result 1 + i replaces argument 2 + i (x and labels
/// first), so a host loop feeds results 1.. back as the next step's arguments 2...
mlir::LogicalResult appendOptimizer(mlir::ModuleOp module, const CompileOptions::Training& options);

}  // namespace tandem::training
