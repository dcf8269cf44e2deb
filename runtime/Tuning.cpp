// Kernel choice by measurement at plan load (runtime/Tuning.h).
#include "runtime/Tuning.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include <omp.h>
#include <unistd.h>

#include "runtime/Device.h"
#include "runtime/cpu/ref/Fused.h"

namespace tandem {

namespace {

using Clock = std::chrono::steady_clock;

// Per variant: one warm-up run, then at least kMinRuns timed runs, more while the timed runs
// took under kBudgetSeconds (at most kMaxRuns). The median is robust to the odd preempted run
// on a shared machine.
constexpr int kMinRuns = 3;
constexpr int kMaxRuns = 25;
constexpr double kBudgetSeconds = 0.030;

// A CPU step whose inputs and outputs total at most kOneThreadMaxBytes is also timed on one
// thread when the plan has more (candidate names get kOneThreadSuffix; kDefaultVariant is the
// factory's own choice where the def has no variants): forking and joining OpenMP's threads
// costs a few microseconds a step, more than a small op gains from the second thread. A MoE
// block's Mul, Div and Transpose steps took 2-3 us on one thread and 7-8 us on two (AMD EPYC
// Zen 5, oneDNN jit:uni). The bound keeps the measuring at load to steps of microseconds.
constexpr int64_t kOneThreadMaxBytes = int64_t(1) << 20;
constexpr const char* kOneThreadSuffix = "@1t";
constexpr const char* kDefaultVariant = "default";

/// Sets OpenMP's thread count of the calling thread for a scope, then restores it.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int n) : prev_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ScopedOmpThreads() { omp_set_num_threads(prev_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int prev_;
};

/// A kernel created for one thread (KernelContext::threads 1, oneDNN's primitive made with one
/// OpenMP thread) that runs with one: the plan's thread count is restored after each call.
class OneThreadKernel : public Kernel {
 public:
  explicit OneThreadKernel(std::unique_ptr<Kernel> inner) : inner_(std::move(inner)) {}
  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) override {
    ScopedOmpThreads one(1);
    return inner_->run(inputs, outputs);
  }
  Status runProfiled(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                     std::vector<SubStepTiming>* subSteps) override {
    ScopedOmpThreads one(1);
    return inner_->runProfiled(inputs, outputs, subSteps);
  }
  std::string implName() const override { return inner_->implName() + " @1 thread"; }
  Status prepare() override {
    ScopedOmpThreads one(1);
    return inner_->prepare();
  }
  bool consumesConstant(size_t input) const override { return inner_->consumesConstant(input); }
  bool readsShapeOperandsAtRun() const override { return inner_->readsShapeOperandsAtRun(); }

 private:
  std::unique_ptr<Kernel> inner_;
};

/// The bytes of a step's inputs and outputs (constants included: a kernel reads them too).
int64_t stepBytes(const KernelContext& ctx) {
  int64_t total = 0;
  for (const std::vector<TensorType>* types : {&ctx.inputTypes, &ctx.outputTypes})
    for (const TensorType& t : *types)
      if (t.dtype != DType::Undefined) total += numElements(t.shape) * (int64_t)dtypeSize(t.dtype);
  return total;
}

/// Whether the step can be timed on scratch data in bounded time: not control flow or a
/// dynamic region, whose trip counts and shapes the scratch values would decide (a fused body
/// never holds one).
bool measurable(const KernelContext& ctx) {
  const std::string& t = ctx.opType;
  return t != "Loop" && t != "If" && t != "Scan" && t != "DynamicRegion";
}

/// Creates candidate `cand` of `ctx`'s step: a def variant or kDefaultVariant, on the plan's
/// threads or, with kOneThreadSuffix, on one.
Status createCandidate(DeviceBackend& backend, const KernelContext& ctx, const std::string& cand,
                       std::unique_ptr<Kernel>* out) {
  KernelContext c = ctx;
  std::string v = cand;
  const size_t n = std::char_traits<char>::length(kOneThreadSuffix);
  const bool one = v.size() >= n && v.compare(v.size() - n, n, kOneThreadSuffix) == 0;
  if (one) v.resize(v.size() - n);
  c.variant = v == kDefaultVariant ? "" : v;
  if (!one) return backend.createKernel(c, out);
  c.threads = 1;
  std::unique_ptr<Kernel> k;
  {
    ScopedOmpThreads single(1);
    TANDEM_RETURN_IF_ERROR(backend.createKernel(c, &k));
  }
  *out = std::make_unique<OneThreadKernel>(std::move(k));
  return Status::ok();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Deterministic values in [-1, 1]: no denormals, no NaNs, nothing a kernel could skip.
void fillScratch(Tensor* t) {
  if (t->dtype() != DType::F32) return;
  float* p = t->data<float>();
  uint32_t s = 12345;
  for (int64_t i = 0, n = t->numel(); i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = (float)((s >> 8) * (2.0 / 16777216.0) - 1.0);
  }
}

// KernelTuner::setPlanBytes: a plan larger than a core's L2 cache does not find a step's
// weights there on its next run, and whether the shared L3 still holds them depends on the
// machine's other tenants, so a step with at least kEvictMinConstBytes of constants is timed
// after kEvictBytes have been read: beyond one AMD CCD's L3 (32 MiB; 96 MiB with V-Cache) and
// most Intel LLCs. diffusion_unet at 2 threads (AMD EPYC Zen 5): timed hot, its convolutions'
// chosen variants were predicted at 1.44 ms and took 2.15 ms in the plan (oneDNN's Winograd
// 0.17 -> 0.29 ms, the direct kernel within 10%); timed so, 1.90 against 2.07 ms, the
// Winograd steps within 5%.
constexpr int64_t kEvictBytes = int64_t(64) << 20;
constexpr int64_t kEvictMinConstBytes = int64_t(64) << 10;
constexpr size_t kCacheLine = 64;

int64_t l2CacheBytes() {
  static const int64_t bytes = [] {
    long n = sysconf(_SC_LEVEL2_CACHE_SIZE);  // glibc; 0 or -1 where unknown
    return n > 0 ? int64_t(n) : int64_t(1) << 20;
  }();
  return bytes;
}

// Reads one word per cache line of [p, p + n), on the calling thread's OpenMP team: every
// core's private caches see part of the stream. `sink` keeps the reads from being elided.
void readLines(const char* p, size_t n, bool parallel) {
  static volatile uint64_t sink;
  uint64_t sum = 0;
  const int64_t lines = (int64_t)(n / kCacheLine);
#pragma omp parallel for reduction(+ : sum) if (parallel)
  for (int64_t i = 0; i < lines; ++i) sum += (unsigned char)p[i * kCacheLine];
  sink = sink + sum;
}

}  // namespace

const char* tuningModeName(TuningMode m) {
  switch (m) {
    case TuningMode::Measure: return "measure";
    case TuningMode::Cached: return "cached";
    case TuningMode::Off: return "off";
    case TuningMode::Default: break;
  }
  return "default";
}

bool parseTuningMode(const std::string& s, TuningMode* out) {
  if (s == "measure") *out = TuningMode::Measure;
  else if (s == "cached") *out = TuningMode::Cached;
  else if (s == "off") *out = TuningMode::Off;
  else return false;
  return true;
}

std::vector<std::string> tuningCandidates(const std::string& deviceKind, const KernelContext& ctx,
                                          WinogradPolicy winograd) {
  std::vector<std::string> cands;
  for (const std::string& v : KernelRegistry::global().variants(deviceKind, ctx)) {
    if (v.rfind("winograd", 0) == 0 && winograd == WinogradPolicy::Off) continue;
    // F(4x4)'s rounding, ours or oneDNN's ("winograd-dnnl").
    if (v.rfind("winograd", 0) == 0 && v != "winograd2x2" && winograd == WinogradPolicy::Tile2x2)
      continue;
    cands.push_back(v);
  }
  return cands;
}

KernelTuner::KernelTuner(TuningMode mode, const std::string& cachePath, WinogradPolicy winograd,
                         std::vector<std::string>* notes)
    : mode_(mode), path_(cachePath), winograd_(winograd), notes_(notes) {}

Status KernelTuner::create(DeviceBackend& backend, const KernelContext& ctx,
                           const std::string& label, const std::vector<const Tensor*>& ins,
                           const std::vector<Tensor*>& outs, std::unique_ptr<Kernel>* out) {
  if (!backend.isHost() || mode_ == TuningMode::Off || mode_ == TuningMode::Default)
    return backend.createKernel(ctx, out);
  // 1. The candidates: the def's variants, less what the Winograd policy rules out.
  std::vector<std::string> cands = tuningCandidates(backend.kind(), ctx, winograd_);
  if (ctx.threads > 1 && stepBytes(ctx) <= kOneThreadMaxBytes && measurable(ctx)) {
    if (cands.empty()) cands.push_back(kDefaultVariant);
    const size_t n = cands.size();
    for (size_t i = 0; i < n; ++i) cands.push_back(cands[i] + kOneThreadSuffix);
  }
  if (cands.size() < 2) return backend.createKernel(ctx, out);
  // 2. The cache, read once per load, at the first step that has a choice.
  if (!loaded_) {
    loaded_ = true;
    if (path_.empty()) path_ = defaultTimingCachePath();
    if (path_.empty()) {
      notes_->push_back("kernel timing cache: neither TANDEM_TUNING_CACHE, XDG_CACHE_HOME nor HOME "
                        "is set; times are measured but not kept");
    } else {
      std::string note;
      cache_.load(path_, &note);
      if (!note.empty()) notes_->push_back(note);
    }
    host_.cpuModel = cpuModelName();
    host_.isa = cpuEffectiveIsa();
  }
  StepTuning r;
  r.step = label;
  r.opType = ctx.opType;
  r.key = kernelTimingKey(host_, ctx);
  r.candidates = cands;
  // 3. A cache hit knows every candidate; otherwise measure (Measure) or keep the heuristic.
  std::map<std::string, std::unique_ptr<Kernel>> built;
  const KernelTimings* hit = cache_.find(r.key);
  if (hit && hit->covers(cands)) {
    r.timings = *hit;
    r.choice = hit->fastest(cands);
    r.source = StepTuning::Source::Cache;
  } else if (mode_ == TuningMode::Measure) {
    if (hit) r.timings = *hit;  // other variants (another Winograd policy) stay recorded
    TANDEM_RETURN_IF_ERROR(measure(backend, ctx, cands, ins, outs, &r.timings, &built, &r.weightsCold));
    r.choice = r.timings.fastest(cands);
    r.source = StepTuning::Source::Measured;
    cache_.put(r.key, r.timings);
  }
  // 4. Build the choice (kept from the measurement when there was one).
  Status st = Status::ok();
  if (!r.choice.empty()) {
    auto b = built.find(r.choice);
    if (b != built.end()) {
      *out = std::move(b->second);
    } else {
      st = createCandidate(backend, ctx, r.choice, out);
      if (!st.isOk()) {
        notes_->push_back(label + ": cached kernel variant " + r.choice +
                          " could not be created (" + st.message() + "); the heuristic's is used");
        r.choice.clear();
        r.source = StepTuning::Source::Heuristic;
      }
    }
  }
  if (r.choice.empty()) {
    r.source = StepTuning::Source::Heuristic;
    TANDEM_RETURN_IF_ERROR(backend.createKernel(ctx, out));
  } else if (mode_ == TuningMode::Measure) {
    recordOpTime(ctx, r);
  }
  r.impl = (*out)->implName();
  report_.push_back(std::move(r));
  return Status::ok();
}

Status KernelTuner::measure(DeviceBackend& backend, const KernelContext& ctx,
                            const std::vector<std::string>& variants,
                            const std::vector<const Tensor*>& ins,
                            const std::vector<Tensor*>& outs, KernelTimings* t,
                            std::map<std::string, std::unique_ptr<Kernel>>* built,
                            bool* weightsCold) {
  // Arena views only (constants are the real weights): nothing lives in the arena yet.
  auto isConst = [&](size_t i) { return i < ctx.constInputs.size() && ctx.constInputs[i]; };
  int64_t constBytes = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i]) continue;
    if (isConst(i)) constBytes += (int64_t)ins[i]->bytes();
    else fillScratch(const_cast<Tensor*>(ins[i]));
  }
  // The caches as the rest of the plan leaves them (setPlanBytes), before each timed run.
  const bool evict = planBytes_ > l2CacheBytes() && constBytes >= kEvictMinConstBytes;
  *weightsCold = evict;
  if (evict && evictBuffer_.empty())
    evictBuffer_.assign(kEvictBytes, 1);  // written: untouched pages would all read one zero page
  auto settleCaches = [&] {
    if (!evict) return;
    readLines(evictBuffer_.data(), evictBuffer_.size(), /*parallel=*/true);
    for (size_t i = 0; i < ins.size(); ++i)
      if (ins[i] && !isConst(i) && ins[i]->data<char>())
        readLines(ins[i]->data<char>(), ins[i]->bytes(), /*parallel=*/false);
  };
  for (const std::string& v : variants) {
    t->seconds.erase(v);
    t->failed.erase(v);
    t->impls.erase(v);
    std::unique_ptr<Kernel> k;
    Status st = createCandidate(backend, ctx, v, &k);
    if (st.isOk()) st = k->prepare();
    // Each launch is waited for: a host device with a worker queue of its own (a second "cpu:1")
    // runs it asynchronously, so the time is the run's, and no queued run outlives the
    // candidates create() drops.
    auto launchAndWait = [&] {
      Status s = backend.launch(*k, ins, outs);
      Status done = backend.synchronize();
      return s.isOk() ? done : s;
    };
    if (st.isOk()) st = launchAndWait();  // warm-up: caches, pages, OpenMP pool
    std::vector<double> times;
    auto start = Clock::now();
    while (st.isOk() && ((int)times.size() < kMinRuns ||
                         ((int)times.size() < kMaxRuns &&
                          std::chrono::duration<double>(Clock::now() - start).count() < kBudgetSeconds))) {
      settleCaches();
      auto t0 = Clock::now();
      st = launchAndWait();
      times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    if (!st.isOk()) {
      t->failed[v] = st.message();
      continue;
    }
    t->seconds[v] = median(times);
    t->impls[v] = k->implName();
    (*built)[v] = std::move(k);
  }
  return Status::ok();  // with every variant failed, create() keeps the heuristic
}

std::string stepOpTimingKey(const TimingHost& host, const KernelContext& step) {
  if (step.opType != "Fused") return kernelOpTimingKey(host, step);
  fused::Body body;
  if (!fused::parseBody(step, &body).isOk() || body.ops.empty()) return "";
  return kernelOpTimingKey(host, fused::bodyOpContext(step, body, 0));
}

void KernelTuner::recordOpTime(const KernelContext& ctx, const StepTuning& r) {
  // The placer prices ops before fusion (compiler/placement/CostModel.h): a fused step's time
  // goes under its anchor op, epilogue included (a few percent of a Conv or Gemm).
  const std::string key = stepOpTimingKey(host_, ctx);
  if (key.empty()) return;
  OpTiming t;
  t.seconds = r.timings.seconds.at(r.choice);
  t.variant = r.choice;
  const OpTiming* known = cache_.findOp(key);
  if (known && (*known == t || r.source != StepTuning::Source::Measured)) return;
  cache_.putOp(key, t);
}

void KernelTuner::finish() {
  if (!cache_.changed() || path_.empty()) return;
  Status st = cache_.save(path_);
  if (!st.isOk()) notes_->push_back(st.message() + "; the times are not kept");
}

}  // namespace tandem
