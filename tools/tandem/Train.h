// `tandem train`: its flags and entry point (the loop is tools/driver/Train.h).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "tools/driver/Train.h"

namespace tandem::cli {

struct TrainOptionsCli {
  std::string model, data = "fashion-mnist", optimizer = "adam", output;
  double lr = 1e-3, epsilon = 1e-8;
  int epochs = 1, threads = 0;
  int64_t batch = 128, maxSteps = 0;
  uint64_t seed = 0;
  bool allParams = false;
};

/// Adds the `train` subcommand's flags to `cmd`.
void addTrainFlags(CLI::App* cmd, TrainOptionsCli& o);
/// Exit code: 0 trained (and written), 1 model, data or run error, 2 usage error.
int runTrain(const TrainOptionsCli& o);

}  // namespace tandem::cli
