// `tandem train`: parses the flags into TrainOptions and runs the driver's training loop.
#include "tools/tandem/Train.h"

#include <cstdio>

#include "compiler/training/TrainingGraph.h"

namespace tandem::cli {

constexpr const char* kDefaultFashionMnist = "/usr/share/datasets/fashion-mnist";

namespace {

// The flags into `t`; an empty string, or what is wrong (a flag that does not apply, or a
// value training::checkOptions refuses).
std::string trainingOptions(const TrainOptionsCli& o, CompileOptions::Training* t) {
  using T = CompileOptions::Training;
  const bool sgd = o.optimizer == "sgd", rmsprop = o.optimizer == "rmsprop",
             adagrad = o.optimizer == "adagrad", adam = !sgd && !rmsprop && !adagrad;
  auto onlyFor = [&](std::initializer_list<const char*> flags, bool applies,
                     const std::string& what) -> std::string {
    for (const char* f : flags)
      if (!applies && o.given.count(f)) return std::string(f) + " applies to " + what + " only";
    return "";
  };
  for (const std::string& bad :
       {onlyFor({"--dampening", "--nesterov"}, sgd, "--optimizer sgd"),
        onlyFor({"--momentum"}, sgd || rmsprop, "--optimizer sgd and rmsprop"),
        onlyFor({"--beta1", "--beta2", "--epsilon-mode", "--amsgrad"}, adam,
                "--optimizer adam and adamw"),
        onlyFor({"--eps"}, !sgd, "--optimizer adam, adamw, rmsprop and adagrad"),
        onlyFor({"--alpha", "--centered"}, rmsprop, "--optimizer rmsprop"),
        onlyFor({"--lr-decay", "--initial-accumulator"}, adagrad, "--optimizer adagrad"),
        onlyFor({"--lr-step-size", "--lr-gamma"}, o.lrSchedule == "step", "--lr-schedule step"),
        onlyFor({"--warmup-steps", "--lr-min", "--lr-total-steps"}, o.lrSchedule == "cosine",
                "--lr-schedule cosine")})
    if (!bad.empty()) return bad;
  if (o.lrSchedule == "step" && !o.given.count("--lr-step-size"))
    return "--lr-schedule step needs --lr-step-size";
  t->loss = o.loss == "nll" ? T::Loss::Nll : T::Loss::CrossEntropy;
  t->labelSmoothing = o.labelSmoothing;
  t->classWeights = o.classWeights;
  t->classAxis = o.classAxis;
  if (o.given.count("--ignore-index")) t->ignoreIndex = o.ignoreIndex;
  t->optimizer = sgd       ? T::Optimizer::Sgd
                 : rmsprop ? T::Optimizer::RmsProp
                 : adagrad ? T::Optimizer::Adagrad
                 : o.optimizer == "adamw" ? T::Optimizer::AdamW
                                          : T::Optimizer::Adam;
  t->learningRate = o.lr;
  // PyTorch's defaults where they differ from Adam's: RMSprop's and Adagrad's lr 1e-2,
  // Adagrad's eps 1e-10.
  if ((rmsprop || adagrad) && !o.given.count("--lr")) t->learningRate = 1e-2;
  t->momentum = o.momentum;
  t->dampening = o.dampening;
  t->nesterov = o.nesterov;
  t->weightDecay = o.weightDecay;
  if (o.optimizer == "adamw" && !o.given.count("--weight-decay")) t->weightDecay = 1e-2;
  t->beta1 = o.beta1;
  t->beta2 = o.beta2;
  t->epsilon = o.epsilon;
  if (adagrad && !o.given.count("--eps")) t->epsilon = 1e-10;
  t->alpha = o.alpha;
  t->centered = o.centered;
  t->lrDecay = o.lrDecay;
  t->initialAccumulator = o.initialAccumulator;
  t->epsilonMode = o.epsilonMode == "keras" ? T::EpsilonMode::Keras : T::EpsilonMode::PyTorch;
  t->amsgrad = o.amsgrad;
  t->lrSchedule = o.lrSchedule == "step"     ? T::LrSchedule::Step
                  : o.lrSchedule == "cosine" ? T::LrSchedule::Cosine
                                             : T::LrSchedule::Constant;
  t->lrStepSize = o.lrStepSize;
  t->lrGamma = o.lrGamma;
  t->warmupSteps = o.warmupSteps;
  t->lrMin = o.lrMin;
  t->totalSteps = o.lrTotalSteps;  // 0: trainModel sets the run's step count
  t->clipNorm = o.clipNorm;
  // Checked here with a provisional T when it is left to the run (checked again at compile).
  T check = *t;
  if (check.lrSchedule == T::LrSchedule::Cosine && check.totalSteps == 0)
    check.totalSteps = check.warmupSteps + 1;
  return training::checkOptions(check);
}

}  // namespace

void addTrainFlags(CLI::App* cmd, TrainOptionsCli& o) {
  cmd->add_option("model", o.model,
                  "Inference ONNX classifier: samples in (its first input [N, ...]: f32 images, "
                  "[N,1,28,28] or [N,784] for Fashion-MNIST, or features; int64/int32 token "
                  "ids), logits [N,C] out (or [N,T,C] with a label per position, see "
                  "--class-axis; log-probabilities with --loss nll); its f32 "
                  "Conv/ConvTranspose/Gemm/MatMul weights and biases (also through a Transpose "
                  "or Reshape), normalization scales and biases and embedding tables are trained (every f32 initializer with --all-params; "
                  "choose with --params and --freeze)")
      ->required();
  cmd->add_option("--data", o.data,
                  "fashion-mnist[:DIR] (IDX .gz files; DIR defaults to " +
                      std::string(kDefaultFashionMnist) +
                      "), or onnx:DIR (DIR/train and DIR/test hold test_data_set_*/input_0.pb "
                      "samples [n, ...] (integers for an int64/int32 input) and input_1.pb "
                      "labels [n], or [n, T...] with a label per position (a language model's "
                      "next tokens))")
      ->capture_default_str();
  // The optimizer and schedule flags record that they were given: a flag that does not apply
  // to the chosen optimizer or schedule is a usage error, not silently ignored.
  auto track = [&o](CLI::Option* opt, const std::string& name) {
    opt->each([&o, name](const std::string&) { o.given.insert(name); });
    return opt;
  };
  cmd->add_option("--loss", o.loss,
                  "cross-entropy (softmax cross-entropy: the model outputs logits; "
                  "torch nn.CrossEntropyLoss) or nll (negative log-likelihood: the model "
                  "outputs log-probabilities, i.e. ends in LogSoftmax over the classes; "
                  "torch nn.NLLLoss); mean over the batch (and the positions)")
      ->check(CLI::IsMember({"cross-entropy", "nll"}))
      ->capture_default_str();
  cmd->add_option("--label-smoothing", o.labelSmoothing,
                  "cross-entropy: PyTorch's label_smoothing, in [0, 1]: the target is (1 - eps) "
                  "one-hot + eps / C, the loss (1 - eps) CE + eps * the mean of -mean_c "
                  "log_softmax over the labels counted (the evaluation's loss stays plain "
                  "cross-entropy)")
      ->capture_default_str();
  cmd->add_option("--class-weights", o.classWeights,
                  "W0,W1,...: a weight per class (>= 0; PyTorch's CrossEntropyLoss(weight=...)): "
                  "the loss is the weighted mean sum w[y] loss / sum w[y] (the evaluation's loss "
                  "stays unweighted)")
      ->delimiter(',');
  cmd->add_option("--class-axis", o.classAxis,
                  "The model output's axis of the classes; the labels are its other dims: "
                  "-1 (the last) for a language model's logits [N,T,V] with labels [N,T] (the "
                  "next token at every position), 1 for a segmenter's [N,C,H,W] with labels "
                  "[N,H,W]. An output [N,C] has one label a sample either way")
      ->capture_default_str();
  track(cmd->add_option("--ignore-index", o.ignoreIndex,
                        "A label value that counts for nothing (padding: PyTorch's "
                        "cross_entropy ignore_index, usually -100): the loss is the mean over "
                        "the other labels, and accuracy and the epoch's loss count only them. "
                        "It may be a class (a pad token). Not given: every label must be a "
                        "class in [0, C)"),
        "--ignore-index");
  cmd->add_option("--optimizer", o.optimizer,
                  "sgd (torch.optim.SGD), adam (torch.optim.Adam: bias-corrected, L2 weight "
                  "decay), adamw (torch.optim.AdamW: decoupled weight decay), rmsprop "
                  "(torch.optim.RMSprop) or adagrad (torch.optim.Adagrad)")
      ->check(CLI::IsMember({"sgd", "adam", "adamw", "rmsprop", "adagrad"}))
      ->capture_default_str();
  track(cmd->add_option("--lr", o.lr,
                        "Learning rate (>= 0; the schedule scales it per step); default 1e-3, "
                        "1e-2 for rmsprop and adagrad (PyTorch's)"),
        "--lr")
      ->capture_default_str();
  track(cmd->add_option("--momentum", o.momentum, "sgd, rmsprop: momentum factor (>= 0)"), "--momentum")
      ->capture_default_str();
  track(cmd->add_option("--dampening", o.dampening, "sgd: dampening of the momentum"),
        "--dampening")
      ->capture_default_str();
  track(cmd->add_flag("--nesterov", o.nesterov,
                      "sgd: Nesterov momentum (needs --momentum > 0 and --dampening 0)"),
        "--nesterov");
  track(cmd->add_option("--weight-decay", o.weightDecay,
                        "Weight decay (>= 0): L2 added to the gradient (sgd, adam, rmsprop, "
                        "adagrad) or decoupled "
                        "p *= 1 - lr * wd (adamw); default 0, 0.01 for adamw (PyTorch's)"),
        "--weight-decay");
  track(cmd->add_option("--beta1", o.beta1, "adam, adamw: first-moment decay, in [0, 1)"),
        "--beta1")
      ->capture_default_str();
  track(cmd->add_option("--beta2", o.beta2, "adam, adamw: second-moment decay, in [0, 1)"),
        "--beta2")
      ->capture_default_str();
  track(cmd->add_option("--eps", o.epsilon,
                        "adam, adamw, rmsprop, adagrad: epsilon (>= 0; Keras uses 1e-7); default "
                        "1e-8, 1e-10 for adagrad (PyTorch's)"),
        "--eps")
      ->capture_default_str();
  track(cmd->add_option("--alpha", o.alpha, "rmsprop: smoothing constant of the squares (>= 0)"),
        "--alpha")
      ->capture_default_str();
  track(cmd->add_flag("--centered", o.centered,
                      "rmsprop: centered (divide by the gradient's estimated variance: the mean "
                      "square less the squared mean)"),
        "--centered");
  track(cmd->add_option("--lr-decay", o.lrDecay,
                        "adagrad: lr / (1 + (t-1) * lr-decay) at step t (>= 0)"),
        "--lr-decay")
      ->capture_default_str();
  track(cmd->add_option("--initial-accumulator", o.initialAccumulator,
                        "adagrad: the sum of squares' starting value (PyTorch's "
                        "initial_accumulator_value, >= 0)"),
        "--initial-accumulator")
      ->capture_default_str();
  track(cmd->add_option("--epsilon-mode", o.epsilonMode,
                        "adam, adamw: pytorch (eps added to the bias-corrected sqrt(v)) or "
                        "keras (eps added to sqrt(v), bias corrections in the step size)"),
        "--epsilon-mode")
      ->check(CLI::IsMember({"pytorch", "keras"}))
      ->capture_default_str();
  track(cmd->add_flag("--amsgrad", o.amsgrad,
                      "adam, adamw: AMSGrad (torch.optim.Adam(amsgrad=True)): divide by the "
                      "running maximum of the second moment"),
        "--amsgrad");
  cmd->add_option("--lr-schedule", o.lrSchedule,
                  "constant, step (lr * gamma^floor((t-1)/S), torch StepLR per optimizer step) "
                  "or cosine (linear warm-up to lr over W steps, then cosine to --lr-min at "
                  "step T, lr-min after); t is the 1-based step")
      ->check(CLI::IsMember({"constant", "step", "cosine"}))
      ->capture_default_str();
  track(cmd->add_option("--lr-step-size", o.lrStepSize, "step schedule: S, steps per decay (>= 1)"),
        "--lr-step-size");
  track(cmd->add_option("--lr-gamma", o.lrGamma, "step schedule: decay factor (> 0)"),
        "--lr-gamma")
      ->capture_default_str();
  track(cmd->add_option("--warmup-steps", o.warmupSteps,
                        "cosine schedule: W, warm-up steps (>= 0)"),
        "--warmup-steps")
      ->capture_default_str();
  track(cmd->add_option("--lr-min", o.lrMin, "cosine schedule: final learning rate, in [0, lr]"),
        "--lr-min")
      ->capture_default_str();
  track(cmd->add_option("--lr-total-steps", o.lrTotalSteps,
                        "cosine schedule: T, the step where lr reaches --lr-min (> W; default: "
                        "all the steps of the run, epochs x steps per epoch)"),
        "--lr-total-steps");
  track(cmd->add_option("--clip-norm", o.clipNorm,
                        "Clip the gradients to this global L2 norm before the optimizer, as "
                        "torch.nn.utils.clip_grad_norm_ (0: off)"),
        "--clip-norm")
      ->capture_default_str();
  cmd->add_option("--epochs", o.epochs, "Epochs")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--batch", o.batch, "Batch size (the last partial batch is dropped without --keep-last-batch); a model whose input fixes the "
                  "batch dim (exported without dynamic_axes) trains at that batch only")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--keep-last-batch", o.keepLastBatch,
                "Train an epoch's last batch when it is partial (torch's DataLoader default; "
                "otherwise it is dropped): padded to --batch with rows labelled with the ignore "
                "index (--ignore-index, else -100), which count for nothing; refused for a model "
                "with BatchNormalization on batch statistics (see --freeze-batchnorm)");
  cmd->add_option("--max-steps", o.maxSteps, "Stop each epoch after N steps (0: the whole set)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Shuffle seed")->capture_default_str();
  cmd->add_option("--threads", o.threads, "Intra-op threads (0: the idle cores)")
      ->capture_default_str();
  cmd->add_flag("--all-params", o.allParams,
                "Train every f32 initializer (PyTorch's parameters and any others: position "
                "tables, ...), not only Conv/ConvTranspose/Gemm/MatMul weights and biases (a MatMul's bias: the "
                "row an Add adds to it), scales and biases of BatchNorm, LayerNorm, GroupNorm and "
                "InstanceNorm, and embedding tables (Gather at ids that are no constant); "
                "BatchNorm statistics stay buffers; Constant nodes, e.g. a causal mask or an "
                "epsilon, stay constants");
  auto* params = cmd->add_option(
      "--params", o.params,
      "Train exactly the f32 initializers whose names match REGEX (ECMAScript, matched anywhere "
      "in the name: anchor with ^ and $; repeatable, each must match one), e.g. --params "
      "'^fc\\.' or --params 'class_token|pos_embedding|^heads\\.'; BatchNorm statistics stay buffers");
  params->type_name("REGEX")->excludes(cmd->get_option("--all-params"));
  cmd->add_option("--freeze", o.freeze,
                  "The f32 initializers whose names match REGEX do not train (PyTorch's "
                  "requires_grad=False; ECMAScript, matched anywhere in the name; repeatable, "
                  "each must match one), e.g. --freeze '^(conv1|bn1|layer[1-3])\\.' to fine-tune "
                  "the rest; no gradient is computed where none is needed; BatchNorm statistics "
                  "still update unless --freeze-batchnorm")
      ->type_name("REGEX");
  cmd->add_flag("--freeze-batchnorm", o.freezeBatchNorm,
                "BatchNormalizations normalise with the model's running statistics, which stay "
                "as they are (PyTorch's eval-mode BatchNorm, FrozenBatchNorm2d), instead of batch "
                "statistics with the running mean and variance updated each step");
  cmd->add_flag("--copy-back-updates", o.copyBackUpdates,
                "Compute every variable's update into the arena and copy it back after each step "
                "instead of writing it in place (same results; for comparison)");
  cmd->add_option("--target", o.target,
                  "Compile targets for the training step, e.g. cpu,cuda:0=h100 (a CUDA device "
                  "this build or machine lacks runs on the CPU, with a note)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-dir", o.checkpointDir,
                  "Write checkpoints here (DIR/ckpt-<step>.tckpt, DIR/latest; the newest 3 kept) "
                  "at the end of every epoch");
  cmd->add_option("--checkpoint-every", o.checkpointEvery,
                  "Also checkpoint every N steps (needs --checkpoint-dir)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--resume", o.resume,
                "Continue from the newest checkpoint in --checkpoint-dir (bit-identical on the CPU)");
  cmd->add_flag("--no-progress", o.noProgress, "No progress bar (one line per epoch only)");
  cmd->add_option("--metrics-every", o.metricsEvery,
                  "Read the loss and accuracy, summed on the step's device, every N steps (the "
                  "progress bar and the NaN check); steps in between are not waited for. 0: every "
                  "step on the CPU, every 25 on a GPU")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--placement-log", o.placementLog,
                  "Write the training step's placement log (text) to this file");
  cmd->add_option("--trace", o.trace,
                  "Write a Chrome trace (FILE.json, for ui.perfetto.dev or chrome://tracing) of "
                  "the first " + std::to_string(kTrainTracedSteps) +
                      " training steps, every op and copy of each (those steps wait for their "
                      "devices)");
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
  } else if (o.data.rfind("onnx:", 0) == 0 && o.data.size() > 5) {
    t.dataFormat = "onnx";
    t.dataDir = o.data.substr(5);
  } else {
    std::fprintf(stderr, "tandem: usage error: --data %s: fashion-mnist[:DIR] or onnx:DIR\n",
                 o.data.c_str());
    return 2;
  }
  if ((o.resume || o.checkpointEvery > 0) && o.checkpointDir.empty()) {
    std::fprintf(stderr, "tandem: usage error: --resume and --checkpoint-every need --checkpoint-dir\n");
    return 2;
  }
  t.targets = o.target;
  t.checkpointDir = o.checkpointDir;
  t.checkpointEverySteps = o.checkpointEvery;
  t.metricsEverySteps = o.metricsEvery;
  t.resume = o.resume;
  t.progress = !o.noProgress;
  t.placementLog = o.placementLog;
  t.trace = o.trace;
  t.output = o.output;
  if (std::string bad = trainingOptions(o, &t.training); !bad.empty()) {
    std::fprintf(stderr, "tandem: usage error: %s\n", bad.c_str());
    return 2;
  }
  t.training.allFloatConstants = o.allParams;
  t.paramPatterns = o.params;
  t.freezePatterns = o.freeze;
  t.training.updatesInPlace = !o.copyBackUpdates;
  t.training.batchNormInTraining = !o.freezeBatchNorm;
  t.epochs = o.epochs;
  t.batch = o.batch;
  t.maxSteps = o.maxSteps;
  t.keepLastBatch = o.keepLastBatch;
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
