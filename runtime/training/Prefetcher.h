// Batch assembly on a background thread, double-buffered, so the next batch is ready when the
// caller's training step ends.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace tandem {

/// Where samples come from: `count` samples of dtype `dtype` and shape `sampleShape`, each with
/// i64 labels of shape `labelShape` ([] : one label a sample; [T]: one a position, a language
/// model's next tokens). Either `samples` + `labels` (contiguous host arrays [count,
/// sampleShape...] and [count, labelShape...], e.g. a LabelledDataset's, which must outlive the
/// Prefetcher) or `fetch`.
struct SampleSource {
  int64_t count = 0;
  DType dtype = DType::F32;
  Shape sampleShape;
  Shape labelShape;  // one sample's labels; [] = one label
  const void* samples = nullptr;
  const int64_t* labels = nullptr;
  /// Used when `samples` is null: writes sample `index` (in [0, count)) into `out` (one
  /// sample's bytes) and its numElements(labelShape) labels into label[0..]. Called on the worker thread, in batch order; an
  /// error ends the epoch and is returned by next().
  std::function<Status(int64_t index, void* out, int64_t* label)> fetch;
};

/// Supplies one batch buffer of dtype and shape [batch, ...] (e.g. pinned host memory through
/// cudaHostAlloc for a GPU caller; the Tensor's owner frees it). Called on the constructing
/// thread, once per buffer (twice in all), before the worker starts.
using BatchAllocator = std::function<Status(DType dtype, const Shape& shape, Tensor* out)>;

struct PrefetchOptions {
  int64_t batchSize = 1;
  /// Drop the last batch when fewer than batchSize samples remain; false returns it with its
  /// smaller leading dim.
  bool dropLast = true;
  BatchAllocator allocateSamples;  // null: Tensor::tryAlloc
  BatchAllocator allocateLabels;   // null: Tensor::tryAlloc
};

/// One batch: samples [n, sampleShape...] of the source's dtype, labels i64 [n, labelShape...], n = batchSize
/// except a kept last batch. The tensors view a buffer the Prefetcher reuses: they are valid
/// until the next call of next() or the Prefetcher's destruction, whichever comes first.
struct Batch {
  int64_t index = -1;  // 0-based batch number within the order
  Tensor samples;
  Tensor labels;
};

/// Assembles batch k + 1 on a worker thread while the caller holds batch k: two buffers, the
/// worker fills the one the caller does not hold and waits when both are full. Batches come in
/// order: batch k holds the samples order[k * batchSize, ...). The destructor stops and joins
/// the worker (it finishes at most the sample it is copying).
class Prefetcher {
 public:
  /// Checks the arguments, allocates both buffers, starts the worker. Errors: batchSize < 1, an
  /// index of `order` outside [0, source.count), a source with neither samples nor fetch (or
  /// samples without labels), an unknown dtype, an allocator's error or a buffer of the wrong
  /// dtype/shape or not on "cpu".
  static Status create(SampleSource source, std::vector<int64_t> order, PrefetchOptions options,
                       std::unique_ptr<Prefetcher>* out);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  /// Batches in this order (order.size() / batchSize, rounded up unless dropLast).
  int64_t numBatches() const { return numBatches_; }
  /// Releases the batch returned before, then waits for the next one. *done = true (and *out
  /// untouched) after the last batch. A source error is returned once its batch is reached
  /// ("batch K: ..."), and again on every later call.
  Status next(Batch* out, bool* done);

 private:
  struct Slot {
    Tensor samples, labels;
    int64_t batch = -1;  // the batch it holds, -1 when free
    Status status;
  };
  Prefetcher() = default;
  void run();
  Status fill(Slot* slot, int64_t batch);

  SampleSource src_;
  std::vector<int64_t> order_;
  PrefetchOptions opts_;
  int64_t numBatches_ = 0;
  size_t sampleBytes_ = 0;
  int64_t labelsPerSample_ = 1;
  Slot slots_[2];
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t nextOut_ = 0;            // the batch next() returns next
  int held_ = -1;                  // the slot the caller holds, -1 when none
  Status failure_;                 // the first batch error next() met; returned from then on
  std::atomic<bool> stop_{false};  // set by the destructor; fill() polls it between samples
  std::thread worker_;
};

}  // namespace tandem
