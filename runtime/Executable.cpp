// The executor: binds a Plan to its devices through the backend interface (runtime/Backend.h:
// arenas, constants, kernels) and runs its steps in order, on streams with events across devices.
#include "runtime/Executable.h"

#include <omp.h>

#include <algorithm>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "runtime/Backend.h"
#include "runtime/CheckedMath.h"
#include "runtime/Device.h"
#include "runtime/FileIO.h"
#include "runtime/PlanFormat.h"
#include "runtime/PlanVerify.h"
#include "runtime/WeightsFile.h"

namespace tandem {

namespace {

using Clock = std::chrono::steady_clock;

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

// A step's kernel on a worker-queue CPU backend: its error surfaces at synchronize(), away from
// the loop that knows the step, so it carries the step's label itself.
class LabelledKernel : public Kernel {
 public:
  LabelledKernel(std::unique_ptr<Kernel> inner, std::string label)
      : inner_(std::move(inner)), label_(std::move(label)) {}
  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    return inner_->run(in, out).withContext(label_);
  }
  Status runProfiled(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
                     std::vector<SubStepTiming>* subSteps) override {
    return inner_->runProfiled(in, out, subSteps).withContext(label_);
  }
  std::string implName() const override { return inner_->implName(); }
  Status prepare() override { return inner_->prepare(); }

 private:
  std::unique_ptr<Kernel> inner_;
  std::string label_;
};

// A step's kernel launched in a profiled run: its runProfiled, so a kernel that runs a body
// (a DynamicRegion) reports the body's ops; read after the step was synchronised.
class ProfiledLaunch : public Kernel {
 public:
  ProfiledLaunch(Kernel* inner, std::vector<SubStepTiming>* subSteps)
      : inner_(inner), subSteps_(subSteps) {}
  Status run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) override {
    return inner_->runProfiled(in, out, subSteps_);
  }
  std::string implName() const override { return inner_->implName(); }

 private:
  Kernel* inner_;
  std::vector<SubStepTiming>* subSteps_;
};

}  // namespace

// How a step runs: a kernel on its device's compute queue, or one of the copies
// insert-transfers emitted, on the queue that owns the link (a copy between host devices is a
// host-copy kernel on the destination's queue).
enum class StepKind { Kernel, HostCopy, CopyH2D, CopyD2H, CopyD2D };

// What one run in flight owns: one arena per device for the plan's intermediates and graph
// inputs, the value tensors viewing them and each step's argument vectors (constants point at
// the executable's shared copies). Runs take a free context from the executable's pool, or
// allocate a new one when every context is in use, and give it back at the end.
struct Executable::RunContext {
  std::vector<void*> arenaBase;                      // by Impl::arenas index
  std::vector<Tensor> values;                        // by value id; constants undefined
  std::vector<std::vector<const Tensor*>> stepInputs;
  std::vector<std::vector<Tensor*>> stepOutputs;
};

struct Executable::Impl {
  plan::Plan plan;
  LoadOptions options;
  int threads = 0;
  // Backends by canonical device name; a cuda:N that fell back to the CPU has a CPU backend.
  std::map<std::string, std::unique_ptr<DeviceBackend>> backends;
  std::set<DeviceBackend*> workerBackends;  // host backends with a queue thread of their own
  struct Arena {
    std::string device;
    DeviceBackend* backend = nullptr;
    int64_t bytes = 0;
    bool pinnedHost = false;  // a host arena allocated by a CUDA backend (DMA-able)
  };
  std::vector<Arena> arenas;                 // one per device, in plan order
  std::map<std::string, int> arenaOf;        // device -> index in `arenas`
  // Values by id. Constants are loaded once and shared by every run; the others are slots
  // [offset, offset + bytes) of their device's arena, bound per run context.
  std::vector<TensorType> valueTypes;
  std::vector<int64_t> valueBytes;
  std::vector<Tensor> constants;             // defined for CONSTANT values only
  std::vector<int> valueArena;               // index in `arenas`; -1 for constants
  std::vector<int64_t> valueOffset;
  std::map<std::pair<int, std::string>, Tensor> deviceConstants;  // (value, device) -> copy
  // Resident state (VARIABLE values): a buffer on the variable's device that outlives runs,
  // by value id (undefined for other kinds); `variables` lists their ids in plan order and
  // `variableUpdate` the value each one takes after a successful run.
  std::vector<Tensor> resident;
  std::vector<int> variables, variableUpdate;
  std::vector<std::string> variableNames;
  std::vector<TensorType> variableTypes;
  // An update planned in place (Value.aliases_variable): by value id, the variable whose buffer
  // it is written into, or -1; per variable (parallel to `variables`), the step that writes it
  // there, or -1 for an update copied back after the run.
  std::vector<int> valueAlias;
  std::vector<int> variableWriter;
  // By value id: a DynamicRegion's result, allocated by its step at run time (no arena slot).
  std::vector<bool> runTimeAllocated;
  // A step's operand: a value of the run context (id), a shared constant, or absent (-1, null).
  struct Arg {
    int id = -1;
    const Tensor* shared = nullptr;
  };
  std::vector<std::vector<Arg>> stepArgs;
  std::vector<std::vector<int>> stepResults;  // output value ids
  std::vector<StepKind> stepKind;
  std::vector<DeviceBackend*> stepBackend;   // the backend that runs (or, for copies, issues) it
  std::vector<Queue> stepQueue;
  std::vector<int> stepStream;               // index of (backend, queue): the unit of ordering
  std::vector<std::string> stepImpl;         // kernel implName(), or the copy's queue
  std::vector<std::unique_ptr<Event>> stepEvent;  // recorded after a step others wait on
  // Graph inputs/outputs on a CUDA device cross through pinned staging buffers (null: a host
  // value, copied directly).
  std::vector<void*> inputStaging, outputStaging;
  std::vector<std::unique_ptr<Event>> inputsUploaded;  // per GPU backend, in backends order
  // Before a GPU output leaves on its device's D2H queue, that queue waits for the queue that
  // wrote the output last: compute for a kernel or a peer copy, H2D for an upload step.
  struct OutputFence {
    DeviceBackend* writer;   // records `event` on `queue` after the run's steps
    Queue queue;
    DeviceBackend* reader;   // its D2H queue waits for the event
    std::unique_ptr<Event> event;
  };
  std::vector<OutputFence> outputFences;
  std::vector<AttrMap> stepAttrs;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<std::string> inputNames, outputNames;
  std::vector<TensorType> inputTypes, outputTypes;
  std::vector<std::string> notes;
  TuningMode tuningMode = TuningMode::Off;
  std::vector<StepTuning> tuning;

  // Each step waits on the events of the steps on other streams it depends on: read-after-write
  // through values and write-after-read/write through reused arena slots (the memory plan
  // assumes plan order). Empty for a plan of one stream.
  std::vector<std::vector<int>> crossDeps;  // per step: earlier steps on other streams

  // Concurrent runs. A plan whose devices are all one inline host queue runs concurrently:
  // each run in its own context, kernels shared (Kernel.h: run() is reentrant). Plans with a
  // GPU or several host queues share their queues, events and staging buffers between runs,
  // so their runs take `serialMu` for the whole run.
  bool serialRuns = false;
  std::mutex serialMu;

  // Asynchronous runs (Executable::enqueue). `asyncCapable`: every step on a GPU backend and
  // every variable on a GPU. After an enqueued run, `inFlight` is set and `runEnd` holds per
  // GPU (`gpus`, backends order) one event per queue, recorded at the run's end.
  bool asyncCapable = false;
  bool inFlight = false;
  std::vector<DeviceBackend*> gpus;
  std::vector<std::array<std::unique_ptr<Event>, 3>> runEnd;
  bool waitD2hBeforeInputs = false;    // a D2H copy that is not skipped may write host memory
  std::vector<bool> skipWhenEnqueued;  // per step: a D2H copy whose result no step reads
  std::vector<bool> inputOnlyUploaded; // per input: a host slot read only by H2D copy steps
  // Per input: a host slot that only host steps read (no upload): a run reads the caller's
  // buffer in place when it is 64-byte aligned (as Tensor::alloc's are), instead of copying it
  // into the arena. No step writes an input (a step planned in place over it writes its own
  // result's slot, which is the arena's), so the caller's bytes are left as they were.
  std::vector<bool> inputReadInPlace;
  // Buffers of allocateInput() that a GPU reads directly: start -> bytes. `owner` frees them;
  // null once the Executable is gone (a buffer released after that is leaked).
  struct PinnedInputs {
    std::mutex mu;
    std::map<const char*, size_t> live;
    DeviceBackend* owner = nullptr;
  };
  std::shared_ptr<PinnedInputs> pinned = std::make_shared<PinnedInputs>();
  std::mutex poolMu;
  std::vector<std::unique_ptr<RunContext>> contexts;  // every context, in use or not
  std::vector<RunContext*> freeContexts;

  Status chooseThreads();
  void resolveTuningMode();
  Status bindDevice(const std::string& device, const std::string& what);
  Status bindDevices();
  Status planArenas();
  Status bindValue(int id);
  Status bindValues();
  Status bindVariable(int id, const std::string& what);
  Status checkVariableUpdates();
  Status checkUpdatesInPlace(const std::vector<int>& writer);
  Status refillAliasedVariables();
  Status commitVariables(RunContext& rc, bool wait = true);
  Status partlyUpdated(const Status& st, int failedStep) const;
  int variableIndex(const std::string& name) const;
  Status newRunContext(std::unique_ptr<RunContext>* out);
  void bindSteps(RunContext& rc) const;
  Status stepOperands(int si, const std::string& label, KernelContext* ctx);
  Status createStep(int si, KernelTuner& tuner, RunContext& rc);
  Status finishKernels();
  /// Drops the constants every reader of which copied them at creation (Kernel::consumesConstant).
  void releaseConsumedConstants();
  void planStreams();
  Status planStaging();
  Status planAsync();
  Status orderAfterEnqueued();
  // The run-end events (runEnd) of queues `qs` on every GPU: recorded; waited for by queue `q`
  // of every GPU (not a queue's own event); waited for by the host.
  Status recordRunEnd(std::initializer_list<Queue> qs);
  Status queueAfterRunEnd(Queue q, std::initializer_list<Queue> qs);
  Status hostAfterRunEnd(Queue q);
  Status settle();
  bool isPinnedInput(const Tensor& t) const;
  Status acquire(RunContext** out);
  void release(RunContext* rc);
  void freeHost(void* p);

  const std::string& deviceOf(int id) const { return arenas[valueArena[id]].device; }
  // The tensor of value `id` in run context `rc`: its arena view, or the shared constant.
  const Tensor& valueIn(const RunContext& rc, int id) const {
    return valueArena[id] < 0 ? constants[id] : rc.values[id];
  }

  ~Impl() {
    // Device work first, then what it used, then the backends themselves.
    for (auto& b : backends) b.second->synchronize();
    {
      std::lock_guard<std::mutex> l(pinned->mu);
      pinned->owner = nullptr;
    }
    runEnd.clear();
    kernels.clear();
    stepEvent.clear();
    inputsUploaded.clear();
    outputFences.clear();
    for (void* p : inputStaging) if (p) freeHost(p);
    for (void* p : outputStaging) if (p) freeHost(p);
    for (auto& c : deviceConstants) backends[c.first.second]->deallocate(c.second.raw());
    deviceConstants.clear();
    for (int id : variables)
      if (resident[id].raw()) backends[resident[id].device()]->deallocate(resident[id].raw());
    resident.clear();
    for (auto& rc : contexts)
      for (size_t a = 0; a < arenas.size(); ++a) {
        if (!rc->arenaBase[a]) continue;
        if (arenas[a].pinnedHost) freeHost(rc->arenaBase[a]);
        else arenas[a].backend->deallocate(rc->arenaBase[a]);
      }
    contexts.clear();
    backends.clear();
  }
};

void Executable::Impl::freeHost(void* p) {
  for (auto& b : backends)
    if (!b.second->isHost()) return b.second->deallocateHost(p);
}

Executable::Executable() : impl_(new Impl) {}
Executable::~Executable() = default;

Status Executable::load(const plan::Plan& plan, const LoadOptions& options,
                        std::unique_ptr<Executable>* out) {
  return load(plan::Plan(plan), options, out);
}

Status Executable::load(plan::Plan&& planIn, const LoadOptions& options,
                        std::unique_ptr<Executable>* out) {
  // 1. Threads and tuning mode. 2. Devices: a backend per device the plan names. 3. Arenas:
  // one per device, sized by the memory plan. 4. Values: constants loaded, every arena slot
  // checked. 5. Every step verified as the compiler verified its op (runtime/PlanVerify.h).
  // 6. The first run context (allocated arenas). 7. Kernels, created once and tuned on that
  // context's buffers. 8. Backends finish loading; streams and events; the variables that
  // tuning wrote through an in-place update get their initial value again. 9. Staging of
  // graph inputs and outputs. The first context then waits in the pool for the first run.
  std::unique_ptr<Executable> exe(new Executable());
  Impl& m = *exe->impl_;
  m.plan = std::move(planIn);
  m.options = options;
  TANDEM_RETURN_IF_ERROR(checkPlanVersion(m.plan.version()));
  TANDEM_RETURN_IF_ERROR(m.chooseThreads());
  m.resolveTuningMode();
  KernelTuner tuner(m.tuningMode, options.tuningCache, options.winograd, &m.notes);
  TANDEM_RETURN_IF_ERROR(m.bindDevices());
  TANDEM_RETURN_IF_ERROR(m.planArenas());
  TANDEM_RETURN_IF_ERROR(m.bindValues());
  TANDEM_RETURN_IF_ERROR(verifyPlanSteps(m.plan));
  TANDEM_RETURN_IF_ERROR(m.checkVariableUpdates());
  // The constants are Tensors now (m.constants): their bytes in the plan would be a second
  // copy of every weight for the executable's life.
  for (int i = 0; i < m.plan.values_size(); ++i)
    if (m.plan.values(i).kind() == plan::Value::CONSTANT)
      std::string().swap(*m.plan.mutable_values(i)->mutable_constant()->mutable_raw());  // clear_raw keeps the capacity
  std::unique_ptr<RunContext> first;
  TANDEM_RETURN_IF_ERROR(m.newRunContext(&first));
  // What one run touches on the host, so the tuner times each step with the caches as the rest
  // of the plan leaves them (KernelTuner::setPlanBytes).
  int64_t hostBytes = exe->constantBytes();
  for (const Impl::Arena& a : m.arenas)
    if (a.backend->isHost()) hostBytes += a.bytes;
  tuner.setPlanBytes(hostBytes);
  m.stepAttrs.resize(m.plan.steps_size());
  for (int si = 0; si < m.plan.steps_size(); ++si)
    TANDEM_RETURN_IF_ERROR(m.createStep(si, tuner, *first));
  tuner.finish();
  m.tuning = tuner.report();
  TANDEM_RETURN_IF_ERROR(m.finishKernels());
  m.releaseConsumedConstants();
#ifdef __GLIBC__
  // What load freed (those constants, the variants the tuner built and dropped, a compiler's
  // buffers before it) goes back to the system: glibc keeps freed chunks of a size it has
  // freed before in its heap, where they would count against the process for its whole life.
  malloc_trim(0);
#endif
  TANDEM_RETURN_IF_ERROR(m.refillAliasedVariables());
  TANDEM_RETURN_IF_ERROR(m.planStaging());
  TANDEM_RETURN_IF_ERROR(m.planAsync());
  // A plan with resident state runs one step of it at a time: each run reads what the last
  // one wrote.
  m.serialRuns = !m.workerBackends.empty() || !m.variables.empty();
  for (auto& b : m.backends) m.serialRuns |= !b.second->isHost();
  for (const auto& e : m.stepEvent) m.serialRuns |= e != nullptr;
  m.bindSteps(*first);
  m.freeContexts.push_back(first.get());
  m.contexts.push_back(std::move(first));
  *out = std::move(exe);
  return Status::ok();
}

void Executable::Impl::releaseConsumedConstants() {
  // A constant every reader of which is a host kernel that copied it at creation
  // (Kernel::consumesConstant) is dropped: its tensor keeps dtype and shape (profiles list
  // them) over no data. A graph output, a copy's source or any other reader keeps it.
  const int n = plan.values_size();
  std::vector<int> readers(n, 0), consumers(n, 0);
  for (int si = 0; si < plan.steps_size(); ++si) {
    const plan::Step& s = plan.steps(si);
    const bool kernel = stepKind[si] == StepKind::Kernel && stepBackend[si]->isHost() && kernels[si];
    for (int k = 0; k < s.inputs_size(); ++k) {
      const int id = s.inputs(k);
      if (id < 0 || id >= n) continue;
      ++readers[id];
      consumers[id] += kernel && kernels[si]->consumesConstant((size_t)k);
    }
  }
  for (int id : plan.outputs())
    if (id >= 0 && id < n) ++readers[id];
  for (int id = 0; id < n; ++id)
    if (plan.values(id).kind() == plan::Value::CONSTANT && readers[id] > 0 &&
        readers[id] == consumers[id] && constants[id].defined())
      constants[id] = Tensor::view(constants[id].dtype(), constants[id].shape(), nullptr);
}

Status Executable::Impl::chooseThreads() {
  // No count given: the cores that are idle now (an OpenMP barrier that waits for a thread
  // sharing its core with another process costs a time slice per op; see defaultThreads).
  threads = options.threads;
  if (threads <= 0) {
    std::string why;
    threads = defaultThreads(&why);
    if (!why.empty()) notes.push_back(why);
  }
  // More threads than the host has is a mistake (libgomp faults creating 100000): clamped,
  // with a note. The CLI refuses such counts as usage errors before this.
  const int hostThreads = std::max<int>((int)std::thread::hardware_concurrency(), availableCores());
  if (threads > hostThreads) {
    notes.push_back(std::to_string(threads) + " threads asked for, more than this host's " +
                    std::to_string(hostThreads) + " hardware threads: using " +
                    std::to_string(hostThreads));
    threads = hostThreads;
  }
  omp_set_num_threads(threads);
  return Status::ok();
}

void Executable::Impl::resolveTuningMode() {
  tuningMode = options.tuning;
  if (tuningMode != TuningMode::Default) return;
  const char* env = std::getenv("TANDEM_TUNING");
  tuningMode = TuningMode::Measure;
  if (env && *env && !parseTuningMode(env, &tuningMode))
    notes.push_back(std::string("TANDEM_TUNING='") + env +
                    "' is not measure, cached or off: kernels are measured");
}

Status Executable::Impl::bindDevice(const std::string& device, const std::string& what) {
  // Host devices cpu, cpu:1, ... are slices of the one CPU (own arena, and, when there are
  // several, own queue thread and pool). cuda:N gets the CUDA backend when it is built and the
  // device is there; otherwise, with deviceFallback, its steps run on the CPU as a separate
  // host device (own arena and stream), and the executable says why, once per device.
  const int cpuThreads = threads > 0 ? threads : availableCores();
  std::string c = canonicalDeviceName(device.empty() ? "cpu" : device);
  if (backends.count(c)) return Status::ok();
  if (c.rfind("cpu", 0) == 0) {
    backends[c] = createCpuBackend(c, cpuThreads);
    return Status::ok();
  }
  std::string why = "unknown device kind";
  if (c.rfind("cuda:", 0) == 0) {
    BackendOptions bo;
    bo.memoryFraction = options.gpuMemoryFraction;
    std::unique_ptr<DeviceBackend> b;
    Status st = options.backendFactory ? options.backendFactory(c, &b)
                                       : createCudaBackend(std::stoi(c.substr(5)), bo, &b);
    if (st.isOk()) {
      backends[c] = std::move(b);
      return Status::ok();
    }
    why = st.message();
    if (options.deviceFallback) {
      notes.push_back(c + " is not available (" + why + "): its steps run on the CPU");
      backends[c] = createCpuBackend(c, cpuThreads);
      return Status::ok();
    }
  }
  return Status::error(what + " is placed on '" + device + "', which is not present (" + why +
                       "; live devices: cpu, cpu:N host slices and the visible cuda:N)");
}

Status Executable::Impl::bindDevices() {
  // Devices are bound before any arena is allocated so that, when a GPU is live, host arenas
  // come pinned and copies to and from them are asynchronous DMA.
  for (const plan::Arena& a : plan.arenas()) TANDEM_RETURN_IF_ERROR(bindDevice(a.device(), "arena"));
  for (const plan::Step& s : plan.steps()) TANDEM_RETURN_IF_ERROR(bindDevice(s.device(), "step"));
  // Several host devices run at the same time, each on a queue thread of its own with a share
  // of the cores (an explicit thread count: that many each). Nothing is allocated yet.
  std::vector<std::string> hosts;
  for (auto& b : backends)
    if (b.second->isHost()) hosts.push_back(b.first);
  if (hosts.size() < 2) return Status::ok();
  const int cpuThreads = threads > 0 ? threads : availableCores();
  int perDevice = options.threads > 0 ? options.threads : std::max(1, threads / (int)hosts.size());
  for (const std::string& h : hosts) {
    backends[h] = createCpuBackend(h, cpuThreads, perDevice);
    workerBackends.insert(backends[h].get());
  }
  return Status::ok();
}

Status Executable::Impl::planArenas() {
  // Host arenas are pinned by the first GPU's backend when the plan has one (newRunContext).
  DeviceBackend* firstCuda = nullptr;
  for (auto& b : backends)
    if (!b.second->isHost() && !firstCuda) firstCuda = b.second.get();
  for (const plan::Arena& a : plan.arenas()) {
    if (a.bytes() < 0) return Status::error("arena for " + a.device() + " has negative size");
    // Refused here rather than left to the allocator: a 2^63-byte request aborts under ASan and
    // may be granted lazily by an overcommitting kernel, to fault on first touch.
    if (a.bytes() > maxTensorBytes())
      return Status::error("arena for " + a.device() + ": " + std::to_string(a.bytes()) +
                           " bytes, more than the limit of " + std::to_string(maxTensorBytes()) +
                           " (TANDEM_MAX_TENSOR_BYTES)");
    Arena arena;
    arena.device = canonicalDeviceName(a.device().empty() ? "cpu" : a.device());
    arena.backend = backends[arena.device].get();
    arena.bytes = a.bytes();
    arena.pinnedHost = arena.backend->isHost() && firstCuda;
    auto [it, added] = arenaOf.emplace(arena.device, (int)arenas.size());
    if (added) arenas.push_back(arena);
    else arenas[it->second] = arena;  // a device named twice: the last arena counts
  }
  return Status::ok();
}

Status Executable::Impl::bindValue(int i) {
  const plan::Value& v = plan.values(i);
  std::string what = "value '" + v.name() + "'";
  if (v.id() != i) return Status::error(what + ": id " + std::to_string(v.id()) + " != index " + std::to_string(i));
  if (!isKnownDType(v.dtype())) return Status::error(what + ": unsupported dtype code " + std::to_string(v.dtype()));
  TensorType tt{(DType)v.dtype(), Shape(v.dims().begin(), v.dims().end())};
  const bool runTime = runTimeAllocated[i];
  for (int64_t d : tt.shape)
    if (d < 0 && !(runTime && d == -1))
      return Status::error(what + ": dynamic or negative dim in " + shapeToString(tt.shape) +
                           " (only a DynamicRegion's results may have dims known at run time)");
  // A plan is untrusted input: a shape whose size overflows or exceeds what one tensor may
  // have is refused here, before any kernel sizes a table or a loop by it.
  int64_t bytes = 0;
  if (std::string e = runTime ? "" : checkTensorSize(tt.shape, (int64_t)dtypeSize(tt.dtype), dtypeName(tt.dtype), &bytes);
      !e.empty())
    return Status::error(what + ": " + e);
  valueTypes[i] = tt;
  valueBytes[i] = bytes;
  if (v.has_aliases_variable() && v.kind() != plan::Value::INTERMEDIATE)
    return Status::error(what + ": only an intermediate may alias a variable");
  if (v.kind() == plan::Value::CONSTANT) {
    if (v.has_external())
      return Status::error(what + ": its data is in the weights file '" + v.external().file() +
                           "', which only Executable::loadFile resolves (relative to the plan file)");
    TANDEM_RETURN_IF_ERROR(tensorFromPlan(v.constant(), what, &constants[i]));
    if (constants[i].dtype() != tt.dtype || constants[i].shape() != tt.shape)
      return Status::error(what + ": constant data does not match its declared type");
    return Status::ok();
  }
  if (v.kind() == plan::Value::VARIABLE) return bindVariable(i, what);
  TANDEM_RETURN_IF_ERROR(bindDevice(v.device(), what));
  auto it = arenaOf.find(canonicalDeviceName(v.device().empty() ? "cpu" : v.device()));
  if (it == arenaOf.end()) return Status::error(what + ": no arena for device '" + v.device() + "'");
  if (v.has_aliases_variable()) {
    // Lives in its variable's buffer (checked in checkUpdatesInPlace), not in the arena.
    if (v.aliases_variable() < 0)
      return Status::error(what + ": aliases_variable refers to value id " +
                           std::to_string(v.aliases_variable()) + ", which does not exist");
    valueAlias[i] = v.aliases_variable();
    valueArena[i] = it->second;
    return Status::ok();
  }
  if (runTime) {
    // Allocated by its step when it runs (runtime/DynamicRegion.h), no arena slot; only a
    // graph output may read it (checked in bindValues).
    if (v.kind() != plan::Value::INTERMEDIATE || !backends[canonicalDeviceName(v.device().empty() ? "cpu" : v.device())]->isHost())
      return Status::error(what + ": a DynamicRegion's result must be an intermediate on a host device");
    valueArena[i] = it->second;
    return Status::ok();
  }
  const Arena& arena = arenas[it->second];
  // Offset and size compared without forming offset + bytes, which could overflow.
  if (v.arena_offset() < 0 || v.arena_offset() > arena.bytes || bytes > arena.bytes - v.arena_offset())
    return Status::error(what + ": arena slot [" + std::to_string(v.arena_offset()) + ", +" +
                         std::to_string(bytes) + ") is outside the arena of " +
                         std::to_string(arena.bytes) + " bytes");
  // Kernels read elements through typed pointers: an offset that is not a multiple of the
  // element size is a misaligned load (undefined behaviour). The compiler aligns every slot to
  // 64 bytes (tandem-plan-memory), so only a corrupted plan has one.
  if (int64_t elem = (int64_t)dtypeSize(tt.dtype); elem > 1 && v.arena_offset() % elem != 0)
    return Status::error(what + ": arena offset " + std::to_string(v.arena_offset()) +
                         " is not a multiple of its " + dtypeName(tt.dtype) + " element size " +
                         std::to_string(dtypeSize(tt.dtype)));
  valueArena[i] = it->second;
  valueOffset[i] = v.arena_offset();
  return Status::ok();
}

Status Executable::Impl::bindValues() {
  const int n = plan.values_size();
  valueTypes.resize(n);
  valueBytes.assign(n, 0);
  constants.resize(n);
  resident.resize(n);
  valueArena.assign(n, -1);
  valueOffset.assign(n, 0);
  valueAlias.assign(n, -1);
  // A DynamicRegion step allocates its results as it runs; no other step may read them (the
  // compiler outlines every reader into the region), so they leave the run as graph outputs.
  runTimeAllocated.assign(n, false);
  for (const plan::Step& s : plan.steps())
    if (s.op_type() == "DynamicRegion")
      for (int id : s.outputs())
        if (id >= 0 && id < n) runTimeAllocated[id] = true;
  for (int si = 0; si < plan.steps_size(); ++si)
    for (int id : plan.steps(si).inputs())
      if (id >= 0 && id < n && runTimeAllocated[id])
        return Status::error(stepLabel(plan.steps(si), si) + " reads value '" + plan.values(id).name() +
                             "', which a DynamicRegion allocates at run time (only graph outputs may)");
  for (int i = 0; i < n; ++i) TANDEM_RETURN_IF_ERROR(bindValue(i));
  auto checkId = [&](int id, const std::string& what) -> Status {
    if (id < 0 || id >= n) return Status::error(what + " refers to value id " + std::to_string(id) + ", which does not exist");
    return Status::ok();
  };
  for (int id : plan.inputs()) {
    TANDEM_RETURN_IF_ERROR(checkId(id, "graph input"));
    if (plan.values(id).kind() != plan::Value::INPUT)
      return Status::error("graph input '" + plan.values(id).name() + "' is not an INPUT value");
    inputNames.push_back(plan.values(id).name());
    inputTypes.push_back(valueTypes[id]);
  }
  for (int id : plan.outputs()) {
    TANDEM_RETURN_IF_ERROR(checkId(id, "graph output"));
    outputNames.push_back(plan.values(id).name());
    outputTypes.push_back(valueTypes[id]);
  }
  return Status::ok();
}

Status Executable::Impl::bindVariable(int i, const std::string& what) {
  // The initial value, then a buffer of its own on the variable's device (outside every
  // arena: it outlives runs and run contexts), filled once here.
  const plan::Value& v = plan.values(i);
  const TensorType& tt = valueTypes[i];
  Tensor initial;
  TANDEM_RETURN_IF_ERROR(tensorFromPlan(v.constant(), what + " (initial value)", &initial));
  if (initial.dtype() != tt.dtype || initial.shape() != tt.shape)
    return Status::error(what + ": initial value " + dtypeName(initial.dtype()) +
                         shapeToString(initial.shape()) + " does not match the variable's type " +
                         dtypeName(tt.dtype) + shapeToString(tt.shape));
  if (!v.has_update()) return Status::error(what + ": a variable needs the id of its update value");
  TANDEM_RETURN_IF_ERROR(bindDevice(v.device(), what));
  const std::string dev = canonicalDeviceName(v.device().empty() ? "cpu" : v.device());
  DeviceBackend* b = backends[dev].get();
  void* p = nullptr;
  TANDEM_RETURN_IF_ERROR(b->allocate((size_t)std::max<int64_t>(valueBytes[i], 1), what, &p));
  resident[i] = Tensor::view(tt.dtype, tt.shape, p);
  resident[i].setDevice(dev);
  // The copy may be queued (a GPU, or a host device with a queue thread of its own): it must
  // finish before `initial` goes.
  if (valueBytes[i]) {
    TANDEM_RETURN_IF_ERROR(b->copyFromHost(p, initial.raw(), initial.bytes()).withContext(what));
    TANDEM_RETURN_IF_ERROR(b->synchronize().withContext(what));
  }
  variables.push_back(i);
  variableUpdate.push_back(v.update());
  variableNames.push_back(v.name());
  variableTypes.push_back(tt);
  return Status::ok();
}

Status Executable::Impl::checkVariableUpdates() {
  // Each variable's update: an intermediate of its type, written by a step on its device (the
  // copy back at the end of a run is a copy within that device), one variable per update, and
  // variable names unique (they are how callers address them).
  std::set<int> updates;
  std::set<std::string> names;
  std::vector<int> writer(plan.values_size(), -1);
  for (int si = 0; si < plan.steps_size(); ++si)
    for (int o : plan.steps(si).outputs())
      if (o >= 0 && o < plan.values_size()) writer[o] = si;
  for (size_t k = 0; k < variables.size(); ++k) {
    const std::string what = "variable '" + variableNames[k] + "'";
    const int u = variableUpdate[k];
    if (u < 0 || u >= plan.values_size())
      return Status::error(what + ": its update refers to value id " + std::to_string(u) + ", which does not exist");
    const plan::Value& uv = plan.values(u);
    if (uv.kind() != plan::Value::INTERMEDIATE || writer[u] < 0)
      return Status::error(what + ": its update '" + uv.name() + "' is not a value a step computes");
    if (valueTypes[u].dtype != variableTypes[k].dtype || valueTypes[u].shape != variableTypes[k].shape)
      return Status::error(what + ": its update '" + uv.name() + "' is " + dtypeName(valueTypes[u].dtype) +
                           shapeToString(valueTypes[u].shape) + ", the variable " +
                           dtypeName(variableTypes[k].dtype) + shapeToString(variableTypes[k].shape));
    if (deviceOf(u) != resident[variables[k]].device())
      return Status::error(what + " is resident on " + resident[variables[k]].device() +
                           " but its update '" + uv.name() + "' is computed on " + deviceOf(u));
    if (!updates.insert(u).second)
      return Status::error(what + ": value '" + uv.name() + "' already updates another variable");
    if (!names.insert(variableNames[k]).second)
      return Status::error(what + ": two variables have this name");
  }
  return checkUpdatesInPlace(writer);
}

Status Executable::Impl::checkUpdatesInPlace(const std::vector<int>& writer) {
  // A value that aliases a variable must be that variable's update (so its type and device are
  // the variable's, checked above) and the variable must not be read after the update's step
  // writes it: such a reader would get the new value where the plan means the old one. The
  // compiler's other condition, that the writing step reads the variable only at the index it
  // writes, is the kernel's business and not checked here.
  variableWriter.assign(variables.size(), -1);
  for (int u = 0; u < plan.values_size(); ++u) {
    if (valueAlias[u] < 0) continue;
    const int var = valueAlias[u];
    const std::string what = "value '" + plan.values(u).name() + "'";
    if (var >= plan.values_size())
      return Status::error(what + ": aliases_variable refers to value id " + std::to_string(var) +
                           ", which does not exist");
    const plan::Value& vv = plan.values(var);
    if (vv.kind() != plan::Value::VARIABLE)
      return Status::error(what + " aliases '" + vv.name() + "', which is not a variable");
    const size_t k = (size_t)(std::find(variables.begin(), variables.end(), var) - variables.begin());
    if (variableUpdate[k] != u)
      return Status::error(what + " aliases variable '" + vv.name() + "' but is not its update");
    const int w = writer[u];
    for (int si = w + 1; si < plan.steps_size(); ++si)
      for (int id : plan.steps(si).inputs())
        if (id == var)
          return Status::error(what + " is written into variable '" + vv.name() + "' by " +
                               stepLabel(plan.steps(w), w) + ", but " + stepLabel(plan.steps(si), si) +
                               " reads the variable after that");
    variableWriter[k] = w;
  }
  return Status::ok();
}

Status Executable::Impl::refillAliasedVariables() {
  // Tuning ran kernels on the first run context, whose in-place updates are the variables'
  // own buffers, and filled the inputs it measured on with scratch values, variables read by
  // a step among them: every variable takes its initial value again. Only measuring runs a
  // kernel; choices from the cache or the heuristic leave the buffers as loaded.
  if (std::none_of(tuning.begin(), tuning.end(),
                   [](const StepTuning& t) { return t.source == StepTuning::Source::Measured; }))
    return Status::ok();
  for (size_t k = 0; k < variables.size(); ++k) {
    if (!valueBytes[variables[k]]) continue;
    const std::string what = "variable '" + variableNames[k] + "'";
    Tensor initial;
    TANDEM_RETURN_IF_ERROR(tensorFromPlan(plan.values(variables[k]).constant(), what, &initial));
    Tensor& dst = resident[variables[k]];
    DeviceBackend* b = backends[dst.device()].get();
    TANDEM_RETURN_IF_ERROR(b->copyFromHost(dst.raw(), initial.raw(), initial.bytes()).withContext(what));
    TANDEM_RETURN_IF_ERROR(b->synchronize().withContext(what));
  }
  return Status::ok();
}

Status Executable::Impl::partlyUpdated(const Status& st, int failedStep) const {
  // The variables whose in-place update was issued before the step that failed (every one
  // when the failure surfaced at the end of the run) hold their new values.
  std::string names;
  for (size_t k = 0; k < variables.size(); ++k)
    if (variableWriter[k] >= 0 && (failedStep < 0 || variableWriter[k] < failedStep))
      names += (names.empty() ? "" : ", ") + variableNames[k];
  if (names.empty()) return st;
  return Status::error(st.message() + " (variables updated in place before the failure keep their new value: " +
                       names + ")");
}

Status Executable::Impl::commitVariables(RunContext& rc, bool wait) {
  // After a run's steps have all finished (every queue idle): each variable whose update is not
  // planned in place takes it, a copy within its device, then those devices are synchronised
  // again. A run that failed never gets here, so those variables keep the values they had.
  std::set<DeviceBackend*> used;
  for (size_t k = 0; k < variables.size(); ++k) {
    if (variableWriter[k] >= 0) continue;  // written in place by its step
    Tensor& dst = resident[variables[k]];
    const Tensor& src = rc.values[variableUpdate[k]];
    DeviceBackend* b = backends[dst.device()].get();
    if (dst.bytes()) TANDEM_RETURN_IF_ERROR(b->copyOnDevice(Queue::Compute, dst.raw(), src.raw(), dst.bytes())
                                                .withContext("variable '" + variableNames[k] + "'"));
    used.insert(b);
  }
  if (!wait) return Status::ok();  // an enqueued run: ordered before the next run's steps
  for (DeviceBackend* b : used) TANDEM_RETURN_IF_ERROR(b->synchronize().withContext("updating the variables"));
  return Status::ok();
}

int Executable::Impl::variableIndex(const std::string& name) const {
  for (size_t k = 0; k < variableNames.size(); ++k)
    if (variableNames[k] == name) return (int)k;
  return -1;
}

Status Executable::Impl::newRunContext(std::unique_ptr<RunContext>* out) {
  // The arenas (zeroed: a plan may read a slot before writing it, e.g. an unused input), then
  // a view per arena value. Step arguments are bound once the steps are known (bindSteps).
  auto rc = std::make_unique<RunContext>();
  rc->arenaBase.assign(arenas.size(), nullptr);
  Status st;
  for (size_t a = 0; a < arenas.size() && st.isOk(); ++a) {
    const Arena& arena = arenas[a];
    DeviceBackend* pinner = nullptr;
    if (arena.pinnedHost)
      for (auto& b : backends)
        if (!b.second->isHost() && !pinner) pinner = b.second.get();
    if (pinner) {
      st = pinner->allocateHost((size_t)arena.bytes, &rc->arenaBase[a]).withContext("arena of " + arena.device);
      if (st.isOk()) std::memset(rc->arenaBase[a], 0, (size_t)arena.bytes);
    } else {
      st = arena.backend->allocate((size_t)arena.bytes, "the plan's arena", &rc->arenaBase[a]);
    }
  }
  if (!st.isOk()) {
    for (size_t a = 0; a < arenas.size(); ++a) {
      if (!rc->arenaBase[a]) continue;
      if (arenas[a].pinnedHost) freeHost(rc->arenaBase[a]);
      else arenas[a].backend->deallocate(rc->arenaBase[a]);
    }
    return st;
  }
  rc->values.resize(valueTypes.size());
  for (size_t id = 0; id < valueTypes.size(); ++id) {
    if (valueArena[id] < 0 || runTimeAllocated[id]) continue;
    const TensorType& tt = valueTypes[id];
    if (valueAlias[id] >= 0) {
      rc->values[id] = Tensor::view(tt.dtype, tt.shape, resident[valueAlias[id]].raw());
      rc->values[id].setDevice(resident[valueAlias[id]].device());
      continue;
    }
    rc->values[id] = Tensor::view(tt.dtype, tt.shape,
                                  static_cast<uint8_t*>(rc->arenaBase[valueArena[id]]) + valueOffset[id]);
    rc->values[id].setDevice(deviceOf((int)id));
  }
  *out = std::move(rc);
  return Status::ok();
}

void Executable::Impl::bindSteps(RunContext& rc) const {
  rc.stepInputs.assign(stepArgs.size(), {});
  rc.stepOutputs.assign(stepResults.size(), {});
  for (size_t si = 0; si < stepArgs.size(); ++si) {
    for (const Arg& a : stepArgs[si])
      rc.stepInputs[si].push_back(a.shared ? a.shared : a.id < 0 ? nullptr : &rc.values[a.id]);
    for (int id : stepResults[si]) rc.stepOutputs[si].push_back(&rc.values[id]);
  }
}

Status Executable::Impl::stepOperands(int si, const std::string& label, KernelContext* ctx) {
  // Operands of step `si`: their static types for the kernel, constants known at load, and
  // where each run finds them (stepArgs, stepResults). Constants a non-host step reads are
  // uploaded once per device.
  const plan::Step& s = plan.steps(si);
  const int n = plan.values_size();
  auto checkId = [&](int id, const std::string& what) -> Status {
    if (id < 0 || id >= n) return Status::error(what + " refers to value id " + std::to_string(id) + ", which does not exist");
    return Status::ok();
  };
  std::string dev = canonicalDeviceName(s.device().empty() ? "cpu" : s.device());
  DeviceBackend* backend = backends[dev].get();
  std::vector<Arg> args;
  std::vector<int> results;
  for (int id : s.inputs()) {
    if (id == -1) {
      ctx->inputTypes.push_back(TensorType{});
      ctx->constInputs.push_back(nullptr);
      args.push_back({});
      continue;
    }
    TANDEM_RETURN_IF_ERROR(checkId(id, label + " input"));
    ctx->inputTypes.push_back(valueTypes[id]);
    bool isConst = plan.values(id).kind() == plan::Value::CONSTANT;
    ctx->constInputs.push_back(isConst ? &constants[id] : nullptr);
    if (plan.values(id).kind() == plan::Value::VARIABLE) {
      // Read in place from its resident buffer; never prepacked (it changes every run).
      const bool hostVariable = backends[resident[id].device()]->isHost();
      if (resident[id].device() != dev && s.op_type() != "Copy" && !(backend->isHost() && hostVariable))
        return Status::error(label + " on " + dev + " reads variable '" + plan.values(id).name() +
                             "', which is resident on " + resident[id].device());
      args.push_back({id, &resident[id]});
      continue;
    }
    if (!isConst) {
      args.push_back({id, nullptr});
      continue;
    }
    if (backend->isHost()) {
      args.push_back({id, &constants[id]});
      continue;
    }
    auto key = std::make_pair(id, dev);
    auto c = deviceConstants.find(key);
    if (c == deviceConstants.end()) {
      const Tensor& host = constants[id];
      void* d = nullptr;
      TANDEM_RETURN_IF_ERROR(backend->allocate(host.bytes(), label + " constant '" + plan.values(id).name() + "'", &d));
      Tensor t = Tensor::view(host.dtype(), host.shape(), d);
      t.setDevice(dev);
      c = deviceConstants.emplace(key, t).first;
      TANDEM_RETURN_IF_ERROR(backend->copyFromHost(d, host.raw(), host.bytes()).withContext(label));
    }
    args.push_back({id, &c->second});
  }
  for (int id : s.outputs()) {
    TANDEM_RETURN_IF_ERROR(checkId(id, label + " output"));
    if (plan.values(id).kind() != plan::Value::INTERMEDIATE)
      return Status::error(label + " writes value '" + plan.values(id).name() + "', which is not an intermediate");
    ctx->outputTypes.push_back(valueTypes[id]);
    results.push_back(id);
  }
  stepArgs.push_back(std::move(args));
  stepResults.push_back(std::move(results));
  return Status::ok();
}

Status Executable::Impl::createStep(int si, KernelTuner& tuner, RunContext& rc) {
  // Kernels are created once by their device's backend: oneDNN primitives are built and
  // weights reordered, cuDNN/cuBLASLt descriptors made and generated kernels gathered here.
  // Copies get the queue of their link. Tuning runs candidates on `rc`'s buffers.
  const plan::Step& s = plan.steps(si);
  std::string label = stepLabel(s, si);
  TANDEM_RETURN_IF_ERROR(bindDevice(s.device(), label));
  TANDEM_RETURN_IF_ERROR(attrsFromPlan(s.attrs(), &stepAttrs[si]).withContext(label));
  KernelContext ctx;
  ctx.opType = s.op_type();
  ctx.nodeName = s.name();
  ctx.attrs = &stepAttrs[si];
  ctx.fusedBody = s.has_fused_body() ? &s.fused_body() : nullptr;
  ctx.threads = threads > 0 ? threads : availableCores();
  ctx.winograd = options.winograd;
  ctx.seed = options.seed;
  ctx.measureVariants = tuningMode != TuningMode::Off;
  TANDEM_RETURN_IF_ERROR(stepOperands(si, label, &ctx));
  std::string dev = canonicalDeviceName(s.device().empty() ? "cpu" : s.device());
  DeviceBackend* backend = backends[dev].get();
  std::vector<const Tensor*> ins;
  std::vector<Tensor*> outs;
  for (const Arg& a : stepArgs[si]) ins.push_back(a.shared ? a.shared : a.id < 0 ? nullptr : &rc.values[a.id]);
  for (int id : stepResults[si]) outs.push_back(&rc.values[id]);
  std::unique_ptr<Kernel> k;
  StepKind kind = StepKind::Kernel;
  Queue queue = Queue::Compute;
  if (s.op_type() == "Copy") {
    k = std::make_unique<HostCopyKernel>();
    kind = StepKind::HostCopy;
    if (ins.size() != 1 || outs.size() != 1 || !ins[0] || ins[0]->bytes() != outs[0]->bytes())
      return Status::error(label + ": a copy has one input and one output of the same size");
    DeviceBackend* from = backends[canonicalDeviceName(ins[0]->device())].get();
    DeviceBackend* to = backends[canonicalDeviceName(outs[0]->device())].get();
    if (!from || !to) return Status::error(label + ": copy between unknown devices");
    if (!from->isHost() && !to->isHost()) kind = StepKind::CopyD2D, backend = to;
    else if (!to->isHost()) kind = StepKind::CopyH2D, backend = to, queue = Queue::HostToDevice;
    else if (!from->isHost()) kind = StepKind::CopyD2H, backend = from, queue = Queue::DeviceToHost;
  } else {
    // CPU steps whose kernel has variants: measured or looked up (runtime/Tuning.h).
    TANDEM_RETURN_IF_ERROR(tuner.create(*backend, ctx, label, ins, outs, &k).withContext(label));
    // A GPU kernel reads and writes its own device's memory only; insert-transfers guarantees
    // it, and a hand-made plan that breaks it must fail here, not fault on the device.
    if (!backend->isHost()) {
      for (const Tensor* t : ins)
        if (t && t->device() != dev)
          return Status::error(label + " on " + dev + " reads a value on " + t->device() + " without a copy");
      for (const Tensor* t : outs)
        if (t->device() != dev)
          return Status::error(label + " on " + dev + " writes a value on " + t->device());
    }
  }
  if (k && workerBackends.count(backend)) k = std::make_unique<LabelledKernel>(std::move(k), label);
  stepKind.push_back(kind);
  stepImpl.push_back(kind == StepKind::CopyH2D   ? "copy-h2d"
                     : kind == StepKind::CopyD2H ? "copy-d2h"
                     : kind == StepKind::CopyD2D ? "copy-d2d"
                                                 : k->implName());
  stepBackend.push_back(backend);
  stepQueue.push_back(queue);
  kernels.push_back(std::move(k));
  return Status::ok();
}

Status Executable::Impl::finishKernels() {
  // Each backend finishes its kernels (CUDA: one NVRTC program for the plan), then the
  // ordering units: every (backend, queue) is a stream and the host issues the steps in plan
  // order, waiting only on events.
  for (auto& b : backends) {
    std::vector<Kernel*> ks;
    for (size_t si = 0; si < kernels.size(); ++si)
      if (stepBackend[si] == b.second.get() && stepKind[si] == StepKind::Kernel) ks.push_back(kernels[si].get());
    TANDEM_RETURN_IF_ERROR(b.second->finishLoad(ks));
  }
  for (auto& b : backends) TANDEM_RETURN_IF_ERROR(b.second->synchronize().withContext("loading the plan"));
  std::map<std::pair<DeviceBackend*, int>, int> streamIds;
  for (size_t si = 0; si < kernels.size(); ++si) {
    auto key = std::make_pair(stepBackend[si], (int)stepQueue[si]);
    stepStream.push_back(streamIds.emplace(key, (int)streamIds.size()).first->second);
  }
  if (streamIds.size() > 1) planStreams();
  else crossDeps.assign(kernels.size(), {});
  stepEvent.resize(kernels.size());
  for (size_t si = 0; si < kernels.size(); ++si)
    for (int d : crossDeps[si])
      if (!stepEvent[d]) TANDEM_RETURN_IF_ERROR(stepBackend[d]->createEvent(&stepEvent[d]));
  return Status::ok();
}

Status Executable::Impl::planStaging() {
  // Graph inputs and outputs on a GPU cross through pinned staging, once per run.
  const plan::Plan& p = plan;
  for (int id : p.inputs()) {
    void* staging = nullptr;
    DeviceBackend* b = backends[deviceOf(id)].get();
    if (!b->isHost()) TANDEM_RETURN_IF_ERROR(b->allocateHost((size_t)valueBytes[id], &staging));
    inputStaging.push_back(staging);
  }
  for (int id : p.outputs()) {
    void* staging = nullptr;
    DeviceBackend* b = valueArena[id] < 0 ? nullptr : backends[deviceOf(id)].get();
    if (b && !b->isHost()) TANDEM_RETURN_IF_ERROR(b->allocateHost((size_t)valueBytes[id], &staging));
    outputStaging.push_back(staging);
  }
  for (auto& b : backends) {
    if (b.second->isHost()) continue;
    std::unique_ptr<Event> up;
    TANDEM_RETURN_IF_ERROR(b.second->createEvent(&up));
    inputsUploaded.push_back(std::move(up));
  }
  // One fence per (writer queue, reading device) among the staged outputs' last writers. An
  // output no step writes is a graph input: its upload is already ordered (inputsUploaded).
  for (int i = 0; i < p.outputs_size(); ++i) {
    if (!outputStaging[i]) continue;
    int id = p.outputs(i), last = -1;
    for (int si = 0; si < p.steps_size(); ++si)
      for (int o : p.steps(si).outputs())
        if (o == id) last = si;
    if (last < 0) continue;
    DeviceBackend* reader = backends[deviceOf(id)].get();
    DeviceBackend* writer = stepBackend[last];
    Queue q = stepQueue[last];
    bool known = false;
    for (const OutputFence& f : outputFences)
      known |= f.writer == writer && f.queue == q && f.reader == reader;
    if (known) continue;
    OutputFence f{writer, q, reader, nullptr};
    TANDEM_RETURN_IF_ERROR(writer->createEvent(&f.event));
    outputFences.push_back(std::move(f));
  }
  return Status::ok();
}

void Executable::Impl::planStreams() {
  // 1. For each arena-backed value: its device arena and byte range; a variable, and an update
  //    written into it, are the variable's whole buffer (key -1 - its id), so an in-place
  //    update waits for the readers of the old value on other streams (a Copy on an H2D queue).
  // 2. Walk steps in plan order keeping, per arena, the steps that touched each byte range
  //    since it was last written; a step depends on the last writer of what it reads (RAW) and
  //    on every earlier reader and writer of the ranges it writes (WAR, WAW).
  // 3. Keep only dependencies on other streams: a stream already runs its own steps in order.
  const plan::Plan& p = plan;
  struct Touch { int64_t begin, end; int step; bool write; };
  std::map<int, std::vector<Touch>> touches;
  auto rangeOf = [&](int id, int* arena, int64_t* b, int64_t* e) {
    const int var = p.values(id).kind() == plan::Value::VARIABLE ? id : valueAlias[id];
    if (var >= 0) {
      *arena = -1 - var;
      *b = 0;
      *e = valueBytes[var];
      return *e > 0;
    }
    if (valueArena[id] < 0) return false;
    *arena = valueArena[id];
    *b = valueOffset[id];
    *e = valueOffset[id] + valueBytes[id];
    return *e > *b;
  };
  crossDeps.assign(p.steps_size(), {});
  for (int si = 0; si < p.steps_size(); ++si) {
    std::set<int> deps;
    const plan::Step& s = p.steps(si);
    int arena;
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
      if (stepStream[d] != stepStream[si]) crossDeps[si].push_back(d);
  }
}

Status Executable::Impl::planAsync() {
  // Which runs enqueue() can leave in flight, and what the next run must wait for then.
  const plan::Plan& p = plan;
  for (auto& b : backends)
    if (!b.second->isHost()) gpus.push_back(b.second.get());
  asyncCapable = !gpus.empty();
  for (DeviceBackend* b : stepBackend) asyncCapable = asyncCapable && !b->isHost();
  for (int id : variables) asyncCapable = asyncCapable && !backends[resident[id].device()]->isHost();
  // Per value: read by some step; read by a step other than an upload.
  std::vector<bool> read(valueTypes.size(), false), readNotUploaded(valueTypes.size(), false),
      uploaded(valueTypes.size(), false);
  for (size_t si = 0; si < stepArgs.size(); ++si)
    for (const Arg& a : stepArgs[si]) {
      if (a.id < 0) continue;
      read[a.id] = true;
      if (stepKind[si] != StepKind::CopyH2D) readNotUploaded[a.id] = true;
      else uploaded[a.id] = true;
    }
  skipWhenEnqueued.assign(stepArgs.size(), false);
  for (size_t si = 0; si < stepArgs.size(); ++si) {
    if (stepKind[si] != StepKind::CopyD2H) continue;
    bool used = false;
    for (int o : stepResults[si]) used = used || read[o];
    skipWhenEnqueued[si] = !used;
    waitD2hBeforeInputs = waitD2hBeforeInputs || used;
  }
  std::set<int> outputIds(p.outputs().begin(), p.outputs().end());
  for (int i = 0; i < p.inputs_size(); ++i) {
    const int id = p.inputs(i);
    inputOnlyUploaded.push_back(!inputStaging[i] && read[id] && !readNotUploaded[id] && !outputIds.count(id) &&
                                !gpus.empty());
    inputReadInPlace.push_back(!inputStaging[i] && !uploaded[id] && backends[deviceOf(id)]->isHost());
  }
  pinned->owner = gpus.empty() ? nullptr : gpus[0];
  for (DeviceBackend* g : gpus) {
    runEnd.emplace_back();
    for (auto& e : runEnd.back()) TANDEM_RETURN_IF_ERROR(g->createEvent(&e));
  }
  return Status::ok();
}

// The prefix of an error that surfaces after enqueue() returned.
static const char* const kEnqueuedRun = "a run issued by enqueue()";

Status Executable::Impl::orderAfterEnqueued() {
  // The host refills the input buffers the run before uploads from (and, when a copy of it
  // writes host memory, what that copy writes) only once those copies are done; on the
  // devices, every queue waits for every queue's end of the run before. No host wait for its
  // kernels.
  inFlight = false;
  TANDEM_RETURN_IF_ERROR(hostAfterRunEnd(Queue::HostToDevice).withContext(kEnqueuedRun));
  if (waitD2hBeforeInputs) TANDEM_RETURN_IF_ERROR(hostAfterRunEnd(Queue::DeviceToHost).withContext(kEnqueuedRun));
  for (Queue q : {Queue::Compute, Queue::HostToDevice, Queue::DeviceToHost})
    TANDEM_RETURN_IF_ERROR(queueAfterRunEnd(q, {Queue::Compute, Queue::HostToDevice, Queue::DeviceToHost}));
  return Status::ok();
}

Status Executable::Impl::recordRunEnd(std::initializer_list<Queue> qs) {
  for (size_t g = 0; g < gpus.size(); ++g)
    for (Queue r : qs) TANDEM_RETURN_IF_ERROR(gpus[g]->recordEvent(r, *runEnd[g][(int)r]));
  return Status::ok();
}

Status Executable::Impl::queueAfterRunEnd(Queue q, std::initializer_list<Queue> qs) {
  for (size_t g = 0; g < gpus.size(); ++g)
    for (size_t c = 0; c < gpus.size(); ++c)
      for (Queue r : qs)
        if (g != c || q != r) TANDEM_RETURN_IF_ERROR(gpus[g]->waitEvent(q, *runEnd[c][(int)r]));
  return Status::ok();
}

Status Executable::Impl::hostAfterRunEnd(Queue q) {
  for (size_t g = 0; g < gpus.size(); ++g) TANDEM_RETURN_IF_ERROR(gpus[g]->hostWait(*runEnd[g][(int)q]));
  return Status::ok();
}

Status Executable::Impl::settle() {
  // Waits for an enqueued run; every device is synchronised even when one reports an error.
  if (!inFlight) return Status::ok();
  inFlight = false;
  Status first;
  for (auto& b : backends) {
    Status st = b.second->synchronize();
    if (first.isOk() && !st.isOk()) first = st.withContext(kEnqueuedRun);
  }
  return first;
}

bool Executable::Impl::isPinnedInput(const Tensor& t) const {
  if (!t.raw()) return false;
  const char* at = static_cast<const char*>(t.raw());
  std::lock_guard<std::mutex> l(pinned->mu);
  auto it = pinned->live.upper_bound(at);
  if (it == pinned->live.begin()) return false;
  --it;
  return at + t.bytes() <= it->first + it->second;
}

Status Executable::Impl::acquire(RunContext** out) {
  {
    std::lock_guard<std::mutex> l(poolMu);
    if (!freeContexts.empty()) {
      *out = freeContexts.back();
      freeContexts.pop_back();
      return Status::ok();
    }
  }
  // Every context is in use by another run: this run gets arenas of its own (allocated outside
  // the lock, so runs that find a free context never wait for an allocation).
  std::unique_ptr<RunContext> rc;
  TANDEM_RETURN_IF_ERROR(newRunContext(&rc).withContext("a concurrent run's arenas"));
  bindSteps(*rc);
  *out = rc.get();
  std::lock_guard<std::mutex> l(poolMu);
  contexts.push_back(std::move(rc));
  // Room for every context on the free list, so that release() never allocates.
  freeContexts.reserve(contexts.size());
  return Status::ok();
}

void Executable::Impl::release(RunContext* rc) {
  std::lock_guard<std::mutex> l(poolMu);
  freeContexts.push_back(rc);
}

Status Executable::loadFile(const std::string& path, const LoadOptions& options,
                            std::unique_ptr<Executable>* out) {
  plan::Plan p;
  {
    std::string bytes;  // freed once parsed: the plan's constants are the only copy kept
    TANDEM_RETURN_IF_ERROR(readInputFile(path, &bytes, "plan file"));
    if (!p.ParseFromString(bytes)) return Status::error(path + ": not a valid Tandem plan (protobuf parse failed)");
  }
  // Constants kept in a shared weights file (tandem compile --weights) come in here, checked.
  TANDEM_RETURN_IF_ERROR(resolveExternalConstants(&p, path).withContext(path));
  return load(std::move(p), options, out).withContext(path);
}

int64_t Executable::constantBytes() const {
  int64_t n = 0;
  for (const Tensor& t : impl_->constants)
    if (t.defined() && t.raw()) n += t.bytes();
  return n;
}

const std::vector<std::string>& Executable::inputNames() const { return impl_->inputNames; }
const std::vector<TensorType>& Executable::inputTypes() const { return impl_->inputTypes; }
const std::vector<std::string>& Executable::outputNames() const { return impl_->outputNames; }
const std::vector<TensorType>& Executable::outputTypes() const { return impl_->outputTypes; }

const std::vector<std::string>& Executable::notes() const { return impl_->notes; }
int Executable::threads() const { return impl_->threads; }

TuningMode Executable::tuningMode() const { return impl_->tuningMode; }
const std::vector<StepTuning>& Executable::tuning() const { return impl_->tuning; }

Status Executable::recordStepTimes(const std::vector<double>& stepSeconds, int* recorded) {
  Impl& m = *impl_;
  if (recorded) *recorded = 0;
  if (stepSeconds.size() != m.kernels.size())
    return Status::error("recordStepTimes: " + std::to_string(stepSeconds.size()) +
                         " times for " + std::to_string(m.kernels.size()) + " steps");
  const TimingHost host{cpuModelName(), cpuEffectiveIsa()};
  const int cpuThreads = m.threads > 0 ? m.threads : availableCores();
  // The step's context as load() built it: the key must be the one the tuner and the placer use.
  std::map<std::string, std::vector<double>> times;
  std::map<std::string, std::string> impls;
  for (size_t si = 0; si < m.kernels.size(); ++si) {
    if (m.stepKind[si] != StepKind::Kernel || !m.stepBackend[si]->isHost() || !(stepSeconds[si] > 0))
      continue;
    const plan::Step& s = m.plan.steps((int)si);
    KernelContext ctx;
    ctx.opType = s.op_type();
    ctx.nodeName = s.name();
    ctx.attrs = &m.stepAttrs[si];
    ctx.fusedBody = s.has_fused_body() ? &s.fused_body() : nullptr;
    ctx.threads = cpuThreads;
    for (int id : s.inputs()) {
      bool absent = id < 0;
      ctx.inputTypes.push_back(absent ? TensorType{} : m.valueTypes[id]);
      ctx.constInputs.push_back(!absent && m.plan.values(id).kind() == plan::Value::CONSTANT
                                    ? &m.constants[id]
                                    : nullptr);
    }
    for (int id : s.outputs()) ctx.outputTypes.push_back(m.valueTypes[id]);
    std::string key = stepOpTimingKey(host, ctx);
    if (key.empty()) continue;
    times[key].push_back(stepSeconds[si]);
    impls[key] = m.stepImpl[si];
  }
  if (times.empty()) return Status::ok();
  std::string path = m.options.tuningCache.empty() ? defaultTimingCachePath() : m.options.tuningCache;
  if (path.empty())
    return Status::error("kernel timing cache: neither TANDEM_TUNING_CACHE, XDG_CACHE_HOME nor "
                         "HOME is set; the step times are not kept");
  TimingCache cache;
  std::string note;
  cache.load(path, &note);
  for (auto& [key, v] : times) {
    std::sort(v.begin(), v.end());
    OpTiming t;
    t.seconds = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    t.variant = impls[key];
    cache.putOp(key, t);
  }
  TANDEM_RETURN_IF_ERROR(cache.save(path));
  if (recorded) *recorded = (int)times.size();
  return Status::ok();
}

std::vector<std::string> Executable::stepImpls() const {
  return impl_->stepImpl;
}

namespace {
// Inputs in plan order, each of exactly its declared dtype and shape.
Status checkInputs(const std::vector<std::string>& names, const std::vector<TensorType>& types,
                   const std::vector<Tensor>& inputs) {
  if (inputs.size() != types.size())
    return Status::error("expected " + std::to_string(types.size()) + " inputs, got " +
                         std::to_string(inputs.size()));
  for (size_t i = 0; i < types.size(); ++i) {
    const Tensor& in = inputs[i];
    const TensorType& want = types[i];
    if (in.dtype() != want.dtype || in.shape() != want.shape)
      return Status::error("input '" + names[i] + "': expected " + dtypeName(want.dtype) +
                           shapeToString(want.shape) + ", got " + dtypeName(in.dtype()) +
                           shapeToString(in.shape()));
  }
  return Status::ok();
}
}  // namespace

Status Executable::run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs,
                       RunStats* stats, bool profile) {
  Impl& m = *impl_;
  auto t0 = Clock::now();
  // OpenMP's thread count is per calling thread: every caller gets the load's.
  if (m.threads > 0) omp_set_num_threads(m.threads);
  // 1. Inputs cross into the arena once, after their types are checked.
  TANDEM_RETURN_IF_ERROR(checkInputs(m.inputNames, m.inputTypes, inputs));
  if (stats) stats->steps.clear();
  if (stats) stats->start = t0;
  // 2. A run context of its own (a free one, or new arenas when all are in use); plans whose
  // queues are shared between runs take the executable for the whole run.
  std::unique_lock<std::mutex> serial(m.serialMu, std::defer_lock);
  if (m.serialRuns) serial.lock();
  RunContext* rc = nullptr;
  TANDEM_RETURN_IF_ERROR(m.acquire(&rc));
  Status st = runSteps(*rc, inputs, outputs, stats, profile, /*wait=*/true);
  m.release(rc);
  TANDEM_RETURN_IF_ERROR(st);
  if (stats) stats->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return Status::ok();
}

Status Executable::enqueue(const std::vector<Tensor>& inputs) {
  Impl& m = *impl_;
  if (!m.asyncCapable) {
    std::vector<Tensor> discarded;
    return run(inputs, &discarded);
  }
  if (m.threads > 0) omp_set_num_threads(m.threads);
  TANDEM_RETURN_IF_ERROR(checkInputs(m.inputNames, m.inputTypes, inputs));
  std::lock_guard<std::mutex> serial(m.serialMu);  // a GPU plan: serialRuns
  RunContext* rc = nullptr;
  TANDEM_RETURN_IF_ERROR(m.acquire(&rc));
  Status st = runSteps(*rc, inputs, nullptr, nullptr, false, /*wait=*/false);
  m.release(rc);
  return st;
}

Status Executable::synchronize() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> l(m.serialMu);
  return m.settle();
}

bool Executable::isAsynchronous() const { return impl_->asyncCapable; }

Status Executable::allocateInput(int index, Tensor* out) {
  Impl& m = *impl_;
  if (index < 0 || index >= (int)m.inputTypes.size())
    return Status::error("allocateInput: the plan has " + std::to_string(m.inputTypes.size()) +
                         " inputs, no input " + std::to_string(index));
  const TensorType& tt = m.inputTypes[index];
  const std::string what = "input '" + m.inputNames[index] + "'";
  // Read by a GPU straight from host memory: staged today, or a host slot only uploaded.
  if (!m.pinned->owner || (!m.inputStaging[index] && !m.inputOnlyUploaded[index]))
    return Tensor::tryAlloc(tt.dtype, tt.shape, what, out);
  const int64_t n = numElements(tt.shape);
  const size_t bytes = std::max<size_t>((size_t)std::max<int64_t>(n, 0) * dtypeSize(tt.dtype), 1);
  void* p = nullptr;
  TANDEM_RETURN_IF_ERROR(m.pinned->owner->allocateHost(bytes, &p)
                             .withContext("pinned host memory of " + std::to_string(bytes) + " bytes for " + what));
  std::memset(p, 0, bytes);
  std::shared_ptr<Impl::PinnedInputs> reg = m.pinned;
  {
    std::lock_guard<std::mutex> l(reg->mu);
    reg->live[static_cast<const char*>(p)] = bytes;
  }
  *out = Tensor::adopt(tt.dtype, tt.shape, std::shared_ptr<void>(p, [reg](void* q) {
    std::lock_guard<std::mutex> l(reg->mu);
    reg->live.erase(static_cast<const char*>(q));
    if (reg->owner) reg->owner->deallocateHost(q);
  }));
  return Status::ok();
}

Status Executable::runSteps(RunContext& rc, const std::vector<Tensor>& inputs,
                            std::vector<Tensor>* outputs, RunStats* stats, bool profile, bool wait) {
  // 1. Inputs: host slots by memcpy, or read in place from the caller's aligned buffer where
  //    only host steps read them (inputReadInPlace); GPU slots through pinned staging on the H2D queue, and each
  //    GPU's compute queue waits for its uploads (one event per device, no host sync).
  // 2. Steps in plan order on this thread: a step first waits for the events of the steps on
  //    other streams it depends on (on its own queue when both are of one family, host or
  //    CUDA; otherwise the host blocks on the recording backend), then runs (an inline CPU
  //    queue) or is enqueued on its stream (a worker CPU queue, a GPU kernel or copy), then
  //    records its event if a later step on another stream waits for it.
  // 3. Outputs: GPU outputs are copied back on the D2H queue once the queue that wrote each
  //    last has reached the end of the run, then the one synchronisation of the run, then the
  //    host copies.
  // Every exit, errors included, leaves the devices idle: the next run refills the pinned
  // staging buffers and the arenas, which copies still in flight would otherwise read or write.
  // Except an enqueued run (wait false, Executable::enqueue): it returns once its steps are
  // issued, its graph outputs are not copied back, and the next run is ordered after it
  // (orderAfterEnqueued).
  // An input in pinned memory of allocateInput() is uploaded straight from it: a GPU slot
  // without the staging copy, a host slot read only by uploads by viewing the caller's buffer
  // for this run (the view restored on exit).
  Impl& m = *impl_;
  const plan::Plan& p = m.plan;
  struct IdleOnExit {
    Impl& m;
    RunContext& rc;
    bool done = false;
    std::vector<std::pair<int, Tensor>> rebound;  // host input slots viewing the caller's buffer
    ~IdleOnExit() {
      for (auto& r : rebound) rc.values[r.first] = r.second;
      if (done) return;
      for (auto& b : m.backends) b.second->synchronize();
      m.inFlight = false;
    }
  } idleOnExit{m, rc};
  if (m.inFlight) TANDEM_RETURN_IF_ERROR(m.orderAfterEnqueued());
  bool fromCaller = false;  // an upload reads the caller's buffer
  for (int i = 0; i < p.inputs_size(); ++i) {
    const Tensor& in = inputs[i];
    Tensor& slot = rc.values[p.inputs(i)];
    const bool pinnedIn = (m.inputStaging[i] || m.inputOnlyUploaded[i]) && m.isPinnedInput(in);
    if (!m.inputStaging[i]) {
      const bool inPlace = m.inputReadInPlace[i] && in.bytes() &&
                           reinterpret_cast<uintptr_t>(in.raw()) % 64 == 0;
      if (pinnedIn || inPlace) {
        idleOnExit.rebound.push_back({p.inputs(i), slot});
        Tensor v = Tensor::view(slot.dtype(), slot.shape(), const_cast<void*>(in.raw()));
        v.setDevice(slot.device());
        slot = v;
        fromCaller = fromCaller || pinnedIn;
      } else if (in.bytes()) {
        std::memcpy(slot.raw(), in.raw(), in.bytes());
      }
      continue;
    }
    const void* src = in.raw();
    if (!pinnedIn) {
      if (in.bytes()) std::memcpy(m.inputStaging[i], in.raw(), in.bytes());
      src = m.inputStaging[i];
    }
    fromCaller = fromCaller || pinnedIn;
    TANDEM_RETURN_IF_ERROR(m.backends[slot.device()]->copyFromHost(slot.raw(), src, in.bytes())
                               .withContext("input '" + m.inputNames[i] + "'"));
  }
  {
    size_t e = 0;
    for (auto& b : m.backends) {
      if (b.second->isHost()) continue;
      Event& ev = *m.inputsUploaded[e++];
      TANDEM_RETURN_IF_ERROR(b.second->recordEvent(Queue::HostToDevice, ev));
      TANDEM_RETURN_IF_ERROR(b.second->waitEvent(Queue::Compute, ev));
      // Device-to-host copies may read inputs placed on the GPU too.
      TANDEM_RETURN_IF_ERROR(b.second->waitEvent(Queue::DeviceToHost, ev));
    }
  }
  for (size_t si = 0; si < m.kernels.size(); ++si) {
    const plan::Step& s = p.steps(si);
    auto label = [&] { return stepLabel(s, (int)si); };
    DeviceBackend* b = m.stepBackend[si];
    for (int d : m.crossDeps[si]) {
      DeviceBackend* from = m.stepBackend[d];
      Status st = from->isHost() == b->isHost() ? b->waitEvent(m.stepQueue[si], *m.stepEvent[d])
                                                : from->hostWait(*m.stepEvent[d]);
      if (!st.isOk()) return m.partlyUpdated(st.withContext(label()), (int)si);
    }
    auto s0 = Clock::now();
    const std::vector<const Tensor*>& ins = rc.stepInputs[si];
    const std::vector<Tensor*>& outs = rc.stepOutputs[si];
    const Tensor* in = ins.empty() ? nullptr : ins[0];
    Tensor* out = outs.empty() ? nullptr : outs[0];
    Status st;
    // Declared out here: a worker-queue backend runs the launched kernel until the synchronize
    // below, which a profiled run always reaches.
    std::vector<SubStepTiming> subSteps;
    ProfiledLaunch profiled(m.kernels[si].get(), &subSteps);
    if (!wait && m.skipWhenEnqueued[si]) {
      // A copy to the host that nothing reads: the output of an enqueued run is not wanted.
    } else switch (m.stepKind[si]) {
      case StepKind::Kernel:
      case StepKind::HostCopy:
        st = b->launch(profile ? static_cast<Kernel&>(profiled) : *m.kernels[si], ins, outs);
        break;
      case StepKind::CopyH2D: st = b->copyFromHost(out->raw(), in->raw(), in->bytes()); break;
      case StepKind::CopyD2H: st = b->copyToHost(out->raw(), in->raw(), in->bytes()); break;
      case StepKind::CopyD2D: st = b->copyOnDevice(Queue::Compute, out->raw(), in->raw(), in->bytes()); break;
    }
    if (st.isOk() && m.stepEvent[si]) st = b->recordEvent(m.stepQueue[si], *m.stepEvent[si]);
    // Profiling times each step to completion, which serialises the GPU: use it to find slow
    // steps, not to measure the whole run.
    if (st.isOk() && profile) st = b->synchronize();
    if (!st.isOk()) return m.partlyUpdated(st.withContext(label()), (int)si);
    if (profile && stats) {
      static const char* const kQueueNames[] = {"compute", "h2d", "d2h"};
      StepTiming t{s.name(), s.op_type(), s.device(), m.stepImpl[si],
                   std::chrono::duration<double>(Clock::now() - s0).count(),
                   std::chrono::duration<double>(s0 - stats->start).count(), b->device(),
                   kQueueNames[(int)m.stepQueue[si]]};
      for (const Tensor* x : ins)
        if (x) t.inputs.push_back({x->dtype(), x->shape()});
      for (const Tensor* x : outs) t.outputs.push_back({x->dtype(), x->shape()});
      t.subSteps = std::move(subSteps);
      stats->steps.push_back(std::move(t));
    }
  }
  if (!wait) {
    // Enqueued: the variables' copy-backs on each GPU's compute queue after every queue's
    // steps, the end events, and back to the caller once the uploads that read its buffers are
    // done. The devices are still busy: the next run orders itself after these events.
    Status st;
    if (!m.variables.empty()) {
      st = m.recordRunEnd({Queue::HostToDevice, Queue::DeviceToHost});
      if (st.isOk()) st = m.queueAfterRunEnd(Queue::Compute, {Queue::HostToDevice, Queue::DeviceToHost});
      if (st.isOk()) st = m.commitVariables(rc, /*wait=*/false);
    }
    if (st.isOk()) st = m.recordRunEnd({Queue::Compute, Queue::HostToDevice, Queue::DeviceToHost});
    if (!st.isOk()) return m.partlyUpdated(st, -1);
    m.inFlight = true;
    if (fromCaller) {
      st = m.hostAfterRunEnd(Queue::HostToDevice);
      if (!st.isOk()) return m.partlyUpdated(st.withContext("uploading the inputs"), -1);
    }
    idleOnExit.done = true;
    return Status::ok();
  }
  for (Impl::OutputFence& f : m.outputFences) {
    Status st = f.writer->recordEvent(f.queue, *f.event);
    if (st.isOk()) st = f.reader->waitEvent(Queue::DeviceToHost, *f.event);
    if (!st.isOk()) return m.partlyUpdated(st, -1);
  }
  for (int i = 0; i < p.outputs_size(); ++i) {
    if (!m.outputStaging[i]) continue;
    const Tensor& v = m.valueIn(rc, p.outputs(i));
    Status st = m.backends[v.device()]->copyToHost(m.outputStaging[i], v.raw(), v.bytes());
    if (!st.isOk()) return m.partlyUpdated(st.withContext("output '" + m.outputNames[i] + "'"), -1);
  }
  // Every device is synchronised even when one reports an error; the first error is the run's.
  Status synced;
  for (auto& b : m.backends) {
    Status st = b.second->synchronize();
    if (synced.isOk() && !st.isOk()) synced = st.withContext("end of run");
  }
  idleOnExit.done = true;
  if (!synced.isOk()) return m.partlyUpdated(synced, -1);
  if (!m.variables.empty()) TANDEM_RETURN_IF_ERROR(m.commitVariables(rc));
  outputs->clear();
  for (int i = 0; i < p.outputs_size(); ++i) {
    const Tensor& v = m.valueIn(rc, p.outputs(i));
    if (!m.outputStaging[i]) {
      // A DynamicRegion's result is already a buffer of this run's own (DynamicRegion.h).
      outputs->push_back(m.runTimeAllocated[p.outputs(i)] ? v : Tensor::copyOf(v));
      continue;
    }
    Tensor t = Tensor::alloc(v.dtype(), v.shape());
    if (v.bytes()) std::memcpy(t.raw(), m.outputStaging[i], v.bytes());
    outputs->push_back(t);
  }
  return Status::ok();
}

const std::vector<std::string>& Executable::variableNames() const { return impl_->variableNames; }
const std::vector<TensorType>& Executable::variableTypes() const { return impl_->variableTypes; }

Status Executable::readVariable(const std::string& name, Tensor* out) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> l(m.serialMu);
  const int k = m.variableIndex(name);
  if (k < 0) return Status::error("readVariable: the plan has no variable '" + name + "'");
  TANDEM_RETURN_IF_ERROR(m.settle());
  const Tensor& v = m.resident[m.variables[k]];
  Tensor t = Tensor::alloc(v.dtype(), v.shape());
  DeviceBackend* b = m.backends[v.device()].get();
  if (v.bytes()) TANDEM_RETURN_IF_ERROR(b->copyToHost(t.raw(), v.raw(), v.bytes()).withContext("variable '" + name + "'"));
  TANDEM_RETURN_IF_ERROR(b->synchronize().withContext("variable '" + name + "'"));
  *out = std::move(t);
  return Status::ok();
}

Status Executable::writeVariable(const std::string& name, const Tensor& value) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> l(m.serialMu);
  const int k = m.variableIndex(name);
  if (k < 0) return Status::error("writeVariable: the plan has no variable '" + name + "'");
  TANDEM_RETURN_IF_ERROR(m.settle());
  const TensorType& want = m.variableTypes[k];
  if (value.dtype() != want.dtype || value.shape() != want.shape)
    return Status::error("variable '" + name + "': expected " + dtypeName(want.dtype) +
                         shapeToString(want.shape) + ", got " + dtypeName(value.dtype()) +
                         shapeToString(value.shape()));
  Tensor& v = m.resident[m.variables[k]];
  DeviceBackend* b = m.backends[v.device()].get();
  if (v.bytes()) TANDEM_RETURN_IF_ERROR(b->copyFromHost(v.raw(), value.raw(), v.bytes()).withContext("variable '" + name + "'"));
  return b->synchronize().withContext("variable '" + name + "'");
}

std::vector<std::pair<std::string, size_t>> Executable::peakBytes() const {
  std::vector<std::pair<std::string, size_t>> r;
  for (auto& b : impl_->backends) r.push_back({b.first, b.second->peakBytes()});
  return r;
}

}  // namespace tandem
