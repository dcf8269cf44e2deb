// The training loop (Trainer.h): prefetched batches through the step plan, progress, per-epoch
// evaluation through the forward plan, checkpoints and resume.
#include "runtime/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "runtime/training/Checkpoint.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Shape withoutBatch(const Shape& s) { return Shape(s.begin() + (s.empty() ? 0 : 1), s.end()); }

// The step plan's metric variables (CompileOptions::Training::metrics).
const char* const kLossSum = "metric.loss_sum";
const char* const kCorrect = "metric.correct";
const char* const kCounted = "metric.counted";  // with an ignore index

std::string lossNotFinite(float loss, int64_t firstStep, int64_t lastStep, const std::string& checkpointDir) {
  std::string where = firstStep == lastStep ? "step " + std::to_string(lastStep)
                                            : "steps " + std::to_string(firstStep) + " to " + std::to_string(lastStep);
  return where + ": the loss is " + (std::isnan(loss) ? "nan" : "inf") + " (try a lower learning rate or --clip-norm)" +
         (checkpointDir.empty() ? "" : "; the last checkpoint in " + checkpointDir + " is intact");
}

// A sample of `s` into `out` (its bytes), with its labels (numElements(s.labelShape) of them).
Status fetchSample(const SampleSource& s, int64_t i, void* out, int64_t* label) {
  const size_t bytes = (size_t)numElements(s.sampleShape) * dtypeSize(s.dtype);
  if (s.samples) {
    const int64_t l = numElements(s.labelShape);
    std::memcpy(out, static_cast<const char*>(s.samples) + (size_t)i * bytes, bytes);
    std::memcpy(label, s.labels + i * l, (size_t)l * sizeof(int64_t));
    return Status::ok();
  }
  return s.fetch(i, out, label);
}

std::string labelOutside(const std::string& what, int64_t sample, int64_t perSample, int64_t at, int64_t label,
                         int64_t classes, std::optional<int64_t> ignoreIndex) {
  return what + ": sample " + std::to_string(sample) +
         (perSample > 1 ? " label " + std::to_string(at) + " is " : std::string(" has label ")) +
         std::to_string(label) + ", outside [0, " + std::to_string(classes) + ") (the model has " + std::to_string(classes) +
         " classes" + (ignoreIndex ? "; the ignore index is " + std::to_string(*ignoreIndex) : std::string()) + ")";
}

}  // namespace

Status Trainer::create(std::unique_ptr<Executable> step, std::unique_ptr<Executable> forward,
                       std::unique_ptr<Trainer>* out, int classAxis, std::optional<int64_t> ignoreIndex) {
  if (!step || !forward) return Status::error("Trainer: a step plan and a forward plan are needed");
  if (step->variableNames().empty())
    return Status::error("Trainer: the step plan has no variables (compile it with "
                         "CompileOptions::Training::residentState)");
  const auto& in = step->inputTypes();
  if (in.size() != 2 || dtypeSize(in[0].dtype) == 0 || in[0].dtype == DType::Bool ||
      in[0].shape.empty() || in[1].dtype != DType::I64 || in[1].shape.empty() ||
      in[1].shape[0] != in[0].shape[0])
    return Status::error("Trainer: the step plan must take (samples [B, ...] of a numeric dtype, "
                         "labels i64 [B, ...]), it takes " + std::to_string(in.size()) + " inputs");
  // With the metric variables the step returns nothing (the loss is summed into one).
  bool metricVars[3] = {false, false, false};
  for (size_t k = 0; k < step->variableNames().size(); ++k) {
    const TensorType& tt = step->variableTypes()[k];
    const bool scalar = tt.dtype == DType::F32 && tt.shape.empty();
    metricVars[0] = metricVars[0] || (scalar && step->variableNames()[k] == kLossSum);
    metricVars[1] = metricVars[1] || (scalar && step->variableNames()[k] == kCorrect);
    metricVars[2] = metricVars[2] || (scalar && step->variableNames()[k] == kCounted);
  }
  const bool metrics = metricVars[0] && metricVars[1];
  if (metrics && metricVars[2] != ignoreIndex.has_value())
    return Status::error(std::string("Trainer: the step plan's metrics were compiled ") +
                         (metricVars[2] ? "with" : "without") + " an ignore index, the Trainer is given " +
                         (ignoreIndex ? "ignore index " + std::to_string(*ignoreIndex) : std::string("none")) +
                         " (CompileOptions::Training::ignoreIndex must be the same)");
  if (!metrics && (step->outputTypes().empty() || step->outputTypes()[0].dtype != DType::F32 ||
                   !step->outputTypes()[0].shape.empty()))
    return Status::error("Trainer: the loss (the step plan's output 0) is not a scalar: " +
                         (step->outputTypes().empty() ? std::string("no output")
                                                      : dtypeName(step->outputTypes()[0].dtype) +
                                                            shapeToString(step->outputTypes()[0].shape)));
  const auto& fin = forward->inputTypes();
  const auto& fout = forward->outputTypes();
  if (fin.empty() || fout.empty() || fout[0].dtype != DType::F32 || fout[0].shape.size() < 2 ||
      fin[0].shape.empty() || fout[0].shape[0] != fin[0].shape[0])
    return Status::error("Trainer: the forward plan must map samples [E, ...] to logits f32 [E, C] "
                         "(or [E, d..., C] with labels [E, d...])");
  // The logits without the class axis must be the step's labels: [E, d...] against [B, d...].
  const int rank = (int)fout[0].shape.size();
  const int axis = classAxis < 0 ? rank + classAxis : classAxis;
  if (axis < 1 || axis >= rank)
    return Status::error("Trainer: class axis " + std::to_string(classAxis) + " is not an axis of the logits " +
                         shapeToString(fout[0].shape) + " after the batch");
  Shape labelShape;
  int64_t outer = 1, inner = 1;
  for (int d = 1; d < rank; ++d) {
    if (d == axis) continue;
    labelShape.push_back(fout[0].shape[d]);
    (d < axis ? outer : inner) *= fout[0].shape[d];
  }
  if (labelShape != withoutBatch(in[1].shape))
    return Status::error("Trainer: the forward plan's logits " + shapeToString(fout[0].shape) + " (class axis " +
                         std::to_string(axis) + ") do not match the step's labels " + shapeToString(in[1].shape));
  if (withoutBatch(fin[0].shape) != withoutBatch(in[0].shape) || fin[0].dtype != in[0].dtype)
    return Status::error(std::string("Trainer: the forward plan's samples are ") + dtypeName(fin[0].dtype) +
                         shapeToString(fin[0].shape) + ", the step's " + dtypeName(in[0].dtype) +
                         shapeToString(in[0].shape));
  std::unique_ptr<Trainer> t(new Trainer());
  const auto& vars = step->variableNames();
  for (size_t j = 1; j < fin.size(); ++j) {
    const std::string& name = forward->inputNames()[j];
    auto at = std::find(vars.begin(), vars.end(), name);
    if (at == vars.end())
      return Status::error("Trainer: forward input '" + name + "' is not a variable of the step plan");
    t->forwardParamNames_.push_back(name);
  }
  std::vector<TensorSpec> specs;
  for (size_t k = 0; k < vars.size(); ++k)
    specs.push_back({vars[k], step->variableTypes()[k].dtype, step->variableTypes()[k].shape});
  t->fingerprint_ = checkpointFingerprint(specs);
  t->hasMetrics_ = metrics;
  t->ignoreIndex_ = ignoreIndex;
  t->sampleShape_ = withoutBatch(in[0].shape);
  t->sampleDtype_ = in[0].dtype;
  t->batch_ = in[0].shape[0];
  t->evalBatch_ = fin[0].shape[0];
  t->classes_ = fout[0].shape[axis];
  t->labelShape_ = labelShape;
  t->outer_ = outer;
  t->inner_ = inner;
  t->step_plan_ = std::move(step);
  t->forward_ = std::move(forward);
  *out = std::move(t);
  return Status::ok();
}

Status Trainer::variables(std::map<std::string, Tensor>* out) {
  out->clear();
  for (const std::string& n : step_plan_->variableNames())
    TANDEM_RETURN_IF_ERROR(step_plan_->readVariable(n, &(*out)[n]));
  return Status::ok();
}

Status Trainer::checkLabels(const SampleSource& s, const std::string& what) const {
  if (s.dtype != sampleDtype_)
    return Status::error(what + ": samples must be " + dtypeName(sampleDtype_) + " (the model's input), got " +
                         dtypeName(s.dtype));
  if (numElements(s.sampleShape) != numElements(sampleShape_))
    return Status::error(what + ": samples are " + shapeToString(s.sampleShape) + ", the model takes " +
                         shapeToString(sampleShape_));
  if (s.labelShape != labelShape_)
    return Status::error(what + ": a sample's labels are " + shapeToString(s.labelShape) +
                         ", the model's logits take " + shapeToString(labelShape_) +
                         (labelShape_.empty() ? " (one label a sample)" : " (one label a position)"));
  if (!s.labels) return Status::ok();  // a fetch source: checked per sample as it is read
  const int64_t l = labelsPerSample();
  for (int64_t i = 0; i < s.count * l; ++i)
    if (!ignored(s.labels[i]) && (s.labels[i] < 0 || s.labels[i] >= classes_))
      return Status::error(labelOutside(what, i / l, l, i % l, s.labels[i], classes_, ignoreIndex_));
  return Status::ok();
}

Status Trainer::forwardParameters(std::vector<Tensor>* params) {
  params->resize(forwardParamNames_.size());
  for (size_t k = 0; k < forwardParamNames_.size(); ++k)
    TANDEM_RETURN_IF_ERROR(step_plan_->readVariable(forwardParamNames_[k], &(*params)[k]));
  return Status::ok();
}

Status Trainer::forwardBatch(const std::vector<Tensor>& params, const void* samples, int64_t n,
                             std::vector<float>* logits) {
  // Full batches of E; the last one padded with its first sample and its extra rows dropped.
  Shape shape = forward_->inputTypes()[0].shape;
  const size_t px = (size_t)numElements(sampleShape_) * dtypeSize(sampleDtype_);  // bytes a sample
  const char* src = static_cast<const char*>(samples);
  const int64_t per = classes_ * labelsPerSample();  // logits a sample
  logits->assign((size_t)(n * per), 0.f);
  std::vector<Tensor> in, out;
  for (int64_t b = 0; b < n; b += evalBatch_) {
    const int64_t m = std::min(evalBatch_, n - b);
    Tensor x = Tensor::alloc(sampleDtype_, shape);
    char* dst = static_cast<char*>(x.raw());
    std::memcpy(dst, src + b * px, m * px);
    for (int64_t i = m; i < evalBatch_; ++i) std::memcpy(dst + i * px, src + b * px, px);
    in.clear();
    in.push_back(std::move(x));
    for (const Tensor& p : params) in.push_back(p);
    TANDEM_RETURN_IF_ERROR(forward_->run(in, &out).withContext("forward plan"));
    std::memcpy(logits->data() + b * per, out[0].data<float>(), (size_t)(m * per) * sizeof(float));
  }
  return Status::ok();
}

Status Trainer::predict(const Tensor& images, Tensor* logits) {
  if (images.dtype() != sampleDtype_ || images.rank() < 1 || withoutBatch(images.shape()) != sampleShape_)
    return Status::error(std::string("predict: samples must be ") + dtypeName(sampleDtype_) + " [n, " +
                         shapeToString(sampleShape_) + "...], got " + dtypeName(images.dtype()) +
                         shapeToString(images.shape()));
  const int64_t n = images.shape()[0];
  std::vector<Tensor> params;
  TANDEM_RETURN_IF_ERROR(forwardParameters(&params));
  std::vector<float> l;
  TANDEM_RETURN_IF_ERROR(forwardBatch(params, images.raw(), n, &l));
  Shape shape = forward_->outputTypes()[0].shape;
  shape[0] = n;
  *logits = Tensor::fromVector<float>(shape, l);
  return Status::ok();
}

Status Trainer::evaluate(const SampleSource& data, double* accuracy, double* meanLoss) {
  TANDEM_RETURN_IF_ERROR(checkLabels(data, "evaluation data"));
  const size_t px = (size_t)numElements(sampleShape_) * dtypeSize(sampleDtype_);  // bytes a sample
  const int64_t chunk = evalBatch_ * std::max<int64_t>(1, 8192 / std::max<int64_t>(1, evalBatch_));
  // The parameters once (a copy from the step plan's variables), then the data in chunks.
  std::vector<Tensor> params;
  TANDEM_RETURN_IF_ERROR(forwardParameters(&params));
  std::vector<char> samples;
  std::vector<float> logits;
  std::vector<int64_t> labels;
  int64_t correct = 0, counted = 0;
  double lossSum = 0;
  const int64_t per = labelsPerSample(), C = classes_;
  for (int64_t b = 0; b < data.count; b += chunk) {
    const int64_t n = std::min(chunk, data.count - b);
    samples.resize(n * px);
    labels.resize((size_t)(n * per));
    for (int64_t i = 0; i < n; ++i)
      TANDEM_RETURN_IF_ERROR(fetchSample(data, b + i, samples.data() + i * px, &labels[i * per]));
    TANDEM_RETURN_IF_ERROR(forwardBatch(params, samples.data(), n, &logits));
    // A sample's logits are [outer, C, inner] (the class axis between), its labels [outer, inner].
    for (int64_t i = 0; i < n * per; ++i)
      if (!ignored(labels[i]) && (labels[i] < 0 || labels[i] >= C))
        return Status::error(labelOutside("evaluation data", b + i / per, per, i % per, labels[i], C, ignoreIndex_));
    for (int64_t io = 0; io < n * outer_; ++io) {
      const float* l = logits.data() + io * C * inner_;
      for (int64_t k = 0; k < inner_; ++k) {
        const int64_t label = labels[io * inner_ + k];
        if (ignored(label)) continue;
        ++counted;
        float mx = l[k];
        int64_t arg = 0;
        for (int64_t c = 1; c < C; ++c)
          if (l[c * inner_ + k] > mx) mx = l[c * inner_ + k], arg = c;
        double sum = 0;
        for (int64_t c = 0; c < C; ++c) sum += std::exp((double)l[c * inner_ + k] - mx);
        lossSum += std::log(sum) + mx - l[label * inner_ + k];
        correct += arg == label;
      }
    }
  }
  const double total = (double)counted;
  *accuracy = total > 0 ? (double)correct / total : 0;
  if (meanLoss) *meanLoss = total > 0 ? lossSum / total : 0;
  return Status::ok();
}

Status Trainer::saveCheckpoint(const TrainerOptions& o, int64_t epoch, int64_t position) {
  Checkpoint c;
  c.fingerprint = fingerprint_;
  c.step = step_;
  c.epoch = epoch;
  c.positionInEpoch = position;
  c.shuffleSeed = o.seed;
  TANDEM_RETURN_IF_ERROR(variables(&c.tensors));
  CheckpointDir dir(o.checkpointDir, o.keepCheckpoints);
  std::string path;
  TANDEM_RETURN_IF_ERROR(dir.save(c, &path).withContext("checkpoint after step " + std::to_string(step_)));
  if (o.log) std::fprintf(o.log, "checkpoint: %s (step %lld)\n", path.c_str(), (long long)step_);
  return Status::ok();
}

Status Trainer::fit(const SampleSource& train, const SampleSource* validation, const TrainerOptions& o,
                    std::vector<EpochReport>* reports) {
  TANDEM_RETURN_IF_ERROR(checkLabels(train, "training data"));
  if (validation) TANDEM_RETURN_IF_ERROR(checkLabels(*validation, "validation data"));
  if (o.epochs < 1) return Status::error("fit: epochs must be >= 1");
  if ((o.resume || o.checkpointEverySteps > 0) && o.checkpointDir.empty())
    return Status::error("fit: resuming or checkpointing needs a checkpoint directory");

  // 1. Where to start: a fresh run, or the newest checkpoint's variables, step and position.
  int64_t startEpoch = 0, startPosition = 0;
  if (o.resume) {
    CheckpointDir dir(o.checkpointDir, o.keepCheckpoints);
    Checkpoint c;
    bool found = false;
    std::vector<TensorSpec> specs;
    for (size_t k = 0; k < step_plan_->variableNames().size(); ++k)
      specs.push_back({step_plan_->variableNames()[k], step_plan_->variableTypes()[k].dtype,
                       step_plan_->variableTypes()[k].shape});
    TANDEM_RETURN_IF_ERROR(dir.loadLatest(fingerprint_, &c, &found, &specs));
    if (found) {
      for (const TensorSpec& s : specs) TANDEM_RETURN_IF_ERROR(step_plan_->writeVariable(s.name, c.tensors[s.name]));
      step_ = c.step;
      startEpoch = c.epoch;
      startPosition = c.positionInEpoch;
      if (c.shuffleSeed != o.seed && o.log)
        std::fprintf(o.log, "note: the checkpoint was shuffled with seed %llu, this run uses %llu\n",
                     (unsigned long long)c.shuffleSeed, (unsigned long long)o.seed);
      if (o.log)
        std::fprintf(o.log, "resumed from %s: step %lld, epoch %lld, sample %lld of it\n",
                     o.checkpointDir.c_str(), (long long)c.step, (long long)c.epoch + 1,
                     (long long)c.positionInEpoch);
    } else if (o.log) {
      std::fprintf(o.log, "no checkpoint in %s: starting from the initial values\n", o.checkpointDir.c_str());
    }
  }

  ProgressOptions po = o.progress;
  if (!o.showProgress) po.write = [](const std::string&) {};
  ProgressBar bar(po);
  const Shape imageShape = step_plan_->inputTypes()[0].shape;
  int64_t traced = 0;  // steps profiled into o.trace
  for (int64_t epoch = startEpoch; epoch < o.epochs; ++epoch) {
    // 2. This epoch's order, from where a resumed run stopped; full batches only.
    std::vector<int64_t> order;
    if (o.order) order = o.order(epoch);
    else {
      order.resize((size_t)train.count);
      std::iota(order.begin(), order.end(), 0);
    }
    const int64_t n = (int64_t)order.size();
    const int64_t begin = epoch == startEpoch ? std::min<int64_t>(startPosition, n) : 0;
    // With the last partial batch kept, an epoch has ceil(n / batch) steps, and a position
    // (a multiple of the batch, or n) has taken ceil(position / batch) of them.
    int64_t fullSteps = o.dropLast ? n / batch_ : (n + batch_ - 1) / batch_;
    if (o.maxStepsPerEpoch > 0) fullSteps = std::min(fullSteps, o.maxStepsPerEpoch);
    const int64_t done = o.dropLast ? begin / batch_ : (begin + batch_ - 1) / batch_;
    const int64_t steps = std::max<int64_t>(0, fullSteps - done);
    std::vector<int64_t> rest(order.begin() + begin, order.begin() + std::min<int64_t>(n, begin + steps * batch_));
    SampleSource src = train;
    src.sampleShape = sampleShape_;
    src.labelShape = labelShape_;
    PrefetchOptions pf;
    pf.batchSize = batch_;
    pf.dropLast = o.dropLast;
    Tensor padSamples, padLabels;  // the kept last batch, padded to the plan's batch
    if (!o.dropLast && (int64_t)rest.size() % batch_) {
      if (!ignoreIndex_)
        return Status::error("training: keeping the last partial batch (TrainerOptions::dropLast false) needs a "
                             "step plan compiled with an ignore index, the padding's label");
      TANDEM_RETURN_IF_ERROR(step_plan_->allocateInput(0, &padSamples));
      TANDEM_RETURN_IF_ERROR(step_plan_->allocateInput(1, &padLabels));
    }
    // The batches go straight into buffers the step's devices read (pinned for a GPU).
    pf.allocateSamples = [this](DType, const Shape&, Tensor* out) { return step_plan_->allocateInput(0, out); };
    pf.allocateLabels = [this](DType, const Shape&, Tensor* out) { return step_plan_->allocateInput(1, out); };
    std::unique_ptr<Prefetcher> prefetch;
    if (steps > 0) TANDEM_RETURN_IF_ERROR(Prefetcher::create(src, rest, pf, &prefetch));

    // 3. The steps: the batch in; the variables (and the metrics) stay in the plan. An epoch
    //    that starts from its beginning starts its metrics from zero; a resumed one keeps the
    //    sums its checkpoint had.
    const int64_t every = o.metricsEverySteps > 0 ? o.metricsEverySteps
                                                  : (hasMetrics_ && step_plan_->isAsynchronous() ? 25 : 1);
    if (hasMetrics_ && begin == 0)
      for (const char* m : {kLossSum, kCorrect, kCounted})
        if (m != kCounted || ignoreIndex_)
          TANDEM_RETURN_IF_ERROR(step_plan_->writeVariable(m, Tensor::alloc(DType::F32, {})));
    bar.beginEpoch(epoch, o.epochs, fullSteps);
    // counted: with an ignore index, the labels not ignored (metric.counted, or counted here
    // from the batches without metrics), the denominator of both means.
    double lossSum = 0, correct = 0, counted = 0;
    auto means = [&](int64_t epochSteps) {
      const double labelsSeen = ignoreIndex_ ? counted : (double)(epochSteps * batch_ * labelsPerSample());
      const double lossOver = ignoreIndex_ ? counted : (double)epochSteps;
      return std::make_pair(lossOver > 0 ? lossSum / lossOver : 0, labelsSeen > 0 ? correct / labelsSeen : 0);
    };
    int64_t lastFetch = step_;  // the step of the last fetch
    const auto start = Clock::now();
    std::vector<Tensor> in(2), out;
    int64_t ran = 0, samplesRun = 0;
    for (int64_t s = 0; s < steps; ++s) {
      Batch b;
      bool end = false;
      TANDEM_RETURN_IF_ERROR(prefetch->next(&b, &end));
      if (end) break;
      const int64_t rows = b.samples.shape().empty() ? 0 : b.samples.shape()[0];
      samplesRun += rows;
      if (rows < batch_) {  // the last partial batch: zero samples labelled with the ignore index
        std::memset(padSamples.raw(), 0, padSamples.bytes());
        std::memcpy(padSamples.raw(), b.samples.raw(), b.samples.bytes());
        int64_t* pl = padLabels.data<int64_t>();
        std::fill(pl, pl + padLabels.numel(), *ignoreIndex_);
        std::memcpy(pl, b.labels.raw(), b.labels.bytes());
        b.samples = padSamples;
        b.labels = padLabels;
      }
      // Host arrays were checked whole before the first epoch (checkLabels); a fetch source's
      // labels are seen here first. Without metrics, the labels an ignore index leaves are
      // counted here.
      const int64_t* bl = b.labels.data<int64_t>();
      const int64_t per = labelsPerSample();
      int64_t stepCounted = batch_ * per;
      const bool scan = !train.labels || (ignoreIndex_ && !hasMetrics_);
      for (int64_t i = 0; scan && i < batch_ * per; ++i) {
        if (ignored(bl[i])) {
          --stepCounted;
          continue;
        }
        if (bl[i] < 0 || bl[i] >= classes_)
          return Status::error(labelOutside("training data", rest[(size_t)(s * batch_ + i / per)], per, i % per,
                                            bl[i], classes_, ignoreIndex_));
      }
      in[0] = Tensor::view(sampleDtype_, imageShape, b.samples.raw());
      in[1] = b.labels;
      const std::string what = "training step " + std::to_string(step_ + 1);
      if (o.trace && traced < o.traceSteps) {
        RunStats stats;
        TANDEM_RETURN_IF_ERROR(step_plan_->run(in, &out, &stats, /*profile=*/true).withContext(what));
        o.trace->addRun(stats, what);
        ++traced;
      } else if (hasMetrics_) {
        TANDEM_RETURN_IF_ERROR(step_plan_->enqueue(in).withContext(what));
      } else {
        TANDEM_RETURN_IF_ERROR(step_plan_->run(in, &out).withContext(what));
      }
      ++step_;
      ++ran;
      if (!hasMetrics_ && stepCounted > 0) {  // a step whose labels are all ignored has the loss 0/0
        const float loss = out[0].data<float>()[0];
        if (!std::isfinite(loss)) return Status::error(lossNotFinite(loss, step_, step_, o.checkpointDir));
        lossSum += ignoreIndex_ ? loss * (double)stepCounted : loss;
        counted += (double)stepCounted;
      }
      const int64_t position = std::min(n, begin + (s + 1) * batch_);
      const bool fetch = (s + 1) % every == 0 || s + 1 == steps;
      if (fetch && hasMetrics_) {
        // The epoch's sums so far, read from the device (this waits for the steps issued).
        Tensor l, c, k;
        TANDEM_RETURN_IF_ERROR(step_plan_->readVariable(kLossSum, &l).withContext(what));
        TANDEM_RETURN_IF_ERROR(step_plan_->readVariable(kCorrect, &c).withContext(what));
        if (ignoreIndex_) TANDEM_RETURN_IF_ERROR(step_plan_->readVariable(kCounted, &k).withContext(what));
        const float sum = l.data<float>()[0];
        if (!std::isfinite(sum)) return Status::error(lossNotFinite(sum, lastFetch + 1, step_, o.checkpointDir));
        lossSum = sum;
        correct = c.data<float>()[0];
        if (ignoreIndex_) counted = k.data<float>()[0];
        lastFetch = step_;
      }
      if (fetch) {
        const auto [loss, accuracy] = means(hasMetrics_ ? done + s + 1 : s + 1);
        std::vector<ProgressMetric> shown = {{"loss", loss}};
        if (hasMetrics_) shown.push_back({"accuracy", accuracy});
        bar.update(done + s + 1, samplesRun, shown);
      }
      if (o.checkpointEverySteps > 0 && step_ % o.checkpointEverySteps == 0 && s + 1 < steps)
        TANDEM_RETURN_IF_ERROR(saveCheckpoint(o, epoch, position));
    }
    if (hasMetrics_) TANDEM_RETURN_IF_ERROR(step_plan_->synchronize());
    EpochReport r;
    r.epoch = (int)epoch + 1;
    r.steps = ran;
    r.trainSeconds = secondsSince(start);
    const auto [meanLoss, accuracy] = means(hasMetrics_ ? done + ran : ran);
    r.meanLoss = meanLoss;
    if (hasMetrics_) r.trainAccuracy = accuracy;
    r.samplesPerSecond = r.trainSeconds > 0 ? (double)samplesRun / r.trainSeconds : 0;
    prefetch.reset();
    std::vector<ProgressMetric> metrics = {{"loss", r.meanLoss}};
    if (hasMetrics_) metrics.push_back({"accuracy", r.trainAccuracy});
    if (validation) {
      TANDEM_RETURN_IF_ERROR(evaluate(*validation, &r.validationAccuracy, &r.validationLoss));
      metrics.push_back({"val_loss", r.validationLoss});
      metrics.push_back({"val_accuracy", r.validationAccuracy});
    }
    bar.endEpoch(metrics);
    if (!o.checkpointDir.empty()) TANDEM_RETURN_IF_ERROR(saveCheckpoint(o, epoch + 1, 0));
    if (reports) reports->push_back(r);
    if (o.onEpochEnd && !o.onEpochEnd(r)) break;
  }
  return Status::ok();
}

}  // namespace tandem
