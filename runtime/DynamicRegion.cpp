// The DynamicRegion CPU kernel: a body plan run eagerly, shapes inferred at run time
// (runtime/DynamicRegion.h).
#include "runtime/DynamicRegion.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <map>
#include <memory>
#include <mutex>

#include "compiler/ShapeInference.h"
#include "runtime/CachingArena.h"
#include "runtime/CheckedMath.h"
#include "runtime/ControlFlow.h"
#include "runtime/DataDependent.h"
#include "runtime/Kernel.h"
#include "runtime/PlanFormat.h"
#include "runtime/Tuning.h"

namespace tandem {
namespace {

// Operands up to this many elements are handed to shape functions with their values, as the
// compiler hands them its small constants (compiler/TandemDialect.cpp).
constexpr int64_t kValueOperandElements = 4096;
// Kernels kept per body step, one per operand signature, least recently used dropped first.
constexpr size_t kSignaturesPerStep = 16;

struct BodyStep {
  std::string opType, label;
  AttrMap attrs;
  std::vector<int> inputs, outputs;
  std::vector<bool> shapeOperand;  // per input: its value sets the result shapes
  // The op counts its result size from its data (sizeCountedFromData): its kernel sizes the
  // results, so that data is read once, by the kernel, and never keys or constant-folds it.
  bool sizedByKernel = false;
  // Ops that only move elements as they lie (Reshape, Flatten, Squeeze, Unsqueeze, Identity;
  // a Transpose that keeps the order of its non-unit dims; a Split whose chunks are contiguous)
  // become views of their input, sharing its buffer, where the run-time shapes allow it.
  enum class View { None, Reshape, Transpose, Split } view = View::None;
  struct Entry {
    std::unique_ptr<Kernel> kernel;
    std::vector<Tensor> values;  // the shape operands it was made for (its constInputs)
    uint64_t lastUse = 0;
  };
  std::map<std::string, Entry> kernels;  // by operand signature
};

// Host memory for the results the executor sizes: a CachingArena over aligned_alloc segments,
// kept alive by the plan and by every result drawn from it (results outlive a run: region
// outputs go to the caller). A run's large intermediates (Faster R-CNN's 15 MB Expand) reuse
// the last run's pages instead of faulting in fresh zeroed ones from the OS; the arena holds
// at most the region's peak.
class ResultPool {
 public:
  ResultPool() : arena_("cpu", &segments_) {}
  /// An uninitialised tensor (the kernel writes it whole: Tensor::tryAllocUninitialized).
  /// `what` names the tensor in errors; `index` >= 0 appends " result <index>" to it (built
  /// only on an error: this runs for every step of every run).
  static Status alloc(const std::shared_ptr<ResultPool>& pool, DType dtype, const Shape& dims,
                      const std::string& what, Tensor* out, int index = -1) {
    auto name = [&] { return index < 0 ? what : what + " result " + std::to_string(index); };
    int64_t bytes = 0;
    std::string err = checkTensorSize(dims, (int64_t)dtypeSize(dtype), dtypeName(dtype), &bytes);
    if (!err.empty()) return Status::error(name() + ": " + err);
    void* p = nullptr;
    if (Status st = pool->arena_.allocate((size_t)bytes, "a body result", &p); !st.isOk())
      return Status::error(name() + ": " + st.message());
    *out = Tensor::adopt(dtype, dims, std::shared_ptr<void>(p, [pool](void* q) { pool->arena_.free(q); }));
    return Status::ok();
  }

 private:
  struct HostSegments : SegmentAllocator {
    Status reserve(size_t bytes, void** out) override {
      *out = std::aligned_alloc(CachingArena::kAlignment, (bytes + CachingArena::kAlignment - 1) /
                                                              CachingArena::kAlignment * CachingArena::kAlignment);
      return *out ? Status::ok() : Status::error("out of host memory");
    }
    void release(void* p) override { std::free(p); }
  };
  HostSegments segments_;
  CachingArena arena_;
};

// Signature bytes (EagerPlan::Impl::runStep): an int64 as its 8 bytes; a type as its tag, dtype,
// rank and dims.
void appendInt(std::string* key, int64_t v) { key->append(reinterpret_cast<const char*>(&v), sizeof v); }

void appendType(std::string* key, char tag, DType dtype, const Shape& dims) {
  key->push_back(tag);
  key->push_back((char)dtype);
  appendInt(key, (int64_t)dims.size());
  for (int64_t d : dims) appendInt(key, d);
}
}  // namespace

struct EagerPlan::Impl {
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
             std::vector<SubStepTiming>* subSteps) {
    std::lock_guard<std::mutex> lock(mu_);
    using Clock = std::chrono::steady_clock;
    const Clock::time_point begin = subSteps ? Clock::now() : Clock::time_point();
    const int n = body_.values_size();
    std::vector<Tensor> vals(n);
    if (inputs.size() != (size_t)body_.inputs_size())
      return Status::error(label_ + ": " + std::to_string(inputs.size()) + " inputs for a body of " +
                           std::to_string(body_.inputs_size()));
    for (size_t k = 0; k < inputs.size(); ++k) {
      const int id = body_.inputs((int)k);
      const plan::Value& v = body_.values(id);
      const Tensor* t = inputs[k];
      if (!t || t->dtype() != (DType)v.dtype() || t->rank() != v.dims_size())
        return Status::error(label_ + ": input " + std::to_string(k) + " is " +
                             (t ? dtypeName(t->dtype()) + shapeToString(t->shape()) : std::string("absent")) +
                             " but the body takes " + dtypeName((DType)v.dtype()) + " of rank " +
                             std::to_string(v.dims_size()));
      vals[id] = Tensor::view(t->dtype(), t->shape(), const_cast<void*>(t->raw()));
    }
    for (int id = 0; id < n; ++id)
      if (bodyConstants_[id].dtype() != DType::Undefined) vals[id] = bodyConstants_[id];
    root_.resize(n);
    for (int id = 0; id < n; ++id) root_[id] = id;
    for (size_t si = 0; si < steps_.size(); ++si) {
      BodyStep& s = steps_[si];
      const Clock::time_point s0 = subSteps ? Clock::now() : Clock::time_point();
      std::string impl;
      TANDEM_RETURN_IF_ERROR(runStep(s, vals, subSteps ? &impl : nullptr));
      if (!subSteps) continue;
      const plan::Step& p = body_.steps((int)si);
      SubStepTiming t;
      t.name = p.name();
      t.opType = s.opType;
      t.impl = std::move(impl);
      t.start = std::chrono::duration<double>(s0 - begin).count();
      t.seconds = std::chrono::duration<double>(Clock::now() - s0).count();
      for (int id : s.inputs)
        if (id >= 0) t.inputs.push_back({vals[id].dtype(), vals[id].shape()});
      for (int id : s.outputs) t.outputs.push_back({vals[id].dtype(), vals[id].shape()});
      subSteps->push_back(std::move(t));
    }
    outputs->clear();
    for (int k = 0; k < body_.outputs_size(); ++k) {
      const int id = body_.outputs(k);
      const Tensor& v = vals[id];
      if (v.dtype() == DType::Undefined)
        return Status::error(label_ + ": output " + std::to_string(k) + " ('" +
                             body_.values(id).name() + "') is not computed by the body");
      // Results the body computed are this run's own; a body input or constant, or a view of
      // one, is copied.
      const bool own = body_.values(root_[id]).kind() == plan::Value::INTERMEDIATE;
      outputs->push_back(own ? v : Tensor::copyOf(v));
    }
    return Status::ok();
  }

  Status init(const std::vector<const Tensor*>& constInputs) {
    const int n = body_.values_size();
    if (!body_.eager()) return Status::error(label_ + ": the body is not an eager plan (Plan.eager)");
    if (body_.inputs_size() != (int)constInputs.size())
      return Status::error(label_ + ": the body has " + std::to_string(body_.inputs_size()) +
                           " inputs, the step " + std::to_string(constInputs.size()));
    auto checkId = [&](int id, const std::string& what) -> Status {
      if (id < 0 || id >= n)
        return Status::error(label_ + ": " + what + " names value " + std::to_string(id) + ", which the body does not have");
      return Status::ok();
    };
    for (int id : body_.inputs()) TANDEM_RETURN_IF_ERROR(checkId(id, "a body input"));
    for (int id : body_.outputs()) TANDEM_RETURN_IF_ERROR(checkId(id, "a body output"));
    // Outer constants (the step's constant operands) are constants of the body's kernels.
    outerConstants_.assign(n, nullptr);
    for (size_t k = 0; k < constInputs.size(); ++k)
      if (constInputs[k]) outerConstants_[body_.inputs((int)k)] = constInputs[k];
    bodyConstants_.assign(n, Tensor());
    for (int id = 0; id < n; ++id) {
      const plan::Value& v = body_.values(id);
      if (v.id() != id) return Status::error(label_ + ": body value '" + v.name() + "' has id " + std::to_string(v.id()) + " at " + std::to_string(id));
      if (v.kind() == plan::Value::CONSTANT)
        TANDEM_RETURN_IF_ERROR(tensorFromPlan(v.constant(), label_ + ": body constant '" + v.name() + "'", &bodyConstants_[id]));
    }
    steps_.resize(body_.steps_size());
    for (int si = 0; si < body_.steps_size(); ++si) {
      const plan::Step& p = body_.steps(si);
      BodyStep& s = steps_[si];
      s.opType = p.op_type();
      s.sizedByKernel = sizeCountedFromData(s.opType);
      if (s.opType == "Reshape" || s.opType == "Flatten" || s.opType == "Squeeze" ||
          s.opType == "Unsqueeze" || s.opType == "Identity")
        s.view = BodyStep::View::Reshape;
      else if (s.opType == "Transpose")
        s.view = BodyStep::View::Transpose;
      else if (s.opType == "Split")
        s.view = BodyStep::View::Split;
      s.label = label_ + ": step '" + (p.name().empty() ? "#" + std::to_string(si) : p.name()) + "' (" + p.op_type() + ")";
      TANDEM_RETURN_IF_ERROR(attrsFromPlan(p.attrs(), &s.attrs).withContext(s.label));
      if (!isKnownOp(s.opType)) return Status::error(s.label + ": unknown op type");
      // A Loop's M and cond size only its scan outputs, whose types key its kernel anyway
      // (and which its kernel sizes where they stay unknown): one kernel serves every M.
      static const std::vector<int> none;
      const std::vector<int>& shapeOps = s.opType == "Loop" ? none : shapeOperandPositions(s.opType);
      for (int j = 0; j < p.inputs_size(); ++j) {
        const int id = p.inputs(j);
        if (id != -1) TANDEM_RETURN_IF_ERROR(checkId(id, s.label + " input"));
        s.inputs.push_back(id);
        s.shapeOperand.push_back(std::find(shapeOps.begin(), shapeOps.end(), j) != shapeOps.end());
      }
      for (int id : p.outputs()) {
        TANDEM_RETURN_IF_ERROR(checkId(id, s.label + " output"));
        if (body_.values(id).kind() != plan::Value::INTERMEDIATE)
          return Status::error(s.label + " writes '" + body_.values(id).name() + "', which is not an intermediate");
        s.outputs.push_back(id);
      }
    }
    return Status::ok();
  }

  // Makes step `s`'s results views of its operand 0 (BodyStep::view) when the run-time types
  // `results` allow it; false (nothing done) otherwise.
  bool asView(const BodyStep& s, std::vector<Tensor>& vals, const std::vector<ResultInfo>& results) {
    if (s.view == BodyStep::View::None || s.inputs.empty() || s.inputs[0] < 0 ||
        results.size() != s.outputs.size())
      return false;
    const Tensor& x = vals[s.inputs[0]];
    int64_t total = 0;
    for (const ResultInfo& r : results) {
      const int64_t n = numElements(r.dims);
      if (r.dtype != x.dtype() || n < 0) return false;
      total += n;
    }
    if (total != x.numel()) return false;
    const Shape& xs = x.shape();
    if (s.view == BodyStep::View::Transpose) {
      // Elements keep their order when the non-unit dims keep theirs.
      std::vector<int64_t> perm = s.attrs.getInts("perm");
      if (perm.empty())
        for (int64_t d = (int64_t)xs.size() - 1; d >= 0; --d) perm.push_back(d);
      int64_t last = -1;
      for (int64_t p : perm) {
        if (p < 0 || p >= (int64_t)xs.size()) return false;
        if (xs[p] == 1) continue;
        if (p < last) return false;
        last = p;
      }
    } else if (s.view == BodyStep::View::Split) {
      // Contiguous chunks when every dim before the axis is 1, or one chunk (a copy).
      const int64_t rank = (int64_t)xs.size();
      int64_t axis = s.attrs.getInt("axis", 0);
      if (axis < -rank || axis >= rank) return false;
      if (axis < 0) axis += rank;
      for (int64_t d = 0; d < axis && results.size() > 1; ++d)
        if (xs[d] != 1) return false;
    } else if (results.size() != 1) {
      return false;
    }
    int64_t offset = 0;
    for (size_t k = 0; k < results.size(); ++k) {
      vals[s.outputs[k]] = x.sliced(offset, results[k].dims);
      root_[s.outputs[k]] = root_[s.inputs[0]];
      offset += numElements(results[k].dims);
    }
    return true;
  }

  // Runs step `s` on `vals` (by body value id); `impl` (optional) gets its kernel's name.
  Status runStep(BodyStep& s, std::vector<Tensor>& vals, std::string* impl) {
    std::vector<OperandInfo> operands;
    std::vector<const Tensor*> ins;
    // The kernel's signature: `key` the operand and result types, `values` the shape
    // operands' values (those that are not the outer plan's constants), both as bytes with
    // lengths, so no two signatures encode alike.
    std::string key, values;
    for (size_t j = 0; j < s.inputs.size(); ++j) {
      const int id = s.inputs[j];
      if (id < 0) {
        operands.push_back(OperandInfo{DType::Undefined, {}, false, nullptr});
        ins.push_back(nullptr);
        key += 'A';
        continue;
      }
      const Tensor& t = vals[id];
      if (t.dtype() == DType::Undefined)
        return Status::error(s.label + ": reads '" + body_.values(id).name() + "' before any step computed it");
      OperandInfo o{t.dtype(), t.shape(), true, nullptr};
      if (!s.sizedByKernel && (s.shapeOperand[j] || t.numel() <= kValueOperandElements)) o.value = &t;
      operands.push_back(std::move(o));
      ins.push_back(&t);
      appendType(&key, 'I', t.dtype(), t.shape());
      if (s.shapeOperand[j] && !s.sizedByKernel && !outerConstants_[id]) {
        appendInt(&values, (int64_t)j);
        appendInt(&values, (int64_t)t.bytes());
        values.append(static_cast<const char*>(t.raw()), t.bytes());
      }
    }
    std::vector<ResultInfo> results;
    std::string e = inferResultTypes(s.opType, operands, s.attrs, s.outputs.size(), &results);
    if (!e.empty()) return Status::error(s.label + ": " + e);
    if (asView(s, vals, results)) {
      if (impl) *impl = "view";
      return Status::ok();
    }
    std::vector<Tensor*> outs;
    std::vector<TensorType> outTypes;
    for (size_t k = 0; k < s.outputs.size(); ++k) {
      Tensor& t = vals[s.outputs[k]];
      const bool unknown = std::any_of(results[k].dims.begin(), results[k].dims.end(),
                                       [](int64_t d) { return d < 0; });
      // An If whose branches give different shapes (the branch taken sizes it) and a Loop whose
      // iteration count or loop-carried shapes are known only once it has run: their kernels
      // allocate those results (runtime/ControlFlowKernels.cpp); so does the kernel of an op
      // sized by its data (runtime/cpu/ref/Selection.cpp). Every other op is sized here.
      if (unknown && s.opType != "If" && s.opType != "Loop" && !s.sizedByKernel)
        return Status::error(s.label + ": the size of result " + std::to_string(k) +
                             " is unknown even with the run-time operands");
      if (unknown) t = Tensor();
      else TANDEM_RETURN_IF_ERROR(ResultPool::alloc(pool_, results[k].dtype, results[k].dims, s.label, &t, (int)k));
      outs.push_back(&t);
      outTypes.push_back({results[k].dtype, results[k].dims});
      appendType(&key, 'R', results[k].dtype, results[k].dims);
    }
    // A kernel that reads its shape operands at run time (Kernel::readsShapeOperandsAtRun) is
    // kept under the types alone and serves every value; any other under types and values.
    auto it = s.kernels.find(key);
    std::string valuedKey;
    if (!values.empty() && (it == s.kernels.end() || !it->second.kernel->readsShapeOperandsAtRun())) {
      valuedKey = key + 'V' + values;
      it = s.kernels.find(valuedKey);
    }
    std::optional<KernelContext> created;  // the context of a kernel made for this run
    if (it == s.kernels.end()) {
      if (s.kernels.size() >= kSignaturesPerStep) {
        auto oldest = s.kernels.begin();
        for (auto k = s.kernels.begin(); k != s.kernels.end(); ++k)
          if (k->second.lastUse < oldest->second.lastUse) oldest = k;
        s.kernels.erase(oldest);
      }
      BodyStep::Entry entry;
      KernelContext kc;
      kc.opType = s.opType;
      kc.nodeName = s.label;
      kc.attrs = &s.attrs;
      kc.outputTypes = outTypes;
      kc.threads = threads_;
      kc.seed = seed_;
      kc.winograd = winograd_;
      kc.measureVariants = measureVariants_;  // an If's eager branches inherit it
      kc.allocResult = [pool = pool_](DType dt, const Shape& shape, const std::string& what, Tensor* t) {
        return ResultPool::alloc(pool, dt, shape, what, t);
      };
      entry.values.reserve(s.inputs.size());  // constInputs point into it: no reallocation
      for (size_t j = 0; j < s.inputs.size(); ++j) {
        const int id = s.inputs[j];
        kc.inputTypes.push_back(id < 0 ? TensorType{} : TensorType{vals[id].dtype(), vals[id].shape()});
        const Tensor* c = nullptr;
        if (id >= 0 && outerConstants_[id]) {
          c = outerConstants_[id];
        } else if (id >= 0 && bodyConstants_[id].dtype() != DType::Undefined) {
          c = &bodyConstants_[id];
        } else if (id >= 0 && s.shapeOperand[j] && !s.sizedByKernel) {
          entry.values.push_back(Tensor::copyOf(vals[id]));
          c = &entry.values.back();
        }
        kc.constInputs.push_back(c);
      }
      Status st = KernelRegistry::global().create("cpu", kc, &entry.kernel);
      if (st.isOk()) st = entry.kernel->prepare();
      if (!st.isOk()) return Status::error(s.label + ": " + st.message());
      const bool anyValue = valuedKey.empty() || entry.kernel->readsShapeOperandsAtRun();
      it = s.kernels.emplace(anyValue ? key : valuedKey, std::move(entry)).first;
      created = std::move(kc);
    }
    it->second.lastUse = ++uses_;
    // Only a kernel made for this run is timed (for keepFastestVariant).
    const bool timed = created && measureVariants_;
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status st = it->second.kernel->run(ins, outs);
    if (!st.isOk()) return Status::error(s.label + ": " + st.message());
    if (timed && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= kMeasureFrom) {
      st = keepFastestVariant(*created, it->second, ins, outs);
      if (!st.isOk()) return Status::error(s.label + ": " + st.message());
    }
    if (impl) *impl = it->second.kernel->implName();
    for (size_t k = 0; k < outs.size(); ++k)
      if (outs[k]->dtype() != results[k].dtype || outs[k]->rank() != (int64_t)results[k].dims.size())
        return Status::error(s.label + ": result " + std::to_string(k) + " came back as " +
                             dtypeName(outs[k]->dtype()) + shapeToString(outs[k]->shape()) +
                             ", inference gave " + dtypeName(results[k].dtype) + shapeToString(results[k].dims));
    return Status::ok();
  }

  // A kernel made for a new signature whose first run took this long or more, with variants
  // to choose from (tuningCandidates), has them timed: each variant one warm-up and the best of
  // two runs on this run's operands, the fastest kept (the loader's tuning, runtime/Tuning.h,
  // on the region's own shapes). Its outputs are then computed again by the kernel kept.
  static constexpr double kMeasureFrom = 1e-3;  // seconds

  Status keepFastestVariant(const KernelContext& kc, BodyStep::Entry& entry,
                            const std::vector<const Tensor*>& ins, const std::vector<Tensor*>& outs) {
    const std::vector<std::string> cands = tuningCandidates("cpu", kc, winograd_);
    if (cands.size() < 2) return Status::ok();
    // The best of two runs, after one untimed run unless `warm` (the kept kernel just ran).
    auto best = [&](Kernel& k, bool warm, double* seconds) -> Status {
      *seconds = std::numeric_limits<double>::infinity();
      for (int r = warm ? 1 : 0; r < 3; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        TANDEM_RETURN_IF_ERROR(k.run(ins, outs));
        if (r) *seconds = std::min(*seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return Status::ok();
    };
    double fastest;
    TANDEM_RETURN_IF_ERROR(best(*entry.kernel, /*warm=*/true, &fastest));
    for (const std::string& v : cands) {
      KernelContext c = kc;
      c.variant = v;
      std::unique_ptr<Kernel> k;
      double t;
      // A variant that does not apply here is no candidate (the loader's rule too).
      if (!KernelRegistry::global().create("cpu", c, &k).isOk() || !k->prepare().isOk() ||
          !best(*k, /*warm=*/false, &t).isOk() || !(t < fastest))
        continue;
      fastest = t;
      entry.kernel = std::move(k);
    }
    // The last run was of the last candidate: the outputs become the kept kernel's own.
    return entry.kernel->run(ins, outs);
  }

  std::string label_;
  int threads_ = 1;
  uint64_t seed_ = 0;
  WinogradPolicy winograd_ = WinogradPolicy::Auto;
  bool measureVariants_ = false;
  plan::Plan body_;
  std::vector<const Tensor*> outerConstants_;  // by body value id: the outer plan's constant
  std::vector<Tensor> bodyConstants_;          // by body value id: the body's own constants
  std::vector<BodyStep> steps_;
  // By body value id, this run: the value whose buffer it shares (itself, or for a view the
  // root of its operand: asView), so a body output that views an input or constant is copied.
  std::vector<int> root_;
  std::shared_ptr<ResultPool> pool_ = std::make_shared<ResultPool>();
  std::mutex mu_;
  uint64_t uses_ = 0;
};

EagerPlan::EagerPlan() : impl_(std::make_unique<Impl>()) {}
EagerPlan::~EagerPlan() = default;

Status EagerPlan::load(plan::Plan body, const std::string& label, const KernelContext& outer,
                       const std::vector<const Tensor*>& constInputs, std::unique_ptr<EagerPlan>* out) {
  std::unique_ptr<EagerPlan> p(new EagerPlan());
  Impl& m = *p->impl_;
  m.label_ = label;
  m.threads_ = outer.threads;
  m.seed_ = outer.seed;
  m.winograd_ = outer.winograd;
  m.measureVariants_ = outer.measureVariants;
  m.body_ = std::move(body);
  TANDEM_RETURN_IF_ERROR(m.init(constInputs));
  *out = std::move(p);
  return Status::ok();
}

Status EagerPlan::run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                      std::vector<SubStepTiming>* subSteps) {
  return impl_->run(inputs, outputs, subSteps);
}

size_t EagerPlan::numSteps() const { return impl_->steps_.size(); }

namespace {

class DynamicRegionKernel : public Kernel {
 public:
  static Status create(const KernelContext& ctx, std::unique_ptr<Kernel>* out) {
    const std::string label = ctx.opType + (ctx.nodeName.empty() ? "" : " '" + ctx.nodeName + "'");
    plan::Plan body;
    Status st = parseSubgraph(*ctx.attrs, "body", &body);
    if (!st.isOk()) return Status::error(label + ": " + st.message());
    if (body.outputs_size() != (int)ctx.outputTypes.size())
      return Status::error(label + ": the body has " + std::to_string(body.outputs_size()) +
                           " outputs, the step " + std::to_string(ctx.outputTypes.size()));
    std::unique_ptr<DynamicRegionKernel> k(new DynamicRegionKernel());
    TANDEM_RETURN_IF_ERROR(EagerPlan::load(std::move(body), label, ctx, ctx.constInputs, &k->body_));
    *out = std::move(k);
    return Status::ok();
  }

  Status run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) override {
    return runProfiled(inputs, outputs, nullptr);
  }
  Status runProfiled(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                     std::vector<SubStepTiming>* subSteps) override {
    std::vector<Tensor> res;
    TANDEM_RETURN_IF_ERROR(body_->run(inputs, &res, subSteps));
    for (size_t k = 0; k < outputs.size(); ++k) *outputs[k] = std::move(res[k]);
    return Status::ok();
  }

  std::string implName() const override { return "eager(" + std::to_string(body_->numSteps()) + " ops)"; }

 private:
  std::unique_ptr<EagerPlan> body_;
};

}  // namespace

void registerDynamicRegionKernel(KernelRegistry& r) {
  KernelDef d;
  d.opType = "DynamicRegion";
  d.deviceKind = "cpu";
  d.impl = "eager";
  d.accepts = [](const std::vector<DType>&) { return true; };
  d.dtypesText = "any (its body's ops say)";
  d.create = DynamicRegionKernel::create;
  r.add(std::move(d));
}

}  // namespace tandem
