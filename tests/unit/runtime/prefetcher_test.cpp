// The batch prefetcher (runtime/training/Prefetcher.h): batches equal serial assembly, the
// worker runs ahead of the caller, errors arrive in order, early destruction is clean.
#include "runtime/training/Prefetcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

namespace tandem {
namespace {

using namespace std::chrono_literals;

// 37 samples of f32 [3, 2] with distinct values, labels 1000 + i, a fixed scrambled order.
struct Data {
  int64_t count = 37;
  Shape sampleShape = {3, 2};
  std::vector<float> samples;
  std::vector<int64_t> labels;
  std::vector<int64_t> order;
  Data() {
    for (int64_t i = 0; i < count * 6; ++i) samples.push_back(0.5f * (float)i);
    for (int64_t i = 0; i < count; ++i) labels.push_back(1000 + i);
    for (int64_t i = 0; i < count; ++i) order.push_back((i * 11 + 5) % count);  // 11 coprime to 37
  }
  SampleSource source() const {
    SampleSource s;
    s.count = count;
    s.sampleShape = sampleShape;
    s.samples = samples.data();
    s.labels = labels.data();
    return s;
  }
};

// The serial reference: batch k of `order`, n samples.
void expectBatch(const Data& d, const Batch& b, int64_t k, int64_t batchSize, int64_t n) {
  EXPECT_EQ(b.index, k);
  ASSERT_EQ(b.samples.dtype(), DType::F32);
  ASSERT_EQ(b.samples.shape(), (Shape{n, 3, 2}));
  ASSERT_EQ(b.labels.shape(), (Shape{n}));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t idx = d.order[k * batchSize + i];
    EXPECT_EQ(b.labels.data<int64_t>()[i], 1000 + idx) << "batch " << k << " row " << i;
    EXPECT_EQ(0, std::memcmp(b.samples.data<float>() + i * 6, d.samples.data() + idx * 6, 24))
        << "batch " << k << " row " << i;
  }
}

TEST(Prefetcher, BatchesEqualSerialAssemblyDroppingOrKeepingTheLast) {
  Data d;
  for (bool dropLast : {true, false}) {
    PrefetchOptions o;
    o.batchSize = 8;
    o.dropLast = dropLast;
    std::unique_ptr<Prefetcher> p;
    ASSERT_TRUE(Prefetcher::create(d.source(), d.order, o, &p));
    EXPECT_EQ(p->numBatches(), dropLast ? 4 : 5);  // 37 = 4 * 8 + 5
    Batch b;
    bool done = false;
    int64_t k = 0;
    for (; k < 10; ++k) {
      ASSERT_TRUE(p->next(&b, &done));
      if (done) break;
      expectBatch(d, b, k, 8, k == 4 ? 5 : 8);
    }
    EXPECT_EQ(k, dropLast ? 4 : 5);
    ASSERT_TRUE(p->next(&b, &done));  // stays done
    EXPECT_TRUE(done);
  }
}

// Labels of shape [2] a sample (one a position) travel with their sample, row-major; a
// kept last batch's labels are [n, 2].
TEST(Prefetcher, LabelsPerPositionTravelWithTheirSample) {
  Data d;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < d.count; ++i) labels.insert(labels.end(), {100 * i, 100 * i + 1});
  SampleSource s = d.source();
  s.labels = labels.data();
  s.labelShape = {2};
  PrefetchOptions o;
  o.batchSize = 8;
  o.dropLast = false;
  std::unique_ptr<Prefetcher> p;
  ASSERT_TRUE(Prefetcher::create(s, d.order, o, &p));
  Batch b;
  bool done = false;
  for (int64_t k = 0; k < 5; ++k) {
    ASSERT_TRUE(p->next(&b, &done));
    ASSERT_FALSE(done);
    const int64_t n = k == 4 ? 5 : 8;
    ASSERT_EQ(b.labels.shape(), (Shape{n, 2}));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t idx = d.order[k * 8 + i];
      EXPECT_EQ(b.labels.data<int64_t>()[2 * i], 100 * idx);
      EXPECT_EQ(b.labels.data<int64_t>()[2 * i + 1], 100 * idx + 1);
      EXPECT_EQ(b.samples.data<float>()[i * 6], d.samples[idx * 6]);
    }
  }
  s.labelShape = {0};
  EXPECT_EQ(Prefetcher::create(s, d.order, o, &p).message(), "prefetcher: bad label shape [0]");
}

TEST(Prefetcher, FetchCallbackSourceOfAnotherDType) {
  SampleSource s;
  s.count = 10;
  s.dtype = DType::U8;
  s.sampleShape = {4};
  s.fetch = [](int64_t i, void* out, int64_t* label) {
    for (int j = 0; j < 4; ++j) static_cast<uint8_t*>(out)[j] = (uint8_t)(i * 10 + j);
    *label = -i;
    return Status::ok();
  };
  PrefetchOptions o;
  o.batchSize = 3;
  std::unique_ptr<Prefetcher> p;
  ASSERT_TRUE(Prefetcher::create(s, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, o, &p));
  Batch b;
  bool done;
  for (int64_t k = 0; k < 3; ++k) {
    ASSERT_TRUE(p->next(&b, &done));
    ASSERT_FALSE(done);
    ASSERT_EQ(b.samples.shape(), (Shape{3, 4}));
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t idx = 9 - (k * 3 + i);
      EXPECT_EQ(b.labels.data<int64_t>()[i], -idx);
      EXPECT_EQ(b.samples.data<uint8_t>()[i * 4 + 3], idx * 10 + 3);
    }
  }
  ASSERT_TRUE(p->next(&b, &done));
  EXPECT_TRUE(done);  // the 10th sample is dropped
}

// The worker fills batch k + 1 while the caller holds batch k, and no further (two buffers).
TEST(Prefetcher, WorkerRunsAheadWhileTheCallerHoldsABatch) {
  std::atomic<int64_t> fetched{0};
  SampleSource s;
  s.count = 100;
  s.sampleShape = {1};
  s.fetch = [&](int64_t i, void* out, int64_t* label) {
    *static_cast<float*>(out) = (float)i;
    *label = i;
    ++fetched;
    return Status::ok();
  };
  std::vector<int64_t> order(40);
  std::iota(order.begin(), order.end(), 0);
  PrefetchOptions o;
  o.batchSize = 4;
  std::unique_ptr<Prefetcher> p;
  ASSERT_TRUE(Prefetcher::create(s, order, o, &p));
  auto waitFor = [&](int64_t n) {
    for (int i = 0; i < 500 && fetched.load() < n; ++i) std::this_thread::sleep_for(10ms);
    return fetched.load();
  };
  // Before any next(): both buffers filled (batches 0 and 1), then the worker waits.
  EXPECT_EQ(waitFor(8), 8);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(fetched.load(), 8);
  Batch b;
  bool done;
  ASSERT_TRUE(p->next(&b, &done));  // holds batch 0: buffer 0 stays busy, nothing more fetched
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(fetched.load(), 8);
  ASSERT_TRUE(p->next(&b, &done));  // holds batch 1, releases buffer 0: batch 2 is assembled now
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(waitFor(12), 12);                 // while this "step" sleeps
  EXPECT_EQ(b.labels.data<int64_t>()[0], 4);  // the held batch was not overwritten
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(fetched.load(), 12);
  ASSERT_TRUE(p->next(&b, &done));
  EXPECT_EQ(b.index, 2);
  EXPECT_EQ(b.labels.data<int64_t>()[3], 11);
}

TEST(Prefetcher, ASourceErrorArrivesAtItsBatchAndStays) {
  SampleSource s;
  s.count = 50;
  s.sampleShape = {2};
  s.fetch = [](int64_t i, void* out, int64_t* label) {
    if (i == 13) return Status::error("sample file 13 unreadable");
    *label = i;
    return Status::ok();
  };
  std::vector<int64_t> order(50);
  std::iota(order.begin(), order.end(), 0);
  PrefetchOptions o;
  o.batchSize = 5;
  std::unique_ptr<Prefetcher> p;
  ASSERT_TRUE(Prefetcher::create(s, order, o, &p));
  Batch b;
  bool done;
  ASSERT_TRUE(p->next(&b, &done));
  ASSERT_TRUE(p->next(&b, &done));
  EXPECT_EQ(b.index, 1);
  for (int i = 0; i < 2; ++i) {
    Status st = p->next(&b, &done);
    EXPECT_EQ(st.message(), "batch 2, sample 13: sample file 13 unreadable");
    EXPECT_FALSE(done);
  }
}

TEST(Prefetcher, EarlyDestructionIsCleanAndPrompt) {
  SampleSource s;
  s.count = 1000000;
  s.sampleShape = {16};
  s.fetch = [](int64_t i, void* out, int64_t* label) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    *label = i;
    return Status::ok();
  };
  std::vector<int64_t> order(1000000);
  std::iota(order.begin(), order.end(), 0);
  PrefetchOptions o;
  o.batchSize = 10000;  // a batch takes >= 0.5 s to assemble
  for (int taken : {0, 1}) {
    std::unique_ptr<Prefetcher> p;
    ASSERT_TRUE(Prefetcher::create(s, order, o, &p));
    Batch b;
    bool done;
    if (taken) {
      ASSERT_TRUE(p->next(&b, &done));
    }
    auto t0 = std::chrono::steady_clock::now();
    p.reset();  // mid-batch: the worker stops between samples
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 300ms) << "taken " << taken;
  }
  // Destroyed while the worker waits for a buffer (both full, never read).
  o.batchSize = 2;
  std::unique_ptr<Prefetcher> p;
  ASSERT_TRUE(Prefetcher::create(s, {1, 2, 3, 4, 5, 6, 7, 8}, o, &p));
  std::this_thread::sleep_for(50ms);
  p.reset();
}

TEST(Prefetcher, AllocatorHookSuppliesBothBuffers) {
  Data d;
  std::vector<void*> given;
  PrefetchOptions o;
  o.batchSize = 8;
  o.dropLast = false;
  o.allocateSamples = [&](DType t, const Shape& s, Tensor* out) {
    TANDEM_RETURN_IF_ERROR(Tensor::tryAlloc(t, s, "pinned", out));
    given.push_back(out->raw());
    return Status::ok();
  };
  std::unique_ptr<Prefetcher> p;
  ASSERT_TRUE(Prefetcher::create(d.source(), d.order, o, &p));
  ASSERT_EQ(given.size(), 2u);  // once per buffer
  Batch b;
  bool done;
  for (int64_t k = 0; k < 5; ++k) {
    ASSERT_TRUE(p->next(&b, &done));
    EXPECT_EQ(b.samples.raw(), given[k % 2]) << k;  // the caller's buffers, alternating
    expectBatch(d, b, k, 8, k == 4 ? 5 : 8);
  }
  // An allocator that returns the wrong thing is refused before the worker starts.
  o.allocateLabels = [](DType, const Shape&, Tensor* out) {
    *out = Tensor::alloc(DType::I32, {8});
    return Status::ok();
  };
  EXPECT_EQ(Prefetcher::create(d.source(), d.order, o, &p).message(),
            "allocating the prefetch buffer for labels: the allocator returned i32 [8] on cpu, "
            "not i64 [8] host memory");
}

TEST(Prefetcher, RefusesBadArguments) {
  Data d;
  PrefetchOptions o;
  std::unique_ptr<Prefetcher> p;
  o.batchSize = 0;
  EXPECT_EQ(Prefetcher::create(d.source(), d.order, o, &p).message(),
            "prefetcher: batch size 0 (must be at least 1)");
  o.batchSize = 4;
  EXPECT_EQ(Prefetcher::create(d.source(), {0, 37}, o, &p).message(),
            "prefetcher: order[1] is 37, outside the 37 samples");
  SampleSource none;
  none.count = 1;
  EXPECT_EQ(Prefetcher::create(none, {0}, o, &p).message(),
            "prefetcher: the sample source has neither sample data nor a fetch");
  EXPECT_EQ(p, nullptr);
}

}  // namespace
}  // namespace tandem
