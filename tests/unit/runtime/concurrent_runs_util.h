// Helpers for the concurrent-run tests: seeded inputs for a loaded plan, and a stress run that
// checks every output of many threads' runs byte for byte against the single-threaded ones.
#pragma once
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/Executable.h"

namespace tandem {

/// Intra-op threads for the tests that give each caller an OpenMP team: 2, or 1 under
/// ThreadSanitizer, which does not see libgomp's (uninstrumented) team hand-off and reports the
/// outlined region reading its caller's stack as a race even with a single caller thread.
#if defined(__SANITIZE_THREAD__)
constexpr int kTeamThreads = 1;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr int kTeamThreads = 1;
#else
constexpr int kTeamThreads = 2;
#endif
#else
constexpr int kTeamThreads = 2;
#endif

/// One input set for `exe`: every f32 input uniform in [-1, 1), integer inputs in [0, 4),
/// from `seed`.
// Loads `p` with the built-in kernel choice (identical across loads) and `threads` intra-op
// threads; a load error fails the test.
inline std::unique_ptr<Executable> loadUntuned(const plan::Plan& p, int threads) {
  LoadOptions o;
  o.threads = threads;
  o.tuning = TuningMode::Off;
  std::unique_ptr<Executable> exe;
  Status st = Executable::load(p, o, &exe);
  EXPECT_TRUE(st.isOk()) << st.message();
  return exe;
}

inline std::vector<Tensor> seededInputs(const Executable& exe, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  std::vector<Tensor> ins;
  for (const TensorType& t : exe.inputTypes()) {
    Tensor x = Tensor::alloc(t.dtype, t.shape);
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (t.dtype == DType::F32) x.data<float>()[i] = real(rng);
      else if (t.dtype == DType::I64) x.data<int64_t>()[i] = (int64_t)(rng() % 4);
      else if (t.dtype == DType::I32) x.data<int32_t>()[i] = (int32_t)(rng() % 4);
    }
    ins.push_back(x);
  }
  return ins;
}

/// Whether `a` and `b` hold the same dtypes, shapes and bytes.
inline bool sameBits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape() ||
        std::memcmp(a[i].raw(), b[i].raw(), a[i].bytes()) != 0)
      return false;
  return true;
}

struct StressResult {
  int runs = 0;        // runs completed
  int mismatches = 0;  // runs whose outputs differ in any bit from the single-threaded run's
  std::string firstError;
};

/// Runs `exe` once per input set on this thread (the reference), then `threads` threads of
/// `runsPerThread` runs each, all at once; run r of thread t uses set (t * 7 + r) % sets, so
/// neighbouring runs in flight use different inputs. Every output is compared bit for bit.
inline StressResult stressRuns(Executable& exe, const std::vector<std::vector<Tensor>>& inputSets,
                               int threads, int runsPerThread) {
  StressResult res;
  std::vector<std::vector<Tensor>> expected(inputSets.size());
  for (size_t s = 0; s < inputSets.size(); ++s) {
    Status st = exe.run(inputSets[s], &expected[s]);
    if (!st.isOk()) {
      res.firstError = st.message();
      return res;
    }
  }
  std::atomic<int> runs{0}, mismatches{0};
  std::mutex mu;
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();  // start together: maximal overlap
      std::vector<Tensor> outs;
      for (int r = 0; r < runsPerThread; ++r) {
        size_t s = (size_t)(t * 7 + r) % inputSets.size();
        Status st = exe.run(inputSets[s], &outs);
        if (!st.isOk()) {
          std::lock_guard<std::mutex> l(mu);
          if (res.firstError.empty()) res.firstError = st.message();
          return;
        }
        runs++;
        if (!sameBits(outs, expected[s])) mismatches++;
      }
    });
  go = true;
  for (std::thread& th : pool) th.join();
  res.runs = runs;
  res.mismatches = mismatches;
  return res;
}

}  // namespace tandem
