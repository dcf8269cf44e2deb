// `tandem train`: parses the flags into TrainOptions and runs the driver's training loop.
#include "tools/tandem/Train.h"

#include <cstdio>

namespace tandem::cli {

constexpr const char* kDefaultFashionMnist = "/usr/share/datasets/fashion-mnist";

void addTrainFlags(CLI::App* cmd, TrainOptionsCli& o) {
  cmd->add_option("model", o.model,
                  "Inference ONNX model: images in ([N,1,28,28] or [N,784]), logits [N,10] out; "
                  "its f32 Conv/Gemm/MatMul weights and biases are trained")
      ->required();
  cmd->add_option("--data", o.data,
                  "fashion-mnist[:DIR] (IDX .gz files; DIR defaults to " +
                      std::string(kDefaultFashionMnist) + ")")
      ->capture_default_str();
  cmd->add_option("--optimizer", o.optimizer,
                  "adam (PyTorch's Adam: bias-corrected, eps outside the sqrt; betas .9/.999) or "
                  "sgd (plain, no momentum)")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->capture_default_str();
  cmd->add_option("--lr", o.lr, "Learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--eps", o.epsilon, "Adam's epsilon (Keras uses 1e-7)")->capture_default_str();
  cmd->add_option("--epochs", o.epochs, "Epochs")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--batch", o.batch, "Batch size (the last partial batch is dropped)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-steps", o.maxSteps, "Stop each epoch after N steps (0: the whole set)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Shuffle seed")->capture_default_str();
  cmd->add_option("--threads", o.threads, "Intra-op threads (0: the idle cores)")
      ->capture_default_str();
  cmd->add_flag("--all-params", o.allParams,
                "Train every f32 initializer, not only Conv/Gemm/MatMul weights and biases");
  cmd->add_option("-o,--output", o.output,
                  "Write the model with the trained initializers here (runs with 'tandem run')");
}

int runTrain(const TrainOptionsCli& o) {
  TrainOptions t;
  t.model = o.model;
  if (o.data == "fashion-mnist") {
    t.dataDir = kDefaultFashionMnist;
  } else if (o.data.rfind("fashion-mnist:", 0) == 0) {
    t.dataDir = o.data.substr(14);
  } else {
    std::fprintf(stderr, "tandem: usage error: --data %s: only fashion-mnist[:DIR] is known\n",
                 o.data.c_str());
    return 2;
  }
  t.output = o.output;
  t.training.optimizer = o.optimizer == "sgd" ? CompileOptions::Training::Optimizer::Sgd
                                              : CompileOptions::Training::Optimizer::Adam;
  t.training.learningRate = o.lr;
  t.training.epsilon = o.epsilon;
  t.training.allFloatConstants = o.allParams;
  t.epochs = o.epochs;
  t.batch = o.batch;
  t.maxSteps = o.maxSteps;
  t.seed = o.seed;
  t.threads = o.threads;
  Status st = trainModel(t, stdout, nullptr);
  if (!st.isOk()) {
    std::fprintf(stderr, "tandem: error: %s\n", st.message().c_str());
    return 1;
  }
  if (!o.output.empty()) std::printf("wrote %s\n", o.output.c_str());
  return 0;
}

}  // namespace tandem::cli
