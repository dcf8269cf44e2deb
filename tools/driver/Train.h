// `tandem train`: the training step and forward plans compiled from an inference ONNX model, a
// Trainer (runtime/Trainer.h) over Fashion-MNIST or ONNX TensorProto data sets, and the trained
// initializers written back into the model.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "compiler/Compiler.h"
#include "runtime/Status.h"
#include "runtime/Trainer.h"

namespace tandem {

struct TrainOptions {
  std::string model;      // inference ONNX model: input images, output 0 = logits [N, C] or
                          // [N, d..., C] (training.classAxis; log-probabilities with training.loss Nll)
  /// The data: "fashion-mnist" IDX files in dataDir (train-*, t10k-* as the validation set), or
  /// "onnx": dataDir/train and dataDir/test, each a directory of TensorProto data sets
  /// (frontend/Datasets.h, loadOnnxDataSets).
  std::string dataFormat = "fashion-mnist";
  std::string dataDir;
  std::string output;     // trained model (ONNX); empty: not written
  std::string targets = "cpu";  // compile targets (DeviceSet::parse), e.g. "cpu,cuda:0=h100"
  CompileOptions::Training training;
  /// ECMAScript regular expressions (std::regex_search: anywhere in the name; anchor with ^ and
  /// $) over the model's f32 initializer names. paramPatterns: exactly the initializers that
  /// match one train (training.parameterNames; not with training.allFloatConstants);
  /// freezePatterns: those that match one stay constants (training.frozenNames, PyTorch's
  /// requires_grad=False). Errors: a pattern that does not compile, or one that matches no f32
  /// initializer (the message lists some names).
  std::vector<std::string> paramPatterns, freezePatterns;
  int epochs = 1;
  int64_t batch = 128;
  int64_t maxSteps = 0;   // per epoch; 0 = every batch (the last partial one as keepLastBatch says)
  /// Train the last batch of an epoch when it is partial (torch's DataLoader default,
  /// drop_last=False; Keras's fit): padded to the batch with rows labelled with the ignore
  /// index (training.ignoreIndex, or -100 when unset, which then counts for nothing in the
  /// data too), so the loss and gradient are the real samples' (TrainerOptions::dropLast).
  /// Refused for a model with BatchNormalization on batch statistics (the padded rows would
  /// change them; training.batchNormInTraining false, --freeze-batchnorm, is fine). false:
  /// dropped.
  bool keepLastBatch = false;
  uint64_t seed = 0;      // shuffle: shuffledOrder(count, seed, epoch)
  int threads = 0;        // intra-op threads (LoadOptions); 0 = default
  std::string checkpointDir;         // "" = no checkpoints
  int64_t checkpointEverySteps = 0;  // 0: at the end of each epoch only
  int64_t metricsEverySteps = 0;     // TrainerOptions::metricsEverySteps (0: by device)
  bool resume = false;               // from checkpointDir's newest checkpoint
  bool progress = true;              // the progress bar (a terminal) or one line per epoch
  std::string placementLog;          // write the step plan's placement log (text) here
  /// Write a Chrome trace (runtime/Trace.h) of the first kTrainTracedSteps steps here; the
  /// file is created before training starts (an unwritable path fails first). "" = none.
  std::string trace;
};

/// Steps `TrainOptions::trace` records (each profiled step waits for its devices).
constexpr int kTrainTracedSteps = 20;

/// Trains `o.model`: compiles the training step (CompileOptions::Training with resident state,
/// batch dim bound to o.batch) and a forward plan taking the parameters as inputs, runs the
/// Trainer's fit over the training set with the test set as validation (one line per epoch on
/// `log`, the progress bar on stderr), and writes the trained parameters back into the model's
/// initializers (o.output, atomically), the buffers (BatchNorm running statistics) with them.
/// Errors: unreadable model or data, a label outside the model's classes, a model the training
/// graph refuses (TrainingGraph.h), with o.output a parameter or buffer that is not an
/// initializer of the model (checked before training: it could not be written back), a failed
/// step, a NaN loss, a checkpoint that cannot be written or belongs to another model.
Status trainModel(const TrainOptions& o, std::FILE* log, std::vector<EpochReport>* reports);

}  // namespace tandem
