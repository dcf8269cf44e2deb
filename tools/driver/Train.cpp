// `tandem train` (Train.h): IDX reading, the two plans (training step, forward with parameter
// inputs), the epoch loop and the write-back of the trained initializers.
#include "tools/driver/Train.h"

#include <onnx/onnx_pb.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "frontend/OnnxTensor.h"
#include "runtime/FileIO.h"
#include "tools/driver/Driver.h"

namespace tandem {
namespace {

Status readGz(const std::string& path, std::string* out) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return Status::error(path + ": cannot open (Fashion-MNIST IDX file)");
  out->clear();
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out->append(buf, (size_t)n);
  const bool bad = n < 0;
  gzclose(f);
  if (bad) return Status::error(path + ": gzip read error");
  return Status::ok();
}

uint32_t be32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + at;
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The model's image input: its name and rank (4: [N, 1, H, W], 2: [N, H * W]).
Status imageInput(const onnx::ModelProto& m, const std::string& path, std::string* name,
                  int* rank) {
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  for (const auto& i : m.graph().input()) {
    if (inits.count(i.name())) continue;
    *name = i.name();
    *rank = i.type().tensor_type().shape().dim_size();
    if (*rank != 2 && *rank != 4)
      return Status::error(path + ": input '" + *name + "' must be [N, 1, H, W] or [N, H*W], has rank " +
                           std::to_string(*rank));
    return Status::ok();
  }
  return Status::error(path + ": the model has no graph input for the images");
}

Status compileAndLoad(const std::string& path, const CompileOptions& co, int threads,
                      std::unique_ptr<Executable>* exe) {
  CompileResult r;
  TANDEM_RETURN_IF_ERROR(compileOnnxFile(path, ImportOptions{}, co, &r));
  LoadOptions lo;
  lo.threads = threads;
  return Executable::load(r.plan, lo, exe).withContext(path);
}

// Copies images idx[begin, begin + n) of `d` into a [n, ...] tensor shaped like `shape`.
Tensor batchImages(const ImageDataset& d, const std::vector<int64_t>& idx, int64_t begin,
                   int64_t n, const Shape& shape) {
  Tensor t = Tensor::alloc(DType::F32, shape);
  const int64_t px = d.rows * d.cols;
  float* out = t.data<float>();
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * px, d.images.data() + idx[begin + i] * px, px * sizeof(float));
  return t;
}

}  // namespace

Status readIdxDataset(const std::string& dir, const std::string& prefix, ImageDataset* out) {
  const std::string ip = dir + "/" + prefix + "-images-idx3-ubyte.gz",
                    lp = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  std::string img, lab;
  TANDEM_RETURN_IF_ERROR(readGz(ip, &img));
  TANDEM_RETURN_IF_ERROR(readGz(lp, &lab));
  if (img.size() < 16 || be32(img, 0) != 0x803)
    return Status::error(ip + ": not an IDX3 ubyte file (magic 0x00000803)");
  if (lab.size() < 8 || be32(lab, 0) != 0x801)
    return Status::error(lp + ": not an IDX1 ubyte file (magic 0x00000801)");
  out->count = be32(img, 4);
  out->rows = be32(img, 8);
  out->cols = be32(img, 12);
  if (be32(lab, 4) != (uint32_t)out->count)
    return Status::error(lp + ": " + std::to_string(be32(lab, 4)) + " labels for " +
                         std::to_string(out->count) + " images");
  const size_t px = (size_t)(out->count * out->rows * out->cols);
  if (img.size() != 16 + px) return Status::error(ip + ": truncated");
  if (lab.size() != 8 + (size_t)out->count) return Status::error(lp + ": truncated");
  out->images.resize(px);
  for (size_t i = 0; i < px; ++i) out->images[i] = (unsigned char)img[16 + i] / 255.0f;
  out->labels.resize(out->count);
  for (int64_t i = 0; i < out->count; ++i) out->labels[i] = (unsigned char)lab[8 + i];
  return Status::ok();
}

Status trainModel(const TrainOptions& o, std::FILE* log, std::vector<EpochReport>* reports) {
  // 1. The model (for its initializers and input) and the data.
  std::string bytes;
  TANDEM_RETURN_IF_ERROR(readInputFile(o.model, &bytes));
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    return Status::error(o.model + ": not a valid ONNX model (protobuf parse failed)");
  std::string input;
  int rank = 0;
  TANDEM_RETURN_IF_ERROR(imageInput(model, o.model, &input, &rank));
  ImageDataset train, test;
  TANDEM_RETURN_IF_ERROR(readIdxDataset(o.dataDir, "train", &train));
  TANDEM_RETURN_IF_ERROR(readIdxDataset(o.dataDir, "t10k", &test));
  auto imageShape = [&](int64_t n) {
    return rank == 4 ? Shape{n, 1, train.rows, train.cols} : Shape{n, train.rows * train.cols};
  };

  // 2. The plans: the step at o.batch, the forward pass at the evaluation batch.
  CompileOptions co;
  TANDEM_RETURN_IF_ERROR(setTargetDevices(&co, "cpu"));
  co.training = o.training;
  if (o.training.lrSchedule == CompileOptions::Training::LrSchedule::Cosine &&
      o.training.totalSteps == 0)  // cosine's T defaults to the run's steps
    co.training->totalSteps =
        o.epochs * (o.maxSteps > 0 ? std::min(train.count / o.batch, o.maxSteps)
                                   : train.count / o.batch);
  co.inputShapes[input] = imageShape(o.batch);
  std::unique_ptr<Executable> step, forward;
  TANDEM_RETURN_IF_ERROR(compileAndLoad(o.model, co, o.threads, &step));
  const int64_t evalBatch = test.count % 1000 == 0 ? 1000 : 1;
  co.training->forwardOnly = true;
  co.inputShapes[input] = imageShape(evalBatch);
  TANDEM_RETURN_IF_ERROR(compileAndLoad(o.model, co, o.threads, &forward));

  // 3. The state: inputs 2.. of the step (parameters from the initializers; optimizer slots
  //    and `step` zeros). Result 1 + i is the next value of input 2 + i.
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : model.graph().initializer()) inits[t.name()] = &t;
  const std::vector<std::string>& names = step->inputNames();
  const size_t nState = names.size() - 2;
  std::vector<Tensor> state(nState);
  for (size_t i = 0; i < nState; ++i) {
    const std::string& n = names[2 + i];
    if (auto it = inits.find(n); it != inits.end()) {
      TANDEM_RETURN_IF_ERROR(tensorFromProto(*it->second, &state[i]));
    } else {
      state[i] = Tensor::alloc(DType::F32, step->inputTypes()[2 + i].shape);
    }
  }
  // The forward plan's parameters, by name, among the state.
  std::vector<size_t> forwardParams;
  for (size_t j = 1; j < forward->inputNames().size(); ++j) {
    auto at = std::find(names.begin(), names.end(), forward->inputNames()[j]);
    if (at == names.end())
      return Status::error("train: forward input '" + forward->inputNames()[j] +
                           "' is not a parameter of the step");
    forwardParams.push_back((size_t)(at - names.begin()) - 2);
  }

  // 4. Epochs: shuffled full batches; the outputs of a step are the next step's inputs (moved,
  //    not copied).
  std::vector<int64_t> order(train.count);
  int64_t t = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(o.seed + (uint64_t)epoch);
    std::shuffle(order.begin(), order.end(), rng);
    int64_t steps = train.count / o.batch;
    if (o.maxSteps > 0) steps = std::min(steps, o.maxSteps);
    double lossSum = 0;
    const auto start = Clock::now();
    std::vector<Tensor> in, out;
    for (int64_t s = 0; s < steps; ++s) {
      in.clear();
      in.push_back(batchImages(train, order, s * o.batch, o.batch, imageShape(o.batch)));
      std::vector<int64_t> lab(o.batch);
      for (int64_t i = 0; i < o.batch; ++i) lab[i] = train.labels[order[s * o.batch + i]];
      in.push_back(Tensor::fromVector<int64_t>({o.batch}, lab));
      for (Tensor& x : state) in.push_back(std::move(x));
      ++t;
      TANDEM_RETURN_IF_ERROR(step->run(in, &out).withContext("train step " + std::to_string(t)));
      lossSum += out[0].data<float>()[0];
      for (size_t i = 0; i < nState; ++i) state[i] = std::move(out[1 + i]);
    }
    EpochReport r;
    r.epoch = epoch;
    r.steps = steps;
    r.trainSeconds = secondsSince(start);
    r.meanLoss = steps ? lossSum / (double)steps : 0;
    r.imagesPerSecond = r.trainSeconds > 0 ? (double)(steps * o.batch) / r.trainSeconds : 0;

    // Test accuracy with the forward plan and the current parameters.
    std::vector<int64_t> all(test.count);
    std::iota(all.begin(), all.end(), 0);
    int64_t correct = 0;
    for (int64_t b = 0; b < test.count; b += evalBatch) {
      in.clear();
      in.push_back(batchImages(test, all, b, evalBatch, imageShape(evalBatch)));
      for (size_t p : forwardParams) in.push_back(state[p]);
      TANDEM_RETURN_IF_ERROR(forward->run(in, &out).withContext("evaluation"));
      const int64_t classes = out[0].shape().back();
      for (int64_t i = 0; i < evalBatch; ++i) {
        const float* l = out[0].data<float>() + i * classes;
        correct += (std::max_element(l, l + classes) - l) == test.labels[b + i];
      }
    }
    r.testAccuracy = (double)correct / (double)test.count;
    if (log)
      std::fprintf(log,
                   "epoch %d: %lld steps, loss %.4f, test accuracy %.4f, %.0f images/s, "
                   "%.2f s\n",
                   epoch, (long long)steps, r.meanLoss, r.testAccuracy, r.imagesPerSecond,
                   r.trainSeconds);
    if (reports) reports->push_back(r);
  }

  // 5. The trained parameters back into the initializers (raw f32 data).
  if (o.output.empty()) return Status::ok();
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    auto at = std::find(names.begin() + 2, names.begin() + 2 + nState, init.name());
    if (at == names.begin() + 2 + nState) continue;
    const Tensor& v = state[(size_t)(at - names.begin()) - 2];
    init.clear_float_data();
    init.set_raw_data(std::string(reinterpret_cast<const char*>(v.data<float>()),
                                  (size_t)v.numel() * sizeof(float)));
  }
  std::string outBytes;
  if (!model.SerializeToString(&outBytes))
    return Status::error(o.output + ": cannot serialize the trained model");
  return writeFileAtomic(o.output, outBytes);
}

}  // namespace tandem
