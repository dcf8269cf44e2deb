// The training loop over a compiled training-step plan: Keras's fit / evaluate / predict, with
// the batch assembled on a worker thread while the step runs, a progress bar, checkpoints that
// resume bit-identically, and per-epoch evaluation with a forward plan.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/Executable.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/Trace.h"
#include "runtime/training/Prefetcher.h"
#include "runtime/training/Progress.h"

namespace tandem {

/// One epoch's figures.
struct EpochReport {
  int epoch = 0;             // 1-based
  int64_t steps = 0;         // optimizer steps run in this epoch (this session)
  /// Mean training loss over the epoch's steps: with the step plan's metric variables, every
  /// step of the epoch (those before a resume included: the checkpoint keeps the sums);
  /// without, the steps of this session.
  double meanLoss = 0;
  double trainAccuracy = -1;  // fraction of the epoch's training labels right; -1 without metrics
  double trainSeconds = 0;   // wall time of the steps only (not the evaluation)
  double samplesPerSecond = 0;  // training samples (images, sequences) a second
  double validationAccuracy = -1;  // fraction; -1 without a validation set
  double validationLoss = -1;      // mean cross-entropy over the labels of the forward plan's logits; -1 without
};

struct TrainerOptions {
  int epochs = 1;
  /// Steps per epoch at most (0: every batch; the last partial one as dropLast says).
  int64_t maxStepsPerEpoch = 0;
  /// true: an epoch's last batch of fewer than the step plan's batch samples is dropped (as
  /// torch's DataLoader(drop_last=True)). false: it trains, its rows padded to the batch with
  /// zero samples whose labels are the ignore index, so they count for nothing (the loss is
  /// the mean over the real samples, their gradient 0, the metrics count them not); needs a
  /// step plan compiled with an ignore index (create's), and is exact only for a model whose
  /// samples do not meet in the forward pass (no BatchNormalization on batch statistics:
  /// tools/driver/Train.cpp refuses that case).
  bool dropLast = true;
  /// The order of the training samples in epoch `epoch` (0-based); null: 0, 1, 2, ... The
  /// CLI passes shuffledOrder(count, seed, epoch) (frontend/Datasets.h), so an epoch's order
  /// is a function of (seed, epoch) and a resumed run sees the same batches.
  std::function<std::vector<int64_t>(int64_t epoch)> order;
  uint64_t seed = 0;  // recorded in checkpoints (the seed `order` uses)
  /// Checkpoints: written to this directory (CheckpointDir, runtime/training/Checkpoint.h,
  /// keeping the newest `keepCheckpoints`) every `checkpointEverySteps` steps (0: none
  /// mid-epoch) and at the end of every epoch. "" = none.
  std::string checkpointDir;
  int64_t checkpointEverySteps = 0;
  int keepCheckpoints = 3;
  /// Continue from the newest checkpoint in checkpointDir (variables, optimizer state, step,
  /// epoch and position in it); none there is a fresh start, with a note on `log`.
  bool resume = false;
  /// How often the metrics are fetched (the progress line, the non-finite loss check). With
  /// the step plan's metric variables (CompileOptions::Training::metrics: the loss and the
  /// right answers summed on the step's device) they are read every N steps and at the
  /// epoch's end, and the steps are issued with Executable::enqueue: on a GPU the host does
  /// not wait for a step, only for a fetch (a sync; fetching every step forces one per step).
  /// 0: every step for a plan that runs on the host (a fetch costs nothing there), every 25
  /// for an asynchronous (GPU) plan. Without metric variables the loss is the step's output,
  /// read after every step (run() waits for the devices) and shown every N steps.
  int64_t metricsEverySteps = 0;
  ProgressOptions progress;  // tty / write / clock; default: stderr's terminal or not
  bool showProgress = true;
  /// Messages (resume, checkpoints) go here; null: none.
  std::FILE* log = nullptr;
  /// Called after each epoch (after evaluation and the checkpoint); false stops training.
  std::function<bool(const EpochReport&)> onEpochEnd;
  /// With a trace: the first `traceSteps` steps of this fit run profiled (Executable::run with
  /// profile, each step of the plan waited for, so they are not overlapped with the next
  /// batch's upload) and are added to it as runs "training step N" (runtime/Trace.h). Null:
  /// none.
  Trace* trace = nullptr;
  int64_t traceSteps = 20;
};

/// Keras-style training on a step plan and a forward plan.
///
/// The step plan (CompileOptions::Training with residentState): inputs (samples [B, ...] of any
/// numeric dtype but bool: f32 images, i64 token ids, ...,
/// labels i64 [B] or [B, d...]), output 0 the loss f32 [] (none with metrics); parameters, buffers
/// (BatchNorm running statistics) and optimizer state are variables
/// resident on their device (Executable::variableNames). The forward plan
/// (CompileOptions::Training::forwardOnly): inputs (samples [E, ...] of the step's dtype, then parameters and
/// buffers by name, each one of the step plan's variables), output 0 the logits f32 [E, C], or
/// with a label per position [E, d..., C] (the class axis anywhere after the batch: the
/// labels' dims are the logits' without it, CompileOptions::Training::classAxis). Step plans
/// compiled with CompileOptions::Training::metrics have the f32 [] variables metric.loss_sum
/// and metric.correct (and metric.counted with an ignore index), which the Trainer zeroes at
/// each epoch's start and reads every TrainerOptions::metricsEverySteps steps. The batches are assembled into the step plan's own
/// input buffers (Executable::allocateInput: pinned memory when the step runs on a GPU).
class Trainer {
 public:
  /// `classAxis`: the logits' class axis, as the plans were compiled with (-1: the last);
  /// `ignoreIndex`: CompileOptions::Training::ignoreIndex, as the step plan was compiled with
  /// (a label equal to it counts for nothing: not checked against [0, C), not in accuracy or
  /// loss; with metrics the step plan then has metric.counted, an error otherwise).
  /// Errors: the step plan has no variables, not exactly the two inputs (numeric samples, i64 [B, ...]
  /// labels), or (without the metric variables) a loss that is not f32 [] ("the loss is not a
  /// scalar"); the forward plan's
  /// output is not f32 [E, ...] of rank >= 2, a class axis outside 1.., logits without it that
  /// are not the step's labels, its samples' dtype or sample shape differs from the step's, or it takes an
  /// input that is not a variable of the step plan.
  static Status create(std::unique_ptr<Executable> step, std::unique_ptr<Executable> forward,
                       std::unique_ptr<Trainer>* out, int classAxis = -1,
                       std::optional<int64_t> ignoreIndex = std::nullopt);

  /// Trains for options.epochs epochs over `train` (samples of the step's dtype and sample
  /// shape, labels of the step's label shape, each in [0, C) or the ignore index), evaluating on
  /// `validation` (may be null) after each. Appends one report per epoch run; with an ignore
  /// index its loss and accuracy are over the labels counted (the steps' losses weighted by
  /// their counts). Errors (training stops; the last checkpoint written stays intact): a label
  /// outside [0, C) (naming the sample and value), a sample or label shape that differs from
  /// the plan's, a loss that is not finite ("step N: the loss is nan", or with metrics fetched
  /// every N > 1 steps "steps A to B: the loss is nan": the step is among them), a failed step, a
  /// checkpoint that cannot be written or, with resume, one of another model.
  Status fit(const SampleSource& train, const SampleSource* validation, const TrainerOptions& options,
             std::vector<EpochReport>* reports);

  /// Accuracy (argmax of the logits over the class axis) and mean cross-entropy of the current
  /// parameters over every label of `data` (every one not ignored; 0 and 0 when none is), in batches of the forward plan's E (the last one padded).
  Status evaluate(const SampleSource& data, double* accuracy, double* meanLoss);
  /// Logits [n, C] (the forward plan's output shape with n) of samples [n, sample...] (the
  /// step's dtype) with the current parameters.
  Status predict(const Tensor& images, Tensor* logits);

  /// The current value of every variable (parameters, buffers, optimizer state), copied to the
  /// host.
  Status variables(std::map<std::string, Tensor>* out);
  /// Optimizer steps taken (restored from a checkpoint on resume).
  int64_t step() const { return step_; }
  /// checkpointFingerprint of the variables' names, dtypes and shapes.
  const std::string& fingerprint() const { return fingerprint_; }
  Executable& stepPlan() { return *step_plan_; }

 private:
  Trainer() = default;
  // The forward plan's parameter inputs, read from the step plan's variables.
  Status forwardParameters(std::vector<Tensor>* params);
  Status forwardBatch(const std::vector<Tensor>& params, const void* samples, int64_t n,
                      std::vector<float>* logits);
  Status checkLabels(const SampleSource& s, const std::string& what) const;
  Status saveCheckpoint(const TrainerOptions& o, int64_t epoch, int64_t position);

  std::unique_ptr<Executable> step_plan_, forward_;
  std::vector<std::string> forwardParamNames_;  // forward input 1 + k is this variable
  Shape sampleShape_;
  DType sampleDtype_ = DType::F32;  // the step's input 0: f32 images, i64 token ids, ...
  int64_t batch_ = 0, evalBatch_ = 0, classes_ = 0;
  Shape labelShape_;  // one sample's labels: the logits' dims after the batch without the class axis
  int64_t outer_ = 1, inner_ = 1;  // a sample's logits are [outer_, C, inner_]
  int64_t labelsPerSample() const { return outer_ * inner_; }  // numElements(labelShape_)
  int64_t step_ = 0;
  std::string fingerprint_;
  bool hasMetrics_ = false;  // the step plan has metric.loss_sum and metric.correct
  std::optional<int64_t> ignoreIndex_;  // with metrics, metric.counted too
  bool ignored(int64_t label) const { return ignoreIndex_ && label == *ignoreIndex_; }
};

}  // namespace tandem
