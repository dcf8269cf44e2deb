// `tandem train` (Train.h): the data, the two plans, the Trainer, and the write-back of the
// trained initializers.
#include "tools/driver/Train.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <regex>
#include <set>

#include "frontend/Datasets.h"
#include "frontend/OnnxTensor.h"
#include "runtime/FileIO.h"
#include "tools/driver/Driver.h"

namespace tandem {
namespace {

// The model's sample input (the first graph input that is no initializer): its name, rank and
// dtype, f32 (images, features) or an integer type (i64 / i32: token ids), and its batch dim when
// the model fixes it (exported without a dynamic batch: torch.onnx's default), else 0.
Status sampleInput(const onnx::ModelProto& m, const std::string& path, std::string* name, int* rank,
                   DType* dtype, int64_t* fixedBatch) {
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  for (const auto& i : m.graph().input()) {
    if (inits.count(i.name())) continue;
    *name = i.name();
    *rank = i.type().tensor_type().shape().dim_size();
    if (*rank < 2)
      return Status::error(path + ": input '" + *name + "' must be [N, ...], has rank " + std::to_string(*rank));
    const auto& d0 = i.type().tensor_type().shape().dim(0);
    *fixedBatch = d0.has_dim_value() && d0.dim_value() > 0 ? d0.dim_value() : 0;
    switch (i.type().tensor_type().elem_type()) {
      case onnx::TensorProto::FLOAT: *dtype = DType::F32; break;
      case onnx::TensorProto::INT64: *dtype = DType::I64; break;
      case onnx::TensorProto::INT32: *dtype = DType::I32; break;
      default:
        return Status::error(path + ": input '" + *name + "' has ONNX element type " +
                             std::to_string(i.type().tensor_type().elem_type()) +
                             "; tandem train feeds float (images, features), int64 or int32 (token ids)");
    }
    return Status::ok();
  }
  return Status::error(path + ": the model has no graph input for the samples");
}

// i64 samples as the i32 a model takes (token ids), each checked to fit.
Status narrowToInt32(const LabelledDataset& d, const std::string& what, std::vector<int32_t>* out) {
  out->resize(d.integerSamples.size());
  for (size_t i = 0; i < d.integerSamples.size(); ++i) {
    const int64_t v = d.integerSamples[i];
    if (v < INT32_MIN || v > INT32_MAX)
      return Status::error(what + ": sample " + std::to_string(i / std::max<int64_t>(1, d.sampleSize())) +
                           " holds " + std::to_string(v) + ", outside int32 (the model's input type)");
    (*out)[i] = (int32_t)v;
  }
  return Status::ok();
}

Status compileAndLoad(const std::string& path, const CompileOptions& co, int threads,
                      std::unique_ptr<Executable>* exe, CompileResult* r) {
  TANDEM_RETURN_IF_ERROR(compileOnnxFile(path, ImportOptions{}, co, r));
  for (const std::string& n : r->notes)
    if (n.find("cannot") != std::string::npos) std::fprintf(stderr, "note: %s\n", n.c_str());
  LoadOptions lo;
  lo.threads = threads;
  return Executable::load(r->plan, lo, exe).withContext(path);
}

// The model's per-sample input shape for a data set's samples: [1, H, W] for a rank-4 input,
// the flattened sample for rank 2, else the data's own.
Shape sampleShapeFor(int rank, const Shape& data) {
  int64_t n = 1;
  for (int64_t d : data) n *= d;
  if (rank == 2) return {n};
  if (rank == 4 && data.size() == 2) return {1, data[0], data[1]};
  return data;
}

// `int32` (when not empty) holds d's samples narrowed to the model's i32.
SampleSource sourceOf(const LabelledDataset& d, const Shape& sampleShape, const std::vector<int32_t>& int32) {
  SampleSource s;
  s.count = d.count;
  s.dtype = int32.empty() ? d.dtype : DType::I32;
  s.sampleShape = sampleShape;
  s.labelShape = d.labelShape;
  s.samples = int32.empty() ? d.data() : int32.data();
  s.labels = d.labels.data();
  return s;
}

// The f32 initializers of `m` whose names match one of `patterns` (regex_search), in the
// model's order; each pattern must compile and match one.
Status matchInitializers(const onnx::ModelProto& m, const std::vector<std::string>& patterns,
                         const char* flag, std::vector<std::string>* names) {
  std::vector<std::string> f32;
  for (const auto& t : m.graph().initializer())
    if (t.data_type() == onnx::TensorProto::FLOAT) f32.push_back(t.name());
  std::vector<bool> taken(f32.size(), false);
  for (const std::string& p : patterns) {
    std::regex re;
    try {
      re = std::regex(p, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Status::error(std::string(flag) + " '" + p + "': not a regular expression: " + e.what());
    }
    bool any = false;
    for (size_t i = 0; i < f32.size(); ++i)
      if (std::regex_search(f32[i], re)) any = taken[i] = true;
    if (!any) {
      std::string some;
      for (size_t i = 0; i < f32.size() && i < 6; ++i) some += (i ? ", " : "") + f32[i];
      return Status::error(std::string(flag) + " '" + p + "' matches no f32 initializer of the model" +
                           (f32.empty() ? std::string(" (it has none)")
                                        : " (" + std::to_string(f32.size()) + " of them: " + some +
                                              (f32.size() > 6 ? ", ..." : "") + ")"));
    }
  }
  for (size_t i = 0; i < f32.size(); ++i)
    if (taken[i]) names->push_back(f32[i]);
  return Status::ok();
}

}  // namespace

Status trainModel(const TrainOptions& o, std::FILE* log, std::vector<EpochReport>* reports) {
  // 1. The model (for its initializers and input) and the data.
  std::string bytes;
  TANDEM_RETURN_IF_ERROR(readInputFile(o.model, &bytes));
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    return Status::error(o.model + ": not a valid ONNX model (protobuf parse failed)");
  std::string().swap(bytes);
  // Tensors kept as external data come in, so the trained model written below is whole.
  TANDEM_RETURN_IF_ERROR(loadExternalData(&model, o.model).withContext(o.model));
  std::string input;
  int rank = 0;
  DType inputDtype = DType::F32;
  int64_t fixedBatch = 0;
  TANDEM_RETURN_IF_ERROR(sampleInput(model, o.model, &input, &rank, &inputDtype, &fixedBatch));
  // A fixed batch dim is usually baked into the graph as well (Reshape targets of [1, ...]), so
  // the step runs at that batch and no other; said before the data is read.
  if (fixedBatch && fixedBatch != o.batch)
    return Status::error(o.model + ": input '" + input + "' has a fixed batch of " + std::to_string(fixedBatch) +
                         " (exported without a dynamic batch dim), so it trains at --batch " +
                         std::to_string(fixedBatch) + " only, not " + std::to_string(o.batch) +
                         "; for another batch re-export it with torch.onnx.export(..., dynamic_axes={'" + input +
                         "': {0: 'N'}})");
  LabelledDataset train, test;
  DatasetOptions dataOptions;
  dataOptions.sampleDtype = inputDtype == DType::F32 ? DType::F32 : DType::I64;
  if (o.dataFormat == "fashion-mnist") {
    if (inputDtype != DType::F32)
      return Status::error(o.model + ": input '" + input + "' is " + dtypeName(inputDtype) +
                           " (token ids?), Fashion-MNIST's images are f32: use --data onnx:DIR");
    TANDEM_RETURN_IF_ERROR(loadIdxDataset(o.dataDir, "train", &train));
    TANDEM_RETURN_IF_ERROR(loadIdxDataset(o.dataDir, "t10k", &test));
  } else if (o.dataFormat == "onnx") {
    TANDEM_RETURN_IF_ERROR(loadOnnxDataSets(o.dataDir + "/train", &train, dataOptions));
    TANDEM_RETURN_IF_ERROR(loadOnnxDataSets(o.dataDir + "/test", &test, dataOptions));
  } else {
    return Status::error("unknown data format '" + o.dataFormat + "' (fashion-mnist or onnx)");
  }
  if (train.count < o.batch)
    return Status::error("the training set has " + std::to_string(train.count) +
                         " samples, fewer than one batch of " + std::to_string(o.batch));
  const Shape sample = sampleShapeFor(rank, train.sampleShape);
  auto imageShape = [&](int64_t n) {
    Shape s = {n};
    s.insert(s.end(), sample.begin(), sample.end());
    return s;
  };

  // 2. The plans: the step at o.batch with resident state, the forward pass for evaluation.
  CompileOptions co;
  TANDEM_RETURN_IF_ERROR(setTargetDevices(&co, o.targets));
  co.training = o.training;
  if (!o.paramPatterns.empty()) {
    if (o.training.allFloatConstants || !o.training.parameterNames.empty())
      return Status::error("--params names the parameters itself: not with --all-params");
    TANDEM_RETURN_IF_ERROR(matchInitializers(model, o.paramPatterns, "--params", &co.training->parameterNames));
  }
  std::set<std::string> frozen;
  if (!o.freezePatterns.empty()) {
    TANDEM_RETURN_IF_ERROR(matchInitializers(model, o.freezePatterns, "--freeze", &co.training->frozenNames));
    frozen.insert(co.training->frozenNames.begin(), co.training->frozenNames.end());
  }
  if (o.training.allFloatConstants && o.training.parameterNames.empty()) {
    // --all-params: every f32 initializer (PyTorch's parameters), not the Constant nodes.
    co.training->allFloatConstants = false;
    for (const auto& t : model.graph().initializer())
      if (t.data_type() == onnx::TensorProto::FLOAT) co.training->parameterNames.push_back(t.name());
    if (co.training->parameterNames.empty())
      return Status::error(o.model + ": --all-params: the model has no f32 initializer to train");
  }
  co.training->residentState = true;
  co.training->metrics = true;  // loss and accuracy summed in the step (Trainer)
  const bool partialBatch = o.keepLastBatch && train.count % o.batch != 0;
  if (partialBatch) {
    // The padded rows go through the forward pass with the real ones: only a BatchNorm on
    // batch statistics lets samples meet there.
    if (o.training.batchNormInTraining)
      for (const auto& n : model.graph().node())
        if (n.op_type() == "BatchNormalization")
          return Status::error(o.model + ": --keep-last-batch: BatchNormalization '" + n.name() +
                               "' trains on batch statistics, which the last batch's padding rows would "
                               "change; use --freeze-batchnorm, or a --batch that divides the " +
                               std::to_string(train.count) + " training samples, or drop the last batch");
    if (!co.training->ignoreIndex) co.training->ignoreIndex = -100;  // the padding's label
  }
  const int64_t epochSteps = partialBatch ? (train.count + o.batch - 1) / o.batch : train.count / o.batch;
  if (o.training.lrSchedule == CompileOptions::Training::LrSchedule::Cosine &&
      o.training.totalSteps == 0)  // cosine's T defaults to the run's steps
    co.training->totalSteps = o.epochs * (o.maxSteps > 0 ? std::min(epochSteps, o.maxSteps) : epochSteps);
  co.inputShapes[input] = imageShape(o.batch);
  std::unique_ptr<Executable> step, forward;
  CompileResult stepResult, forwardResult;
  TANDEM_RETURN_IF_ERROR(compileAndLoad(o.model, co, o.threads, &step, &stepResult));
  if (!o.placementLog.empty())
    TANDEM_RETURN_IF_ERROR(writeFileAtomic(o.placementLog, stepResult.placementLogText));
  for (const std::string& n : step->notes())
    if (log) std::fprintf(log, "note: %s\n", n.c_str());
  // Names, the first 8 of them: "a, b, and 3 more".
  auto someNames = [](const std::vector<std::string>& names) {
    std::string s;
    for (size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", " : "") + names[i];
    if (names.size() > 8) s += ", and " + std::to_string(names.size() - 8) + " more";
    return s;
  };
  if (log && !frozen.empty())
    std::fprintf(log, "note: --freeze: %zu f32 initializer(s) stay as they are: %s\n", frozen.size(),
                 someNames(co.training->frozenNames).c_str());
  if (log && o.training.parameterNames.empty() && o.paramPatterns.empty()) {
    // An f32 initializer that is not among the step's state did not become a parameter: with
    // --all-params one the graph does not read; by default also one that is no weight, bias,
    // normalization scale or embedding (TrainingGraph.h), which PyTorch might train.
    const std::set<std::string> state(step->variableNames().begin(), step->variableNames().end());
    std::vector<std::string> untrained;
    for (const auto& t : model.graph().initializer())
      if (t.data_type() == onnx::TensorProto::FLOAT && !state.count(t.name()) && !frozen.count(t.name()))
        untrained.push_back(t.name());
    const size_t count = untrained.size();
    if (count && o.training.allFloatConstants)
      std::fprintf(log, "note: --all-params: %zu f32 initializer(s) do not train (not read by the graph, "
                        "or folded into constants at import): %s\n", count, someNames(untrained).c_str());
    else if (count)
      std::fprintf(log, "note: %zu f32 initializer(s) do not train (no weight or bias of a Conv, ConvTranspose, "
                        "Gemm or MatMul, normalization scale or bias or embedding table, or not read by the "
                        "graph; --all-params trains every one the graph reads): %s\n",
                   count, someNames(untrained).c_str());
  }
  co.training->forwardOnly = true;
  co.devices = DeviceSet();
  TANDEM_RETURN_IF_ERROR(setTargetDevices(&co, "cpu"));
  co.inputShapes[input] =
      imageShape(fixedBatch ? fixedBatch : std::min<int64_t>(test.count > 0 ? test.count : 1, 500));
  TANDEM_RETURN_IF_ERROR(compileAndLoad(o.model, co, o.threads, &forward, &forwardResult));
  // What trains is written back by initializer name: each of the forward plan's parameters and
  // buffers (its inputs after the images) must be one, or its trained value would be lost.
  if (!o.output.empty()) {
    std::set<std::string> inits;
    for (const auto& t : model.graph().initializer()) inits.insert(t.name());
    for (size_t i = 1; i < forward->inputNames().size(); ++i)
      if (!inits.count(forward->inputNames()[i]))
        return Status::error(
            o.model + ": '" + forward->inputNames()[i] +
            "' would train but is not one of the model's initializers, so -o could not write "
            "it back (a constant computed from one at import, e.g. an Identity of an "
            "initializer: PyTorch's TrainingMode.PRESERVE export shares a BatchNorm's equal "
            "statistics that way; export with training=torch.onnx.TrainingMode.TRAINING, or "
            "--freeze-batchnorm)");
  }
  std::unique_ptr<Trainer> trainer;
  TANDEM_RETURN_IF_ERROR(Trainer::create(std::move(step), std::move(forward), &trainer, o.training.classAxis,
                                         co.training->ignoreIndex));

  // 3. fit: shuffled epochs, the test set as validation, checkpoints.
  TrainerOptions to;
  to.epochs = o.epochs;
  to.maxStepsPerEpoch = o.maxSteps;
  to.dropLast = !partialBatch;
  to.seed = o.seed;
  const int64_t count = train.count;
  const uint64_t seed = o.seed;
  to.order = [count, seed](int64_t epoch) { return shuffledOrder(count, seed, epoch); };
  to.checkpointDir = o.checkpointDir;
  to.checkpointEverySteps = o.checkpointEverySteps;
  to.metricsEverySteps = o.metricsEverySteps;
  to.resume = o.resume;
  to.showProgress = o.progress;
  // Images ([N, C, H, W] floats) are counted as Keras counts them; token ids and features as samples.
  to.progress.rateUnit = inputDtype == DType::F32 && rank == 4 ? "img/s" : "samples/s";
  to.log = log;
  to.onEpochEnd = [log](const EpochReport& r) {
    // -1 is "not measured" (no metrics, an empty test set): said as n/a, never as a figure.
    auto fraction = [](double v) {
      char b[32];
      if (v < 0) return std::string("n/a");
      std::snprintf(b, sizeof b, "%.4f", v);
      return std::string(b);
    };
    if (log)
      std::fprintf(log, "epoch %d: %lld steps, loss %.4f, accuracy %s, test accuracy %s, %.0f samples/s, %.2f s\n",
                   r.epoch, (long long)r.steps, r.meanLoss, fraction(r.trainAccuracy).c_str(),
                   fraction(r.validationAccuracy).c_str(), r.samplesPerSecond, r.trainSeconds);
    if (log) std::fflush(log);
    return true;
  };
  AtomicFile traceFile;
  Trace trace;
  if (!o.trace.empty()) {
    TANDEM_RETURN_IF_ERROR(traceFile.open(o.trace));
    to.trace = &trace;
    to.traceSteps = kTrainTracedSteps;
  }
  std::vector<int32_t> train32, test32;  // the samples of an i32 model input
  if (inputDtype == DType::I32) {
    TANDEM_RETURN_IF_ERROR(narrowToInt32(train, o.dataDir + "/train", &train32));
    TANDEM_RETURN_IF_ERROR(narrowToInt32(test, o.dataDir + "/test", &test32));
  }
  const SampleSource trainSrc = sourceOf(train, sample, train32), testSrc = sourceOf(test, sample, test32);
  TANDEM_RETURN_IF_ERROR(trainer->fit(trainSrc, test.count ? &testSrc : nullptr, to, reports));
  if (!o.trace.empty()) {
    const std::string text = trace.json();
    TANDEM_RETURN_IF_ERROR(traceFile.write(text.data(), text.size()));
    TANDEM_RETURN_IF_ERROR(traceFile.commit());
  }

  // 4. The trained parameters back into the initializers (raw f32 data).
  if (o.output.empty()) return Status::ok();
  std::map<std::string, Tensor> vars;
  TANDEM_RETURN_IF_ERROR(trainer->variables(&vars));
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    auto it = vars.find(init.name());
    if (it == vars.end()) continue;
    const Tensor& v = it->second;
    init.clear_float_data();
    init.set_raw_data(std::string(static_cast<const char*>(v.raw()), v.bytes()));
  }
  std::string outBytes;
  if (!model.SerializeToString(&outBytes))
    return Status::error(o.output + ": cannot serialize the trained model");
  return writeFileAtomic(o.output, outBytes);
}

}  // namespace tandem
