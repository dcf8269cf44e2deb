// Builds the Keras MNIST CNN with tandem::GraphBuilder, trains it on Fashion-MNIST with
// tandem::Trainer (Adam, on the CPU), prints the test accuracy and classifies a few test images.
//
//   mnist_graph_builder [--epochs N] [--batch B] [--max-steps S] [--threads T] [--data DIR]
//                       [--seed S] [--lr LR]
//
// DIR holds the four Fashion-MNIST IDX files (train-/t10k-, images-idx3-ubyte.gz and
// labels-idx1-ubyte.gz; default /usr/share/datasets/fashion-mnist). Output: one line per epoch
// (a progress bar on a terminal), then "test accuracy 0.XXXX" and a table of predictions.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compiler/Compiler.h"
#include "frontend/Datasets.h"
#include "frontend/GraphBuilder.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/Executable.h"
#include "runtime/Trainer.h"

namespace {

const char* kClassNames[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                               "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

struct Args {
  int epochs = 5;
  int64_t batch = 128;
  int64_t maxSteps = 0;  // per epoch; 0 = every full batch
  int threads = 0;       // 0 = the runtime's default
  std::string dataDir = "/usr/share/datasets/fashion-mnist";
  uint64_t seed = 2;     // the initial weights and the shuffle (seeds 1, 2, 3: 90.7, 91.7, 91.5%)
  double lr = 1e-3;
};

// ---- The model ----

/// Keras's default init of Conv2D and Dense weights, glorot_uniform:
/// U(-sqrt(6 / (fan_in + fan_out)), +sqrt(6 / (fan_in + fan_out))); fan = channels x kernel area.
tandem::Tensor glorotUniform(std::mt19937& rng, tandem::Shape shape, int64_t fanIn, int64_t fanOut) {
  tandem::Tensor t = tandem::Tensor::alloc(tandem::DType::F32, shape);
  float bound = std::sqrt(6.0f / (float)(fanIn + fanOut));
  std::uniform_real_distribution<float> u(-bound, bound);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

/// Keras's default bias init: zeros.
tandem::Tensor zeros(tandem::Shape shape) {
  tandem::Tensor t = tandem::Tensor::alloc(tandem::DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.f;
  return t;
}

/// Conv2D(32, 3x3, relu) → Conv2D(64, 3x3, relu) → MaxPool(2x2) → Dropout(0.25) → Flatten →
/// Dense(128, relu) → Dropout(0.5) → Dense(10), on image: f32[N, 1, 28, 28]; the output is the
/// logits f32[N, 10] (the loss applies the softmax).
///
/// Every weight and bias is a named constant: training makes each one a parameter, called by
/// that name in the plans, the Trainer's variables and its checkpoints. The Dropouts are
/// inference Dropouts (the identity); the training step runs them in training mode
/// (CompileOptions::Training::dropoutInTraining), as Keras's fit does.
void buildMnistCnn(tandem::GraphBuilder& g, uint32_t seed) {
  std::mt19937 rng(seed);
  auto weight = [&](const std::string& name, tandem::Shape shape, int64_t fanIn, int64_t fanOut) {
    return g.namedConstant(name, glorotUniform(rng, shape, fanIn, fanOut));
  };
  auto bias = [&](const std::string& name, int64_t n) { return g.namedConstant(name, zeros({n})); };
  tandem::Value x = g.input("image", tandem::DType::F32, {tandem::Dim("N"), 1, 28, 28});

  tandem::Value h = g.conv(x, weight("conv1.weight", {32, 1, 3, 3}, 1 * 3 * 3, 32 * 3 * 3),
                           bias("conv1.bias", 32));
  h = g.relu(h);                          // [N, 32, 26, 26]
  h = g.conv(h, weight("conv2.weight", {64, 32, 3, 3}, 32 * 3 * 3, 64 * 3 * 3), bias("conv2.bias", 64));
  h = g.relu(h);                          // [N, 64, 24, 24]
  tandem::PoolOptions pool;
  pool.kernelShape = {2, 2};
  pool.strides = {2, 2};
  h = g.maxPool(h, pool);                 // [N, 64, 12, 12]
  h = g.dropout(h, 0.25f);
  h = g.flatten(h, 1);                    // [N, 9216]
  h = g.dense(h, weight("fc1.weight", {9216, 128}, 9216, 128), bias("fc1.bias", 128));
  h = g.relu(h);
  h = g.dropout(h, 0.5f);
  h = g.dense(h, weight("fc2.weight", {128, 10}, 128, 10), bias("fc2.bias", 10));
  g.output(h, "logits");                  // [N, 10]
}

/// Compiles `module` (mutated: compile a clone to keep it) and loads the plan. MLIR errors
/// (on the ops' locations: this file's lines) are collected into the Status.
tandem::Status compileAndLoad(mlir::MLIRContext* ctx, mlir::ModuleOp module,
                              const tandem::CompileOptions& options, int threads,
                              std::unique_ptr<tandem::Executable>* exe) {
  std::string diagnostics;
  tandem::CompileResult compiled;
  {
    mlir::ScopedDiagnosticHandler handler(ctx, [&](mlir::Diagnostic& d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error) diagnostics += "\n  " + d.str();
      return mlir::success();
    });
    if (mlir::failed(tandem::compileModule(module, options, &compiled)))
      return tandem::Status::error("compilation failed" + diagnostics);
  }
  tandem::LoadOptions load;
  load.threads = threads;
  return tandem::Executable::load(compiled.plan, load, exe);
}

/// The images of `d` as the model's samples [1, 28, 28] (the IDX files give [28, 28]).
tandem::SampleSource samplesOf(const tandem::LabelledDataset& d) {
  tandem::SampleSource s;
  s.count = d.count;
  s.dtype = tandem::DType::F32;
  s.sampleShape = {1, 28, 28};
  s.samples = d.samples.data();
  s.labels = d.labels.data();
  return s;
}

int fail(const tandem::Status& st) {
  std::fprintf(stderr, "error: %s\n", st.message().c_str());
  return 1;
}

int usage(const char* argv0, std::FILE* out) {
  std::fprintf(out,
               "usage: %s [--epochs N (5)] [--batch B (128)] [--max-steps S (0 = all)]\n"
               "          [--threads T] [--data DIR] [--seed S (2)] [--lr LR (1e-3, Adam)]\n",
               argv0);
  return out == stdout ? 0 : 2;
}

/// Parses the command line into *a; false (with a message) on a bad or unknown flag.
bool parseArgs(int argc, char** argv, Args* a) {
  auto number = [&](int& i, double lo, double hi, double* v) {
    if (i + 1 >= argc) return false;
    char* end = nullptr;
    *v = std::strtod(argv[++i], &end);
    if (*end || !(*v >= lo && *v <= hi)) {
      std::fprintf(stderr, "error: %s must be a number in [%g, %g]\n", argv[i - 1], lo, hi);
      return false;
    }
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    double v = 0;
    if (f == "--epochs" && number(i, 1, 1000, &v)) a->epochs = (int)v;
    else if (f == "--batch" && number(i, 1, 60000, &v)) a->batch = (int64_t)v;
    else if (f == "--max-steps" && number(i, 0, 1e9, &v)) a->maxSteps = (int64_t)v;
    else if (f == "--threads" && number(i, 0, 1024, &v)) a->threads = (int)v;
    else if (f == "--seed" && number(i, 0, 4294967295.0, &v)) a->seed = (uint64_t)v;
    else if (f == "--lr" && number(i, 0, 10, &v)) a->lr = v;
    else if (f == "--data" && i + 1 < argc) a->dataDir = argv[++i];
    else return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h")
      return usage(argv[0], stdout);
  if (!parseArgs(argc, argv, &args)) return usage(argv[0], stderr);

  // 1. Data: 60000 training and 10000 test images, scaled to [0, 1].
  tandem::LabelledDataset train, test;
  tandem::DatasetOptions classes;
  classes.numClasses = 10;
  tandem::Status st = tandem::loadIdxDataset(args.dataDir, "train", &train, classes);
  if (st.isOk()) st = tandem::loadIdxDataset(args.dataDir, "t10k", &test, classes);
  if (!st.isOk()) return fail(st);

  // 2. Build. Shape errors would come back here with this file's line numbers. The module is
  //    compiled twice and compileModule rewrites what it compiles, so the step gets a clone.
  tandem::GraphBuilder g;
  buildMnistCnn(g, (uint32_t)args.seed);
  std::string err;
  mlir::OwningOpRef<mlir::ModuleOp> forwardModule = g.finish(&err);
  if (!forwardModule) return fail(tandem::Status::error(err));
  mlir::OwningOpRef<mlir::ModuleOp> stepModule = forwardModule->clone();

  // 3. Compile for the CPU. The training step: one Adam step on a batch of args.batch images
  //    (the batch dim N bound), parameters and Adam's moments resident in the plan as
  //    variables. The forward plan: the logits of 500 images from the parameters as inputs,
  //    which the Trainer feeds from the step's variables to evaluate and predict.
  tandem::CompileOptions options;
  st = tandem::setTargetDevices(&options, "cpu");
  if (!st.isOk()) return fail(st);
  options.training.emplace();
  options.training->optimizer = tandem::CompileOptions::Training::Optimizer::Adam;
  options.training->learningRate = args.lr;
  options.training->epsilon = 1e-7;  // Keras's Adam (the example is Keras's MNIST CNN)
  options.training->residentState = true;
  options.training->metrics = true;  // loss and accuracy summed in the step, read by the Trainer
  options.dimBindings["N"] = args.batch;
  std::unique_ptr<tandem::Executable> step, forward;
  st = compileAndLoad(g.context(), *stepModule, options, args.threads, &step);
  if (!st.isOk()) return fail(st.withContext("training step"));
  options.training->forwardOnly = true;
  options.dimBindings["N"] = 500;
  st = compileAndLoad(g.context(), *forwardModule, options, args.threads, &forward);
  if (!st.isOk()) return fail(st.withContext("forward pass"));
  std::unique_ptr<tandem::Trainer> trainer;
  st = tandem::Trainer::create(std::move(step), std::move(forward), &trainer);
  if (!st.isOk()) return fail(st);

  // 4. Train: each epoch in a shuffled order (a function of seed and epoch), then evaluated on
  //    the test set; the Trainer prints one line per epoch (a progress bar on a terminal).
  tandem::TrainerOptions fit;
  fit.epochs = args.epochs;
  fit.maxStepsPerEpoch = args.maxSteps;
  fit.seed = args.seed;
  const int64_t count = train.count;
  const uint64_t seed = args.seed;
  fit.order = [count, seed](int64_t epoch) { return tandem::shuffledOrder(count, seed, epoch); };
  const tandem::SampleSource trainSet = samplesOf(train), testSet = samplesOf(test);
  std::vector<tandem::EpochReport> reports;
  st = trainer->fit(trainSet, &testSet, fit, &reports);
  if (!st.isOk()) return fail(st);
  std::printf("test accuracy %.4f\n\n", reports.back().validationAccuracy);

  // 5. Classify the first test images with the trained parameters.
  const int64_t shown = 10;
  tandem::Tensor images = tandem::Tensor::alloc(tandem::DType::F32, {shown, 1, 28, 28});
  std::copy(test.samples.begin(), test.samples.begin() + shown * 28 * 28, images.data<float>());
  tandem::Tensor logits;
  st = trainer->predict(images, &logits);
  if (!st.isOk()) return fail(st);
  std::printf("%-6s %-24s %s\n", "image", "predicted (p)", "label");
  for (int64_t i = 0; i < shown; ++i) {
    const float* z = logits.data<float>() + i * 10;
    int best = (int)(std::max_element(z, z + 10) - z);
    double sum = 0;  // softmax of the best class: 1 / sum(exp(z - z_best))
    for (int c = 0; c < 10; ++c) sum += std::exp((double)z[c] - z[best]);
    char predicted[64];
    std::snprintf(predicted, sizeof predicted, "%s (%.2f)", kClassNames[best], 1.0 / sum);
    int64_t label = test.labels[i];
    std::printf("%-6lld %-24s %-12s %s\n", (long long)i, predicted, kClassNames[label],
                best == label ? "right" : "wrong");
  }
  return 0;
}
