// The training step graph: an inference @main (x -> logits, or log-probabilities for the nll
// loss) becomes one optimizer step,
// @main(x, labels, params..., buffers..., slots..., [step], [metrics]) -> (loss, params_new...,
// buffers_new..., slots_new..., [step_new], [metrics_new]).
#pragma once
#include <string>

#include "compiler/Compiler.h"
#include "mlir/IR/BuiltinOps.h"

namespace tandem::training {

/// An empty string when `o` is valid, else what is wrong, naming the option as the CLI flag
/// (PyTorch's checks plus the schedule's): learningRate, weightDecay, momentum, epsilon,
/// clipNorm >= 0; nesterov needs momentum > 0 and dampening 0; momentum only for sgd and
/// rmsprop, dampening and nesterov only for sgd; epsilonMode keras and amsgrad only for
/// adam/adamw, 0 <= beta1, beta2 < 1 there; alpha >= 0 for rmsprop, centered only there;
/// lrDecay, initialAccumulator >= 0 and only for adagrad; step: lrStepSize >= 1, lrGamma > 0;
/// cosine: warmupSteps >= 0, totalSteps > warmupSteps, 0 <= lrMin <= learningRate.
std::string checkOptions(const CompileOptions::Training& o);

/// Whether the optimizer options alone give the step graph the `step` state (see
/// appendOptimizer); a training-mode Dropout in the model also does.
bool usesStepCounter(const CompileOptions::Training& o);

/// Before autodiff. Turns @main's parameters into arguments and its first result (logits
/// [N, C], f32; log-probabilities for Loss::Nll) into the loss:
///  - parameters: the f32 constants (initializers) that are operand 1 or 2 (weight, bias) of a
///    Conv, ConvTranspose, Gemm or MatMul (directly or through up to four Transpose, Reshape,
///    Flatten, Squeeze, Unsqueeze or Identity ops, as torch.onnx writes a Linear's weight
///    without constant folding), the bias row an Add adds to a MatMul's or Gemm's result, (scale, B)
///    of a BatchNormalization, LayerNormalization, GroupNormalization or InstanceNormalization,
///    or the table a Gather or EmbeddingBag reads at ids that are no constant (PyTorch's
///    nn.Linear, nn.Conv*, nn.*Norm and nn.Embedding parameters), or every f32 constant with
///    `allFloatConstants` but the buffers below and a Dropout's ratio, or with `parameterNames`
///    the f32 constants of those names (but the buffers and a Dropout's ratio); less those
///    named in `frozenNames`, which stay constants (an error when that leaves none); each becomes a tandem.trainable argument
///    named after its initializer (tandem.name), in the order the constants appear, inserted
///    after the existing arguments;
///  - buffers (batchNormInTraining): the input_mean and input_var of every BatchNormalization
///    in inference form, or in training mode with its running results unused (PyTorch's export
///    with TrainingMode.TRAINING), become arguments after the parameters (tandem.buffer, not
///    trainable; named after their initializers, initial value = the initializer), mean then
///    var per BatchNormalization in program order. Each must be an f32 initializer read by that
///    op alone (else an error: it could not be written back; PyTorch's other export modes
///    share equal initializers through Identity). A training-mode one whose running results
///    the graph reads is left as it is;
///  - (stops here with `forwardOnly`: @main(x, params..., buffers...) keeps its results; the
///    BatchNormalizations keep their mode, the inference ones normalising with the buffers)
///  - those BatchNormalizations get training_mode=1 (batch statistics, PyTorch's
///    model.train()) and the buffers' next values become results `<buffer>_new` after the loss:
///    running_mean' = m * running_mean + (1 - m) * mean(x), running_var' = m * running_var +
///    (1 - m) * var_unbiased(x) over N and the spatial dims (M values per channel, M > 1, else
///    an error naming the op), m the model's momentum (ONNX's; PyTorch's momentum is 1 - m)
///    and the unbiased variance PyTorch keeps (ONNX's training mode keeps the population
///    variance: the step rescales it by M / (M - 1));
///  - a `labels` argument, i64, inserted right after x (argument 0): result 0's dims without
///    options.classAxis, [N] for logits [N, C], [N, T] for [N, T, V] (class axis -1), [N, H, W]
///    for [N, C, H, W] (class axis 1);
///  - the only result: `loss`, f32 [], reduction "mean" over every label (the batch, and the
///    positions):
///    cross-entropy: SoftmaxCrossEntropyLoss(logits, labels) = mean(logsumexp(z) - z[label]);
///    nll: NegativeLogLikelihoodLoss(logp, labels) = mean(-logp[label]) (no softmax: the model's
///    LogSoftmax is differentiated like any other op). Classes on the last axis of a rank > 2
///    result are reshaped to [N * d..., C] for the loss op (labels to [N * d...]), classes on
///    another axis but 1 transposed to axis 1 (the loss op's [N, C, d...]). With
///    options.ignoreIndex the loss op has it as ignore_index: the mean is over the labels that
///    are not it.
/// Shapes must be static (bind the batch dim first). Errors (diagnostics on @main): no @main,
/// result 0 not f32 of rank >= 2, a class axis that is not one of its axes 1.., no parameter found, an unnamed parameter or buffer, statistics
/// that cannot be buffers, one BatchNormalization value per channel in the batch.
mlir::LogicalResult buildLoss(mlir::ModuleOp module, const CompileOptions::Training& options);

/// After autodiff (results: loss, the buffers' updates, then one `<param>_grad` per trainable
/// argument). Replaces the gradients with the updated parameters and appends the optimizer
/// state. Every formula is
/// PyTorch's (torch.optim.SGD / Adam / AdamW, torch.nn.utils.clip_grad_norm_, StepLR) unless
/// it says Keras; all are element-wise tandem ops in the graph, placed and fused like the rest.
///
/// State convention (the contract with the host loop and device-resident variables):
///   @main(x, labels, params..., buffers..., slots..., [step], [metric.loss_sum,
///   metric.correct, [metric.counted]]) -> (loss, params_new..., buffers_new..., slots_new...,
///   [step_new], [metric.loss_sum_new, metric.correct_new, [metric.counted_new]]).
///   The state arguments are the parameters (tandem.trainable, initial value = the
///   initializer), then buildLoss's buffers (initial value = the initializer; updated by the
///   forward pass, not the optimizer), then the optimizer slots (slot-major: every parameter's first slot, then
///   every parameter's second slot), then `step` when used, then with `metrics`
///   `metric.loss_sum` and `metric.correct` (and `metric.counted` with an ignore index). A
///   state argument named N (tandem.name) has the result named `N_new`, and result 1 + i is
///   the next value of argument 2 + i. Every other state starts at zeros. Slots: sgd with momentum > 0:
///   `<param>.momentum_buffer`; adam, adamw: `<param>.m`, `<param>.v`, and with amsgrad
///   `<param>.v_max`; rmsprop: `<param>.square_avg`, with momentum > 0
///   `<param>.momentum_buffer`, centered `<param>.grad_avg`; adagrad: `<param>.sum` (the sum
///   of g^2 over the steps: PyTorch's state `sum` less initialAccumulator) (f32, the
///   parameter's shape). `step` is f32 [] (counts completed steps,
///   0 at the start); it is state when anything depends on t (adam, adamw, sgd momentum,
///   adagrad's lrDecay, a schedule other than constant, a training-mode Dropout), and
///   `step_new` = t. Below
///   t = step + 1 is the 1-based step.
///
/// Dropout: every training-mode Dropout (training_mode not a constant false) without a counter
/// operand, forward and backward (autodiff's, which redraws the forward mask), gets `step`
/// (not t) as its counter (operand 3, Tandem's extension): a new mask each step, the same mask
/// for the same `step`, so resuming from a checkpoint reproduces the masks. A Dropout that
/// already has a counter keeps it.
///
/// Per step, with g the parameter's gradient:
///  1. lr_t (schedule; lr = learningRate):
///       constant: lr_t = lr
///       step:     lr_t = lr * gamma^floor((t - 1) / S)      (StepLR stepped once per step)
///       cosine:   lr_t = lr * t / W                          for t <= W (warm-up; W may be 0)
///                 lr_t = lr_min + (lr - lr_min) * (1 + cos(pi * (min(t, T) - W) / (T - W))) / 2
///                                                            for t > W (lr_min once t >= T)
///  2. clipping (clipNorm = c > 0): total = sqrt(sum over all gradients of sum(g^2));
///       coef = min(1, c / (total + 1e-6)); g = coef * g for every parameter.
///  3. sgd (mu = momentum, d = dampening, wd = weightDecay):
///       g = g + wd * p                                     (if wd != 0)
///       if mu != 0: buf' = g at t = 1, else mu * buf + (1 - d) * g   (Where(step == 0, ...))
///                   g = nesterov ? g + mu * buf' : buf'
///       p' = p - lr_t * g
///  4. adam (b1, b2, eps): g = g + wd * p (if wd != 0); adamw: p = p * (1 - lr_t * wd) instead
///     (decoupled, g untouched). Then
///       m' = b1 m + (1 - b1) g,  v' = b2 v + (1 - b2) g^2,  bc1 = 1 - b1^t,  bc2 = 1 - b2^t
///       PyTorch eps (default): p' = p - lr_t / bc1 * m' / (sqrt(v') / sqrt(bc2) + eps)
///       Keras eps:             p' = p - lr_t * sqrt(bc2) / bc1 * m' / (sqrt(v') + eps)
///     amsgrad (torch.optim.Adam(amsgrad=True)): v_max' = max(v_max, v'), which takes v''s
///     place in both denominators.
///     ONNX's Adam-1 places eps like Keras; the two differ while v' is small.
///  5. rmsprop (torch.optim.RMSprop: a = alpha, mu = momentum): g = g + wd * p (if wd != 0);
///       sq' = a sq + (1 - a) g^2
///       centered: ga' = a ga + (1 - a) g,  avg = sqrt(sq' - ga'^2) + eps;  else avg = sqrt(sq') + eps
///       mu > 0: buf' = mu buf + g / avg,  p' = p - lr_t buf';  else p' = p - lr_t g / avg
///  6. adagrad (torch.optim.Adagrad): g = g + wd * p (if wd != 0);  sum' = sum + g^2;
///       p' = p - lr_t / (1 + (t - 1) lrDecay) * g / (sqrt(sum' + initialAccumulator) + eps)
///  7. metrics (options.metrics), f32 [] each, starting at 0:
///       metric.loss_sum' = metric.loss_sum + loss
///       metric.correct'  = metric.correct + sum over every label of (ArgMax(logits over the
///                          class axis) == label)   (the batch's samples, or its positions)
///     (for nll the ArgMax of the log-probabilities). With options.ignoreIndex = k the labels
///     equal to k count for nothing, and a third, after metric.correct:
///       n                = sum over every label of (label != k)
///       metric.counted'  = metric.counted + n
///       metric.loss_sum' = metric.loss_sum + (n > 0 ? loss * n : 0)   (loss: the mean over n)
///       metric.correct'  = metric.correct + sum of (ArgMax == label and label != k). Nothing depends on them: they are read
///     between steps (Trainer) and zeroed by the caller. The ops computing them share the
///     loss's colocation group ("metrics") and carry tandem.metric: the placer prices them at
///     0, so they go where the loss goes and do not decide where that is.
/// Errors (diagnostics on @main): the options checkOptions refuses, results that are not the
/// loss and one gradient per parameter, a parameter named like a state (step, metric.*),
/// metrics on a loss that is not buildLoss's.
mlir::LogicalResult appendOptimizer(mlir::ModuleOp module, const CompileOptions::Training& options);

/// After makeStateResident, with metrics: removes the result named `loss`, so the step returns
/// nothing and a run waits for nothing (the loss is summed into metric.loss_sum, read every N
/// steps by the Trainer). The placer then prices no per-run copy of the loss or wait for it.
void dropLossOutput(mlir::ModuleOp module);

}  // namespace tandem::training
