// `tandem train`: its flags and entry point (the loop is tools/driver/Train.h).
#pragma once
#include <CLI/CLI.hpp>
#include <set>
#include <string>
#include <vector>

#include "tools/driver/Train.h"

namespace tandem::cli {

struct TrainOptionsCli {
  std::string model, data = "fashion-mnist", loss = "cross-entropy", optimizer = "adam", output;
  double lr = 1e-3, epsilon = 1e-8;
  double momentum = 0, dampening = 0, weightDecay = 0, beta1 = 0.9, beta2 = 0.999;
  bool nesterov = false;
  std::string epsilonMode = "pytorch", lrSchedule = "constant";
  bool amsgrad = false;
  double alpha = 0.99, lrDecay = 0, initialAccumulator = 0;  // rmsprop; adagrad
  bool centered = false;                                     // rmsprop
  int64_t lrStepSize = 0, warmupSteps = 0, lrTotalSteps = 0;
  double lrGamma = 0.1, lrMin = 0, clipNorm = 0;
  int epochs = 1, threads = 0;
  int classAxis = -1;  // --class-axis
  int64_t ignoreIndex = -100;  // --ignore-index, when given
  int64_t batch = 128, maxSteps = 0;
  bool keepLastBatch = false;  // --keep-last-batch
  double labelSmoothing = 0;   // --label-smoothing
  std::vector<double> classWeights;  // --class-weights
  uint64_t seed = 0;
  bool allParams = false;
  std::vector<std::string> params, freeze;  // --params REGEX..., --freeze REGEX...
  bool copyBackUpdates = false;  // --copy-back-updates: no update planned in place
  bool freezeBatchNorm = false;  // --freeze-batchnorm: BatchNorm statistics stay the model's
  std::string target = "cpu", checkpointDir, placementLog, trace;
  int64_t checkpointEvery = 0;
  int64_t metricsEvery = 0;
  bool resume = false, noProgress = false;
  std::set<std::string> given;  // the optimizer and schedule flags on the command line
};

/// Adds the `train` subcommand's flags to `cmd`.
void addTrainFlags(CLI::App* cmd, TrainOptionsCli& o);
/// Exit code: 0 trained (and written), 1 model, data or run error, 2 usage error.
int runTrain(const TrainOptionsCli& o);

}  // namespace tandem::cli
