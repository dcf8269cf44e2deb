// Kernel choice by measurement at plan load (runtime/Tuning.h).
#include "runtime/Tuning.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

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
    TANDEM_RETURN_IF_ERROR(measure(backend, ctx, cands, ins, outs, &r.timings, &built));
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
      KernelContext c = ctx;
      c.variant = r.choice;
      st = backend.createKernel(c, out);
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
                            std::map<std::string, std::unique_ptr<Kernel>>* built) {
  // Arena views only (constants are the real weights): nothing lives in the arena yet.
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i] && !(i < ctx.constInputs.size() && ctx.constInputs[i]))
      fillScratch(const_cast<Tensor*>(ins[i]));
  for (const std::string& v : variants) {
    t->seconds.erase(v);
    t->failed.erase(v);
    t->impls.erase(v);
    KernelContext c = ctx;
    c.variant = v;
    std::unique_ptr<Kernel> k;
    Status st = backend.createKernel(c, &k);
    if (st.isOk()) st = k->prepare();
    if (st.isOk()) st = backend.launch(*k, ins, outs);  // warm-up: caches, pages, OpenMP pool
    std::vector<double> times;
    auto start = Clock::now();
    while (st.isOk() && ((int)times.size() < kMinRuns ||
                         ((int)times.size() < kMaxRuns &&
                          std::chrono::duration<double>(Clock::now() - start).count() < kBudgetSeconds))) {
      auto t0 = Clock::now();
      st = backend.launch(*k, ins, outs);
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
