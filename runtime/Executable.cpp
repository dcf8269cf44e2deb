// The executor: binds a Plan to the CPU (arenas, constants, kernels) and runs its steps in order.
#include "runtime/Executable.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "runtime/Device.h"

namespace tandem {

namespace {

using Clock = std::chrono::steady_clock;

Status tensorFromPlan(const plan::TensorData& d, const std::string& what, Tensor* out) {
  if (!isKnownDType(d.dtype()))
    return Status::error(what + ": unsupported dtype code " + std::to_string(d.dtype()));
  Shape shape(d.dims().begin(), d.dims().end());
  for (int64_t x : shape)
    if (x < 0) return Status::error(what + ": negative dimension in " + shapeToString(shape));
  Tensor t = Tensor::alloc((DType)d.dtype(), shape);
  if (d.raw().size() != t.bytes())
    return Status::error(what + ": has " + std::to_string(d.raw().size()) + " bytes, expected " +
                         std::to_string(t.bytes()));
  if (t.bytes()) std::memcpy(t.raw(), d.raw().data(), t.bytes());
  *out = t;
  return Status::ok();
}

Status attrsFromPlan(const plan::Step& s, AttrMap* out) {
  for (const plan::Attribute& a : s.attrs()) {
    switch (a.kind()) {
      case plan::Attribute::INT: out->set(a.name(), Attr::ofInt(a.i())); break;
      case plan::Attribute::FLOAT: out->set(a.name(), Attr::ofFloat(a.f())); break;
      case plan::Attribute::STRING: out->set(a.name(), Attr::ofString(a.s())); break;
      case plan::Attribute::INTS:
        out->set(a.name(), Attr::ofInts({a.ints().begin(), a.ints().end()}));
        break;
      case plan::Attribute::FLOATS:
        out->set(a.name(), Attr::ofFloats({a.floats().begin(), a.floats().end()}));
        break;
      case plan::Attribute::STRINGS:
        out->set(a.name(), Attr::ofStrings({a.strings().begin(), a.strings().end()}));
        break;
      case plan::Attribute::TENSOR: {
        Tensor t;
        TANDEM_RETURN_IF_ERROR(tensorFromPlan(a.t(), "attribute '" + a.name() + "'", &t));
        out->set(a.name(), Attr::ofTensor(t));
        break;
      }
      default:
        return Status::error("attribute '" + a.name() + "' has an unknown kind");
    }
  }
  return Status::ok();
}

std::string stepLabel(const plan::Step& s, int index) {
  std::string n = s.name().empty() ? "#" + std::to_string(index) : "'" + s.name() + "'";
  return "step " + n + " (" + s.op_type() + ")";
}

// A transfer between two host devices (cpu, cpu:1, ...): the "Copy" steps that
// insert-transfers emits. Between host arenas a transfer is a memcpy; CUDA links will differ.
class HostCopyKernel : public Kernel {
 public:
  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    if (in.size() != 1 || out.size() != 1 || !in[0] || in[0]->bytes() != out[0]->bytes())
      return Status::error("Copy: expects one input and one output of the same size");
    if (in[0]->bytes()) std::memcpy(out[0]->raw(), in[0]->raw(), in[0]->bytes());
    return Status::ok();
  }
  std::string implName() const override { return "host-copy"; }
};

// One in-order queue per device, like a CUDA stream: a host thread that runs its device's steps
// in plan order. Cross-device order comes from events (Impl::waitFor / markDone).
class StreamWorker {
 public:
  explicit StreamWorker(int threads) : threads_(threads), thread_([this] { loop(); }) {}
  ~StreamWorker() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> l(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    // OpenMP's thread count is per host thread, so each device keeps its own pool size.
    if (threads_ > 0) omp_set_num_threads(threads_);
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.erase(tasks_.begin());
      }
      task();
    }
  }
  int threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

struct Executable::Impl {
  plan::Plan plan;
  int threads = 0;
  std::map<std::string, Tensor> arenas;      // device -> arena bytes
  std::vector<Tensor> values;                // by value id: arena views or constants
  std::vector<TensorType> valueTypes;
  std::vector<AttrMap> stepAttrs;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<std::vector<const Tensor*>> stepInputs;
  std::vector<std::vector<Tensor*>> stepOutputs;
  std::vector<std::string> inputNames, outputNames;
  std::vector<TensorType> inputTypes, outputTypes;
  std::vector<std::string> notes;

  // Multi-device plans: one stream per device; each step waits on the events (completion) of
  // the steps on other devices it depends on: read-after-write through values and
  // write-after-read/write through reused arena slots (the memory plan assumes plan order).
  std::vector<std::string> devices;         // canonical names, first use order
  std::vector<int> stepDevice;              // index into devices
  std::vector<std::vector<int>> crossDeps;  // per step: earlier steps on other devices
  std::vector<std::unique_ptr<StreamWorker>> streams;
  std::mutex eventMu;
  std::condition_variable eventCv;
  std::vector<uint64_t> stepDoneRun;        // the run number a step last finished in
  uint64_t runNumber = 0;
};

Executable::Executable() : impl_(new Impl) {}
Executable::~Executable() = default;

Status Executable::load(const plan::Plan& planIn, const LoadOptions& options,
                        std::unique_ptr<Executable>* out) {
  std::unique_ptr<Executable> exe(new Executable());
  Impl& m = *exe->impl_;
  m.plan = planIn;
  const plan::Plan& p = m.plan;
  if (p.version() != 1)
    return Status::error("plan version " + std::to_string(p.version()) + " is not supported (expected 1)");
  // No count given: the cores that are idle now (an OpenMP barrier that waits for a thread
  // sharing its core with another process costs a time slice per op; see defaultThreads).
  m.threads = options.threads;
  if (m.threads <= 0) {
    std::string why;
    m.threads = defaultThreads(&why);
    if (!why.empty()) m.notes.push_back(why);
  }
  omp_set_num_threads(m.threads);

  // 1. Devices: every device the plan names must be live. Only the CPU exists in this build.
  // Host devices cpu, cpu:1, ... are slices of the one CPU (own arena, stream and thread pool).
  // A plan made for a GPU (--target cpu,cuda:0=h100) still runs where no CUDA backend is: its
  // cuda:N steps run on the CPU as a separate host device (own arena and stream), and the
  // executable says so once per device (Executable::notes).
  auto checkDevice = [&](const std::string& dev, const std::string& what) -> Status {
    std::string c = canonicalDeviceName(dev.empty() ? "cpu" : dev);
    if (c.rfind("cpu", 0) == 0) return Status::ok();
    if (c.rfind("cuda", 0) == 0 && options.deviceFallback) {
      std::string note = c + " is not available (this build has no CUDA backend): its steps run on the CPU";
      if (std::find(m.notes.begin(), m.notes.end(), note) == m.notes.end()) m.notes.push_back(note);
      return Status::ok();
    }
    return Status::error(what + " is placed on '" + dev +
                         "', which is not present (live devices: cpu, and cpu:N host slices)");
  };

  // 2. Arenas, one per device, sized by the memory plan.
  for (const plan::Arena& a : p.arenas()) {
    TANDEM_RETURN_IF_ERROR(checkDevice(a.device(), "arena"));
    if (a.bytes() < 0) return Status::error("arena for " + a.device() + " has negative size");
    m.arenas[canonicalDeviceName(a.device().empty() ? "cpu" : a.device())] =
        Tensor::alloc(DType::U8, {a.bytes()});
  }

  // 3. Values: arena views for intermediates and inputs, owned tensors for constants.
  int n = p.values_size();
  m.values.resize(n);
  m.valueTypes.resize(n);
  for (int i = 0; i < n; ++i) {
    const plan::Value& v = p.values(i);
    std::string what = "value '" + v.name() + "'";
    if (v.id() != i) return Status::error(what + ": id " + std::to_string(v.id()) + " != index " + std::to_string(i));
    if (!isKnownDType(v.dtype())) return Status::error(what + ": unsupported dtype code " + std::to_string(v.dtype()));
    TensorType tt{(DType)v.dtype(), Shape(v.dims().begin(), v.dims().end())};
    for (int64_t d : tt.shape)
      if (d < 0) return Status::error(what + ": dynamic or negative dim in " + shapeToString(tt.shape));
    m.valueTypes[i] = tt;
    if (v.kind() == plan::Value::CONSTANT) {
      TANDEM_RETURN_IF_ERROR(tensorFromPlan(v.constant(), what, &m.values[i]));
      if (m.values[i].dtype() != tt.dtype || m.values[i].shape() != tt.shape)
        return Status::error(what + ": constant data does not match its declared type");
      continue;
    }
    TANDEM_RETURN_IF_ERROR(checkDevice(v.device(), what));
    auto it = m.arenas.find(canonicalDeviceName(v.device().empty() ? "cpu" : v.device()));
    if (it == m.arenas.end()) return Status::error(what + ": no arena for device '" + v.device() + "'");
    size_t bytes = (size_t)numElements(tt.shape) * dtypeSize(tt.dtype);
    if (v.arena_offset() < 0 || v.arena_offset() + (int64_t)bytes > it->second.numel())
      return Status::error(what + ": arena slot [" + std::to_string(v.arena_offset()) + ", +" +
                           std::to_string(bytes) + ") is outside the arena of " +
                           std::to_string(it->second.numel()) + " bytes");
    m.values[i] = Tensor::view(tt.dtype, tt.shape, it->second.data<uint8_t>() + v.arena_offset());
  }

  auto checkId = [&](int id, const std::string& what) -> Status {
    if (id < 0 || id >= n) return Status::error(what + " refers to value id " + std::to_string(id) + ", which does not exist");
    return Status::ok();
  };
  for (int id : p.inputs()) {
    TANDEM_RETURN_IF_ERROR(checkId(id, "graph input"));
    if (p.values(id).kind() != plan::Value::INPUT)
      return Status::error("graph input '" + p.values(id).name() + "' is not an INPUT value");
    m.inputNames.push_back(p.values(id).name());
    m.inputTypes.push_back(m.valueTypes[id]);
  }
  for (int id : p.outputs()) {
    TANDEM_RETURN_IF_ERROR(checkId(id, "graph output"));
    m.outputNames.push_back(p.values(id).name());
    m.outputTypes.push_back(m.valueTypes[id]);
  }

  // 4. Kernels, created once: oneDNN primitives are built and weights reordered here.
  const KernelRegistry& reg = KernelRegistry::global();
  m.stepAttrs.resize(p.steps_size());
  for (int si = 0; si < p.steps_size(); ++si) {
    const plan::Step& s = p.steps(si);
    std::string label = stepLabel(s, si);
    TANDEM_RETURN_IF_ERROR(checkDevice(s.device(), label));
    TANDEM_RETURN_IF_ERROR(attrsFromPlan(s, &m.stepAttrs[si]).withContext(label));
    KernelContext ctx;
    ctx.opType = s.op_type();
    ctx.nodeName = s.name();
    ctx.attrs = &m.stepAttrs[si];
    ctx.threads = m.threads;
    std::vector<const Tensor*> ins;
    std::vector<Tensor*> outs;
    for (int id : s.inputs()) {
      if (id == -1) {
        ctx.inputTypes.push_back(TensorType{});
        ctx.constInputs.push_back(nullptr);
        ins.push_back(nullptr);
        continue;
      }
      TANDEM_RETURN_IF_ERROR(checkId(id, label + " input"));
      ctx.inputTypes.push_back(m.valueTypes[id]);
      bool isConst = p.values(id).kind() == plan::Value::CONSTANT;
      ctx.constInputs.push_back(isConst ? &m.values[id] : nullptr);
      ins.push_back(&m.values[id]);
    }
    for (int id : s.outputs()) {
      TANDEM_RETURN_IF_ERROR(checkId(id, label + " output"));
      if (p.values(id).kind() != plan::Value::INTERMEDIATE)
        return Status::error(label + " writes value '" + p.values(id).name() + "', which is not an intermediate");
      ctx.outputTypes.push_back(m.valueTypes[id]);
      outs.push_back(&m.values[id]);
    }
    std::string dev = canonicalDeviceName(s.device().empty() ? "cpu" : s.device());
    auto di = std::find(m.devices.begin(), m.devices.end(), dev);
    m.stepDevice.push_back((int)(di - m.devices.begin()));
    if (di == m.devices.end()) m.devices.push_back(dev);
    std::unique_ptr<Kernel> k;
    if (s.op_type() == "Copy") k = std::make_unique<HostCopyKernel>();
    else TANDEM_RETURN_IF_ERROR(reg.create("cpu", ctx, &k).withContext(label));
    m.kernels.push_back(std::move(k));
    m.stepInputs.push_back(std::move(ins));
    m.stepOutputs.push_back(std::move(outs));
  }
  if (m.devices.size() > 1) {
    exe->planStreams();
    int perDevice = std::max(1, m.threads / (int)m.devices.size());
    if (options.threads > 0) perDevice = options.threads;  // an explicit count: every device
    for (size_t d = 0; d < m.devices.size(); ++d)
      m.streams.push_back(std::make_unique<StreamWorker>(perDevice));
    m.stepDoneRun.assign(m.kernels.size(), 0);
  }
  *out = std::move(exe);
  return Status::ok();
}

void Executable::planStreams() {
  // 1. For each arena-backed value: its device arena and byte range.
  // 2. Walk steps in plan order keeping, per arena, the steps that touched each byte range
  //    since it was last written; a step depends on the last writer of what it reads (RAW) and
  //    on every earlier reader and writer of the ranges it writes (WAR, WAW).
  // 3. Keep only dependencies on other devices: a stream already runs its own steps in order.
  Impl& m = *impl_;
  const plan::Plan& p = m.plan;
  struct Touch { int64_t begin, end; int step; bool write; };
  std::map<std::string, std::vector<Touch>> touches;
  auto rangeOf = [&](int id, std::string* arena, int64_t* b, int64_t* e) {
    const plan::Value& v = p.values(id);
    if (v.kind() == plan::Value::CONSTANT) return false;
    *arena = canonicalDeviceName(v.device().empty() ? "cpu" : v.device());
    *b = v.arena_offset();
    *e = v.arena_offset() + (int64_t)m.values[id].bytes();
    return *e > *b;
  };
  m.crossDeps.assign(p.steps_size(), {});
  for (int si = 0; si < p.steps_size(); ++si) {
    std::set<int> deps;
    const plan::Step& s = p.steps(si);
    std::string arena;
    int64_t b, e;
    for (int id : s.inputs()) {
      if (id < 0 || !rangeOf(id, &arena, &b, &e)) continue;
      for (const Touch& t : touches[arena])
        if (t.write && t.begin < e && b < t.end) deps.insert(t.step);
    }
    for (int id : s.outputs()) {
      if (!rangeOf(id, &arena, &b, &e)) continue;
      for (const Touch& t : touches[arena])
        if (t.begin < e && b < t.end) deps.insert(t.step);
    }
    for (int id : s.inputs())
      if (id >= 0 && rangeOf(id, &arena, &b, &e)) touches[arena].push_back({b, e, si, false});
    for (int id : s.outputs()) {
      if (!rangeOf(id, &arena, &b, &e)) continue;
      auto& list = touches[arena];
      // A new write ends the history of the bytes it covers (their readers are now ordered).
      list.erase(std::remove_if(list.begin(), list.end(),
                                [&](const Touch& t) { return t.begin >= b && t.end <= e; }),
                 list.end());
      list.push_back({b, e, si, true});
    }
    for (int d : deps)
      if (m.stepDevice[d] != m.stepDevice[si]) m.crossDeps[si].push_back(d);
  }
}

Status Executable::loadFile(const std::string& path, const LoadOptions& options,
                            std::unique_ptr<Executable>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open plan file");
  plan::Plan p;
  if (!p.ParseFromIstream(&in)) return Status::error(path + ": not a valid Tandem plan (protobuf parse failed)");
  return load(p, options, out).withContext(path);
}

const std::vector<std::string>& Executable::inputNames() const { return impl_->inputNames; }
const std::vector<TensorType>& Executable::inputTypes() const { return impl_->inputTypes; }
const std::vector<std::string>& Executable::outputNames() const { return impl_->outputNames; }
const std::vector<TensorType>& Executable::outputTypes() const { return impl_->outputTypes; }

const std::vector<std::string>& Executable::notes() const { return impl_->notes; }
int Executable::threads() const { return impl_->threads; }

std::vector<std::string> Executable::stepImpls() const {
  std::vector<std::string> r;
  for (auto& k : impl_->kernels) r.push_back(k->implName());
  return r;
}

Status Executable::run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
                       RunStats* stats, bool profile) {
  Impl& m = *impl_;
  const plan::Plan& p = m.plan;
  auto t0 = Clock::now();
  if (m.threads > 0) omp_set_num_threads(m.threads);
  // 1. Inputs cross into the arena once, after their types are checked.
  if ((int)inputs.size() != p.inputs_size())
    return Status::error("expected " + std::to_string(p.inputs_size()) + " inputs, got " +
                         std::to_string(inputs.size()));
  for (int i = 0; i < p.inputs_size(); ++i) {
    const Tensor& in = inputs[i];
    const TensorType& want = m.inputTypes[i];
    if (in.dtype() != want.dtype || in.shape() != want.shape)
      return Status::error("input '" + m.inputNames[i] + "': expected " + dtypeName(want.dtype) +
                           shapeToString(want.shape) + ", got " + dtypeName(in.dtype()) +
                           shapeToString(in.shape()));
    Tensor& slot = m.values[p.inputs(i)];
    if (in.bytes()) std::memcpy(slot.raw(), in.raw(), in.bytes());
  }
  // 2. Steps in plan order: inline for one device, on per-device streams otherwise.
  if (stats) stats->steps.clear();
  if (!m.streams.empty()) {
    TANDEM_RETURN_IF_ERROR(runOnStreams(stats, profile));
  } else for (size_t si = 0; si < m.kernels.size(); ++si) {
    auto s0 = Clock::now();
    Status st = m.kernels[si]->run(m.stepInputs[si], m.stepOutputs[si]);
    if (!st.isOk()) return st.withContext(stepLabel(p.steps(si), (int)si));
    if (profile && stats) {
      const plan::Step& s = p.steps(si);
      stats->steps.push_back({s.name(), s.op_type(), s.device(), m.kernels[si]->implName(),
                              std::chrono::duration<double>(Clock::now() - s0).count()});
    }
  }
  // 3. Outputs leave once, as owning copies (the arena is reused by the next run).
  outputs->clear();
  for (int id : p.outputs()) outputs->push_back(Tensor::copyOf(m.values[id]));
  if (stats) stats->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return Status::ok();
}

Status Executable::runOnStreams(RunStats* stats, bool profile) {
  Impl& m = *impl_;
  const plan::Plan& p = m.plan;
  uint64_t run;
  {
    std::lock_guard<std::mutex> l(m.eventMu);
    run = ++m.runNumber;
  }
  size_t n = m.kernels.size();
  std::vector<Status> results(n);
  std::vector<double> seconds(n, 0);
  std::mutex doneMu;
  std::condition_variable doneCv;
  size_t remaining = n;
  bool failed = false;
  for (size_t si = 0; si < n; ++si) {
    m.streams[m.stepDevice[si]]->submit([&, si, run] {
      // Wait on the events of the cross-device steps this one depends on.
      {
        std::unique_lock<std::mutex> l(m.eventMu);
        m.eventCv.wait(l, [&] {
          for (int d : m.crossDeps[si])
            if (m.stepDoneRun[d] != run) return false;
          return true;
        });
      }
      bool skip;
      {
        std::lock_guard<std::mutex> l(doneMu);
        skip = failed;
      }
      if (!skip) {
        auto s0 = Clock::now();
        results[si] = m.kernels[si]->run(m.stepInputs[si], m.stepOutputs[si]);
        seconds[si] = std::chrono::duration<double>(Clock::now() - s0).count();
      }
      {
        std::lock_guard<std::mutex> l(m.eventMu);
        m.stepDoneRun[si] = run;  // record the event (also on failure, so nobody waits forever)
      }
      m.eventCv.notify_all();
      std::lock_guard<std::mutex> l(doneMu);
      if (!results[si].isOk()) failed = true;
      if (--remaining == 0) doneCv.notify_all();
    });
  }
  std::unique_lock<std::mutex> l(doneMu);
  doneCv.wait(l, [&] { return remaining == 0; });
  for (size_t si = 0; si < n; ++si)
    if (!results[si].isOk()) return results[si].withContext(stepLabel(p.steps(si), (int)si));
  if (profile && stats)
    for (size_t si = 0; si < n; ++si) {
      const plan::Step& s = p.steps(si);
      stats->steps.push_back({s.name(), s.op_type(), s.device(), m.kernels[si]->implName(), seconds[si]});
    }
  return Status::ok();
}

}  // namespace tandem
