// The double-buffered batch prefetcher: a worker thread fills one buffer while the caller holds
// the other.
#include "runtime/training/Prefetcher.h"

#include <cstring>

namespace tandem {
namespace {

Status allocBuffer(const BatchAllocator& alloc, DType dtype, const Shape& shape,
                   const std::string& what, Tensor* out) {
  if (!alloc) return Tensor::tryAlloc(dtype, shape, what, out);
  TANDEM_RETURN_IF_ERROR(alloc(dtype, shape, out).withContext("allocating the " + what));
  if (out->dtype() != dtype || out->shape() != shape || !out->raw() || out->device() != "cpu")
    return Status::error("allocating the " + what + ": the allocator returned " +
                         dtypeName(out->dtype()) + " " + shapeToString(out->shape()) + " on " +
                         out->device() + (out->raw() ? "" : " without memory") + ", not " +
                         dtypeName(dtype) + " " + shapeToString(shape) + " host memory");
  return Status::ok();
}

}  // namespace

Status Prefetcher::create(SampleSource source, std::vector<int64_t> order, PrefetchOptions options,
                          std::unique_ptr<Prefetcher>* out) {
  if (options.batchSize < 1)
    return Status::error("prefetcher: batch size " + std::to_string(options.batchSize) +
                         " (must be at least 1)");
  if (!source.samples && !source.fetch)
    return Status::error("prefetcher: the sample source has neither sample data nor a fetch");
  if (source.samples && !source.labels)
    return Status::error("prefetcher: the sample source has samples but no labels");
  if (dtypeSize(source.dtype) == 0)
    return Status::error(std::string("prefetcher: samples of dtype ") + dtypeName(source.dtype));
  const int64_t per = numElements(source.sampleShape);
  if (per < 0)
    return Status::error("prefetcher: bad sample shape " + shapeToString(source.sampleShape));
  const int64_t perLabel = numElements(source.labelShape);
  if (perLabel < 1)
    return Status::error("prefetcher: bad label shape " + shapeToString(source.labelShape));
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] < 0 || order[i] >= source.count)
      return Status::error("prefetcher: order[" + std::to_string(i) + "] is " +
                           std::to_string(order[i]) + ", outside the " +
                           std::to_string(source.count) + " samples");
  std::unique_ptr<Prefetcher> p(new Prefetcher());
  const int64_t n = (int64_t)order.size(), b = options.batchSize;
  p->numBatches_ = options.dropLast ? n / b : (n + b - 1) / b;
  p->sampleBytes_ = (size_t)per * dtypeSize(source.dtype);
  p->labelsPerSample_ = perLabel;
  Shape batchShape = {b}, labelShape = {b};
  batchShape.insert(batchShape.end(), source.sampleShape.begin(), source.sampleShape.end());
  labelShape.insert(labelShape.end(), source.labelShape.begin(), source.labelShape.end());
  for (Slot& s : p->slots_) {
    TANDEM_RETURN_IF_ERROR(allocBuffer(options.allocateSamples, source.dtype, batchShape,
                                       "prefetch buffer for samples", &s.samples));
    TANDEM_RETURN_IF_ERROR(allocBuffer(options.allocateLabels, DType::I64, labelShape,
                                       "prefetch buffer for labels", &s.labels));
  }
  p->src_ = std::move(source);
  p->order_ = std::move(order);
  p->opts_ = std::move(options);
  p->worker_ = std::thread([q = p.get()] { q->run(); });
  *out = std::move(p);
  return Status::ok();
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Status Prefetcher::fill(Slot* slot, int64_t batch) {
  const int64_t b = opts_.batchSize, begin = batch * b;
  const int64_t n = std::min<int64_t>(b, (int64_t)order_.size() - begin);
  auto* dst = static_cast<char*>(slot->samples.raw());
  int64_t* labels = slot->labels.data<int64_t>();
  const auto* src = static_cast<const char*>(src_.samples);
  const int64_t l = labelsPerSample_;
  for (int64_t i = 0; i < n; ++i) {
    if (stop_.load(std::memory_order_relaxed)) return Status::ok();  // nobody will read it
    const int64_t idx = order_[begin + i];
    if (src) {
      std::memcpy(dst + i * sampleBytes_, src + idx * sampleBytes_, sampleBytes_);
      std::memcpy(labels + i * l, src_.labels + idx * l, (size_t)l * sizeof(int64_t));
    } else {
      TANDEM_RETURN_IF_ERROR(
          src_.fetch(idx, dst + i * sampleBytes_, labels + i * l)
              .withContext("batch " + std::to_string(batch) + ", sample " + std::to_string(idx)));
    }
  }
  return Status::ok();
}

void Prefetcher::run() {
  for (int64_t k = 0; k < numBatches_; ++k) {
    Slot& slot = slots_[k % 2];
    {
      // Slot k % 2 held batch k - 2; it is free once the caller has asked for batch k - 1.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || slot.batch == -1; });
      if (stop_) return;
    }
    Status st = fill(&slot, k);  // unlocked: next() does not touch a free slot
    {
      std::lock_guard<std::mutex> lock(mu_);
      slot.status = st;
      slot.batch = k;
    }
    cv_.notify_all();
    if (!st) return;
  }
}

Status Prefetcher::next(Batch* out, bool* done) {
  std::unique_lock<std::mutex> lock(mu_);
  *done = false;
  if (!failure_.isOk()) return failure_;
  if (held_ >= 0) {
    slots_[held_].batch = -1;
    held_ = -1;
    cv_.notify_all();
  }
  if (nextOut_ >= numBatches_) {
    *done = true;
    return Status::ok();
  }
  const int64_t k = nextOut_;
  Slot& slot = slots_[k % 2];
  cv_.wait(lock, [&] { return slot.batch == k; });
  if (!slot.status) {
    failure_ = slot.status;
    return failure_;
  }
  held_ = (int)(k % 2);
  ++nextOut_;
  const int64_t n =
      std::min<int64_t>(opts_.batchSize, (int64_t)order_.size() - k * opts_.batchSize);
  out->index = k;
  if (n == opts_.batchSize) {
    out->samples = slot.samples;
    out->labels = slot.labels;
  } else {
    Shape s = slot.samples.shape();
    s[0] = n;
    out->samples = Tensor::view(src_.dtype, s, slot.samples.raw());
    Shape ls = slot.labels.shape();
    ls[0] = n;
    out->labels = Tensor::view(DType::I64, ls, slot.labels.raw());
  }
  return Status::ok();
}

}  // namespace tandem
