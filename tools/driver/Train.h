// `tandem train`: a host training loop over a compiled training-step plan (Fashion-MNIST IDX
// data, one optimizer step per batch, test accuracy per epoch, weights written back to ONNX).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "compiler/Compiler.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace tandem {

/// One IDX data set: images as f32 in [0, 1], [count, rows * cols] row-major; labels 0..9.
struct ImageDataset {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<float> images;
  std::vector<int64_t> labels;
};

/// Reads `<dir>/<prefix>-images-idx3-ubyte.gz` and `<dir>/<prefix>-labels-idx1-ubyte.gz`
/// (LeCun's IDX format, gzip; prefix "train" or "t10k"). Errors: a missing or truncated file, a
/// wrong magic number, image and label counts that differ.
Status readIdxDataset(const std::string& dir, const std::string& prefix, ImageDataset* out);

struct TrainOptions {
  std::string model;      // inference ONNX model: input images, output 0 = logits [N, 10]
  std::string dataDir;    // Fashion-MNIST IDX files
  std::string output;     // trained model (ONNX); empty: not written
  CompileOptions::Training training;
  int epochs = 1;
  int64_t batch = 128;
  int64_t maxSteps = 0;   // per epoch; 0 = all full batches (the last partial batch is dropped)
  uint64_t seed = 0;      // shuffle
  int threads = 0;        // intra-op threads (LoadOptions); 0 = default
};

/// One line of the per-epoch report.
struct EpochReport {
  int epoch = 0;
  int64_t steps = 0;
  double meanLoss = 0;     // mean over the epoch's steps
  double testAccuracy = 0; // fraction of the test set, argmax of the logits
  double trainSeconds = 0; // the steps only (not the evaluation)
  double imagesPerSecond = 0;
};

/// Trains `o.model` on the data in `o.dataDir`: compiles the training step (CompileOptions::
/// Training, batch dim bound to o.batch) and a forward plan taking the parameters as inputs,
/// shuffles the training set each epoch (std::mt19937_64 seeded with o.seed + epoch), runs one
/// step per batch feeding each step's new parameters and state to the next (the optimizer
/// slots and `step` start at zeros; a cosine schedule without totalSteps gets the run's step
/// count, epochs x steps per epoch), evaluates the test
/// set after each epoch (printing one line to `log`), and writes the parameters back into the
/// model's initializers (o.output). Errors: unreadable model or data, a model the training
/// graph refuses (TrainingGraph.h), a failed step.
Status trainModel(const TrainOptions& o, std::FILE* log, std::vector<EpochReport>* reports);

}  // namespace tandem
