// The compiler's public entry: run the pass pipeline on a tandem module and produce a Plan.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/Plan.pb.h"
#include "compiler/placement/DeviceSpec.h"
#include "compiler/placement/Placer.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/Tensor.h"

namespace llvm { class raw_ostream; }

namespace tandem {

struct CompileOptions {
  /// Symbolic dims bound by name (ONNX dim_param), e.g. {"N", 32}.
  std::map<std::string, int64_t> dimBindings;
  /// Exact shapes per graph input name; wins over dimBindings.
  std::map<std::string, Shape> inputShapes;
  /// Binding for symbolic dims not named above (a note is emitted when it is used).
  int64_t defaultDim = 1;
  /// Devices the plan targets (DESIGN §2 DeviceSet). Unset: the live devices
  /// (DeviceSet::live(): this CPU and every visible GPU). A target list such as
  /// "cpu,cuda:0=h100" (--target) or "cpu,cpu:1" is parsed once, by DeviceSet::parse; plans
  /// can target hardware that is not present.
  std::optional<DeviceSet> devices;
  /// Calibration profile JSON written by `tandem calibrate` (--profile); "" = built-in specs.
  std::string profilePath;
  /// Placement policy (--placement).
  placement::PlacementPolicy placementPolicy = placement::PlacementPolicy::Cost;
  /// User pins (placement::NodePin), soft unless strictPlacement.
  std::vector<placement::NodePin> pins;
  bool strictPlacement = false;
  /// Training (--tandem-autodiff, passes/Passes.td): when set, d loss / d each wrt value is
  /// appended to @main's results after infer-shapes. `loss` is the result index of the scalar
  /// loss; `wrt` names inputs or constants besides those marked tandem.trainable. Unset: the
  /// graph is compiled as given (inference).
  struct Autodiff {
    unsigned loss = 0;
    std::vector<std::string> wrt;
  };
  std::optional<Autodiff> autodiff;
  /// Training step (compiler/training/TrainingGraph.h, `tandem train`): when set, @main's first
  /// result (logits [N, C], or log-probabilities for Loss::Nll) and its parameters become one
  /// optimizer step, @main(x, labels, params..., slots..., [step], [metrics]) -> (loss, new
  /// params..., new slots..., [step_new], [new metrics]);
  /// `autodiff` is then ignored. The batch dim must be bound (inputShapes) so every shape is
  /// static. The exact update formulas are in TrainingGraph.h; training::checkOptions says
  /// which values are accepted.
  struct Training {
    /// The loss of result 0 against the labels, reduction mean over the batch:
    /// CrossEntropy: SoftmaxCrossEntropyLoss, result 0 is logits (torch nn.CrossEntropyLoss);
    /// Nll: NegativeLogLikelihoodLoss, result 0 is already log-probabilities (the model ends
    /// in LogSoftmax over axis 1; torch nn.NLLLoss). Nll on plain logits is not refused (as in
    /// PyTorch) but is not a cross-entropy: -mean(logit of the label), unbounded below.
    enum class Loss { CrossEntropy, Nll };
    Loss loss = Loss::CrossEntropy;
    /// CrossEntropy only, in [0, 1]: PyTorch's cross_entropy(label_smoothing=eps), the target
    /// (1 - eps) one-hot + eps / C: loss = (1 - eps) CE + eps mean over the labels counted of
    /// (-mean over the classes of log_softmax). 0: plain cross-entropy.
    double labelSmoothing = 0;
    /// Not empty: a weight per class (C of them, >= 0; PyTorch's CrossEntropyLoss(weight=w) /
    /// NLLLoss(weight=w)): the loss is sum_i w[y_i] loss_i / sum_i w[y_i] over the labels
    /// counted (ONNX's weighted mean), and label smoothing's term is PyTorch's weighted one,
    /// sum_i sum_c w[c] (-log p_ic) / (C sum_i w[y_i]).
    std::vector<double> classWeights;
    /// The axis of result 0 that holds the classes. Result 0 is [N, C] (one label per sample,
    /// labels i64 [N]) or of rank r > 2 with the classes on this axis and the labels the
    /// other dims: -1 (the default, the last axis) for a language model's [N, T, V] (one
    /// label per position, labels [N, T]: PyTorch's cross_entropy(logits.view(-1, V),
    /// targets.view(-1))), 1 for an image segmenter's [N, C, H, W] (labels [N, H, W]: PyTorch's
    /// CrossEntropyLoss on [N, C, d...]). The loss is the mean over every label. Negative
    /// values count from the end; it must name an axis in [1, r) (buildLoss's error otherwise).
    int classAxis = -1;
    /// Set: a label equal to it counts for nothing (PyTorch's cross_entropy ignore_index, ONNX's
    /// ignore_index: a padded position of a language model's batch, usually -100): the step's
    /// loss is the mean over the other labels (NaN when a step has none, as PyTorch's; its
    /// gradient is then 0) and, with metrics, the metric `metric.counted` counts them so that
    /// accuracy and mean loss are over the labels counted. It may lie inside [0, C) (a pad
    /// token that is also a class). Unset: every label counts and must be in [0, C).
    std::optional<int64_t> ignoreIndex;
    /// torch.optim.SGD, Adam, AdamW, RMSprop, Adagrad.
    enum class Optimizer { Sgd, Adam, AdamW, RmsProp, Adagrad };
    Optimizer optimizer = Optimizer::Adam;
    double learningRate = 1e-3;  // the base lr (>= 0); the schedule scales it per step
    double momentum = 0;   // SGD, RMSprop (PyTorch's default 0; >= 0)
    double dampening = 0;  // SGD (PyTorch's default)
    bool nesterov = false;               // SGD; needs momentum > 0 and dampening 0
    /// L2 added to the gradient (sgd, adam, rmsprop, adagrad) or decoupled p *= 1 - lr * wd
    /// (adamw); >= 0. PyTorch's AdamW defaults to 1e-2; this struct does not guess: 0 is 0.
    double weightDecay = 0;
    /// Adam's betas (PyTorch's defaults); eps for Adam, AdamW, RMSprop (PyTorch's 1e-8) and
    /// Adagrad (PyTorch's default there is 1e-10: set it).
    double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
    double alpha = 0.99;    // RMSprop: the squares' smoothing constant (>= 0)
    bool centered = false;  // RMSprop: divide by the gradient's estimated standard deviation
    double lrDecay = 0;     // Adagrad: lr_t / (1 + (t - 1) lrDecay) (>= 0)
    double initialAccumulator = 0;  // Adagrad: the sum of squares' starting value (>= 0)
    /// Where Adam's eps goes: PyTorch's sqrt(v_hat) + eps (eps bias-corrected with v), or
    /// tf.keras's sqrt(v) + eps with the bias corrections folded into the step size.
    enum class EpsilonMode { PyTorch, Keras };
    EpsilonMode epsilonMode = EpsilonMode::PyTorch;
    /// Adam, AdamW: the AMSGrad variant (torch.optim.Adam(amsgrad=True)): the denominator
    /// uses the running maximum of v (slot `<param>.v_max`) instead of v.
    bool amsgrad = false;
    /// The learning rate of step t (1-based), computed in the graph from the `step` state.
    enum class LrSchedule { Constant, Step, Cosine };
    LrSchedule lrSchedule = LrSchedule::Constant;
    int64_t lrStepSize = 1;  // step: lr * lrGamma^floor((t - 1) / lrStepSize) (torch StepLR)
    double lrGamma = 0.1;
    int64_t warmupSteps = 0;  // cosine: linear warm-up over steps 1..warmupSteps
    int64_t totalSteps = 0;   // cosine: the step where lr reaches lrMin (> warmupSteps)
    double lrMin = 0;         // cosine: the floor (0 <= lrMin <= learningRate)
    /// > 0: clip the gradients to this global L2 norm first (torch clip_grad_norm_); 0: off.
    double clipNorm = 0;
    /// Every f32 constant is a parameter, not only the weights and biases of Conv, Gemm and
    /// MatMul (a MatMul's bias: the row an Add adds to it), normalization scales and biases and
    /// embedding tables (TrainingGraph.h).
    bool allFloatConstants = false;
    /// When not empty, instead of either rule above: exactly the f32 constants with these
    /// names (ONNX initializer names, which the importer gives the constants) are parameters,
    /// BatchNorm statistics staying buffers and a Dropout's ratio never one; a name that no f32
    /// constant has (an initializer folded at import, or unused) is skipped. `tandem train
    /// --all-params` passes every f32 initializer: PyTorch's parameters, not the Constant nodes
    /// an export writes (a causal mask of -inf, LayerNorm's epsilon, Pow's exponent).
    std::vector<std::string> parameterNames;
    /// F32 constants with these names never become parameters, whichever rule above picks them
    /// (PyTorch's requires_grad=False: fine-tuning a head over a frozen backbone): they stay
    /// constants, no gradient reaches them, and the backward pass stops where none is needed.
    /// A name no constant has is skipped. `tandem train --freeze REGEX` passes the f32
    /// initializers whose names match.
    std::vector<std::string> frozenNames;
    /// Only the parameters become arguments, @main(x, params...) -> (logits, ...): the forward
    /// plan that evaluates the parameters being trained.
    bool forwardOnly = false;
    /// Parameters and optimizer state as variables resident on their device
    /// (compiler/training/Variables.h): the step plan takes only the batch (x, labels) and
    /// returns the loss (the Trainer sets it). Off: they are plan inputs and outputs, fed back
    /// by the caller.
    bool residentState = false;
    /// With residentState: each update that can be is written straight into its variable's
    /// buffer (passes/PlanMemory.cpp says when), the rest computed into the arena and copied
    /// back after the run. Off: every update is copied back (the same results, bit for bit;
    /// `tandem train --copy-back-updates`, for comparison).
    bool updatesInPlace = true;
    /// The model's inference Dropouts run in training mode in the step (Keras's fit); the
    /// forward plan (forwardOnly) keeps them as they are.
    bool dropoutInTraining = true;
    /// The model's inference BatchNormalizations whose input_mean / input_var are initializers
    /// train as PyTorch's model.train() does: batch statistics in the step, and the
    /// initializers become buffers (state updated each step: running_mean / running_var with
    /// the model's momentum and the unbiased batch variance), which the forward plan
    /// (forwardOnly) reads as inputs and `tandem train` writes back. Off: they stay frozen
    /// (inference form, the initializers' statistics). Their scale and B are parameters either
    /// way (TrainingGraph.h).
    bool batchNormInTraining = true;
    /// Training metrics accumulated in the step itself, as state after `step`: `metric.loss_sum`
    /// (the sum of the step losses) and `metric.correct` (how many labels the argmax over the
    /// logits' class axis hits: one per sample, or one per position for classAxis), f32 [] each (TrainingGraph.h). With residentState they are
    /// variables on the loss's device that the Trainer reads every N steps and zeroes at an
    /// epoch's start, so no step has to send anything back (Keras's compiled metrics). With
    /// ignoreIndex a third, `metric.counted` (the labels not ignored), and loss_sum sums each
    /// step's loss times its count (the sum over every label counted; 0 for a step with none).
    bool metrics = false;
  };
  std::optional<Training> training;
  /// An f16/bf16 model's ops without a 16-bit CPU kernel run in f32 (--tandem-legalize-f16).
  /// false (the default): values stay f32 between such ops and are rounded to 16 bits where
  /// they leave them (as ONNX Runtime's CPU provider does); true (--f16-rounding per-op): every
  /// such op's result is rounded to 16 bits, ONNX's semantics exactly, and slower.
  bool f16PerOpRounding = false;
  /// Run --tandem-fuse-qdq: convolutions and matrix products in QDQ form (DequantizeLinear ->
  /// Conv | MatMul | Gemm [-> bias Add] [-> Relu] -> QuantizeLinear) become int8 QLinearConv,
  /// QLinearMatMul or QLinearMatMulBias where the CPU has a fast kernel for them. Only when
  /// every target device is a CPU (a GPU target keeps them f32, which the GPU runs);
  /// --no-qdq-fusion turns it off (the graph's f32 arithmetic as written).
  bool qdqFusion = true;
  /// Which weight-only quantized products (DequantizeMatMul: imported MatMulNBits, or fused
  /// from DequantizeLinear of constant weights) may quantize their activations to int8 per row
  /// and block (accuracy_level 4; runtime/cpu/avx2/DequantGemmInt8.h, on CPUs with AVX2):
  /// Model, those whose model says so (MatMulNBits' accuracy_level 4, as ONNX Runtime
  /// reads it); All, every one (ONNX Runtime's default for the MatMulNBits it makes of QDQ
  /// weights); None, none (f32 activations, the exact products). --int8-activations.
  enum class Int8Activations { Model, All, None };
  Int8Activations int8Activations = Int8Activations::Model;
  /// Run --tandem-fuse (fusion groups per device); off gives one kernel per op (--no-fuse).
  bool fuse = true;
  /// Verify the IR after every pass (--verify-each-pass, or TANDEM_VERIFY_EACH_PASS=1 in the
  /// environment; the tests set it) instead of once, before the plan is emitted. Verifying
  /// re-runs every op's shape inference, about a quarter of a large model's compile time
  /// per verification; per pass, a broken rewrite is caught at the pass that made it.
  bool verifyEachPass = false;
  /// When non-null, the IR is printed here after every pass (--print-ir-after-all).
  llvm::raw_ostream* printIrAfterAll = nullptr;
};

/// Parses a target list ("cpu,cuda:0=h100", "cpu,cpu:1"; DeviceSet::parse) into
/// `options->devices`; the error is parse's, and `options` is unchanged then.
inline Status setTargetDevices(CompileOptions* options, const std::string& targetList) {
  DeviceSet set;
  TANDEM_RETURN_IF_ERROR(DeviceSet::parse(targetList, &set));
  options->devices = std::move(set);
  return Status::ok();
}

struct CompileResult {
  plan::Plan plan;
  std::string placementLogText;  // one line per op + one per copy + a summary
  std::string placementLogJson;  // same content, JSON (schema in compiler/PlacementLog.md)
  std::string placementLogDot;   // Graphviz: ops coloured by device, copies as marked edges
  std::vector<std::string> notes;  // e.g. "symbolic dim 'N' bound to 1"
  /// Per device: kernels (ops other than copies and constants) before and after fusion, as
  /// the placement log's summary has them.
  std::map<std::string, int64_t> kernelsBeforeFusion, kernelsAfterFusion;
  /// Wall seconds of each pipeline step that ran, in order: the passes by their argument
  /// ("tandem-place"), then "emit-plan" (tandem compile --time-passes prints them).
  std::vector<std::pair<std::string, double>> stepSeconds;
};

/// Runs verify → infer-shapes → [autodiff] → legalize-f16 → [fuse-qdq] → canonicalize →
/// outline-dynamic → place →
/// insert-transfers → fuse →
/// plan-memory → emit-plan on `module` (mutated in place). On failure, errors have been emitted as MLIR
/// diagnostics on the ops' locations and failure is returned.
mlir::LogicalResult compileModule(mlir::ModuleOp module, const CompileOptions& options,
                                  CompileResult* result);

/// Registers the tandem dialect and the func dialect in `registry`-less contexts.
void loadTandemDialects(mlir::MLIRContext* ctx);

}  // namespace tandem
